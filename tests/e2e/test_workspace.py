"""Workspace files in the data home, as a client of the real server process sees them: listed and read as
resources, found by search_memory as workspace hits, written only through the opt-in `workspace` toolset."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

pytestmark = pytest.mark.anyio

SOUL = "# Persona\nWarm and direct.\n\n## Tone\nNever sarcastic with the user.\n"
USER = "# Drinks\nThe user drinks green tea, never coffee.\n"


async def read(client: Client, uri: str) -> str:
    return (await client.read_resource(uri)).contents[0].text


async def listing(client: Client) -> dict[str, Any]:
    return json.loads(await read(client, "rockmem://workspace"))


async def test_files_in_the_home_are_resources_and_workspace_hits_of_search_memory(
    stdio_server, home: Path, tmp_path: Path, call
) -> None:
    home.mkdir()
    (home / "SOUL.md").write_text(SOUL)
    (home / "USER.md").write_text(USER)
    (home / "MEMORY.md").write_text("## Critical Facts\n- The sarcastic tone test runs on Fridays\n")
    outside = tmp_path / "outside.md"
    outside.write_text("# Secret\nsarcastic launch codes\n")
    (home / "AGENTS.md").symlink_to(outside)
    async with stdio_server(home) as client:
        listed = await listing(client)
        assert [(f["name"], f["uri"]) for f in listed["files"]] == [
            ("SOUL.md", "rockmem://workspace/SOUL.md"),
            ("USER.md", "rockmem://workspace/USER.md"),
        ]
        assert listed["missing"] == ["AGENTS.md", "HEARTBEAT.md"]  # the link is not read
        assert all(f["tokens"] > 0 and len(f["version"]) == 12 for f in listed["files"])
        assert await read(client, "rockmem://workspace/SOUL.md") == SOUL
        with pytest.raises(MCPError, match="symbolic link"):
            await read(client, "rockmem://workspace/AGENTS.md")
        with pytest.raises(MCPError, match="not a workspace file"):
            await read(client, "rockmem://workspace/MEMORY.md")  # core memory has its own resource

        saved = await call(client, "save_memory", content="The user dislikes a sarcastic tone in reviews")
        found = await call(client, "search_memory", query="sarcastic tone")
        # Memories stay in results: the saved one, and the Critical Fact's pinned mirror (core memory's vault).
        memories = {r["entry"]["id"]: r["entry"] for r in found["results"]}
        assert saved["id"] in memories and len(memories) == 2
        assert any(e["category"] == "core/critical-facts" and e["pinned"] for e in memories.values())
        hits = [(h["file"], h["heading"], h["line"]) for h in found["workspace"]]
        assert ("SOUL.md", "Tone", 4) in hits and ("MEMORY.md", "Critical Facts", 1) in hits
        assert all(h["file"] != "AGENTS.md" for h in found["workspace"])
        tone = next(h for h in found["workspace"] if h["heading"] == "Tone")
        assert tone["text"] == "## Tone\nNever sarcastic with the user." and tone["score"] > 0

        # filters workspace files cannot satisfy leave them out; no query lists memories alone
        for narrowed in ({"category": "user-preferences"}, {"tags": ["style"]}, {"include_archived": True}):
            assert (await call(client, "search_memory", query="sarcastic tone", **narrowed))["workspace"] == []
        assert (await call(client, "search_memory"))["workspace"] == []

        (home / "USER.md").write_text(USER + "# Music\nThe user plays the cello on Sundays.\n")  # by hand
        found = await call(client, "search_memory", query="cello")
        assert [(h["file"], h["heading"]) for h in found["workspace"]] == [("USER.md", "Music")]

        # Control codes in a file (here: set the terminal's title, then the bidi override) come out escaped.
        (home / "HEARTBEAT.md").write_text("Check\x1b]0;pwned\x07 the backups\u202e.\n\tDaily.\n")
        shown = await read(client, "rockmem://workspace/HEARTBEAT.md")
        assert shown == "Check\\u001b]0;pwned\\u0007 the backups\\u202e.\n\tDaily.\n"

        refused = await client.call_tool("write_workspace_file", {"name": "SOUL.md", "content": "x"})
        assert refused.is_error and refused.content[0].text == "Unknown tool: write_workspace_file"
    assert (home / "SOUL.md").read_text() == SOUL


async def test_write_workspace_file_writes_with_the_toolset_on_and_refuses_a_stale_version(
    stdio_server, home: Path, call, call_error
) -> None:
    home.mkdir()
    (home / "USER.md").write_text(USER)
    async with stdio_server(home, ROCKMEM_TOOLSETS="default,workspace") as client:
        assert "write_workspace_file" in {tool.name for tool in (await client.list_tools()).tools}
        [user] = (await listing(client))["files"]
        written = await call(
            client, "write_workspace_file", name="USER.md", content=USER + "Tea at 4pm.\n", version=user["version"]
        )
        assert (home / "USER.md").read_text() == USER + "Tea at 4pm.\n"
        assert written["version"] != user["version"]
        assert (await listing(client))["files"] == [written]

        stale = await call_error(
            client, "write_workspace_file", name="USER.md", content="lost", version=user["version"]
        )
        assert "changed since you read it" in stale
        assert (home / "USER.md").read_text() == USER + "Tea at 4pm.\n"

        created = await call(client, "write_workspace_file", name="HEARTBEAT.md", content="# Checks\nDisk usage.\n")
        assert (home / "HEARTBEAT.md").read_text() == "# Checks\nDisk usage.\n"
        assert created["uri"] == "rockmem://workspace/HEARTBEAT.md"
        assert "not a workspace file" in await call_error(client, "write_workspace_file", name="MEMORY.md", content="x")
        assert not (home / "MEMORY.md").exists()
        found = await call(client, "search_memory", query="disk usage")
        assert [(h["file"], h["heading"]) for h in found["workspace"]] == [("HEARTBEAT.md", "Checks")]
