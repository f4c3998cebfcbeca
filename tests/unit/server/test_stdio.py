"""The event-loop stdio transport (server/stdio.py): line framing, the claim on fd 0 and 1, and the fallback."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from rockmem_mcp.server.stdio import PipeLines, refusal

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


async def lines_of(*chunks: bytes) -> list[bytes]:
    reader = asyncio.StreamReader()
    for chunk in chunks:
        reader.feed_data(chunk)
    reader.feed_eof()
    return [line async for line in PipeLines(reader)]


async def test_lines_split_across_chunks_and_longer_than_a_read_come_whole() -> None:
    long = b"x" * 200_000  # three reads of 64 KiB and more: one line, as the SDK's reader gives it
    assert await lines_of(b'{"a"', b":1}\n{", b'"b":2}\r\n' + long, b"\n") == [
        b'{"a":1}\n',
        b'{"b":2}\r\n',
        long + b"\n",
    ]


async def test_lines_are_bytes_as_sent_and_a_last_line_without_newline_still_counts() -> None:
    assert await lines_of(b"caf\xc3\xa9 \xff\n", b"tail") == [b"caf\xc3\xa9 \xff\n", b"tail"]
    assert await lines_of() == []


PING = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'


@pytest.mark.parametrize(
    ("line", "code", "request_id"),
    [
        (b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"\\ud800"}}\n', -32700, None),  # lone surrogate
        (b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"\xff"}}\n', -32700, None),  # not UTF-8
        (PING[:25] + b"\n", -32700, None),  # cut short
        (PING + b" trailing\n", -32700, None),
        (b'{"jsonrpc":"2.0","id":7,"method":5}\n', -32600, 7),  # a request's id is read back
        (b'{"jsonrpc":"2.0","id":"q7","method":"ping","params":"x"}\n', -32600, "q7"),
        (b'{"jsonrpc":"1.0","id":7,"method":"ping"}\n', -32600, 7),
        (b'{"jsonrpc":"2.0","id":true,"method":5}\n', -32600, None),  # no id to read
        (b'{"jsonrpc":"2.0","id":7,"error":{"code":"x"}}\n', -32600, None),  # a response's id is the server's
        (b"[]\n", -32600, None),
        (b"42\n", -32600, None),
    ],
)
def test_a_line_that_is_no_message_is_refused_as_json_rpc_says(line: bytes, code: int, request_id: object) -> None:
    refused = refusal(line)
    assert refused is not None and (refused.error.code, refused.id) == (code, request_id)
    assert refused.error.message.startswith("Parse error: " if code == -32700 else "Invalid Request: ")


def test_a_message_is_not_refused() -> None:
    for line in (PING + b"\n", PING + b"\r\n", PING, b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n'):
        assert refusal(line) is None


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
