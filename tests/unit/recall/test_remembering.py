"""Remembering (issue 21, part 2): a routing step by any driver, then one write to every store the route names,
all of it or none of it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from rockmem_mcp.config import Settings
from rockmem_mcp.core.service import CoreMemory
from rockmem_mcp.episodes.service import Episodes
from rockmem_mcp.errors import InvalidInputError
from rockmem_mcp.graph.service import GraphService
from rockmem_mcp.memory.service import MemoryService
from rockmem_mcp.procedures.service import Procedures
from rockmem_mcp.recall.remembering import Remembering, parse_route
from tests.embedding_server import EmbeddingServer
from tests.unit.consolidation.test_llm_dream import chat


@dataclass
class Home:
    settings: Settings
    memory: MemoryService
    graph: GraphService
    episodes: Episodes
    procedures: Procedures
    core: CoreMemory
    remembering: Remembering

    def memory_count(self) -> int:
        stats = self.memory.stats()
        return stats.active + stats.archived

    def episode_count(self) -> int:
        return sum(count for _, count in self.episodes.days())


def open_home(settings: Settings, graph: GraphService | None = None) -> Home:
    memory = MemoryService(settings)
    graph = graph or GraphService(settings)
    episodes, procedures = Episodes(settings, reinforcer=memory.reinforcer), Procedures(settings, memory.reinforcer)
    core = CoreMemory(settings, memory)
    remembering = Remembering(settings, memory, episodes, procedures, core, lambda: graph)
    return Home(settings, memory, graph, episodes, procedures, core, remembering)


@pytest.fixture
def home(settings: Settings) -> Iterator[Home]:
    opened = open_home(settings.model_copy(update={"encode_driver": "rules"}))
    yield opened
    opened.procedures.close()
    opened.graph.close()
    opened.memory.close()


def route(store: str, **fields: Any) -> dict[str, Any]:
    return {"store": store, "summary": fields.pop("summary", "a summary"), **fields}


# ---------------------------------------------------------------------------------------------- each store
def test_a_semantic_route_writes_a_memory_its_episode_and_the_graph(home: Home) -> None:
    answer = route(
        "semantic",
        summary="Alice leads Falcon",
        entities=[{"name": "Alice", "type": "person"}, {"name": "Falcon", "type": "project"}],
        relations=[{"from": "Alice", "relation": "leads", "to": "Falcon"}],
        tags=["team", "falcon"],
        confidence="high",
    )
    done = home.remembering.remember("Alice leads the Falcon project", answer)
    entry = home.memory.get(done.memory_id)
    assert (done.store, done.driver, entry.importance, entry.tags) == ("semantic", "agent", 1.0, ["team", "falcon"])
    assert entry.metadata == {"source": "remember", "store": "semantic"} and not entry.pinned
    assert home.episodes.remove(done.episode_id).memory_id == done.memory_id
    assert sorted(done.entities) == ["Alice", "Falcon"]
    fact = home.graph.fact(done.triples[0])
    assert (fact.subject, fact.predicate, fact.object, fact.source) == ("Alice", "leads", "Falcon", done.memory_id)


def test_a_vault_route_pins_the_memory(home: Home) -> None:
    done = home.remembering.remember("Never forget: the server room code is 7781", route("vault"))
    assert home.memory.get(done.memory_id).pinned


def test_an_episodic_route_writes_an_episode_and_no_memory(home: Home) -> None:
    done = home.remembering.remember("We shipped 2.0 today", route("episodic", confidence="medium"))
    assert done.memory_id is None and home.memory_count() == 0
    episode = home.episodes.remove(done.episode_id)
    assert (episode.content, episode.type, episode.confidence) == ("We shipped 2.0 today", "event", "medium")


def test_a_procedural_route_saves_the_steps_and_never_overwrites_a_procedure(home: Home) -> None:
    text = "To release, first run the tests, then tag the version; then push the tag"
    first = home.remembering.remember(text, route("procedural", summary="How to release"))
    second = home.remembering.remember(text, route("procedural", summary="How to release"))
    assert (first.procedure, second.procedure) == ("How to release", "How to release (2)")
    steps = home.procedures.get("How to release").steps
    assert steps == ["To release, first run the tests", "Tag the version", "Push the tag"]


def test_a_core_route_adds_a_line_to_the_block_it_belongs_to(home: Home) -> None:
    done = home.remembering.remember("My name is Dana and I work at Acme", route("core", summary="Dana, works at Acme"))
    assert done.core_line == "Identity: Dana, works at Acme" and done.memory_id is None
    assert "Dana, works at Acme" in home.core.read("Identity").text
    now = home.remembering.remember("We are in the launch week", route("semantic", core_update=True, summary="Launch"))
    assert now.memory_id and now.core_line == "Active Context: Launch"


def test_rules_route_without_a_model(home: Home) -> None:
    done = home.remembering.remember("Always remember that Bob is allergic to peanuts")
    assert (done.driver, done.store, done.route.confidence) == ("rules", "vault", "high")
    assert home.memory.get(done.memory_id).pinned and "Bob" in done.entities


# ---------------------------------------------------------------------------------------------- all or nothing
def test_a_core_line_over_its_cap_writes_nothing_at_all(settings: Settings) -> None:
    home = open_home(settings.model_copy(update={"encode_driver": "rules", "core_identity_tokens": 5}))
    try:
        long = "a pilot who flies long routes over the northern sea every week"
        with pytest.raises(InvalidInputError, match="over its cap"):
            home.remembering.remember("I am a pilot", route("core", summary=long, entities=[{"name": "Pilots"}]))
        assert home.memory_count() == 0 and home.episode_count() == 0
        assert home.graph.stats()["entities"] == 0
    finally:
        home.procedures.close()
        home.graph.close()
        home.memory.close()


def test_a_graph_that_fails_after_the_memory_undoes_the_memory_and_its_episode(home: Home) -> None:
    def broken() -> GraphService:
        raise OSError("the graph folder is gone")

    home.remembering._graph = broken
    answer = route("semantic", core_update=True, summary="Falcon ships", entities=[{"name": "Falcon"}])
    with pytest.raises(OSError):
        home.remembering.remember("Falcon ships on Friday", answer)
    assert home.memory_count() == 0 and home.episode_count() == 0
    assert "Falcon ships" not in home.core.read("Active Context").text


def test_a_bad_route_is_refused_before_anything_is_written(home: Home) -> None:
    for bad in (
        {"store": "attic", "summary": "x"},
        {"summary": "x"},
        route("semantic", relations=[{"from": "Ann", "relation": "knows", "to": "ann"}]),
        route("semantic", summary="   "),
    ):
        with pytest.raises(InvalidInputError):
            home.remembering.remember("Ann knows things", bad)
    assert home.memory_count() == 0 and home.episode_count() == 0


def test_tags_are_kept_between_two_and_five(home: Home) -> None:
    many = home.remembering.remember("a b", route("semantic", tags=["a1", "b2", "c3", "d4", "e5", "f6", "g7"]))
    assert home.memory.get(many.memory_id).tags == ["a1", "b2", "c3", "d4", "e5"]
    few = home.remembering.remember("c d", route("semantic", tags=[]))
    assert home.memory.get(few.memory_id).tags == ["remembered", "semantic"]


def test_parse_route_names_what_is_wrong() -> None:
    with pytest.raises(InvalidInputError, match="store"):
        parse_route({"summary": "x"})
    assert parse_route('{"store": "episodic", "summary": "s"}').store == "episodic"


# ---------------------------------------------------------------------------------------------- drivers
def test_the_agent_driver_returns_the_task_and_writes_nothing(settings: Settings) -> None:
    home = open_home(settings.model_copy(update={"encode_driver": "agent"}))
    try:
        done = home.remembering.remember("My flight is at 9")
        assert done.store is None and done.task is not None and done.task.text == "My flight is at 9"
        assert set(done.task.answer_schema["properties"]) >= {"store", "entities", "relations", "tags", "summary"}
        assert home.memory_count() == 0 and home.episode_count() == 0
    finally:
        home.procedures.close()
        home.graph.close()
        home.memory.close()


def test_a_sampled_answer_is_used_and_a_bad_one_falls_back_to_rules(settings: Settings) -> None:
    home = open_home(settings)  # auto, no server model: the tool hands in the client's model's answer
    try:
        good = home.remembering.remember("We met Carol", sampled=json.dumps(route("episodic", summary="Met Carol")))
        assert (good.driver, good.store) == ("sampling", "episodic")
        bad = home.remembering.remember("Carol likes jazz", sampled="I think it is a fact")
        assert bad.driver == "rules" and "client's model" in bad.note and bad.memory_id
        plain = home.remembering.remember("Dan likes jazz")  # no sample offered: rules
        assert plain.driver == "rules"
    finally:
        home.procedures.close()
        home.graph.close()
        home.memory.close()


@pytest.fixture
def chat_server() -> Iterator[EmbeddingServer]:
    scripted = EmbeddingServer()
    yield scripted
    scripted.close()


def test_the_servers_model_routes_and_a_failure_falls_back_to_rules(settings: Settings, chat_server) -> None:
    configured = settings.model_copy(
        update={"llm_endpoint": chat_server.url, "llm_model": "router-1", "llm_retries": 0, "llm_timeout_s": 5}
    )
    home = open_home(configured)
    try:
        chat_server.replies = [chat(route("procedural", summary="Deploy steps", tags=["deploy", "ops"]))]
        done = home.remembering.remember("To deploy: build, then push")
        assert (done.driver, done.store, done.procedure) == ("llm", "procedural", "Deploy steps")
        body = chat_server.requests[-1][0]
        assert body["model"] == "router-1" and "To deploy: build, then push" in body["messages"][1]["content"]
        chat_server.replies = [chat("not json at all")]
        fallback = home.remembering.remember("Eve prefers email")
        assert fallback.driver == "rules" and "server's model" in fallback.note and fallback.memory_id
    finally:
        home.procedures.close()
        home.graph.close()
        home.memory.close()


def test_an_entity_type_that_is_no_word_becomes_concept(home: Home) -> None:
    answer = route("semantic", entities=[{"name": "Orion", "type": "Space Ship!"}, {"name": "Vega", "type": "star"}])
    done = home.remembering.remember("Orion flies past Vega", answer)
    assert sorted(done.entities) == ["Orion", "Vega"]
    assert (home.graph.resolve("Orion").type, home.graph.resolve("Vega").type) == ("concept", "star")


# ---------------------------------------------------------------------------------------------- found by review
def test_a_models_route_a_store_refuses_falls_back_so_the_text_is_kept(settings: Settings) -> None:
    home = open_home(settings)
    try:
        selfish = route("semantic", summary="Anna", relations=[{"from": "Anna", "relation": "is", "to": "anna"}])
        done = home.remembering.remember("Anna is Anna", sampled=json.dumps(selfish))
        assert (done.driver, done.store) == ("rules", "semantic") and "links an entity to itself" in done.note
        assert home.memory.get(done.memory_id).content == "Anna is Anna"
    finally:
        home.procedures.close()
        home.graph.close()
        home.memory.close()


def test_a_rules_core_route_the_core_refuses_becomes_a_memory(home: Home) -> None:
    done = home.remembering.remember("## my name is Bob")
    assert done.store == "semantic" and done.core_line is None and "kept by rules" in done.note
    assert home.memory.get(done.memory_id).content == "## my name is Bob"


def test_a_core_line_already_there_is_not_written_twice_nor_undone(home: Home) -> None:
    first = home.remembering.remember("My name is Bob Okafor", route("core", summary="Bob Okafor"))
    second = home.remembering.remember("My name is Bob Okafor", route("core", summary="Bob Okafor"))
    assert first.core_line == second.core_line == "Identity: Bob Okafor"
    lines = next(b.lines for b in home.core.read("Identity").blocks if b.name == "Identity")
    assert [line for line in lines if line.strip() == "Bob Okafor"] == ["Bob Okafor"]


def test_a_route_over_its_caps_is_refused(home: Home) -> None:
    with pytest.raises(InvalidInputError, match="route"):
        home.remembering.remember("x", route("semantic", summary="s" * 501))
    with pytest.raises(InvalidInputError, match="route"):
        home.remembering.remember("x", route("semantic", entities=[{"name": f"E{i}"} for i in range(51)]))
