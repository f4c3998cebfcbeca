"""How `rockmem-mcp` ends as a process of its own (`cli.program`): without Python's teardown of every module, but with
everything that teardown came after — other threads joined, every exit handler run, the standard streams flushed —
and the status the command gave."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from tests.test_cli import clean_env


def program(body: str, tmp_path: Path, before: str = "", **run: Any) -> subprocess.CompletedProcess[str]:
    """A process that runs `cli.program` with `main` replaced by `body` (indented into a function), after `before`;
    its standard output block-buffered, as a command's is into a pipe or a file (`run` passed to subprocess.run)."""
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
    env = {name: value for name, value in clean_env().items() if name != "PYTHONUNBUFFERED"}
    streams = {} if {"stdout", "stderr"} & set(run) else {"capture_output": True}
    return subprocess.run(
        [sys.executable, "-c", script], text=True, env=env, timeout=60, check=False, **streams, **run
    )  # fmt: skip


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


def test_a_status_of_none_is_0_without_a_word(tmp_path: Path) -> None:
    ended = program("print('done')", tmp_path)  # a command that forgot its `return 0`
    assert (ended.returncode, ended.stdout, ended.stderr) == (0, "done\n", "")


def test_output_that_cannot_be_written_at_the_exit_is_said_and_is_status_120(tmp_path: Path) -> None:
    """Output small enough to wait in the buffer is only written at the exit: a full disk then (`export - >
    backup.jsonl`) must not end as a success with the file empty."""
    with open("/dev/full", "w") as full:
        ended = program("print('a backup line')\nreturn 0", tmp_path, stdout=full, stderr=subprocess.PIPE)
    assert ended.returncode == 120
    assert ended.stderr.startswith("rockmem-mcp: the output could not be written: [Errno 28]"), ended.stderr


def test_a_reader_gone_away_before_the_exit_is_status_141_quietly(tmp_path: Path) -> None:
    read, write = os.pipe()
    os.close(read)
    with os.fdopen(write, "w") as gone:
        ended = program("print('listed')\nreturn 0", tmp_path, stdout=gone, stderr=subprocess.PIPE)
    assert (ended.returncode, ended.stderr) == (141, "")


def test_an_interrupt_ends_the_process_by_sigint_as_python_does(tmp_path: Path) -> None:
    ended = program("raise KeyboardInterrupt", tmp_path)
    assert ended.returncode == -signal.SIGINT  # a shell's loop stops on a child killed by it, not on status 130


def test_closed_standard_streams_end_quietly(tmp_path: Path) -> None:
    ended = program("return 0", tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, close_fds=True,
                    preexec_fn=lambda: os.close(1))  # fmt: skip
    assert (ended.returncode, ended.stderr) == (0, "")


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
