"""The change feed over PostgreSQL: ChangeJournal's interface (storage/changes.py) for a store kept in the database.
Every database store (memories, the graph, episodes, the access log) writes its change rows here, in its own
transaction, and reads the others' from here; a LISTEN wakes a replica when another commits.

- Changes: a row per change in `changes`, inserted in commit order (pg.CHANGES_LOCK), read by sequence number. A
  position is (epoch, seq): the database's epoch changes only with a new database, which a replica's snapshot
  then no longer matches (a gap: it rebuilds from the rows).
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import zlib
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Any

from rockmem_mcp.errors import StorageError
from rockmem_mcp.models import MemoryEntry
from rockmem_mcp.storage.changes import JournalPosition, JournalRead
from rockmem_mcp.storage.pg import CHANGES_LOCK, NOTIFY_CHANNEL, Database

log = logging.getLogger(__name__)

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
