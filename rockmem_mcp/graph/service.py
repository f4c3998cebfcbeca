"""The knowledge graph: entities and triples, name and alias resolution, breadth-first traversal.

Files under knowledge-graph/ are the truth; this service keeps an in-memory adjacency index over them,
changed incrementally by its own writes and by the change journal (index/graph/) that tells it what other
processes on the home wrote. Every change happens under an exclusive file lock after catching up with the
journal, so two processes never create twins of one name or two copies of one triple.

Names resolve case-insensitively through names and aliases; a name already taken resolves to its entity.
Predicates are snake_case; any is accepted, and one outside the relation vocabulary (graph/relations.py)
but close to it gets a hint in the reply. `A --supersedes--> B` marks every other triple touching B as
superseded by A (`Fact.superseded_by`), last within its hop and last in recall. Confidence is clamped to
0..1. Deleting an entity deletes its triples; merging re-points the merged entity's triples to the kept one
and folds the duplicates that makes.

Salience (search/salience.py), as for memories: entities and triples carry uses (reinforcement_count, last_seen_at)
and are reinforced on use through the memory store's Reinforcer (one access log per process; reinforcement never
rewrites a record's file). Uses: an entity returned by get_entity, found by find_entities with a query, named in
a recall message or in a newly saved memory (matched off the save path, `NewEntries`), or linked by an added
triple; a triple injected by recall, returned by traverse_graph or added again. base: 0.7 for an entity (what an
agent adds on its own), 0.7 x confidence for a triple (a fact the agent is less sure of fades sooner); type
weight semantic. Recall prefers the more salient facts within a hop (nearest hop first, as before).
"""

from __future__ import annotations

import contextlib
import difflib
import heapq
import logging
import math
import os
import queue
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from rockmem_mcp.audit.log import AuditLine
from rockmem_mcp.audit.service import Audit, quoted
from rockmem_mcp.config import Settings
from rockmem_mcp.errors import InvalidInputError, NotFoundError, StorageError
from rockmem_mcp.graph.files import GraphFiles, read_snapshot, write_snapshot
from rockmem_mcp.graph.relations import SUPERSEDES, hint
from rockmem_mcp.graph.shapes import (
    EntitiesAdded,
    EntitiesMerged,
    Entity,
    EntityAdded,
    EntityDeleted,
    EntityDetail,
    EntityHit,
    EntitySearch,
    Fact,
    Traversal,
    Triple,
    TripleAdded,
    TripleDeleted,
    TriplesAdded,
    normalize_entity_type,
    normalize_predicate,
)
from rockmem_mcp.models import (
    MemoryEntry,
    check_metadata,
    check_text,
    mention_key,
    message_words,
    name_key,
    new_entry_id,
    normalize_name,
    utc_now,
    validate_entry_id,
)
from rockmem_mcp.reinforcement import ENTITY, TRIPLE, Reinforcer, open_access_log
from rockmem_mcp.search.bm25 import BM25Index
from rockmem_mcp.search.rank import Ranking, rank
from rockmem_mcp.search.salience import BASE_AGENT, TYPE_WEIGHTS, salience, salience_of, tier
from rockmem_mcp.search.tokenizer import tokenize
from rockmem_mcp.storage.access_log import Access, uses_of, with_uses
from rockmem_mcp.storage.changes import ChangeJournal
from rockmem_mcp.storage.edited_files import held
from rockmem_mcp.storage.home_claim import HomeClaim
from rockmem_mcp.storage.no_follow import refuse_linked_store_folders
from rockmem_mcp.storage.pg import is_database_url

if TYPE_CHECKING:
    from rockmem_mcp.graph.postgres import PgGraphRows
    from rockmem_mcp.storage.pg_changes import PgChangeFeed
    from rockmem_mcp.storage.pg_id_locks import PgIdLocks


log = logging.getLogger(__name__)

STORE = "graph"
SNAPSHOT_NAME = "graph-snapshot.jsonl"
MAX_ITEMS = 1000  # entities or triples per call
MAX_SOURCE_CHARS = 1000  # a triple's source: who or what said so
MIN_MENTION_CHARS = 3  # recall skips names shorter than this ("AI", "Go")
MAX_MENTION_WORDS = 8
ENTITY_BASE = BASE_AGENT  # salience base of an entity; a triple's is this x its confidence
GRAPH_TYPE_WEIGHT = TYPE_WEIGHTS["semantic"]
SMALL_BATCH = 64  # salience of up to this many records is computed in plain Python
RECALL_CANDIDATES = 500  # recall weighs by salience at most this many of an entity's best-confidence triples
MAX_PENDING_TEXTS = 1000  # new memories waiting to be matched; beyond, the newest are dropped (a lost use)

Record = TypeVar("Record", Entity, Triple)


class NewEntries:
    """Texts of newly saved memories, waiting for the graph to reinforce the entities they name: the save only
    queues the text (`saved`, a MemoryService save listener); the graph's own thread matches it. Bounded, so
    a graph that is slow to open (or never opens) costs no more than `MAX_PENDING_TEXTS` texts."""

    def __init__(self, limit: int = MAX_PENDING_TEXTS) -> None:
        self.queue: queue.Queue[str | None] = queue.Queue(limit)

    def saved(self, entry: MemoryEntry) -> None:
        with contextlib.suppress(queue.Full):
            self.queue.put_nowait(entry.content)

    def wait(self) -> None:
        """Until every queued text has been matched (tests, and nothing else, need to know)."""
        self.queue.join()


