"""The real server process over stdio lists only the toolsets ROCKMEM_TOOLSETS names."""

from __future__ import annotations

import pytest

from rockmem_mcp.server import toolsets

pytestmark = pytest.mark.anyio


async def test_rockmem_toolsets_narrows_tools_list_and_keeps_resources_and_prompts(stdio_server, home, call) -> None:
    async with stdio_server(home, ROCKMEM_TOOLSETS="memory,recall") as client:
        names = sorted(tool.name for tool in (await client.list_tools()).tools)
        assert names == sorted([*toolsets.TOOLSETS["memory"], *toolsets.TOOLSETS["recall"]])
        saved = await call(client, "save_memory", content="The staging VPN lives on port 1194")
        recalled = await call(client, "recall", message="which port for the staging VPN?")
        assert [m["id"] for m in recalled["memories"]] == [saved["id"]]
        refused = await client.call_tool("graph", {"action": "find"})
        assert refused.is_error and refused.content[0].text == "Unknown tool: graph"
        assert "rockmem://recall" in {str(r.uri) for r in (await client.list_resources()).resources}
        assert {p.name for p in (await client.list_prompts()).prompts} == {"recall", "remember", "memory-rules"}
        assert client.instructions is not None and "knowledge graph" not in client.instructions
