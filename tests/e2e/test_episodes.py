"""The episodic store as a client of the real server process sees it: save_memory logs an episode, search and
recall find episodes by keywords and time, a day reads as the seed's markdown log, and only an explicit delete
removes one."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

pytestmark = pytest.mark.anyio


async def read(client: Client, uri: str) -> str:
    return (await client.read_resource(uri)).contents[0].text


async def test_save_memory_logs_an_episode_found_by_time_and_keywords(stdio_server, home: Path, call) -> None:
    today = datetime.now(UTC).date().isoformat()
    async with stdio_server(home) as client:
        saved = await call(
            client, "save_memory", content="We chose PostgreSQL 17 for the billing service",
            category="project-decisions/billing", tags=["db"], importance=1.0,
        )  # fmt: skip
        episodes = await call(client, "search_memory", query="PostgreSQL billing", stores=["episodes"])
        assert episodes["results"] == []  # only the store asked for
        (hit,) = episodes["episodes"]
        assert hit["store"] == "episodes" and hit["resource"] == f"rockmem://episodes/{today}"
        assert hit["episode"]["memory_id"] == saved["id"]
        assert (hit["episode"]["type"], hit["episode"]["confidence"], hit["episode"]["source"]) == (
            "decision", "high", "user-explicit",
        )  # fmt: skip
        both = await call(client, "search_memory", query="PostgreSQL billing")
        assert [r["store"] for r in both["results"]] == ["memories"]
        assert both["episodes"] == []  # the episode logs the memory found: one event, one hit
        by_time = await call(client, "search_memory", query="what happened today", stores=["episodes"])
        assert [h["episode"]["memory_id"] for h in by_time["episodes"]] == [saved["id"]]
        assert by_time["route"].startswith('when ("what happened", ')
        log = await read(client, f"rockmem://episodes/{today}")
        assert log.startswith(f"# {today} — Episode Log\n\n## ")
        assert "| decision | confidence:high | tags:[db]\nWe chose PostgreSQL 17 for the billing service" in log
        tiers = json.loads(await read(client, "rockmem://salience"))
        assert tiers["episodes"]["tiers"] == {"active": 1, "fading": 0, "dormant": 0, "archive_candidate": 0}
        assert sum(tiers["procedures"]["tiers"].values()) == 0
        days = json.loads(await read(client, "rockmem://episodes"))
        assert days == [{"day": today, "episodes": 1, "resource": f"rockmem://episodes/{today}"}]
        recalled = await call(client, "recall", message="When did we choose PostgreSQL?", session_id="s1")
        assert recalled["route"].startswith("when")
        assert [e["id"] for e in recalled["episodes"]] == [hit["episode"]["id"]]
        # No period named: the memory keeps its place and the episode says when, without its text again.
        assert [m["id"] for m in recalled["memories"]] == [saved["id"]] and recalled["period"] is None
        assert recalled["text"].count("We chose PostgreSQL 17") == 1
        assert f"] {today} " in recalled["text"] and f"(memory [{saved['id']}] above)" in recalled["text"]
        today_recall = await call(
            client, "recall", message="What did we decide about PostgreSQL today?", session_id="s2"
        )
        assert today_recall["period"] == f"{today} to {today}"  # a period: its episodes lead, the memory goes
        assert [e["memory_id"] for e in today_recall["episodes"]] == [saved["id"]]
        assert today_recall["memories"] == [] and "Episodes, in the order" not in today_recall["text"]
        with pytest.raises(MCPError, match="YYYY-MM-DD"):
            await read(client, "rockmem://episodes/yesterday")


async def test_recorded_episodes_are_deleted_only_explicitly(stdio_server, home: Path, call, call_error) -> None:
    async with stdio_server(home, ROCKMEM_TOOLSETS="default,episodes") as client:
        kept = await call(client, "record_episode", content="Deployed 2.4 to staging", type="task", tags=["deploy"])
        gone = await call(client, "record_episode", content="Felt rushed by the deadline", type="emotion")
        assert "input should be 'decision'" in await call_error(client, "record_episode", content="x", type="rumour")
        assert (await call(client, "delete_episode", id=gone["id"]))["content"] == "Felt rushed by the deadline"
        assert "no episode" in await call_error(client, "delete_episode", id=gone["id"])
        listed = await call(client, "search_memory", stores=["episodes"])
        assert [h["episode"]["id"] for h in listed["episodes"]] == [kept["id"]]
        saved = await call(client, "save_memory", content="The staging password is hunter2")
        await call(client, "delete_memory", id=saved["id"], permanent=True)
        found = await call(client, "search_memory", query="hunter2 password", stores=["episodes"])
        assert found["episodes"] == []  # erased for good, with the episode that logged it
    async with stdio_server(home) as client:  # the default toolsets: no episode tools
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert "record_episode" not in names and "delete_episode" not in names


async def test_unreadable_episode_and_procedure_stores_cost_saves_searches_and_recall_nothing(
    stdio_server, home: Path, call, call_error
) -> None:
    home.mkdir()
    (home / "episodes").write_text("a file where the episode logs' folder belongs")
    (home / "procedures").write_text("a file where the procedures' folder belongs")
    async with stdio_server(home) as client:
        saved = await call(client, "save_memory", content="The staging host is kestrel-2")
        found = await call(client, "search_memory", query="staging host")
        assert [r["entry"]["id"] for r in found["results"]] == [saved["id"]] and found["episodes"] == []
        recalled = await call(client, "recall", message="When did we set up the staging host?", session_id="s1")
        assert [m["id"] for m in recalled["memories"]] == [saved["id"]]
        asked = await call_error(client, "search_memory", query="staging host", stores=["episodes"])
        assert "Not a directory" in asked  # asked for episodes alone: told why there are none
        asked = await call_error(client, "search_memory", query="staging host", stores=["procedures"])
        assert "Not a directory" in asked
