"""The versions the history keeps between commits: read back in order, a torn record skipped without losing the
next one, consumed up to what was read while later appends stay."""

from __future__ import annotations

from pathlib import Path

from rockmem_mcp.audit.versions import FileVersion, VersionLog


def test_versions_round_trip_including_a_removed_file(tmp_path: Path) -> None:
    log = VersionLog(tmp_path / "versions")
    written = [
        FileVersion("2026-11-25T10:00:00.001Z", "memory/a.json", b'{\n  "content": "one\\ntwo"\n}'),
        FileVersion("2026-11-25T10:00:00.002Z", "memory/b.json", None),
        FileVersion("2026-11-25T10:00:00.003Z", "MEMORY.md", b""),
    ]
    log.append(written[:1])
    log.append(written[1:])
    assert log.read().versions == written


def test_a_torn_record_is_skipped_and_the_next_one_kept(tmp_path: Path) -> None:
    path = tmp_path / "versions"
    log = VersionLog(path)
    log.append([FileVersion("t1", "memory/a.json", b"first")])
    with path.open("ab") as f:  # a crash mid-record: a header promising more bytes than came
        f.write(b'{"t":"t2","f":"memory/b.json","n":500}\npartial')
    log.append([FileVersion("t3", "memory/c.json", b"third")])
    assert [v.file for v in log.read().versions] == ["memory/a.json", "memory/c.json"]


def test_consume_drops_what_was_read_and_keeps_later_appends(tmp_path: Path) -> None:
    log = VersionLog(tmp_path / "versions")
    log.append([FileVersion("t1", "memory/a.json", b"first")])
    read = log.read()
    log.append([FileVersion("t2", "memory/b.json", b"second")])
    log.consume(read.end, read.inode)
    assert [v.file for v in log.read().versions] == ["memory/b.json"]
    read = log.read()
    log.consume(read.end, read.inode)
    assert not (tmp_path / "versions").exists()
