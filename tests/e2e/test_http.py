"""The real server process over streamable HTTP on loopback."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

pytestmark = pytest.mark.anyio

HOST = "127.0.0.1"
STARTUP_TIMEOUT = 30.0


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def wait_until_listening(process: subprocess.Popen[bytes], port: int, log: Path) -> None:
    """Poll a TCP connect until the server accepts, it dies, or the timeout passes."""
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"server exited with {process.returncode}:\n{log.read_text()}")
        try:
            with socket.create_connection((HOST, port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    pytest.fail(f"server did not listen on {HOST}:{port} within {STARTUP_TIMEOUT}s:\n{log.read_text()}")


@contextlib.contextmanager
def serving_process(
    home: Path, log: Path, bind: str = HOST, **env: str
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """`rockmem-mcp serve --transport streamable-http` on a free port of `bind`; yields the loopback /mcp URL
    and the server process."""
    port = free_port()
    environment = {k: v for k, v in os.environ.items() if not k.startswith("ROCKMEM_")} | env
    command = [sys.executable, "-m", "rockmem_mcp", "--home", str(home), "serve"]
    command += ["--transport", "streamable-http", "--host", bind, "--port", str(port)]
    with log.open("wb") as out:
        process = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=environment
        )
    try:
        wait_until_listening(process, port, log)
        yield f"http://{HOST}:{port}/mcp", process
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
    assert "Traceback" not in log.read_text()


@contextlib.contextmanager
def serving(home: Path, log: Path, bind: str = HOST, **env: str) -> Iterator[str]:
    with serving_process(home, log, bind, **env) as (url, _):
        yield url


@pytest.fixture
def http_server(home: Path, tmp_path: Path) -> Iterator[str]:
    with serving(home, tmp_path / "http-server.log") as url:
        yield url


def ids(found: dict[str, Any]) -> list[str]:
    return [hit["entry"]["id"] for hit in found["results"]]


async def test_save_and_search_over_http(http_server, call, call_error) -> None:
    async with Client(http_server) as client:
        tools = (await client.list_tools()).tools
        assert {"save_memory", "search_memory", "working_memory"} <= {t.name for t in tools}
        saved = await call(client, "save_memory", content="HTTP clients can remember too", category="transport/http")
        found = await call(client, "search_memory", query="remember http")
        assert ids(found) == [saved["id"]]
        assert found["results"][0]["score"] > 0
        assert "invalid category" in await call_error(client, "save_memory", content="x", category="../x")

    async with Client(http_server) as again:  # a second connection sees the same memory
        assert await call(again, "get_memory", id=saved["id"]) == saved


async def test_http_and_stdio_processes_share_one_home(http_server, stdio_server, home, call) -> None:
    async with Client(http_server) as over_http, stdio_server(home) as over_stdio:
        saved = await call(over_stdio, "save_memory", content="Written over stdio, read over HTTP")
        assert ids(await call(over_http, "search_memory", query="written stdio")) == [saved["id"]]


async def test_working_memory_over_http(http_server, call, call_error) -> None:
    async with Client(http_server) as first, Client(http_server) as second:
        saved = await call(first, "save_to_working_memory", key="note", data="parked over HTTP")
        key = saved["entry"]["key"]
        assert key.startswith("session/") and key.endswith("/note")
        assert (await call(second, "get_from_working_memory", key=key))["data"] == "parked over HTTP"
        error = await call_error(first, "save_to_working_memory", key="patrol/p1/x", data="not mine")
        assert "belongs to namespace 'patrol/p1'" in error


TOKEN = "correct-horse-battery-staple-42"


def authorised(url: str, token: str, scheme: str = "Bearer") -> Client:
    headers = {"Authorization": f"{scheme} {token}"}
    return Client(streamable_http_client(url, http_client=httpx2.AsyncClient(headers=headers, timeout=30)))


async def test_a_token_guards_every_request(home: Path, tmp_path: Path, call) -> None:
    with serving(home, tmp_path / "server.log", ROCKMEM_AUTH_TOKEN=TOKEN) as url:
        initialize = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        for headers in ({}, {"Authorization": "Bearer wrong-token"}, {"Authorization": TOKEN}):
            refused = httpx.post(url, json=initialize, headers=headers, timeout=10)
            assert refused.status_code == 401 and "ROCKMEM_AUTH_TOKEN" in refused.text
        with pytest.raises(Exception):  # noqa: B017 - the SDK client surfaces the 401 as its own error
            async with Client(url) as anonymous:
                await anonymous.list_tools()
        async with authorised(url, TOKEN) as client:
            saved = await call(client, "save_memory", content="Reached with the token")
            found = await call(client, "search_memory", query="token")
            assert [hit["entry"]["id"] for hit in found["results"]] == [saved["id"]]


async def test_the_bearer_scheme_is_case_insensitive(home: Path, tmp_path: Path, call) -> None:
    with serving(home, tmp_path / "server.log", ROCKMEM_AUTH_TOKEN=TOKEN) as url:
        for scheme in ("bearer", "BEARER", "bEaReR", "Bearer\t"):  # RFC 6750: any case; any whitespace after
            async with authorised(url, TOKEN, scheme) as client:
                assert (await call(client, "save_memory", content=f"reached with {scheme}"))["id"]
        tools = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        for wrong in (f"Basic {TOKEN}", f"bearer {TOKEN}x", f"bearer{TOKEN}"):
            assert httpx.post(url, json=tools, headers={"Authorization": wrong}, timeout=10).status_code == 401


def local_addresses() -> list[str]:
    """This machine's own non-loopback IPv4 addresses (as `hostname -I` lists them)."""
    found = subprocess.run(["hostname", "-I"], capture_output=True, text=True, timeout=10).stdout.split()
    return [address for address in found if "." in address and not address.startswith("127.")]


