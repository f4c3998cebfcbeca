"""Replicas of the real server on one PostgreSQL database (ROCKMEM_STORE), each with its own home: what one is
told to remember, another finds, over stdio and over streamable HTTP."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from tests.e2e.test_http import serving
from tests.pg_server import database  # noqa: F401  (the fixture)

pytestmark = pytest.mark.anyio


async def test_two_replicas_share_long_term_memory(
    database: str,  # noqa: F811
    tmp_path: Path,
    stdio_server: Any,
    call: Any,
) -> None:
    over_http_home, over_stdio_home = tmp_path / "replica-a", tmp_path / "replica-b"
    with serving(over_http_home, tmp_path / "a.log", ROCKMEM_STORE=database, ROCKMEM_EMBEDDING_MODEL="off") as url:
        async with Client(url) as a, stdio_server(over_stdio_home, ROCKMEM_STORE=database) as b:
            saved = await call(a, "save_memory", content="The deploy freeze starts on Friday", category="ops/freeze")
            found = await call(b, "search_memory", query="deploy freeze", stores=["memories"])
            assert [hit["entry"]["id"] for hit in found["results"]] == [saved["id"]]
            await call(b, "update_memory", id=saved["id"], content="The deploy freeze starts on Thursday")
            assert (await call(a, "get_memory", id=saved["id"]))["content"] == "The deploy freeze starts on Thursday"
            await call(a, "delete_memory", id=saved["id"], permanent=True)
            again = await call(b, "search_memory", query="deploy freeze", stores=["memories"])
            assert again["results"] == []
    assert not list((over_http_home / "memory").rglob("*.json"))  # the rows are in the database, not the home
