"""Long-term memories in PostgreSQL: the same three parts a file home gives MemoryService — the entries (as
MemoryFiles), the change feed (as ChangeJournal; storage/pg_changes.py) and the per-id write locks (as IdLocks;
storage/pg_id_locks.py) — over one database, so the service runs unchanged over either.

- Entries: one row per memory (`memories`: id, category, the entry's JSON). A move between categories is an
  update of the row; there are no folders to settle or reconcile.
- Changes: a row per change in `changes`, inserted in commit order (pg.CHANGES_LOCK), read by sequence number. A
  position is (epoch, seq): the database's epoch changes only with a new database, which a replica's snapshot
  then no longer matches (a gap: it rebuilds from the rows).
- Locks: session advisory locks on a connection of their own, in 64 stripes per store, as the file home's.
"""

from __future__ import annotations

import contextlib
import logging
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from rockmem_mcp.errors import CorruptEntryError, StorageError
from rockmem_mcp.models import EntryLocation, MemoryEntry
from rockmem_mcp.search.vectors import STAMP_BYTES, vector_stamp
from rockmem_mcp.storage.pg import Database, redacted, shared_database
from rockmem_mcp.storage.pg_changes import STORE, ParsedRows, PgChangeFeed, append_changes
from rockmem_mcp.storage.pg_id_locks import PgIdLocks

log = logging.getLogger(__name__)


