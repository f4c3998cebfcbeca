"""IdLocks' interface (storage/id_locks.py) over PostgreSQL: session advisory locks on a connection of their own, in
64 stripes per store, as the file home's, so replicas of one store never write the same id at once."""

from __future__ import annotations

import contextlib
import logging
import threading
import zlib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from rockmem_mcp.errors import StorageError
from rockmem_mcp.storage.pg import Database

log = logging.getLogger(__name__)

STRIPES = 64


LOCK_TIMEOUT_S = 30  # the longest a write waits for another replica's lock


LOCK_NOT_AVAILABLE = "55P03"  # PostgreSQL's code for a lock wait past lock_timeout


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