class GraphService:
    def __init__(
        self,
        settings: Settings,
        clock: Callable[[], datetime] = utc_now,
        reinforcer: Reinforcer | None = None,
        new_entries: NewEntries | None = None,
    ) -> None:
        """`reinforcer`: the memory store's (one per process); without one (a graph opened alone) the graph
        opens its own and writes it at close. `new_entries`: saved memories whose texts link entities."""
        self.settings = settings
        refuse_linked_store_folders(settings.store_dirs)  # also when opened without a memory store (CLI)
        self._claim = HomeClaim(settings.home)  # the home is in use (doctor --fix waits for it to close)
        self.shared = is_database_url(settings.store)  # the graph in a database several replicas share
        self.files: GraphFiles | PgGraphRows
        self.journal: ChangeJournal | PgChangeFeed
        self._shared_lock: PgIdLocks | None = None
        if self.shared:
            from rockmem_mcp.graph.postgres import open_graph_store  # psycopg only where a database is named

            self.files, self.journal, self._shared_lock = open_graph_store(
                str(settings.store), settings.graph_dir, settings.store_schema
            )
        else:
            self.files = GraphFiles(settings.graph_dir)
            self.journal = ChangeJournal(settings.index_dir / "graph")
        self.audit = Audit(settings)  # stamped by the wall clock: a store's own clock is its records' time
        self._clock = clock
        self._lock = threading.RLock()
        self._lock_path = settings.graph_dir / ".lock"
        self._changes_since_snapshot = 0
        with self._lock:
            self._load()
        self._owns_reinforcer = reinforcer is None
        self.reinforcer = reinforcer or Reinforcer(settings, open_access_log(settings), clock)
        self.new_entries = new_entries
        self._linker: threading.Thread | None = None
        if new_entries is not None:
            self._linker = threading.Thread(target=self._link_new_entries, name="rockmem-graph-links", daemon=True)
            self._linker.start()

    def close(self) -> None:
        """Write a fresh snapshot if anything changed since the last one, then let go of the journal."""
        if self._linker is not None and self.new_entries is not None:
            self.new_entries.queue.put(None)  # after the texts already queued
            self._linker.join()
        if self._owns_reinforcer:
            self.reinforcer.close()
        try:
            if self._changes_since_snapshot:
                self.write_snapshot()
        except (OSError, StorageError) as exc:  # derived data: the next start reads the files (or rows) instead
            log.warning("could not write the graph snapshot (%s)", exc)
        finally:
            self.journal.close()
            if self._shared_lock is not None:
                self._shared_lock.close()
            self._claim.close()

    # ------------------------------------------------------------------ in-memory index
    def _load(self) -> None:
        """Fill the index from the snapshot plus the journal since it when they are usable, else from the
        files; then reconcile with the folder listings (records added or removed outside the journal)."""
        self.entities: dict[str, Entity] = {}
        self.triples: dict[str, Triple] = {}
        self._names: dict[str, str] = {}  # name_key of a name or alias -> entity id
        self._mentions: dict[str, set[str]] = {}  # mention_key -> entity ids (recall's whole-word match)
        self._edges: dict[str, set[str]] = {}  # entity id -> ids of triples touching it (either end)
        self._by_spo: dict[tuple[str, str, str], str] = {}
        self._ranked: dict[str, list[Triple]] = {}  # entity id -> its triples best first (built on demand)
        self._superseders: dict[str, set[str]] = {}  # entity id -> ids of the `X supersedes it` triples
        # Words of entity names, aliases, type and metadata, for find_entities: built on its first use, as
        # stemming 10k+ unusual names costs seconds a start should not pay.
        self._text: BM25Index | None = None
        self._position = self.journal.end()
        try:
            snapshot_ns = os.stat(self._snapshot_path).st_mtime_ns  # before reading: a later rewrite is newer
        except OSError:
            snapshot_ns = 0
        snapshot = read_snapshot(self._snapshot_path)
        since = self.journal.read_since(snapshot.position) if snapshot else None
        if snapshot is None or since is None or since.gap:
            entities, triples = self.files.entities.read_all(), self.files.triples.read_all()
            self._changes_since_snapshot = len(entities) + len(triples)  # worth a snapshot at close
        else:
            entities, triples = snapshot.entities, snapshot.triples
        for entity in entities:
            self._index_entity(entity)
        for triple in triples:
            self._index_triple(triple)
        if snapshot is not None and since is not None and not since.gap:
            self._position = snapshot.position
            self._sync()
            if self.files.on_disk:  # rows change only with their change rows: nothing to reconcile
                self._reconcile(snapshot_ns)

    def _reconcile(self, since_ns: int) -> None:
        """Re-read records whose files appeared, vanished or were rewritten without a journal record (by hand,
        or by a process that died between a file's write and its journal record): one directory listing per
        folder, and a stat per file only in a folder written to since the snapshot (`since_ns`)."""
        stray = _Changes()
        for files, known, ids in (
            (self.files.entities, self.entities, stray.removed_entities),
            (self.files.triples, self.triples, stray.removed_triples),
        ):
            ids.update(i for i in files.stems().symmetric_difference(known) if _is_record_id(i))
            ids.update(i for i in files.written_since(since_ns) if i in known)
        if stray.entity_ids() or stray.triple_ids():
            log.info("graph snapshot: re-reading %d records changed outside the journal", len(stray.entity_ids()))
            self._reread(stray)
            self._changes_since_snapshot += 1

    @property
    def _snapshot_path(self) -> Path:
        return self.settings.index_dir / SNAPSHOT_NAME

    def write_snapshot(self) -> None:
        """Persist every record and the journal position it reflects, so a start skips reading each file;
        rotates a long journal (generations before the previous one are dropped)."""
        with self._lock:
            self._sync()
            if self.journal.end().offset > self.settings.journal_rotate_bytes:
                self.journal.rotate()
                self._sync()
            write_snapshot(self._snapshot_path, self._position, self.entities.values(), self.triples.values())
            self._changes_since_snapshot = 0

    def _index_entity(self, entity: Entity) -> None:
        self._unindex_entity(entity.id)
        self.entities[entity.id] = entity
        for label in (entity.name, *entity.aliases):
            self._names.setdefault(name_key(label), entity.id)
            words = mention_key(label)
            if len(words.replace(" ", "")) >= MIN_MENTION_CHARS:
                self._mentions.setdefault(words, set()).add(entity.id)
        if self._text is not None:
            self._text.add(entity.id, tokenize(_entity_document(entity)))

    def _unindex_entity(self, entity_id: str) -> None:
        old = self.entities.pop(entity_id, None)
        if old is None:
            return
        for label in (old.name, *old.aliases):
            if self._names.get(key := name_key(label)) == entity_id:
                del self._names[key]
            ids = self._mentions.get(words := mention_key(label))
            if ids is not None:
                ids.discard(entity_id)
                if not ids:
                    del self._mentions[words]
        if self._text is not None:
            self._text.remove(entity_id)

    def _index_triple(self, triple: Triple) -> None:
        self._unindex_triple(triple.id)
        self.triples[triple.id] = triple
        self._ranked.pop(triple.subject, None)
        self._ranked.pop(triple.object, None)
        self._edges.setdefault(triple.subject, set()).add(triple.id)
        self._edges.setdefault(triple.object, set()).add(triple.id)
        self._by_spo.setdefault((triple.subject, triple.predicate, triple.object), triple.id)
        if triple.predicate == SUPERSEDES:
            self._superseders.setdefault(triple.object, set()).add(triple.id)

    def _unindex_triple(self, triple_id: str) -> None:
        old = self.triples.pop(triple_id, None)
        if old is None:
            return
        for end in (old.subject, old.object):
            self._ranked.pop(end, None)
            edges = self._edges.get(end)
            if edges is not None:
                edges.discard(triple_id)
                if not edges:
                    del self._edges[end]
        if self._by_spo.get(spo := (old.subject, old.predicate, old.object)) == triple_id:
            del self._by_spo[spo]
        if (superseders := self._superseders.get(old.object)) is not None and triple_id in superseders:
            superseders.discard(triple_id)
            if not superseders:
                del self._superseders[old.object]

    # ------------------------------------------------------------------ between processes
    def _sync(self) -> None:
        """Apply what other processes wrote since the last call (caller holds the lock)."""
        read = self.journal.read_since(self._position)
        if read.gap:
            log.info("fell behind the graph change journal; reloading the graph")
            self._position = read.position
            self._load()
            return
        changed = _Changes()
        for record in read.records:
            record_id = record.get("id")
            if record.get("s") != STORE or not _is_record_id(record_id):
                continue
            (changed.removed_entities if record.get("k") == "e" else changed.removed_triples).add(record_id)
        self._reread(changed)
        self._position = read.position
        self._changes_since_snapshot += len(read.records)

    def reread_files(self, entity_ids: Iterable[str], triple_ids: Iterable[str]) -> None:
        """Bring the graph (and, through the journal, every other process's) in line with entity and triple
        files put back or removed behind the service (a revert)."""
        changed = _Changes()
        changed.removed_entities.update(i for i in entity_ids if _is_record_id(i))
        changed.removed_triples.update(i for i in triple_ids if _is_record_id(i))
        with self._lock:
            self._sync()
            self._reread(changed)
            self._journal(changed)

    @contextlib.contextmanager
    def _reading(self) -> Iterator[None]:
        with self._lock:
            self._sync()
            yield

    @contextlib.contextmanager
    def _changing(self) -> Iterator[_Changes]:
        """Hold the graph's file lock, catch up, collect changes, then write files and journal them.

        The body changes the in-memory index as it goes; if it fails (bad input found part-way) or a file
        write fails, every record it touched is re-read from its file, so memory matches the disk again.
        """
        with self._lock, self._store_locked():
            self._sync()
            changes = _Changes()
            try:
                yield changes
                before = self._on_disk(changes) if self.audit.enabled else None
                changes.writing = True
                self._write(changes)
                if before is not None:  # the last step: a change whose lines cannot be written is undone
                    lines = list(self._audit_lines(changes, before))
                    self.audit.record_many(lines, undo=lambda: self._put_back(changes, before))
            except BaseException:
                self._reread(changes)
                raise
            finally:
                if changes.writing:
                    self._journal(changes)

    @contextlib.contextmanager
    def _store_locked(self) -> Iterator[None]:
        """The graph's write lock across processes: an advisory lock on a database store, else a file lock."""
        if self._shared_lock is not None:
            with self._shared_lock.hold([STORE]):
                yield
            return
        with held(self._lock_path):
            yield

    def _write(self, changes: _Changes) -> None:
        """Files are the truth: puts, then removals of triples before their entities."""
        # A record's file carries its uses as known when it is written (reinforcement alone never writes it);
        # the index holds what the file does (only the uses differ: no name or edge moves).
        for entity_id, entity in changes.entities.items():
            changes.entities[entity_id] = self.entities[entity_id] = self._with_uses(ENTITY, entity)
        for triple_id, triple in changes.triples.items():
            if (with_uses := self._with_uses(TRIPLE, triple)) is not triple:
                changes.triples[triple_id] = with_uses
                self._index_triple(with_uses)
        self.files.write_change(
            changes.entities.values(), changes.triples.values(), changes.removed_triples, changes.removed_entities
        )

    def _on_disk(self, changes: _Changes) -> _Before:
        """The records a change touches as their files hold them before it (None: no file): what its audit
        lines compare against, and what its undo puts back."""
        return _Before(
            {i: self.files.entities.read(i) for i in changes.entity_ids()},
            {i: self.files.triples.read(i) for i in changes.triple_ids()},
        )

    def _put_back(self, changes: _Changes, before: _Before) -> None:
        """Undo a written change: files as `before` holds them (the caller re-reads them into the index)."""
        self.files.write_change(
            (e for e in before.entities.values() if e is not None),
            (t for t in before.triples.values() if t is not None),
            [i for i in changes.triple_ids() if before.triples.get(i) is None],
            [i for i in changes.entity_ids() if before.entities.get(i) is None],
        )

    def _audit_lines(self, changes: _Changes, before: _Before) -> Iterator[AuditLine]:
        """One line per record file the change created, edited or removed (a rewrite that only carried uses
        is not one: reinforcement is not audited)."""
        note = f"; {changes.note}" if changes.note else ""

        def name(entity_id: str) -> str:
            entity = self.entities.get(entity_id) or before.entities.get(entity_id)
            return quoted(entity.name, 40) if entity is not None else entity_id

        def fact(triple: Triple) -> str:
            return f"{name(triple.subject)} --{triple.predicate}--> {name(triple.object)}"

        for entity_id, entity in changes.entities.items():
            old = before.entities.get(entity_id)
            path = self.files.entities.path(entity_id)
            if entity_id in changes.merged:
                yield self.audit.line("MERGE", path, changes.merged[entity_id])
            elif old is None:
                what = f"entity {quoted(entity.name)} ({entity.type}){note}"
                yield self.audit.line(changes.put_action or "CREATE", path, what)
            elif fields := _changed_fields(old, entity):
                yield self.audit.line("EDIT", path, f"entity {quoted(entity.name)}: {', '.join(fields)}{note}")
        for triple_id, triple in changes.triples.items():
            old_triple = before.triples.get(triple_id)
            path = self.files.triples.path(triple_id)
            if old_triple is None:
                what = f"{fact(triple)} (confidence {triple.confidence:g}){note}"
                yield self.audit.line(changes.put_action or "CREATE", path, what)
            elif fields := _changed_fields(old_triple, triple):
                yield self.audit.line("EDIT", path, f"{fact(triple)}: {', '.join(fields)}{note}")
        for triple_id in changes.removed_triples:
            if (old_triple := before.triples.get(triple_id)) is not None:
                yield self.audit.line(changes.removal, self.files.triples.path(triple_id), f"{fact(old_triple)}{note}")
        for entity_id in changes.removed_entities:
            if (old := before.entities.get(entity_id)) is not None:
                path = self.files.entities.path(entity_id)
                yield self.audit.line(changes.removal, path, f"entity {quoted(old.name)}{note}")

    def _journal(self, changes: _Changes) -> None:
        records = [{"s": STORE, "k": "e", "id": i} for i in changes.entity_ids()]
        records += [{"s": STORE, "k": "t", "id": i} for i in changes.triple_ids()]
        if records:
            self.journal.append(records)
            self._position = self.journal.end()  # our own records are already applied
            self._changes_since_snapshot += len(records)

    def _reread(self, changes: _Changes) -> None:
        """Bring these records in line with their files. Everything is unindexed before anything is indexed
        again: a name or a (subject, predicate, object) may have moved from one record to another."""
        entities = [(i, self.files.entities.read(i)) for i in changes.entity_ids()]
        triples = [(i, self.files.triples.read(i)) for i in changes.triple_ids()]
        for entity_id, _ in entities:
            self._unindex_entity(entity_id)
        for triple_id, _ in triples:
            self._unindex_triple(triple_id)
        for _, entity in entities:
            if entity is not None:
                self._index_entity(entity)
        for _, triple in triples:
            if triple is not None:
                self._index_triple(triple)

    # ------------------------------------------------------------------ resolution
    def resolve(self, name_or_id: str) -> Entity:
        """The entity named (name or alias, any case) or with this id."""
        with self._reading():
            return self._resolve(name_or_id)

    def _resolve(self, name_or_id: Any) -> Entity:
        if isinstance(name_or_id, str):
            if (entity := self.entities.get(name_or_id)) is not None:
                return entity
            if (entity_id := self._names.get(name_key(name_or_id))) is not None:
                return self.entities[entity_id]
        raise NotFoundError(
            f"no entity named {str(name_or_id)[:100]!r} (names and aliases match in any case); "
            "graph find lists what exists, graph add creates one"
        )

    def near_names(self, label: str, limit: int = 5) -> list[str]:
        """Names of the entities whose name or alias is spelt most like `label` (difflib, any case, among names
        of about its length with its first letter: a typo rarely changes either, and 100k names cost no
        more than a pass over them), then those that find_entities ranks for it: what to offer when `label`
        names nothing."""
        wanted = name_key(label)
        with self._reading():
            alike = [k for k in self._names if k[:1] == wanted[:1] and abs(len(k) - len(wanted)) <= 3]
            close = difflib.get_close_matches(wanted, alike, n=limit, cutoff=0.6)
            found = [self.entities[self._names[key]] for key in close]
            with contextlib.suppress(InvalidInputError):  # a label too long to be a query
                found += [e for _, e in self._find_entities(label, None, limit)[0]]
            return list(dict.fromkeys(e.name for e in found))[:limit]

    def names_starting(self, prefix: str, limit: int) -> tuple[list[str], int]:
        """Entity names (and aliases) that begin with `prefix` in any case, shortest first, at most `limit`, and
        how many there are: what a client offers as a user types a name."""
        wanted = name_key(prefix)
        with self._reading():
            found = sorted(
                {
                    label
                    for e in self.entities.values()
                    for label in (e.name, *e.aliases)
                    if name_key(label).startswith(wanted)
                },
                key=lambda label: (len(label), label),
            )
        return found[:limit], len(found)

    def _find_name(self, label: str) -> Entity | None:
        entity_id = self._names.get(name_key(label))
        return None if entity_id is None else self.entities[entity_id]

    # ------------------------------------------------------------------ writes
    def check_additions(
        self, entities: list[Mapping[str, Any]] | None, triples: list[Mapping[str, Any]] | None
    ) -> None:
        """Raise what add_entities or add_triples would refuse in these lists, before either writes anything (one
        call that adds both must not keep half)."""
        for item in _items(entities, "entities") if entities is not None else ():
            self._parse_entity(item)
        for item in _items(triples, "triples") if triples is not None else ():
            self._parse_triple(item)

    def add_entities(self, items: list[Mapping[str, Any]]) -> EntitiesAdded:
        """Create entities; a name or alias already taken returns that entity, with the new aliases and
        metadata added to it."""
        wanted = [self._parse_entity(item) for item in _items(items, "entities")]
        added: list[EntityAdded] = []
        with self._changing() as changes:
            for name, entity_type, aliases, metadata in wanted:
                added.append(self._add_entity(changes, name, entity_type, aliases, metadata))
        return EntitiesAdded(entities=added)

    def _parse_entity(self, item: Any) -> tuple[str, str | None, list[str], dict[str, str]]:
        if not isinstance(item, Mapping):
            raise InvalidInputError("each entity is an object: {name, type?, aliases?, metadata?}")
        name = normalize_name(item.get("name"))
        aliases = item.get("aliases") or []
        if not isinstance(aliases, list) or len(aliases) > 50:
            raise InvalidInputError(f"aliases of {name!r} must be a list of at most 50 names")
        return (
            name,
            None if item.get("type") is None else normalize_entity_type(item["type"]),
            [normalize_name(a, "alias") for a in aliases],
            check_metadata(item.get("metadata"), self.settings.max_metadata_bytes, repr(name)),
        )

    def _add_entity(
        self, changes: _Changes, name: str, entity_type: str | None, aliases: list[str], metadata: dict[str, str]
    ) -> EntityAdded:
        """`entity_type` None: none was given (an existing entity keeps its type; a new one is a concept)."""
        existing = self._find_name(name) or next(filter(None, map(self._find_name, aliases)), None)
        target = existing or Entity(
            id=new_entry_id(), name=name, type=entity_type or "concept", created_at=self._clock()
        )
        known = {name_key(label) for label in (target.name, *target.aliases)}
        new_aliases, ignored = list(target.aliases), []
        for label in ([name] if existing else []) + aliases:
            key = name_key(label)
            if key in known:
                continue
            if (owner := self._names.get(key)) is not None and owner != target.id:
                ignored.append(label)
                continue
            known.add(key)
            new_aliases.append(label)
        # A type given for an entity that only had the default (made by a triple naming it) is taken.
        kind = entity_type if target.type == "concept" and entity_type else target.type
        updated = target.model_copy(
            update={"aliases": new_aliases, "metadata": {**target.metadata, **metadata}, "type": kind}
        )
        if existing is None or updated != existing:
            changes.put_entity(updated)
            self._index_entity(updated)
        return EntityAdded(entity=updated, created=existing is None, ignored_aliases=ignored)

    def add_triples(self, items: list[Mapping[str, Any]]) -> TriplesAdded:
        """Add subject --predicate--> object facts by entity name (or id); missing entities are created as
        type 'concept'. The same subject, predicate and object again keeps one triple, the higher confidence."""
        wanted = [self._parse_triple(item) for item in _items(items, "triples")]
        added: list[tuple[Triple, bool]] = []
        created: list[str] = []
        created_ids: set[str] = set()
        linked: dict[str, Entity] = {}
        with self._changing() as changes:
            for subject_name, predicate, object_name, confidence, source in wanted:
                ends = []
                for label in (subject_name, object_name):
                    entity = self.entities.get(label) or self._find_name(label)
                    if entity is None:
                        entity = self._add_entity(changes, label, None, [], {}).entity
                        created.append(entity.name)
                        created_ids.add(entity.id)
                    ends.append(entity)
                subject, obj = ends
                if subject.id == obj.id:
                    raise InvalidInputError(
                        f"{subject_name!r} and {object_name!r} are the same entity; a triple links two entities"
                    )
                linked.update((e.id, e) for e in ends if e.id not in created_ids)
                added.append(self._put_triple(changes, subject.id, predicate, obj.id, confidence, source))
        with self._lock:
            # A link from a new triple is a use of the entities it names and of a fact said again (new
            # records are not: their creation is their first use).
            self._use(ENTITY, [self.entities[i] for i in linked if i in self.entities])
            self._use(TRIPLE, [self.triples[t.id] for t, new in added if not new and t.id in self.triples])
            facts = self._facts([self.triples.get(t.id, t) for t, _ in added])
        return TriplesAdded(
            triples=[
                TripleAdded(fact=fact, created=new, hint=hint(fact.predicate))
                for fact, (_, new) in zip(facts, added, strict=True)
            ],
            created_entities=created,
        )

    def _parse_triple(self, item: Any) -> tuple[str, str, str, float, str | None]:
        if not isinstance(item, Mapping):
            raise InvalidInputError("each triple is an object: {subject, predicate, object, confidence?, source?}")
        subject = normalize_name(item.get("subject"), "subject")
        obj = normalize_name(item.get("object"), "object")
        confidence = item.get("confidence", 1.0)
        if confidence is None:
            confidence = 1.0
        if isinstance(confidence, bool) or not isinstance(confidence, int | float) or math.isnan(confidence):
            raise InvalidInputError(f"confidence of {subject!r} -> {obj!r} must be a number from 0 to 1")
        source = item.get("source")
        if source is not None:
            source = check_text(source, "source", MAX_SOURCE_CHARS, "a fixed cap", "Name the source briefly.")
        return subject, normalize_predicate(item.get("predicate")), obj, min(1.0, max(0.0, float(confidence))), source

    def _put_triple(
        self,
        changes: _Changes,
        subject: str,
        predicate: str,
        obj: str,
        confidence: float,
        source: str | None,
        uses: Triple | None = None,
    ) -> tuple[Triple, bool]:
        """The triple (existing or new) and whether it is new; `uses`: a triple whose uses a new one takes
        over (a merge re-points it)."""
        existing_id = self._by_spo.get((subject, predicate, obj))
        if existing_id is not None:
            existing = self.triples[existing_id]
            if confidence > existing.confidence or (source and not existing.source):
                existing = existing.model_copy(
                    update={"confidence": max(confidence, existing.confidence), "source": existing.source or source}
                )
                changes.put_triple(existing)
                self._index_triple(existing)
            return existing, False
        kept_uses = {}
        if uses is not None:
            access = self._access(TRIPLE, uses)
            kept_uses = {"reinforcement_count": access.count, "last_seen_at": datetime.fromtimestamp(access.last, UTC)}
        triple = Triple(
            id=new_entry_id(),
            subject=subject,
            predicate=predicate,
            object=obj,
            confidence=confidence,
            source=source,
            created_at=self._clock(),
            **kept_uses,
        )
        changes.put_triple(triple)
        self._index_triple(triple)
        return triple, True

    def delete_entity(
        self, name_or_id: str, keep: Callable[[Entity, list[Triple]], None] | None = None, why: str | None = None
    ) -> EntityDeleted:
        """Delete an entity and its triples. `keep` is handed them (with their uses) before anything is removed,
        under the graph's lock (a soft forget keeps them elsewhere: audited as ARCHIVE); if it raises, nothing is
        removed. `why`: said in the audit lines."""
        with self._changing() as changes:
            changes.removal, changes.note = ("ARCHIVE" if keep is not None else "DELETE"), why or ""
            entity = self._resolve(name_or_id)
            touching = list(self._edges.get(entity.id, ()))
            if keep is not None:
                keep(self._with_uses(ENTITY, entity), [self._with_uses(TRIPLE, self.triples[t]) for t in touching])
            for triple_id in touching:
                changes.remove_triple(triple_id)
                self._unindex_triple(triple_id)
            changes.remove_entity(entity.id)
            self._unindex_entity(entity.id)
        return EntityDeleted(entity=entity, triples_deleted=len(touching))

    def delete_triple(self, triple_id: str, why: str | None = None) -> TripleDeleted:
        with self._changing() as changes:
            changes.note = why or ""
            triple = self.triples.get(triple_id) if isinstance(triple_id, str) else None
            if triple is None:
                raise NotFoundError(f"no triple with id {str(triple_id)[:64]!r}; graph get lists an entity's triples")
            [fact] = self._facts([triple])
            changes.remove_triple(triple.id)
            self._unindex_triple(triple.id)
        return TripleDeleted(fact=fact)

    def merge_entities(self, keep: str, merge: str) -> EntitiesMerged:
        """Fold `merge` into `keep`: its name and aliases become aliases of `keep`, its metadata fills gaps,
        its triples point at `keep`; triples that become duplicates are folded (higher confidence kept)."""
        with self._changing() as changes:
            kept, gone = self._resolve(keep), self._resolve(merge)
            if kept.id == gone.id:
                raise InvalidInputError(f"{keep!r} and {merge!r} are the same entity; nothing to merge")
            repointed = folded = 0
            for triple_id in list(self._edges.get(gone.id, ())):
                triple = self.triples[triple_id]
                subject = kept.id if triple.subject == gone.id else triple.subject
                obj = kept.id if triple.object == gone.id else triple.object
                changes.remove_triple(triple_id)
                self._unindex_triple(triple_id)
                if subject == obj:  # a triple between the two merged entities says nothing any more
                    folded += 1
                    continue
                _, new = self._put_triple(
                    changes, subject, triple.predicate, obj, triple.confidence, triple.source, uses=triple
                )
                if new:
                    repointed += 1
                else:
                    folded += 1
            aliases = list(kept.aliases)
            known = {name_key(label) for label in (kept.name, *aliases)}
            for label in (gone.name, *gone.aliases):
                if name_key(label) not in known:
                    known.add(name_key(label))
                    aliases.append(label)
            kept_uses, gone_uses = self._access(ENTITY, kept), self._access(ENTITY, gone)
            changes.remove_entity(gone.id)
            self._unindex_entity(gone.id)
            merged = kept.model_copy(
                update={
                    "reinforcement_count": kept_uses.count + gone_uses.count - 1,  # one creation, not two
                    "last_seen_at": datetime.fromtimestamp(max(kept_uses.last, gone_uses.last), UTC),
                    "aliases": aliases,
                    "metadata": {**gone.metadata, **kept.metadata},
                    "created_at": min(kept.created_at, gone.created_at),
                    "last_referenced_at": _latest(kept.last_referenced_at, gone.last_referenced_at),
                }
            )
            changes.put_entity(merged)
            self._index_entity(merged)
            changes.note = f"merged into {quoted(kept.name, 40)}"
            changes.merged[kept.id] = (
                f"merged entity {quoted(gone.name, 40)} into {quoted(kept.name, 40)}: {repointed} triples re-pointed, "
                f"{folded} folded"
            )
            merged = self._with_uses(ENTITY, merged)
        return EntitiesMerged(entity=merged, merged_id=gone.id, triples_repointed=repointed, duplicates_folded=folded)

    # ------------------------------------------------------------------ reads
    def get_entity(self, name_or_id: str, reinforce: bool = False) -> EntityDetail:
        """`reinforce`: this read is a use of the entity (the tool's; its triples are not used by a listing)."""
        with self._reading():
            entity = self._resolve(name_or_id)
            if reinforce:
                self._use(ENTITY, [entity])
            triples = [self.triples[t] for t in self._edges.get(entity.id, ())]
            triples.sort(key=lambda t: (t.subject != entity.id, -t.confidence, t.created_at))
            now = self._now()
            value = self._saliences(ENTITY, [entity], now)[0]
            return EntityDetail(
                entity=self._with_uses(ENTITY, entity),
                salience=round(value, 4),
                tier=tier(value, self.settings.salience_archive_threshold),
                facts=self._facts(triples, now=now),
            )

    def find_entities(
        self, query: str | None = None, entity_type: str | None = None, limit: int = 20, reinforce: bool = False
    ) -> EntitySearch:
        """Entities ranked by the shared ranker (BM25 over name, aliases, type and metadata); without a
        query, the most recently created first. `reinforce`: what a query found is a use of it."""
        with self._reading():
            found, total = self._find_entities(query, entity_type, limit)
            if reinforce and query and query.strip():
                self._use(ENTITY, [e for _, e in found])
            return EntitySearch(results=self._hits(found), total_matches=total)

    def _find_entities(
        self, query: str | None, entity_type: str | None, limit: int
    ) -> tuple[list[tuple[float | None, Entity]], int]:
        wanted_type = normalize_entity_type(entity_type) if entity_type is not None else None
        if query is not None:
            check_text(query, "query", self.settings.max_content_bytes, "ROCKMEM_MAX_CONTENT_BYTES", "Shorten it.")
        with self._reading():
            tokens = tokenize(query) if query else []
            if not tokens and query and query.strip():  # 'R', 'The Who': no words to rank, but a name
                partial: list[tuple[float | None, Entity]] = list(self._containing(query, wanted_type, set()))
                return list(partial[:limit]), len(partial)
            if not tokens:
                pool = [e for e in self.entities.values() if wanted_type is None or e.type == wanted_type]
                newest = heapq.nlargest(limit, pool, key=lambda e: (e.created_at, e.id))
                return [(None, e) for e in newest], len(pool)
            text = self._text_index()
            allowed = None
            if wanted_type is not None:
                keys = text.keys
                allowed = np.fromiter(
                    (bool(k) and self.entities[k].type == wanted_type for k in keys), dtype=bool, count=len(keys)
                )
            scores = text.scores(tokens, allowed)
            hits = rank(Ranking("bm25"), scores, None, np.zeros(len(scores), dtype=bool), limit)
            scored: list[tuple[float | None, Entity]] = [
                (float(v), self.entities[text.keys[s]]) for s, v in zip(hits.slots, hits.scores, strict=True)
            ]
            total = hits.total
            if len(scored) < limit:  # 'rock' finds 'RockBot': names containing the query, after word matches
                partial = self._containing(query or "", wanted_type, {e.id for _, e in scored})
                total += len(partial)
                scored += partial[: limit - len(scored)]
            return scored, total

    def _text_index(self) -> BM25Index:
        if self._text is None:
            self._text = BM25Index()
            self._text.add_many([(e.id, tokenize(_entity_document(e)), False) for e in self.entities.values()])
        return self._text

    def _containing(self, query: str, wanted_type: str | None, exclude: set[str]) -> list[tuple[float, Entity]]:
        """Entities with a name or alias containing `query` (any case), the closest to it in length first."""
        needle = name_key(query)
        best: dict[str, float] = {}
        for key, entity_id in self._names.items():
            if needle in key and entity_id not in exclude:
                best[entity_id] = max(best.get(entity_id, 0.0), round(len(needle) / len(key), 3))
        found = [(score, self.entities[i]) for i, score in best.items()]
        found = [(score, e) for score, e in found if wanted_type is None or e.type == wanted_type]
        return sorted(found, key=lambda pair: (-pair[0], pair[1].name))

    def traverse(
        self,
        start: str | Iterable[str],
        max_hops: int = 2,
        limit: int = 15,
        min_confidence: float = 0.0,
        reinforce: bool = False,
    ) -> Traversal:
        """Breadth-first from `start` along triples in both directions, nearest first, each triple once,
        entities already reached not expanded again (cycles end there); within a hop, higher confidence first.
        `reinforce`: the triples returned are a use of them."""
        with self._reading():
            origin = self._resolve(start)
            walked, reached, truncated = self._walk([origin.id], max_hops, limit, min_confidence)
            if reinforce:
                self._use(TRIPLE, [t for t, _ in walked])
            facts = self._facts([t for t, _ in walked], [hop for _, hop in walked])
            start_entity = self._with_uses(ENTITY, origin)
            return Traversal(start=start_entity, facts=facts, entities_reached=reached, truncated=truncated)

    def _ranked_edges(self, entity_id: str) -> list[Triple]:
        """The triples touching an entity, best first (highest confidence, then oldest); cached until one
        of them changes."""
        ranked = self._ranked.get(entity_id)
        if ranked is None:
            ranked = self._ranked[entity_id] = sorted(
                (self.triples[t] for t in self._edges.get(entity_id, ())), key=_rank_key
            )
        return ranked

    def _walk(
        self,
        seeds: list[str],
        max_hops: int,
        limit: int,
        min_confidence: float,
        salient_first: bool = False,
        now: float = 0.0,
    ) -> tuple[list[tuple[Triple, int]], int, bool]:
        """The triples reached, each with its hop. `salient_first` (recall): within a hop the more salient
        first (then higher confidence), among each frontier entity's `RECALL_CANDIDATES` best-confidence ones."""
        if max_hops < 1 or limit < 1:
            raise InvalidInputError("max_hops and limit must be at least 1")
        visited = set(seeds)
        seen_triples: set[str] = set()
        facts: list[tuple[Triple, int]] = []
        frontier = list(seeds)
        for hop in range(1, max_hops + 1):
            room = limit - len(facts)
            # From each frontier entity its best unseen edges (at most room + 1: enough to fill the room and
            # to know whether more remain), from lists kept sorted per entity, so a hub costs no sort.
            per_entity = max(room, RECALL_CANDIDATES) if salient_first else room
            unique: dict[str, Triple] = {}
            for entity_id in frontier:
                taken = 0
                for triple in self._ranked_edges(entity_id):
                    if triple.confidence < min_confidence or taken > per_entity:
                        break
                    if triple.id not in seen_triples:
                        unique[triple.id] = triple
                        taken += 1
            # Within a hop, facts about a superseded entity come last (the limit cuts them first).
            if salient_first:
                candidates = list(unique.values())
                values = dict(zip(unique, self._saliences(TRIPLE, candidates, now), strict=True))
                best = sorted(candidates, key=lambda t: (self._stale(t) is not None, -values[t.id], *_rank_key(t)))
            else:
                best = sorted(unique.values(), key=lambda t: (self._stale(t) is not None, *_rank_key(t)))
            best = best[: room + 1]
            next_frontier: list[str] = []
            for triple in best[:room]:
                seen_triples.add(triple.id)
                facts.append((triple, hop))
                for end in (triple.subject, triple.object):
                    if end not in visited:
                        visited.add(end)
                        next_frontier.append(end)
            if len(unique) > room:
                return facts, len(visited), True
            seen_triples.update(unique)
            frontier = next_frontier
            if not frontier:
                break
        return facts, len(visited), False

    # ------------------------------------------------------------------ backups
    def records(self) -> tuple[list[Entity], list[Triple]]:
        """Every entity and triple (for export), oldest first, with their uses."""
        with self._reading():
            entities = sorted(self.entities.values(), key=lambda e: (e.created_at, e.id))
            triples = sorted(self.triples.values(), key=lambda t: (t.created_at, t.id))
            return [self._with_uses(ENTITY, e) for e in entities], [self._with_uses(TRIPLE, t) for t in triples]

    def restore(
        self, entities: list[Entity], triples: list[Triple], why: str = "restored from a backup", action: str = "CREATE"
    ) -> list[str]:
        """Put exported records back with their ids (an id already here is replaced). An entity whose name
        or alias names another entity here, or a triple whose ends are missing or that duplicates another
        triple, is skipped; the reasons are returned. `why` and `action` (for a record not here): its audit lines'."""
        skipped: list[str] = []
        with self._changing() as changes:
            changes.put_action, changes.note = action, why
            for entity in entities:
                owners = {self._names.get(name_key(label)) for label in (entity.name, *entity.aliases)} - {None}
                if owners - {entity.id}:
                    skipped.append(f"entity {entity.id} ({entity.name!r}): the name is another entity's here")
                    continue
                changes.put_entity(entity)
                self._index_entity(entity)
            for triple in triples:
                spo = self._by_spo.get((triple.subject, triple.predicate, triple.object))
                if triple.subject not in self.entities or triple.object not in self.entities:
                    skipped.append(f"triple {triple.id}: an entity it links is missing")
                elif spo is not None and spo != triple.id:
                    skipped.append(f"triple {triple.id}: the same fact is here as {spo}")
                else:
                    changes.put_triple(triple)
                    self._index_triple(triple)
        return skipped

    # ------------------------------------------------------------------ for the dream pass
    def fact(self, triple_id: str) -> Fact:
        with self._reading():
            triple = self.triples.get(triple_id) if isinstance(triple_id, str) else None
            if triple is None:
                raise NotFoundError(f"no triple with id {str(triple_id)[:64]!r}")
            return self._facts([triple])[0]

    def check(self, kind: str, item: Mapping[str, Any]) -> None:
        """Raise what adding this entity or triple would raise, without adding it (a dry run)."""
        with self._reading():
            if kind == "entity":
                self._parse_entity(item)
                return
            subject, _, obj, _, _ = self._parse_triple(item)
            ends = [self.entities.get(label) or self._find_name(label) for label in (subject, obj)]
            same = ends[0].id == ends[1].id if ends[0] and ends[1] else name_key(subject) == name_key(obj)
            if same:
                raise InvalidInputError(f"{subject!r} and {obj!r} are the same entity; a triple links two entities")

    def weakest_facts(self, limit: int) -> list[Fact]:
        """The lowest-confidence triples, oldest first among equals."""
        with self._reading():
            weakest = heapq.nsmallest(limit, self.triples.values(), key=lambda t: (t.confidence, t.created_at))
            return self._facts(weakest)

    def weak_triples(self, below: float, created_before: datetime) -> list[Triple]:
        with self._reading():
            return [t for t in self.triples.values() if t.confidence < below and t.created_at < created_before]

    def orphans(self, idle_since: datetime, without: set[str] = frozenset()) -> list[Entity]:  # type: ignore[assignment]
        """Entities no triple touches (counting triples in `without` as gone), created, last referenced (before
        salience) and last used before `idle_since`."""
        idle = idle_since.timestamp()
        with self._reading():
            return [
                e
                for e in self.entities.values()
                if not (self._edges.get(e.id, set()) - without)
                and (e.last_referenced_at is None or e.last_referenced_at < idle_since)
                and self._access(ENTITY, e).last < idle  # the creation counts as a use
            ]

    # ------------------------------------------------------------------ recall
    def mentioned(self, message: str) -> list[Entity]:
        """Entities whose name or alias appears whole-word (any case) in `message`; names under 3 characters
        are skipped. Longest names first."""
        with self._reading():
            words = message_words(message)
            found: dict[str, Entity] = {}
            for size in range(min(MAX_MENTION_WORDS, len(words)), 0, -1):
                for i in range(len(words) - size + 1):
                    for entity_id in self._mentions.get(" ".join(words[i : i + size]), ()):
                        found.setdefault(entity_id, self.entities[entity_id])
            return list(found.values())

    def recall_facts(self, message: str, limit: int = 15, max_hops: int = 2) -> tuple[list[Entity], list[Fact]]:
        """The entities a message names and up to `limit` triples within `max_hops` of them, nearest hop first
        and, with salience on, the more salient first within a hop; facts about a superseded entity last. The
        named entities and the facts returned are reinforced (a use; no file is written)."""
        entities = self.mentioned(message)
        if not entities:
            return [], []
        with self._reading():
            now = self._now()
            walked, _, _ = self._walk([e.id for e in entities], max_hops, limit, 0.0, self.settings.salience, now)
            walked.sort(key=lambda pair: self._stale(pair[0]) is not None)  # superseded facts last of all
            self._use(ENTITY, entities)
            self._use(TRIPLE, [t for t, _ in walked])
            facts = self._facts([t for t, _ in walked], [hop for _, hop in walked], now)
            return [self._with_uses(ENTITY, e) for e in entities], facts

    def link(self, text: str) -> list[Entity]:
        """A newly saved memory's text: the existing entities it names (whole words, as recall matches them)
        are reinforced. Returns them."""
        entities = self.mentioned(text)
        with self._lock:
            self._use(ENTITY, entities)
        return entities

    def _link_new_entries(self) -> None:
        assert self.new_entries is not None
        pending = self.new_entries.queue
        while (text := pending.get()) is not None:
            try:
                self.link(text)
            except OSError as exc:  # the journal could not be read: this use is lost, nothing else
                log.warning("could not match a new memory against the graph (%s)", exc)
            finally:
                pending.task_done()
        pending.task_done()

    # ------------------------------------------------------------------ supersedes
    def superseders(self, entity_ids: Iterable[str]) -> dict[str, str]:
        """Of these entities, the superseded ones (`X --supersedes--> it`): id -> X's name (the newest X)."""
        with self._reading():
            found = {i: self._superseder(i) for i in entity_ids if i in self._superseders}
            return {i: e.name for i, e in found.items() if e is not None}

    def _superseder(self, entity_id: str) -> Entity | None:
        ids = self._superseders.get(entity_id)
        if not ids:
            return None
        newest = max((self.triples[t] for t in ids), key=lambda t: (t.created_at, t.id))
        return self.entities.get(newest.subject)

    def _stale(self, triple: Triple) -> Entity | None:
        """What supersedes this fact's subject, else its object (None for a `supersedes` triple itself: it is
        what says so)."""
        if not self._superseders or triple.predicate == SUPERSEDES:
            return None
        return self._superseder(triple.subject) or self._superseder(triple.object)

    def predicate_counts(self) -> dict[str, int]:
        """How many triples use each predicate."""
        with self._reading():
            return dict(Counter(t.predicate for t in self.triples.values()))

    # ------------------------------------------------------------------ uses and salience
    def _access(self, kind: str, record: Entity | Triple) -> Access:
        """A record's uses: its file's, merged with the access log's."""
        return uses_of(record).merged(self.reinforcer.accesses(kind).get(record.id))

    def _with_uses(self, kind: str, record: Record) -> Record:
        return with_uses(record, self.reinforcer.accesses(kind).get(record.id))

    def _use(self, kind: str, records: Iterable[Entity | Triple]) -> None:
        """A use of these records (caller holds the lock): counted in memory now, written to the access log in
        the background, at most once per `reinforce_interval_s` each."""
        current = {r.id: uses_of(r) for r in records}
        if current:
            self.reinforcer.use(kind, current)

    def _now(self) -> float:
        return self._clock().timestamp()

    def _saliences(self, kind: str, records: list[Entity] | list[Triple], now: float) -> list[float]:
        if not records:
            return []
        uses = [self._access(kind, r) for r in records]
        lam = self.settings.salience_lambda
        if len(records) <= SMALL_BATCH:  # recall's and traverse's few facts: plain Python is faster
            bases = [ENTITY_BASE * (r.confidence if kind == TRIPLE else 1.0) for r in records]  # type: ignore[union-attr]
            return [
                salience_of(b, u.last, u.count, False, now, lam, GRAPH_TYPE_WEIGHT)
                for b, u in zip(bases, uses, strict=True)
            ]
        if kind == ENTITY:
            base = np.full(len(records), ENTITY_BASE)
        else:
            base = np.array([ENTITY_BASE * r.confidence for r in records])  # type: ignore[union-attr]
        values = salience(
            base,
            np.array([u.last for u in uses]),
            np.array([u.count for u in uses]),
            np.zeros(len(records), dtype=bool),
            now,
            lam,
            GRAPH_TYPE_WEIGHT,
        )
        return values.tolist()

    # ------------------------------------------------------------------ shaping
    def _facts(self, triples: list[Triple], hops: list[int] | None = None, now: float | None = None) -> list[Fact]:
        """Triples as tools and recall show them, with their uses and salience (each triple's uses looked up
        once, salience in plain Python: this runs for every fact a traversal or recall returns)."""
        now = self._now() if now is None else now
        lam = self.settings.salience_lambda
        facts = []
        for i, triple in enumerate(triples):
            subject, obj = self.entities.get(triple.subject), self.entities.get(triple.object)
            uses = self._access(TRIPLE, triple)
            value = salience_of(ENTITY_BASE * triple.confidence, uses.last, uses.count, False, now, lam,
                                GRAPH_TYPE_WEIGHT)  # fmt: skip
            facts.append(
                Fact(
                    id=triple.id,
                    subject=subject.name if subject else triple.subject,
                    predicate=triple.predicate,
                    object=obj.name if obj else triple.object,
                    confidence=triple.confidence,
                    source=triple.source,
                    subject_id=triple.subject,
                    object_id=triple.object,
                    created_at=triple.created_at,
                    hop=None if hops is None else hops[i],
                    reinforcement_count=uses.count,
                    last_seen_at=datetime.fromtimestamp(uses.last, UTC),
                    salience=round(value, 4),
                    tier=tier(value, self.settings.salience_archive_threshold),
                    superseded_by=stale.name if (stale := self._stale(triple)) else None,
                )
            )
        return facts

    def _hits(self, scored: list[tuple[float | None, Entity]]) -> list[EntityHit]:
        values = self._saliences(ENTITY, [e for _, e in scored], self._now()) if scored else []
        return [
            EntityHit(
                entity=self._with_uses(ENTITY, entity),
                score=score,
                triples=len(self._edges.get(entity.id, ())),
                salience=round(value, 4),
                tier=tier(value, self.settings.salience_archive_threshold),
            )
            for (score, entity), value in zip(scored, values, strict=True)
        ]

    def stats(self) -> dict[str, int]:
        with self._reading():
            return {"entities": len(self.entities), "triples": len(self.triples)}


