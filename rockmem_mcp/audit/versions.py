"""What a file held right after each audited change, until the git history commits it (governance/history.py).

The history commits in batches: read from disk, a memory edited twice within one batch would lose its middle
version, and one edited again while the batch commits would go in with a change whose line comes later. So each
audited change also appends the file's new bytes here (or that it is gone), and the committer turns a batch into
one commit per version, each file as its line left it. Not durable (no fsync): a crash loses at most the middle
versions of the last batch (a file not found here is read from disk), never a file's latest state. Kept inside
`.git`, never in the history.

Format: a JSON header line `{"t": TIME, "f": FILE, "n": SIZE}` (SIZE -1: the file is gone), then SIZE bytes
and a newline. A torn record at the end (a crash) is ignored and never swallows a later one's header.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from rockmem_mcp.storage.atomic import atomic_write, remove_durably
from rockmem_mcp.storage.daily_log import Appender, still_at
from rockmem_mcp.storage.no_follow import open_fd

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]


@dataclass(frozen=True)
class FileVersion:
    time: str  # the audit line's timestamp, as written
    file: str  # the audit line's FILE
    data: bytes | None  # None: the file was gone


@dataclass(frozen=True)
class VersionRead:
    versions: list[FileVersion]
    end: int
    inode: int


class VersionLog:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._appender = Appender(path, durable=False)

    def append(self, versions: list[FileVersion]) -> None:
        if not versions:
            return
        chunks = []
        for version in versions:
            size = -1 if version.data is None else len(version.data)
            header = json.dumps({"t": version.time, "f": version.file, "n": size}, separators=(",", ":"))
            chunks.append(header.encode() + b"\n" + (version.data or b"") + b"\n")
        self._appender.append(b"".join(chunks))

    def drop(self) -> None:
        """Forget every version kept (a permanent delete while git cannot run: they may quote the item, and no
        history will take them). Only middle versions go: every file's latest state is the file itself."""
        with contextlib.suppress(FileNotFoundError):
            remove_durably(self.path)

    def read(self) -> VersionRead:
        try:
            fd = open_fd(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return VersionRead([], 0, 0)
        try:
            stat = os.fstat(fd)
            data = os.pread(fd, stat.st_size, 0)
        finally:
            os.close(fd)
        versions, offset = [], 0
        while offset < len(data):
            newline = data.find(b"\n", offset)
            if newline < 0:
                break  # a header being written
            try:
                header = json.loads(data[offset:newline])
                size, time, file = int(header["n"]), str(header["t"]), str(header["f"])
            except (ValueError, KeyError, TypeError):
                # A torn record (a crash): resume at the next header.
                found = data.find(b'\n{"t":', offset)
                if found < 0:
                    break
                offset = found + 1
                continue
            body_end = newline + 1 + max(size, 0)
            if body_end >= len(data) or data[body_end : body_end + 1] != b"\n":
                # Torn (a later record follows it) or still being written (nothing does).
                found = data.find(b'\n{"t":', newline)
                if found < 0:
                    break
                offset = found + 1
                continue
            versions.append(FileVersion(time, file, None if size < 0 else data[newline + 1 : body_end]))
            offset = body_end + 1
        return VersionRead(versions, offset, stat.st_ino)

    def consume(self, end: int, inode: int) -> None:
        """Drop what was read up to `end` (of the file with `inode`), keeping what was appended since."""
        try:
            fd = open_fd(self.path, os.O_RDWR)
        except FileNotFoundError:
            return
        try:
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_EX)
                if not still_at(fd, self.path):
                    return
            stat = os.fstat(fd)
            if stat.st_ino != inode:
                return
            rest = os.pread(fd, max(stat.st_size - end, 0), end)
            with contextlib.suppress(FileNotFoundError):
                if rest:
                    atomic_write(self.path, rest, durable=False)
                else:
                    remove_durably(self.path)
        finally:
            os.close(fd)
