"""MemoryFiles: one JSON file per entry, memory/{category}/{id}.json."""

from __future__ import annotations

import json
import os
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from rockmem_mcp.errors import CorruptEntryError
from rockmem_mcp.memory.files import STALE_TEMP_SECONDS, EntryLocation, MemoryFiles
from rockmem_mcp.models import MemoryEntry

T0 = datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)


@pytest.fixture
def files(tmp_path: Path) -> MemoryFiles:
    return MemoryFiles(tmp_path / "memory")


def entry(entry_id: str = "abc123def456", category: str | None = None, content: str = "hello world") -> MemoryEntry:
    return MemoryEntry(id=entry_id, content=content, category=category, tags=["t1"], created_at=T0)


def touch(path: Path, data: bytes = b"{}") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def test_path_layout(files: MemoryFiles) -> None:
    assert (
        files.path_for("abc", "user-preferences/timezone") == files.root / "user-preferences" / "timezone" / "abc.json"
    )
    assert files.path_for("abc", None) == files.root / "abc.json"


def walk(files: MemoryFiles) -> list[EntryLocation]:
    """Every entry file by name (a listing of every folder; stale temp files from crashes are cleared)."""
    return files.locations(files.list_folders().found)


def test_write_then_read_round_trip(files: MemoryFiles) -> None:
    e = entry(category="work/notes")
    files.write(e)
    path = files.root / "work" / "notes" / "abc123def456.json"
    raw = path.read_bytes()
    assert raw.endswith(b"\n")
    assert json.loads(raw)["content"] == "hello world"
    assert files.read(EntryLocation(e.id, "work/notes")) == e


def test_write_many_and_remove(files: MemoryFiles) -> None:
    entries = [entry("e1"), entry("e2", "a"), entry("e3", "a/b")]
    assert files.write_many(entries) == 3
    assert sorted((loc.entry_id, loc.category) for loc in walk(files)) == [("e1", None), ("e2", "a"), ("e3", "a/b")]
    assert files.remove(EntryLocation("e2", "a")) is True
    assert files.remove(EntryLocation("e2", "a")) is False
    assert not (files.root / "a" / "e2.json").exists()


def test_read_of_a_missing_file_raises_file_not_found(files: MemoryFiles) -> None:
    with pytest.raises(FileNotFoundError):
        files.read(EntryLocation("nothere", None))


def test_walk_of_a_missing_root_is_empty(files: MemoryFiles) -> None:
    assert walk(files) == []


def test_walk_finds_entries_by_name_only(files: MemoryFiles) -> None:
    root = files.root
    touch(root / "top1.json")
    touch(root / "a" / "mid1.json")
    touch(root / "a" / "b-c" / "deep_1.json")
    touch(root / "emptycat" / "x1.json", b"not even json")  # found by name; reading is another matter
    # Ignored: dotfiles, other extensions, names that are not ids, invalid or hidden folders.
    touch(root / ".hidden.json")
    touch(root / "notes.txt")
    touch(root / "a" / "README")
    touch(root / "bad name.json")
    touch(root / "-dash.json")
    touch(root / "a.b.json")
    touch(root / "bad folder" / "skipped1.json")
    touch(root / "a" / "sp ace" / "skipped2.json")
    touch(root / ".git" / "skipped3.json")
    found = sorted(walk(files), key=lambda loc: loc.entry_id)
    assert found == [
        EntryLocation("deep_1", "a/b-c"),
        EntryLocation("mid1", "a"),
        EntryLocation("top1", None),
        EntryLocation("x1", "emptycat"),
    ]


def test_walk_clears_only_stale_temp_files(files: MemoryFiles) -> None:
    stale = touch(files.root / "a" / ".e1.json.0badf00d.tmp")
    fresh = touch(files.root / "a" / ".e2.json.0badf00d.tmp")
    old = time.time() - STALE_TEMP_SECONDS - 60
    os.utime(stale, (old, old))
    assert walk(files) == []
    assert not stale.exists()
    assert fresh.exists()


@pytest.mark.parametrize(
    "data",
    [
        b"{not json",
        b"",
        b'{"id": "x"}',
        b"[1, 2, 3]",
        b'{"id": "x", "content": "c", "created_at": "yesterday"}',
        b"\xff\xfe",
    ],
    ids=["syntax", "empty", "missing-fields", "not-object", "bad-date", "not-utf8"],
)
def test_malformed_file_raises_corrupt_entry_and_is_kept(files: MemoryFiles, data: bytes) -> None:
    path = touch(files.root / "cat" / "broken1.json", data)
    with pytest.raises(CorruptEntryError) as info:
        files.read(EntryLocation("broken1", "cat"))
    assert str(path) in str(info.value)
    assert path.read_bytes() == data


def test_a_file_moved_by_hand_takes_its_folder_as_category(files: MemoryFiles) -> None:
    e = entry(category="old/place")
    files.write(e)
    target = files.root / "new" / "place" / f"{e.id}.json"
    target.parent.mkdir(parents=True)
    (files.root / "old" / "place" / f"{e.id}.json").rename(target)
    [location] = walk(files)
    assert location == EntryLocation(e.id, "new/place")
    moved = files.read(location)
    assert (moved.id, moved.category, moved.content) == (e.id, "new/place", e.content)
    (files.root / "new" / "place" / f"{e.id}.json").rename(files.root / f"{e.id}.json")
    assert files.read(EntryLocation(e.id, None)).category is None


def test_a_file_renamed_by_hand_takes_its_name_as_id(files: MemoryFiles) -> None:
    files.write(entry("original1"))
    (files.root / "original1.json").rename(files.root / "renamed1.json")
    assert files.read(EntryLocation("renamed1", None)).id == "renamed1"
