"""Working-memory files: `working-memory/{root}.json`, one per top key segment, shared by processes.

A change is read-modify-write under an exclusive `flock` on a lock file beside it, and the file is replaced
atomically and durably, so two processes never lose each other's entries. Readers take the file as it is
(an atomic rename means whole old or whole new) and re-parse it only when its identity changed.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rockmem_mcp.storage.atomic import atomic_write
from rockmem_mcp.storage.no_follow import make_folders, open_fd, read_bytes

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no cross-process coordination
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger(__name__)

Entries = dict[str, dict[str, Any]]  # full key -> the entry's fields as JSON


class WorkingFiles:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._cache: dict[str, tuple[tuple[int, int, int], Entries]] = {}
        # Each entry's JSON as last written, with the object it encodes: reused while the entry is that same
        # object, so a rewrite encodes only what changed (a full namespace of 2 KB values is ~100 KB of JSON).
        self._encoded: dict[str, dict[str, tuple[Any, str]]] = {}

    def _path(self, root: str) -> Path:
        return self.directory / f"{root}.json"  # `root` is validated by the caller: letters only

    def read(self, root: str) -> Entries:
        """The entries in `root`'s file ({} if none); a damaged file is reported and read as empty."""
        path = self._path(root)
        try:
            stat = os.stat(path)
        except FileNotFoundError:
            self._cache.pop(root, None)
            return {}
        identity = _identity(stat)
        cached = self._cache.get(root)
        if cached is not None and cached[0] == identity:
            return cached[1]
        try:
            data = json.loads(read_bytes(path))
            entries = data["entries"]
            if not isinstance(entries, dict):
                raise ValueError("'entries' is not an object")
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.warning("working-memory file %s is unreadable (%s); treating it as empty until rewritten", path, exc)
            entries = {}
        self._cache[root] = (identity, entries)
        return entries

    def _encode(self, root: str, after: Entries) -> dict[str, tuple[Any, str]]:
        known = self._encoded.get(root, {})
        encoded = {}
        for key, value in after.items():
            cached = known.get(key)
            encoded[key] = cached if cached is not None and cached[0] is value else (value, _dumps(value))
        return encoded

    @contextlib.contextmanager
    def changing(self, root: str) -> Iterator[Entries]:
        """Hold `root`'s lock, yield its current entries to change in place, then write them back."""
        make_folders(self.directory)
        fd = open_fd(self.directory / f".{root}.lock", os.O_RDWR | os.O_CREAT)
        try:
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_EX)
            entries = dict(self.read(root))
            yield entries
            encoded = self._encode(root, entries)
            body = '{"entries":{' + ",".join(f"{_dumps(key)}:{encoded[key][1]}" for key in entries) + "}}"
            path = self._path(root)
            atomic_write(path, body.encode())
            # Still under the lock, so the file is ours: the next read need not parse what we just wrote.
            self._cache[root] = (_identity(os.stat(path)), entries)
            self._encoded[root] = encoded
        finally:
            os.close(fd)  # closing releases the lock


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _identity(stat: os.stat_result) -> tuple[int, int, int]:
    return (stat.st_ino, stat.st_mtime_ns, stat.st_size)
