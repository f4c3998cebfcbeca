"""Malformed requests get errors a model can act on (server/requests.py): unknown tool arguments refused
naming the valid ones, schema errors as one line, the JSON-RPC codes of an unknown prompt and a missing
resource. Over a real stdio server, as clients meet them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from rockmem_mcp.server.requests import RESOURCE_NOT_FOUND

pytestmark = pytest.mark.anyio


async def test_requests_a_model_gets_wrong_are_answered_with_what_to_change(stdio_server: Any, home: Path) -> None:
    async with stdio_server(home) as client:
        # A misspelt argument is refused (it used to be dropped, and the memory saved without its category).
        refused = await client.call_tool("save_memory", {"content": "Ada likes tea", "categroy": "drinks"})
        assert refused.is_error
        text = refused.content[0].text
        assert "'categroy' (did you mean 'category'?)" in text
        assert "content, category, tags, metadata, importance, pinned" in text and "\n" not in text
        listed = await client.call_tool("search_memory", {})
        assert listed.structured_content["total_matches"] == 0  # nothing was saved

        # Schema errors: one line naming the argument, what it must be and what was given; no pydantic dump.
        too_many = await client.call_tool("search_memory", {"query": "tea", "limit": 500})
        assert too_many.is_error
        assert too_many.content[0].text == (
            "Error executing tool search_memory: invalid arguments for search_memory: "
            "'limit': input should be less than or equal to 200 (got 500). Nothing was done."
        )
        wrong = await client.call_tool("search_memory", {"query": "tea", "mode": "fast", "tags": "drinks"})
        text = wrong.content[0].text
        assert "'mode': input should be 'hybrid', 'bm25', 'vector' or 'rockbot' (got 'fast')" in text
        assert "'tags': input should be a valid list (got 'drinks')" in text
        assert "pydantic" not in text and "type=" not in text and "\n" not in text
        missing = await client.call_tool("save_memory", {})
        assert missing.content[0].text.endswith(
            ": invalid arguments for save_memory: 'content' is required. Nothing was done."
        )

        # Arguments that are right still work.
        saved = await client.call_tool("save_memory", {"content": "Ada likes tea", "category": "drinks"})
        assert not saved.is_error and saved.structured_content["category"] == "drinks"

        with pytest.raises(MCPError) as prompt:
            await client.get_prompt("recal", {"message": "hi"})
        assert prompt.value.error.code == INVALID_PARAMS
        assert "'recall'" in prompt.value.error.message

        with pytest.raises(MCPError) as memory:
            await client.read_resource("rockmem://memory/000000000000")
        assert memory.value.error.code == RESOURCE_NOT_FOUND
        assert "no memory with id '000000000000'" in memory.value.error.message
        with pytest.raises(MCPError) as nowhere:
            await client.read_resource("rockmem://nowhere")
        assert nowhere.value.error.code == RESOURCE_NOT_FOUND


async def test_nested_misspelt_fields_bad_addresses_and_prompt_arguments_are_refused(client: Any) -> None:
    bob = await client.call_tool("graph", {"action": "add", "entities": [{"name": "Bob", "alias": ["Bobby"]}]})
    expected = "'entities.0': value error, no field 'alias'; the fields are name, type, aliases"
    assert bob.is_error and expected in bob.content[0].text
    fact = {"subject": "Ann", "predicate": "knows", "object": "Bo", "confidnce": 0.2}
    refused = await client.call_tool("graph", {"action": "add", "triples": [fact]})
    assert refused.is_error and "confidnce" in refused.content[0].text
    found = await client.call_tool("graph", {"action": "find", "query": "Bob"})
    assert found.structured_content["result"]["total_matches"] == 0

    with pytest.raises(MCPError) as bad_id:
        await client.read_resource("rockmem://memory/bad id")
    assert bad_id.value.error.code == INVALID_PARAMS

    with pytest.raises(MCPError) as extra:
        await client.get_prompt("recall", {"message": "hi", "bogus": "1"})
    assert extra.value.error.code == INVALID_PARAMS
    assert "has no argument 'bogus'" in extra.value.error.message and "message" in extra.value.error.message

    long_key = "k" * 5000
    echoed = await client.call_tool("save_memory", {"content": "x", long_key: 1})
    assert echoed.is_error and len(echoed.content[0].text) < 400
