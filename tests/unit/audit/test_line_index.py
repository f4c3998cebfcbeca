"""The audit log's index (issue 45: every history or revert read the whole log, 5.7 s at 200k lines): an item's
and a run's lines are found by offset and the log is not read again once indexed; the index stays right across
appends by another process, a log replaced (retention, a redaction), truncated or edited in place, a corrupt
index file, and a link where the index should be."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from rockmem_mcp.audit.line_index import (
    INDEX_NAME,
    AuditLineIndex,
    Found,
    ScanIndex,
    actor_key,
    file_key,
    item_keys,
)
from rockmem_mcp.audit.log import AuditLine, AuditLog

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
ITEM = "0123456789ab"
SMALL_READ = 16 * 1024  # a few lines read back by offset


class LogReads:
    """Bytes read from the file at `path` (whichever file is there when read) through os.read and os.pread: how
    much of the audit log a call read."""

    def __init__(self, path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.path = path
        self.bytes = 0
        real_read, real_pread = os.read, os.pread

        def counted(data: bytes, fd: int) -> bytes:
            try:
                same = os.path.samestat(os.fstat(fd), os.stat(self.path))
            except OSError:
                same = False
            self.bytes += len(data) if same else 0
            return data

        monkeypatch.setattr(os, "read", lambda fd, n: counted(real_read(fd, n), fd))
        monkeypatch.setattr(os, "pread", lambda fd, n, at: counted(real_pread(fd, n, at), fd))


def line(n: int, file: str | None = None, **fields: Any) -> AuditLine:
    values = {
        "time": T0 + timedelta(seconds=n),
        "action": "EDIT",
        "file": file or f"memory/notes/{n:012x}.json",
        "actor": "main",
        "approval": "auto",
        "summary": f'saved "filler {n}"',
    }
    return AuditLine(**{**values, **fields})


def filler(start: int, count: int) -> list[AuditLine]:
    return [line(n) for n in range(start, start + count)]


@pytest.fixture
def log(tmp_path: Path) -> AuditLog:
    return AuditLog(tmp_path / "home" / "meta" / "audit.log")


@pytest.fixture
def index(log: AuditLog, tmp_path: Path) -> AuditLineIndex:
    return AuditLineIndex(log, log.path, tmp_path / "home" / "index" / INDEX_NAME)


def item_lines(index: AuditLineIndex | ScanIndex) -> list[tuple[str, str]]:
    return [(hit.line.action, hit.line.summary) for hit in index.find(item_keys(ITEM))]


def same_as_a_scan(index: AuditLineIndex, log: AuditLog) -> None:
    scan = ScanIndex(log)
    assert item_lines(index) == item_lines(scan)
    assert index.files(item_keys(ITEM)) == scan.files(item_keys(ITEM))


def test_an_items_lines_are_found_by_offset_and_the_log_is_not_read_again(
    log: AuditLog, index: AuditLineIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    log.append([line(0, f"memory/people/{ITEM}.json", action="CREATE", summary='saved "Alice"'), *filler(1, 2000)])
    log.append(
        [line(3000, f"memory/team/{ITEM}.json", action="RENAME", summary=f"moved from memory/people/{ITEM}.json")]
    )
    assert [action for action, _ in item_lines(index)] == ["RENAME", "CREATE"]  # the first query builds it
    assert index.files(item_keys(ITEM)) == [
        (f"memory/team/{ITEM}.json", f"memory/team/{ITEM}.json"),
        (f"memory/people/{ITEM}.json", f"memory/team/{ITEM}.json"),  # where it moved from, named by the move
        (f"memory/people/{ITEM}.json", f"memory/people/{ITEM}.json"),
    ]
    before = log.path.stat().st_size
    log.append([*filler(3001, 2000), line(5001, f"memory/team/{ITEM}.json", summary='saved "Alice (lead)"')])
    appended = log.path.stat().st_size - before
    reads = LogReads(log.path, monkeypatch)

    assert item_lines(index)[0] == ("EDIT", 'saved "Alice (lead)"')
    assert reads.bytes <= appended + SMALL_READ  # caught up from its end, then three lines read back
    reads.bytes = 0
    assert len(item_lines(index)) == 3
    assert index.files(item_keys(ITEM))[0][0] == f"memory/team/{ITEM}.json"
    assert reads.bytes <= SMALL_READ < before // 10  # the log's length does not matter any more
    same_as_a_scan(index, log)


def test_a_limit_and_an_until_stop_reading(log: AuditLog, index: AuditLineIndex) -> None:
    log.append([line(n, f"memory/{ITEM}.json", actor="dream:d-1") for n in range(10)])
    assert [hit.line.time for hit in index.find([actor_key("dream:d-1")], limit=2)] == [
        T0 + timedelta(seconds=9),
        T0 + timedelta(seconds=8),
    ]
    found = index.find([file_key(ITEM)], until=lambda line: line.time < T0 + timedelta(seconds=7))
    assert [hit.line.time.second for hit in found] == [9, 8, 7]
    assert index.find([file_key(ITEM)], limit=0) == []
    assert index.find([actor_key("main")]) == []  # `main` is everybody's: never a run to look up


def test_lines_another_process_appends_meanwhile_are_found(log: AuditLog, index: AuditLineIndex) -> None:
    log.append(filler(0, 500))
    assert item_lines(index) == []
    script = textwrap.dedent(
        f"""
        from datetime import UTC, datetime, timedelta
        from pathlib import Path
        from rockmem_mcp.audit.log import AuditLine, AuditLog
        log = AuditLog(Path({str(log.path)!r}))
        t0 = datetime(2026, 3, 2, tzinfo=UTC)
        for n in range(300):
            name = "memory/{ITEM}.json" if n % 10 == 0 else f"memory/other/{{n:012x}}.json"
            log.append([AuditLine(t0 + timedelta(seconds=n), "EDIT", name, "main", "auto", f"change {{n}}")])
        """
    )
    writer = subprocess.Popen([sys.executable, "-c", script])
    seen: list[list[tuple[str, str]]] = []
    while writer.poll() is None:
        seen.append(item_lines(index))  # catching up while the other process appends
    assert writer.wait() == 0
    assert [summary for _, summary in item_lines(index)] == [f"change {n}" for n in range(290, -1, -10)]
    for found in seen:  # what a query saw was the log as it was then: the newest lines missing, never others
        assert found == item_lines(index)[len(item_lines(index)) - len(found) :]
    same_as_a_scan(index, log)


def test_a_log_replaced_by_a_rewrite_is_indexed_again(log: AuditLog, index: AuditLineIndex) -> None:
    log.append([*filler(0, 1000), line(1000, f"memory/{ITEM}.json", summary="kept"), *filler(1001, 1000)])
    before = index.find(item_keys(ITEM))
    inode = log.path.stat().st_ino
    assert log.rewrite(lambda lines: lines[600:]) == 600  # retention: another file, every offset moved
    assert log.path.stat().st_ino != inode

    after = index.find(item_keys(ITEM))
    assert [hit.line.summary for hit in after] == ["kept"]
    assert after[0].at < before[0].at
    same_as_a_scan(index, log)


def test_a_log_truncated_and_written_again_is_indexed_again(log: AuditLog, index: AuditLineIndex) -> None:
    log.append([*filler(0, 500), line(500, f"memory/{ITEM}.json", summary="gone with the cut"), *filler(501, 500)])
    assert len(item_lines(index)) == 1
    size = log.path.stat().st_size
    os.truncate(log.path, size // 3)  # the same file, shorter than the index's end; a torn line at the cut
    log.append([*filler(2000, 1500), line(3500, f"memory/{ITEM}.json", summary="written after")])
    assert log.path.stat().st_size > size

    assert [summary for _, summary in item_lines(index)] == ["written after"]
    same_as_a_scan(index, log)


def test_a_line_edited_in_place_is_not_trusted(log: AuditLog, index: AuditLineIndex) -> None:
    log.append([*filler(0, 300), line(300, f"memory/{ITEM}.json", summary="edited away"), *filler(301, 300)])
    assert len(item_lines(index)) == 1
    data = log.path.read_bytes()
    edited = data.replace(f"memory/{ITEM}.json".encode(), b"memory/ba9876543210.json")  # same length, same end
    with open(log.path, "r+b") as file:  # the same inode and size: only reading the line shows it changed
        file.write(edited)

    assert item_lines(index) == []
    assert [hit.line.summary for hit in index.find(item_keys("ba9876543210"))] == ["edited away"]
    same_as_a_scan(index, log)


def test_a_corrupt_index_is_built_again(log: AuditLog, index: AuditLineIndex) -> None:
    log.append([*filler(0, 100), line(100, f"memory/{ITEM}.json", summary="found")])
    assert len(item_lines(index)) == 1
    index.index_path.write_bytes(b"not a database" * 100)

    assert [summary for _, summary in item_lines(index)] == ["found"]  # scanned, and the file removed
    assert [summary for _, summary in item_lines(index)] == ["found"]  # built again
    assert index.index_path.read_bytes().startswith(b"SQLite format 3")


def test_a_link_where_the_index_goes_is_never_written_through(
    log: AuditLog, index: AuditLineIndex, tmp_path: Path
) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("not rockmem's")
    index.index_path.parent.mkdir(parents=True)
    index.index_path.symlink_to(outside)
    log.append([line(0, f"memory/{ITEM}.json", summary="found")])

    assert [summary for _, summary in item_lines(index)] == ["found"]  # scanned instead
    assert outside.read_text() == "not rockmem's"


def test_no_log_finds_nothing(index: AuditLineIndex) -> None:
    assert index.find(item_keys(ITEM)) == []
    assert index.files(item_keys(ITEM)) == []
    index.catch_up()


def test_the_scan_numbers_lines_newest_highest(log: AuditLog) -> None:
    log.append([line(0, f"memory/{ITEM}.json"), line(1, f"memory/{ITEM}.json")])
    found = ScanIndex(log).find(item_keys(ITEM))
    assert found[0].at > found[1].at and isinstance(found[0], Found)
