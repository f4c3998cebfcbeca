"""Procedures as a client of the real server process sees them: saved and retired through the opt-in
`procedures` toolset, read as resources (a JSON listing and one markdown view each), errors as MCP errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

pytestmark = pytest.mark.anyio

ON = {"ROCKMEM_TOOLSETS": "default,procedures"}
DEPLOY = {
    "name": "How to deploy",
    "trigger": ["deploy", "push to production"],
    "steps": ["Run the test suite first", "Deploy to staging before prod"],
    "notes": ["User prefers verbose deploy logs"],
    "learned_from": ["Episode 2026-01-25 14:30"],
    "reason": "first deployment discussion",
}


async def read(client: Client, uri: str) -> str:
    return (await client.read_resource(uri)).contents[0].text


async def listing(client: Client) -> list[dict[str, Any]]:
    return json.loads(await read(client, "rockmem://procedures"))


async def test_save_update_and_read_a_procedure_with_its_history(stdio_server, home: Path, call, call_error) -> None:
    async with stdio_server(home, **ON) as client:
        created = await call(client, "save_procedure", **DEPLOY)
        assert {k: created[k] for k in ("name", "uri", "version", "done", "earlier_versions")} == {
            "name": "How to deploy",
            "uri": "rockmem://procedures/how-to-deploy",
            "version": 1,
            "done": "created",
            "earlier_versions": 0,
        }
        steps = ["Run the test suite first", "Tag the release", "Deploy to staging before prod"]
        updated = await call(
            client, "save_procedure", name="how to deploy", trigger=["deploy"], steps=steps,
            reason="tags are how we version", version=1,
        )  # fmt: skip
        assert (updated["version"], updated["done"], updated["earlier_versions"]) == (2, "updated", 1)

        view = await read(client, "rockmem://procedures/how-to-deploy")
        assert view.startswith("# How to deploy\n<!-- Type: procedure | Learned: ")
        assert "| Version: 2 -->" in view
        assert "## Steps\n1. Run the test suite first\n2. Tag the release\n3. Deploy to staging before prod\n" in view
        history = view.split("## History\n", 1)[1].splitlines()
        assert [line.split(": ", 1)[1] for line in history] == [
            "tags are how we version",
            "first deployment discussion",
        ]
        assert history[1].startswith("- v1 (")
        assert (home / "procedures" / "how-to-deploy.json").is_file()

        [listed] = await listing(client)
        assert listed == {
            "name": "How to deploy",
            "uri": "rockmem://procedures/how-to-deploy",
            "trigger": ["deploy"],
            "version": 2,
            "updated_at": updated["updated_at"],
            "archived": False,
            "earlier_versions": 1,
        }

        stale = await call_error(client, "save_procedure", **DEPLOY, version=1)
        assert "changed since you read it (you had version 1; it is at version 2)" in stale
        refused = await call_error(client, "save_procedure", name="Bad", trigger=["the"], steps=["x"])
        assert "has no word to match" in refused
        with pytest.raises(MCPError, match="no procedure named 'deploy'; near: 'How to deploy'"):
            await read(client, "rockmem://procedures/deploy")


async def test_delete_procedure_archives_restores_and_erases(stdio_server, home: Path, call, call_error) -> None:
    async with stdio_server(home, **ON) as client:
        await call(client, "save_procedure", **DEPLOY)
        archived = await call(client, "delete_procedure", name="How to deploy", reason="we ship continuously now")
        assert (archived["done"], archived["archived"]) == ("archived", True)
        assert [p["archived"] for p in await listing(client)] == [True]
        assert "> Archived on " in await read(client, "rockmem://procedures/how-to-deploy")
        restored = await call(client, "delete_procedure", name="How to deploy", restore=True)
        assert (restored["done"], restored["archived"]) == ("restored", False)
        both = await call_error(client, "delete_procedure", name="How to deploy", permanent=True, restore=True)
        assert "exclude each other" in both
        erased = await call(client, "delete_procedure", name="How to deploy", permanent=True)
        assert erased["done"] == "deleted" and await listing(client) == []
        assert not (home / "procedures" / "how-to-deploy.json").exists()
        missing = await call_error(client, "delete_procedure", name="How to deploy", permanent=True)
        assert "no procedure named 'How to deploy'" in missing


async def test_the_tools_are_off_by_default_and_a_second_server_sees_the_first_ones_saves(
    stdio_server, home: Path, call
) -> None:
    async with stdio_server(home) as default, stdio_server(home, **ON) as writer:
        names = {tool.name for tool in (await default.list_tools()).tools}
        assert not names & {"save_procedure", "delete_procedure"}
        refused = await default.call_tool("save_procedure", DEPLOY)
        assert refused.is_error and refused.content[0].text == "Unknown tool: save_procedure"
        assert await listing(default) == []  # the resources are always on
        await call(writer, "save_procedure", **DEPLOY)
        assert [p["name"] for p in await listing(default)] == ["How to deploy"]
        await call(writer, "save_procedure", **{**DEPLOY, "steps": ["Only this now"]})
        assert "1. Only this now\n" in await read(default, "rockmem://procedures/how-to-deploy")
