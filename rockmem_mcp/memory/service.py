"""Long-term memory: save, search, get, update, delete, categories — files first, index kept in step.

Every operation first reads the change journal (one stat when idle), so a search sees this process's
writes at once and other processes' writes on its next call. Thread-safe: the MCP layer runs tools on
worker threads.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import threading
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import ValidationError

from rockmem_mcp.audit.log import AuditLine
from rockmem_mcp.audit.service import Audit, acting_as, quoted
from rockmem_mcp.config import Settings
from rockmem_mcp.errors import (
    CorruptEntryError,
    InvalidInputError,
    NotFoundError,
    RockmemError,
    StorageError,
    reporting_io_errors,
)
from rockmem_mcp.memory.files import MemoryFiles
from rockmem_mcp.memory.migrations import migrate
from rockmem_mcp.models import (
    CategoryCount,
    CategoryTree,
    DeleteResult,
    EntryLocation,
    MemoryEntry,
    ScoredEntry,
    SearchResults,
    as_utc,
    check_metadata,
    check_reason,
    check_text,
    new_entry_id,
    normalize_category,
    normalize_tags,
    tag_key,
    utc_now,
    validate_entry_id,
)
from rockmem_mcp.reinforcement import MEMORY, Reinforcer, open_access_log
from rockmem_mcp.search.bm25 import ACTIVE, CONSTANTS, DEAD
from rockmem_mcp.search.memory_index import MemoryIndex, SalienceView, SearchFilter
from rockmem_mcp.search.rank import MODES, Ranking, uses_vectors
from rockmem_mcp.search.salience import BASE_AGENT, tier, tier_bounds, tier_counts
from rockmem_mcp.search.tiers import Tiers
from rockmem_mcp.search.vectors import VectorFiles
from rockmem_mcp.storage.access_log import Access, with_uses
from rockmem_mcp.storage.atomic import atomic_write
from rockmem_mcp.storage.changes import ChangeJournal, JournalPosition
from rockmem_mcp.storage.home_claim import HomeClaim, quarantine, read_only_notice
from rockmem_mcp.storage.id_locks import IdLocks
from rockmem_mcp.storage.pg import is_database_url
from rockmem_mcp.vector_worker import Embedder, VectorJob, VectorWorker

log = logging.getLogger(__name__)

STORE = "memory"
SNAPSHOT_NAME = "memory-index.npz"
REBUILD_BATCH = 2000  # entries indexed per vectorised pass when rebuilding from the files


@dataclass(frozen=True)
class MemoryStats:
    home: str
    active: int
    archived: int
    categories: int
    journal_bytes: int
    snapshot_bytes: int
    embedding_model: str | None
    embedded: int
    tiers: dict[str, int]  # live memories per salience tier
    pinned: int


@dataclass(frozen=True)
class Saliences:
    """Every live memory's salience inputs and value at `now` (one row per id, oldest first)."""

    now: datetime
    ids: list[str]
    created: np.ndarray  # seconds since the epoch
    base: np.ndarray
    pinned: np.ndarray
    access_count: np.ndarray
    last_access: np.ndarray
    salience: np.ndarray


