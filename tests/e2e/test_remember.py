"""Remembering through a real stdio server (issue 21, part 2): the remember tool routed by each driver — rules,
the client's model (MCP sampling), the calling agent — and a trigger acted on in recall and record_turn."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.test_dream_sampling import ClientModel

pytestmark = pytest.mark.anyio

ALICE = {
    "store": "semantic",
    "summary": "Alice leads Falcon",
    "entities": [{"name": "Alice", "type": "person"}, {"name": "Falcon", "type": "project"}],
    "relations": [{"from": "Alice", "relation": "leads", "to": "Falcon"}],
    "tags": ["team", "falcon"],
    "confidence": "high",
}


async def test_the_agents_route_writes_every_store_it_names(stdio_server, home: Path, call) -> None:
    async with stdio_server(home, ROCKMEM_TOOLSETS="default,procedures") as client:
        done = await call(client, "remember", content="Alice leads the Falcon project", route=ALICE)
        assert (done["store"], done["driver"], sorted(done["entities"])) == ("semantic", "agent", ["Alice", "Falcon"])
        memory = await call(client, "get_memory", id=done["memory_id"])
        assert (memory["importance"], memory["tags"]) == (1.0, ["team", "falcon"])
        entity = await call(client, "get_entity", name_or_id="Alice")
        assert [f["predicate"] for f in entity["facts"]] == ["leads"]
        logged = await call(client, "search_memory", query="Falcon project", stores=["episodes"])
        assert [h["episode"]["id"] for h in logged["episodes"]] == [done["episode_id"]]
        steps = {"store": "procedural", "summary": "How to release", "tags": ["release", "ops"]}
        saved = await call(client, "remember", content="To release: run the tests, then tag it", route=steps)
        assert saved["procedure"] == "How to release" and saved["memory_id"] is None
        bad = await client.call_tool("remember", {"content": "x", "route": {"store": "attic", "summary": "x"}})
        assert bad.is_error and "store" in bad.content[0].text


async def test_without_a_model_rules_route_and_the_agent_driver_hands_back_a_task(
    stdio_server, home: Path, call
) -> None:
    async with stdio_server(home) as client:
        done = await call(client, "remember", content="Always remember that the vault key is in drawer 3")
        assert (done["driver"], done["store"]) == ("rules", "vault")
        assert (await call(client, "get_memory", id=done["memory_id"]))["pinned"] is True
    async with stdio_server(home, ROCKMEM_ENCODE_DRIVER="agent") as client:
        task = await call(client, "remember", content="My dentist is Dr Wu")
        assert task["store"] is None and task["task"]["text"] == "My dentist is Dr Wu"
        assert "store" in task["task"]["answer_schema"]["properties"]
        assert (await call(client, "search_memory", query="dentist"))["results"] == []


async def test_the_clients_model_routes_through_sampling(stdio_server, home: Path, call) -> None:
    model = ClientModel(json.dumps({"store": "core", "summary": "Dana, product lead at Acme"}))
    async with stdio_server(home, sampling_callback=model) as client:
        done = await call(client, "remember", content="I am a product lead at Acme, call me Dana")
        assert (done["driver"], done["store"], done["core_line"]) == (
            "sampling",
            "core",
            "Identity: Dana, product lead at Acme",
        )
        assert "Remember" in model.requests[-1].system_prompt or "Route" in model.requests[-1].system_prompt
        core = await call(client, "core_memory", block="Identity")
        assert "Dana, product lead at Acme" in core["text"]


async def test_a_trigger_in_act_mode_is_routed_by_the_clients_model(stdio_server, home: Path, call) -> None:
    answer = {"store": "episodic", "summary": "Standup moved to 10:30", "tags": ["standup", "schedule"]}
    model = ClientModel(json.dumps(answer))
    async with stdio_server(home, sampling_callback=model, ROCKMEM_TRIGGER_MODE="act") as client:
        turn = await call(client, "record_turn", role="user", content="Don't forget: standup moved to 10:30")
        remembered = turn["trigger"]["remembered"]
        assert (remembered["driver"], remembered["store"], remembered["memory_id"]) == ("sampling", "episodic", None)
        assert "remembered in episodic by your client's model" in turn["trigger"]["action"]
        assert "standup moved to 10:30" in model.requests[-1].messages[0].content.text
        found = await call(client, "search_memory", query="standup", stores=["episodes"])
        assert [h["episode"]["id"] for h in found["episodes"]] == [remembered["episode_id"]]
        asked = len(model.requests)
        await call(client, "recall", message="How was your day?", session_id="s1")
        assert len(model.requests) == asked  # no remember in the message: the client's model is not asked
