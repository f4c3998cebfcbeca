"""Long-term memory entries as JSON files: memory/{category}/{id}.json, uncategorized memory/{id}.json."""

from __future__ import annotations

import contextlib
import logging
import os
import stat
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from rockmem_mcp.models import EntryLocation, MemoryEntry, normalize_category, validate_entry_id
from rockmem_mcp.storage.atomic import TEMP_SUFFIX, atomic_write, atomic_write_many, remove_durably
from rockmem_mcp.storage.no_follow import check_folders, real_folders, writing
from rockmem_mcp.storage.records import ParsedFiles

log = logging.getLogger(__name__)

STALE_TEMP_SECONDS = 3600
# A folder's inode, mtime and ctime (ns): adding, removing or renaming an entry in it changes them, so a folder
# whose stamp is unchanged since a listing holds the names that listing saw (a start lists only the others).
FolderStamp = tuple[int, int, int]
ROOT_FOLDER = "."  # the memory folder itself, among the stamps' relative paths
# A folder changed this recently is not stamped: a change within the same tick of its timestamp (coarse clocks,
# 2 s on FAT) would leave the stamp as it was. It is listed again next time.
RACY_NS = 3_000_000_000
LIST_AGAIN: FolderStamp = (-1, -1, -1)  # the stamp of a folder to list at the next start whatever it holds


@dataclass
class FolderListing:
    found: dict[str | None, set[str]] = field(default_factory=dict)  # file stems per folder that was listed
    unchanged: set[str | None] = field(default_factory=set)  # folders not listed: their stamp matched
    stamps: dict[str, FolderStamp] = field(default_factory=dict)  # every real folder's, by path (ROOT_FOLDER, a/b)
    folders: dict[str | None, str] = field(default_factory=dict)  # each category's folder, as a key of `stamps`

    def list_again(self, category: str | None) -> None:
        """The category's folder is listed at the next start even if unchanged (a file in it could not be read:
        fixed in place, which changes no folder, it is read then)."""
        if category in self.folders:
            self.stamps[self.folders[category]] = LIST_AGAIN


