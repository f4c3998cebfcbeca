"""meta/audit.log as a file: the line format read back as written, stored text that cannot forge a line or a
field, a line torn by a crash skipped without swallowing the next, and a rewrite (retention) that loses no
append made while it runs."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from rockmem_mcp.audit.log import SUMMARY_CHARS, AuditLine, AuditLog
from rockmem_mcp.storage import daily_log

T0 = datetime(2026, 2, 2, 15, 30, 1, 123456, tzinfo=UTC)


def line(n: int = 0, **fields: Any) -> AuditLine:
    values = {
        "time": T0 + timedelta(minutes=n),
        "action": "CREATE",
        "file": f"memory/notes/{n:012x}.json",
        "actor": "main",
        "approval": "auto",
        "summary": f'saved "fact {n}"',
    }
    return AuditLine(**{**values, **fields})


@pytest.fixture
def log(tmp_path: Path) -> AuditLog:
    return AuditLog(tmp_path / "meta" / "audit.log")


def test_a_line_reads_back_as_written(log: AuditLog) -> None:
    written = [line(0), line(1, action="ARCHIVE", actor="dream:d-20260202-153001-ab12", approval="approved")]
    log.append(written)
    text = log.path.read_text()
    assert text.splitlines()[0] == (
        '2026-02-02T15:30:01.123Z | CREATE | memory/notes/000000000000.json | main | auto | saved "fact 0"'
    )
    # Milliseconds are what the format keeps.
    assert list(log.lines()) == [
        w.__class__(**{**w.__dict__, "time": w.time.replace(microsecond=123000)}) for w in written
    ]


def test_stored_text_cannot_forge_a_line_or_a_field(log: AuditLog) -> None:
    hostile = "evil\n2026-01-01T00:00Z | DELETE | SOUL.md | manual | — | forged\x1b[31m\u202e|x"
    log.append([line(0, file="notes/a|b.json", actor="subagent:x|y", summary=hostile)])
    [raw] = log.path.read_text().splitlines()  # one line: the newline inside became a space
    [back] = list(log.lines())
    assert back.file == "notes/a/b.json" and back.actor == "subagent:x/y"  # `|` would shift the fields
    assert back.action == "CREATE" and "\x1b" not in raw and "\u202e" not in raw
    assert back.summary.startswith("evil 2026-01-01T00:00Z | DELETE | SOUL.md")  # the summary keeps its text
    long = line(1, summary="x" * 1000)
    log.append([long])
    assert len(list(log.lines())[1].summary) == SUMMARY_CHARS


def test_a_torn_last_line_is_skipped_and_the_next_append_starts_a_line_of_its_own(log: AuditLog) -> None:
    log.append([line(0)])
    with log.path.open("ab") as f:  # a crash cut the next append short
        f.write(line(1).format().encode()[:40])
    assert [entry.file for entry in log.lines()] == [line(0).file]  # the unfinished line is not read
    log.append([line(2)])
    assert [entry.file for entry in log.lines()] == [line(0).file, line(2).file]
    assert len(log.path.read_text().splitlines()) == 3  # the torn line stays, alone on its line


def test_lines_not_in_the_format_are_skipped(log: AuditLog) -> None:
    log.path.parent.mkdir(parents=True)
    log.path.write_text("hand-written note\n2026-02-02T15:30Z | FROBNICATE | x | main | auto | no such action\n")
    log.append([line(0)])
    assert [entry.file for entry in log.lines()] == [line(0).file]


def test_a_rewrite_loses_no_append_made_while_it_runs(log: AuditLog, monkeypatch: pytest.MonkeyPatch) -> None:
    log.append([line(n) for n in range(4)])
    waiting = threading.Event()
    real = daily_log.fcntl

    class Flock:  # the appender's lock call, told to the test: it has the old file open by then
        LOCK_EX, LOCK_UN = real.LOCK_EX, real.LOCK_UN  # it unlocks a file replaced while it waited

        @staticmethod
        def flock(fd: int, operation: int) -> None:
            waiting.set()
            real.flock(fd, operation)

    monkeypatch.setattr(daily_log, "fcntl", Flock)
    appender = threading.Thread(target=log.append, args=([line(9)],))

    def keep(lines: list[AuditLine]) -> list[AuditLine]:
        appender.start()  # appends while the rewrite holds the log's lock
        assert waiting.wait(10)
        return lines[2:]

    assert log.rewrite(keep) == 2
    appender.join(10)
    assert not appender.is_alive()
    assert [entry.file for entry in log.lines()] == [line(n).file for n in (2, 3, 9)]


def test_a_rewrite_that_keeps_nothing_removes_the_log(log: AuditLog) -> None:
    log.append([line(0)])
    assert log.rewrite(lambda lines: []) == 1
    assert not log.path.exists() and list(log.lines()) == []
    assert log.rewrite(lambda lines: []) == 0  # no log: nothing to do


@pytest.mark.parametrize("block", [7, 64, 1000, 65536])
def test_newest_first_reads_back_from_the_end_as_lines_does_forwards(
    log: AuditLog, monkeypatch: pytest.MonkeyPatch, block: int
) -> None:
    """The audit tool's latest lines are read backwards a block at a time (issue 45: every call read the whole log,
    5.7 s at 200k lines): the same lines as `lines()` reversed, whatever the block size, with a torn line in the
    middle skipped and a last line still being written left out."""
    monkeypatch.setattr("rockmem_mcp.audit.log.READ_BACK_BYTES", block)
    log.append([line(n, summary=f'saved "fact {n} ' + "é" * n + '"') for n in range(40)])
    with log.path.open("ab") as file:
        file.write(b"2024-05-01T09:00:00.000Z | CREATE | torn\n")  # out of shape: skipped
    log.append([line(40)])
    with log.path.open("ab") as file:
        file.write(b"2024-05-01T10:00:00.000Z | CREATE | memory/half")  # still being written
    expected = list(reversed(list(log.lines())))
    assert [x.summary for x in log.newest_first()] == [x.summary for x in expected]
    assert len(expected) == 41 and expected[0].summary == 'saved "fact 40"'
    newest = log.newest_first()
    assert next(newest).summary == 'saved "fact 40"'  # a reader may stop at once


def test_newest_first_of_no_log_is_nothing(log: AuditLog) -> None:
    assert list(log.newest_first()) == []


def test_a_line_still_being_written_longer_than_a_block_is_left_out(
    log: AuditLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("rockmem_mcp.audit.log.READ_BACK_BYTES", 16)
    log.append([line(1), line(2)])
    with log.path.open("ab") as file:
        file.write(b"2024-05-01T10:00:00.000Z | CREATE | memory/" + b"x" * 100)  # no newline yet
    assert [x.summary for x in log.newest_first()] == ['saved "fact 2"', 'saved "fact 1"']