class _Changes:
    """What one change writes: records to put and ids to remove (a later put or remove of an id wins), and how
    its audit lines say it."""

    def __init__(self) -> None:
        self.entities: dict[str, Entity] = {}
        self.triples: dict[str, Triple] = {}
        self.removed_entities: set[str] = set()
        self.removed_triples: set[str] = set()
        self.writing = False
        self.put_action: str | None = None  # a new record's action (None: CREATE)
        self.removal = "DELETE"  # a removed record's action (ARCHIVE: kept elsewhere, a soft forget)
        self.note = ""  # added to each line's summary: why
        self.merged: dict[str, str] = {}  # entity id -> the MERGE line's summary (the entity kept by a merge)

    def entity_ids(self) -> list[str]:
        return [*self.entities, *self.removed_entities]

    def triple_ids(self) -> list[str]:
        return [*self.triples, *self.removed_triples]

    def put_entity(self, entity: Entity) -> None:
        self.removed_entities.discard(entity.id)
        self.entities[entity.id] = entity

    def put_triple(self, triple: Triple) -> None:
        self.removed_triples.discard(triple.id)
        self.triples[triple.id] = triple

    def remove_entity(self, entity_id: str) -> None:
        self.entities.pop(entity_id, None)
        self.removed_entities.add(entity_id)

    def remove_triple(self, triple_id: str) -> None:
        self.triples.pop(triple_id, None)
        self.removed_triples.add(triple_id)


