"""The first five minutes at the command line (issue 26, part 4), through test_cli's `rockmem`: a data home that
cannot be one, ports that cannot be had, `--port 0`, the start line, a reader that stops reading."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from tests.test_cli import clean_env, ok, rockmem


def one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.mark.parametrize("command", [[], ["stats"], ["search", "tea"]])
def test_a_data_home_that_is_a_file_is_one_line_and_exit_2(tmp_path: Path, command: list[str]) -> None:
    home = tmp_path / "home"
    home.write_text("not a folder")
    line = one_line_error(rockmem("--home", home, *command, stdin=""))
    assert line == f"rockmem-mcp: the data home {home} is not a folder; pass --home DIR or set ROCKMEM_HOME to a folder"
    assert home.read_text() == "not a folder"


def test_a_data_home_that_cannot_be_made_is_one_line_and_exit_2(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    line = one_line_error(rockmem("--home", blocker / "home", "stats"))
    assert line.startswith(f"rockmem-mcp: cannot create the data home {blocker / 'home'} (")


@pytest.mark.parametrize("port", ["70000", "-1", "eighty"])
def test_a_port_out_of_range_is_refused_by_the_parser(tmp_path: Path, port: str) -> None:
    result = rockmem("--home", tmp_path / "h", "serve", "--transport", "streamable-http", "--port", port)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "argument --port: a port number from 0 to 65535" in result.stderr


def test_a_port_in_use_is_one_line_and_exit_2(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = rockmem("--home", tmp_path / "h", "serve", "--transport", "streamable-http", "--port", str(port))
    line = one_line_error(result)
    assert line.startswith(f"rockmem-mcp: cannot listen on 127.0.0.1:{port} (")
    assert line.endswith("choose another --port (0 takes a free one)")


def test_port_0_serves_on_a_free_port_and_announces_it(tmp_path: Path) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "rockmem_mcp", "--home", str(tmp_path / "h"), "serve", "--transport",
         "streamable-http", "--port", "0"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=clean_env(ROCKMEM_EMBEDDING_MODEL="off"),
    )  # fmt: skip
    try:
        assert process.stderr is not None
        line = process.stderr.readline()
        found = re.fullmatch(
            r"rockmem-mcp: serving MCP over streamable HTTP at http://127\.0\.0\.1:(\d+)/mcp "
            r"\(loopback only, no token\); home .*\n",
            line,
        )
        assert found, line
        port = int(found.group(1))
        assert port != 0
        client = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}
        hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": client}
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/mcp",
            data=json.dumps(hello).encode(),
            headers={"Content-Type": "application/json", "Accept": "application/json, text/event-stream"},
        )
        with urllib.request.urlopen(request, timeout=30) as reply:  # the announced port is the served one
            assert reply.status == 200
            assert b'"serverInfo"' in reply.read()
    finally:
        process.terminate()
        process.communicate(timeout=30)


def test_the_stdio_server_says_where_it_serves_from_in_one_line(tmp_path: Path) -> None:
    home = tmp_path / "home"
    ok("--home", home, "import", "-", stdin=json.dumps({"content": "Ada likes tea"}) + "\n")
    result = rockmem("--home", home, stdin="", env=clean_env(ROCKMEM_EMBEDDING_MODEL="off"))
    assert result.returncode == 0 and result.stdout == ""
    assert result.stderr.strip().splitlines() == [
        f"rockmem-mcp: serving MCP over stdio; home {home}; 1 memory; ranking bm25 (embeddings off)"
    ]


def test_a_reader_that_stops_reading_ends_the_command_quietly(tmp_path: Path) -> None:
    import fcntl
    import os

    home = tmp_path / "home"
    lines = "".join(json.dumps({"content": f"note number {i} about tea"}) + "\n" for i in range(3000))
    ok("--home", home, "import", "-", stdin=lines)
    for command in (["export", "-"], ["search", "tea", "--limit", "200"]):
        # `rockmem-mcp export - | head -1`: the pipe closes after one line. The pipe holds 4 KB (Linux's
        # F_SETPIPE_SZ), less than either command writes, so it cannot finish writing before the close.
        read_end, write_end = os.pipe()
        fcntl.fcntl(write_end, 1031, 4096)  # F_SETPIPE_SZ
        process = subprocess.Popen(
            [sys.executable, "-m", "rockmem_mcp", "--home", str(home), *command],
            stdout=write_end, stderr=subprocess.PIPE, env=clean_env(ROCKMEM_EMBEDDING_MODEL="off"),
        )  # fmt: skip
        os.close(write_end)
        assert process.stderr is not None
        with os.fdopen(read_end, "rb") as stdout:
            assert stdout.readline()
        stderr = process.stderr.read().decode()
        assert process.wait(timeout=60) == 141, stderr
        assert stderr == "", stderr


def test_started_by_hand_on_a_terminal_it_says_how_it_is_meant_to_be_launched(tmp_path: Path) -> None:
    import os
    import pty

    controller, terminal = pty.openpty()
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", "rockmem_mcp", "--home", str(tmp_path / "h")],
            stdin=terminal, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=clean_env(ROCKMEM_EMBEDDING_MODEL="off"),
        )  # fmt: skip
        assert process.stderr is not None
        hint = process.stderr.readline()
        os.write(controller, b"\x04")  # Ctrl-D: the end of input
        _, rest = process.communicate(timeout=60)
    finally:
        os.close(controller)
        os.close(terminal)
    assert hint.startswith("rockmem-mcp: this is an MCP server: a client")
    assert "npx @modelcontextprotocol/inspector rockmem-mcp" in hint and "Ctrl-D ends it" in hint
    assert "To connect a client: `rockmem-mcp install claude-desktop` (or claude-code, cursor, vscode)" in hint
    assert rest.startswith("rockmem-mcp: serving MCP over stdio; home ")
    assert process.returncode == 0


def test_an_address_this_machine_does_not_have_is_one_line_naming_the_host(tmp_path: Path) -> None:
    env = clean_env(ROCKMEM_AUTH_TOKEN="t" * 32, ROCKMEM_EMBEDDING_MODEL="off")
    result = rockmem("--home", tmp_path / "h", "serve", "--transport", "streamable-http", "--host", "192.0.2.1",
                     "--port", "0", env=env)  # fmt: skip
    assert one_line_error(result).endswith("; check --host")


@pytest.mark.parametrize("command", [["tools"], ["log"], ["install", "cursor", "--dry-run", "--path", "x.json"]])
def test_commands_that_only_read_leave_a_missing_home_uncreated(tmp_path: Path, command: list[str]) -> None:
    home = tmp_path / "nowhere"
    subprocess.run([sys.executable, "-m", "rockmem_mcp", "--home", str(home), *command], cwd=tmp_path,
                   capture_output=True, env=clean_env(), timeout=60, check=False)  # fmt: skip
    assert not home.exists()
