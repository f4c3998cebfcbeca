"""Tenants over real streamable HTTP (server/tenancy.py): each token reaches its own memory and no other's —
tools, resources, completions and working memory tried with the other's ids — on a file home and on a shared
PostgreSQL store; tokens added and revoked without a restart."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import ResourceTemplateReference

from tests.e2e.test_http import serving
from tests.pg_server import database  # noqa: F401  (the fixture)
from tests.test_cli import clean_env

pytestmark = pytest.mark.anyio


def as_tenant(url: str, token: str) -> Client:
    headers = {"Authorization": f"Bearer {token}"}
    return Client(streamable_http_client(url, http_client=httpx2.AsyncClient(headers=headers, timeout=30)))


def tenant_token(tenants_file: Path, action: str, name: str) -> str:
    done = subprocess.run([sys.executable, "-m", "rockmem_mcp", "tenants", action, name],
                          capture_output=True, text=True, env=clean_env(ROCKMEM_TENANTS_FILE=str(tenants_file)),
                          check=True)  # fmt: skip
    return done.stdout.strip()


async def tenants_are_apart(url: str, tenants_file: Path, call: Any, call_error: Any) -> None:
    alice, bob = tenant_token(tenants_file, "add", "alice"), tenant_token(tenants_file, "add", "bob")
    assert "sha256:" in tenants_file.read_text() and alice not in tenants_file.read_text()
    async with as_tenant(url, alice) as a, as_tenant(url, bob) as b:
        secret = await call(a, "save_memory", content="Alice's launch date is March 3", category="plans/launch")
        await call(a, "save_to_working_memory", key="shared/team/plan", data="alice's plan")
        assert (await call(b, "search_memory", query="launch date"))["results"] == []
        assert "no memory with id" in await call_error(b, "get_memory", id=secret["id"])
        assert "no memory with id" in await call_error(b, "update_memory", id=secret["id"], content="stolen")
        assert "no memory with id" in await call_error(b, "delete_memory", id=secret["id"], permanent=True)
        with pytest.raises(Exception, match=r"(?i)not found|no memory"):
            await b.read_resource(f"rockmem://memory/{secret['id']}")
        categories = json.loads((await b.read_resource("rockmem://categories")).contents[0].text)
        assert categories["total"] == 0
        ids = await b.complete(ResourceTemplateReference(type="ref/resource", uri="rockmem://memory/{id}"),
                               {"name": "id", "value": ""})  # fmt: skip
        assert ids.completion.values == []
        assert "no working-memory entry" in await call_error(b, "get_from_working_memory", key="shared/team/plan")
        found = await call(a, "search_memory", query="launch date")  # the owner still has it, unchanged
        assert [hit["entry"]["content"] for hit in found["results"]] == ["Alice's launch date is March 3"]

    tenant_token(tenants_file, "revoke", "bob")  # no restart: the next request is refused
    refused = httpx.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
                         headers={"Authorization": f"Bearer {bob}"}, timeout=10)  # fmt: skip
    assert refused.status_code == 401
    assert httpx.post(url, json={}, timeout=10).status_code == 401  # and without a token, nothing


async def test_each_token_reaches_its_own_memory_on_a_file_home(tmp_path: Path, call: Any, call_error: Any) -> None:
    tenants_file = tmp_path / "tenants.json"
    with serving(tmp_path / "home", tmp_path / "server.log", ROCKMEM_TENANTS_FILE=str(tenants_file)) as url:
        await tenants_are_apart(url, tenants_file, call, call_error)
    assert (tmp_path / "home" / "tenants" / "alice" / "memory").is_dir()  # each tenant's home of its own


async def test_each_token_reaches_its_own_memory_on_a_shared_database(
    database: str,  # noqa: F811
    tmp_path: Path,
    call: Any,
    call_error: Any,
) -> None:
    tenants_file = tmp_path / "tenants.json"
    env = {"ROCKMEM_TENANTS_FILE": str(tenants_file), "ROCKMEM_STORE": database}
    with serving(tmp_path / "home", tmp_path / "server.log", **env) as url:
        await tenants_are_apart(url, tenants_file, call, call_error)
    import psycopg

    with psycopg.connect(database) as conn:
        rows = conn.execute("SELECT count(*) FROM tenant_alice.memories").fetchone()
        assert rows == (1,)
        assert conn.execute("SELECT count(*) FROM tenant_bob.memories").fetchone() == (0,)


@pytest.mark.filterwarnings("ignore:resources/(un)?subscribe is removed")
async def test_a_subscriber_hears_of_its_own_tenants_changes_only(tmp_path: Path, call: Any) -> None:
    import anyio
    from mcp_types import ResourceUpdatedNotification

    tenants_file = tmp_path / "tenants.json"
    streams = {name: anyio.create_memory_object_stream[str](100) for name in ("alice", "bob")}

    def listener(name: str) -> Any:
        async def on_message(message: Any) -> None:
            note = getattr(message, "root", message)
            if isinstance(note, ResourceUpdatedNotification):
                await streams[name][0].send(str(note.params.uri))

        return on_message

    async def next_for(name: str) -> str:
        with anyio.fail_after(30):
            return await streams[name][1].receive()

    def nothing_for(name: str) -> bool:
        return streams[name][1].statistics().current_buffer_used == 0

    def client(url: str, token: str, name: str) -> Client:
        headers = {"Authorization": f"Bearer {token}"}
        transport = streamable_http_client(url, http_client=httpx2.AsyncClient(headers=headers, timeout=30))
        return Client(transport, mode="legacy", message_handler=listener(name))

    with serving(tmp_path / "home", tmp_path / "server.log", ROCKMEM_TENANTS_FILE=str(tenants_file)) as url:
        alice, bob = tenant_token(tenants_file, "add", "alice"), tenant_token(tenants_file, "add", "bob")
        async with client(url, alice, "alice") as a, client(url, bob, "bob") as b:
            await a.subscribe_resource("rockmem://categories")
            await b.subscribe_resource("rockmem://categories")
            await call(a, "save_memory", content="Alice files this", category="alice/notes")
            assert await next_for("alice") == "rockmem://categories"  # before the call's answer
            await call(b, "search_memory", query="anything")  # a round trip of bob's: nothing came for him
            assert nothing_for("bob")
            await call(b, "save_memory", content="Bob files this", category="bob/notes")
            assert await next_for("bob") == "rockmem://categories"
            await call(a, "search_memory", query="anything")
            assert nothing_for("alice")  # not told of bob's change


async def test_a_tenant_token_never_reaches_the_servers_own_memory(tmp_path: Path, call: Any) -> None:
    """However the Authorization header is written (a tab, two headers, a lower-case scheme), a tenant's token is
    served as that tenant or refused: never as the server's own tenant."""
    own = "the-servers-own-token-0123456789"
    tenants_file = tmp_path / "tenants.json"
    env = {"ROCKMEM_TENANTS_FILE": str(tenants_file), "ROCKMEM_AUTH_TOKEN": own}
    with serving(tmp_path / "home", tmp_path / "server.log", **env) as url:
        alice = tenant_token(tenants_file, "add", "alice")
        async with as_tenant(url, own) as owner:
            await call(owner, "save_memory", content="OWNER SECRET: the vault code is 4242")
        for headers in (
            [("authorization", f"Bearer\t{alice}")],
            [("authorization", "Basic eDp5"), ("authorization", f"Bearer {alice}")],
            [("authorization", f"Bearer {alice}"), ("authorization", f"Bearer {own}")],
            [("authorization", f"Bearer {alice} extra")],
        ):
            http = httpx2.AsyncClient(headers=httpx2.Headers(headers), timeout=30)
            try:
                async with Client(streamable_http_client(url, http_client=http)) as sneaky:
                    found = await sneaky.call_tool("search_memory", {"query": "vault code"})
            except Exception:
                continue
            assert "4242" not in str(found.content), headers  # served as alice at most, who has nothing
        async with as_tenant(url, alice) as a:
            assert (await call(a, "search_memory", query="vault code"))["results"] == []


