"""Long-term memory entries as JSON files: memory/{category}/{id}.json, uncategorized memory/{id}.json."""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from rockmem_mcp.errors import CorruptEntryError
from rockmem_mcp.models import MemoryEntry, normalize_category, validate_entry_id
from rockmem_mcp.storage.atomic import TEMP_SUFFIX, atomic_write, atomic_write_many, remove_durably

log = logging.getLogger(__name__)

STALE_TEMP_SECONDS = 3600


@dataclass(frozen=True)
class EntryLocation:
    entry_id: str
    category: str | None


class MemoryFiles:
    def __init__(self, root: Path) -> None:
        self.root = root
        self._warned: set[str] = set()

    def path_for(self, entry_id: str, category: str | None) -> Path:
        return (self.root / category / f"{entry_id}.json") if category else self.root / f"{entry_id}.json"

    @staticmethod
    def encode(entry: MemoryEntry) -> bytes:
        return entry.model_dump_json(indent=2, exclude_none=False).encode() + b"\n"

    def read(self, location: EntryLocation) -> MemoryEntry:
        """Parse one entry; FileNotFoundError if absent, CorruptEntryError if unreadable.

        The path is the truth about where an entry lives: a file moved by hand into another folder takes
        that folder as its category.
        """
        path = self.path_for(location.entry_id, location.category)
        data = path.read_bytes()
        try:
            entry = MemoryEntry.model_validate_json(data)
        except ValidationError as exc:
            raise CorruptEntryError(
                f"memory file {path} is not a valid entry ({exc.error_count()} problem(s), first: "
                f"{exc.errors()[0]['msg']}); fix or move it away — rockmem never deletes it"
            ) from None
        if entry.id != location.entry_id or entry.category != location.category:
            entry = entry.model_copy(update={"id": location.entry_id, "category": location.category})
        return entry

    def warn_once(self, message: str) -> None:
        if message not in self._warned:
            self._warned.add(message)
            log.warning("%s", message)

    def write(self, entry: MemoryEntry) -> None:
        atomic_write(self.path_for(entry.id, entry.category), self.encode(entry))

    def write_many(self, entries: Iterable[MemoryEntry]) -> int:
        return atomic_write_many((self.path_for(e.id, e.category), self.encode(e)) for e in entries)

    def remove(self, location: EntryLocation) -> bool:
        return remove_durably(self.path_for(location.entry_id, location.category))

    def walk(self) -> list[EntryLocation]:
        """Every entry file by name only (no reads, no stats); stale temp files from crashes are cleared."""
        found: list[EntryLocation] = []
        if not self.root.is_dir():
            return found
        stack: list[tuple[Path, str | None]] = [(self.root, None)]
        now = time.time()
        while stack:
            directory, category = stack.pop()
            try:
                entries = list(os.scandir(directory))
            except OSError as exc:
                self.warn_once(f"cannot list {directory}: {exc}")
                continue
            for item in entries:
                name = item.name
                if name.startswith("."):
                    if name.endswith(TEMP_SUFFIX):
                        self._clear_stale_temp(item, now)
                    continue
                if item.is_dir(follow_symlinks=False):
                    sub = f"{category}/{name}" if category else name
                    try:
                        stack.append((Path(item.path), normalize_category(sub)))
                    except ValueError:
                        self.warn_once(f"ignoring folder {item.path}: not a valid category name")
                elif name.endswith(".json"):
                    stem = name[:-5]
                    try:
                        found.append(EntryLocation(validate_entry_id(stem), category))
                    except ValueError:
                        self.warn_once(f"ignoring {item.path}: file name is not a memory id")
        return found

    @staticmethod
    def _clear_stale_temp(item: os.DirEntry[str], now: float) -> None:
        with contextlib.suppress(OSError):
            if now - item.stat(follow_symlinks=False).st_mtime > STALE_TEMP_SECONDS:
                os.unlink(item.path)
