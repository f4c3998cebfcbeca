"""ChangeJournal: how one process learns what others on the same home wrote."""

from __future__ import annotations

import errno
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from rockmem_mcp.storage import changes
from rockmem_mcp.storage.changes import ChangeJournal, JournalPosition


@pytest.fixture
def journal_dir(tmp_path: Path) -> Path:
    return tmp_path / "index"


@pytest.fixture
def pair(journal_dir: Path) -> Iterator[tuple[ChangeJournal, ChangeJournal]]:
    a, b = ChangeJournal(journal_dir, "writer-a"), ChangeJournal(journal_dir, "writer-b")
    yield a, b
    a.close()
    b.close()


def payloads(records: list[dict]) -> list[int]:
    return [r["n"] for r in records]


def generation_file(directory: Path, generation: int) -> Path:
    return directory / f"changes-{generation:08d}.jsonl"


def test_a_new_journal_starts_at_generation_one(journal_dir: Path) -> None:
    journal = ChangeJournal(journal_dir)
    try:
        assert journal.end() == JournalPosition(1, 0)
        assert generation_file(journal_dir, 1).exists()
    finally:
        journal.close()


def test_writer_ids_default_to_distinct_random_values(journal_dir: Path) -> None:
    a, b = ChangeJournal(journal_dir), ChangeJournal(journal_dir)
    try:
        assert a.writer_id and a.writer_id != b.writer_id
    finally:
        a.close()
        b.close()


def test_records_of_one_writer_are_read_by_the_other_not_itself(pair: tuple[ChangeJournal, ChangeJournal]) -> None:
    a, b = pair
    start = a.end()
    a.append([{"n": 1, "op": "put"}, {"n": 2}])
    b.append([{"n": 3}])
    a.append([{"n": 4}])

    read_b = b.read_since(start)
    assert not read_b.gap
    assert payloads(read_b.records) == [1, 2, 4]
    assert read_b.records[0] == {"w": "writer-a", "n": 1, "op": "put"}
    assert read_b.position == b.end()

    read_a = a.read_since(start)
    assert payloads(read_a.records) == [3]
    assert read_a.position == read_b.position


def test_nothing_new_returns_the_same_position(pair: tuple[ChangeJournal, ChangeJournal]) -> None:
    a, b = pair
    a.append([{"n": 1}])
    first = b.read_since(JournalPosition(1, 0))
    again = b.read_since(first.position)
    assert (again.records, again.position, again.gap) == ([], first.position, False)
    assert a.append([]) is None and a.end() == first.position  # an empty append writes nothing


def test_a_partial_last_line_waits_until_completed(
    pair: tuple[ChangeJournal, ChangeJournal], journal_dir: Path
) -> None:
    _, b = pair
    path = generation_file(journal_dir, 1)
    with open(path, "ab") as f:
        f.write(b'{"w":"other","n":1}\n{"w":"other","n":')
    first = b.read_since(JournalPosition(1, 0))
    assert payloads(first.records) == [1]
    assert first.position == JournalPosition(1, len(b'{"w":"other","n":1}\n'))
    assert b.read_since(first.position).records == []
    with open(path, "ab") as f:
        f.write(b"2}\n")
    second = b.read_since(first.position)
    assert payloads(second.records) == [2]
    assert second.position == b.end()


def test_unreadable_lines_are_skipped(pair: tuple[ChangeJournal, ChangeJournal], journal_dir: Path) -> None:
    a, b = pair
    with open(generation_file(journal_dir, 1), "ab") as f:
        f.write(b"not json at all\n[1, 2]\n")
    a.append([{"n": 5}])
    read = b.read_since(JournalPosition(1, 0))
    assert payloads(read.records) == [5]
    assert not read.gap


def test_reader_in_the_old_generation_reads_on_into_the_new_one(
    pair: tuple[ChangeJournal, ChangeJournal], journal_dir: Path
) -> None:
    a, b = pair
    a.append([{"n": 1}])
    position = b.read_since(JournalPosition(1, 0)).position
    a.append([{"n": 2}])
    assert a.rotate() == JournalPosition(2, 0)
    a.append([{"n": 3}])

    read = b.read_since(position)
    assert not read.gap
    assert payloads(read.records) == [2, 3]
    assert read.position.generation == 2
    assert read.position == b.end()
    assert generation_file(journal_dir, 1).exists()  # the previous generation is kept for such readers


