"""ParsedFiles: a record parsed from its file is kept only while that very file is unchanged."""

from __future__ import annotations

import os
import time
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


def settled(**kw: int) -> ParsedFiles[Note]:
    """A cache whose clock runs 10 s ahead: files written by the test count as settled (not racy)."""
    return ParsedFiles(Note, "note", "note", clock=lambda: time.time_ns() + 10_000_000_000, **kw)


def note_file(tmp_path: Path, text: str = "first") -> str:
    path = tmp_path / "n.json"
    atomic_write(path, Note(text=text).model_dump_json().encode())
    return str(path)


def test_an_unchanged_file_is_parsed_once(tmp_path: Path, reads: list[str]) -> None:
    path = note_file(tmp_path)
    parsed = settled()
    first = parsed.read(path)
    assert parsed.read(path) is first
    assert reads == [path]


def test_a_replaced_file_is_read_again(tmp_path: Path, reads: list[str]) -> None:
    path = note_file(tmp_path)
    parsed = settled()
    assert parsed.read(path).text == "first"
    atomic_write(Path(path), Note(text="other").model_dump_json().encode())  # same size, new inode
    assert parsed.read(path).text == "other"
    assert len(reads) == 2


def test_an_edit_in_place_that_keeps_size_and_mtime_is_still_seen(tmp_path: Path) -> None:
    """A hand edit that writes the same number of bytes into the same inode and even restores the mtime:
    the ctime (which no one can set back) still tells the file changed."""
    path = note_file(tmp_path)
    parsed = settled()
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
    parsed = settled()
    parsed.read(path)
    elsewhere = tmp_path / "secret.json"
    elsewhere.write_text(Note(text="outside").model_dump_json())
    os.unlink(path)
    os.symlink(elsewhere, path)
    with pytest.raises(LinkRefusedError):
        parsed.read(path)


def test_a_removed_file_is_not_found_and_a_broken_one_is_reported_not_kept(tmp_path: Path) -> None:
    path = note_file(tmp_path)
    parsed = settled()
    parsed.read(path)
    os.unlink(path)
    with pytest.raises(FileNotFoundError):
        parsed.read(path)
    Path(path).write_text("{not json")
    for _ in range(2):  # a broken file is reported at every read, never answered from anything kept
        with pytest.raises(CorruptEntryError, match="not a valid note"):
            parsed.read(path)


def test_at_most_capacity_records_are_kept_oldest_dropped_first(tmp_path: Path, reads: list[str]) -> None:
    parsed = settled(capacity=2)
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


def test_a_file_changed_within_the_racy_window_is_read_every_time(tmp_path: Path, reads: list[str]) -> None:
    """Two same-size writes within one timestamp tick look alike (coarse clocks: older kernels, ZFS, FUSE,
    NFS, FAT), so a file changed in the last seconds is never kept: each read parses it again."""
    path = note_file(tmp_path)
    parsed = ParsedFiles(Note, "note", "note")  # the real clock: the file was written just now
    parsed.read(path)
    parsed.read(path)
    assert reads == [path, path]


def test_fresh_reads_the_file_and_keeps_nothing(tmp_path: Path, reads: list[str]) -> None:
    path = note_file(tmp_path)
    parsed = settled()
    parsed.read(path, fresh=True)
    parsed.read(path)
    parsed.read(path, fresh=True)
    assert reads == [path, path, path]
    parsed.read(path)  # the plain read above kept it
    assert len(reads) == 3


def test_big_files_are_not_kept_and_kept_bytes_are_bounded(tmp_path: Path, reads: list[str]) -> None:
    big = tmp_path / "big.json"
    big.write_text(Note(text="x" * (ParsedFiles.KEPT_FILE_BYTES + 1)).model_dump_json())
    parsed = settled(max_bytes=70)
    parsed.read(str(big))
    parsed.read(str(big))
    assert len(reads) == 2  # over the per-file limit: read each time
    small = []
    for name in ("a", "b", "c"):
        path = tmp_path / f"{name}.json"
        path.write_text(Note(text=name * 20).model_dump_json())  # 31 bytes each: three pass 70 bytes
        small.append(str(path))
        parsed.read(str(path))
    parsed.read(small[2])
    parsed.read(small[1])
    assert len(reads) == 5  # the two newest fit in 70 bytes
    parsed.read(small[0])
    assert len(reads) == 6
