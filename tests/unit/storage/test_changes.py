"""ChangeJournal: how one process learns what others on the same home wrote."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

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