def test_reader_two_generations_behind_gets_a_gap(pair: tuple[ChangeJournal, ChangeJournal], journal_dir: Path) -> None:
    a, b = pair
    position = b.end()
    a.append([{"n": 1}])
    a.rotate()
    a.append([{"n": 2}])
    a.rotate()
    assert not generation_file(journal_dir, 1).exists()
    assert generation_file(journal_dir, 2).exists()

    read = b.read_since(position)
    assert read.gap
    assert read.position == a.end() == JournalPosition(3, 0)
    a.append([{"n": 3}])
    after = b.read_since(read.position)
    assert (payloads(after.records), after.gap) == ([3], False)


def test_a_shrunken_journal_file_gives_a_gap(pair: tuple[ChangeJournal, ChangeJournal], journal_dir: Path) -> None:
    a, b = pair
    a.append([{"n": 1}, {"n": 2}])
    position = b.read_since(JournalPosition(1, 0)).position
    generation_file(journal_dir, 1).write_bytes(b"")
    assert b.read_since(position).gap


def test_deleted_journal_files_give_a_gap_and_never_lose_records_silently(
    pair: tuple[ChangeJournal, ChangeJournal], journal_dir: Path
) -> None:
    a, b = pair
    a.append([{"n": 1}])
    position = b.read_since(JournalPosition(1, 0)).position
    for path in journal_dir.glob("changes-*.jsonl"):
        path.unlink()

    first = b.read_since(position)
    assert first.gap
    a.append([{"n": 2}])
    second = b.read_since(first.position)
    assert second.gap or payloads(second.records) == [2]
    a.append([{"n": 3}])
    third = b.read_since(second.position)
    assert (payloads(third.records), third.gap) == ([3], False)


def test_removing_the_whole_journal_folder_gives_a_gap_not_an_exception(
    pair: tuple[ChangeJournal, ChangeJournal], journal_dir: Path
) -> None:
    """append() says it handles 'the index folder was removed under us'; reading must cope too."""
    a, b = pair
    a.append([{"n": 1}])
    position = b.read_since(JournalPosition(1, 0)).position
    shutil.rmtree(journal_dir)

    assert b.read_since(position).gap
    a.append([{"n": 2}])  # recreates the folder and a first generation
    assert generation_file(journal_dir, 1).exists()


def _cut_short(monkeypatch: pytest.MonkeyPatch, keep: int) -> None:
    """The next journal write stores only `keep` bytes, as a filesystem that ran out of space does."""
    real_write = os.write

    def short_write(fd: int, data: bytes) -> int:
        monkeypatch.setattr(changes.os, "write", real_write)
        return real_write(fd, data[:keep])

    monkeypatch.setattr(changes.os, "write", short_write)


def test_a_write_cut_short_is_a_disk_full_error_and_hides_no_later_record(
    pair: tuple[ChangeJournal, ChangeJournal], journal_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = pair
    start = b.end()
    a.append([{"n": 1}])
    _cut_short(monkeypatch, keep=12)
    with pytest.raises(OSError) as raised:
        a.append([{"n": 2}, {"n": 3}])
    assert raised.value.errno == errno.ENOSPC
    assert not generation_file(journal_dir, 1).read_bytes().endswith(b"\n")  # the torn line is on disk
    a.append([{"n": 4}])  # glued to the torn line
    a.append([{"n": 5}])
    assert payloads(b.read_since(start).records) == [1, 4, 5]


def test_a_torn_line_from_a_crash_does_not_hide_the_next_record(
    pair: tuple[ChangeJournal, ChangeJournal], journal_dir: Path
) -> None:
    a, b = pair
    start = b.end()
    with generation_file(journal_dir, 1).open("ab") as f:
        f.write(b'{"w":"writer-c","s":"memory","op":"put","id":"ab')  # a process died mid-write
    a.append([{"n": 1}, {"n": 2}])
    assert payloads(b.read_since(start).records) == [1, 2]
