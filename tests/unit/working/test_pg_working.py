"""Working memory in PostgreSQL (working/postgres.py) against the machine's real server: replicas with their own
homes share one working memory; concurrent writers lose nothing; namespaces, caps and time-to-live hold across
replicas (the service applies them under the row's lock)."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from rockmem_mcp.config import Settings
from rockmem_mcp.errors import InvalidInputError
from rockmem_mcp.working.service import WorkingMemory, sweep_expired
from tests.pg_server import database  # noqa: F401  (the fixture)


def settings(tmp_path: Path, name: str, store: str, **more: str) -> Settings:
    return Settings.load({"home": tmp_path / name, "store": store}, env={"ROCKMEM_EMBEDDING_MODEL": "off", **more})


def test_replicas_share_working_memory_and_keep_namespaces(database: str, tmp_path: Path) -> None:  # noqa: F811
    a = WorkingMemory(settings(tmp_path, "a", database), "session/aaa")
    b = WorkingMemory(settings(tmp_path, "b", database), "session/bbb")
    a.save("shared/team/plan", "step one, then step two", ttl_minutes=10)
    assert b.get("shared/team/plan").data == "step one, then step two"  # another replica, another session
    a.save("draft", "mine alone")
    with pytest.raises(InvalidInputError, match="belongs to namespace"):
        b.save("session/aaa/draft", "not mine")
    assert [info.key for info in b.list("session/aaa")] == ["session/aaa/draft"]
    assert b.delete("shared/team/plan") and a.list("shared") == []
    assert not list((tmp_path / "a").rglob("working-memory/*.json"))  # in the database, not the homes


def test_concurrent_writers_on_two_replicas_lose_nothing(database: str, tmp_path: Path) -> None:  # noqa: F811
    a = WorkingMemory(settings(tmp_path, "a", database), "session/aaa")
    b = WorkingMemory(settings(tmp_path, "b", database), "session/bbb")
    rounds = 30

    def write(memory: WorkingMemory, who: str) -> None:
        for i in range(rounds):
            memory.save(f"shared/team/{who}-{i}", f"{who} {i}", ttl_minutes=10)

    threads = [threading.Thread(target=write, args=(a, "a")), threading.Thread(target=write, args=(b, "b"))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    keys = sorted(info.key for info in a.list("shared"))
    assert len(keys) == min(2 * rounds, a.settings.working_max_entries)
    assert {k.split("/")[2][0] for k in keys} == {"a", "b"}


def test_caps_and_time_to_live_hold_across_replicas(database: str, tmp_path: Path) -> None:  # noqa: F811
    now = [datetime(2026, 11, 28, 12, 0, tzinfo=UTC)]
    capped = {"ROCKMEM_WORKING_MAX_ENTRIES": "3"}
    a = WorkingMemory(settings(tmp_path, "a", database, **capped), "session/aaa", clock=lambda: now[0])
    b = WorkingMemory(settings(tmp_path, "b", database, **capped), "session/bbb", clock=lambda: now[0])
    for i in range(2):
        a.save(f"shared/team/a{i}", "x", ttl_minutes=1 + i)
    for i in range(2):
        b.save(f"shared/team/b{i}", "y", ttl_minutes=10 + i)
    assert len(a.list("shared")) == 3  # the cap, whichever replica wrote
    now[0] += timedelta(minutes=5)
    assert [info.key for info in b.list("shared")] == [
        "shared/team/b0",
        "shared/team/b1",
    ]  # the short-lived one expired
    assert sweep_expired(a.settings, clock=lambda: now[0]) >= 1


def test_entries_expire_by_the_databases_clock_whatever_a_replicas_clock_says(
    database: str,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import time

    from rockmem_mcp.storage import pg

    memory = WorkingMemory(settings(tmp_path, "a", database), "session/aaa")
    assert memory._clock is memory.files.clock  # type: ignore[attr-defined]  # the store's, not this machine's
    (server,) = pg.Database(database).one("SELECT clock_timestamp()")
    real = time.time
    monkeypatch.setattr(pg.time, "time", lambda: real() + 600)  # this machine's clock ten minutes ahead
    skewed = pg.StoreClock(pg.Database(database))
    assert abs((skewed() - server).total_seconds()) < 5  # still the database's time
