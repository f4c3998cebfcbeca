"""Reinforcement on use (seed 004 §9.4): a memory, entity or triple that is used gets access_count + 1 and
last access = now, at most once per `reinforce_interval_s`, recorded in memory at once and written to the
access log (storage/access_log.py) in batches by a background thread. The salience model itself is
search/salience.py.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from datetime import datetime

from rockmem_mcp.config import Settings
from rockmem_mcp.errors import StorageError
from rockmem_mcp.models import utc_now
from rockmem_mcp.storage.access_log import Access, AccessLog, Record, Table, merge_into
from rockmem_mcp.storage.pg import is_database_url

log = logging.getLogger(__name__)

MEMORY, ENTITY, TRIPLE = "memory", "entity", "triple"  # the kinds of item the access log tracks


def open_access_log(settings: Settings) -> AccessLog | None:
    """The home's access log; None for a read-only home from before salience (no log to follow: this process's
    reinforcement is then counted in memory only)."""
    if is_database_url(settings.store):  # every replica's uses, in the store
        from rockmem_mcp.storage.pg import Database
        from rockmem_mcp.storage.pg_access_log import PgAccessLog

        return PgAccessLog(Database(str(settings.store), settings.store_schema))  # type: ignore[return-value]
    try:
        return AccessLog(settings.access_dir)
    except OSError as exc:
        log.info("no access log in %s (%s); salience uses this process's reinforcement only", settings.home, exc)
        return None


class Reinforcer:
    """Reinforcement on use: access_count + 1 and last access = now, at most once per `reinforce_interval_s`
    per item, kept in memory at once (ranking sees it on the next call) and written to the access log by a
    background thread every `salience_flush_s` (a search never waits for a disk write).

    What a crash can lose: reinforcement from the last `salience_flush_s` seconds (2 by default). Two
    processes reinforcing one item within the same flush may count it once.
    """

    def __init__(
        self, settings: Settings, access_log: AccessLog | None, clock: Callable[[], datetime] = utc_now
    ) -> None:
        self.settings = settings
        self.log = access_log if access_log is not None and not access_log.read_only else None
        self._reader = access_log
        self._clock = clock
        self._lock = threading.Lock()  # the table and the pending batch: memory only, held briefly
        self._io_lock = threading.Lock()  # the log: reads, appends, compaction
        self.table: Table = {MEMORY: {}, ENTITY: {}, TRIPLE: {}}
        self._pending: dict[tuple[str, str], Access] = {}
        self._unreported: dict[tuple[str, str], Access] = {}  # others' uses a compaction read: for catch_up
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if access_log is not None:
            self._merge(access_log.load())

    def _merge(self, records: list[Record]) -> dict[tuple[str, str], Access]:
        changed: dict[tuple[str, str], Access] = {}
        with self._lock:
            for kind, item_id, access in records:
                new = merge_into(self.table, kind, item_id, access)
                if new is not None:
                    changed[kind, item_id] = new
        return changed

    def adopt(self, records: list[Record]) -> int:
        """Uses learned elsewhere (a store moved here): merged (each field the larger) and written at the next
        flush; how many changed anything."""
        changed = self._merge(records)
        with self._lock:
            for key, access in changed.items():
                self._pending[key] = access.merged(self._pending.get(key))
        return len(changed)

    def accesses(self, kind: str) -> Mapping[str, Access]:
        return self.table.setdefault(kind, {})

    def copy(self, kind: str) -> dict[str, Access]:
        """The uses of one kind as they are now (safe to iterate while the flusher merges)."""
        with self._lock:
            return dict(self.table.setdefault(kind, {}))

    # ------------------------------------------------------------------ use
    def use(self, kind: str, current: Mapping[str, Access]) -> dict[str, Access]:
        """Reinforce items used now; `current`: each item's access as its caller knows it (its file's
        fields). Returns the new access of those reinforced (those used within the interval are not)."""
        now = self._clock().timestamp()
        interval = self.settings.reinforce_interval_s
        reinforced: dict[str, Access] = {}
        with self._lock:
            items = self.table.setdefault(kind, {})
            for item_id, access in current.items():
                known = access.merged(items.get(item_id))
                if now - known.last < interval:
                    continue
                items[item_id] = reinforced[item_id] = new = Access(known.count + 1, now)
                self._pending[kind, item_id] = new
        if reinforced and self.log is not None:
            self._wake.set()
        return reinforced

    def catch_up(self) -> dict[tuple[str, str], Access]:
        """Other processes' reinforcement since the last call (one stat when none). Skipped, not waited for,
        while this process is writing the log."""
        if self._reader is None or not self._io_lock.acquire(blocking=False):
            return {}
        try:
            records = self._reader.read_new()
        except (OSError, StorageError) as exc:
            log.warning("could not read the access log (%s); salience uses what this process knows", exc)
            return {}
        finally:
            self._io_lock.release()
        changed = self._merge(records) if records else {}
        with self._lock:
            if self._unreported:
                changed, self._unreported = {**self._unreported, **changed}, {}
        return changed

    # ------------------------------------------------------------------ writing
    def start(self) -> None:
        if self.log is not None and self._thread is None:
            self._thread = threading.Thread(target=self._run, name="rockmem-reinforce", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait()
            self._stop.wait(self.settings.salience_flush_s)  # gather a batch (or leave at once when stopping)
            self._wake.clear()
            self.flush()

    def flush(self) -> int:
        """Write pending reinforcement now; returns how many items were written. A failed write (a full disk)
        keeps them pending for the next flush."""
        if self.log is None:
            return 0
        with self._io_lock:
            with self._lock:
                batch, self._pending = self._pending, {}
            if not batch:
                return 0
            try:
                self.log.append(batch)
                if self.log.needs_compaction(self.settings.journal_rotate_bytes):
                    self.log.compact(self._complete_table)
            except (OSError, StorageError) as exc:
                log.warning("could not write reinforcement (%s); trying again at the next flush", exc)
                with self._lock:
                    for key, access in batch.items():
                        self._pending[key] = access.merged(self._pending.get(key))
                return 0
        return len(batch)

    def _complete_table(self, records: list[Record]) -> Table:
        changed = self._merge(records)
        with self._lock:
            self._unreported.update(changed)  # read here, so catch_up would not see them: it reports them next
            return {kind: dict(items) for kind, items in self.table.items()}

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join()
        self.flush()
        if self._reader is not None:
            with self._io_lock:
                self._reader.close()
                self._reader = self.log = None  # closed: a later catch_up (a close's last sync) reads nothing
