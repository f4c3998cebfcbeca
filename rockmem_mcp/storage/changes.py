"""The change journal: how one process learns what other processes on the same home wrote.

Append-only JSON-lines files `changes-{generation}.jsonl`. Every write to a store appends one small
record *after* the file it describes is in place; readers remember (generation, offset) and read only
what is new — one stat per check when nothing changed.

Rotation starts generation g+1 under an exclusive lock, so once g+1 exists nobody appends to g again
and a reader can finish g and move on. Generations before g are deleted at rotation; a reader that
fell that far behind is told there is a gap and reloads from an index snapshot. The journal is derived
data: the entry files are always the truth.

A write cut short (a full disk, a crash) leaves a torn line, and the next append is glued to its end. A
reader takes the record that starts after the torn part (records hold only ids and category names, so `{"w":`
starts a record and nothing else), so a torn line never hides a record written after it.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import re
import secrets
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rockmem_mcp.storage.no_follow import open_existing, open_fd, read_only_reason

try:  # POSIX advisory locks; without them (Windows) appends and rotation are not coordinated.
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger(__name__)

_NAME = re.compile(r"changes-(\d{8})\.jsonl")


@dataclass(frozen=True)
class JournalPosition:
    generation: int
    offset: int


@dataclass(frozen=True)
class JournalRead:
    records: list[dict[str, Any]]
    position: JournalPosition
    gap: bool  # True: records may have been missed; reload from a snapshot or rescan the files


class ChangeJournal:
    read_only = False  # True: the home cannot be written by this process; append() then refuses

    def __init__(self, directory: Path, writer_id: str | None = None) -> None:
        self.directory = directory
        self.writer_id = writer_id or secrets.token_hex(6)
        self._folder = os.fspath(directory)
        self._thread_lock = threading.Lock()
        self._generation = 0
        try:
            directory.mkdir(parents=True, exist_ok=True)
            self._lock_fd: int | None = open_fd(directory / "changes.lock", os.O_RDWR | os.O_CREAT)
        except OSError as exc:  # a home this process cannot write: it follows the others' changes, adds none
            if read_only_reason(exc) is None:
                raise
            self.read_only = True
            self._lock_fd = open_existing(directory / "changes.lock")
            self._current_generation()
            return
        with self._locked(exclusive=True):
            self._ensure_generation()

    def close(self) -> None:
        if self._lock_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._lock_fd)

    def _path(self, generation: int) -> Path:
        return self.directory / f"changes-{generation:08d}.jsonl"

    def _create(self, generation: int) -> None:
        os.close(open_fd(self._path(generation), os.O_WRONLY | os.O_CREAT))
        self._generation = generation

    def _ensure_generation(self) -> int:
        """The current generation, starting generation 1 (and the folder) if there is none."""
        generation = self._current_generation()
        if generation == 0 and not self.read_only:  # first use, or the index folder was removed under us
            self.directory.mkdir(parents=True, exist_ok=True)
            self._create(1)
            generation = 1
        return generation

    def _current_generation(self) -> int:
        """The newest generation on disk: probe forward from the last one seen (a listing only if lost)."""
        generation = self._generation
        if generation and self._path(generation).exists():
            while self._path(generation + 1).exists():
                generation += 1
        else:
            try:
                names = os.listdir(self.directory)
            except FileNotFoundError:
                names = []
            generation = max((int(m.group(1)) for n in names if (m := _NAME.fullmatch(n))), default=0)
        self._generation = generation
        return generation

    @contextlib.contextmanager
    def _locked(self, exclusive: bool) -> Iterator[None]:
        with self._thread_lock:
            if fcntl is not None and self._lock_fd is not None:
                fcntl.flock(self._lock_fd, fcntl.LOCK_EX if exclusive and not self.read_only else fcntl.LOCK_SH)
            try:
                yield
            finally:
                if fcntl is not None and self._lock_fd is not None:
                    fcntl.flock(self._lock_fd, fcntl.LOCK_UN)

    def append(self, records: list[dict[str, Any]], durable: bool = False) -> None:
        """Append records; `durable` also flushes them to disk (for a journal that is itself the truth)."""
        if not records:
            return
        data = "".join(json.dumps({"w": self.writer_id, **r}, separators=(",", ":")) + "\n" for r in records).encode()
        with self._locked(exclusive=False):
            path = self._path(self._ensure_generation())
            fd = open_fd(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
            try:
                written = os.write(fd, data)
                if durable and written == len(data):
                    os.fsync(fd)
            finally:
                os.close(fd)
        if written < len(data):  # a regular file takes less only when it cannot grow: the disk is full
            raise OSError(errno.ENOSPC, "No space left on device (a journal write was cut short)", str(path))

    def end(self) -> JournalPosition:
        generation = self._ensure_generation()
        try:
            return JournalPosition(generation, os.stat(self._path(generation)).st_size)
        except FileNotFoundError:
            return JournalPosition(generation, 0)

    def read_since(self, position: JournalPosition) -> JournalRead:
        """Records other writers appended after `position` (two stats when there are none)."""
        generation, offset = position.generation, position.offset
        # The common case, every tool call: nothing new. Plain os calls on strings (no open, no Path objects).
        folder = self._folder
        try:
            if os.stat(f"{folder}/changes-{generation:08d}.jsonl").st_size == offset and not os.path.exists(
                f"{folder}/changes-{generation + 1:08d}.jsonl"
            ):
                return JournalRead([], position, gap=False)
        except OSError:
            pass  # gone, or unreadable: the full read below says what that means
        records: list[dict[str, Any]] = []
        while True:
            path = self._path(generation)
            sealed = self._path(generation + 1).exists()  # checked first: after that, g is complete
            try:
                with os.fdopen(open_fd(path, os.O_RDONLY), "rb") as f:
                    size = os.fstat(f.fileno()).st_size
                    if size < offset:
                        return JournalRead([], self.end(), gap=True)
                    if size > offset:
                        f.seek(offset)
                        chunk = f.read(size - offset)
                        complete = chunk[: chunk.rfind(b"\n") + 1]  # a line being written is read next time
                        offset += len(complete)
                        records.extend(self._parse(complete))
            except FileNotFoundError:
                if self.read_only and generation == 0:  # no journal in a home nobody may write: no changes
                    return JournalRead([], position, gap=False)
                return JournalRead([], self.end(), gap=True)
            if not sealed:
                return JournalRead(records, JournalPosition(generation, offset), gap=False)
            generation, offset = generation + 1, 0

    def _parse(self, data: bytes) -> Iterator[dict[str, Any]]:
        for line in data.splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                record = _after_torn_start(line)
                if record is None:
                    log.warning("skipping an unreadable line in the change journal in %s", self.directory)
                    continue
            if isinstance(record, dict) and record.get("w") != self.writer_id:
                yield record

    def rotate(self, before: Callable[[], None] | None = None) -> JournalPosition:
        """Start a new generation and drop those before the previous one; `before` runs first under the same
        exclusive lock (no append meanwhile), e.g. to write a durable summary of what is about to go."""
        with self._locked(exclusive=True):
            if before is not None:
                before()
            current = self._ensure_generation()
            self._create(current + 1)
            for name in os.listdir(self.directory):
                m = _NAME.fullmatch(name)
                if m and int(m.group(1)) < current:
                    with contextlib.suppress(OSError):
                        os.unlink(self.directory / name)
            return JournalPosition(current + 1, 0)


def _after_torn_start(line: bytes) -> Any:
    """The record glued to the end of a torn one, or None."""
    start = line.rfind(b'{"w":', 1)
    if start <= 0:
        return None
    try:
        return json.loads(line[start:])
    except ValueError:
        return None
