"""Graph salience: entities and triples are reinforced on each kind of use (at most once per interval), shown
with uses, salience and tier, kept across a restart by the access log (never by rewriting their files), linked
by new memories off the save path, and recall prefers the more salient facts within a hop."""

from __future__ import annotations

import math
from datetime import timedelta
from pathlib import Path

import pytest

from rockmem_mcp.config import Settings
from rockmem_mcp.graph.service import ENTITY_BASE, GraphService, NewEntries
from rockmem_mcp.memory.service import MemoryService
from rockmem_mcp.reinforcement import Reinforcer
from rockmem_mcp.search.salience import TYPE_WEIGHTS
from tests.unit.helpers import FakeClock, Opener

MINUTE = timedelta(minutes=1)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(step=timedelta(0))  # time moves only when a test moves it


def triple(subject: str, obj: str, confidence: float = 1.0, predicate: str = "knows") -> dict[str, object]:
    return {"subject": subject, "predicate": predicate, "object": obj, "confidence": confidence}


def entity_uses(graph: GraphService, name: str) -> int:
    return graph.get_entity(name).entity.reinforcement_count


def graph_files(settings: Settings) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in settings.graph_dir.rglob("*.json")}


def test_each_kind_of_use_counts_once_a_minute_and_writes_no_file(
    graph: GraphService, settings: Settings, clock: FakeClock
) -> None:
    [added] = graph.add_triples([triple("Alice", "Bob")]).triples
    assert added.fact.reinforcement_count == 1 and entity_uses(graph, "Alice") == 1  # creation: the first use
    files = graph_files(settings)
    expected = 1
    for use in (
        lambda: graph.get_entity("Alice", reinforce=True),
        lambda: graph.find_entities("alice", reinforce=True),
        lambda: graph.recall_facts("what does alice do?"),
        lambda: graph.link("Alice called about the invoice"),
    ):
        clock.now += MINUTE
        use()
        expected += 1
        assert entity_uses(graph, "Alice") == expected
        use()  # within the minute: not counted again
        assert entity_uses(graph, "Alice") == expected
    assert graph_files(settings) == files  # reinforcement is in the access log only

    clock.now += MINUTE
    graph.get_entity("Alice")  # a read that is not a use (no reinforce): the dream, the resource
    graph.find_entities(reinforce=True)  # a listing without a query is not a use either
    graph.traverse("Alice")
    assert entity_uses(graph, "Alice") == expected
    assert graph.traverse("Alice").facts[0].reinforcement_count == 2  # the recall above
    facts = graph.traverse("Alice", reinforce=True).facts
    assert facts[0].reinforcement_count == 3 and facts[0].last_seen_at is not None


def test_adding_a_triple_reinforces_existing_ends_and_a_fact_said_again(graph: GraphService, clock: FakeClock) -> None:
    graph.add_entities([{"name": "Alice"}])
    clock.now += MINUTE
    added = graph.add_triples([triple("Alice", "Bob"), triple("Bob", "Carol")])
    assert added.created_entities == ["Bob", "Carol"]
    assert [entity_uses(graph, n) for n in ("Alice", "Bob", "Carol")] == [2, 1, 1]  # new ones: created, not used
    clock.now += MINUTE
    again = graph.add_triples([triple("Alice", "Bob", 0.5)])
    assert again.triples[0].created is False and again.triples[0].fact.reinforcement_count == 2
    assert [entity_uses(graph, n) for n in ("Alice", "Bob", "Carol")] == [3, 2, 1]


def test_uses_survive_a_restart_through_the_access_log(opener: Opener, settings: Settings, clock: FakeClock) -> None:
    first = GraphService(settings, clock=clock)
    first.add_triples([triple("Alice", "Bob")])
    files = graph_files(settings)
    clock.now += MINUTE
    first.get_entity("Alice", reinforce=True)
    fact_id = first.recall_facts("alice")[1][0].id
    first.close()  # its own reinforcer (a graph opened alone) writes the log at close
    assert graph_files(settings) == files
    reopened = opener()
    assert entity_uses(reopened, "Alice") == 2 and reopened.fact(fact_id).reinforcement_count == 2


