"""Cross-process write locks per entry id, so a read-modify-write of one entry is never interleaved with another.

An update, move, archive or delete re-reads its entry *under* the lock before writing: an entry another process
deleted or archived meanwhile is seen as it now is, and two moves of one id run one after the other (one file
left). Ids are spread over STRIPES lock files (`{folder}/memory-NN.lock`, flock, exclusive): a lock file per id
would leave a file per id behind, one lock for all would make every process's writes wait for each other.
Locks are taken in stripe order, so a batch never deadlocks with another; a lock wanted while holding others
(settling duplicates during a catch-up) is only tried, never waited for. One instance is used under its
owner's thread lock, which orders threads (flock does not: it belongs to the open file, not the thread), and a
stripe it already holds is not taken again (a second open file would wait for the first forever).
"""

from __future__ import annotations

import contextlib
import logging
import os
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path

from rockmem_mcp.storage.no_follow import make_folders, open_fd

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: writes of one entry by two processes are not coordinated
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger(__name__)

STRIPES = 64


class IdLocks:
    def __init__(self, folder: Path, prefix: str) -> None:
        self.folder = folder
        self.prefix = prefix
        self._held: set[int] = set()
        self._folder_made = False

    def _stripe(self, entry_id: str) -> int:
        return zlib.crc32(entry_id.encode()) % STRIPES

    @contextlib.contextmanager
    def hold(self, ids: Iterable[str], wait: bool = True) -> Iterator[bool]:
        """Hold the locks of `ids` (exclusive) for the body, which is told True; with wait=False it is told False,
        holding none, when another process has one of them."""
        stripes = sorted({self._stripe(i) for i in ids} - self._held)
        fds: list[int] = []
        got = False
        try:
            if stripes and not self._folder_made:
                make_folders(self.folder)  # once: a read-only or linked home refuses as every store write does
                self._folder_made = True
            for stripe in stripes:
                fd = open_fd(self.folder / f"{self.prefix}-{stripe:02d}.lock", os.O_RDWR | os.O_CREAT)
                fds.append(fd)
                if fcntl is not None and not self._take(fd, stripe, wait):
                    break
            else:
                got = True
                self._held.update(stripes)
            yield got
        finally:
            if got:
                self._held.difference_update(stripes)
            for fd in fds:
                os.close(fd)  # closing releases the lock

    def _take(self, fd: int, stripe: int, wait: bool) -> bool:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if not wait:
                return False
            log.debug("waiting for another process's write (lock %s-%02d)", self.prefix, stripe)
            fcntl.flock(fd, fcntl.LOCK_EX)
        return True
