"""Shared test setup: no test may touch the real user data directory."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(autouse=True)
def _isolated_rockmem_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROCKMEM_HOME", str(tmp_path_factory.mktemp("rockmem-home")))


# The suite is mostly waiting (fsyncs, subprocesses, servers answering): one worker more than there are cores
# keeps every core busy (measured on 2 cores: 9 min 44 s with 2 workers, 9 min 9 s with 3).
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    return (os.cpu_count() or 1) + 1
