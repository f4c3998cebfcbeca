"""Per-session state in a server process: bounded in count and bytes, least recently used released first,
idle sessions released (an injectable clock, no sleeping)."""

from __future__ import annotations

from datetime import timedelta

from rockmem_mcp.conversation.sessions import SessionTable
from tests.unit.helpers import FakeClock


def table(clock: FakeClock, max_sessions: int = 3, max_bytes: int = 1_000) -> SessionTable[list[str]]:
    return SessionTable(
        idle=timedelta(hours=1),
        max_bytes=max_bytes,
        size=lambda items: sum(len(item) for item in items),
        clock=clock,
        max_sessions=max_sessions,
    )


def test_beyond_the_count_the_least_recently_used_session_is_released() -> None:
    sessions = table(FakeClock(step=timedelta(0)))
    for name in ("a", "b", "c"):
        sessions.open(name, list).append(name)
    sessions.open("a", list)  # used again: now b is the least recently used
    sessions.open("d", list)
    assert len(sessions) == 3 and "b" not in sessions and {"a", "c", "d"} <= {n for n in "abcd" if n in sessions}
    assert sessions.peek("a") == ["a"]  # a kept its state


def test_beyond_the_bytes_the_least_recently_used_sessions_are_released_never_the_one_in_use() -> None:
    sessions = table(FakeClock(step=timedelta(0)), max_sessions=100, max_bytes=1_000)
    for name in ("a", "b", "c"):
        sessions.open(name, list).append("x" * 300)
        sessions.resized(name)
    assert sessions.bytes == 900 and len(sessions) == 3
    sessions.open("c", list).append("y" * 300)
    sessions.resized("c")
    assert "a" not in sessions and "b" in sessions and sessions.bytes == 900
    sessions.open("c", list).append("z" * 2_000)  # alone over the bound: the others go, it stays
    sessions.resized("c")
    assert len(sessions) == 1 and "c" in sessions and sessions.bytes == 2_600


def test_an_idle_session_is_released_and_reading_does_not_count_as_use() -> None:
    clock = FakeClock(step=timedelta(0))
    sessions = table(clock)
    sessions.open("quiet", list).append("hello")
    sessions.resized("quiet")
    sessions.open("busy", list)
    clock.now += timedelta(minutes=59)
    sessions.open("busy", list)
    assert sessions.peek("quiet") == ["hello"]
    clock.now += timedelta(minutes=1)
    assert sessions.peek("quiet") is None and "busy" in sessions and sessions.bytes == 0
    clock.now += timedelta(minutes=58, seconds=59)  # busy: idle 59m59s
    assert "busy" in sessions
    clock.now += timedelta(seconds=1)
    assert len(sessions) == 0


def test_pop_forgets_a_session_and_its_bytes() -> None:
    sessions = table(FakeClock(step=timedelta(0)))
    sessions.open("a", list).append("abc")
    sessions.resized("a")
    assert sessions.pop("a") == ["abc"] and sessions.bytes == 0 and sessions.pop("a") is None
