"""DailyLog: append-only JSON Lines per UTC day — the line format, durability across instances, days(),
unreadable lines skipped with a warning, and two writers (processes) whose lines never interleave."""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import threading
from datetime import date, datetime
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from rockmem_mcp.storage.daily_log import DailyLog

D1, D2, D3 = date(2024, 5, 1), date(2024, 5, 2), date(2024, 6, 30)


class Note(BaseModel):
    writer: str
    n: int
    text: str = ""


@pytest.fixture
def directory(tmp_path: Path) -> Path:
    return tmp_path / "logs"


@pytest.fixture
def log(directory: Path) -> DailyLog[Note]:
    return DailyLog(directory, Note)


def test_append_writes_one_json_line_per_record_in_the_days_file(log: DailyLog[Note], directory: Path) -> None:
    assert not directory.exists()
    log.append(Note(writer="a", n=1, text="héllo\nworld"), D1)  # created on first append
    log.append(Note(writer="a", n=2), D1)
    path = directory / "2024-05-01.jsonl"
    assert log.path(D1) == path
    raw = path.read_bytes()
    lines = raw.split(b"\n")
    assert lines[-1] == b"" and len(lines) == 3  # each record ends with a newline; no other newline
    assert [json.loads(line) for line in lines[:2]] == [
        {"writer": "a", "n": 1, "text": "héllo\nworld"},
        {"writer": "a", "n": 2, "text": ""},
    ]
    raw.decode("utf-8")
    assert log.read(D1) == [Note(writer="a", n=1, text="héllo\nworld"), Note(writer="a", n=2)]


def test_append_only_adds_and_a_new_instance_reads_everything(log: DailyLog[Note], directory: Path) -> None:
    for n in range(3):
        log.append(Note(writer="a", n=n), D1)
    before = (directory / "2024-05-01.jsonl").read_bytes()
    other = DailyLog(directory, Note)
    other.append(Note(writer="b", n=9), D1)
    after = (directory / "2024-05-01.jsonl").read_bytes()
    assert after.startswith(before) and after.count(b"\n") == 4
    assert [(r.writer, r.n) for r in DailyLog(directory, Note).read(D1)] == [("a", 0), ("a", 1), ("a", 2), ("b", 9)]