@dataclass(frozen=True)
class _Before:
    """Records as their files held them before a change (None: no file)."""

    entities: dict[str, Entity | None]
    triples: dict[str, Triple | None]


_USES_FIELDS = {"reinforcement_count", "last_seen_at"}


def _changed_fields(old: Entity | Triple, new: Entity | Triple) -> list[str]:
    """The fields that differ, uses left out (a use is not an audited change)."""
    before, after = old.model_dump(exclude=_USES_FIELDS), new.model_dump(exclude=_USES_FIELDS)
    return sorted(k for k in after if before.get(k) != after[k])


def _items(items: Any, what: str) -> list[Any]:
    if not isinstance(items, list) or not items:
        raise InvalidInputError(f"{what} must be a non-empty list")
    if len(items) > MAX_ITEMS:
        raise InvalidInputError(f"at most {MAX_ITEMS} {what} per call; split the list")
    return items


def _rank_key(triple: Triple) -> tuple[float, datetime, str]:
    return (-triple.confidence, triple.created_at, triple.id)


def _entity_document(entity: Entity) -> str:
    return " ".join([entity.name, *entity.aliases, entity.type, *entity.metadata.values()])


def _is_record_id(value: Any) -> bool:
    try:
        validate_entry_id(value)
    except InvalidInputError:
        return False
    return True


def _latest(a: datetime | None, b: datetime | None) -> datetime | None:
    return max((d for d in (a, b) if d is not None), default=None)
