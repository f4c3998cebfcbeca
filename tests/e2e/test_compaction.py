"""Write-then-compact through a real server process: a fact said 60 turns ago is still found after the window
moved on, the window is a summary turn + the latest turns, and record_turn's context-usage advice (flush at
60 %, compaction at 70 %) with rules, the client's model (MCP sampling) and the agent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp.types import CreateMessageRequestParams, CreateMessageResult, TextContent

from rockmem_mcp.server.app import build_server
from tests.embedding_server import EmbeddingServer

pytestmark = pytest.mark.anyio

LOCKER = "My locker code is 4471, by the way."


async def talk(client: Client, call, turns: int, first: str = LOCKER, **usage: int) -> list[dict]:
    """Alternating user/assistant turns, the first saying `first`; the replies."""
    replies = []
    for i in range(turns):
        role = "user" if i % 2 == 0 else "assistant"
        content = first if i == 0 else f"{role} says {i}: let us keep planning the vegetable garden"
        replies.append(await call(client, "record_turn", role=role, content=content, session_id="chat-1", **usage))
    return replies


async def test_a_fact_said_60_turns_ago_is_found_after_the_window_moved_on(stdio_server, home: Path, call) -> None:
    async with stdio_server(home) as client:
        replies = await talk(client, call, 60)
        compacted = [r["compaction"] for r in replies if r["compaction"] is not None]
        assert len(compacted) == 1 and compacted[0]["driver"] == "rules" and compacted[0]["compacted"] == 46
        assert replies[0]["compaction"] is None and replies[49]["compaction"] == compacted[0]  # when it filled
        window = await call(client, "get_conversation", session_id="chat-1", last_n=200)
        roles = [t["role"] for t in window["turns"]]
        assert roles[0] == "summary" and roles[1:] == ["user", "assistant"] * 7 and window["kept"] == 15
        assert window["turns"][0]["content"] == compacted[0]["summary"]
        assert window["turns"][-1]["content"] == "assistant says 59: let us keep planning the vegetable garden"
        assert all("4471" not in t["content"] for t in window["turns"][1:])  # the turn itself left the window
        found = await call(client, "search_memory", query="locker code")
        assert [h["entry"]["content"] for h in found["results"]] == [LOCKER]
        assert found["results"][0]["entry"]["id"] in compacted[0]["saved"]
    async with stdio_server(home) as again:  # on disk: a new process finds it, and what the user said
        episodes = await call(again, "search_memory", query="locker code", stores=["episodes"])
        assert LOCKER in [h["episode"]["content"] for h in episodes["episodes"]]


async def test_context_usage_advises_a_flush_at_60_and_compacts_at_70(stdio_server, home: Path, call, call_error):
    async with stdio_server(home) as client:
        quiet = await talk(client, call, 8, tokens_used=5_900, token_limit=10_000)
        assert [r["compaction"] for r in quiet] == [None] * 8
        flush = await call(client, "record_turn", role="user", content="hm", session_id="chat-1", tokens_used=6_000,
                           token_limit=10_000)  # fmt: skip
        advice = flush["compaction"]
        assert advice["advice"] == "flush" and advice["usage"] == 0.6 and "save_memory" in advice["note"]
        assert advice["compacted"] == 0 and advice["summary"] is None
        compact = await call(client, "record_turn", role="user", content="and so on", session_id="chat-1",
                             tokens_used=7_000, token_limit=10_000)  # fmt: skip
        done = compact["compaction"]
        assert done["advice"] == "compact" and done["driver"] == "rules" and done["compacted"] == 6
        assert done["saved"] and done["summary"].startswith("Summary of the conversation before")
        window = await call(client, "get_conversation", session_id="chat-1")
        assert [t["role"] for t in window["turns"]] == ["summary", "user", "assistant", "user", "user"]
        message = await call_error(client, "record_turn", role="user", content="x", tokens_used=10)
        assert "tokens_used needs token_limit" in message


async def test_the_servers_model_compacts_over_real_http(stdio_server, home: Path, call) -> None:
    answer = {"facts": ["The user's locker code is 4471"], "summary": "The user planned a vegetable garden."}
    text = json.dumps(answer)
    model = EmbeddingServer()  # a scripted OpenAI-compatible server on loopback; here it answers chat completions
    model.replies = [lambda body: (200, {"choices": [{"index": 0, "message": {"role": "assistant", "content": text}}]})]
    try:
        env = {"ROCKMEM_LLM_ENDPOINT": model.url, "ROCKMEM_LLM_MODEL": "compactor-1"}
        async with stdio_server(home, **env) as client:
            replies = await talk(client, call, 9)
            reply = await call(client, "record_turn", role="user", content="ok", session_id="chat-1", tokens_used=7,
                               token_limit=10)  # fmt: skip
            done = reply["compaction"]
            assert [r["compaction"] for r in replies] == [None] * 9 and done["driver"] == "llm"
            assert done["summary"] == answer["summary"] and len(done["saved"]) == 1
            found = await call(client, "search_memory", query="locker code")
            assert [h["entry"]["content"] for h in found["results"]] == answer["facts"]
        ((body, _),) = model.requests
        assert body["model"] == "compactor-1" and LOCKER in body["messages"][1]["content"]
    finally:
        model.close()


class ClientModel:
    """A client's model that answers each sampling request with the next scripted text."""

    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.requests: list[CreateMessageRequestParams] = []

    async def __call__(self, context: ClientRequestContext, params: CreateMessageRequestParams) -> CreateMessageResult:
        self.requests.append(params)
        content = TextContent(type="text", text=self.answer)
        return CreateMessageResult(role="assistant", model="client-model", stop_reason="endTurn", content=content)


async def test_the_clients_model_compacts_through_sampling_only_when_due(stdio_server, home: Path, call) -> None:
    model = ClientModel(json.dumps({"facts": ["The user's locker code is 4471"], "summary": "Garden planning."}))
    async with stdio_server(home, sampling_callback=model) as client:
        replies = await talk(client, call, 50)
        assert len(model.requests) == 1  # asked once, by the turn that filled the window
        assert LOCKER in model.requests[0].messages[0].content.text
        done = replies[-1]["compaction"]
        assert done["driver"] == "sampling" and done["summary"] == "Garden planning." and len(done["saved"]) == 1
        found = await call(client, "search_memory", query="locker code")
        assert [h["entry"]["content"] for h in found["results"]] == ["The user's locker code is 4471"]


async def test_the_agent_gets_the_task_and_hands_in_its_summary(settings_for, call) -> None:
    async with Client(build_server(settings_for(encode_driver="agent"))) as client:
        await talk(client, call, 9)
        reply = await call(client, "record_turn", role="user", content="so", session_id="chat-1", tokens_used=71,
                           token_limit=100)  # fmt: skip
        task = reply["compaction"]["task"]
        assert reply["compaction"]["driver"] == "agent" and LOCKER in task and 'role="summary"' in task
        await call(client, "save_memory", content="The user's locker code is 4471")
        done = await call(client, "record_turn", role="summary", content="Planning the garden.", session_id="chat-1")
        assert done["role"] == "summary" and done["compaction"]["compacted"] == 6
        window = await call(client, "get_conversation", session_id="chat-1")
        assert window["turns"][0]["content"] == "Planning the garden." and window["kept"] == 5
