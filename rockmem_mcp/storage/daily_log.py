"""Append-only JSON Lines logs, one file per UTC day: `{directory}/{YYYY-MM-DD}.jsonl`.

Used for the conversation log and the feedback log, which the dream pass reads. Each record is one
`write` of one line to a file opened for appending, under an exclusive lock, then fsync'd: processes
appending at once never interleave a line, a line torn by a crash does not swallow the next record, and an
acknowledged record is on disk. Unreadable lines are skipped when read.

A reader that has dealt with records consumes them (`consume`): under the same lock, the file is replaced by
what was appended after them, or removed; an appender that opened the old file re-opens the new one.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import re
import threading
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import Generic, TypeVar

from pydantic import BaseModel, TypeAdapter, ValidationError

from rockmem_mcp.errors import RefusedFileError
from rockmem_mcp.storage.atomic import atomic_write, remove_durably
from rockmem_mcp.storage.no_follow import make_folders, open_fd, read_bytes

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger(__name__)

Record = TypeVar("Record", bound=BaseModel)
_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")


class DailyLog(Generic[Record]):
    on_disk = True  # a file per day (PgDailyLog: rows)

    def __init__(self, directory: Path, model: type[Record]) -> None:
        self.directory = directory
        self.model = model
        self._adapter = TypeAdapter(list[model])  # type: ignore[valid-type]

    def path(self, day: date) -> Path:
        return self.directory / f"{day.isoformat()}.jsonl"

    def append(self, record: Record, day: date) -> None:
        make_folders(self.directory)
        append_line(self.path(day), (record.model_dump_json() + "\n").encode("utf-8"))

    def days(self) -> list[date]:
        """The days that have a log, oldest first."""
        try:
            names = os.listdir(self.directory)
        except FileNotFoundError:
            return []
        found = []
        for name in names:
            if name.endswith(".jsonl") and _DAY.fullmatch(name[:-6]):
                try:
                    found.append(date.fromisoformat(name[:-6]))
                except ValueError:  # named like a day that does not exist: not a log of ours
                    continue
        return sorted(found)

    def identity(self, day: date) -> tuple[int, ...] | None:
        """What changes whenever `day`'s log does (its file's inode, size and modification time); None if none."""
        try:
            stat = os.lstat(self.path(day))
        except FileNotFoundError:
            return None
        return (stat.st_ino, stat.st_size, stat.st_mtime_ns)

    def read(self, day: date) -> list[Record]:
        """The records logged on `day`, in order; unreadable lines are skipped (with one warning per file)."""
        return [record for record, _ in self.read_positions(day)[0]]

    def read_positions(self, day: date) -> tuple[list[tuple[Record, int]], int]:
        """The records logged on `day`, each with the offset just past its line, and the file's identity (its
        inode), for `consume` to drop exactly what was read."""
        path = self.path(day)
        try:
            while True:
                inode = os.lstat(path).st_ino
                data = read_bytes(path)
                if os.lstat(path).st_ino == inode:
                    break  # not consumed (replaced) while we read it
        except FileNotFoundError:
            return [], 0
        except RefusedFileError as exc:  # a link, FIFO, socket or device there
            log.warning("skipped %s", exc)
            return [], 0
        return self._parse(data, day), inode

    def read_from(
        self, day: date, offset: int, inode: int | None = None, tail: bytes = b""
    ) -> tuple[list[tuple[Record, int]], int, int, bytes]:
        """The whole records logged on `day` past `offset`, each with the offset just past its line; the file's
        inode; the offset actually read from; the bytes read. A log only grows, so when the file is not the one
        `offset` was measured in — another inode than `inode`, shorter than `offset`, or its bytes just before
        `offset` are not `tail` (a rewrite by a delete that got the old inode back) — everything from 0. A line
        still being written is left for a later read."""
        path = self.path(day)
        try:
            fd = open_fd(path, os.O_RDONLY)
        except FileNotFoundError:
            return [], 0, 0, b""
        except RefusedFileError as exc:
            log.warning("skipped %s", exc)
            return [], 0, 0, b""
        try:
            stat = os.fstat(fd)
            if (
                (inode is not None and stat.st_ino != inode)
                or offset > stat.st_size
                or (tail and os.pread(fd, len(tail), offset - len(tail)) != tail)
            ):
                offset = 0
            data = os.pread(fd, stat.st_size - offset, offset)
        finally:
            os.close(fd)
        parsed = self._parse(data, day)
        return [(record, offset + end) for record, end in parsed], stat.st_ino, offset, data

    def _parse(self, data: bytes, day: date) -> list[tuple[Record, int]]:
        """Each record with the offset just past its line. All lines are validated in one call when they all
        parse (10,000 records: ~5× faster than one call per line); otherwise line by line, skipping bad ones."""
        ends, lines, end = [], [], 0
        for line in data.splitlines(keepends=True):
            end += len(line)
            if line.strip():
                lines.append(line.strip())
                ends.append(end)
        if lines and data.endswith(b"\n"):
            try:
                parsed = self._adapter.validate_json(b"[" + b",".join(lines) + b"]")
            except (ValidationError, ValueError):
                pass  # a bad line somewhere: found and skipped below
            else:
                return list(zip(parsed, ends, strict=True))
        records, bad, end = [], 0, 0
        for line in data.splitlines(keepends=True):
            end += len(line)
            if not line.strip():
                continue
            try:
                records.append((self.model.model_validate_json(line), end))
            except (ValidationError, ValueError):
                if not line.endswith(b"\n"):
                    break  # the last line, being written: left for a later read (and never consumed)
                bad += 1
        if bad:
            log.warning("skipped %d unreadable line(s) in %s", bad, self.path(day))
        return records

    def consume(self, day: date, through: int | None = None, inode: int | None = None) -> None:
        """Drop the records of `day` up to offset `through` (all of them when None), keeping what was appended
        after; with `inode`, only if the file is still the one those offsets were read from."""
        path = self.path(day)
        try:
            fd = open_fd(path, os.O_RDWR)
        except FileNotFoundError:
            return
        try:
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_EX)
                if not still_at(fd, path):
                    return  # consumed by another reader meanwhile
            stat = os.fstat(fd)
            if inode is not None and stat.st_ino != inode:
                return
            keep = os.pread(fd, stat.st_size, through) if through is not None and through < stat.st_size else b""
            if keep.strip():
                atomic_write(path, keep)  # appenders waiting for the lock find the new file and re-open it
            else:
                remove_durably(path)
        finally:
            os.close(fd)

    def remove_where(self, day: date, drop: Callable[[Record], bool]) -> int:
        """Rewrite `day`'s log without the records `drop` picks, atomically and under the lock appenders take
        (an append waiting meanwhile lands in the new file); returns how many went. Lines that do not parse
        are kept as they are: they are not this call's to judge."""
        path = self.path(day)
        try:
            fd = open_fd(path, os.O_RDWR)
        except FileNotFoundError:
            return 0
        try:
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_EX)
                if not still_at(fd, path):
                    return self.remove_where(day, drop)  # consumed or rewritten while we waited: the new file
            data = os.pread(fd, os.fstat(fd).st_size, 0)
            kept, dropped = [], 0
            for line in data.splitlines(keepends=True):
                try:
                    if line.strip() and drop(self.model.model_validate_json(line)):
                        dropped += 1
                        continue
                except (ValidationError, ValueError):
                    pass
                kept.append(line if line.endswith(b"\n") else line + b"\n")
            if dropped:
                rest = b"".join(kept)
                if rest.strip():
                    atomic_write(path, rest)
                else:
                    remove_durably(path)
            return dropped
        finally:
            os.close(fd)

    def remove(self, day: date) -> None:
        self.consume(day)


