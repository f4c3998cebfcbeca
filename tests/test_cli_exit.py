"""How `rockmem-mcp` ends as a process of its own (`cli.program`): without Python's teardown of every module, but with
everything that teardown came after — other threads joined, every exit handler run, the standard streams flushed —
and the status the command gave."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from tests.test_cli import clean_env


def program(body: str, tmp_path: Path, before: str = "") -> subprocess.CompletedProcess[str]:
    """A process that runs `cli.program` with `main` replaced by `body` (indented into a function), after `before`."""
    script = "\n".join(
        [
            "import atexit, sys, threading, time",
            "from pathlib import Path",
            "import rockmem_mcp.cli as cli",
            f"OUT = Path({str(tmp_path)!r})",
            textwrap.dedent(before),
            "def main():",
            textwrap.indent(textwrap.dedent(body), "    "),
            "cli.main = main",
            "cli.program()",
        ]
    )
    return subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=clean_env(), timeout=60, check=False
    )


def test_modules_are_not_torn_down_at_the_exit(tmp_path: Path) -> None:
    """What made the exit cost 0.3-0.5 s of CPU: every object of every module freed one by one."""
    body = """
    class Noisy:
        def __del__(self):
            print("torn down", file=sys.stderr)
    sys.modules["__main__"].kept = Noisy()
    return 0
    """
    ended = program(body, tmp_path)
    assert ended.returncode == 0, ended.stderr
    assert "torn down" not in ended.stderr


def test_the_status_is_the_commands_own(tmp_path: Path) -> None:
    assert program("return 3", tmp_path).returncode == 3
    assert program("raise SystemExit(2)", tmp_path).returncode == 2  # a usage error
    assert program("raise SystemExit(None)", tmp_path).returncode == 0  # --help
    said = program("raise SystemExit('rockmem-mcp: stopped')", tmp_path)
    assert (said.returncode, said.stderr.strip()) == (1, "rockmem-mcp: stopped")
    failed = program("raise RuntimeError('boom')", tmp_path)
    assert failed.returncode == 1 and "RuntimeError: boom" in failed.stderr  # the traceback is still printed


def test_buffered_output_exit_handlers_and_other_threads_all_finish_first(tmp_path: Path) -> None:
    body = """
    def late_write():
        time.sleep(0.3)  # still running when main returns: the exit waits for it
        (OUT / "thread").write_text("done")
    threading.Thread(target=late_write).start()
    atexit.register(lambda: (OUT / "handler").write_text("ran"))  # as a library would, during the command
    import logging
    logging.basicConfig(stream=sys.stderr)
    logging.getLogger("rockmem").warning("the last line logged")
    print("no newline, still in the buffer", end="")
    return 0
    """
    ended = program(body, tmp_path)
    assert ended.returncode == 0, ended.stderr
    assert ended.stdout == "no newline, still in the buffer"  # a pipe: block-buffered, flushed at the exit
    assert "the last line logged" in ended.stderr
    assert (tmp_path / "thread").read_text() == "done"
    assert (tmp_path / "handler").read_text() == "ran"


def test_an_exit_handler_registered_before_the_program_still_runs(tmp_path: Path) -> None:
    """Coverage's, or a sitecustomize's: it would run after the fast exit, so never; the exit is then Python's own."""
    before = """atexit.register(lambda: (OUT / "early").write_text("ran"))"""
    ended = program("return 0", tmp_path, before=before)
    assert ended.returncode == 0, ended.stderr
    assert (tmp_path / "early").read_text() == "ran"


def test_python_m_ends_through_the_program() -> None:
    """The installed command's entry point is checked in the wheel (tests/test_packaging.py)."""
    script = "\n".join(
        [
            "import os, runpy, rockmem_mcp.cli as cli",
            "cli.program = lambda: os._exit(7)",
            "runpy.run_module('rockmem_mcp', run_name='__main__')",
        ]
    )
    ended = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False)
    assert ended.returncode == 7, ended.stderr
