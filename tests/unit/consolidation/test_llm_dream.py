"""The dream pass driven by a language model: a scripted OpenAI-compatible chat server on real loopback HTTP
(good plans, malformed JSON, unknown ids, timeouts, refusals, the token budget)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from rockmem_mcp.config import Settings
from rockmem_mcp.consolidation.dream import Dreamer
from rockmem_mcp.consolidation.templates import Templates
from rockmem_mcp.conversation.service import ConversationMemory, conversation_log
from rockmem_mcp.errors import LLMError
from rockmem_mcp.graph.service import GraphService
from rockmem_mcp.llm import ChatLLM
from rockmem_mcp.memory.service import MemoryService
from tests.embedding_server import EmbeddingServer, Reply


def chat(content: str | dict, tokens: int = 100) -> Reply:
    """A chat-completions answer whose message is `content` (a dict is sent as JSON text)."""
    text = content if isinstance(content, str) else json.dumps(content)

    def reply(body: dict) -> tuple[int, object]:
        message = {"role": "assistant", "content": text}
        return 200, {"choices": [{"index": 0, "message": message}], "usage": {"total_tokens": tokens}}

    return reply


@pytest.fixture
def server() -> Iterator[EmbeddingServer]:
    scripted = EmbeddingServer()  # a scripted JSON-over-HTTP server; here it answers chat completions
    yield scripted
    scripted.close()


@pytest.fixture
def home(settings: Settings, server: EmbeddingServer) -> Iterator[tuple[Settings, MemoryService, Dreamer]]:
    configured = settings.model_copy(
        update={"llm_endpoint": server.url, "llm_model": "dreamer-1", "llm_api_key": "sk-test", "llm_retries": 1}
    )
    memory, graph = MemoryService(configured), GraphService(configured)
    yield configured, memory, Dreamer(memory, graph, configured, Templates(configured.prompts_dir))
    memory.close()
    graph.close()


def seed(memory: MemoryService) -> list[str]:
    return [
        memory.save("The user drinks green tea every morning", "user-preferences").id,
        memory.save("Every morning the user drinks green tea", "user-preferences").id,
        memory.save("Deploys happen on Tuesdays at 10:00", "project-context/falcon").id,
    ]


def llm(settings: Settings) -> ChatLLM:
    return ChatLLM(settings, backoff_s=0.0)


def test_a_good_plan_is_applied_and_the_request_is_what_the_api_expects(home, server) -> None:
    settings, memory, dreamer = home
    a, b, _ = seed(memory)
    merge = {"ids": [a, b], "content": "The user drinks green tea every morning", "reason": "same fact"}
    server.replies = [chat({"merges": [merge]}, tokens=321)]
    model = llm(settings)
    report = dreamer.run_llm("consolidation", model)
    assert report.mode == "llm" and [x.action for x in report.applied] == ["merge"] and report.rejected == []
    assert model.tokens_used == 321
    assert {e.id for e in memory.iter_entries() if e.archived} == {a, b}
    body, headers = server.requests[0]
    assert server.requests[0] and body["model"] == "dreamer-1" and body["response_format"] == {"type": "json_object"}
    assert headers["Authorization"] == "Bearer sk-test"
    system, user = body["messages"][0]["content"], body["messages"][1]["content"]
    assert "consolidating" in system and '"merges"' in system  # the directive and the plan schema
    assert f"[{a}]" in user and f"[{b}]" in user


def test_malformed_json_is_sent_back_with_the_error_and_the_second_answer_used(home, server) -> None:
    settings, memory, dreamer = home
    a, _, _ = seed(memory)
    good = {"archives": [{"id": a, "reason": "duplicate"}]}
    server.replies = [chat("Sure! Here is the plan: {merges: oops"), chat(f"```json\n{json.dumps(good)}\n```")]
    report = dreamer.run_llm("consolidation", llm(settings))
    assert [(x.action, x.ids) for x in report.applied] == [("archive", [a])]
    retry = server.requests[1][0]["messages"]
    assert retry[-2]["role"] == "assistant" and "not valid" in retry[-1]["content"]


def test_an_answer_that_never_becomes_valid_changes_nothing_and_says_why(home, server) -> None:
    settings, memory, dreamer = home
    seed(memory)
    before = [e.model_dump() for e in memory.iter_entries()]
    server.replies = [chat({"merges": [{"ids": "not a list", "content": 3}]})]
    report = dreamer.run_llm("consolidation", llm(settings))
    assert report.applied == [] and "gave no valid answer in 2 tries" in report.rejected[0].reason
    assert [e.model_dump() for e in memory.iter_entries()] == before


def test_a_plan_naming_unknown_ids_is_refused_by_the_safeguards(home, server) -> None:
    settings, memory, dreamer = home
    a, _, _ = seed(memory)
    plan = {"merges": [{"ids": [a, "feedfacecafe"], "content": "x"}], "archives": [{"id": "000000000000"}]}
    server.replies = [chat(plan)]
    report = dreamer.run_llm("consolidation", llm(settings))
    assert report.applied == []
    assert [x.reason for x in report.rejected] == [
        "unknown or archived ids: feedfacecafe",
        "unknown or already archived id",
    ]
    assert not any(e.archived for e in memory.iter_entries())


def test_a_timeout_is_reported_and_nothing_changes(home, server) -> None:
    settings, memory, dreamer = home
    seed(memory)
    server.replies = [lambda body: (0, None)]  # hangs
    report = dreamer.run_llm("consolidation", llm(settings.model_copy(update={"llm_timeout_s": 0.2})))
    assert report.applied == [] and "timed out after 0.2s" in report.rejected[0].reason
    assert len(server.requests) == 2  # one retry


def test_a_refusal_names_the_settings_to_check(home, server) -> None:
    settings, memory, dreamer = home
    seed(memory)
    server.replies = [lambda body: (401, {"error": "bad key"})]
    with pytest.raises(LLMError, match="ROCKMEM_LLM_API_KEY"):
        llm(settings).complete_json("system", "user", type(dreamer.material("consolidation")))
    report = dreamer.run_llm("consolidation", llm(settings))
    assert "refused the request: HTTP 401" in report.rejected[0].reason and len(server.requests) == 2


def test_batches_go_one_prompt_each_until_the_token_budget(home, server) -> None:
    settings, memory, dreamer = home
    for n in range(5):
        memory.save(f"Fact number {n} about project Falcon", "notes")
    settings = settings.model_copy(update={"dream_batch_size": 2, "llm_token_budget": 1500})
    dreamer = Dreamer(memory, dreamer.graph, settings, dreamer.templates)
    server.replies = [chat({}, tokens=1000)]
    report = dreamer.run_llm("consolidation", llm(settings))
    assert len(server.requests) == 2  # 5 items in batches of 2: the budget stopped the third prompt
    assert "stopped at the token budget (2000 of 1500 tokens used)" in report.rejected[0].reason
    assert "1. [" in server.requests[0][0]["messages"][1]["content"]
    assert "3. [" in server.requests[1][0]["messages"][1]["content"]


def test_no_model_configured_is_a_clear_error(settings: Settings) -> None:
    with pytest.raises(LLMError, match="ROCKMEM_LLM_ENDPOINT"):
        ChatLLM(settings)


def test_the_entities_pass_fills_the_graph(home, server) -> None:
    settings, memory, dreamer = home
    memory.save("Alice leads the Falcon project", "people")
    plan: dict[str, Any] = {
        "entities": [{"name": "Alice", "type": "person"}, {"name": "Falcon", "type": "project"}],
        "triples": [{"subject": "Alice", "predicate": "leads", "object": "Falcon", "confidence": 0.9}],
    }
    server.replies = [chat(plan)]
    report = dreamer.run_llm("entities", llm(settings))
    assert [x.action for x in report.applied] == ["entity", "entity", "triple"]
    assert [f.line() for f in dreamer.graph.traverse("alice").facts] == ["- Alice --leads--> Falcon (confidence=0.90)"]


def test_the_preference_pass_consumes_every_turn_it_sent_whatever_the_model_answered(home, server) -> None:
    """RockBot clears the log after the pass "regardless of LLM success or failure": the turns sent to the
    model are consumed even when it fails on them; the turns it never saw (after the failure) are the next
    run's, so a long log is worked through instead of restarting from its first turn every time."""
    settings, memory, dreamer = home
    settings = settings.model_copy(update={"dream_batch_size": 2, "conversation_log": True})
    dreamer = Dreamer(memory, dreamer.graph, settings, dreamer.templates)
    log = conversation_log(settings)
    texts = ["No emojis, please", "I said no emojis!", "Use metric units", "Metric, please", "Dark theme"]
    for text in texts:
        ConversationMemory(settings).record("chat-1", "user", text)
    emojis = {"creates": [{"content": "The user wants answers without emojis"}]}
    server.replies = [chat(emojis), chat("not JSON"), chat("still not JSON")]
    report = dreamer.run_llm("preferences", llm(settings))
    assert [x.action for x in report.applied] == ["create"]  # the first batch's plan
    assert "gave no valid answer" in report.rejected[0].reason  # the second batch failed
    assert [t.content for day in log.days() for t in log.read(day)] == ["Dark theme"]  # never sent: kept

    server.replies = [chat({})]  # the next run reads on from there and nothing is left after it
    dreamer.run_llm("preferences", llm(settings))
    assert "1. [chat-1] user: Dark theme" in server.requests[-1][0]["messages"][1]["content"]
    assert log.days() == []


def test_a_merge_from_the_server_model_that_inverts_a_fact_is_refused(home, server) -> None:
    settings, memory, dreamer = home
    a = memory.save("Bob is not allergic to peanuts", "people").id
    b = memory.save("Bob isn't allergic to peanuts, says his doctor", "people").id
    c = memory.save("Bob is allergic to peanuts", "people").id
    merges = [
        {"ids": [a, b], "content": "Bob is allergic to peanuts, says his doctor"},
        {"ids": [a, c], "content": "Bob is not allergic to peanuts"},
    ]
    server.replies = [chat({"merges": merges})]
    report = dreamer.run_llm("consolidation", llm(settings))
    assert report.applied == [] and [x.reason for x in report.rejected] == [
        "the merged text drops details of its sources: not allerg",
        f"{a} and {c} contradict each other (one negates what the other affirms: allerg): keep both, or archive one",
    ]
    assert not any(e.archived for e in memory.iter_entries())
