"""Which processes have a data home open, and cleaning up after crashed ones.

Every open memory store holds a shared lock on `{home}/.rockmem.lock`. A store that is granted the
exclusive lock instead is alone on the home, so no other process can be half-way through a write: it
first removes the temp files that interrupted writes left anywhere in the home (they were never
acknowledged: the rename that publishes a write had not happened), then keeps a shared lock like the rest.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path

from rockmem_mcp.storage.atomic import TEMP_SUFFIX
from rockmem_mcp.storage.no_follow import (
    open_existing,
    open_fd,
    read_only_reason,
    real_folders,
    refuse_linked_store_folders,
)

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: temp files are left to the hour-old sweep of listings
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger(__name__)

LOCK_NAME = ".rockmem.lock"
SKIPPED_FOLDERS = ("quarantine",)


class HomeClaim:
    def __init__(self, home: Path, store_dirs: Iterable[Path] = ()) -> None:
        """Claim `home`; refuses (ConfigError) a home whose store folders include a symbolic link."""
        home.mkdir(parents=True, exist_ok=True)
        refuse_linked_store_folders(store_dirs)
        self.cleaned = 0
        self.read_only: str | None = None  # why this process cannot write the home, when it cannot
        try:
            self._fd: int | None = open_fd(home / LOCK_NAME, os.O_RDWR | os.O_CREAT)
        except OSError as exc:
            self.read_only = read_only_reason(exc)
            if self.read_only is None:
                raise
            self._fd = open_existing(home / LOCK_NAME)  # still a shared lock: doctor --fix sees a reader
        if fcntl is None or self._fd is None:
            return
        if self.read_only:
            fcntl.flock(self._fd, fcntl.LOCK_SH)
            return
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pass  # others have the home open: their temp files may be writes in progress
        else:
            self.cleaned = remove_temp_files(home)
            if self.cleaned:
                log.info("removed %d temp file(s) left by interrupted writes in %s", self.cleaned, home)
        fcntl.flock(self._fd, fcntl.LOCK_SH)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing releases the lock


def read_only_notice(home: Path, reason: str) -> str:
    """The one line a process says when it opens a home it cannot write."""
    return (
        f"the data home {home} is read-only for this process ({reason}): searching, recall, get, stats and "
        "export work; saving, updating and deleting memories, working memory, graph changes, feedback, the "
        "conversation log and dreams are refused until it is writable"
    )


def remove_temp_files(home: Path) -> int:
    removed = 0
    for directory, folders, names in os.walk(home, followlinks=False):
        folders[:] = [f for f in folders if f not in SKIPPED_FOLDERS]
        for name in names:
            if name.startswith(".") and name.endswith(TEMP_SUFFIX):
                try:
                    os.unlink(os.path.join(directory, name))
                    removed += 1
                except OSError:
                    continue
    return removed


def quarantine(home: Path, path: Path, now: datetime) -> Path:
    """Move a file the home should not use to quarantine/{time}/ under its relative path (never deleted)."""
    target = home / "quarantine" / now.strftime("%Y%m%dT%H%M%SZ") / path.relative_to(home)
    real_folders(home, target.parent)  # a link planted under quarantine/ must not carry the file out
    os.replace(path, target)
    return target
