"""Reading the audit trail: filters, an item's files, times people type, and which files a revert may touch."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from rockmem_mcp.audit.log import AuditLine
from rockmem_mcp.audit.service import Audit, acting_as
from rockmem_mcp.config import Settings
from rockmem_mcp.errors import InvalidInputError, NotFoundError
from rockmem_mcp.governance.rollback import restorable
from rockmem_mcp.governance.trail import AuditTrail, parse_moment
from rockmem_mcp.memory.service import MemoryService
from tests.unit.audit.test_line_index import SMALL_READ, LogReads

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings.load({"home": tmp_path / "home", "audit_git": False}, env={})


def test_filters_by_item_action_actor_and_time_newest_first(settings: Settings) -> None:
    memory = MemoryService(settings, embed_in_background=False)
    try:
        kept = memory.save("The deploy window is Thursday", category="work")
        with acting_as("dream:d-1"):
            gone = memory.save("A note the dream archives")
            memory.delete(gone.id, reason="noise")
        memory.update(kept.id, content="The deploy window is Friday")
    finally:
        memory.close()
    trail = AuditTrail(Audit(settings))
    mine = trail.entries(file=kept.id)
    assert [e.action for e in mine] == ["EDIT", "CREATE"]  # newest first
    assert all(e.file == f"memory/work/{kept.id}.json" and e.actor == "main" for e in mine)
    assert [e.action for e in trail.entries(actor="dream")] == ["ARCHIVE", "CREATE"]
    assert [e.file for e in trail.entries(action="archive")] == [f"memory/{gone.id}.json"]
    assert trail.entries(actor="dream:d-2") == []
    assert len(trail.entries(limit=2)) == 2
    later = datetime.now(UTC) + timedelta(minutes=1)
    assert trail.entries(since=later) == []
    with pytest.raises(InvalidInputError, match="unknown action"):
        trail.entries(action="ERASE")


def test_history_without_git_gives_the_lines_and_says_why_there_are_no_versions(settings: Settings) -> None:
    memory = MemoryService(settings, embed_in_background=False)
    try:
        entry = memory.save("Alice works on rockmem", category="people")
        memory.update(entry.id, category="team")  # moved: two files, one item
    finally:
        memory.close()
    trail = AuditTrail(Audit(settings))
    assert trail.files_of(entry.id) == [f"memory/team/{entry.id}.json", f"memory/people/{entry.id}.json"]
    assert trail.files_of(f"memory:{entry.id}") == trail.files_of(entry.id)  # the forget tool's ids work too
    result = trail.item_history(entry.id)
    assert [e.action for e in result.entries] == ["RENAME", "CREATE"]
    assert result.versions == [] and "git is not available" in (result.note or "")
    with pytest.raises(NotFoundError):
        trail.item_history("0123456789ab")


def test_an_items_history_reads_its_own_lines_not_the_whole_log(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 45: every history read the whole log (5.7 s at 200k lines); now its lines are read by offset, so a call
    reads what was appended since the last one and the item's own lines, whatever the log's length."""
    memory = MemoryService(settings, embed_in_background=False)
    try:
        entry = memory.save("Alice works on rockmem", category="people")
        memory.audit.log.append(filler(0, 3000))
        memory.update(entry.id, category="team")
        trail = AuditTrail(memory.audit)
        assert [e.action for e in trail.item_history(entry.id).entries] == ["RENAME", "CREATE"]
        memory.audit.log.append(filler(3000, 3000))
        memory.update(entry.id, content="Alice leads rockmem")
        memory.audit.index.catch_up()  # as the history's committer does in the background
        size = memory.audit.log.path.stat().st_size
        reads = LogReads(memory.audit.log.path, monkeypatch)

        result = trail.item_history(entry.id)
        assert trail.files_of(entry.id) == [f"memory/team/{entry.id}.json", f"memory/people/{entry.id}.json"]
    finally:
        memory.close()
    assert [e.action for e in result.entries] == ["EDIT", "RENAME", "CREATE"]
    assert reads.bytes <= SMALL_READ < size // 20


def filler(start: int, count: int) -> list[AuditLine]:
    """Lines about other memories, as a busy agent's log holds between one item's changes (logged now)."""
    moment = datetime.now(UTC)
    return [
        AuditLine(moment, "EDIT", f"memory/notes/{n:012x}.json", "main", "auto", f'saved "note {n}"')
        for n in range(start, start + count)
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-11-24T18:00Z", datetime(2026, 11, 24, 18, 0, tzinfo=UTC)),
        ("2026-11-24T19:00+01:00", datetime(2026, 11, 24, 18, 0, tzinfo=UTC)),
        ("2026-11-24", datetime(2026, 11, 24, tzinfo=UTC)),
        ("30m", NOW - timedelta(minutes=30)),
        ("2h", NOW - timedelta(hours=2)),
        ("3d", NOW - timedelta(days=3)),
    ],
)
def test_times_people_type(text: str, expected: datetime) -> None:
    assert parse_moment(text, NOW) == expected


@pytest.mark.parametrize("text", ["yesterday-ish", "2026-11-24T18:00", "12x"])
def test_a_time_that_is_not_one_is_refused_with_a_hint(text: str) -> None:
    with pytest.raises(InvalidInputError, match=r"ISO time|time zone"):
        parse_moment(text, NOW, "since")


@pytest.mark.parametrize(
    ("file", "allowed"),
    [
        ("memory/work/0123456789ab.json", True),
        ("knowledge-graph/entities/e1.json", True),
        ("MEMORY.md", True),
        ("SOUL.md", True),
        ("triggers.json", True),
        ("meta/audit.log", False),  # the record of what happened is never rolled back
        ("meta/alerts.json", False),
        ("meta/access/log.jsonl", False),
        ("working-memory/session.json", False),
        ("index/snapshot.npz", False),
        (".embeddings/x.bin", False),
        ("../outside.json", False),
        ("/etc/passwd", False),
        ("memory/../../x.json", False),
        ("memory\\x.json", False),
        ("notes.txt", False),
    ],
)
def test_a_revert_touches_store_files_inside_the_home_only(file: str, allowed: bool) -> None:
    assert restorable(file) is allowed