class MemoryFiles:
    def __init__(self, root: Path) -> None:
        self.root = root
        self._root_text = str(root)
        self._warned: set[str] = set()
        self._real_categories: set[str] = set()  # category folders checked: not links
        self._parsed = ParsedFiles(MemoryEntry, "memory", "entry")

    def path_for(self, entry_id: str, category: str | None) -> Path:
        return Path(self._path_text(entry_id, category))

    def _path_text(self, entry_id: str, category: str | None) -> str:
        # The one place the layout is spelled out; a string, as batches of files are written by it.
        return f"{self._root_text}/{category}/{entry_id}.json" if category else f"{self._root_text}/{entry_id}.json"

    @staticmethod
    def encode(entry: MemoryEntry) -> bytes:
        return entry.model_dump_json(indent=2, exclude_none=False).encode() + b"\n"

    def read(self, location: EntryLocation, fresh: bool = False) -> MemoryEntry:
        """Parse one entry; FileNotFoundError if absent, CorruptEntryError if unreadable. An unchanged file's
        entry is parsed once (`ParsedFiles`); `fresh` reads the file itself (a read that will be written back,
        a rebuild, another process's change).

        The path is the truth about where an entry lives: a file moved by hand into another folder takes
        that folder as its category. The one exception is case: on a case-insensitive filesystem (macOS,
        Windows) a folder keeps the case it was made with, so an entry whose category differs from its folder
        only by case, and whose file its own spelling reaches, keeps the category it was saved with.
        """
        path = self._path_text(location.entry_id, location.category)
        self.check_folder(location.category)  # a linked folder is never listed, but a journal line can name it
        entry = self._parsed.read(path, fresh)  # a link there: LinkRefusedError, which readers skip as broken
        if entry.id != location.entry_id or entry.category != location.category:
            category = self.true_category(location, entry.category)
            entry = entry.model_copy(update={"id": location.entry_id, "category": category})
        return entry

    def true_category(self, location: EntryLocation, saved: str | None) -> str | None:
        """The category of the entry file at `location` whose JSON says `saved` (see read)."""
        if self.case_twins(location, EntryLocation(location.entry_id, saved)):
            return saved  # a case-insensitive filesystem: the folder keeps the case of its first spelling
        return location.category

    def case_twins(self, one: EntryLocation, other: EntryLocation) -> bool:
        """Whether two places whose categories differ only by case are one file (a case-insensitive
        filesystem). Two lstats, only when the case differs."""
        if not (one.category and other.category and one.category.lower() == other.category.lower()):
            return False
        return self._one_file(one, other)

    def _one_file(self, one: EntryLocation, other: EntryLocation) -> bool:
        """Whether the two places name one existing file (the filesystem resolves both to one inode)."""
        try:
            first = os.lstat(self._path_text(one.entry_id, one.category))
            second = os.lstat(self._path_text(other.entry_id, other.category))
        except OSError:
            return False
        return os.path.samestat(first, second)

    def exists(self, location: EntryLocation) -> bool:
        return os.path.lexists(self._path_text(location.entry_id, location.category))

    def remove_moved(self, old: EntryLocation, new: EntryLocation) -> None:
        """Remove the file an entry left when it moved to `new`, unless it is the new file itself: on a
        case-insensitive filesystem (macOS, Windows) `Work/ID.json` and `work/ID.json` are one file, and
        removing the "old" one would erase the memory just written. Called right after `new` was written (a
        new inode, by rename), so the two names share an inode only when the filesystem resolves both to one
        file. Asked of the filesystem for every move, not only a case-only one: which names a filesystem
        takes for one is its business (case folding differs between them), and a move is rare."""
        if not self._one_file(old, new):
            self.remove(old)

    def warn_once(self, message: str) -> None:
        if message not in self._warned:
            self._warned.add(message)
            log.warning("%s", message)

    def check_folder(self, category: str | None) -> None:
        """LinkRefusedError if the category's folder, or one above it, is a symbolic link (nothing is made).

        A folder found real is not checked again by this process: two lstats on every search result read
        cost more than the search (a folder swapped for a link while the server runs is caught at next start,
        whose listing skips links)."""
        if category and category not in self._real_categories:
            check_folders(self._root_text, category)
            if os.path.isdir(f"{self._root_text}/{category}"):  # only an existing folder is known to be real
                self._real_categories.add(category)

    def write(self, entry: MemoryEntry) -> None:
        path = self.path_for(entry.id, entry.category)
        with writing(path):
            real_folders(self.root, path.parent)
            atomic_write(path, self.encode(entry))

    def write_many(self, entries: Iterable[MemoryEntry]) -> int:
        checked: set[str | None] = set()

        def item(entry: MemoryEntry) -> tuple[str, bytes]:
            if entry.category not in checked:
                real_folders(self.root, self.root / entry.category if entry.category else self.root)
                checked.add(entry.category)
            return self._path_text(entry.id, entry.category), self.encode(entry)

        with writing(self.root):
            return atomic_write_many(item(e) for e in entries)

    def remove(self, location: EntryLocation) -> bool:
        if location.category:  # not the cached check of reads: a delete is rare, and must not go through a link
            check_folders(self._root_text, location.category)
        path = self.path_for(location.entry_id, location.category)
        with writing(path):
            return remove_durably(path)

    def locations(self, found: Mapping[str | None, set[str]]) -> list[EntryLocation]:
        """The entries a listing's file stems stand for (names that are no id are warned of once)."""
        return [
            loc
            for category, stems in found.items()
            for stem in stems
            if (loc := self.location(stem, category)) is not None
        ]

    def list_folders(self, known: Mapping[str, FolderStamp] | None = None) -> FolderListing:
        """Every category folder's file stems, except in the folders whose stamp is in `known` unchanged: no file
        can have been added, removed or renamed there since (their names are what that listing saw), so they
        are not read. Each folder costs one lstat; only the changed ones a listing.

        Names only (os.listdir, set comprehensions): at 100,000 files a DirEntry per file cost a start 0.3 s."""
        listing = FolderListing()
        try:
            root_info = os.stat(self.root)
        except OSError:
            return listing
        if not stat.S_ISDIR(root_info.st_mode):
            return listing
        subfolders: dict[str, list[str]] = {}  # the known folders' own subfolders (an unchanged folder is not listed)
        for relative in known or ():
            parent, _, name = relative.rpartition("/")
            if relative != ROOT_FOLDER:
                subfolders.setdefault(parent or ROOT_FOLDER, []).append(name)
        stack: list[tuple[str, str, str | None, os.stat_result]] = [(str(self.root), ROOT_FOLDER, None, root_info)]
        now, now_ns = time.time(), time.time_ns()
        while stack:
            directory, relative, category, info = stack.pop()
            stamp = (info.st_ino, info.st_mtime_ns, info.st_ctime_ns)
            listing.folders[category] = relative
            # Changed in the last seconds: a change in the same timestamp tick could go unseen, so it is listed
            # again next time (kept as LIST_AGAIN, never a folder's stamp, so that its parent still names it).
            listing.stamps[relative] = stamp if now_ns - info.st_mtime_ns > RACY_NS else LIST_AGAIN
            if known is not None and known.get(relative) == stamp:
                listing.unchanged.add(category)
                names = subfolders.get(relative, [])
            else:
                try:
                    names = os.listdir(directory)
                except OSError as exc:
                    listing.stamps[relative] = LIST_AGAIN
                    self.warn_once(f"cannot list {directory}: {exc}")
                    continue
                stems = {name[:-5] for name in names if name.endswith(".json") and not name.startswith(".")}
                listing.found.setdefault(category, set()).update(stems)
            for name in names:
                if name.endswith(".json"):  # never a folder: category segments have no dots
                    continue
                path = os.path.join(directory, name)
                if name.startswith("."):
                    if name.endswith(TEMP_SUFFIX):
                        self._clear_stale_temp(path, now)
                    continue
                try:
                    sub_info = os.lstat(path)
                except OSError:  # gone since the listing
                    continue
                if not stat.S_ISDIR(sub_info.st_mode):  # a file, or a link: nothing is read through a link
                    continue
                sub = f"{category}/{name}" if category else name
                try:
                    sub_category = normalize_category(sub)
                except ValueError:
                    self.warn_once(f"ignoring folder {path}: not a valid category name")
                    continue
                sub_relative = name if relative == ROOT_FOLDER else f"{relative}/{name}"
                stack.append((path, sub_relative, sub_category, sub_info))
        return listing

    def location(self, stem: str, category: str | None) -> EntryLocation | None:
        """The entry a listed file stands for, or None (warned once) when its name is not an id."""
        try:
            return EntryLocation(validate_entry_id(stem), category)
        except ValueError:
            self.warn_once(f"ignoring {self.path_for(stem, category)}: file name is not a memory id")
            return None

    @staticmethod
    def _clear_stale_temp(path: str, now: float) -> None:
        with contextlib.suppress(OSError):
            if now - os.lstat(path).st_mtime > STALE_TEMP_SECONDS:
                os.unlink(path)
