"""Completions over stdio (server/completions.py): a client completing a resource template's argument as a user
types gets what exists, from the start of what was typed; free text and unknown references get an empty list."""

from __future__ import annotations

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
        await client.call_tool("add_entities", {"entities": [
            {"name": "Alice Novak", "aliases": ["Ali"]}, {"name": "Alan"}, {"name": "Bob"}]})  # fmt: skip
        await client.call_tool("save_to_working_memory", {"key": "plan", "data": "x"})
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
