"""Salience over real stdio: uses counted on search, read and recall, kept across a restart; dormant hidden."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

pytestmark = pytest.mark.anyio

EVERY_USE = {"ROCKMEM_REINFORCE_INTERVAL_S": "0"}  # count every use (the default is once a minute)


async def test_uses_are_counted_shown_and_kept_across_a_restart(stdio_server, home, call) -> None:
    async with stdio_server(home, **EVERY_USE) as client:
        saved = await call(client, "save_memory", content="The staging VPN listens on port 1194")
        found = await call(client, "search_memory", query="staging VPN")
        hit = found["results"][0]
        assert (hit["entry"]["id"], hit["tier"]) == (saved["id"], "active")
        assert hit["salience"] == pytest.approx(0.84, abs=0.01)  # 0.7 (an agent's own save) × 1.2 (semantic)
        assert (await call(client, "get_memory", id=saved["id"]))["reinforcement_count"] == 3  # save, hit, read
        await call(client, "recall", message="which port does the staging VPN use?", session_id="s1")
    async with stdio_server(home, **EVERY_USE) as client:  # written by the background flush or at shutdown
        again = await call(client, "get_memory", id=saved["id"])
        assert again["reinforcement_count"] == 5
        assert datetime.fromisoformat(again["last_seen_at"]) > datetime.fromisoformat(saved["created_at"])


async def test_dormant_memories_are_hidden_unless_asked_for(stdio_server, home, call, seed) -> None:
    long_ago = datetime.now(UTC) - timedelta(days=120)
    old, = seed([{"content": "The old build server is called hopper", "created_at": long_ago,
                  "last_seen_at": long_ago}])  # fmt: skip
    async with stdio_server(home) as client:
        assert (await call(client, "search_memory", query="build server hopper"))["results"] == []
        found = await call(client, "search_memory", query="build server hopper", include_dormant=True)
        assert [(h["entry"]["id"], h["tier"]) for h in found["results"]] == [(old, "archive_candidate")]
        assert (await call(client, "get_memory", id=old))["id"] == old
