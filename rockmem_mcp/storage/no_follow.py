"""Opening files and making folders inside the data home without following symbolic links out of it.

The home itself may be a link (a home kept on another disk): it is resolved once, in the settings. Inside it
rockmem follows no link. A link planted where a store file should be is refused as if the file were
unreadable, so a reader skips it with a warning and a writer replaces the link, never its target; a link
planted where a store folder should be is refused before anything is written through it.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable
from pathlib import Path

from rockmem_mcp.errors import ConfigError, LinkRefusedError

# O_NOFOLLOW refuses a link as the last part of the path; the folders above it are checked by real_folders.
NO_FOLLOW = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def open_fd(path: str | Path, flags: int, mode: int = 0o644) -> int:
    """os.open that refuses a symbolic link at `path` (LinkRefusedError) instead of following it."""
    try:
        return os.open(path, flags | NO_FOLLOW, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise LinkRefusedError(path) from None
        raise


def read_bytes(path: str | Path) -> bytes:
    """The file's bytes; FileNotFoundError if absent, LinkRefusedError if `path` is a link."""
    with os.fdopen(open_fd(path, os.O_RDONLY), "rb") as f:
        return f.read()


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
