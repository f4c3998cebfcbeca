"""The audit trail in PostgreSQL (audit/postgres.py, audit/retention.py's DigestDocuments) against the
machine's real server: every replica's changes are one trail that every replica reads, retention folds old lines
into one digest kept in the store (counted once whichever replica folds), and rollback, which needs a home's git
history, refuses on a database store with a reason instead of writing files nobody reads."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from rockmem_mcp.audit.log import AuditLine
from rockmem_mcp.audit.retention import ARCHIVE_NAME, DigestDocuments, fold_old_lines
from rockmem_mcp.audit.service import Audit
from rockmem_mcp.config import Settings
from rockmem_mcp.errors import InvalidInputError
from rockmem_mcp.governance.history import GitHistory
from rockmem_mcp.governance.rollback import Rollback
from rockmem_mcp.governance.trail import AuditTrail
from rockmem_mcp.memory.service import MemoryService
from rockmem_mcp.storage.pg import Database
from tests.pg_server import database  # noqa: F401  (the fixture)


def replica_settings(tmp_path: Path, name: str, store: str) -> Settings:
    return Settings.load({"home": tmp_path / name, "store": store}, env={"ROCKMEM_EMBEDDING_MODEL": "off"})


def test_every_replicas_changes_are_one_trail(database: str, tmp_path: Path) -> None:  # noqa: F811
    a_settings, b_settings = replica_settings(tmp_path, "a", database), replica_settings(tmp_path, "b", database)
    a, b = MemoryService(a_settings, embed_in_background=False), MemoryService(b_settings, embed_in_background=False)
    try:
        saved_on_a = a.save("The lighthouse keeper is Ida")
        saved_on_b = b.save("The lamp burns kerosene")
        b.delete(saved_on_a.id)
        for settings in (a_settings, b_settings):
            trail = AuditTrail(Audit(settings)).entries()
            said = [(entry.action, entry.file.rsplit("/", 1)[-1]) for entry in reversed(trail)]
            assert said == [
                ("CREATE", f"{saved_on_a.id}.json"), ("CREATE", f"{saved_on_b.id}.json"),
                ("ARCHIVE", f"{saved_on_a.id}.json"),
            ]  # fmt: skip
            assert not (settings.meta_dir / "audit.log").exists()  # rows in the store, not the homes
    finally:
        a.close()
        b.close()


def test_retention_folds_old_lines_once_into_the_stores_one_digest(database: str, tmp_path: Path) -> None:  # noqa: F811
    a_settings, b_settings = replica_settings(tmp_path, "a", database), replica_settings(tmp_path, "b", database)
    now = datetime(2026, 5, 20, 12, tzinfo=UTC)
    old = [
        AuditLine(now - timedelta(days=120), "CREATE", "procedures/deploy.json", "main", "auto", 'new procedure "x"'),
        AuditLine(now - timedelta(days=119), "MERGE", "memory/b.json", "dream:d-1", "auto", "3 duplicates into one"),
    ]
    recent = [AuditLine(now - timedelta(days=3), "EDIT", "MEMORY.md", "main", "auto", "added a line")]
    Audit(a_settings).log.append(old + recent)
    folded = fold_old_lines(a_settings, Audit(a_settings).log, now)
    assert (folded.dropped, folded.counted, folded.months) == (2, 2, ["2026-01"])
    again = fold_old_lines(b_settings, Audit(b_settings).log, now)  # another replica: nothing counted twice
    assert (again.dropped, again.counted) == (0, 0)
    kept = list(Audit(b_settings).log.lines())
    assert kept[0] == recent[0] and [line.file for line in kept[1:]] == [f"meta/{ARCHIVE_NAME}"]
    digest = DigestDocuments(b_settings).read(ARCHIVE_NAME).decode()
    assert "# Audit Digest — January 2026" in digest and "- 2 total mutations across 2 files" in digest
    assert not (a_settings.meta_dir / ARCHIVE_NAME).exists()


def test_rollback_refuses_on_a_database_store_and_keeps_no_git_history(database: str, tmp_path: Path) -> None:  # noqa: F811
    settings = replica_settings(tmp_path, "a", database)
    memory = MemoryService(settings, embed_in_background=False)
    try:
        entry = memory.save("The lamp burns kerosene")
        memory.update(entry.id, content="The lamp burns oil")
        history = GitHistory(settings, memory.audit)
        assert not history.available and memory.audit.versions is None
        rollback = Rollback(settings, memory.audit, history, memory)
        with pytest.raises(InvalidInputError, match="point-in-time recovery"):
            rollback.revert_item(entry.id)
        assert memory.get(entry.id).content == "The lamp burns oil"
        assert not (settings.home / ".git").exists()
        assert "its backups are the history" in (AuditTrail(memory.audit, history).item_history(entry.id).note or "")
    finally:
        memory.close()


def test_two_folds_at_once_lose_no_count(database: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    """A fold that read the digests, then waited for the trail's lock while another fold saved, counts on top of
    what that one saved (read again under the lock), never over it."""
    import json

    from rockmem_mcp.audit import retention as audit_retention

    settings = replica_settings(tmp_path, "a", database)
    trail = Audit(settings).log
    now = datetime(2026, 6, 1, tzinfo=UTC)
    old = [AuditLine(now - timedelta(days=200 + n), "CREATE", f"memory/x{n}.json", "main", "auto", "x")
           for n in range(10)]  # fmt: skip
    edge = AuditLine(now - timedelta(days=90, minutes=-1), "CREATE", "memory/edge.json", "main", "auto", "edge")
    trail.append([*old, edge])  # `edge` is past retention for the later fold only
    real_rewrite = trail.rewrite

    def the_other_fold_first(keep: object, older_than: datetime | None = None) -> int:
        fold_old_lines(settings, Audit(settings).log, now)  # another replica's fold, while this one waited
        return real_rewrite(keep, older_than)  # type: ignore[arg-type]

    monkeypatch.setattr(trail, "rewrite", the_other_fold_first)
    fold_old_lines(settings, trail, now + timedelta(minutes=5))
    state = json.loads(audit_retention.DigestDocuments(settings).read(audit_retention.STATE_NAME))
    assert sum(month["lines"] for month in state["months"].values()) == 11


def test_a_fold_reads_only_old_lines_and_never_holds_up_an_append(database: str, tmp_path: Path) -> None:  # noqa: F811
    """Retention reads the lines past it only (by the time each line starts with) and deletes those by row: another
    replica appending meanwhile is not held up (a table lock would stop every replica's writes for the fold)."""
    import threading

    from rockmem_mcp.audit.postgres import PgAuditLog

    a_settings, b_settings = replica_settings(tmp_path, "a", database), replica_settings(tmp_path, "b", database)
    now = datetime(2026, 6, 1, tzinfo=UTC)
    recent = [AuditLine(now - timedelta(days=1), "EDIT", "MEMORY.md", "main", "auto", f"line {n}") for n in range(50)]
    old = AuditLine(now - timedelta(days=200), "CREATE", "memory/x.json", "main", "auto", "old")
    Audit(a_settings).log.append([old, *recent])
    trail = Audit(a_settings).log
    assert isinstance(trail, PgAuditLog)
    seen: list[int] = []
    appended = threading.Event()

    def keep(lines: list[AuditLine]) -> list[AuditLine]:
        seen.append(len(lines))
        other = PgAuditLog(Database(b_settings.store), "other")  # another replica's own connection
        line = AuditLine(now, "EDIT", "MEMORY.md", "main", "auto", "meanwhile")
        worker = threading.Thread(target=lambda: (other.append([line]), appended.set()))
        worker.start()
        worker.join(10)
        return []

    assert trail.rewrite(keep, older_than=now - timedelta(days=90)) == 1
    assert seen == [1] and appended.is_set()
    assert [line.summary for line in Audit(b_settings).log.lines()][-1] == "meanwhile"
    assert len(list(Audit(b_settings).log.lines())) == 51
