"""Parsing a store's JSON record: one model per file, and one message for a file that is not one."""

from __future__ import annotations

import os
import stat
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Generic, TypeVar

from pydantic import BaseModel, ValidationError

from rockmem_mcp.errors import CorruptEntryError
from rockmem_mcp.storage.no_follow import read_bytes_and_stat

M = TypeVar("M", bound=BaseModel)


def parse_record(model: type[M], data: bytes, path: str | Path, kind: str, noun: str) -> M:
    """`data` as `model`; CorruptEntryError ("{kind} file PATH is not a valid {noun} …") when it is not one."""
    try:
        return model.model_validate_json(data)
    except ValidationError as exc:
        raise CorruptEntryError(
            f"{kind} file {path} is not a valid {noun} ({exc.error_count()} problem(s), first: "
            f"{exc.errors()[0]['msg']}); fix or move it away — rockmem never deletes it"
        ) from None


FileKey = tuple[int, int, int, int, int]  # device, inode, size, mtime_ns, ctime_ns
# Timestamps move in ticks (1-4 ms on older Linux kernels and on ZFS, FUSE and NFS; 2 s on FAT), so two same-size
# writes within one tick look alike ("racy clean", as git calls it): a file changed less than this before its
# stat was taken may change again without its stat showing it, and is never trusted to be unchanged later.
RACY_NS = 3_000_000_000


def settled(info: os.stat_result, now_ns: int) -> bool:
    """Whether the file `info` describes last changed long enough before `now_ns` that a later change shows."""
    return now_ns - max(info.st_mtime_ns, info.st_ctime_ns) > RACY_NS


def file_key(info: os.stat_result) -> FileKey:
    return info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns


class ParsedFiles(Generic[M]):
    """Records parsed from their files, kept for the next read while the file is unchanged.

    A search reads its 20 results back from their files; re-reading and re-validating unchanged JSON was a
    quarter of a search at 100k. A kept record is handed out only while one lstat of its path finds the very
    file it was parsed from (device, inode, size, mtime and ctime in ns): an atomic replace makes a new inode,
    an edit in place a new ctime, and a link or special file put there fails the comparison and is read (and
    refused) as before. The stat is the fstat of the file that was read, taken before reading, so a change
    during the read is never kept.

    A file changed less than `RACY_NS` before it was read is not kept (`settled`): any later change to a kept
    file moves its ctime to a tick it cannot have had. Bounded by count and by bytes (oldest dropped first; a file over
    `KEPT_FILE_BYTES` is never kept); shared by threads. Callers must not change a record they are given
    (they make changed copies), and a read that will be written back reads `fresh`."""

    KEPT_FILE_BYTES = 64 * 1024

    def __init__(
        self,
        model: type[M],
        kind: str,
        noun: str,
        capacity: int = 4096,
        max_bytes: int = 16 << 20,
        clock: Callable[[], int] = time.time_ns,
    ) -> None:
        self.model, self.kind, self.noun = model, kind, noun
        self.capacity, self.max_bytes, self.clock = capacity, max_bytes, clock
        # Oldest first. popitem(last=False) is O(1); next(iter(dict)) after many deletions walks dead slots.
        self._kept: OrderedDict[str, tuple[FileKey, M]] = OrderedDict()
        self._kept_bytes = 0
        self._lock = threading.Lock()

    def read(self, path: str, fresh: bool = False) -> M:
        """The record in `path` (FileNotFoundError, LinkRefusedError, SpecialFileError, CorruptEntryError as
        reading and parsing it raise). `fresh`: read and parse the file whatever is kept (and keep nothing),
        for a read-modify-write or a bulk read that would only evict what searches use."""
        kept = None if fresh else self._kept.get(path)
        if kept is not None:
            try:
                info = os.lstat(path)
            except FileNotFoundError:
                info = None
            if info is not None and stat.S_ISREG(info.st_mode) and file_key(info) == kept[0]:
                return kept[1]
        data, info = read_bytes_and_stat(path)
        record = parse_record(self.model, data, path, self.kind, self.noun)
        if not fresh:
            self._keep(path, info, record)
        return record

    def _keep(self, path: str, info: os.stat_result, record: M) -> None:
        keep = settled(info, self.clock())
        with self._lock:
            old = self._kept.pop(path, None)  # re-inserted last: the order is the age of the entries
            if old is not None:
                self._kept_bytes -= old[0][2]
            if not keep or info.st_size > self.KEPT_FILE_BYTES:
                return
            self._kept[path] = (file_key(info), record)
            self._kept_bytes += info.st_size
            while len(self._kept) > self.capacity or self._kept_bytes > self.max_bytes:
                self._kept_bytes -= self._kept.popitem(last=False)[1][0][2]
