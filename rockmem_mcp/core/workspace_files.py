"""Workspace files (seed 003 layer 3): markdown the user keeps in the data home, read as they are.

AGENTS.md, SOUL.md, USER.md and HEARTBEAT.md are the user's: rockmem reads them on demand and writes one only
when asked to by name (write_workspace_file, in a toolset that is off by default). A read is one `lstat`
when the file's identity (inode, mtime_ns, size) is unchanged, so a hand edit is seen on the next read. Files
are opened without following links and only when regular: a link or FIFO named SOUL.md is refused with a
warning, never followed or waited on. Bytes that are not UTF-8 are shown as U+FFFD, with a warning.

A write is atomic and durable, under an exclusive `flock` on `meta/workspace.lock`, so two processes writing
with the version they read cannot both win: the second is told the file changed since it read it.
"""

from __future__ import annotations

import errno
import logging
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from rockmem_mcp.errors import ChangedSinceReadError, RefusedFileError
from rockmem_mcp.storage.atomic import atomic_write, remove_durably
from rockmem_mcp.storage.edited_files import held, version_of
from rockmem_mcp.storage.no_follow import read_bytes, writing

log = logging.getLogger(__name__)

# The files a user places in the home, in the order a session start loads them.
WORKSPACE_FILES = ("AGENTS.md", "SOUL.md", "USER.md", "HEARTBEAT.md")
MAX_FILE_BYTES = 1_000_000  # a larger file is skipped with a warning: these are meant to be read every session

Identity = tuple[int, int, int]  # (inode, mtime_ns, size)


class TooLargeFileError(RefusedFileError):
    """A workspace file larger than MAX_FILE_BYTES: it is not read (it would be read every session)."""

    def __init__(self, path: Path, size: int) -> None:
        super().__init__(
            errno.EFBIG,
            f"{path} is {size:,} bytes, more than the {MAX_FILE_BYTES:,} a workspace file may be; shorten it",
        )

    def __str__(self) -> str:
        return str(self.strerror)


@dataclass(frozen=True)
class WorkspaceFile:
    name: str
    text: str  # decoded; bytes that are not UTF-8 become U+FFFD
    version: str
    size: int  # bytes on disk
    identity: Identity


class WorkspaceFiles:
    """The files named in `paths` (name -> path in the home), each read again only when its identity changed."""

    def __init__(self, paths: Mapping[str, Path], lock_file: Path) -> None:
        self.paths = dict(paths)
        self.lock_file = lock_file
        self._cache: dict[str, tuple[Identity, WorkspaceFile | OSError]] = {}
        self._cache_lock = threading.Lock()
        self.on_write: list[Callable[[Path, bytes | None], None]] = []  # told of each write (critical-file checksums)

    def read(self, name: str) -> WorkspaceFile | None:
        """The file as it is now, None if absent; a file rockmem will not read (a link, a FIFO, a folder, too
        large) raises its OSError, logged once per identity. `name` must be one of `paths`."""
        path = self.paths[name]
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            with self._cache_lock:
                self._cache.pop(name, None)
            return None
        identity = (info.st_ino, info.st_mtime_ns, info.st_size)
        with self._cache_lock:
            cached = self._cache.get(name)
        if cached is None or cached[0] != identity:
            try:
                loaded: WorkspaceFile | OSError = self._load(name, path, identity)
            except FileNotFoundError:  # removed since the lstat
                return None
            except OSError as exc:
                log.warning("workspace file %s is skipped: %s", path, exc)
                loaded = exc
            cached = (identity, loaded)
            with self._cache_lock:
                self._cache[name] = cached
        if isinstance(cached[1], OSError):
            raise cached[1]
        return cached[1]

    def readable(self, name: str) -> WorkspaceFile | None:
        """read(), with a file rockmem will not read taken as absent (it was logged)."""
        try:
            return self.read(name)
        except OSError:
            return None

    def _load(self, name: str, path: Path, identity: Identity) -> WorkspaceFile:
        if identity[2] > MAX_FILE_BYTES:
            raise TooLargeFileError(path, identity[2])
        data = read_bytes(path)  # a link or special file is refused here, never followed or waited on
        return WorkspaceFile(name, decode(data, path), version_of(data), len(data), identity)

    def write(
        self, name: str, data: bytes, version: str | None = None, then: Callable[[bytes | None], None] | None = None
    ) -> WorkspaceFile:
        """Replace the file with `data` atomically and durably; with `version`, only if the file is still that
        version (ChangedSinceReadError otherwise: absent, unreadable or different). `then` is called under the
        lock once the file is in place, with the bytes it replaced (None: there was no file); if it raises, those
        are put back (or the new file removed) and its error is raised."""
        path = self.paths[name]
        with held(self.lock_file):
            try:
                previous: bytes | None = read_bytes(path)  # fresh, not cached: under the lock, the truth
            except FileNotFoundError:
                previous = None
            except OSError:  # a link or special file: replaced itself by the write, never read
                previous = None
            if version is not None:
                current = version_of(previous) if previous is not None else None
                if current != version:
                    now = f"it is now version {current}" if current else "it is gone or unreadable now"
                    raise ChangedSinceReadError(
                        f"{name} changed since you read it (you had version {version}; {now}): read "
                        f"rockmem://workspace/{name} again, apply your change to it, and write with the new version"
                    )
            with writing(path):
                atomic_write(path, data)  # a link at `path` is replaced itself, never its target
            if then is not None:
                try:
                    then(previous)
                except BaseException:
                    with self._cache_lock:
                        self._cache.pop(name, None)
                    try:
                        with writing(path):
                            if previous is None:
                                remove_durably(path)
                            else:
                                atomic_write(path, previous)
                    except OSError as exc:
                        log.warning("could not put %s back after a failed write: %s", path, exc)
                    raise
            for listener in self.on_write:
                listener(path, data)
            info = os.lstat(path)
            written = WorkspaceFile(
                name, decode(data, path), version_of(data), len(data), (info.st_ino, info.st_mtime_ns, info.st_size)
            )
            with self._cache_lock:
                self._cache[name] = (written.identity, written)
            return written


def decode(data: bytes, path: Path) -> str:
    """UTF-8 text (a leading byte-order mark dropped); bytes that are not UTF-8 become U+FFFD, with a warning."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        log.warning(
            "workspace file %s is not valid UTF-8 (byte 0x%02x at offset %d); undecodable bytes read as U+FFFD",
            path,
            data[exc.start],
            exc.start,
        )
        return data.decode("utf-8-sig", errors="replace")
