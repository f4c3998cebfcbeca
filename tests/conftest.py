"""Shared test setup: no test may touch the real user data directory."""

from __future__ import annotations

import compileall
import os
from pathlib import Path

import pytest

import rockmem_mcp

# Servers and commands the suite starts run with embeddings off unless a test asks for a model (the product's
# default is the bundled model: tests/e2e/test_hybrid.py and the service tests check it with the setting unset).
# Most tests check storage, recovery and keyword ranking, which a vector's fuzzy extra hits would blur, and a
# background vector worker in each of hundreds of servers cost the suite two minutes on 2 cores.
SUITE_EMBEDDINGS = "off"


@pytest.fixture(autouse=True)
def _isolated_rockmem_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROCKMEM_HOME", str(tmp_path_factory.mktemp("rockmem-home")))
    if "ROCKMEM_EMBEDDING_MODEL" not in os.environ:
        monkeypatch.setenv("ROCKMEM_EMBEDDING_MODEL", SUITE_EMBEDDINGS)


# The suite is mostly waiting (fsyncs, subprocesses, servers answering): one worker more than there are cores
# keeps every core busy (measured on 2 cores: 9 min 44 s with 2 workers, 9 min 9 s with 3).
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    return (os.cpu_count() or 1) + 1


def pytest_sessionstart(session: pytest.Session) -> None:
    """The package compiled once, before any test: the suite starts ~700 servers and commands, and where
    PYTHONDONTWRITEBYTECODE is set (it is on the machines this suite runs on) none keeps its bytecode, so each
    compiled the modules it imports again (~0.4 s of CPU a process on 2 cores). Bytecode already there is read
    whatever that setting says."""
    if not hasattr(session.config, "workerinput"):  # the xdist controller (or a run without xdist), once
        compileall.compile_dir(Path(rockmem_mcp.__file__).parent, quiet=1)