def test_a_shared_reinforcer_is_used_and_left_open(settings: Settings, clock: FakeClock) -> None:
    reinforcer = Reinforcer(settings, None, clock)
    graph = GraphService(settings, clock=clock, reinforcer=reinforcer)
    graph.add_entities([{"name": "Alice"}])
    clock.now += MINUTE
    graph.get_entity("Alice", reinforce=True)
    assert reinforcer.accesses("entity")[graph.resolve("Alice").id].count == 2
    graph.close()
    assert reinforcer.use("entity", {}) == {}  # still usable: the memory store closes it


def test_salience_and_tier_follow_the_model(graph: GraphService, clock: FakeClock, settings: Settings) -> None:
    graph.add_triples([triple("Alice", "Bob", 0.5)])
    detail = graph.get_entity("Alice")
    assert detail.salience == pytest.approx(ENTITY_BASE * TYPE_WEIGHTS["semantic"], abs=1e-4)
    assert detail.tier == "active"
    fact = detail.facts[0]
    assert fact.salience == pytest.approx(ENTITY_BASE * 0.5 * TYPE_WEIGHTS["semantic"], abs=1e-4)
    assert fact.tier == "fading"
    clock.now += timedelta(days=30)
    [hit] = graph.find_entities("alice").results
    expected = ENTITY_BASE * math.exp(-settings.salience_lambda * 30) * TYPE_WEIGHTS["semantic"]
    assert hit.salience == pytest.approx(expected, abs=1e-4) and hit.tier == "fading"


def test_recall_prefers_the_more_salient_facts_within_a_hop(graph: GraphService, clock: FakeClock) -> None:
    graph.add_triples([triple("Hub", f"Leaf{i:02d}") for i in range(20)])
    clock.now += MINUTE
    graph.traverse("Leaf17", max_hops=1, reinforce=True)  # Hub -> Leaf17 used; the rest as old and as sure
    graph.traverse("Leaf18", max_hops=1, reinforce=True)
    _, facts = graph.recall_facts("tell me about hub")
    assert len(facts) == 15
    assert {f.object for f in facts[:2]} == {"Leaf17", "Leaf18"}  # by confidence and age alone: any two


def test_recall_keeps_the_nearest_hop_first(graph: GraphService, clock: FakeClock) -> None:
    graph.add_triples([triple("Alice", "Bob", 0.2), triple("Bob", "Carol")])
    clock.now += MINUTE
    graph.traverse("Carol", max_hops=1, reinforce=True)
    _, facts = graph.recall_facts("alice")
    assert [(f.object, f.hop) for f in facts] == [("Bob", 1), ("Carol", 2)]


def test_a_saved_memory_naming_an_entity_reinforces_it_off_the_save_path(settings: Settings, clock: FakeClock) -> None:
    memory = MemoryService(settings, clock=clock, embed_in_background=False)
    try:
        new_entries = NewEntries()
        memory.save_listeners.append(new_entries.saved)
        graph = GraphService(settings, clock=clock, reinforcer=memory.reinforcer, new_entries=new_entries)
        graph.add_triples([triple("Rock Bot", "Python"), triple("Alice", "Rock Bot")])
        clock.now += MINUTE
        memory.save("Alice said rock bot ships on Friday; rockbotics is unrelated")
        new_entries.wait()  # matched by the graph's own thread
        assert [entity_uses(graph, n) for n in ("Alice", "Rock Bot", "Python")] == [2, 2, 1]
        graph.close()  # stops its thread; the memory store's reinforcer stays open
        memory.save("Python again")  # nobody matches it now; the save neither waits nor fails
    finally:
        memory.close()