def test_append_flushes_each_record_to_disk(
    log: DailyLog[Note], directory: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[int] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    log.append(Note(writer="a", n=1), D1)
    log.append(Note(writer="a", n=2), D1)
    assert len(synced) >= 2


def test_days_lists_the_logged_days_oldest_first(log: DailyLog[Note], directory: Path) -> None:
    assert log.days() == []  # no directory yet
    for day in (D3, D1, D2):
        log.append(Note(writer="a", n=0), day)
    # what is not a day's log is ignored
    (directory / "notes.txt").write_text("x")
    (directory / "2024-05-03.json").write_text("x")
    (directory / ".2024-05-04.jsonl.tmp").write_text("x")
    (directory / "2024-05-05.jsonl.bak").write_text("x")
    (directory / "x2024-05-06.jsonl").write_text("x")
    (directory / "2024-5-7.jsonl").write_text("x")
    assert log.days() == [D1, D2, D3]


def test_days_ignores_a_file_named_like_an_impossible_date(log: DailyLog[Note], directory: Path) -> None:
    log.append(Note(writer="a", n=0), D1)
    (directory / "2024-13-45.jsonl").write_text("")
    assert log.days() == [D1]


def test_read_of_a_day_without_a_log_is_empty(log: DailyLog[Note]) -> None:
    assert log.read(D1) == []


def test_unreadable_lines_are_skipped_with_one_warning(
    log: DailyLog[Note], directory: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log.append(Note(writer="a", n=1), D1)
    with (directory / "2024-05-01.jsonl").open("ab") as f:
        f.write(b"not json at all\n")
        f.write(b'{"writer": "a", "n": "not a number"}\n')
        f.write(b"\n")
        f.write(b"\xff\xfe\x00 binary\n")
        f.write(b'{"writer": "a", "n": 2}\n')
        f.write(b'{"writer": "a", "n": 3')  # a torn last line (a crash mid-write)
    with caplog.at_level(logging.WARNING, logger="rockmem_mcp.storage.daily_log"):
        records = log.read(D1)
    assert [r.n for r in records] == [1, 2]
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "2024-05-01.jsonl" in warnings[0].getMessage() and "5" in warnings[0].getMessage()


def test_a_clean_read_does_not_warn(log: DailyLog[Note], caplog: pytest.LogCaptureFixture) -> None:
    log.append(Note(writer="a", n=1), D1)
    with caplog.at_level(logging.WARNING):
        log.read(D1)
    assert caplog.records == []


def test_a_record_appended_after_a_torn_line_is_still_read(log: DailyLog[Note], directory: Path) -> None:
    """A crash mid-append leaves a line without its newline; the next acknowledged record must not be glued to
    it (and so lost with it)."""
    directory.mkdir(parents=True)
    (directory / "2024-05-01.jsonl").write_bytes(b'{"writer": "a", "n": 1}\n{"writer": "a", "n"')
    log.append(Note(writer="b", n=2), D1)
    assert log.read(D1) == [Note(writer="a", n=1), Note(writer="b", n=2)]


def test_remove_deletes_one_day(log: DailyLog[Note], directory: Path) -> None:
    for day in (D1, D2):
        log.append(Note(writer="a", n=0), day)
    log.remove(D1)
    assert log.days() == [D2] and log.read(D1) == []
    log.remove(D1)  # already gone: no error
    log.remove(D3)
    assert log.read(D2) == [Note(writer="a", n=0)]


def test_a_record_for_another_model_is_skipped(directory: Path) -> None:
    class Other(BaseModel):
        other: str

    DailyLog(directory, Other).append(Other(other="x"), D1)
    assert DailyLog(directory, Note).read(D1) == []


# ---------------------------------------------------------------------------------------------- two writers
BIG = 20_000  # well over a pipe buffer's 4 KiB: interleaving would show inside a line


def _write(directory: str, writer: str, count: int, start: Any) -> None:
    log = DailyLog(Path(directory), Note)
    start.wait(10)
    for n in range(count):
        log.append(Note(writer=writer, n=n, text=writer * (BIG + n)), D1)


def test_two_writers_interleave_whole_lines(directory: Path) -> None:
    context = multiprocessing.get_context("fork")
    start = context.Event()
    count = 40
    writers = [context.Process(target=_write, args=(str(directory), w, count, start)) for w in "ab"]
    for process in writers:
        process.start()
    start.set()
    for process in writers:
        process.join(60)
        assert process.exitcode == 0
    raw = (directory / "2024-05-01.jsonl").read_bytes()
    lines = raw.split(b"\n")
    assert lines[-1] == b"" and len(lines) == 2 * count + 1
    log = DailyLog(directory, Note)
    records = log.read(D1)
    assert len(records) == 2 * count
    for writer in "ab":
        mine = [r for r in records if r.writer == writer]
        assert [r.n for r in mine] == list(range(count))  # each writer's lines in its own order
        assert all(r.text == writer * (BIG + r.n) for r in mine)


def test_threads_appending_at_once_lose_nothing(directory: Path) -> None:
    log = DailyLog(directory, Note)
    barrier = threading.Barrier(4)

    def write(writer: str) -> None:
        barrier.wait()
        for n in range(50):
            log.append(Note(writer=writer, n=n, text=writer * 5000), D1)

    threads = [threading.Thread(target=write, args=(w,)) for w in "wxyz"]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    records = log.read(D1)
    assert len(records) == 200
    for writer in "wxyz":
        assert [r.n for r in records if r.writer == writer] == list(range(50))


def test_days_are_dates_not_datetimes(log: DailyLog[Note]) -> None:
    log.append(Note(writer="a", n=0), D1)
    [day] = log.days()
    assert type(day) is date and not isinstance(day, datetime)


def test_consume_drops_what_was_read_and_keeps_what_was_appended_since(log: DailyLog[Note], directory: Path) -> None:
    for n in range(3):
        log.append(Note(writer="a", n=n), D1)
    read, inode = log.read_positions(D1)
    assert [r.n for r, _ in read] == [0, 1, 2] and read[-1][1] == (directory / "2024-05-01.jsonl").stat().st_size
    log.append(Note(writer="a", n=3), D1)
    log.consume(D1, read[1][1], inode=inode + 1)  # offsets of another file: nothing happens
    assert [r.n for r in log.read(D1)] == [0, 1, 2, 3]
    log.consume(D1, read[1][1], inode=inode)
    assert [r.n for r in log.read(D1)] == [2, 3]
    log.consume(D1, read[1][1], inode=inode)  # the file was replaced: those offsets are stale
    assert [r.n for r in log.read(D1)] == [2, 3]
    log.append(Note(writer="a", n=4), D1)  # appends go on in the new file
    records, inode = log.read_positions(D1)
    log.consume(D1, records[-1][1], inode)
    assert log.days() == [] and list(directory.iterdir()) == []


def test_a_line_being_written_is_neither_read_nor_consumed(log: DailyLog[Note], directory: Path) -> None:
    log.append(Note(writer="a", n=0), D1)
    with (directory / "2024-05-01.jsonl").open("ab") as f:
        f.write(b'{"writer": "b", "n"')  # half of a line another process is writing
    read, inode = log.read_positions(D1)
    assert [r.n for r, _ in read] == [0]
    log.consume(D1, read[-1][1], inode)
    assert (directory / "2024-05-01.jsonl").read_bytes() == b'{"writer": "b", "n"'


def test_writers_in_other_processes_lose_nothing_while_a_reader_consumes(directory: Path) -> None:
    """Every record appended is either read before it is consumed or still in the file: an appender that
    opened the file a consumer then replaced re-opens the new one instead of writing into the old."""
    context = multiprocessing.get_context("fork")
    start = context.Event()
    count = 60
    writers = [context.Process(target=_write, args=(str(directory), w, count, start)) for w in "ab"]
    for process in writers:
        process.start()
    log = DailyLog(directory, Note)
    consumed: list[Note] = []
    start.set()
    while any(process.is_alive() for process in writers) or log.days():
        records, inode = log.read_positions(D1)
        if records:
            consumed += [r for r, _ in records]
            log.consume(D1, records[-1][1], inode)
    for process in writers:
        process.join(60)
        assert process.exitcode == 0
    for writer in "ab":
        assert [r.n for r in consumed if r.writer == writer] == list(range(count))
