"""Files people edit by hand (MEMORY.md, the workspace files): the version a reader is given, and the lock a
writer holds, shared by every such store.

`version_of` names a file's bytes (12 hex digits of their SHA-256): an edit that names the version it read is
refused if the file changed since. `held` is the cross-process lock: an exclusive `flock` on a lock file. It
belongs to the open file, so closing the descriptor releases it, also when the holder dies. The lock
file is opened like every file in the home (no link followed, no FIFO waited on); a read-only home raises
ReadOnlyHomeError when the folder or file cannot be made.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

from rockmem_mcp.storage.no_follow import make_folders, open_fd

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no cross-process coordination
    fcntl = None  # type: ignore[assignment]


VERSION_CHARS = 12


def version_of(data: bytes) -> str:
    """A file's version: the first 12 hex digits of the SHA-256 of its bytes (a missing file is the empty one)."""
    return hashlib.sha256(data).hexdigest()[:VERSION_CHARS]


@contextlib.contextmanager
def held(lock_file: Path) -> Iterator[None]:
    """Hold `lock_file` exclusively for the body (other processes' holders wait)."""
    make_folders(lock_file.parent)
    fd = open_fd(lock_file, os.O_RDWR | os.O_CREAT)
    try:
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock
