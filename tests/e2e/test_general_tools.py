"""The general tools of the default surface (working_memory, graph, dream: one tool, an `action` each) over stdio,
and the classic one-tool-per-action names they replaced, one setting away (issue 43)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from rockmem_mcp.server import toolsets

pytestmark = pytest.mark.anyio


async def use(client: Client, tool: str, **arguments: Any) -> tuple[dict[str, Any], str]:
    """A call that must succeed: its structured content and the text a model reads."""
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, f"{tool} {arguments}: {result.content[0].text}"
    assert result.structured_content is not None
    return result.structured_content, result.content[0].text


async def refused(client: Client, tool: str, **arguments: Any) -> str:
    result = await client.call_tool(tool, arguments)
    assert result.is_error, f"{tool} {arguments} succeeded"
    return result.content[0].text


async def test_each_action_works_and_a_missing_argument_says_which(stdio_server, home: Path) -> None:
    async with stdio_server(home) as client:
        listed = {tool.name for tool in (await client.list_tools()).tools}
        assert {"working_memory", "graph", "dream"} <= listed and "add_triples" not in listed

        structured, text = await use(client, "working_memory", action="save", key="plan", data="pack the bikes")
        assert structured["result"]["entry"]["key"].endswith("plan")
        structured, text = await use(client, "working_memory", action="get", key="plan")
        assert structured["result"]["data"] == "pack the bikes"
        assert json.loads(text)["data"] == "pack the bikes"  # the model reads the result itself, not {"result": …}
        listing, _ = await use(client, "working_memory", action="list")
        assert [e["key"] for e in listing["result"]["entries"]] == [structured["result"]["key"]]
        found, _ = await use(client, "working_memory", action="search", query="bikes")
        assert len(found["result"]["results"]) == 1
        assert "needs data" in await refused(client, "working_memory", action="save", key="plan")
        assert "needs a key" in await refused(client, "working_memory", action="get")
        deleted, _ = await use(client, "working_memory", action="delete", key="plan")
        assert deleted["result"]["deleted"] is True

        added, _ = await use(
            client,
            "graph",
            action="add",
            entities=[{"name": "Alice", "type": "person", "aliases": ["Ally"]}],
            triples=[{"subject": "Ally", "predicate": "works on", "object": "RockBot"}],
        )
        assert added["result"]["entities"][0]["entity"]["type"] == "person"  # entities first: the fact finds her
        assert added["result"]["created_entities"] == ["RockBot"]
        fact = added["result"]["triples"][0]["fact"]
        assert (fact["subject"], fact["predicate"]) == ("Alice", "works_on")
        walked, _ = await use(client, "graph", action="traverse", name="RockBot")
        assert [f["id"] for f in walked["result"]["facts"]] == [fact["id"]]
        assert "needs triples or entities" in await refused(client, "graph", action="add")
        bad_fact = [{"subject": "Zed", "predicate": "", "object": "Yan"}]
        await refused(client, "graph", action="add", entities=[{"name": "Zed", "type": "person"}], triples=bad_fact)
        nothing, _ = await use(client, "graph", action="find", name="Zed")  # find takes a name as its query too
        assert nothing["result"]["results"] == []  # the refused fact left no entity behind
        both = await refused(client, "graph", action="delete", name="Alice", triple_id=fact["id"])
        assert "not both" in both
        assert "needs name" in await refused(client, "graph", action="get")
        await use(client, "graph", action="add", triples=[{"subject": "Al", "predicate": "knows", "object": "Bo"}])
        assert "needs merge" in await refused(client, "graph", action="merge", name="Alice")
        merged, _ = await use(client, "graph", action="merge", name="Alice", merge="Al")
        assert merged["result"]["merged_id"]
        gone, _ = await use(client, "graph", action="delete", triple_id=fact["id"])
        assert gone["result"]["fact"]["id"] == fact["id"]
        entity, _ = await use(client, "graph", action="get", name="Al")  # the merged name is now an alias
        assert entity["result"]["entity"]["name"] == "Alice"

        ids = [(await use(client, "save_memory", content=f"The user drinks {tea} tea"))[0]["id"] for tea in "ab"]
        started, _ = await use(client, "dream", mode="agent")
        assert started["mode"] == "agent" and "action='apply'" in started["next_step"]
        assert all(f"[{memory_id}]" in started["material"]["material"] for memory_id in ids)
        assert "needs plan" in await refused(client, "dream", action="apply")
        plan = {"merges": [{"ids": ids, "content": "The user drinks a and b tea", "reason": "twins"}]}
        applied, text = await use(client, "dream", action="apply", plan=plan)
        assert applied["report"]["applied"], applied["report"]
        report, _ = await use(client, "dream", action="report")
        assert report["mode"] == "report" and report["report"]["id"] == applied["report"]["id"]


async def test_the_classic_names_are_one_setting_away_and_answer_as_before(stdio_server, home: Path) -> None:
    async with stdio_server(home, ROCKMEM_TOOLSETS="default,classic") as client:
        listed = {tool.name for tool in (await client.list_tools()).tools}
        assert set(toolsets.TOOLSETS["classic"]) <= listed and {"graph", "working_memory"} <= listed
        assert client.instructions is not None and "save_to_working_memory" in client.instructions
        added, _ = await use(client, "add_triples", triples=[{"subject": "Ann", "predicate": "knows", "object": "Bo"}])
        assert added["created_entities"] == ["Ann", "Bo"]  # the classic shape, not wrapped
        walked, _ = await use(client, "traverse_graph", start="Ann")
        assert walked["facts"][0]["object"] == "Bo"
        await use(client, "save_to_working_memory", key="plan", data="x")
        assert (await use(client, "get_from_working_memory", key="plan"))[0]["data"] == "x"
        # Both names reach the same store
        assert (await use(client, "working_memory", action="get", key="plan"))[0]["result"]["data"] == "x"
