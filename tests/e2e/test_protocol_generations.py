"""Every client generation served (issue 43): a 2026-07-28 client (`server/discover`, no `initialize`, no session)
and a handshake-era client (`initialize`) get the same tools, resources, templates and prompts, and can work, over
stdio and over streamable HTTP, each with the SDK's own client."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from rockmem_mcp.server import toolsets
from tests.e2e.test_http import serving

pytestmark = pytest.mark.anyio

MODES = ("2026-07-28", "legacy")  # the current revision, and the initialize handshake the SDK still speaks
HANDSHAKE_VERSIONS = ("2025-06-18", "2025-11-25")


@asynccontextmanager
async def over_stdio(home: Path, log: Path) -> AsyncIterator[Callable[[str], Client]]:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "rockmem_mcp", "--home", str(home)], env={"ROCKMEM_EMBEDDING_MODEL": "off"}
    )
    with log.open("a") as errors:
        yield lambda mode: Client(stdio_client(params, errlog=errors), mode=mode)


@asynccontextmanager
async def over_http(home: Path, log: Path) -> AsyncIterator[Callable[[str], Client]]:
    with serving(home, log, ROCKMEM_EMBEDDING_MODEL="off") as url:
        yield lambda mode: Client(url, mode=mode)


async def surface(client: Client) -> dict[str, list[str]]:
    return {
        "tools": sorted(tool.name for tool in (await client.list_tools()).tools),
        "resources": sorted(str(resource.uri) for resource in (await client.list_resources()).resources),
        "templates": sorted(t.uri_template for t in (await client.list_resource_templates()).resource_templates),
        "prompts": sorted(prompt.name for prompt in (await client.list_prompts()).prompts),
    }


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_both_generations_get_the_whole_surface_and_can_work(
    transport: str, home: Path, tmp_path: Path, call: Any
) -> None:
    log = tmp_path / "server.stderr"

    seen: dict[str, dict[str, list[str]]] = {}
    async with (over_stdio if transport == "stdio" else over_http)(home, log) as connect:
        for mode in MODES:
            async with connect(mode) as client:
                negotiated = client.protocol_version
                assert negotiated == mode if mode != "legacy" else negotiated in HANDSHAKE_VERSIONS, negotiated
                seen[mode] = await surface(client)
                saved = await call(client, "save_memory", content=f"written by a {mode} client over {transport}")
                found = await call(client, "search_memory", query=f"written {mode} client")
                assert saved["id"] in {hit["entry"]["id"] for hit in found["results"]}
                recalled = (await client.read_resource("rockmem://recall")).contents[0]
                assert "session-start context" in getattr(recalled, "text", "")
                prompt = await client.get_prompt("recall", {"message": "what was written?"})
                assert prompt.messages
    assert seen["legacy"] == seen["2026-07-28"]
    assert seen["legacy"]["tools"] == sorted(toolsets.tools_of(toolsets.DEFAULT))
    assert seen["legacy"]["resources"] and seen["legacy"]["templates"] and seen["legacy"]["prompts"]
    assert "Traceback" not in (log.read_text() if log.exists() else "")