class PgMemoryRows:
    """MemoryFiles' interface over the `memories` table. `path_for` still names a file: the audit trail and its
    readers speak of items by path, and the path is the same on every replica."""

    on_disk = False

    def __init__(self, db: Database, memory_dir: Path, parsed: ParsedRows, locks: PgIdLocks | None = None) -> None:
        self.db = db
        self.locks = locks  # a write goes on the connection holding its ids' locks (PgIdLocks.writing)
        self.root = redacted(db.url)
        self._memory_dir = memory_dir
        self._warned: set[str] = set()
        self._parsed = parsed

    def _transaction(self, ids: list[str]) -> contextlib.AbstractContextManager[Any]:
        """A write's transaction: on the connection holding these ids' locks (PgIdLocks.writing)."""
        return self.locks.writing(ids) if self.locks is not None else self.db.transaction()

    def path_for(self, entry_id: str, category: str | None) -> Path:
        folder = self._memory_dir.joinpath(*category.split("/")) if category else self._memory_dir
        return folder / f"{entry_id}.json"

    @staticmethod
    def encode(entry: MemoryEntry) -> str:
        return entry.model_dump_json(exclude_none=True)

    def read(self, location: EntryLocation, fresh: bool = False) -> MemoryEntry:
        kept = None if fresh else self._parsed.get(location.entry_id)
        if kept is not None and kept[0] == location.category:
            return kept[1]
        rows = self.db.all("SELECT category, doc FROM memories WHERE id = %s", (location.entry_id,))
        if not rows or rows[0][0] != location.category:
            self._parsed.drop([location.entry_id])
            raise FileNotFoundError(f"memory {location.entry_id} is not in {location.category!r}")
        try:
            entry = MemoryEntry.model_validate_json(rows[0][1])
        except ValueError as exc:
            raise CorruptEntryError(f"memory {location.entry_id} in the store does not parse: {exc}") from None
        self._parsed.keep(entry)
        return entry

    def prefetch(self, entry_ids: list[str]) -> None:
        """Read the entries not kept yet in one query (a search's results), so each read after it is kept."""
        missing = [i for i in entry_ids if self._parsed.get(i) is None]
        if not missing:
            return
        for (doc,) in self.db.all("SELECT doc FROM memories WHERE id = ANY(%s)", (missing,)):
            try:
                self._parsed.keep(MemoryEntry.model_validate_json(doc))
            except ValueError:
                continue  # read alone, it is reported as it is met

    def exists(self, location: EntryLocation) -> bool:
        rows = self.db.all("SELECT category FROM memories WHERE id = %s", (location.entry_id,))
        return bool(rows) and rows[0][0] == location.category

    def true_category(self, location: EntryLocation, saved: str | None) -> str | None:
        return saved

    def case_twins(self, one: EntryLocation, other: EntryLocation) -> bool:
        return one == other

    def remove_moved(self, old: EntryLocation, new: EntryLocation) -> None:
        """Nothing: the row was updated in place (its id is the key)."""

    def warn_once(self, message: str) -> None:
        if message not in self._warned:
            self._warned.add(message)
            log.warning("%s", message)

    def check_folder(self, category: str | None) -> None:
        """Nothing: there are no folders to be links."""

    def write(self, entry: MemoryEntry) -> None:
        self.write_many([entry])

    def write_many(self, entries: Iterable[MemoryEntry]) -> int:
        """The rows and their change rows, in one transaction: another replica sees both or neither, whatever
        fails or crashes between (the service's own journal records for them are then redundant: see
        PgChangeFeed.append)."""
        written = list(entries)
        rows = [(e.id, e.category, self.encode(e)) for e in written]
        if rows:
            self._parsed.drop(e.id for e in written)  # whatever happens to the transaction
            with self._transaction([e.id for e in written]) as cursor:
                cursor.executemany(
                    "INSERT INTO memories (id, category, doc) VALUES (%s, %s, %s) "
                    "ON CONFLICT (id) DO UPDATE SET category = EXCLUDED.category, doc = EXCLUDED.doc",
                    rows,
                )
                changes = [{"s": STORE, "op": "put", "id": e.id, "c": e.category} for e in written]
                append_changes(cursor, self.db.writer_id, changes)
        return len(rows)

    def remove(self, location: EntryLocation) -> bool:
        self._parsed.drop([location.entry_id])
        with self._transaction([location.entry_id]) as cursor:
            cursor.execute(
                "DELETE FROM memories WHERE id = %s AND category IS NOT DISTINCT FROM %s",
                (location.entry_id, location.category),
            )
            removed = bool(cursor.rowcount)
            if removed:
                change = {"s": STORE, "op": "del", "id": location.entry_id, "c": location.category}
                append_changes(cursor, self.db.writer_id, [change])
            return removed

    def walk(self) -> list[EntryLocation]:
        return [EntryLocation(i, c) for i, c in self.db.all("SELECT id, category FROM memories ORDER BY id")]

    def listing(self) -> dict[str | None, set[str]]:
        found: dict[str | None, set[str]] = {}
        for entry_id, category in self.db.all("SELECT id, category FROM memories"):
            found.setdefault(category, set()).add(entry_id)
        return found

    def location(self, stem: str, category: str | None) -> EntryLocation | None:
        location = EntryLocation(stem, category)
        return location if self.exists(location) else None

    def stream(self, batch: int = 2_000) -> Iterator[MemoryEntry]:
        """Every entry, in id order, a batch of rows at a time (a replica's first index build)."""
        last = ""
        while True:
            rows = self.db.all("SELECT id, doc FROM memories WHERE id > %s ORDER BY id LIMIT %s", (last, batch))
            if not rows:
                return
            for entry_id, doc in rows:
                try:
                    yield MemoryEntry.model_validate_json(doc)
                except ValueError as exc:
                    self.warn_once(f"memory {entry_id} in the store does not parse ({exc}); it is left out")
            last = rows[-1][0]


