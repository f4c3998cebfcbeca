"""The one atomic writer: temp file in the target folder, fsync, rename, fsync the folder.

A reader sees the old file or the new one, never a torn write; after return the bytes survive a crash. A rewrite
keeps the file's permission bits (a private 0600 MEMORY.md stays private); a new file gets the default mode.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import BinaryIO

TEMP_SUFFIX = ".tmp"
_CAN_SET_MODE = hasattr(os, "fchmod")  # POSIX (and Windows from Python 3.13)


def temp_path_for(path: str | Path) -> str:
    # A dot prefix keeps temp files out of every store's directory walk. Plain strings: a batch of
    # 100k files spends noticeable time in pathlib otherwise.
    directory, name = os.path.split(path)
    return os.path.join(directory, f".{name}.{secrets.token_hex(4)}{TEMP_SUFFIX}")


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


Content = bytes | Callable[[BinaryIO], object]  # the bytes, or a function that writes them to a file


def _write_temp(path: str | Path, content: Content, durable: bool, mode: int | None = None) -> str:
    tmp = temp_path_for(path)
    try:
        with open(tmp, "xb") as f:
            if mode is not None:  # before the bytes: a private file's text is never in a readable temp file
                os.fchmod(f.fileno(), mode)
            if isinstance(content, bytes):
                f.write(content)
            else:
                content(f)
            f.flush()
            if durable:
                os.fsync(f.fileno())
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return tmp


def atomic_write(path: Path, content: Content, *, durable: bool = True) -> None:
    """Replace `path` atomically; durable=False skips the fsyncs (for derived data only)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _write_temp(path, content, durable, _kept_mode(path))
    try:
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if durable:
        fsync_dir(path.parent)


def _kept_mode(path: Path) -> int | None:
    """The permission bits of the regular file at `path`, which its replacement keeps; None if there is none."""
    if not _CAN_SET_MODE:
        return None
    try:
        st = os.lstat(path)
    except OSError:  # nothing there (a new file), or unreadable: the temp file's default mode
        return None
    return stat.S_IMODE(st.st_mode) if stat.S_ISREG(st.st_mode) else None


def atomic_create(path: Path, content: bytes) -> bool:
    """Write `path` whole and durably only if nothing is there (False, nothing written, if something is):
    a hard link of the finished temp file cannot replace an existing name, unlike a rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _write_temp(path, content, durable=True)
    try:
        os.link(tmp, path)
    except FileExistsError:
        return False
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
    fsync_dir(path.parent)
    return True


def atomic_write_many(items: Iterable[tuple[str | Path, bytes]]) -> int:
    """Write a batch of files, each atomically, the whole batch durably, with two syncs in all.

    Phase one writes every temp file and flushes them together; only then are they renamed into
    place and the renames flushed. A file therefore never appears before its bytes are on disk, yet a
    batch of thousands costs two filesystem flushes instead of one fsync per file.
    """
    staged: list[tuple[str, str | Path]] = []
    staged_done = 0
    folders: set[str] = set()
    try:
        for path, data in items:
            folder = os.path.dirname(path)
            if folder not in folders:
                os.makedirs(folder, exist_ok=True)
                folders.add(folder)
            staged.append((_write_temp(path, data, durable=False), path))
        count = len(staged)
        if count == 0:
            return 0
        os.sync()
        for done, (tmp, path) in enumerate(staged, start=1):
            os.replace(tmp, path)
            staged_done = done
        os.sync()
        return count
    finally:
        # Temp files not yet renamed (an error part-way) are removed; renamed ones are complete files.
        for tmp, _ in staged[staged_done:]:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def remove_durably(path: Path) -> bool:
    """Unlink `path` and persist the folder; False if it was already gone."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    fsync_dir(path.parent)
    return True
