"""Trigger phrases in a user's message, as a client of the real server process meets them: recall and record_turn
say what the phrase asks for; in act mode a remember is saved, a forget only ever returns candidates."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client

pytestmark = pytest.mark.anyio


async def read(client: Client, uri: str) -> str:
    return (await client.read_resource(uri)).contents[0].text


async def test_suggest_mode_says_what_to_call_and_writes_nothing(stdio_server, home: Path, call) -> None:
    async with stdio_server(home) as client:
        recalled = await call(client, "recall", message="Remember that I prefer green tea.", session_id="s1")
        found = recalled["trigger"]
        assert (found["intent"], found["span"], found["memory_id"]) == ("remember", "I prefer green tea", None)
        assert 'call remember with content "I prefer green tea"' in found["action"]
        assert found["route"]["store"] == "semantic" and found["remembered"] is None  # the rules' route, to pass on
        assert 'Trigger (remember, "Remember that")' in recalled["text"]
        assert (await call(client, "search_memory", query="green tea"))["results"] == []
        turn = await call(client, "record_turn", role="user", content="Don't forget: standup moved to 10:30")
        assert (turn["trigger"]["intent"], turn["trigger"]["span"]) == ("remember", "standup moved to 10:30")
        said = await call(client, "record_turn", role="assistant", content="Remember that I can help.")
        assert said["trigger"] is None  # only what the user says
        plain = await call(client, "recall", message="I remember that trip fondly.", session_id="s1")
        assert plain["trigger"] is None


async def test_act_mode_saves_a_remember_and_a_forget_only_names_candidates(stdio_server, home: Path, call) -> None:
    async with stdio_server(home, ROCKMEM_TRIGGER_MODE="act") as client:
        viewed = await read(client, "rockmem://recall/Remember%20that%20the%20gate%20code%20is%204412")
        assert "Trigger (remember" in viewed
        assert (await call(client, "search_memory", query="gate code"))["results"] == []  # a view never saves
        recalled = await call(client, "recall", message="Remember that the gate code is 4412.", session_id="s1")
        saved = recalled["trigger"]["memory_id"]
        assert saved and f"remembered in semantic by rules: memory [{saved}]" in recalled["trigger"]["action"]
        assert recalled["trigger"]["remembered"]["driver"] == "rules"
        memory = await call(client, "get_memory", id=saved)
        assert (memory["content"], memory["importance"]) == ("the gate code is 4412", 1.0)
        assert memory["tags"] == ["gate", "code"]
        assert memory["metadata"] == {"source": "remember", "store": "semantic"}
        episodes = await call(client, "search_memory", query="gate code", stores=["episodes"])
        assert [h["episode"]["memory_id"] for h in episodes["episodes"]] == [saved]
        forget = await call(client, "recall", message="Please forget about the gate code.", session_id="s1")
        assert forget["trigger"]["intent"] == "forget" and forget["trigger"]["candidates"] == [f"memory:{saved}"]
        assert "forget(ids=[...]) only those they confirm" in forget["trigger"]["action"]
        assert "Candidates (confirm with the user first):" in forget["text"]
        assert f"[memory:{saved}] (memory): the gate code is 4412" in forget["text"]
        assert (await call(client, "get_memory", id=saved))["archived_at"] is None  # nothing forgotten unasked
        asked = await call(client, "recall", message="What do you remember about the gate?", session_id="s2")
        assert asked["trigger"]["intent"] == "search" and asked["trigger"]["candidates"] == [f"memory:{saved}"]
