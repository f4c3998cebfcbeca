"""ParsedFiles: a record parsed from its file is kept only while that very file is unchanged."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pydantic import BaseModel

from rockmem_mcp.errors import CorruptEntryError, LinkRefusedError
from rockmem_mcp.storage import records
from rockmem_mcp.storage.atomic import atomic_write
from rockmem_mcp.storage.records import ParsedFiles


class Note(BaseModel):
    text: str


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths actually opened and read (not answered from what was kept)."""
    opened: list[str] = []
    real = records.read_bytes_and_stat

    def counting(path: str | Path) -> tuple[bytes, os.stat_result]:
        opened.append(str(path))
        return real(path)

    monkeypatch.setattr(records, "read_bytes_and_stat", counting)
    return opened


def note_file(tmp_path: Path, text: str = "first") -> str:
    path = tmp_path / "n.json"
    atomic_write(path, Note(text=text).model_dump_json().encode())
    return str(path)


def test_an_unchanged_file_is_parsed_once(tmp_path: Path, reads: list[str]) -> None:
    path = note_file(tmp_path)
    parsed = ParsedFiles(Note, "note", "note")
    first = parsed.read(path)
    assert parsed.read(path) is first
    assert reads == [path]


def test_a_replaced_file_is_read_again(tmp_path: Path, reads: list[str]) -> None:
    path = note_file(tmp_path)
    parsed = ParsedFiles(Note, "note", "note")
    assert parsed.read(path).text == "first"
    atomic_write(Path(path), Note(text="other").model_dump_json().encode())  # same size, new inode
    assert parsed.read(path).text == "other"
    assert len(reads) == 2


def test_an_edit_in_place_that_keeps_size_and_mtime_is_still_seen(tmp_path: Path) -> None:
    """A hand edit that writes the same number of bytes into the same inode and even restores the mtime:
    the ctime (which no one can set back) still tells the file changed."""
    path = note_file(tmp_path)
    parsed = ParsedFiles(Note, "note", "note")
    assert parsed.read(path).text == "first"
    before = os.stat(path)
    with open(path, "r+b") as f:
        f.write(Note(text="fixed").model_dump_json().encode())
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(path)
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (before.st_ino, before.st_size, before.st_mtime_ns)
    if after.st_ctime_ns == before.st_ctime_ns:
        pytest.fail("the filesystem's ctime did not move within this test; the comparison cannot tell")
    assert parsed.read(path).text == "fixed"


def test_a_link_put_where_a_kept_file_was_is_refused(tmp_path: Path) -> None:
    path = note_file(tmp_path)
    parsed = ParsedFiles(Note, "note", "note")
    parsed.read(path)
    elsewhere = tmp_path / "secret.json"
    elsewhere.write_text(Note(text="outside").model_dump_json())
    os.unlink(path)
    os.symlink(elsewhere, path)
    with pytest.raises(LinkRefusedError):
        parsed.read(path)


def test_a_removed_file_is_not_found_and_a_broken_one_is_reported_not_kept(tmp_path: Path) -> None:
    path = note_file(tmp_path)
    parsed = ParsedFiles(Note, "note", "note")
    parsed.read(path)
    os.unlink(path)
    with pytest.raises(FileNotFoundError):
        parsed.read(path)
    Path(path).write_text("{not json")
    for _ in range(2):  # a broken file is reported at every read, never answered from anything kept
        with pytest.raises(CorruptEntryError, match="not a valid note"):
            parsed.read(path)


def test_at_most_capacity_records_are_kept_oldest_dropped_first(tmp_path: Path, reads: list[str]) -> None:
    parsed = ParsedFiles(Note, "note", "note", capacity=2)
    paths = []
    for name in ("a", "b", "c"):
        path = tmp_path / f"{name}.json"
        path.write_text(Note(text=name).model_dump_json())
        paths.append(str(path))
        parsed.read(str(path))
    assert len(reads) == 3
    parsed.read(paths[2])
    parsed.read(paths[1])
    assert len(reads) == 3  # the two newest were kept
    parsed.read(paths[0])
    assert len(reads) == 4  # the oldest was dropped