@pytest.mark.filterwarnings("ignore:The logging capability is deprecated")
async def test_log_records_reach_only_their_own_tenants_sessions(tmp_path: Path, call: Any) -> None:
    import anyio

    tenants_file = tmp_path / "tenants.json"
    env = {"ROCKMEM_TENANTS_FILE": str(tenants_file), "ROCKMEM_LOG_LEVEL": "INFO"}
    received: dict[str, list[str]] = {"alice": [], "bob": []}

    def logged(name: str) -> Any:
        async def on_log(params: Any) -> None:
            received[name].append(str(params.data))

        return on_log

    def client(url: str, token: str, name: str) -> Client:
        headers = {"Authorization": f"Bearer {token}"}
        transport = streamable_http_client(url, http_client=httpx2.AsyncClient(headers=headers, timeout=30))
        return Client(transport, mode="legacy", logging_callback=logged(name))

    with serving(tmp_path / "home", tmp_path / "server.log", **env) as url:
        alice, bob = tenant_token(tenants_file, "add", "alice"), tenant_token(tenants_file, "add", "bob")
        async with client(url, bob, "bob") as b:
            await b.set_logging_level("debug")
            async with client(url, alice, "alice") as a:
                await a.set_logging_level("debug")
                await call(a, "save_memory", content="Alice's note")
                await call(a, "dream", mode="deterministic")  # logs its summary at info, for alice
                with anyio.fail_after(30):
                    while not received["alice"]:
                        await call(a, "search_memory", query="note")
            await call(b, "search_memory", query="note")
    assert received["alice"] and not any("alice" in line.lower() for line in received["bob"])
    assert received["bob"] == [] or all("dream " not in line for line in received["bob"])


