"""Audit retention (seed 004 §12.6): lines past `audit_retention_days` fold into monthly digests in
meta/audit-archive.md (written before the lines leave meta/audit.log), once, whatever crashes in between."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from rockmem_mcp.audit.log import AuditLine, AuditLog
from rockmem_mcp.audit.retention import ARCHIVE_NAME, fold_old_lines
from rockmem_mcp.config import Settings
from rockmem_mcp.consolidation.dream import Dreamer
from rockmem_mcp.consolidation.templates import Templates
from rockmem_mcp.errors import CorruptEntryError
from rockmem_mcp.graph.service import GraphService
from rockmem_mcp.memory.service import MemoryService
from tests.unit.helpers import FakeClock

NOW = datetime(2026, 5, 20, 12, 0, tzinfo=UTC)  # 120 days before: 2026-01-20; 95 days before: 2026-02-14


def ago(days: float) -> datetime:
    return NOW - timedelta(days=days)


JANUARY = [  # 120 days old
    AuditLine(ago(120), "CREATE", "procedures/deploy.json", "main", "auto", 'new procedure "deploy"'),
    AuditLine(ago(120), "EDIT", "MEMORY.md", "reflection:r-1", "approved", "rewrote Active Context"),
    AuditLine(ago(120), "EDIT", "USER.md", "reflection:r-2", "rejected", "timezone"),
    AuditLine(ago(119), "EDIT", "SOUL.md", "manual", "—", "⚠️ CRITICAL: changed outside the server"),
    AuditLine(ago(119), "ALERT", "SOUL.md", "system:audit", "—", "Critical file change detected."),
    AuditLine(ago(118), "DECAY", "memory/a.json", "system:decay", "auto", "fading → dormant"),
    AuditLine(ago(118), "ARCHIVE", "memory/a.json", "dream:d-1", "auto", "archived: stale"),
]
FEBRUARY = [  # 95 days old
    AuditLine(ago(95), "MERGE", "memory/b.json", "dream:d-2", "auto", "3 duplicates into one"),
    AuditLine(ago(95), "EDIT", "memory/b.json", "dream:d-2", "auto", "set tags"),
]
RECENT = [AuditLine(ago(10), "EDIT", "MEMORY.md", "main", "auto", "added a line")]

JANUARY_DIGEST = """\
# Audit Digest — January 2026

## Summary
- 6 total mutations across 5 files
- 2 reflection sessions (1 approved, 0 partial, 1 rejected), 1 dream run
- 1 critical file change
- 1 decay transition, 1 archival event

## Notable Events
- 2026-01-20: CREATE procedures/deploy.json — new procedure "deploy"
- 2026-01-21: ALERT SOUL.md — Critical file change detected.
"""
FEBRUARY_DIGEST = """\
# Audit Digest — February 2026

## Summary
- 2 total mutations across 1 file
- 0 reflection sessions (0 approved, 0 partial, 0 rejected), 1 dream run
- 0 critical file changes
- 0 decay transitions, 0 archival events

