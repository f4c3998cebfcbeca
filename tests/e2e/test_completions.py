"""Completions over stdio (server/completions.py): a client completing a resource template's argument as a user
types gets what exists, from the start of what was typed; free text and unknown references get an empty list."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp_types import PromptReference, ResourceTemplateReference

pytestmark = pytest.mark.anyio


def template(uri: str) -> ResourceTemplateReference:
    return ResourceTemplateReference(type="ref/resource", uri=uri)


async def test_a_client_completes_ids_names_days_keys_files_and_procedures(stdio_server: Any, home: Path) -> None:
    (home).mkdir(parents=True)
    (home / "SOUL.md").write_text("# Soul\nCalm.\n")
    async with stdio_server(home, ROCKMEM_TOOLSETS="all") as client:
        assert client.server_capabilities.completions is not None  # declared
        saved = [(await client.call_tool("save_memory", {"content": f"fact number {i}"})).structured_content["id"]
                 for i in range(3)]  # fmt: skip
        await client.call_tool("graph", {"action": "add", "entities": [
            {"name": "Alice Novak", "aliases": ["Ali"]}, {"name": "Alan"}, {"name": "Bob"}]})  # fmt: skip
        await client.call_tool("working_memory", {"action": "save", "key": "plan", "data": "x"})
        procedure = {"name": "Deploy the site", "trigger": ["deploy"], "steps": ["build", "push"]}
        assert not (await client.call_tool("save_procedure", procedure)).is_error

        async def values(uri: str, name: str, typed: str) -> list[str]:
            return (await client.complete(template(uri), {"name": name, "value": typed})).completion.values

        one = saved[0]
        assert await values("rockmem://memory/{id}", "id", one[:6]) == [
            i for i in sorted(saved) if i.startswith(one[:6])
        ]
        assert sorted(await values("rockmem://memory/{id}", "id", "")) == sorted(saved)
        assert await values("rockmem://graph/{entity}", "entity", "al") == ["Ali", "Alan", "Alice Novak"]
        assert await values("rockmem://entities/{name}", "name", "B") == ["Bob"]
        days = await values("rockmem://episodes/{day}", "day", "20")
        assert len(days) == 1 and days[0].startswith("20")  # the saves' day
        keys = await values("rockmem://working/{+key}", "key", "session/")
        assert len(keys) == 1 and keys[0].endswith("/plan")
        assert await values("rockmem://workspace/{name}", "name", "so") == ["SOUL.md"]
        assert await values("rockmem://procedures/{name}", "name", "dep") == ["Deploy the site"]

        # Free text and references that do not exist: nothing to offer, not an error.
        assert await values("rockmem://recall/{query}", "query", "dep") == []
        assert await values("rockmem://nowhere/{x}", "x", "a") == []
        prompt = await client.complete(
            PromptReference(type="ref/prompt", name="recall"), {"name": "message", "value": "h"}
        )
        assert prompt.completion.values == []


async def test_category_paths_tags_and_the_remember_prompts_category_complete(stdio_server: Any, home: Path) -> None:
    async with stdio_server(home) as client:
        for content, category, tags in [
            ("Tea at four", "user-preferences/drinks", ["Tea", "afternoon"]),
            ("Deploys on Friday", "project-context/deploy", ["ops"]),
            ("Timezone is CET", "user-preferences/time", ["tz"]),
        ]:
            await client.call_tool("save_memory", {"content": content, "category": category, "tags": tags})

        async def values(ref: Any, name: str, typed: str) -> list[str]:
            return (await client.complete(ref, {"name": name, "value": typed})).completion.values

        categories = template("rockmem://categories/{+path}")
        assert await values(categories, "path", "user") == [
            "user-preferences", "user-preferences/drinks", "user-preferences/time"
        ]  # fmt: skip
        assert await values(categories, "path", "USER-PREFERENCES/D") == ["user-preferences/drinks"]
        assert await values(template("rockmem://tags/{tag}"), "tag", "t") == ["tea", "tz"]
        assert await values(template("rockmem://tags/{tag}"), "tag", "zzz") == []
        remember = PromptReference(type="ref/prompt", name="remember")
        assert await values(remember, "category", "project") == ["project-context", "project-context/deploy"]

        # What the completed values lead to: the memories there, and the prompt's branch of the list.
        drinks = await client.read_resource("rockmem://categories/user-preferences")
        listed = json.loads(drinks.contents[0].text)
        assert sorted(hit["entry"]["content"] for hit in listed["results"]) == ["Tea at four", "Timezone is CET"]
        tagged = json.loads((await client.read_resource("rockmem://tags/ops")).contents[0].text)
        assert [hit["entry"]["content"] for hit in tagged["results"]] == ["Deploys on Friday"]
        prompt = await client.get_prompt("remember", {"category": "project-context"})
        text = prompt.messages[0].content.text
        assert "project-context/deploy (1)" in text and "user-preferences/drinks" not in text
