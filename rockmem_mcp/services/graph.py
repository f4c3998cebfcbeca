"""The knowledge graph: entities and triples, name and alias resolution, breadth-first traversal.

Files under knowledge-graph/ are the truth; this service keeps an in-memory adjacency index over them,
changed incrementally by its own writes and by the change journal (index/graph/) that tells it what other
processes on the home wrote. Every change happens under an exclusive file lock after catching up with the
journal, so two processes never create twins of one name or two copies of one triple.

Names resolve case-insensitively through names and aliases; a name already taken resolves to its entity.
Predicates are snake_case; confidence is clamped to 0..1. Deleting an entity deletes its triples; merging
re-points the merged entity's triples to the kept one and folds the duplicates that makes.
"""

from __future__ import annotations

import contextlib
import heapq
import logging
import math
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from rockmem_mcp.config import Settings
from rockmem_mcp.errors import InvalidInputError, NotFoundError
from rockmem_mcp.models import (
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
    check_metadata,
    check_text,
    mention_key,
    message_words,
    name_key,
    new_entry_id,
    normalize_entity_type,
    normalize_name,
    normalize_predicate,
    utc_now,
    validate_entry_id,
)
from rockmem_mcp.search.bm25 import BM25Index
from rockmem_mcp.search.rank import Ranking, rank
from rockmem_mcp.search.tokenizer import tokenize
from rockmem_mcp.storage.changes import ChangeJournal
from rockmem_mcp.storage.graph_files import GraphFiles, read_snapshot, write_snapshot
from rockmem_mcp.storage.home_claim import HomeClaim
from rockmem_mcp.storage.no_follow import make_folders, open_fd, refuse_linked_store_folders

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no cross-process coordination
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger(__name__)

STORE = "graph"
SNAPSHOT_NAME = "graph-snapshot.jsonl"
MAX_ITEMS = 1000  # entities or triples per call
MAX_SOURCE_CHARS = 1000  # a triple's source: who or what said so
MIN_MENTION_CHARS = 3  # recall skips names shorter than this ("AI", "Go")
MAX_MENTION_WORDS = 8
REFERENCE_REFRESH = timedelta(minutes=1)  # last_referenced_at is rewritten at most this often


