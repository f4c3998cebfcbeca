"""The garbage collector paused for a process's start (rockmem_mcp/collector.py)."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest

from rockmem_mcp import collector
from rockmem_mcp.cli import app as cli_app
from rockmem_mcp.cli import main


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


def test_a_pause_ends_by_itself_after_its_limit_with_the_starts_garbage_collected() -> None:
    timer = collector.pause(limit_s=0.05)
    assert timer is not None and not gc.isenabled()
    garbage = Cycle()
    gone = weakref.ref(garbage)
    del garbage
    timer.join(5)
    assert gc.isenabled() and not collector.is_paused()
    assert gone() is None  # the time limit collects too: the first pass falls on no request


def test_the_collector_comes_back_on_even_when_the_collection_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    assert collector.pause() is not None

    def failing() -> int:
        raise MemoryError

    monkeypatch.setattr(gc, "collect", failing)
    with pytest.raises(MemoryError):
        collector.resume(settle=True)
    assert gc.isenabled() and not collector.is_paused()


def test_the_command_line_gives_the_collector_back_before_a_command_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`main` pauses the collector for the start; a command (anything but serving MCP) runs with it on, and
    `main` leaves it on when it returns or exits, whatever happened."""
    seen: list[bool] = []

    def command(*_: object) -> int:
        seen.append(gc.isenabled())
        return 0

    monkeypatch.setitem(cli_app.COMMANDS, "stats", command)
    assert main(["--home", str(tmp_path), "stats"]) == 0
    assert seen == [True]
    assert gc.isenabled() and not collector.is_paused()
    with pytest.raises(SystemExit):
        main(["--version"])
    assert gc.isenabled() and not collector.is_paused()
    assert main(["--home", str(tmp_path / "a-file"), "--toolsets", "no-such-set", "serve"]) == 2
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