async def test_a_public_bind_with_a_token_serves_this_machine_by_any_of_its_names(
    home: Path, tmp_path: Path, call
) -> None:
    with serving(home, tmp_path / "server.log", bind="0.0.0.0", ROCKMEM_AUTH_TOKEN=TOKEN) as url:
        port = url.removesuffix("/mcp").rsplit(":", 1)[1]
        names = [socket.gethostname(), "127.0.0.1", "localhost", *local_addresses()]
        assert len(names) >= 4, names  # the hostname, loopback and at least one real address of this machine
        for name in names:
            async with authorised(f"http://{name}:{port}/mcp", TOKEN) as client:
                saved = await call(client, "save_memory", content=f"reached as {name}")
                assert (await call(client, "get_memory", id=saved["id"]))["content"] == f"reached as {name}"


async def test_a_host_header_naming_another_site_is_refused(http_server) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    rebound = httpx.post(http_server, json=body, headers={"Host": "attacker.example:80"}, timeout=10)
    assert rebound.status_code in (400, 403, 421) and "host" in rebound.text.lower()


async def test_a_request_from_another_sites_page_is_refused_by_its_origin(http_server) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {"Accept": "application/json, text/event-stream"}
    evil = httpx.post(http_server, json=body, headers={**headers, "Origin": "http://attacker.example"}, timeout=10)
    assert evil.status_code == 403 and "origin" in evil.text.lower()
    own_origin = http_server.removesuffix("/mcp")
    mine = httpx.post(http_server, json=body, headers={**headers, "Origin": own_origin}, timeout=10)
    assert mine.status_code != 403


async def test_allowed_hosts_admit_another_name_for_this_server(home: Path, tmp_path: Path) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {"Accept": "application/json, text/event-stream"}
    with serving(home, tmp_path / "server.log", ROCKMEM_ALLOWED_HOSTS="memory.internal:*") as url:
        named = httpx.post(url, json=body, headers={**headers, "Host": "memory.internal:8765"}, timeout=10)
        assert "host" not in named.text.lower(), named.text  # past the host check (then: no session yet)
        other = httpx.post(url, json=body, headers={**headers, "Host": "other.internal:8765"}, timeout=10)
        assert other.status_code in (400, 403, 421) and "host" in other.text.lower()


def test_binding_beyond_loopback_without_a_token_refuses_to_start(home: Path) -> None:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("ROCKMEM_")}
    command = [sys.executable, "-m", "rockmem_mcp", "--home", str(home), "serve", "--transport", "streamable-http"]
    done = subprocess.run(
        [*command, "--host", "0.0.0.0", "--port", str(free_port())],
        capture_output=True,
        text=True,
        timeout=60,
        env=environment,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2 and "ROCKMEM_AUTH_TOKEN" in done.stderr and "Traceback" not in done.stderr


async def test_two_http_sessions_get_their_own_working_memory(http_server, call) -> None:
    async with Client(http_server, mode="legacy") as first, Client(http_server, mode="legacy") as second:
        mine = (await call(first, "save_to_working_memory", key="draft", data="first's"))["entry"]["key"]
        theirs = (await call(second, "save_to_working_memory", key="draft", data="second's"))["entry"]["key"]
        assert mine != theirs and mine.startswith("session/") and theirs.startswith("session/")
        assert [e["key"] for e in (await call(first, "list_working_memory"))["entries"]] == [mine]
        assert [e["key"] for e in (await call(second, "list_working_memory"))["entries"]] == [theirs]
        assert (await call(second, "get_from_working_memory", key=mine))["data"] == "first's"  # full path reads


def resident_bytes(process: subprocess.Popen[bytes]) -> int:
    status = Path(f"/proc/{process.pid}/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("VmRSS:")).split()[1]) * 1024


async def test_many_http_sessions_do_not_each_hold_a_copy_of_working_memory(home: Path, tmp_path: Path, call) -> None:
    parts, part_bytes, sessions = 8, 800_000, 20
    with serving_process(home, tmp_path / "server.log") as (url, process):
        async with Client(url, mode="legacy") as first:
            for i in range(parts):  # ~6.4 MB of working memory every session can see
                await call(first, "save_to_working_memory", key=f"shared/big/part-{i}", data=f"{i}" * part_bytes)

        async def one_session(n: int) -> None:
            async with Client(url, mode="legacy") as client:  # a session of its own, closed (DELETE) after
                listed = await call(client, "list_working_memory")
                assert len(listed["entries"]) == parts
                await call(client, "recall", message=f"message {n}", session_id=f"chat-{n}")
                await call(client, "record_turn", session_id=f"chat-{n}", role="user", content="hello")

        for n in range(3):  # warm up: the first sessions load what every later one uses
            await one_session(n)
        before = resident_bytes(process)
        for n in range(3, 3 + sessions):
            await one_session(n)
        grown = resident_bytes(process) - before
    # Each session holding its own parsed copy would be ~6.4 MB apiece (~128 MB in all).
    assert grown < 32_000_000, f"resident memory grew {grown / 1e6:.1f} MB over {sessions} sessions"
