"""Long-term memories in PostgreSQL: the same three parts a file home gives MemoryService — the entries (as
MemoryFiles), the change feed (as ChangeJournal) and the per-id write locks (as IdLocks) — over one database, so
the service runs unchanged over either.

- Entries: one row per memory (`memories`: id, category, the entry's JSON). A move between categories is an
  update of the row; there are no folders to settle or reconcile.
- Changes: a row per change in `changes`, inserted in commit order (pg.CHANGES_LOCK), read by sequence number. A
  position is (epoch, seq): the database's epoch changes only with a new database, which a replica's snapshot
  then no longer matches (a gap: it rebuilds from the rows).
- Locks: session advisory locks on a connection of their own, in 64 stripes per store, as the file home's.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import zlib
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from rockmem_mcp.errors import CorruptEntryError, StorageError
from rockmem_mcp.models import MemoryEntry
from rockmem_mcp.search.vectors import STAMP_BYTES, vector_stamp
from rockmem_mcp.storage.changes import JournalPosition, JournalRead
from rockmem_mcp.storage.memory_files import EntryLocation
from rockmem_mcp.storage.pg import CHANGES_LOCK, NOTIFY_CHANNEL, Database, redacted, shared_database

log = logging.getLogger(__name__)

STRIPES = 64
LOCK_TIMEOUT_S = 30  # the longest a write waits for another replica's lock
LOCK_NOT_AVAILABLE = "55P03"  # PostgreSQL's code for a lock wait past lock_timeout
KEEP_CHANGES = 100_000  # change rows kept behind the store's snapshot (a replica a little behind replays them)


class ParsedRows:
    """Entries parsed from their rows, kept for the next read (a search reads its results back: one query and
    one validation each would be most of its time). Exact, not a guess: a row changes only by a write, and every
    write is either this replica's own (which replaces or drops the kept entry) or a change row another replica
    made, which the feed drops from here as it reads it; after a gap in the feed nothing is kept. Bounded."""

    def __init__(self, capacity: int = 4096) -> None:
        self.capacity = capacity
        self._kept: OrderedDict[str, tuple[str | None, MemoryEntry]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, entry_id: str) -> tuple[str | None, MemoryEntry] | None:
        with self._lock:
            return self._kept.get(entry_id)

    def keep(self, entry: MemoryEntry) -> None:
        with self._lock:
            self._kept[entry.id] = (entry.category, entry)
            self._kept.move_to_end(entry.id)
            while len(self._kept) > self.capacity:
                self._kept.popitem(last=False)

    def drop(self, entry_ids: Iterable[str]) -> None:
        with self._lock:
            for entry_id in entry_ids:
                self._kept.pop(entry_id, None)

    def clear(self) -> None:
        with self._lock:
            self._kept.clear()


STORE = "memory"  # the records' store name, as MemoryService journals them


# One lock per schema (a tenant's changes wait only for that tenant's), held to the transaction's end.
CHANGES_IN_ORDER = f"SELECT pg_advisory_xact_lock({CHANGES_LOCK}, hashtext(current_schema()))"


def append_changes(cursor: Any, writer: str, records: list[dict[str, Any]]) -> None:
    """Change rows inside the caller's transaction, in commit order (CHANGES_LOCK: a sequence number is taken only
    by the transaction that will commit next), with a NOTIFY that wakes the other replicas at commit."""
    cursor.execute(CHANGES_IN_ORDER)
    cursor.executemany(
        "INSERT INTO changes (writer, record) VALUES (%s, %s)",
        [(writer, json.dumps(r, separators=(",", ":"))) for r in records],
    )
    cursor.execute("SELECT pg_notify(%s, current_schema())", (NOTIFY_CHANNEL,))  # the tenant's, as the payload


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


class PgChangeFeed:
    """ChangeJournal's interface over the `changes` table (module docstring), for one store's records: `store`'s are
    written with their rows, in their transaction; a read returns only that store's, from any replica but this."""

    read_only = False

    def __init__(self, db: Database, parsed: ParsedRows, store: str = STORE, skip_own: bool = True) -> None:
        """`skip_own`: leave out this replica's own change rows (its index has them already)."""
        self.db = db
        self.writer_id = db.writer_id if skip_own else None
        self._parsed = parsed
        self.store = store

    def close(self) -> None:
        self.db.close()

    def append(self, records: list[dict[str, Any]], durable: bool = False) -> None:
        """The store's records are written with their rows (PgMemoryRows, PgGraphRows); others' are appended here."""
        others = [r for r in records if r.get("s") != self.store]
        if others:
            with self.db.transaction() as cursor:
                append_changes(cursor, self.db.writer_id, others)

    def end(self) -> JournalPosition:
        (seq,) = self.db.one("SELECT coalesce(max(seq), 0) FROM changes")
        return JournalPosition(_epoch_number(self.db.epoch), int(seq))

    def read_since(self, position: JournalPosition) -> JournalRead:
        if position.generation != _epoch_number(self.db.epoch):
            self._parsed.clear()
            return JournalRead([], self.end(), gap=True)  # another database than the snapshot's
        # The newest sequence number comes with the rows (one round trip): a feed behind the position (a database
        # restored from a backup) is a gap, as a journal shorter than the offset is for a file home.
        # So does the pruning mark: a position before it has lost changes (rotate pruned them), a gap too.
        # Change rows commit in sequence order (CHANGES_LOCK), so with the newest number seen every row up to it
        # has been: the position moves to it even when none of those rows is this store's.
        found = self.db.all(
            "SELECT top.n, top.p, seq, writer, record FROM (SELECT coalesce(max(seq), 0) AS n,"
            " (SELECT value::bigint FROM rockmem_meta WHERE key = 'pruned_through') AS p FROM changes) AS top"
            " LEFT JOIN changes ON seq > %s AND record->>'s' = %s ORDER BY seq",
            (position.offset, self.store),
        )
        if found and (found[0][0] < position.offset or position.offset < (found[0][1] or 0)):
            self._parsed.clear()
            return JournalRead([], self.end(), gap=True)
        newest = JournalPosition(position.generation, int(found[0][0])) if found else position
        records = [record for _, _, _, writer, record in found if record is not None and writer != self.writer_id]
        self._parsed.drop(str(record.get("id")) for record in records)  # changed by another replica
        return JournalRead(records, newest, gap=False)

    def rotate(self, before: Callable[[], None] | None = None) -> JournalPosition:
        """Prune change rows no replica needs: those more than KEEP_CHANGES before the snapshot kept in the store
        (a new replica starts from it; one whose own snapshot is older takes that one, a gap it is told of by the
        pruning mark). The mark moves first, in the same transaction."""
        if before is not None:
            before()
        with self.db.transaction() as cursor:
            cursor.execute(CHANGES_IN_ORDER)
            cursor.execute("SELECT min(seq) FROM snapshots")
            (kept,) = cursor.fetchone()
            cutoff = (kept or 0) - KEEP_CHANGES
            cursor.execute("SELECT value::bigint FROM rockmem_meta WHERE key = 'pruned_through'")
            (pruned,) = cursor.fetchone() or (0,)
            if cutoff > pruned:
                cursor.execute("UPDATE rockmem_meta SET value = %s WHERE key = 'pruned_through'", (str(cutoff),))
                cursor.execute("DELETE FROM changes WHERE seq <= %s", (cutoff,))
        return self.end()


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


