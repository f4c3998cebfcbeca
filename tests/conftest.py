"""Shared test setup: no test may touch the real user data directory."""

from __future__ import annotations

import compileall
import os
import re
import warnings
from pathlib import Path
from types import SimpleNamespace

import pytest

import rockmem_mcp
import rockmem_mcp.server  # before any test imports the SDK: its wire models built on first use, as in a server

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


@pytest.hookimpl(tryfirst=True)  # before xdist starts its workers (threads, then processes)
def pytest_sessionstart(session: pytest.Session) -> None:
    """The package compiled once, before any test: the suite starts ~700 servers and commands, and where
    PYTHONDONTWRITEBYTECODE is set (it is on the machines this suite runs on) none keeps its bytecode, so each
    compiled the modules it imports again (~0.4 s of CPU a process on 2 cores). Bytecode already there is read
    whatever that setting says."""
    if not hasattr(session.config, "workerinput"):  # the xdist controller (or a run without xdist), once
        compileall.compile_dir(Path(rockmem_mcp.__file__).parent, quiet=1)
        compileall.compile_dir(TESTS, quiet=1, rx=TEST_MODULE)  # the helpers the tests and their servers import
        _rewrite_test_modules(session.config)


TESTS = Path(__file__).parent
TEST_MODULE = re.compile(r"[/\\]test_[^/\\]*\.py$")


def _rewrite_test_modules(config: pytest.Config) -> None:
    """Each xdist worker imports every test module to collect it, and pytest rewrites a test module's asserts as it
    imports it. pytest keeps rewritten code in __pycache__, but not where PYTHONDONTWRITEBYTECODE is set, so there
    every worker rewrote every module. Rewritten here once, a share in each of one forked process per core, before
    the workers start (pytest reads what is there whatever that setting says), collecting the suite on 2 cores took
    10 s instead of 16. This uses pytest's own (private) rewriting: if it changes, the forked processes fail, and the
    workers rewrite as before."""
    if not hasattr(os, "fork"):  # Windows: the workers rewrite
        return
    modules = sorted(
        path for path in TESTS.rglob("*.py") if TEST_MODULE.search(str(path)) or path.name == "conftest.py"
    )
    cores = os.cpu_count() or 1
    children = []
    for share in range(cores):
        child = os.fork()
        if child == 0:  # nothing of the parent's (buffers, exit handlers) may run here: os._exit, always
            status = 1
            try:
                for path in modules[share::cores]:
                    _rewrite_test_module(path, config)
                status = 0
            finally:
                os._exit(status)
        children.append(child)
    if any(os.waitpid(child, 0)[1] for child in children):
        warnings.warn("test modules not all rewritten ahead of the workers: they rewrite the rest", stacklevel=1)


def _rewrite_test_module(path: Path, config: pytest.Config) -> None:
    from _pytest.assertion import rewrite

    pyc = rewrite.get_cache_dir(path) / (path.name[: -len(".py")] + rewrite.PYC_TAIL)
    if rewrite._read_pyc(path, pyc) is not None or not rewrite.try_makedirs(pyc.parent):
        return
    source_hash, code = rewrite._rewrite_test(path, config)
    rewrite._write_pyc(SimpleNamespace(trace=lambda _message: None), code, source_hash, pyc)