def append_line(path: Path, line: bytes, durable: bool = True) -> None:
    """Append `line` (whole lines, ending in a newline) durably to the log at `path`, in one write under the
    log's exclusive lock: processes appending at once never interleave, a line torn by a crash or a full disk
    does not swallow ours, and a file replaced (consumed, rewritten) while we waited is appended to anew."""
    while True:
        fd = open_fd(path, os.O_RDWR | os.O_CREAT | os.O_APPEND)
        try:
            if fcntl is not None:  # the torn-line check and the write happen as one, among processes
                fcntl.flock(fd, fcntl.LOCK_EX)
                if not still_at(fd, path):
                    continue  # consumed while we waited for the lock: append to the file there now
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                line = b"\n" + line  # a crash left a torn last line: ours starts on a line of its own
            written = os.write(fd, line)
            if written < len(line):  # a regular file takes less only when it cannot grow: the disk is full
                raise OSError(errno.ENOSPC, "No space left on device (an append was cut short)", str(path))
            if durable:
                os.fsync(fd)
            return
        finally:
            os.close(fd)


class Appender:
    """`append_line` for a log written on every change (the audit log): the file stays open between appends,
    so an append costs its lock, a check that the file is still the one at `path`, the write and the fsync.
    One instance per file per process is enough; threads take turns."""

    def __init__(self, path: Path, durable: bool = True) -> None:
        self.path = path
        self.durable = durable
        self._fd: int | None = None
        self._lock = threading.Lock()

    def append(self, data: bytes) -> None:
        with self._lock:
            while True:
                if self._fd is None:
                    make_folders(self.path.parent)
                    self._fd = open_fd(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND)
                fd = self._fd
                if fcntl is not None:
                    fcntl.flock(fd, fcntl.LOCK_EX)
                try:
                    if not still_at(fd, self.path):  # replaced (retention) or removed: append to the file there now
                        self._close()
                        continue
                    size = os.fstat(fd).st_size
                    line = b"\n" + data if size and os.pread(fd, 1, size - 1) != b"\n" else data
                    written = os.write(fd, line)
                    if written < len(line):  # a regular file takes less only when it cannot grow: the disk is full
                        raise OSError(errno.ENOSPC, "No space left on device (an append was cut short)", str(self.path))
                    if self.durable:
                        os.fsync(fd)
                    return
                except BaseException:
                    self._close()  # the next append starts from a fresh look at the file
                    raise
                finally:
                    if fcntl is not None and self._fd == fd:
                        fcntl.flock(fd, fcntl.LOCK_UN)

    def _close(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)  # closing releases the lock
            self._fd = None

    def close(self) -> None:
        with self._lock:
            self._close()

    def __del__(self) -> None:
        self._close()


def still_at(fd: int, path: Path) -> bool:
    """Whether the open file `fd` is still the file at `path` (not replaced or removed since it was opened)."""
    try:
        return os.lstat(path).st_ino == os.fstat(fd).st_ino
    except FileNotFoundError:
        return False