def _epoch_number(epoch: str) -> int:
    """The database's epoch as the int64 a snapshot header keeps."""
    return zlib.crc32(epoch.encode()) or 1


class ChangeListener:
    """LISTEN for the feed's NOTIFY on a connection of its own, in a daemon thread: each wake-up calls `woken`
    (the service then reads the feed at once, and its vector worker picks up what other replicas embedded). Only a
    wake-up: correctness never waits for it, since every read reads the feed first."""

    def __init__(self, db: Database, woken: Callable[[], None]) -> None:
        self.db, self.woken = db, woken
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rockmem-listen", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                conn = self.db.connect()
            except StorageError:
                self._stop.wait(5.0)  # the store is away: try again
                continue
            try:
                conn.execute(f"LISTEN {NOTIFY_CHANNEL}")
                (schema,) = conn.execute("SELECT current_schema()").fetchone()
                while not self._stop.is_set():
                    # Every tenant's writes notify the one channel; the payload says whose: only ours wake us.
                    if any(note.payload == schema for note in conn.notifies(timeout=0.5, stop_after=8)):
                        self.woken()
            except Exception as exc:  # a lost connection: listen again (the feed is still the truth)
                log.debug("change listener: %s", exc)
                self._stop.wait(1.0)
            finally:
                with contextlib.suppress(Exception):
                    conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


class LostLockError(StorageError):
    def __init__(self) -> None:
        super().__init__(
            "the write lock on the shared store was lost (its connection dropped) before this change was written; "
            "nothing was written: read the item again and retry"
        )


