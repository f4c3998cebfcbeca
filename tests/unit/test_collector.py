"""The garbage collector paused for a process's start (rockmem_mcp/collector.py)."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from rockmem_mcp import collector


@pytest.fixture(autouse=True)
def collector_restored() -> Iterator[None]:
    """Whatever a test does, the test process gets its collector back on."""
    yield
    collector.resume()
    gc.enable()


class Cycle:
    def __init__(self) -> None:
        self.me = self


def test_a_pause_turns_the_collector_off_until_resumed() -> None:
    timer = collector.pause()
    assert timer is not None
    assert not gc.isenabled() and collector.is_paused()
    collector.resume()
    assert gc.isenabled() and not collector.is_paused()
    timer.join(5)  # resuming ended the timer too: no thread is left waiting
    assert not timer.is_alive()


def test_a_pause_ends_by_itself_after_its_limit() -> None:
    timer = collector.pause(limit_s=0.01)
    assert timer is not None and not gc.isenabled()
    timer.join(5)
    assert gc.isenabled() and not collector.is_paused()


def test_a_collector_the_program_turned_off_stays_off() -> None:
    gc.disable()
    assert collector.pause() is None
    collector.resume()
    collector.resume(settle=True)
    assert not gc.isenabled()


def test_settling_collects_the_starts_garbage() -> None:
    kept = Cycle()
    timer = collector.pause()
    assert timer is not None
    garbage = Cycle()
    gone = weakref.ref(garbage)
    del garbage
    assert gone() is not None  # a cycle: only the collector frees it, and it is paused
    collector.resume(settle=True)
    assert gone() is None
    assert gc.isenabled()
    assert kept.me is kept