## Notable Events
- 2026-02-14: MERGE memory/b.json — 3 duplicates into one
"""


@pytest.fixture
def audit_log(settings: Settings) -> AuditLog:
    log = AuditLog(settings.meta_dir / "audit.log")
    log.append(JANUARY + FEBRUARY + RECENT)
    return log


def archive(settings: Settings) -> str:
    return (settings.meta_dir / ARCHIVE_NAME).read_text("utf-8")


def test_lines_past_retention_fold_into_their_months_and_recent_ones_stay(
    settings: Settings, audit_log: AuditLog
) -> None:
    result = fold_old_lines(settings, audit_log, NOW)
    assert (result.dropped, result.counted, result.months) == (9, 9, ["2026-01", "2026-02"])
    *kept, digest = audit_log.lines()
    assert kept == RECENT
    assert (digest.action, digest.file, digest.actor) == ("EDIT", "meta/audit-archive.md", "system:retention")
    assert digest.summary == "folded 9 line(s) older than 90 days into the monthly digests"  # its own line
    text = archive(settings)
    assert JANUARY_DIGEST in text and FEBRUARY_DIGEST in text
    assert text.index("January 2026") < text.index("February 2026")


def test_running_again_counts_nothing_twice_and_a_later_run_adds_to_the_month(
    settings: Settings, audit_log: AuditLog
) -> None:
    fold_old_lines(settings, audit_log, NOW)
    before = archive(settings)
    again = fold_old_lines(settings, audit_log, NOW)
    assert (again.dropped, again.counted) == (0, 0) and archive(settings) == before
    # Lines of February not yet past retention at the first run fold later into the same month's digest.
    audit_log.append([AuditLine(ago(80), "REVERT", "MEMORY.md", "manual", "—", "back to abc1234")])
    later = fold_old_lines(settings, audit_log, NOW + timedelta(days=11))  # 91 days old then
    assert (later.dropped, later.months) == (1, ["2026-03"])
    assert "# Audit Digest — March 2026" in archive(settings) and FEBRUARY_DIGEST in archive(settings)
    assert [line for line in audit_log.lines() if line.file != "meta/audit-archive.md"] == RECENT


def test_a_crash_between_the_digest_and_the_logs_rewrite_leaves_the_lines_and_counts_them_once(
    settings: Settings, audit_log: AuditLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    rewrite = AuditLog.rewrite

    def crash_after_the_digest(
        self: AuditLog, keep: Callable[[list[AuditLine]], list[AuditLine]], older_than: object = None
    ) -> int:
        keep(list(self.lines()))  # the digest is written, then the process dies before the log is replaced
        raise OSError("killed")

    monkeypatch.setattr(AuditLog, "rewrite", crash_after_the_digest)
    with pytest.raises(OSError, match="killed"):
        fold_old_lines(settings, audit_log, NOW)
    assert list(audit_log.lines()) == JANUARY + FEBRUARY + RECENT  # nothing lost
    crashed = archive(settings)
    assert JANUARY_DIGEST in crashed
    monkeypatch.setattr(AuditLog, "rewrite", rewrite)
    result = fold_old_lines(settings, audit_log, NOW)
    assert (result.dropped, result.counted) == (9, 0)  # dropped now, not counted again
    assert archive(settings) == crashed and list(audit_log.lines())[:-1] == RECENT


def test_a_lost_markdown_is_rendered_again_from_the_state(settings: Settings, audit_log: AuditLog) -> None:
    fold_old_lines(settings, audit_log, NOW)
    written = archive(settings)
    (settings.meta_dir / ARCHIVE_NAME).unlink()  # e.g. a crash between the state and the markdown
    fold_old_lines(settings, audit_log, NOW)
    assert archive(settings) == written


def test_an_unreadable_state_refuses_to_fold_and_drops_nothing(settings: Settings, audit_log: AuditLog) -> None:
    settings.meta_dir.mkdir(parents=True, exist_ok=True)
    (settings.meta_dir / "audit-archive.json").write_text("{broken")
    with pytest.raises(CorruptEntryError, match=r"audit-archive\.json cannot be read"):
        fold_old_lines(settings, audit_log, NOW)
    assert len(list(audit_log.lines())) == 10


def test_the_retention_setting_moves_the_cutoff(tmp_path: Path, audit_log: AuditLog, settings: Settings) -> None:
    longer = settings.model_copy(update={"audit_retention_days": 100})
    result = fold_old_lines(longer, audit_log, NOW)
    assert result.months == ["2026-01"] and len(list(audit_log.lines())) == 4  # 3 kept and the digest's line


def test_the_deterministic_dream_folds_old_lines_and_a_dry_run_does_not(
    settings: Settings, service: MemoryService, graph: GraphService, audit_log: AuditLog
) -> None:
    dreamer = Dreamer(service, graph, settings, Templates(settings.prompts_dir), FakeClock(NOW, timedelta(0)))
    dreamer.run_deterministic(dry_run=True)
    assert len([line for line in audit_log.lines() if line.time < ago(90)]) == 9
    dreamer.run_deterministic()
    assert [line for line in audit_log.lines() if line.time < ago(90)] == []
    assert JANUARY_DIGEST in archive(settings)
