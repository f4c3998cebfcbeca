"""Which processes have a data home open, and cleaning up after crashed ones.

Every open memory store holds a shared lock on `{home}/.rockmem.lock`. A store that is granted the
exclusive lock instead is alone on the home, so no other process can be half-way through a write: it
first removes the temp files that interrupted writes left anywhere in the home (they were never
acknowledged: the rename that publishes a write had not happened), then keeps a shared lock like the rest.

Walking every folder of a big home costs a noticeable part of a start (about 0.2 s at 100,000 memories), and
only a process that ended without closing can have left temp files. So each writable claim leaves a marker in
`.rockmem-open/` that a clean close removes: the walk runs only when a marker outlived its process (a crash, a
kill) or the folder is missing (a home from before markers, or one whose folder was removed).
A repair that moves files (doctor --fix) takes the lock exclusively for its whole run: it refuses while any
store is open, naming the processes, and a store opened meanwhile waits until the repair is done.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterable, Iterator
from datetime import datetime
from pathlib import Path

from rockmem_mcp.errors import HomeInUseError
from rockmem_mcp.storage.atomic import TEMP_SUFFIX, fsync_dir
from rockmem_mcp.storage.no_follow import (
    is_real_folder,
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
OPEN_FOLDER = ".rockmem-open"  # one marker per open writable claim; "*.lock" names keep them out of the history
SKIPPED_FOLDERS = ("quarantine", ".git")  # git keeps its own temporary files, and the walk would be long


class HomeClaim:
    def __init__(self, home: Path, store_dirs: Iterable[Path] = ()) -> None:
        """Claim `home`; refuses (ConfigError) a home whose store folders include a symbolic link."""
        home.mkdir(parents=True, exist_ok=True)
        refuse_linked_store_folders(store_dirs)
        self.cleaned = 0
        self.swept = False  # whether this claim walked the home for temp files
        self.read_only: str | None = None  # why this process cannot write the home, when it cannot
        self._marker: Path | None = None
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
            if _unclean(home):
                self.swept = True
                self.cleaned = remove_temp_files(home)
                if self.cleaned:
                    log.info("removed %d temp file(s) left by interrupted writes in %s", self.cleaned, home)
            _clear_markers(home)  # alone on the home: every marker left is a process that is gone
        self._marker = _leave_marker(home)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            log.info("waiting for %s: another process has it to itself (doctor --fix, or a start clearing up)", home)
            fcntl.flock(self._fd, fcntl.LOCK_SH)

    def close(self) -> None:
        if self._marker is not None:  # before the lock goes: a closed claim can have no write in flight
            with contextlib.suppress(OSError):
                os.unlink(self._marker)
            self._marker = None
        if self._fd is not None:
            os.close(self._fd)  # closing releases the lock
            self._fd = None  # closed twice (a service closed by its caller and by a fixture) is once


def read_only_notice(home: Path, reason: str) -> str:
    """The one line a process says when it opens a home it cannot write."""
    return (
        f"the data home {home} is read-only for this process ({reason}): searching, recall, get, stats and "
        "export work; saving, updating and deleting memories, working memory, graph changes, feedback, the "
        "conversation log and dreams are refused until it is writable"
    )


@contextlib.contextmanager
def home_to_itself(home: Path) -> Iterator[None]:
    """Hold the home exclusively for the body; HomeInUseError, naming the processes, while any store is open."""
    fd = open_fd(home / LOCK_NAME, os.O_RDWR | os.O_CREAT)
    try:
        if fcntl is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holders = ", ".join(home_users(home)) or "another process"
                raise HomeInUseError(
                    f"{home} is in use by {holders}: stop it (the server, or a command still running) and run "
                    "this again; doctor without --fix only reports and can run beside it"
                ) from None
        yield
    finally:
        os.close(fd)


def home_users(home: Path) -> list[str]:
    """The processes holding the home's lock, as 'pid N (command line)', from /proc/locks (Linux; [] elsewhere)."""
    try:
        info = os.stat(home / LOCK_NAME)
        with open("/proc/locks", encoding="ascii", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    wanted = f"{os.major(info.st_dev):02x}:{os.minor(info.st_dev):02x}:{info.st_ino}"
    pids = sorted({int(p[4]) for line in lines if len(p := line.split()) > 5 and p[1] == "FLOCK" and p[5] == wanted})
    return [f"pid {pid}{_command(pid)}" for pid in pids if pid != os.getpid()]


def _command(pid: int) -> str:
    """The process's command line, printable, cut at 400 characters (enough for a deep --home path)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            words = f.read().split(b"\0")
    except OSError:
        return ""
    text = "".join(c if c.isprintable() else "?" for c in " ".join(w.decode(errors="replace") for w in words if w))
    return f" ({text[:400]})" if text else ""


def _unclean(home: Path) -> bool:
    """Whether a process may have left temp files: a marker of one that never closed, or no marker folder."""
    folder = home / OPEN_FOLDER
    if not is_real_folder(folder):
        return True
    try:
        with os.scandir(folder) as markers:
            return any(True for _ in markers)
    except OSError:
        return True


def _clear_markers(home: Path) -> None:
    folder = home / OPEN_FOLDER
    if not is_real_folder(folder):
        return
    with contextlib.suppress(OSError), os.scandir(folder) as markers:
        for marker in markers:
            with contextlib.suppress(OSError):
                os.unlink(marker.path)


def _leave_marker(home: Path) -> Path | None:
    """This claim's marker, made durable before any write it covers (a crash after a temp file's fsync must
    leave the marker behind too). None where it cannot be made: the next claim then walks, as before markers."""
    folder = home / OPEN_FOLDER
    marker = folder / f"{os.getpid()}-{os.urandom(4).hex()}.lock"
    try:
        with contextlib.suppress(FileExistsError):
            os.mkdir(folder)
        if not is_real_folder(folder):  # a link planted there must not carry markers out
            raise NotADirectoryError(f"{folder} is not a folder")
        os.close(open_fd(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL))
        fsync_dir(folder)
    except OSError as exc:
        log.debug("no open marker in %s (%s): the next start walks the home for temp files", folder, exc)
        with contextlib.suppress(OSError):
            os.rmdir(folder)  # an empty folder would read as a clean close
        return None
    return marker


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