class GraphService:
    def __init__(self, settings: Settings, clock: Callable[[], datetime] = utc_now) -> None:
        self.settings = settings
        refuse_linked_store_folders(settings.store_dirs)  # also when opened without a memory store (CLI)
        self._claim = HomeClaim(settings.home)  # the home is in use (doctor --fix waits for it to close)
        self.files = GraphFiles(settings.graph_dir)
        self.journal = ChangeJournal(settings.index_dir / "graph")
        self._clock = clock
        self._lock = threading.RLock()
        self._lock_path = settings.graph_dir / ".lock"
        self._changes_since_snapshot = 0
        with self._lock:
            self._load()

    def close(self) -> None:
        """Write a fresh snapshot if anything changed since the last one, then let go of the journal."""
        try:
            if self._changes_since_snapshot:
                self.write_snapshot()
        except OSError as exc:  # derived data: the next start reads the files instead
            log.warning("could not write the graph snapshot (%s)", exc)
        finally:
            self.journal.close()
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
        with self._lock:
            make_folders(self.settings.graph_dir)
            fd = open_fd(self._lock_path, os.O_RDWR | os.O_CREAT)
            try:
                if fcntl is not None:
                    fcntl.flock(fd, fcntl.LOCK_EX)
                self._sync()
                changes = _Changes()
                try:
                    yield changes
                    changes.writing = True
                    self._write(changes)
                except BaseException:
                    self._reread(changes)
                    raise
                finally:
                    if changes.writing:
                        self._journal(changes)
            finally:
                os.close(fd)  # closing releases the lock

    def _write(self, changes: _Changes) -> None:
        """Files are the truth: puts, then removals of triples before their entities."""
        self.files.entities.write_many(changes.entities.values())
        self.files.triples.write_many(changes.triples.values())
        for triple_id in changes.removed_triples:
            self.files.triples.remove(triple_id)
        for entity_id in changes.removed_entities:
            self.files.entities.remove(entity_id)

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
            "find_entities lists what exists, add_entities creates one"
        )

    def _find_name(self, label: str) -> Entity | None:
        entity_id = self._names.get(name_key(label))
        return None if entity_id is None else self.entities[entity_id]

    # ------------------------------------------------------------------ writes
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
        added: list[TripleAdded] = []
        created: list[str] = []
        with self._changing() as changes:
            for subject_name, predicate, object_name, confidence, source in wanted:
                ends = []
                for label in (subject_name, object_name):
                    entity = self.entities.get(label) or self._find_name(label)
                    if entity is None:
                        entity = self._add_entity(changes, label, None, [], {}).entity
                        created.append(entity.name)
                    ends.append(entity)
                subject, obj = ends
                if subject.id == obj.id:
                    raise InvalidInputError(
                        f"{subject_name!r} and {object_name!r} are the same entity; a triple links two entities"
                    )
                added.append(self._put_triple(changes, subject.id, predicate, obj.id, confidence, source))
        return TriplesAdded(triples=added, created_entities=created)

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
        self, changes: _Changes, subject: str, predicate: str, obj: str, confidence: float, source: str | None
    ) -> TripleAdded:
        existing_id = self._by_spo.get((subject, predicate, obj))
        if existing_id is not None:
            existing = self.triples[existing_id]
            if confidence > existing.confidence or (source and not existing.source):
                existing = existing.model_copy(
                    update={"confidence": max(confidence, existing.confidence), "source": existing.source or source}
                )
                changes.put_triple(existing)
                self._index_triple(existing)
            return TripleAdded(fact=self._fact(existing), created=False)
        triple = Triple(
            id=new_entry_id(),
            subject=subject,
            predicate=predicate,
            object=obj,
            confidence=confidence,
            source=source,
            created_at=self._clock(),
        )
        changes.put_triple(triple)
        self._index_triple(triple)
        return TripleAdded(fact=self._fact(triple), created=True)

    def delete_entity(self, name_or_id: str) -> EntityDeleted:
        with self._changing() as changes:
            entity = self._resolve(name_or_id)
            touching = list(self._edges.get(entity.id, ()))
            for triple_id in touching:
                changes.remove_triple(triple_id)
                self._unindex_triple(triple_id)
            changes.remove_entity(entity.id)
            self._unindex_entity(entity.id)
        return EntityDeleted(entity=entity, triples_deleted=len(touching))

    def delete_triple(self, triple_id: str) -> TripleDeleted:
        with self._changing() as changes:
            triple = self.triples.get(triple_id) if isinstance(triple_id, str) else None
            if triple is None:
                raise NotFoundError(f"no triple with id {str(triple_id)[:64]!r}; get_entity lists an entity's triples")
            fact = self._fact(triple)
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
                result = self._put_triple(changes, subject, triple.predicate, obj, triple.confidence, triple.source)
                if result.created:
                    repointed += 1
                else:
                    folded += 1
            aliases = list(kept.aliases)
            known = {name_key(label) for label in (kept.name, *aliases)}
            for label in (gone.name, *gone.aliases):
                if name_key(label) not in known:
                    known.add(name_key(label))
                    aliases.append(label)
            changes.remove_entity(gone.id)
            self._unindex_entity(gone.id)
            merged = kept.model_copy(
                update={
                    "aliases": aliases,
                    "metadata": {**gone.metadata, **kept.metadata},
                    "created_at": min(kept.created_at, gone.created_at),
                    "last_referenced_at": _latest(kept.last_referenced_at, gone.last_referenced_at),
                }
            )
            changes.put_entity(merged)
            self._index_entity(merged)
        return EntitiesMerged(entity=merged, merged_id=gone.id, triples_repointed=repointed, duplicates_folded=folded)

    # ------------------------------------------------------------------ reads
    def get_entity(self, name_or_id: str) -> EntityDetail:
        with self._reading():
            entity = self._resolve(name_or_id)
            triples = [self.triples[t] for t in self._edges.get(entity.id, ())]
            triples.sort(key=lambda t: (t.subject != entity.id, -t.confidence, t.created_at))
            return EntityDetail(entity=entity, facts=[self._fact(t) for t in triples])

    def find_entities(self, query: str | None = None, entity_type: str | None = None, limit: int = 20) -> EntitySearch:
        """Entities ranked by the shared ranker (BM25 over name, aliases, type and metadata); without a
        query, the most recently created first."""
        wanted_type = normalize_entity_type(entity_type) if entity_type is not None else None
        if query is not None:
            check_text(query, "query", self.settings.max_content_bytes, "ROCKMEM_MAX_CONTENT_BYTES", "Shorten it.")
        with self._reading():
            tokens = tokenize(query) if query else []
            if not tokens and query and query.strip():  # 'R', 'The Who': no words to rank, but a name
                partial = self._containing(query, wanted_type, set())
                return EntitySearch(results=[self._hit(e, v) for v, e in partial[:limit]], total_matches=len(partial))
            if not tokens:
                pool = [e for e in self.entities.values() if wanted_type is None or e.type == wanted_type]
                newest = heapq.nlargest(limit, pool, key=lambda e: (e.created_at, e.id))
                return EntitySearch(results=[self._hit(e, None) for e in newest], total_matches=len(pool))
            text = self._text_index()
            allowed = None
            if wanted_type is not None:
                keys = text.keys
                allowed = np.fromiter(
                    (bool(k) and self.entities[k].type == wanted_type for k in keys), dtype=bool, count=len(keys)
                )
            scores = text.scores(tokens, allowed)
            hits = rank(Ranking("bm25"), scores, None, np.zeros(len(scores), dtype=bool), limit)
            results = [
                self._hit(self.entities[text.keys[s]], float(v)) for s, v in zip(hits.slots, hits.scores, strict=True)
            ]
            total = hits.total
            if len(results) < limit:  # 'rock' finds 'RockBot': names containing the query, after word matches
                partial = self._containing(query or "", wanted_type, {h.entity.id for h in results})
                total += len(partial)
                results += [self._hit(e, score) for score, e in partial[: limit - len(results)]]
            return EntitySearch(results=results, total_matches=total)

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
        self, start: str | Iterable[str], max_hops: int = 2, limit: int = 15, min_confidence: float = 0.0
    ) -> Traversal:
        """Breadth-first from `start` along triples in both directions, nearest first, each triple once,
        entities already reached not expanded again (cycles end there); within a hop, higher confidence first."""
        with self._reading():
            origin = self._resolve(start)
            facts, reached, truncated = self._walk([origin.id], max_hops, limit, min_confidence)
            return Traversal(start=origin, facts=facts, entities_reached=reached, truncated=truncated)

    def _ranked_edges(self, entity_id: str) -> list[Triple]:
        """The triples touching an entity, best first (highest confidence, then oldest); cached until one
        of them changes."""
        ranked = self._ranked.get(entity_id)
        if ranked is None:
            ranked = self._ranked[entity_id] = sorted(
                (self.triples[t] for t in self._edges.get(entity_id, ())), key=_rank_key
            )
        return ranked

    def _walk(self, seeds: list[str], max_hops: int, limit: int, min_confidence: float) -> tuple[list[Fact], int, bool]:
        if max_hops < 1 or limit < 1:
            raise InvalidInputError("max_hops and limit must be at least 1")
        visited = set(seeds)
        seen_triples: set[str] = set()
        facts: list[Fact] = []
        frontier = list(seeds)
        for hop in range(1, max_hops + 1):
            room = limit - len(facts)
            # From each frontier entity its best unseen edges (at most room + 1: enough to fill the room and
            # to know whether more remain), from lists kept sorted per entity, so a hub costs no sort.
            unique: dict[str, Triple] = {}
            for entity_id in frontier:
                taken = 0
                for triple in self._ranked_edges(entity_id):
                    if triple.confidence < min_confidence or taken > room:
                        break
                    if triple.id not in seen_triples:
                        unique[triple.id] = triple
                        taken += 1
            best = sorted(unique.values(), key=_rank_key)[: room + 1]
            next_frontier: list[str] = []
            for triple in best[:room]:
                seen_triples.add(triple.id)
                facts.append(self._fact(triple, hop))
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
        """Every entity and triple (for export), oldest first."""
        with self._reading():
            entities = sorted(self.entities.values(), key=lambda e: (e.created_at, e.id))
            triples = sorted(self.triples.values(), key=lambda t: (t.created_at, t.id))
            return entities, triples

    def restore(self, entities: list[Entity], triples: list[Triple]) -> list[str]:
        """Put exported records back with their ids (an id already here is replaced). An entity whose name
        or alias names another entity here, or a triple whose ends are missing or that duplicates another
        triple, is skipped; the reasons are returned."""
        skipped: list[str] = []
        with self._changing() as changes:
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
            return self._fact(triple)

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
            return [self._fact(t) for t in weakest]

    def weak_triples(self, below: float, created_before: datetime) -> list[Triple]:
        with self._reading():
            return [t for t in self.triples.values() if t.confidence < below and t.created_at < created_before]

    def orphans(self, idle_since: datetime, without: set[str] = frozenset()) -> list[Entity]:  # type: ignore[assignment]
        """Entities no triple touches (counting triples in `without` as gone), created and last referenced
        before `idle_since`."""
        with self._reading():
            return [
                e
                for e in self.entities.values()
                if not (self._edges.get(e.id, set()) - without)
                and e.created_at < idle_since
                and (e.last_referenced_at is None or e.last_referenced_at < idle_since)
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
        """The entities a message names and up to `limit` triples within `max_hops` of them; the named
        entities' last_referenced_at is refreshed."""
        entities = self.mentioned(message)
        if not entities:
            return [], []
        with self._reading():
            facts, _, _ = self._walk([e.id for e in entities], max_hops, limit, 0.0)
        self._touch(entities)
        return entities, facts

    def _touch(self, entities: list[Entity]) -> None:
        now = self._clock()
        stale = [e for e in entities if e.last_referenced_at is None or now - e.last_referenced_at >= REFERENCE_REFRESH]
        if not stale:
            return
        with self._changing() as changes:
            for entity in stale:
                current = self.entities.get(entity.id)
                if current is not None:
                    touched = current.model_copy(update={"last_referenced_at": now})
                    changes.put_entity(touched)
                    self._index_entity(touched)

    # ------------------------------------------------------------------ shaping
    def _fact(self, triple: Triple, hop: int | None = None) -> Fact:
        subject, obj = self.entities.get(triple.subject), self.entities.get(triple.object)
        return Fact(
            id=triple.id,
            subject=subject.name if subject else triple.subject,
            predicate=triple.predicate,
            object=obj.name if obj else triple.object,
            confidence=triple.confidence,
            source=triple.source,
            subject_id=triple.subject,
            object_id=triple.object,
            created_at=triple.created_at,
            hop=hop,
        )

    def _hit(self, entity: Entity, score: float | None) -> EntityHit:
        return EntityHit(entity=entity, score=score, triples=len(self._edges.get(entity.id, ())))

    def stats(self) -> dict[str, int]:
        with self._reading():
            return {"entities": len(self.entities), "triples": len(self.triples)}


class _Changes:
    """What one change writes: records to put and ids to remove (a later put or remove of an id wins)."""

    def __init__(self) -> None:
        self.entities: dict[str, Entity] = {}
        self.triples: dict[str, Triple] = {}
        self.removed_entities: set[str] = set()
        self.removed_triples: set[str] = set()
        self.writing = False

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
