"""A tool's text copy of its result is its structured content as compact JSON (the same data, fewer tokens)."""

from __future__ import annotations

import json
from typing import Any

import pytest

pytestmark = pytest.mark.anyio


async def test_result_text_is_the_structured_content_as_compact_json(client: Any) -> None:
    await client.call_tool("save_memory", {"content": "Ada prefers tea in the morning", "tags": ["drinks"]})
    found = await client.call_tool("search_memory", {"query": "tea"})
    assert found.structured_content["results"][0]["entry"]["content"] == "Ada prefers tea in the morning"
    text = found.content[0].text
    assert json.loads(text) == found.structured_content
    assert text == json.dumps(found.structured_content, ensure_ascii=False, separators=(",", ":"))