class PgIdLocks:
    """IdLocks' interface: session advisory locks on a connection of this process's own, held across the caller's
    code. Stripes this process holds already are not taken again (the service's own lock orders its threads)."""

    def __init__(self, db: Database, prefix: str) -> None:
        self.db = db
        # The two-int form of advisory locks: (this store and tenant, stripe), a keyspace of its own.
        self._key = zlib.crc32(f"{prefix}:{db.schema or ''}".encode()) - (1 << 31)  # a signed int4
        self._held: set[int] = set()
        self._conn: Any = None
        self._lock = threading.Lock()

    def _connection(self) -> Any:
        if self._conn is None or self._conn.closed:
            self._conn = self.db.connect()
            # A lock another replica holds longer than this (stuck, or its connection half-open) fails the wait:
            # this replica's service, which waits holding its own lock, never stalls on it for long.
            self._conn.execute(f"SET lock_timeout = '{LOCK_TIMEOUT_S}s'")
        return self._conn

    def _drop(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()
            self._conn = None

    def _stripe(self, entry_id: str) -> int:
        return zlib.crc32(entry_id.encode()) % STRIPES

    @contextmanager
    def hold(self, ids: Iterable[str], wait: bool = True) -> Iterator[bool]:
        """Hold these ids' stripes for the body. A lost connection is the store's error, never a raw one; locks
        held on a connection that was lost are gone with it (the body's own writes then fail on theirs)."""
        stripes = sorted({self._stripe(i) for i in ids} - self._held)
        taken: list[int] = []
        try:
            with self._lock:
                try:
                    conn = self._connection()
                    for stripe in stripes:
                        if wait:
                            conn.execute("SELECT pg_advisory_lock(%s, %s)", (self._key, stripe))
                        elif not conn.execute("SELECT pg_try_advisory_lock(%s, %s)", (self._key, stripe)).fetchone()[0]:
                            break
                        taken.append(stripe)
                except self.db.errors as exc:
                    self._drop()  # closed: every lock it held goes with it (taken here or not)
                    taken.clear()
                    if getattr(exc, "sqlstate", None) == LOCK_NOT_AVAILABLE:
                        raise StorageError(
                            f"another replica has held this write lock for over {LOCK_TIMEOUT_S} s (a long change, "
                            "or a replica that stopped answering): nothing was changed; try again shortly"
                        ) from None
                    log.warning("the id locks' connection to the store failed: %s", exc)
                    raise StorageError("the shared store failed (the server's log says why)") from None
                self._held.update(taken)
            yield len(taken) == len(stripes)
        finally:
            with self._lock:
                self._held.difference_update(taken)
                if taken and self._conn is not None:
                    try:
                        for stripe in taken:
                            self._conn.execute("SELECT pg_advisory_unlock(%s, %s)", (self._key, stripe))
                    except self.db.errors:  # the connection is gone, and its locks with it
                        self._drop()

    @contextmanager
    def writing(self, ids: Iterable[str]) -> Iterator[Any]:
        """A cursor in one transaction for a write of these ids. When this process holds their locks, on the very
        connection that holds them: should it be lost, the uncommitted write is lost with the locks (LostLockError),
        so a replica that takes them next is never written over by a change read before. Else (a write without its
        locks) on the store's query connection."""
        wanted = {self._stripe(i) for i in ids}
        with self._lock:
            if not wanted & self._held:
                conn = None
            elif self._conn is None or self._conn.closed:
                raise LostLockError()
            else:
                conn = self._conn
        if conn is None:
            with self.db.transaction() as cursor:
                yield cursor
            return
        with self._lock:
            try:
                with conn.transaction(), conn.cursor() as cursor:
                    yield cursor
            except self.db.errors as exc:
                if conn.closed or isinstance(exc, self.db.lost):
                    self._drop()
                    log.warning("the id locks' connection to the store was lost mid-write: %s", exc)
                    raise LostLockError() from None
                self.db._failed(exc)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()


def open_memory_store(
    url: str, memory_dir: Path, schema: str | None = None
) -> tuple[PgMemoryRows, PgChangeFeed, PgIdLocks, SharedSnapshots, PgVectorRows]:
    db = Database(url, schema)
    parsed = ParsedRows()
    vectors = PgVectorRows(shared_database(url, "vectors", schema))  # the vector worker's thread: its own connection
    # The locks take a connection of their own from the same address (held across the caller's queries).
    locks = PgIdLocks(db, "memory")
    return (PgMemoryRows(db, memory_dir, parsed, locks), PgChangeFeed(db, parsed), locks, SharedSnapshots(db), vectors)
