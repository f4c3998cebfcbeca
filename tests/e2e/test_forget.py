"""Forgetting through the real server process: a fact in memory, the episode log, the graph and core memory is found
by one forget query, forgotten once the user confirms, gone from search, recall, the graph and core, restored,
found again, and then deleted for good with a line per item in meta/forget.log."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

pytestmark = pytest.mark.anyio

CORE_LINE = "- Sister: Anna, lives in Lisbon"
EVERYWHERE = dict.fromkeys(("memory", "episode", "entity", "core", "recall"), True)
NOWHERE = dict.fromkeys(EVERYWHERE, False)


async def read(client: Client, uri: str) -> str:
    return (await client.read_resource(uri)).contents[0].text


async def seen(client: Client, call: Any, session: str) -> dict[str, bool]:
    """Where the fact shows: each store's own search, the graph, core memory and a new session's recall."""
    memories = await call(client, "search_memory", query="Anna Lisbon", stores=["memories"])
    episodes = await call(client, "search_memory", query="Anna Lisbon birthday", stores=["episodes"])
    entities = await call(client, "find_entities", query="Anna")
    walk = await call(client, "traverse_graph", start="Lisbon")
    core = await call(client, "core_memory", action="read")
    recalled = (await call(client, "recall", message="What about Anna in Lisbon?", session_id=session))["text"]
    return {
        "memory": [r["entry"]["content"] for r in memories["results"]] == ["My sister Anna lives in Lisbon"],
        "episode": "Visited Anna in Lisbon for her birthday" in [h["episode"]["content"] for h in episodes["episodes"]],
        "entity": [h["entity"]["name"] for h in entities["results"]] == ["Anna"] and len(walk["facts"]) == 1,
        "core": CORE_LINE in core["text"],
        "recall": all(text in recalled for text in ("My sister Anna lives in Lisbon", "lives_in", "Sister: Anna")),
    }


async def test_forget_confirm_restore_and_delete_for_good(stdio_server, home: Path, call, call_error) -> None:
    async with stdio_server(home, ROCKMEM_TOOLSETS="all") as client:
        await call(client, "save_memory", content="My sister Anna lives in Lisbon", category="family")
        await call(client, "record_episode", content="Visited Anna in Lisbon for her birthday")
        await call(client, "add_triples", triples=[{"subject": "Anna", "predicate": "lives_in", "object": "Lisbon"}])
        version = (await call(client, "core_memory", action="read"))["version"]
        await call(client, "core_memory", action="append", block="Identity", text=CORE_LINE, version=version)
        assert await seen(client, call, "s1") == EVERYWHERE

        assert "either query" in await call_error(client, "forget")
        found = (await call(client, "forget", query="Anna in Lisbon"))["candidates"]
        stores = {c["store"] for c in found}
        assert {"memory", "episode", "entity", "core"} <= stores
        # The user confirms all but the city: the fact, the event, Anna and the core line.
        confirmed = [c["id"] for c in found if not c["text"].startswith("entity Lisbon")]
        assert len(confirmed) == 4 and await seen(client, call, "s2") == EVERYWHERE  # finding changed nothing
        forgotten = await call(client, "forget", ids=confirmed)
        assert [item["ok"] for item in forgotten["items"]] == [True] * 4, forgotten
        assert await seen(client, call, "s3") == NOWHERE
        assert "no entity named 'Anna'" in await call_error(client, "get_entity", name_or_id="Anna")
        listed = json.loads(await read(client, "rockmem://forgotten"))
        assert sorted(item["id"] for item in listed) == sorted(confirmed)

        restored = await call(client, "forget", ids=confirmed, restore=True)
        assert [item["ok"] for item in restored["items"]] == [True] * 4, restored
        assert await seen(client, call, "s4") == EVERYWHERE
        assert json.loads(await read(client, "rockmem://forgotten")) == []

        erased = await call(client, "forget", ids=confirmed, permanent=True, reason="the user asked")
        assert [item["ok"] for item in erased["items"]] == [True] * 4, erased
        assert await seen(client, call, "s5") == NOWHERE
        again = await call(client, "forget", ids=confirmed, restore=True)
        assert [item["ok"] for item in again["items"]] == [False] * 4
    lines = [json.loads(line) for line in (home / "meta" / "forget.log").read_text().splitlines()]
    assert sorted(line["id"] for line in lines) == sorted(confirmed)
    assert {line["reason"] for line in lines} == {"the user asked"}
    assert not list((home / "forgotten").rglob("*.json"))


async def test_a_critical_fact_forgotten_for_good_leaves_no_mirror_and_a_removed_one_is_unpinned(
    client: Client, call: Any, home: Path
) -> None:
    """Issue 45: a Critical Facts line forgotten for good kept its pinned mirror memory (archived but pinned, so
    no dream purged it and an archived search found it); a plain remove_line left the mirror pinned too."""
    secret, plain = "Door code is 7291-zebra", "Prefers window seats"
    version = (await call(client, "core_memory"))["version"]
    for line in (secret, plain):
        version = (
            await call(client, "core_memory", action="append", block="Critical Facts", text=line, version=version)
        )["version"]
    mirrored = await call(client, "search_memory", query="door code zebra window seats", include_archived=True)
    assert {hit["entry"]["content"] for hit in mirrored["results"] if hit["entry"]["pinned"]} == {secret, plain}

    found = await call(client, "forget", query="door code zebra")
    [candidate] = [c for c in found["candidates"] if c["store"] == "core"]
    await call(client, "forget", ids=[candidate["id"]], permanent=True)
    left = await call(client, "search_memory", query="door code zebra", include_archived=True)
    assert left["results"] == []
    stored = [p for p in (home / "memory").rglob("*.json") if "zebra" in p.read_text(encoding="utf-8")]
    assert stored == []  # no memory file keeps the line, archived or not

    view = await call(client, "core_memory")
    line = 1 + next(i for i, text in enumerate(view["blocks"][3]["lines"]) if plain in text)
    await call(client, "core_memory", action="remove_line", block="Critical Facts", line=line, version=view["version"])
    archived = await call(client, "search_memory", query="window seats", include_archived=True)
    [mirror] = [hit["entry"] for hit in archived["results"]]
    assert mirror["archived_at"] is not None and mirror["pinned"] is False  # out of the vault: it may fade and go
