"""The event-loop stdio transport (server/stdio.py): line framing, the claim on fd 0 and 1, and the fallback."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from rockmem_mcp.server.stdio import PipeLines

pytestmark = pytest.mark.anyio

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the transport is asyncio's pipe transports


async def lines_of(*chunks: bytes) -> list[str]:
    reader = asyncio.StreamReader()
    for chunk in chunks:
        reader.feed_data(chunk)
    reader.feed_eof()
    return [line async for line in PipeLines(reader)]


async def test_lines_split_across_chunks_and_longer_than_a_read_come_whole() -> None:
    long = b"x" * 200_000  # three reads of 64 KiB and more: one line, as the SDK's reader gives it
    assert await lines_of(b'{"a"', b":1}\n{", b'"b":2}\r\n' + long, b"\n") == [
        '{"a":1}\n',
        '{"b":2}\r\n',
        long.decode() + "\n",
    ]


async def test_bad_utf8_is_replaced_and_a_last_line_without_newline_still_counts() -> None:
    assert await lines_of(b"caf\xc3\xa9 \xff\n", b"tail") == ["café \ufffd\n", "tail"]
    assert await lines_of() == []


def run_python(code: str, **kwargs: object) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, timeout=60, **kwargs)  # type: ignore[call-overload]


def test_while_claimed_fd_0_reads_nothing_and_fd_1_writes_to_stderr_then_both_come_back() -> None:
    done = run_python(
        """
        import os
        from rockmem_mcp.server.stdio import claimed_std_fds
        with claimed_std_fds() as (read_fd, write_fd):
            os.write(1, b"stray output\\n")  # a print or a child process
            assert os.read(0, 100) == b""  # the client's requests are not theirs to read
            os.write(write_fd, b"protocol\\n")
            assert os.read(read_fd, 100) == b"request\\n"
            os.set_blocking(read_fd, False)  # as asyncio's pipe transports leave them
            os.set_blocking(write_fd, False)
        assert os.get_blocking(0) and os.get_blocking(1)  # the next program on these pipes gets them as they were
        os.write(1, b"after\\n")
        """,
        input=b"request\n",
    )
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout == b"protocol\nafter\n"
    assert done.stderr == b"stray output\n"


@pytest.mark.parametrize("ends", ["pipes", "stdin a regular file", "stdin the null device", "stderr into stdout"])
def test_the_server_answers_on_the_loop_over_pipes_and_falls_back_where_it_cannot(ends: str, tmp_path: Path) -> None:
    """Pipes are driven by the event loop; a regular file or /dev/null (which epoll refuses) and a stderr merged into
    stdout (which would turn non-blocking with it) go through the SDK's reader and writer threads instead."""
    requests = (json.dumps(INITIALIZE) + "\n").encode()
    command = [sys.executable, "-m", "rockmem_mcp", "--home", str(tmp_path / "home"), "-v"]
    (tmp_path / "requests").write_bytes(requests)
    with (tmp_path / "requests").open("rb") as file:
        if ends == "pipes":
            done = subprocess.run(command, input=requests, capture_output=True, timeout=120)
        elif ends == "stdin a regular file":
            done = subprocess.run(command, stdin=file, capture_output=True, timeout=120)
        elif ends == "stdin the null device":
            done = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, timeout=120)
        else:
            done = subprocess.run(
                command, input=requests, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120
            )
    assert done.returncode == 0, done
    fell_back = b"stdio served through the SDK's reader and writer threads" in done.stdout + (done.stderr or b"")
    assert fell_back == (ends != "pipes"), done
    if ends != "stdin the null device":  # which ends at once, with nothing asked
        reply = json.loads(next(line for line in done.stdout.decode().splitlines() if line.startswith("{")))
        assert reply["id"] == 0 and reply["result"]["serverInfo"]["name"]
