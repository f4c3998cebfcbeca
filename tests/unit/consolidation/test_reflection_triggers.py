"""When a reflection starts by itself (seed 004 §10.1): the schedule, the conversation going quiet, and the
threshold of new memories and episodes; one at a time per home."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from rockmem_mcp.config import Settings
from rockmem_mcp.consolidation.dream import Dreamer
from rockmem_mcp.consolidation.reflection import Reflector
from rockmem_mcp.consolidation.reflection_triggers import ReflectionTriggers
from rockmem_mcp.consolidation.schedule import last_scheduled, next_scheduled
from rockmem_mcp.consolidation.templates import Templates
from rockmem_mcp.graph.service import GraphService
from rockmem_mcp.memory.service import MemoryService


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def parts(settings: Settings) -> Iterator[tuple[Settings, MemoryService, Reflector, Clock]]:
    settings = settings.model_copy(update={"reflection_threshold": 3, "reflection_idle_minutes": 30})
    clock = Clock(datetime.now(UTC))
    memory, graph = MemoryService(settings), GraphService(settings)
    reflector = Reflector(settings, Dreamer(memory, graph, settings, Templates(settings.prompts_dir)), clock=clock)
    yield settings, memory, reflector, clock
    memory.close()
    graph.close()


def test_the_schedule_is_a_local_time_of_day() -> None:
    now = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)
    last, following = last_scheduled(now, "03:00"), next_scheduled(now, "03:00")
    assert (last.hour, last.minute) == (3, 0) and last <= now < following
    assert following - last == timedelta(days=1)
    assert last.utcoffset() == now.astimezone().utcoffset()  # the machine's zone


def test_nothing_is_due_on_a_quiet_home(parts) -> None:
    settings, _, reflector, clock = parts
    settings = settings.model_copy(update={"reflection_at": _hour_after(clock.now)})
    triggers = ReflectionTriggers(settings, lambda: reflector, clock=clock)
    assert triggers.due() is None and triggers.tick() is None


def test_the_threshold_of_new_memories_starts_one_and_resets(parts) -> None:
    settings, memory, reflector, clock = parts
    settings = settings.model_copy(update={"reflection_at": _hour_after(clock.now)})
    triggers = ReflectionTriggers(settings, lambda: reflector, clock=clock)
    for n in range(3):
        memory.save(f"fact number {n}")
    clock.now = datetime.now(UTC)  # the memories' own clock is the real one
    assert triggers.due() == "threshold"
    done = triggers.tick()
    assert done is not None and done.trigger == "threshold"
    clock.now += timedelta(seconds=1)
    assert triggers.due() is None  # counted from the reflection's start


def test_the_scheduled_time_passing_starts_one_once(parts) -> None:
    settings, _, reflector, clock = parts
    settings = settings.model_copy(update={"reflection_at": _hour_after(clock.now)})
    triggers = ReflectionTriggers(settings, lambda: reflector, clock=clock)
    assert triggers.due() is None
    clock.now += timedelta(hours=1, minutes=1)
    assert triggers.due() == "schedule"
    assert triggers.tick() is not None
    clock.now += timedelta(minutes=5)
    assert triggers.due() is None  # the next one is a day later


def test_a_conversation_gone_quiet_starts_one(parts) -> None:
    settings, _, reflector, clock = parts
    settings = settings.model_copy(update={"reflection_at": _hour_after(clock.now)})
    last_turn = clock.now
    triggers = ReflectionTriggers(settings, lambda: reflector, clock=clock, last_turn=lambda: last_turn)
    clock.now += timedelta(minutes=10)
    assert triggers.due() is None
    clock.now += timedelta(minutes=25)
    assert triggers.due() == "idle"
    assert triggers.tick() is not None
    assert triggers.due() is None  # that conversation is reflected on


def test_a_tick_while_another_reflection_runs_does_nothing(parts) -> None:
    settings, memory, reflector, clock = parts
    for n in range(3):
        memory.save(f"fact number {n}")
    triggers = ReflectionTriggers(settings, lambda: reflector, clock=clock)
    with reflector.files.claim():
        assert triggers.tick() is None
    assert reflector.files.numbers() == []


def _hour_after(now: datetime) -> str:
    local = (now + timedelta(hours=1)).astimezone()
    return f"{local:%H:%M}"


def test_no_automatic_reflection_while_one_waits_for_the_user(parts) -> None:
    settings, memory, reflector, clock = parts
    settings = settings.model_copy(update={"reflection_approval": "always"})
    waiting = Reflector(settings, reflector.dreamer, clock=clock)
    triggers = ReflectionTriggers(settings, lambda: waiting, clock=clock)
    for n in range(3):
        memory.save(f"fact number {n}")
    clock.now = datetime.now(UTC)
    assert triggers.tick() is not None and waiting.pending()
    for n in range(3):
        memory.save(f"another fact {n}")
    clock.now = datetime.now(UTC)
    assert triggers.due() is None  # it would plan much the same again
    waiting.resolve(waiting.pending()[0].id, "reject", reason="not now")
    assert triggers.due() == "threshold"
