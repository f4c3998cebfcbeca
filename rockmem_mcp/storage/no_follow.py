"""Opening files and making folders inside the data home without following symbolic links out of it.

The home itself may be a link (a home kept on another disk): it is resolved once, in the settings. Inside it
rockmem follows no link. A link planted where a store file should be is refused as if the file were
unreadable, so a reader skips it with a warning and a writer replaces the link, never its target; a link
planted where a store folder should be is refused before anything is written through it.

Only regular files are opened: a FIFO, socket or device is refused the same way, without waiting on it. A
write the filesystem refuses (a read-only mount, no permission) becomes ReadOnlyHomeError.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path

from rockmem_mcp.errors import READ_ONLY_ERRNOS, ConfigError, LinkRefusedError, ReadOnlyHomeError, SpecialFileError

# O_NOFOLLOW refuses a link as the last part of the path; the folders above it are checked by real_folders.
NO_FOLLOW = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
# A FIFO opened without O_NONBLOCK waits for a writer (or reader) forever, and a terminal device could become
# the controlling terminal: every open is non-blocking and the type is checked before anything is read. For a
# regular file O_NONBLOCK changes nothing (reads and writes of regular files never block on it).
NO_WAIT = getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
# How a filesystem says "not by you": a read-only mount, or files and folders this user may not change.


def open_fd(path: str | Path, flags: int, mode: int = 0o644) -> int:
    """os.open of a regular file: a symbolic link at `path` is refused (LinkRefusedError), not followed; a
    FIFO, socket or device is refused (SpecialFileError) without waiting on it; an open for writing that the
    filesystem refuses raises ReadOnlyHomeError."""
    if flags & WRITE_FLAGS:
        with writing(path):
            return _open_regular(path, flags, mode)[0]
    return _open_regular(path, flags, mode)[0]


@contextlib.contextmanager
def writing(path: str | Path) -> Iterator[None]:
    """Around a write inside the home: the filesystem's refusal (read-only, no permission) becomes
    ReadOnlyHomeError, whose message a model or a user can act on."""
    try:
        yield
    except ReadOnlyHomeError:
        raise
    except OSError as exc:
        if exc.errno not in READ_ONLY_ERRNOS:
            raise
        raise ReadOnlyHomeError(exc.filename or path, exc.strerror or "not writable") from None


def open_existing(path: str | Path) -> int | None:
    """A read-only descriptor of a lock file a writer made (flock needs no write access), or None."""
    try:
        return open_fd(path, os.O_RDONLY)
    except OSError:
        return None


def make_folders(folder: Path) -> None:
    """mkdir -p for a store folder; a read-only home raises ReadOnlyHomeError (an existing folder is fine)."""
    with writing(folder):
        folder.mkdir(parents=True, exist_ok=True)


def read_only_reason(exc: OSError) -> str | None:
    """Why the home cannot be written, if `exc` is the filesystem refusing a write; None for other errors."""
    if isinstance(exc, ReadOnlyHomeError):
        return exc.reason
    return (exc.strerror or "not writable") if exc.errno in READ_ONLY_ERRNOS else None


def _open_regular(path: str | Path, flags: int, mode: int = 0o644) -> tuple[int, os.stat_result]:
    try:
        fd = os.open(path, flags | NO_FOLLOW | NO_WAIT, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise LinkRefusedError(path) from None
        if exc.errno == errno.ENXIO:  # a socket, or a FIFO opened for writing with no reader
            raise SpecialFileError(path, special_kind(path) or "special file") from None
        raise
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
        raise SpecialFileError(path, special_kind(path, info.st_mode) or "special file")
    return fd, info


def special_kind(path: str | Path, mode: int | None = None) -> str | None:
    """What `path` is if it is a FIFO, socket or device ('FIFO (named pipe)', …); None otherwise."""
    if mode is None:
        try:
            mode = os.lstat(path).st_mode
        except OSError:
            return None
    for test, kind in _SPECIAL_KINDS:
        if test(mode):
            return kind
    return None


_SPECIAL_KINDS = (
    (stat.S_ISFIFO, "FIFO (named pipe)"),
    (stat.S_ISSOCK, "socket"),
    (stat.S_ISCHR, "character device"),
    (stat.S_ISBLK, "block device"),
)


def read_bytes(path: str | Path) -> bytes:
    """The file's bytes; FileNotFoundError if absent, LinkRefusedError if `path` is a link, SpecialFileError
    if it is a FIFO, socket or device. Sized by the one fstat the type check made."""
    return read_bytes_and_stat(path)[0]


def read_bytes_and_stat(path: str | Path) -> tuple[bytes, os.stat_result]:
    """`read_bytes`, with the fstat of the very file read (taken before reading: a change during or after the
    read changes what a later stat says, so a cache keyed by it is never stale)."""
    fd, info = _open_regular(path, os.O_RDONLY)
    try:
        data = os.read(fd, info.st_size + 1)  # + 1: a short read is the end of a regular file, no second call
        if len(data) <= info.st_size:
            return data, info
        chunks = [data]
        while chunk := os.read(fd, 1 << 20):  # it grew since the fstat
            chunks.append(chunk)
        return b"".join(chunks), info
    finally:
        os.close(fd)


def check_folders(root: str, relative: str) -> None:
    """LinkRefusedError if a folder on `relative` (a '/'-path below `root`) is a link; missing ones end the
    check. Plain strings and one lstat per level: this is on the read path of every search result."""
    current = root
    for part in relative.split("/"):
        current = f"{current}/{part}"
        try:
            mode = os.lstat(current).st_mode
        except FileNotFoundError:
            return
        if stat.S_ISLNK(mode):
            raise LinkRefusedError(current)


def real_folders(root: Path, folder: Path) -> None:
    """Make `folder` and the folders between `root` and it, refusing any that is a link (`root` is trusted).

    Costs one lstat per level when they exist: cheap beside the fsync of the write that follows.
    """
    current = root
    if not root.is_dir():
        os.makedirs(root, exist_ok=True)
    for part in folder.relative_to(root).parts:
        current = current / part
        try:
            mode = os.lstat(current).st_mode
        except FileNotFoundError:
            try:
                os.mkdir(current)
            except FileExistsError:  # made by another process meanwhile: look at what it is
                mode = os.lstat(current).st_mode
            else:
                continue
        if stat.S_ISLNK(mode):
            raise LinkRefusedError(current)
        if not stat.S_ISDIR(mode):
            raise NotADirectoryError(errno.ENOTDIR, f"{current} is a file where rockmem keeps a folder")


def is_real_folder(path: str | Path) -> bool:
    """A folder, not a link to one (one lstat): nothing is written through a link out of the home."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def linked_folders(folders: Iterable[Path]) -> list[Path]:
    """The given folders that exist as symbolic links."""
    return [folder for folder in folders if folder.is_symlink()]


def refuse_linked_store_folders(store_dirs: Iterable[Path]) -> None:
    """ConfigError naming the store folders that are links: a home like that is not opened at all."""
    linked = linked_folders(store_dirs)
    if linked:
        raise ConfigError(
            f"{', '.join(map(str, linked))} {'is a symbolic link' if len(linked) == 1 else 'are symbolic links'}"
            "; rockmem follows no links inside its data home. Move the folder itself into the home, "
            "or point ROCKMEM_HOME at a home that holds it"
        )
