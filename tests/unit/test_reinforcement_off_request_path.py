"""Reinforcement stays off the request path: a search that reinforces never waits for the access log's write
and never fsyncs (issue 18: "a search never waits for a disk write")."""

from __future__ import annotations

import os
import threading
from datetime import timedelta
from pathlib import Path

import pytest

from rockmem_mcp.config import Settings
from rockmem_mcp.memory.service import MemoryService
from rockmem_mcp.reinforcement import MEMORY
from rockmem_mcp.storage.access_log import Access
from tests.unit.helpers import FakeClock


def test_a_search_returns_while_the_reinforcement_write_is_stuck(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = Settings(home=tmp_path / "home", salience_flush_s=0.01, embedding_model="off")
    # Every clock reading is 2 minutes on: each search is past the once-a-minute reinforcement limit.
    memory = MemoryService(settings, clock=FakeClock(step=timedelta(minutes=2)))
    first = memory.save("the kafka consumer runbook lives in ops.md")
    second = memory.save("the grafana dashboard budget was approved")
    access_log = memory.reinforcer.log
    assert access_log is not None
    entered, release = threading.Event(), threading.Event()
    written: list[dict[tuple[str, str], Access]] = []
    real_append = access_log.append

    def stuck_append(batch: dict[tuple[str, str], Access]) -> None:
        written.append(dict(batch))
        entered.set()
        assert release.wait(10)
        real_append(batch)

    fsynced_by: list[int] = []
    real_fsync = os.fsync

    def recorded_fsync(fd: int) -> None:
        fsynced_by.append(threading.get_ident())
        real_fsync(fd)

    monkeypatch.setattr(access_log, "append", stuck_append)
    monkeypatch.setattr(os, "fsync", recorded_fsync)
    answered = threading.Event()
    searcher: list[int] = []

    def search_second() -> None:
        searcher.append(threading.get_ident())
        memory.search("grafana dashboard budget", reinforce=True)
        answered.set()

    try:
        memory.search("kafka consumer runbook", reinforce=True)
        assert entered.wait(10)  # the background flusher is writing the first use, and stays stuck there
        thread = threading.Thread(target=search_second)
        thread.start()
        assert answered.wait(10), "the search waited for the access log's write"
        counted = memory.index.access(second.id)
        assert counted is not None and counted.count == 2  # the use is counted at once
        assert [set(batch) for batch in written] == [{(MEMORY, first.id)}]  # ... and not written yet
        assert not {threading.get_ident(), *searcher} & set(fsynced_by)  # no fsync on a searching thread
    finally:
        release.set()
    thread.join(10)
    memory.close()  # the last batch is written at close
    reopened = MemoryService(settings)
    try:
        assert reopened.get(second.id).reinforcement_count == 2
        assert reopened.get(first.id).reinforcement_count == 2
    finally:
        reopened.close()
