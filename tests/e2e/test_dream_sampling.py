"""The dream tool with the calling client's model (MCP sampling through the SDK's sampling callback), in
memory and over a real stdio process; and the fallback to agent-driven when the client has no model."""

from __future__ import annotations

import json
from typing import Any

import pytest
from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp.types import CreateMessageRequestParams, CreateMessageResult, TextContent

from rockmem_mcp.server.app import build_server

pytestmark = pytest.mark.anyio


class ClientModel:
    """A client's model that answers each sampling request with the next scripted text."""

    def __init__(self, *answers: str) -> None:
        self.answers = list(answers)
        self.requests: list[CreateMessageRequestParams] = []

    async def __call__(self, context: ClientRequestContext, params: CreateMessageRequestParams) -> CreateMessageResult:
        self.requests.append(params)
        text = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        return CreateMessageResult(
            role="assistant", model="client-model", stop_reason="endTurn", content=TextContent(type="text", text=text)
        )


async def seed(client: Client, call) -> list[str]:
    first = await call(client, "save_memory", content="The user drinks green tea every morning")
    second = await call(client, "save_memory", content="Every morning, the user drinks green tea")
    return [first["id"], second["id"]]


async def test_the_clients_model_dreams_through_sampling(settings_for, call) -> None:
    model = ClientModel("")
    async with Client(build_server(settings_for()), sampling_callback=model) as client:
        a, b = await seed(client, call)
        model.answers = [
            json.dumps({"merges": [{"ids": [a, b], "content": "The user drinks green tea every morning"}]})
        ]
        result = await call(client, "dream")
        assert result["mode"] == "sampling" and result["material"] is None
        report = result["report"]
        assert report["mode"] == "sampling" and [x["action"] for x in report["applied"]] == ["merge"]
        request = model.requests[-1]
        assert "consolidating" in (request.system_prompt or "") and request.max_tokens > 0
        assert f"[{a}]" in request.messages[0].content.text
        found = await call(client, "search_memory", query="green tea")
        assert [h["entry"]["id"] for h in found["results"]] == [report["applied"][0]["result_id"]]


async def test_an_invalid_answer_from_the_clients_model_falls_back_to_agent_driven(settings_for, call) -> None:
    async with Client(build_server(settings_for()), sampling_callback=ClientModel("I'd rather not.")) as client:
        await seed(client, call)
        result = await call(client, "dream")
        assert result["mode"] == "agent" and result["report"] is None
        assert "no valid plan" in result["next_step"] and result["material"]["items"] == 2


async def test_without_a_client_model_the_agent_dreams(settings_for, call) -> None:
    async with Client(build_server(settings_for())) as client:
        await seed(client, call)
        result = await call(client, "dream")
        assert result["mode"] == "agent" and "action='apply'" in result["next_step"]
        assert result["next_step"].startswith("No language model here")  # it says why it is the agent's turn
        asked = await call(client, "dream", mode="agent")
        assert "action='apply'" in asked["next_step"] and "No language model" not in asked["next_step"]


async def test_sampling_over_stdio(stdio_server, home, call) -> None:
    model = ClientModel("")
    async with stdio_server(home) as plain:
        _, b = await seed(plain, call)
    plan: dict[str, Any] = {"archives": [{"id": b, "reason": "duplicate of the other"}]}
    model.answers = [json.dumps(plan)]
    async with stdio_server(home, sampling_callback=model) as c:
        result = await call(c, "dream", dry_run=True)
        assert result["mode"] == "sampling" and result["report"]["dry_run"] is True
        assert [(x["action"], x["ids"]) for x in result["report"]["applied"]] == [("archive", [b])]
        assert all(not h["entry"]["archived_at"] for h in (await call(c, "search_memory"))["results"])


async def test_a_merge_from_the_clients_model_that_drops_a_negation_or_a_date_is_refused(settings_for, call) -> None:
    model = ClientModel("")
    async with Client(build_server(settings_for()), sampling_callback=model) as client:
        a = (await call(client, "save_memory", content="The user never wants emails on Fridays"))["id"]
        b = (await call(client, "save_memory", content="On Fridays the user never wants emails"))["id"]
        c = (await call(client, "save_memory", content="The dentist appointment is on 2026-03-05"))["id"]
        d = (await call(client, "save_memory", content="Dentist appointment: 2026-03-05, 9:30"))["id"]
        merges = [
            {"ids": [a, b], "content": "The user wants emails on Fridays"},
            {"ids": [c, d], "content": "The dentist appointment is in March"},
        ]
        model.answers = [json.dumps({"merges": merges})]
        report = (await call(client, "dream"))["report"]
        assert report["mode"] == "sampling" and report["applied"] == []
        assert [x["reason"] for x in report["rejected"]] == [
            "the merged text drops details of its sources: not want",
            "the merged text drops details of its sources: 03, 05, 2026, 9:30",
        ]
        for entry_id in (a, b, c, d):
            assert (await call(client, "get_memory", id=entry_id))["archived_at"] is None
