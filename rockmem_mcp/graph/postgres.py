"""The knowledge graph in PostgreSQL: GraphFiles' interface over the `graph_records` table (one row per entity or
triple, its JSON as the file would hold it), so every replica shares one graph and GraphService runs unchanged.

A change (puts and removals of both kinds) is one transaction with its change rows (`{"s": "graph", ...}` in
`changes`, as memory/postgres.py writes memories'), so another replica sees all of a merge or none of it. Each replica
keeps its own in-memory adjacency index and follows the others through that feed. The graph's write lock, held
across a change's read-modify-write, is a session advisory lock on a connection of its own (PgIdLocks).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Generic

from pydantic import ValidationError

from rockmem_mcp.graph.files import Record, RecordFiles
from rockmem_mcp.graph.shapes import Entity, Triple
from rockmem_mcp.models import validate_entry_id
from rockmem_mcp.storage.pg import Database
from rockmem_mcp.storage.pg_changes import ParsedRows, PgChangeFeed, append_changes
from rockmem_mcp.storage.pg_id_locks import PgIdLocks

STORE = "graph"  # the records' store name, as GraphService journals them
ENTITY, TRIPLE = "e", "t"  # a row's kind, as in the journal records


class PgRecordRows(Generic[Record]):
    """RecordFiles' reading interface over one kind of `graph_records` row. `path` still names a file: audit lines
    speak of records by path, the same on every replica."""

    on_disk = False

    def __init__(self, db: Database, kind: str, directory: Path, model: type[Record]) -> None:
        self.db, self.kind, self.model = db, kind, model
        self._paths = RecordFiles(directory, model)  # names and warnings only: nothing is written there
        self.directory = directory

    def path(self, record_id: str) -> Path:
        return self._paths.path(record_id)

    def read(self, record_id: str) -> Record | None:
        rows = self.db.all(
            "SELECT doc FROM graph_records WHERE kind = %s AND id = %s", (self.kind, validate_entry_id(record_id))
        )
        return self._parsed(record_id, rows[0][0]) if rows else None

    def read_all(self) -> list[Record]:
        rows = self.db.all("SELECT id, doc FROM graph_records WHERE kind = %s", (self.kind,))
        return [record for record_id, doc in rows if (record := self._parsed(record_id, doc)) is not None]

    def ids(self) -> list[str]:
        return [row[0] for row in self.db.all("SELECT id FROM graph_records WHERE kind = %s", (self.kind,))]

    def stems(self) -> set[str]:
        return set(self.ids())

    def written_since(self, since_ns: int) -> set[str]:
        """None: every write comes with its change row, so nothing changes behind the feed."""
        return set()

    def _parsed(self, record_id: str, doc: str) -> Record | None:
        try:
            record = self.model.model_validate_json(doc)
        except (ValidationError, ValueError) as exc:
            self._paths._warn(f"{self.model.__name__.lower()} {record_id} in the store does not parse ({exc}); skipped")
            return None
        return record if record.id == record_id else record.model_copy(update={"id": record_id})


class PgGraphRows:
    """GraphFiles over the database: the two kinds of rows, and a change written as one transaction."""

    on_disk = False

    def __init__(self, db: Database, root: Path, lock: PgIdLocks | None = None) -> None:
        self.db = db
        self.lock = lock  # the graph's write lock: a change is written on its connection (PgIdLocks.writing)
        self.root = root
        self.entities = PgRecordRows(db, ENTITY, root / "entities", Entity)
        self.triples = PgRecordRows(db, TRIPLE, root / "triples", Triple)

    def write_change(
        self,
        entities: Iterable[Entity],
        triples: Iterable[Triple],
        removed_triples: Iterable[str] = (),
        removed_entities: Iterable[str] = (),
    ) -> None:
        puts = [(ENTITY, e.id, RecordFiles.encode(e).decode()) for e in entities]
        puts += [(TRIPLE, t.id, RecordFiles.encode(t).decode()) for t in triples]
        removals = [(TRIPLE, i) for i in removed_triples] + [(ENTITY, i) for i in removed_entities]
        if not puts and not removals:
            return
        # On the connection holding the graph's lock (PgIdLocks.writing): lost with it, never applied after it.
        with self.lock.writing([STORE]) if self.lock is not None else self.db.transaction() as cursor:
            if puts:
                cursor.executemany(
                    "INSERT INTO graph_records (kind, id, doc) VALUES (%s, %s, %s)"
                    " ON CONFLICT (kind, id) DO UPDATE SET doc = EXCLUDED.doc",
                    puts,
                )
            if removals:
                cursor.executemany("DELETE FROM graph_records WHERE kind = %s AND id = %s", removals)
            changes = [{"s": STORE, "k": kind, "id": record_id} for kind, record_id, *_ in (*puts, *removals)]
            append_changes(cursor, self.db.writer_id, changes)


def open_graph_store(
    url: str, graph_dir: Path, schema: str | None = None
) -> tuple[PgGraphRows, PgChangeFeed, PgIdLocks]:
    """The rows, the feed (only the graph's changes) and the store-wide write lock of a database's graph."""
    db = Database(url, schema)  # its own writer id: a replica skips only its own change rows
    lock = PgIdLocks(db, STORE)
    return PgGraphRows(db, graph_dir, lock), PgChangeFeed(db, ParsedRows(0), store=STORE), lock
