"""Gated writes end to end (seed 004 §13): a sub-agent server process proposes, a main process on the same home
reviews; a gated sub-agent cannot write long-term memory through any tool."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from rockmem_mcp.config import Settings
from rockmem_mcp.server import toolsets
from rockmem_mcp.server.app import build_server
from tests.e2e.conftest import Call, StdioServers

pytestmark = pytest.mark.anyio

GATED = {"ROCKMEM_NAMESPACE": "subagent/researcher", "ROCKMEM_GATED_WRITES": "1"}


async def test_a_subagent_proposes_and_the_main_agent_commits(
    home: Path, stdio_server: StdioServers, call: Call, call_error: Any
) -> None:
    async with stdio_server(home) as main:
        known = await call(main, "save_memory", content="The user's editor is Helix")
    async with stdio_server(home, **GATED) as researcher:
        found = await call(researcher, "search_memory", query="editor Helix")  # reads everything
        assert [hit["entry"]["id"] for hit in found["results"]] == [known["id"]]
        filed = await call(researcher, "save_memory", content="The user prefers academic sources", tags=["sources"])
        other = await call(researcher, "save_memory", content="Project deadline is March 15")
        assert filed["status"] == "pending" and filed["from"] == "researcher"
        refused = await call_error(
            researcher, "add_triples", triples=[{"subject": "a", "predicate": "b", "object": "c"}]
        )
        assert "gated" in refused and "save_memory or remember" in refused
        assert (await call(researcher, "search_memory", query="academic sources"))["results"] == []
    async with stdio_server(home) as main:
        recalled = await main.call_tool("recall", {"message": "hello"})
        text = recalled.content[0].text
        assert "Memory proposals from sub-agents" in text and f"#{filed['id']} from researcher" in text
        listed = await call(main, "review_proposals")
        assert [p["id"] for p in listed["proposals"]] == [filed["id"], other["id"]]
        done = await call(main, "review_proposals", action="commit", id=filed["id"])
        memory_id = done["proposals"][0]["committed_as"][0].removeprefix("memory:")
        hits = await call(main, "search_memory", query="academic sources")
        assert [hit["entry"]["id"] for hit in hits["results"]] == [memory_id]
        audit = await call(main, "audit", action="COMMIT")
        assert [(e["actor"], e["approval"]) for e in audit["entries"]] == [("bot:commit-from:researcher", "approved")]
        proposed = await call(main, "audit", action="PROPOSE")
        assert {(e["actor"], e["approval"]) for e in proposed["entries"]} == {("subagent:researcher", "pending")}
        rejected = await call(main, "review_proposals", action="reject", id=other["id"], reason="stale plan")
        assert rejected["proposals"][0]["status"] == "rejected"
        assert (await call(main, "review_proposals"))["proposals"] == []
        resource = await main.read_resource("rockmem://proposals")
        assert "# Pending Memory Proposals" in resource.contents[0].text


# ---------------------------------------------------------------------------------------------- no bypass
# Arguments a tool would succeed with in the main agent's process: the ungated ones run for real.
GOOD: dict[str, dict[str, Any]] = {
    "save_memory": {"content": "A saved fact: the user's locker code is 4471", "pinned": True},
    "remember": {"content": "Remember that my dentist is Dr Ruiz"},
    "recall": {"message": "Remember that my cat is called Miso"},  # a trigger phrase, acted on (act mode)
    "record_turn": {"role": "user", "content": "My locker code is 4472."},
    "save_to_working_memory": {"key": "scratch", "data": "x"},
    "get_from_working_memory": {"key": "scratch"},
    "delete_from_working_memory": {"key": "scratch"},
    "core_memory": {"action": "read"},
    "working_memory": {"action": "save", "key": "scratch", "data": "x"},
    "graph": {"action": "add", "triples": [{"subject": "Ann", "predicate": "likes", "object": "Cy"}]},
    "audit": {},
    "review_proposals": {},
}
SCRATCH = ("working-memory/", "conversations/", "index/", ".embeddings/", "meta/")  # not long-term memory


def minimal_arguments(schema: dict[str, Any]) -> dict[str, Any]:
    """Something of the right JSON type for each required parameter (a refusal comes before validation)."""
    by_type = {"string": "x", "array": [], "object": {}, "integer": 1, "number": 1, "boolean": True}
    arguments = {}
    for name in schema.get("required", []):
        spec = schema["properties"][name]
        kind = spec.get("type") or next((s["type"] for s in spec.get("anyOf", []) if "type" in s), "string")
        arguments[name] = by_type.get(kind, "x")
    return arguments


def long_term_files(home: Path) -> dict[str, bytes]:
    found = {}
    for folder, subfolders, names in os.walk(home):
        subfolders[:] = [n for n in subfolders if n != ".git"]
        for name in names:
            relative = Path(folder, name).relative_to(home).as_posix()
            if not relative.startswith(SCRATCH) and not name.startswith("."):
                found[relative] = Path(folder, name).read_bytes()
    return found


async def test_a_gated_subagent_writes_nothing_long_term_through_any_tool(
    home: Path, settings_for: Callable[..., Settings]
) -> None:
    async with Client(build_server(settings_for())) as main:  # something to update, delete and merge
        await main.call_tool("save_memory", {"content": "The user's editor is Helix"})
        await main.call_tool(
            "graph", {"action": "add", "triples": [{"subject": "Ann", "predicate": "knows", "object": "Bo"}]}
        )
    before = long_term_files(home)
    gated = settings_for(
        namespace="subagent/researcher", gated_writes=True, toolsets=["all"], trigger_mode="act", conversation_window=4
    )
    async with Client(build_server(gated)) as researcher:
        tools = (await researcher.list_tools()).tools
        assert {t.name for t in tools} == set(toolsets.tools_of(toolsets.TOOLSETS))
        refused, ran = [], []
        for tool in tools:
            if tool.annotations and tool.annotations.read_only_hint:
                continue
            for _ in range(5 if tool.name == "record_turn" else 1):  # enough turns to compact the window
                result = await researcher.call_tool(
                    tool.name, GOOD.get(tool.name) or minimal_arguments(tool.input_schema)
                )
            if tool.name in toolsets.UNGATED or tool.name == "core_memory":  # core_memory: its read action
                assert not result.is_error, f"{tool.name}: {result.content[0].text}"
                ran.append(tool.name)
            else:
                assert result.is_error and "are gated" in result.content[0].text, tool.name
                refused.append(tool.name)
        assert {"update_memory", "delete_memory", "forget", "add_triples", "record_episode", "save_procedure"} <= set(
            refused
        )
        assert {"write_workspace_file", "apply_dream", "dream", "record_feedback", "merge_entities"} <= set(refused)
        assert {"save_memory", "remember", "recall", "record_turn", "save_to_working_memory"} <= set(ran)
        assert {"working_memory"} <= set(ran) and {"graph"} <= set(refused)
        for reading in ({"action": "find"}, {"action": "get", "name": "Ann"}, {"action": "traverse", "name": "Ann"}):
            read = await researcher.call_tool("graph", reading)  # the graph's reads stay open to a sub-agent
            assert not read.is_error, (reading, read.content[0].text)
        for odd in (["find"], {"x": 1}, 3):  # not a word: refused as a write, never a crash of the gate
            strange = await researcher.call_tool("graph", {"action": odd})
            assert strange.is_error and "are gated" in strange.content[0].text, odd
        report = await researcher.call_tool("dream", {"action": "report"})
        assert "are gated" not in report.content[0].text
        proposals = (await researcher.call_tool("review_proposals", {})).structured_content
        assert proposals is not None
        triggers = {p["trigger"].split(" ")[0] for p in proposals["proposals"]}
        assert {"save_memory", "remember", "conversation"} <= triggers  # save, remember (tool and trigger), compaction
        core_write = await researcher.call_tool("core_memory", {"action": "append", "block": "Persona", "text": "x"})
        assert core_write.is_error and "are gated" in core_write.content[0].text
    assert long_term_files(home) == before