class MemoryService:
    def __init__(
        self,
        settings: Settings,
        clock: Callable[[], datetime] = utc_now,
        embedder: Embedder | None = None,
        embed_in_background: bool = True,  # False: one-shot commands call vector_worker.drain() themselves
    ) -> None:
        self.settings = settings
        self._clock = clock
        self.lock = self._lock = threading.RLock()
        self._claim = HomeClaim(
            settings.home, settings.store_dirs
        )  # first store open on the home: crashed writes' temp files go
        self.read_only = self._claim.read_only  # why writes are refused, when the home is not writable
        if self.read_only is None:
            settings.memory_dir.mkdir(parents=True, exist_ok=True)
        else:
            log.warning("%s", read_only_notice(settings.home, self.read_only))
        self.audit = Audit(settings)  # stamped by the wall clock: the store's clock is its records' time
        self.shared = is_database_url(settings.store)  # the entries in a database several replicas share
        if self.shared:
            from rockmem_mcp.memory.postgres import open_memory_store  # psycopg only where a database is named

            self.files, self.journal, self._id_locks, self._shared_snapshots, shared_vectors = open_memory_store(
                str(settings.store), settings.memory_dir, settings.store_schema
            )
        else:
            self.files = MemoryFiles(settings.memory_dir)
            self.journal = ChangeJournal(settings.index_dir)
            self._id_locks = IdLocks(settings.index_dir, STORE)  # an entry's read-modify-write, across processes
        self._snapshot_path = settings.index_dir / SNAPSHOT_NAME
        self._changes_since_snapshot = 0
        self._vectors_since_snapshot = 0
        self._stamps_unsaved = False  # a reconcile listed many files: close saves its folder stamps (a snapshot)
        self._snapshot_thread: threading.Thread | None = None
        self._snapshot_write_lock = threading.Lock()  # one snapshot file write at a time per process
        self.embedder = embedder or Embedder(settings)
        # Three-tier retrieval, when switched on (off by default: search/tiers.py says why).
        self._tiers = (
            Tiers(settings.search_tier_categories, settings.search_tier_rule) if settings.search_tiers else None
        )
        self.reinforcer = Reinforcer(settings, open_access_log(settings), clock)
        self.index, self._position = self._open_index()
        self._generation = 0  # bumped whenever self.index is replaced: vector jobs of an older index are void
        self._refused_slots: set[int] = set()  # the provider would not embed these (until they change)
        self.vector_files = shared_vectors if self.shared else VectorFiles(settings.embeddings_dir)
        self.vector_worker = VectorWorker(self.embedder, self, self.vector_files)
        if not self.shared:  # a database is made in today's format: nothing to migrate
            with acting_as("system:init"):
                migrate(self, clock)  # once per home: the old importance mapped to salience's base and the vault
        if self.embedder.configured and embed_in_background:
            self.vector_worker.start()
        self._listener = None
        if self.shared and embed_in_background:  # a server: other replicas' writes wake it (not one-shot commands)
            from rockmem_mcp.storage.pg_changes import ChangeListener

            self._listener = ChangeListener(self.files.db, self._woken)  # type: ignore[attr-defined]
        if embed_in_background:  # one-shot commands write reinforcement once, at close
            self.reinforcer.start()
        # Called with each entry `save` made, after it is written; must return at once (the graph queues it).
        self.save_listeners: list[Callable[[MemoryEntry], None]] = []

    # ------------------------------------------------------------------ lifecycle
    def _woken(self) -> None:
        """Another replica wrote: follow its changes now (the next read would anyway), so the vector worker
        fetches what it embedded while this replica is idle."""
        with self._lock:
            self._sync()

    def close(self) -> None:
        """Stop the vector worker, wait for a background snapshot, write a final one if anything changed."""
        if self._listener is not None:
            self._listener.close()
        self.vector_worker.stop()
        self.reinforcer.close()
        thread = self._snapshot_thread
        if thread is not None:
            thread.join()
        if self._changes_since_snapshot or self._vectors_since_snapshot or self._stamps_unsaved:
            self.write_snapshot()
        self.journal.close()
        if self.shared:
            self._id_locks.close()  # type: ignore[union-attr]
        self._claim.close()

    def check_store(self) -> None:
        """Raise if the store does not answer now (a database: one query; a home: its folder is there)."""
        if self.shared:
            self.journal.end()
        elif not self.settings.memory_dir.is_dir():
            raise StorageError(f"{self.settings.memory_dir} is gone")

    def _open_index(self, fetched: bool = False) -> tuple[MemoryIndex, JournalPosition]:
        index, position = self._load_or_build_index(fetched)
        index.bm25.use_constants(*CONSTANTS[self.settings.bm25])  # ROCKMEM_BM25: this home's memory index
        return index, position

    def _load_or_build_index(self, fetched: bool = False) -> tuple[MemoryIndex, JournalPosition]:
        if self.shared and not fetched and not self._snapshot_path.exists():
            self._fetch_shared_snapshot()  # a new replica: the newest index another replica kept, then the feed
            fetched = True
        try:
            snapshot_time = os.stat(self._snapshot_path).st_mtime_ns
        except OSError:
            snapshot_time = 0
        loaded = MemoryIndex.load(self._snapshot_path, with_vectors=self.embedder.configured)
        if loaded is not None:
            index, position = loaded
            index.accesses = self.reinforcer.accesses(MEMORY)
            for entry_id, access in self.reinforcer.copy(MEMORY).items():  # uses since the snapshot was written
                index.set_access(entry_id, access)
            read = self.journal.read_since(position)
            if not read.gap:
                self._apply(index, read.records)
                if not self.shared:  # rows change only through the feed; files also by hand
                    self._reconcile_with_files(index, snapshot_time)
                return index, read.position
            if self.shared and not fetched and self._fetch_shared_snapshot():
                return self._load_or_build_index(fetched=True)  # the feed's early part was pruned: a newer snapshot
            log.info("the change journal moved past the index snapshot; rebuilding from the memory files")
        position = self.journal.end()  # taken before reading: later changes are replayed on next sync
        index = self._build_from_files()
        self._write_snapshot_file(index.snapshot_arrays(position))
        return index, position

    def _build_from_files(self) -> MemoryIndex:
        index = MemoryIndex()
        index.accesses = self.reinforcer.accesses(MEMORY)
        if self.shared:
            entries: Iterator[MemoryEntry] = self.files.stream()  # type: ignore[attr-defined]
        else:
            listing = self.files.list_folders()
            self._settle_duplicates(listing.found)
            locations = self.files.locations(listing.found)
            entries = self._read_locations(locations)
        while batch := list(itertools.islice(entries, REBUILD_BATCH)):
            index.upsert_many(batch)
        if not self.shared:
            for location in locations:
                if location.entry_id not in index:  # unreadable: tried again at the next start
                    listing.list_again(location.category)
            index.folder_stamps = listing.stamps
        log.info("indexed %d memories from %s", len(index), self.files.root)
        return index

    def _read_locations(self, locations: Iterable[EntryLocation]) -> Iterator[MemoryEntry]:
        """Read entries, skipping bad files with one warning each.

        Streams (a rebuild never holds every entry at once). Of two files with one id, a later one is
        yielded only if it changed more recently, so upserting in order leaves the newest indexed.
        """
        last_change: dict[str, datetime] = {}
        for location in locations:
            try:
                entry = self.files.read(location, fresh=True)  # a rebuild: every file once, nothing kept
            except FileNotFoundError:
                continue
            except (CorruptEntryError, OSError) as exc:
                self.files.warn_once(str(exc))
                continue
            seen = last_change.get(entry.id)
            if seen is not None:
                self.files.warn_once(
                    f"memory id {entry.id} has more than one file (one in {entry.category!r}); "
                    "using the most recently updated one"
                )
                if seen >= _last_change(entry):
                    continue
            last_change[entry.id] = _last_change(entry)
            yield entry

    def _settle_duplicates(self, on_disk: dict[str | None, set[str]], index: MemoryIndex | None = None) -> None:
        """One id in two folders (a move cut short by a crash, or a copy by hand): the copy the index holds
        stays (the last acknowledged state), else the most recently written file; the others go to
        quarantine/ (never deleted). `on_disk` is updated to match."""
        if sum(map(len, on_disk.values())) == len(set().union(*on_disk.values())):
            return  # no id in two folders: the usual case, settled in C rather than a loop over every stem
        folders: dict[str, list[str | None]] = {}
        for category, stems in on_disk.items():
            for stem in stems:
                folders.setdefault(stem, []).append(category)
        for stem, listed in folders.items():
            if len(listed) < 2:
                continue
            with self._id_locks.hold([stem], wait=False) as alone:  # a move in flight holds it
                if not alone:
                    continue  # its old file is about to go; the index takes the newer copy meanwhile
                categories = [c for c in listed if self.files.path_for(stem, c).exists()]
                for category in set(listed) - set(categories):
                    on_disk[category].discard(stem)  # gone since the listing: a move finished
                if len(categories) < 2:
                    continue
                paths = {c: self.files.path_for(stem, c) for c in categories}
                indexed = index.location(stem) if index is not None and stem in index else None
                # The indexed copy's folder, however the index spells its category (on a case-insensitive
                # filesystem "work" is filed in the folder "Work").
                held = None
                if indexed is not None:
                    own = self.files.path_for(stem, indexed.category)
                    held = next((c for c in categories if c == indexed.category or _same_file(paths[c], own)), None)
                newest = held if held is not None else max(categories, key=lambda c: _mtime_ns(paths[c]))
                for category in categories:
                    if category != newest:
                        moved = quarantine(self.settings.home, paths[category], self._clock())
                        log.warning("memory %s was in two folders; kept %s, moved the other to %s", stem,
                                    paths[newest], moved)  # fmt: skip
                        on_disk[category].discard(stem)

    def _reconcile_with_files(self, index: MemoryIndex, since_ns: int = 0) -> None:
        """Catch files added, moved, removed or rewritten behind the journal's back (by hand, or a crash
        between a file's write and its journal record).

        Only the folders changed since the last reconcile are listed (their stamps, kept in the snapshot, differ:
        files.list_folders); their names are compared with the index's as sets. Then, in folders changed since
        the snapshot (a rename updates the folder), the files written since are re-read. Only the files that
        differ are read. At 100k entries in unchanged folders this is ~200 lstats instead of 100k names.
        """
        listing = self.files.list_folders(index.folder_stamps)
        on_disk = listing.found
        known = index.ids_by_category(excluding=listing.unchanged)
        # An id listed in a changed folder but indexed in an unchanged one is a copy: settled like any other. The
        # index may spell that folder's category in another case (a case-insensitive filesystem files "work" in
        # "Work"): the folder is then found by its folded name.
        copies: dict[str | None, set[str]] = {}
        unchanged_folded = {c.casefold(): c for c in listing.unchanged if c is not None}
        for category, stems in on_disk.items():
            for stem in stems - known.get(category, set()):
                indexed = index.location(stem)
                if indexed is None:
                    continue
                if indexed.category in listing.unchanged:
                    folder = indexed.category
                elif indexed.category is not None and indexed.category.casefold() in unchanged_folded:
                    folder = unchanged_folded[indexed.category.casefold()]
                else:
                    continue  # indexed in a listed folder (settled with it) or in none
                copies.setdefault(folder, set()).add(stem)
        self._settle_duplicates({**copies, **on_disk} if copies else on_disk, index)
        if since_ns:
            rewritten = [
                location
                for category, stems in on_disk.items()
                if _mtime_ns(self.files.path_for("x", category).parent) >= since_ns
                for stem in stems & known.get(category, set())
                if _mtime_ns(self.files.path_for(stem, category)) >= since_ns
                and (location := self.files.location(stem, category))
            ]
            for entry in self._read_locations(rewritten):
                index.upsert(entry)
        gone = {
            entry_id
            for category, ids in known.items()
            for entry_id in ids - on_disk.get(category, set())
            # Filed under another spelling of its category, in a case-insensitive filesystem's folder: still there.
            if not self.files.exists(EntryLocation(entry_id, category))
        }
        added = [
            location
            for category, stems in on_disk.items()
            for stem in stems - known.get(category, set())
            # Of two files with one id, the indexed one stays unless its own file went away.
            if (stem in gone or stem not in index) and (location := self.files.location(stem, category))
        ]
        for entry_id in gone:
            index.remove(entry_id)
        for entry in self._read_locations(added):
            index.upsert(entry)
        for location in added:
            if location.entry_id not in index:  # unreadable: tried again at the next start, whether or not its
                listing.list_again(location.category)  # folder changes (a fix in place changes none)
        index.folder_stamps = listing.stamps
        # Without a snapshot to keep the stamps, every start would list these folders again.
        self._stamps_unsaved = sum(map(len, on_disk.values())) >= self.settings.snapshot_every_changes

    def _apply(self, index: MemoryIndex, records: list[dict[str, Any]]) -> None:
        """Bring the index in line with journal records, re-reading the files they name: each location once,
        what is gone removed first, then what exists indexed in one batch (cheaper than one by one)."""
        locations: dict[EntryLocation, None] = {}
        for record in records:
            if record.get("s") != STORE:
                continue
            try:
                location = EntryLocation(validate_entry_id(record["id"]), normalize_category(record.get("c")))
            except (KeyError, TypeError, ValueError):
                log.warning("ignoring a malformed change record: %.200r", record)
                continue
            locations.pop(location, None)
            locations[location] = None  # the file is read as it is now: one read per location, latest order
        found: list[MemoryEntry] = []
        for location in locations:
            try:
                found.append(self.files.read(location, fresh=True))  # changed by another process
                continue
            except FileNotFoundError:
                pass
            except (CorruptEntryError, OSError) as exc:
                self.files.warn_once(str(exc))
            if index.location(location.entry_id) == location:
                index.remove(location.entry_id)
        index.upsert_many(found)

    def _sync(self) -> None:
        """Apply what other processes wrote since the last call (caller holds the lock)."""
        read = self.journal.read_since(self._position)
        if read.gap:
            log.info("fell behind the change journal; reloading the memory index")
            self.index, self._position = self._open_index()
            self._generation += 1
            self._refused_slots.clear()
            self.vector_worker.wake()
            return
        self._apply(self.index, read.records)
        self._position = read.position
        if read.records:
            self.vector_worker.wake()
        for (kind, entry_id), access in self.reinforcer.catch_up().items():
            if kind == MEMORY:
                self.index.set_access(entry_id, access)

    def _record(
        self, entries: Iterable[MemoryEntry] = (), removed: Iterable[EntryLocation] = (), bulk: bool = False
    ) -> None:
        """Journal the change for other processes; now and then refresh the snapshot in the background.

        Bulk writes (import) leave the snapshot to close(): one at the end beats one per batch.
        """
        records = [{"s": STORE, "op": "put", "id": e.id, "c": e.category} for e in entries]
        records += [{"s": STORE, "op": "del", "id": loc.entry_id, "c": loc.category} for loc in removed]
        self.journal.append(records)
        self.vector_worker.wake()
        self._changes_since_snapshot += len(records)
        if not bulk and self._changes_since_snapshot >= self.settings.snapshot_every_changes:
            self._snapshot_in_background()

    def _path(self, entry: MemoryEntry) -> Path:
        return self.files.path_for(entry.id, entry.category)

    def _audited(self, action: str, entry: MemoryEntry, summary: str) -> None:
        """The change's audit line: the last step inside `_undone_on_error`, so a change whose line could not
        be written is undone and reported, and an acknowledged change always has its line."""
        self.audit.record(action, self._path(entry), summary)

    @contextlib.contextmanager
    def locked(self, entry_ids: Iterable[str]) -> Iterator[None]:
        """Hold the store's lock and these ids' write locks (across processes) for the body."""
        with self._lock, self._id_locks.hold(list(entry_ids)):
            yield

    def adopt_files(self, files: Iterable[str]) -> int:
        """Bring the index (and, through the journal, every other process's) in line with memory files that
        were put back or removed behind the service (a revert): `files` relative to the memory folder's
        parent, e.g. memory/people/ID.json. Returns how many were taken in."""
        records = []
        for file in files:
            parts = file.split("/")
            if len(parts) < 2 or parts[0] != self.settings.memory_dir.name or not parts[-1].endswith(".json"):
                continue
            category = "/".join(parts[1:-1]) or None
            records.append({"s": STORE, "op": "put", "id": parts[-1][: -len(".json")], "c": category})
        if not records:
            return 0
        with self._lock:
            self._sync()
            self.journal.append(records)  # other processes re-read the same files
            self._apply(self.index, records)
            gone = {record["id"] for record in records if record["id"] not in self.index}
            self.vector_worker.wake()
        for entry_id in gone:  # a memory the revert removed takes its vector with it, as delete does (derived)
            self.vector_files.remove(entry_id)
        return len(records)

    # ------------------------------------------------------------------ snapshots
    def write_snapshot(self) -> None:
        """Persist the index so the next start skips reading every file; rotates a long journal.

        Arrays are gathered under the lock (copies, or views of append-only arrays; ~0.3 s at 100k entries);
        the file is written after releasing it, so tool calls wait only for the gathering.
        """
        if self.read_only:
            return
        with self._snapshot_write_lock:
            with self._lock:
                self._sync()
                if self.journal.end().offset > self.settings.journal_rotate_bytes:
                    self.journal.rotate()
                    self._sync()  # what others appended to the old generation before it was sealed
                arrays = self.index.snapshot_arrays(self._position)
                self._changes_since_snapshot = self._vectors_since_snapshot = 0
                self._stamps_unsaved = False
            self._write_snapshot_file(arrays)

    def _write_snapshot_file(self, arrays: dict[str, Any]) -> None:
        if self.read_only:
            return  # derived data: rebuilt in memory at each start while the home is read-only
        try:
            MemoryIndex.write_snapshot(self._snapshot_path, arrays)
        except OSError as exc:  # derived data: failing to save it costs start-up time, nothing else
            log.warning("could not write the index snapshot %s: %s", self._snapshot_path, exc)
            return
        if self.shared:
            self._share_snapshot(int(arrays["header"][3]))

    def _share_snapshot(self, seq: int) -> None:
        """Keep the snapshot just written in the database too, for replicas that start later."""
        try:
            self._shared_snapshots.put(SNAPSHOT_NAME, seq, self._snapshot_path.read_bytes())
        except (RockmemError, OSError) as exc:  # derived data: a new replica then builds from the rows
            log.warning("the index snapshot was not kept in the store: %s", exc)

    def _fetch_shared_snapshot(self) -> bool:
        """The newest snapshot kept in the store, as this replica's own; whether there was one."""
        try:
            data = self._shared_snapshots.get(SNAPSHOT_NAME)
            if data is not None:
                atomic_write(self._snapshot_path, data)
                log.info("index snapshot taken from the store (%d bytes); replaying the changes after it", len(data))
                return True
        except (RockmemError, OSError) as exc:
            log.warning("no index snapshot from the store (%s); building the index from the rows", exc)
        return False

    def _snapshot_in_background(self) -> None:
        if self._snapshot_thread is not None and self._snapshot_thread.is_alive():
            return
        self._snapshot_thread = threading.Thread(target=self.write_snapshot, name="rockmem-snapshot", daemon=True)
        self._snapshot_thread.start()

    # ------------------------------------------------------------------ validation
    def _check_content(self, content: str) -> str:
        limit = self.settings.max_content_bytes
        advice = "Split it into several focused memories."
        check_text(content, "content", limit, "ROCKMEM_MAX_CONTENT_BYTES", advice)
        if not content.strip():
            raise InvalidInputError("content is empty: pass the fact, preference or note to remember as text")
        return content

    @staticmethod
    def _check_importance(importance: float | None, default: float) -> float:
        if importance is None:
            return default
        if isinstance(importance, bool) or not isinstance(importance, int | float) or not 0 <= importance <= 1:
            raise InvalidInputError(f"importance must be a number from 0 to 1, got {importance!r}")
        return float(importance)

    def _check_limit(self, limit: int) -> int:
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= self.settings.search_limit_max:
            raise InvalidInputError(f"limit must be an integer from 1 to {self.settings.search_limit_max}")
        return limit

    def prepare_entry(self, fields: dict[str, Any]) -> MemoryEntry:
        """Validate a new entry from raw fields (a save, or an imported line); fills id and times."""
        now = self._clock()
        data = dict(fields)
        data["content"] = self._check_content(data.get("content"))  # type: ignore[arg-type]
        data["category"] = normalize_category(data.get("category"))
        data["tags"] = normalize_tags(data.get("tags"), self.settings.max_tags)
        data["metadata"] = check_metadata(data.get("metadata"), self.settings.max_metadata_bytes)
        data["importance"] = self._check_importance(data.get("importance"), BASE_AGENT)
        data["id"] = validate_entry_id(data["id"]) if data.get("id") is not None else new_entry_id()
        if data.get("archive_reason") is not None:  # an imported archived memory
            check_reason(data["archive_reason"], "archive_reason")
        if data.get("superseded_by") is not None:
            validate_entry_id(data["superseded_by"])
        data.setdefault("created_at", now)
        if data["created_at"] is None:
            data["created_at"] = now
        # Last use: an imported memory that does not say starts its life here now (not at its creation, which
        # may be years back: it would arrive dormant).
        if data.get("last_seen_at") is None:
            data["last_seen_at"] = now
        try:
            return MemoryEntry.model_validate(data)
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
            raise InvalidInputError(f"invalid memory: {problems}") from None

    # ------------------------------------------------------------------ operations
    def save(
        self,
        content: str,
        category: str | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, str] | None = None,
        importance: float | None = None,
        pinned: bool = False,
    ) -> MemoryEntry:
        entry = self.prepare_entry(
            {
                "content": content,
                "category": category,
                "tags": tags,
                "metadata": metadata,
                "importance": importance,
                "pinned": pinned,
            }
        )
        with self._lock, reporting_io_errors("saving memory"):
            # No catch-up with other processes first: a new id touches nothing they wrote, and the next read
            # catches up on all of it at once (a write storm from several processes indexes in batches).
            while entry.id in self.index or self.files.exists(EntryLocation(entry.id, entry.category)):
                entry = entry.model_copy(update={"id": new_entry_id()})
            self.files.write(entry)
            with self._undone_on_error(None, entry):
                self.index.upsert(entry)
                self._record([entry])
                self._audited("CREATE", entry, f"saved {quoted(entry.content)}")
        for listener in self.save_listeners:
            listener(entry)
        return entry

    @contextlib.contextmanager
    def _undone_on_error(self, before: MemoryEntry | None, after: MemoryEntry | None) -> Iterator[None]:
        """Once an entry's file changed from `before` to `after` (None: no file), a failure of the steps
        that follow (the journal append: a full disk) puts `before` back, so a write that reports an error
        leaves nothing behind and a retry makes no duplicate. Caller holds the lock."""
        try:
            yield
        except BaseException:
            try:
                if before is not None:
                    self.files.write(before)
                if after is not None and before is None:
                    self.files.remove(EntryLocation(after.id, after.category))
                elif after is not None and before is not None and before.category != after.category:
                    # not the file just put back (a case-only move on a case-insensitive filesystem)
                    self.files.remove_moved(
                        EntryLocation(after.id, after.category), EntryLocation(before.id, before.category)
                    )
            except (OSError, StorageError) as exc:  # a disk, or a database, that failed again
                entry_id = before.id if before is not None else after.id if after is not None else "?"
                log.warning("could not undo a failed write of memory %s: %s", entry_id, exc)
            if before is not None:
                self.index.upsert(before)
            elif after is not None:
                self.index.remove(after.id)
            raise

    def save_many(
        self, entries: list[MemoryEntry], audit_as: tuple[str, str] | dict[str, tuple[str, str]] | None = None
    ) -> int:
        """Write a batch (import): one durable flush for all files; ids already present are replaced.
        `audit_as`: (action, summary) of every entry's audit line (or of each, by id), instead of CREATE or EDIT
        with its text.

        Returns how many of the batch replaced an existing entry.
        """
        unique: dict[str, MemoryEntry] = {}
        for entry in entries:
            unique.pop(entry.id, None)
            unique[entry.id] = entry  # last one wins, in order
        with self._lock, self._id_locks.hold(unique):
            self._sync()
            moved = []
            replacing: set[str] = set()
            previous: dict[str, MemoryEntry] = {}  # what a replaced entry was, to put back if the batch fails
            for entry in unique.values():
                old = self.index.location(entry.id)
                if old is not None:
                    replacing.add(entry.id)
                    with contextlib.suppress(OSError, CorruptEntryError):
                        previous[entry.id] = self.files.read(old, fresh=True)
                    if old.category != entry.category:
                        moved.append(old)
            self.files.write_many(unique.values())
            for location in moved:
                self.files.remove_moved(location, EntryLocation(location.entry_id, unique[location.entry_id].category))
            self.index.upsert_many(list(unique.values()))
            self._record(unique.values(), moved, bulk=True)
            was = {location.entry_id: location for location in moved}

            def line(entry: MemoryEntry) -> AuditLine:
                said = audit_as.get(entry.id) if isinstance(audit_as, dict) else audit_as
                if said is not None:  # a dream's MERGE: the action, said
                    return self.audit.line(said[0], self._path(entry), said[1])
                if entry.id in was:
                    old_path = self.files.path_for(entry.id, was[entry.id].category)
                    return self.audit.line("RENAME", self._path(entry), f"moved from {self.audit.file(old_path)}")
                action = "EDIT" if entry.id in replacing else "CREATE"
                return self.audit.line(action, self._path(entry), quoted(entry.content))

            self.audit.record_many(
                [line(entry) for entry in unique.values()], undo=lambda: self._put_back(list(unique.values()), previous)
            )
        return len(replacing) + len(entries) - len(unique)

    def _put_back(self, written: list[MemoryEntry], previous: dict[str, MemoryEntry]) -> None:
        """Undo a batch whose audit lines could not be written: replaced entries as they were, new ones gone
        (caller holds the lock and the ids' locks)."""
        back = [previous[entry.id] for entry in written if entry.id in previous]
        self.files.write_many(back)
        gone = []
        for entry in written:
            before = previous.get(entry.id)
            if before is None or before.category != entry.category:
                location = EntryLocation(entry.id, entry.category)
                if before is None:
                    self.files.remove(location)
                else:
                    self.files.remove_moved(location, EntryLocation(before.id, before.category))
                gone.append(location)
                if before is None:
                    self.index.remove(entry.id)
        self.index.upsert_many(back)
        self._record(back, gone, bulk=True)

    def revise_many(self, entry_ids: list[str], revise: Callable[[MemoryEntry], dict[str, Any] | None]) -> int:
        """Set fields of many entries in one durable batch, computed by `revise` from each entry as it is now,
        under its id's lock (the fields to set, or None or {} to leave it; never content, category or id;
        `updated_at` is left alone): for a mapping that must not overwrite what another process wrote meanwhile
        (the format migration). Returns how many were changed."""
        with self._lock, self._id_locks.hold(entry_ids):
            self._sync()
            updated, currents = [], []
            fields_of: dict[str, list[str]] = {}
            for entry_id in entry_ids:
                try:
                    current, _ = self._read_current(entry_id)
                except (NotFoundError, InvalidInputError):
                    continue
                fields = revise(current)
                if not fields:
                    continue
                if {"content", "category", "id"} & set(fields):
                    raise InvalidInputError("revise_many changes neither content, category nor id; use update")
                updated.append(current.model_copy(update=fields))
                currents.append(current)
                fields_of[entry_id] = list(fields)
            if not updated:
                return 0
            self.files.write_many(updated)
            self.index.upsert_many(updated)
            self._record(updated, bulk=True)
            self.audit.record_many(
                [self.audit.line("EDIT", self._path(e), "set " + ", ".join(sorted(fields_of[e.id]))) for e in updated],
                undo=lambda: self._put_back(updated, {entry.id: entry for entry in currents}),
            )
        return len(updated)

    def archive_many(self, reasons: dict[str, tuple[str, str | None]]) -> int:
        """Archive many entries in one durable batch (a dream's merge sources): id → (reason, the entry that
        supersedes it); each gets its ARCHIVE line. Entries already archived or gone are left; returns how many
        were archived. Pinned entries are the caller's to refuse (the dream's safeguards do)."""
        for reason, _ in reasons.values():
            check_reason(reason)
        now = self._clock()
        with self._lock, self._id_locks.hold(reasons):
            self._sync()
            archived, currents = [], {}
            for entry_id, (reason, superseded_by) in reasons.items():
                try:
                    current, _ = self._read_current(entry_id)
                except (NotFoundError, InvalidInputError):
                    continue
                if current.archived:
                    continue
                fields = {"archived_at": now, "archive_reason": reason, "superseded_by": superseded_by}
                archived.append(current.model_copy(update=fields))
                currents[entry_id] = current
            if not archived:
                return 0
            self.files.write_many(archived)
            self.index.upsert_many(archived)
            self._record(archived, bulk=True)

            def line(entry: MemoryEntry) -> AuditLine:
                merged = f"; merged into {entry.superseded_by}" if entry.superseded_by else ""
                said = f"archived{_because(entry.archive_reason)}{merged} {quoted(currents[entry.id].content)}"
                return self.audit.line("ARCHIVE", self._path(entry), said)

            self.audit.record_many([line(entry) for entry in archived], undo=lambda: self._put_back(archived, currents))
        return len(archived)

    def _read_current(self, entry_id: str) -> tuple[MemoryEntry, EntryLocation]:
        validate_entry_id(entry_id)
        location = self.index.location(entry_id)
        if location is not None:
            try:
                return self.files.read(location, fresh=True), location  # read to be written back
            except FileNotFoundError:
                self.index.remove(entry_id)
        raise NotFoundError(
            f"no memory with id {entry_id!r}; use an id from save_memory or search_memory results "
            "(search_memory with a few words of the content finds it)"
        )

    @contextlib.contextmanager
    def unchanged(self, seen: Iterable[MemoryEntry], new_ids: Iterable[str] = ()) -> Iterator[list[str]]:
        """Hold the store's lock, catch up with other processes and yield the ids of `seen` that are no longer
        as seen (changed, archived or removed since they were read): a caller writes only when none is. For
        background maintenance (the dream), so an acknowledged write is never replaced with older text. The
        ids' write locks are held too, so no other process can change them between this check and the write;
        `new_ids` (an entry the caller will create meanwhile) are locked in the same sorted acquisition, since
        taking another id's lock later, out of order, could deadlock with a process locking in order."""
        seen = list(seen)
        with self._lock, self._id_locks.hold([*(entry.id for entry in seen), *new_ids]):
            self._sync()
            changed = []
            for entry in seen:
                try:
                    current: MemoryEntry | None = self._read_current(entry.id)[0]
                except (NotFoundError, InvalidInputError):
                    current = None
                if current != entry:
                    changed.append(entry.id)
            yield changed

    def get(self, entry_id: str, reinforce: bool = False) -> MemoryEntry:
        """One entry, archived or dormant alike, with its uses; `reinforce`: this read is a use."""
        with self._lock:
            self._sync()
            entry = self._read_current(entry_id)[0]
            if reinforce and not entry.archived:
                self._reinforce([entry_id])
            return self.with_uses(entry)

    def update(
        self,
        entry_id: str,
        content: str | None = None,
        category: str | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, str] | None = None,
        importance: float | None = None,
        restore: bool = False,
        pinned: bool | None = None,
    ) -> MemoryEntry:
        """Change the given fields (None leaves a field as it is; category '' files it uncategorized;
        `pinned` puts the memory in the vault or takes it out).

        An archived memory is changed only with `restore`, which brings it back (archive fields cleared);
        restoring a live memory changes nothing."""
        changes: dict[str, Any] = {}
        if content is not None:
            changes["content"] = self._check_content(content)
        if category is not None:
            changes["category"] = normalize_category(category)
        if tags is not None:
            changes["tags"] = normalize_tags(tags, self.settings.max_tags)
        if metadata is not None:
            changes["metadata"] = check_metadata(metadata, self.settings.max_metadata_bytes)
        if importance is not None:
            changes["importance"] = self._check_importance(importance, BASE_AGENT)
        if pinned is not None:
            changes["pinned"] = bool(pinned)
        if not changes and not restore:
            raise InvalidInputError(
                "nothing to update: pass at least one of content, category, tags, metadata, importance, pinned, restore"
            )
        validate_entry_id(entry_id)
        with self._lock, self._id_locks.hold([entry_id]), reporting_io_errors(f"updating memory {entry_id}"):
            self._sync()  # under the id's lock: a delete, archive or move another process finished is seen
            current, location = self._read_current(entry_id)
            if current.archived:
                changes.update(_restored(current, restore))
            elif not changes:
                return current
            updated = current.model_copy(update={**changes, "updated_at": self._clock()})
            self.files.write(updated)
            with self._undone_on_error(current, updated):
                moved = location.category != updated.category
                if moved:
                    self.files.remove_moved(location, EntryLocation(updated.id, updated.category))
                self.index.upsert(updated)
                self._record([updated], [location] if moved else [])
                if current.archived:
                    self._audited("EDIT", updated, "restored from the archive")
                elif moved:
                    old = self.files.path_for(current.id, current.category)
                    self._audited("RENAME", updated, f"moved from {self.audit.file(old)}")
                else:
                    self._audited("EDIT", updated, "changed " + ", ".join(sorted(changes)))
            return self.with_uses(updated)

    def delete(
        self,
        entry_id: str,
        permanent: bool = False,
        reason: str | None = None,
        superseded_by: str | None = None,
        confirm_pinned: bool = False,
        unpin: bool = False,
    ) -> DeleteResult:
        """Archive (default: kept on disk, hidden from search) or permanently remove an entry; `superseded_by`
        names the entry that replaces an archived one (a dream merge). A pinned entry is archived or removed
        only with `confirm_pinned` (the vault is what the user asked to keep); archived, it stays pinned (no dream
        purges it) unless `unpin` (out of the vault, e.g. a Critical Facts line's mirror once the line is gone)."""
        if reason is not None:
            check_reason(reason)
        validate_entry_id(entry_id)
        with self._lock, self._id_locks.hold([entry_id]), reporting_io_errors(f"deleting memory {entry_id}"):
            self._sync()
            current, location = self._read_current(entry_id)
            if current.pinned and not confirm_pinned and (permanent or not current.archived):
                raise InvalidInputError(
                    f"memory {entry_id} is pinned (in the vault): confirm with the user, then pass "
                    "confirm_pinned=true to delete it, or unpin it first (update_memory pinned=false)"
                )
            if permanent:
                self.files.remove(location)
                with self._undone_on_error(current, None):
                    self.index.remove(entry_id)
                    self._record(removed=[location])
                    self._audited("DELETE", current, f"deleted for good{_because(reason)} {quoted(current.content)}")
                self.vector_files.remove(entry_id)  # derived: after the delete is published
                return DeleteResult(id=entry_id, permanent=True, entry=None)
            if current.archived:
                return DeleteResult(id=entry_id, permanent=False, entry=current)
            archived = current.model_copy(
                update={
                    "archived_at": self._clock(),
                    "archive_reason": reason or "deleted with delete_memory",
                    "superseded_by": superseded_by,
                    "pinned": current.pinned and not unpin,
                }
            )
            self.files.write(archived)
            with self._undone_on_error(current, archived):
                self.index.bm25.set_archived(entry_id, True)
                self._record([archived])
                merged = f"; merged into {superseded_by}" if superseded_by else ""
                self._audited("ARCHIVE", archived, f"archived{_because(reason)}{merged} {quoted(current.content)}")
            return DeleteResult(id=entry_id, permanent=False, entry=archived)

    def search(
        self,
        query: str | None = None,
        category: str | None = None,
        tags: list[str] | None = None,
        limit: int = 20,
        created_after: datetime | None = None,
        created_before: datetime | None = None,
        include_archived: bool = False,
        mode: str | None = None,
        include_dormant: bool = False,
        reinforce: bool = False,
        tier: str | None = None,
        offset: int = 0,
    ) -> SearchResults:
        """Best matches for `query` ranked by `mode` (default: the settings' search_mode) and salience; without
        a query, the newest entries. Filters narrow both; `tier` keeps one salience tier (as of now). Dormant
        memories are left out unless `include_dormant` (or a tier is asked for); `reinforce`: the results of a
        query are a use of them. `offset` skips that many of the best first (a page further down the list)."""
        if query:
            check_text(query, "query", self.settings.max_content_bytes, "ROCKMEM_MAX_CONTENT_BYTES", "Shorten it.")
        within = None
        if tier is not None:
            try:
                low, high = tier_bounds(tier, self.settings.salience_archive_threshold)
            except ValueError as exc:
                raise InvalidInputError(str(exc)) from None
            within, include_dormant = (low, high, self._always_view()), True
        flt = SearchFilter(
            category=normalize_category(category),
            tags=tuple(normalize_tags(tags, self.settings.max_tags)),
            created_after=as_utc(created_after) if created_after else None,
            created_before=as_utc(created_before) if created_before else None,
            include_archived=include_archived,
            salience_within=within,
        )
        limit = self._check_limit(limit)
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise InvalidInputError(f"offset must be a whole number from 0; got {offset!r}")
        mode = self._check_mode(mode)
        wants_vector = uses_vectors(mode) and bool(query and query.strip())
        # Embedded before taking the lock: a remote endpoint must not hold up other tool calls.
        query_vector = self.embedder.embed_query(query or "") if wants_vector else None
        with self._lock:
            self._sync()
            table = self.index.vectors
            if query_vector is not None and (table.model_id, table.dim) != (self.embedder.model_id, len(query_vector)):
                query_vector = None  # the stored vectors are from another model until the worker rebuilds them
            if wants_vector and query_vector is None and mode == "vector":
                raise InvalidInputError(
                    "mode 'vector' needs embeddings, which are not available now (see the server log; "
                    "ROCKMEM_EMBEDDING_MODEL=off turns them off); use mode 'bm25' or 'hybrid'"
                )
            used = mode if query_vector is not None else "bm25"
            ranking = Ranking(
                used, self.settings.hybrid_vector_weight, self.settings.hybrid_min_similarity,
                self.settings.search_neighbours, self.settings.search_lifts,
            )  # fmt: skip
            # rockbot is RockBot's ranking exactly, also when it falls back to BM25 without embeddings
            view = None if mode == "rockbot" else self.salience_view(include_dormant or include_archived)
            hits = self.index.search(query, flt, limit + offset, ranking, query_vector, view, self._tiers)
            slots, scores = hits.slots[offset:], hits.scores[offset:]
            results = self._scored_hits(slots, scores.tolist(), view or self._always_view())
            if reinforce and query and query.strip():
                self._reinforce([r.entry.id for r in results if not r.entry.archived])
            return SearchResults(
                results=results,
                total_matches=hits.total,
                mode=used if query and query.strip() else "newest",
                unembedded=self.missing_vector_count() if self.embedder.configured else 0,
            )

    def ids_starting(self, prefix: str, limit: int) -> tuple[list[str], int]:
        """Ids of live memories that begin with `prefix`, in id order, at most `limit`, and how many there are."""
        with self._lock:
            self._sync()
            found = sorted(entry_id for entry_id in self.index.bm25.slot_of if entry_id.startswith(prefix))
        return found[:limit], len(found)

    def tags_starting(self, prefix: str, limit: int) -> tuple[list[str], int]:
        """Tags the index knows (as compared: case folded) that begin with `prefix`, sorted, at most `limit`, and
        how many there are. A tag whose last memory lost it may still be listed until the next reindex."""
        wanted = tag_key(prefix)
        with self._lock:
            self._sync()
            found = sorted(tag for tag in self.index.tags if tag.startswith(wanted))
        return found[:limit], len(found)

    # ------------------------------------------------------------------ salience
    def salience_view(self, include_dormant: bool = False) -> SalienceView | None:
        """How salience enters a search now; None when it is switched off (`ROCKMEM_SALIENCE=false`)."""
        return self._always_view(include_dormant) if self.settings.salience else None

    def _reinforce(self, entry_ids: list[str]) -> None:
        """A use of these entries (caller holds the lock): counted in memory now, written in the background."""
        current = {i: a for i in entry_ids if (a := self.index.access(i)) is not None}
        for entry_id, access in self.reinforcer.use(MEMORY, current).items():
            self.index.set_access(entry_id, access)

    def reinforce(self, entry_ids: list[str]) -> None:
        """Count a use of these entries (recall's injected memories; a link from a new item)."""
        with self._lock:  # no catch-up first: the ids were just read, and a gone one is skipped
            self._reinforce([i for i in entry_ids if i in self.index])

    def with_uses(self, entry: MemoryEntry) -> MemoryEntry:
        """`entry` with its uses as known now (its file holds those up to its last write; the access log the
        rest)."""
        return with_uses(entry, self.index.access(entry.id))

    def _scored_hits(self, slots: np.ndarray, scores: list[float], view: SalienceView) -> list[ScoredEntry]:
        """Hits read back from their files, with their uses, salience and tier (columns gathered at once: this
        runs for every result of every search). Caller holds the lock."""
        index = self.index
        prefetch = getattr(self.files, "prefetch", None)  # a database store reads all the hits in one query
        if prefetch is not None:
            prefetch([index.bm25.keys[slot] for slot in slots.tolist()])
        columns = zip(
            slots.tolist(), scores, index.salience(slots, view).tolist(), index.access_count.view[slots].tolist(),
            index.last_access.view[slots].tolist(), strict=True,
        )  # fmt: skip
        results = []
        for slot, score, value, count, last in columns:
            entry = self._hydrate(index.bm25.keys[slot])
            if entry is not None:
                results.append(
                    ScoredEntry(
                        entry=with_uses(entry, Access(count, last)),
                        score=None if score != score else round(score, 6),  # NaN: a listing
                        salience=round(value, 4),
                        tier=tier(value, self.settings.salience_archive_threshold),
                    )
                )
        return results

    def entries_in(self, category: str) -> list[MemoryEntry]:
        """Every live memory filed under `category` (its subcategories too), newest first, however many: for a
        store that keeps its own records there (core memory's vault mirrors), where a search's limit would
        leave some unseen."""
        flt = SearchFilter(category=normalize_category(category))
        with self._lock:
            self._sync()
            ranking = Ranking("bm25", self.settings.hybrid_vector_weight, self.settings.hybrid_min_similarity)
            hits = self.index.search(None, flt, max(len(self.index), 1), ranking, None, None)
            return [e for slot in hits.slots.tolist() if (e := self._hydrate(self.index.bm25.keys[slot])) is not None]

    def most_salient(self, limit: int, include_dormant: bool = False, category: str | None = None) -> list[ScoredEntry]:
        """Active memories by salience (pinned first), for the session start; with `include_dormant`, all of
        them (the `stats` listing of least and most salient uses the index directly); `category` keeps that
        category and those under it."""
        if not self.settings.salience:  # salience switched off: RockBot's newest
            return self.search(None, category=category, limit=limit, include_dormant=True).results
        view = self._always_view(include_dormant)
        flt = SearchFilter(category=normalize_category(category))
        with self._lock:
            self._sync()
            hits = self.index.most_salient(limit, view, flt)
            return self._scored_hits(hits.slots, [float("nan")] * len(hits.slots), view)

    def saliences(self) -> Saliences:
        """Every live (not archived) memory's salience as of now, with its inputs (uses merged with the access
        log), whether or not salience shapes ranking: for the dream's decay pass and the salience listing."""
        view = self._always_view()
        with self._lock:
            self._sync()
            index = self.index
            slots = np.flatnonzero(index.bm25.state.view == ACTIVE)
            slots = slots[index.created.view[slots].argsort(kind="stable")]
            return Saliences(
                now=datetime.fromtimestamp(view.now, UTC),
                ids=[index.bm25.keys[s] for s in slots.tolist()],
                created=index.created.view[slots].copy(),
                base=index.base.view[slots].astype(np.float64),
                pinned=index.pinned.view[slots].copy(),
                access_count=index.access_count.view[slots].copy(),
                last_access=index.last_access.view[slots].copy(),
                salience=index.salience(slots, view),
            )

    def _always_view(self, include_dormant: bool = True) -> SalienceView:
        """Salience as of now, whether or not it shapes ranking (it is still shown)."""
        s = self.settings
        return SalienceView(self._clock().timestamp(), s.salience_lambda, s.salience_floor, include_dormant)

    def _check_mode(self, mode: str | None) -> str:
        if mode is None:
            return self.settings.search_mode
        if mode not in MODES:
            raise InvalidInputError(f"mode must be one of {', '.join(MODES)}; got {mode!r}")
        return mode

    def vectors_for(self, entry_ids: list[str]) -> tuple[list[str], np.ndarray] | None:
        """The stored vectors of those entries that have one (ids, matrix), or None without embeddings."""
        with self._lock:
            self._sync()
            table = self.index.vectors
            if not self.embedder.configured or not table.model_id:
                return None
            table.match_slots(self.index.bm25.slot_count)
            slot_of = self.index.bm25.slot_of
            slots = [(i, slot_of[i]) for i in entry_ids if i in slot_of and table.present.view[slot_of[i]]]
            if not slots:
                return None
            return [i for i, _ in slots], table.rows([s for _, s in slots])

    # ------------------------------------------------------------------ vectors (the worker's side)
    def adopt_vectors(self, model_id: str, dim: int) -> None:
        if self.index.vectors.adopt(model_id, dim):
            log.info("memory vectors will be (re)made with %s (%d dims)", model_id, dim)

    def _missing_mask(self) -> np.ndarray:
        """Live slots without a vector (refused ones included)."""
        vectors = self.index.vectors
        vectors.match_slots(self.index.bm25.slot_count)
        return (self.index.bm25.state.view != DEAD) & ~vectors.present.view

    def missing_vector_count(self) -> int:
        return int(np.count_nonzero(self._missing_mask()))  # on every search's reply: no index array built

    def missing_vectors(self, limit: int) -> list[VectorJob]:
        jobs: list[VectorJob] = []
        # Past entries whose files are gone, until `limit` jobs are found.
        for slot in np.flatnonzero(self._missing_mask()).tolist():
            if len(jobs) == limit:
                break
            if slot in self._refused_slots:
                continue
            key = self.index.bm25.keys[slot]
            entry = self._hydrate(key)  # a file gone or broken drops out of the index, so no retry loop
            if entry is not None:
                jobs.append(VectorJob(key, slot, self._generation, entry.document_text()))
        return jobs

    def refuse_vector(self, job: VectorJob) -> None:
        if job.generation == self._generation:
            self._refused_slots.add(job.slot)  # an update gives the entry a new slot, and a new try

    def store_vectors(self, jobs: list[VectorJob], vectors: np.ndarray) -> list[VectorJob]:
        """Keep the vectors of entries unchanged since their job was made; returns those kept.

        Other processes' writes are read first, so a vector of text they changed meanwhile is dropped.
        """
        self._sync()
        table = self.index.vectors
        if (table.model_id, table.dim) != (self.embedder.model_id, vectors.shape[1]):
            return []  # the index was reloaded with another model's vectors; the worker adopts and redoes
        slot_of = self.index.bm25.slot_of
        kept = [
            i for i, job in enumerate(jobs) if job.generation == self._generation and slot_of.get(job.key) == job.slot
        ]
        if kept:
            self.index.vectors.put(np.array([jobs[i].slot for i in kept]), vectors[kept])
            self._vectors_since_snapshot += len(kept)
        return [jobs[i] for i in kept]

    def vectors_settled(self) -> None:
        """Every entry has its vector: after a backfill, keep them in the snapshot so the next start need not
        re-read them. A few vectors wait for the next snapshot (every `snapshot_every_changes`, and at close):
        one per save would rewrite the whole index per save, and a start after a crash reads the few from
        their cache files."""
        if self._vectors_since_snapshot >= self.settings.snapshot_every_changes:
            self._snapshot_in_background()

    def _hydrate(self, entry_id: str) -> MemoryEntry | None:
        location = self.index.location(entry_id)
        if location is None:
            return None
        try:
            return self.files.read(location)
        except FileNotFoundError:
            self.index.remove(entry_id)  # removed behind our back; the index catches up
        except (CorruptEntryError, OSError) as exc:
            self.files.warn_once(str(exc))
            self.index.remove(entry_id)
        return None

    def categories(self) -> CategoryTree:
        with self._lock:
            self._sync()
            direct, uncategorized = self.index.category_counts()
        totals: dict[str, int] = defaultdict(int)
        for category, count in direct.items():
            parts = category.split("/")
            for depth in range(1, len(parts) + 1):
                totals["/".join(parts[:depth])] += count
        return CategoryTree(
            categories=[CategoryCount(category=c, entries=direct.get(c, 0), total=totals[c]) for c in sorted(totals)],
            uncategorized=uncategorized,
            total=uncategorized + sum(direct.values()),
        )

    def iter_entries(self) -> Iterator[MemoryEntry]:
        """Every entry, archived included, oldest first (for export)."""
        with self._lock:
            self._sync()
            slots = self.index.bm25.live_slots()
            created = self.index.created.view[slots]
            ids = [self.index.bm25.keys[s] for s in slots[created.argsort(kind="stable")]]
        for entry_id in ids:
            with self._lock:
                entry = self._hydrate(entry_id)
            if entry is not None:
                yield entry

    def stats(self) -> MemoryStats:
        with self._lock:
            self._sync()
            bm25 = self.index.bm25
            live = np.flatnonzero(bm25.state.view == ACTIVE)
            active = len(live)
            return MemoryStats(
                home=str(self.settings.home),
                active=active,
                archived=len(bm25) - active,
                categories=len(self.index.category_counts()[0]),
                journal_bytes=self.journal.end().offset,
                snapshot_bytes=self._snapshot_path.stat().st_size if self._snapshot_path.exists() else 0,
                embedding_model=self.index.vectors.model_id or None,
                embedded=len(bm25) - self.missing_vector_count() if self.index.vectors.dim else 0,
                tiers=tier_counts(
                    self.index.salience(live, self._always_view()), self.settings.salience_archive_threshold
                ),
                pinned=int(self.index.pinned.view[live].sum()),
            )


def _because(reason: str | None) -> str:
    return f" ({reason})" if reason else ""


def _restored(entry: MemoryEntry, restore: bool) -> dict[str, Any]:
    """The fields that bring an archived entry back; without `restore`, an error that says how."""
    if not restore:
        when = entry.archived_at.date() if entry.archived_at else "?"
        why = (entry.archive_reason or "deleted")[:200]
        raise InvalidInputError(
            f"memory {entry.id} is archived (on {when}: {why}); pass restore=true to bring it back (with any "
            "changes you pass), or save_memory a new one"
        )
    return {"archived_at": None, "archive_reason": None, "superseded_by": None}


def _same_file(one: Path, other: Path) -> bool:
    try:
        return os.path.samefile(one, other)
    except OSError:
        return False


def _mtime_ns(path: Path) -> int:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return 0


def _last_change(entry: MemoryEntry) -> datetime:
    return entry.updated_at or entry.created_at