class SharedSnapshots:
    """Index snapshots kept in the database, so a new replica loads one and replays the feed after it instead of
    building its index from every row. Kept in parts (a 1M-memory snapshot is over PostgreSQL's 1 GB value limit
    as one); a snapshot is replaced, all its parts in one transaction, only by one further along the feed."""

    PART_BYTES = 32 << 20

    def __init__(self, db: Database) -> None:
        self.db = db

    def put(self, name: str, seq: int, data: bytes) -> bool:
        parts = [data[i : i + self.PART_BYTES] for i in range(0, len(data), self.PART_BYTES)] or [b""]
        with self.db.transaction() as cursor:
            # One writer a name and tenant.
            cursor.execute(
                "SELECT pg_advisory_xact_lock(%s, hashtext(current_schema()))", (zlib.crc32(name.encode()) - (1 << 31),)
            )
            cursor.execute("SELECT max(seq) FROM snapshots WHERE name = %s", (name,))
            (kept,) = cursor.fetchone()
            if kept is not None and kept >= seq:
                return False
            cursor.execute("DELETE FROM snapshots WHERE name = %s", (name,))
            cursor.executemany(
                "INSERT INTO snapshots (name, part, seq, data) VALUES (%s, %s, %s, %s)",
                [(name, n, seq, part) for n, part in enumerate(parts)],
            )
            return True

    def get(self, name: str) -> bytes | None:
        rows = self.db.all("SELECT data FROM snapshots WHERE name = %s ORDER BY part", (name,))
        return b"".join(bytes(row[0]) for row in rows) if rows else None


class PgVectorRows:
    """VectorFiles' interface over the `vectors` table (bytea: the same stamp and float32 bytes as a `.bin` file,
    no extension needed), so a memory is embedded once for every replica; each replica keeps the vectors it uses
    in its own index and snapshot. The model record is in `rockmem_meta`: replicas must share one model (another
    model's vectors are dropped, as a file home's cache is)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def read(self, entry_id: str, text: str, dim: int) -> np.ndarray | None:
        rows = self.db.all("SELECT data FROM vectors WHERE id = %s", (entry_id,))
        if not rows:
            return None
        data = bytes(rows[0][0])
        if len(data) != STAMP_BYTES + 4 * dim or data[:STAMP_BYTES] != vector_stamp(text, data[STAMP_BYTES:]):
            return None
        return np.frombuffer(data, dtype=np.float32, offset=STAMP_BYTES)

    def write(self, entry_id: str, text: str, vector: np.ndarray) -> None:
        data = np.ascontiguousarray(vector, dtype=np.float32).tobytes()
        try:
            with self.db.transaction() as cursor:
                cursor.execute(
                    "INSERT INTO vectors (id, data) VALUES (%s, %s)"
                    " ON CONFLICT (id) DO UPDATE SET data = EXCLUDED.data",
                    (entry_id, vector_stamp(text, data) + data),
                )
        except StorageError as exc:  # a cache: a vector not kept is made again later, nothing else
            log.debug("could not keep the vector of %s: %s", entry_id, exc)

    def remove(self, entry_id: str) -> None:
        with contextlib.suppress(StorageError), self.db.transaction() as cursor:
            cursor.execute("DELETE FROM vectors WHERE id = %s", (entry_id,))

    def record(self) -> tuple[str, int] | None:
        rows = self.db.all("SELECT value FROM rockmem_meta WHERE key = 'vector_model'")
        if not rows:
            return None
        model, _, dim = rows[0][0].rpartition(":")
        return model, int(dim)

    def adopt(self, model_id: str, dim: int) -> None:
        if self.record() == (model_id, dim):
            return
        with self.db.transaction() as cursor:
            cursor.execute("DELETE FROM vectors")
            cursor.execute(
                "INSERT INTO rockmem_meta (key, value) VALUES ('vector_model', %s) "
                "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
                (f"{model_id}:{dim}",),
            )
        log.warning("embedding model of the store is now %s (%d dims): its kept vectors were dropped", model_id, dim)


def open_memory_store(
    url: str, memory_dir: Path, schema: str | None = None
) -> tuple[PgMemoryRows, PgChangeFeed, PgIdLocks, SharedSnapshots, PgVectorRows]:
    db = Database(url, schema)
    parsed = ParsedRows()
    vectors = PgVectorRows(shared_database(url, "vectors", schema))  # the vector worker's thread: its own connection
    # The locks take a connection of their own from the same address (held across the caller's queries).
    locks = PgIdLocks(db, "memory")
    return (PgMemoryRows(db, memory_dir, parsed, locks), PgChangeFeed(db, parsed), locks, SharedSnapshots(db), vectors)