async def test_an_idle_tenants_connections_close_and_its_next_request_reopens_them(
    database: str,  # noqa: F811
    tmp_path: Path,
    call: Any,
) -> None:
    """With ROCKMEM_TENANT_IDLE_MINUTES short, a tenant's stores close after its last request: the tenant's
    connections to the database (named for it in pg_stat_activity) all close, and its next request opens its
    stores again, its memory intact."""
    import psycopg

    def connections() -> int:
        with psycopg.connect(database, autocommit=True) as conn:
            query = "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'rockmem-mcp tenant_alice'"
            return int(conn.execute(query).fetchone()[0])

    tenants_file = tmp_path / "tenants.json"
    env = {"ROCKMEM_TENANTS_FILE": str(tenants_file), "ROCKMEM_STORE": database, "ROCKMEM_TENANT_IDLE_MINUTES": "0.02"}
    token = tenant_token(tenants_file, "add", "alice")
    with serving(tmp_path / "home", tmp_path / "server.log", **env) as url:
        async with as_tenant(url, token) as alice:
            saved = await call(alice, "save_memory", content="Alice keeps the lighthouse log")
            # Open while it is in use: each request restarts the 1.2 s idle clock, which a loaded machine can
            # outlast between one request and a look at pg_stat_activity.
            with anyio.fail_after(30):
                while connections() < 5:
                    await call(alice, "get_memory", id=saved["id"])
        with anyio.fail_after(30):
            while connections():  # the idle check runs every 0.3 s here
                await anyio.sleep(0.1)
        async with as_tenant(url, token) as alice:
            assert (await call(alice, "get_memory", id=saved["id"]))["content"] == "Alice keeps the lighthouse log"


@pytest.mark.filterwarnings("ignore:resources/(un)?subscribe is removed")
async def test_a_subscription_outlives_its_tenants_idle_close(tmp_path: Path) -> None:
    """Subscriptions are the tenant's, not its open stores': a client that subscribed before the tenant's stores
    closed for idleness hears of the change it makes after they reopened."""
    from mcp_types import ResourceUpdatedNotification

    tenants_file = tmp_path / "tenants.json"
    token = tenant_token(tenants_file, "add", "alice")
    told = anyio.Event()

    async def on_message(message: Any) -> None:
        note = getattr(message, "root", message)
        if isinstance(note, ResourceUpdatedNotification) and str(note.params.uri) == "rockmem://core":
            told.set()

    env = {"ROCKMEM_TENANTS_FILE": str(tenants_file), "ROCKMEM_TENANT_IDLE_MINUTES": "0.02",
           "ROCKMEM_LOG_LEVEL": "INFO"}  # fmt: skip
    log = tmp_path / "server.log"
    with serving(tmp_path / "home", log, **env) as url:
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30)
        transport = streamable_http_client(url, http_client=http)
        async with Client(transport, mode="legacy", message_handler=on_message) as alice:
            await alice.subscribe_resource("rockmem://core")
            with anyio.fail_after(30):
                while "tenant alice: its stores closed" not in log.read_text():  # idle: closed after ~1 s
                    await anyio.sleep(0.1)
            version = (await alice.call_tool("core_memory", {"action": "read"})).structured_content["version"]
            edit = {"action": "append", "block": "Persona", "text": "Speaks briefly.", "version": version}
            assert not (await alice.call_tool("core_memory", edit)).is_error
            with anyio.fail_after(10):
                await told.wait()
