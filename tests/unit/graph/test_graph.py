"""The knowledge graph: entities and names, triples, search, traversal, delete and merge, files on disk,
two instances on one home (standing for two processes), recall's mention matching, and a random-sequence
check against a small model."""

from __future__ import annotations

import json
import logging
import math
import random
import unicodedata
from datetime import timedelta
from typing import Any

import pytest

from rockmem_mcp.config import Settings
from rockmem_mcp.errors import InvalidInputError, NotFoundError
from rockmem_mcp.graph.service import MAX_ITEMS, GraphService
from rockmem_mcp.graph.shapes import normalize_entity_type, normalize_predicate
from rockmem_mcp.models import mention_key, name_key, normalize_name
from tests.unit.helpers import T0, FakeClock, Opener


def files_in(settings: Settings, kind: str) -> list[str]:
    """Every file under knowledge-graph/{kind}/, by name, sorted (temp files would show: none should linger)."""
    folder = settings.graph_dir / kind
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def on_disk(settings: Settings, kind: str, record_id: str) -> dict[str, Any]:
    return json.loads((settings.graph_dir / kind / f"{record_id}.json").read_text())


def add(graph: GraphService, subject: str, predicate: str, obj: str, confidence: float = 1.0) -> str:
    """Add one triple; its id."""
    item = {"subject": subject, "predicate": predicate, "object": obj, "confidence": confidence}
    return graph.add_triples([item]).triples[0].fact.id


def snapshot(graph: GraphService) -> tuple[dict[str, Any], dict[str, Any]]:
    return (
        {i: e.model_dump() for i, e in graph.entities.items()},
        {i: t.model_dump() for i, t in graph.triples.items()},
    )


# ---------------------------------------------------------------------------------------------- normalisation
@pytest.mark.parametrize("raw", ["works on", "worksOn", "Works-On", "  works__on  ", "WORKS ON", "works.on!"])
def test_predicates_become_snake_case(raw: str) -> None:
    assert normalize_predicate(raw) == "works_on"


@pytest.mark.parametrize("raw", ["a\u0301ime", "áime", "Áime", "\u200báime\u202e"])
def test_unicode_twins_of_a_predicate_are_one(raw: str) -> None:
    assert normalize_predicate(raw) == "áime"


@pytest.mark.parametrize("raw", ["", "   ", "!!!", "x" * 101, 5, None])
def test_predicates_that_say_nothing_are_refused(raw: object) -> None:
    with pytest.raises(InvalidInputError, match="predicate"):
        normalize_predicate(raw)


def test_names_are_trimmed_and_compared_case_insensitively() -> None:
    assert normalize_name("  Rock \t  Bot ") == "Rock Bot"
    assert name_key("ROCK   bot") == name_key("rock bot") == "rock bot"
    assert mention_key("Node.js") == "node js"
    assert normalize_entity_type(None) == "concept"
    assert normalize_entity_type(" Person ") == "person"
    with pytest.raises(InvalidInputError, match="control characters"):
        normalize_name("Al\x00ice")
    with pytest.raises(InvalidInputError, match="entity type"):
        normalize_entity_type("Not a type!")


# ---------------------------------------------------------------------------------------------- entities
def test_added_entities_get_one_file_each(graph: GraphService, settings: Settings) -> None:
    result = graph.add_entities(
        [
            {"name": "  Alice  ", "type": "Person", "aliases": ["Al"], "metadata": {"team": "core", "age": "41"}},
            {"name": "RockBot"},
        ]
    )
    alice, rockbot = (a.entity for a in result.entities)
    assert [a.created for a in result.entities] == [True, True]
    assert (alice.name, alice.type, alice.aliases, alice.metadata) == (
        "Alice",
        "person",
        ["Al"],
        {"team": "core", "age": "41"},
    )
    assert rockbot.type == "concept" and alice.created_at == T0 and rockbot.created_at > alice.created_at
    assert files_in(settings, "entities") == sorted([f"{alice.id}.json", f"{rockbot.id}.json"])
    assert on_disk(settings, "entities", alice.id)["aliases"] == ["Al"]
    assert graph.get_entity(alice.id).entity == alice


def test_an_existing_name_or_alias_returns_that_entity_not_a_twin(graph: GraphService, settings: Settings) -> None:
    alice = graph.add_entities([{"name": "Alice", "type": "person", "aliases": ["Al"]}]).entities[0].entity
    again = graph.add_entities([{"name": "ALICE", "type": "project"}]).entities[0]
    assert not again.created and again.entity.id == alice.id and again.entity.type == "person"
    by_alias = graph.add_entities([{"name": "al", "aliases": ["Ally", "ally", "Alice"]}]).entities[0]
    assert not by_alias.created and by_alias.entity.id == alice.id
    assert by_alias.entity.aliases == ["Al", "Ally"]  # new aliases added once, names already known skipped
    assert on_disk(settings, "entities", alice.id)["aliases"] == ["Al", "Ally"]
    assert files_in(settings, "entities") == [f"{alice.id}.json"]
    assert graph.resolve("ALLY").id == alice.id


def test_the_same_name_twice_in_one_call_is_one_entity(graph: GraphService, settings: Settings) -> None:
    first, second = graph.add_entities([{"name": "Bob"}, {"name": "bob", "metadata": {"role": "dev"}}]).entities
    assert first.created and not second.created and first.entity.id == second.entity.id
    assert second.entity.metadata == {"role": "dev"}
    assert len(files_in(settings, "entities")) == 1


def test_aliases_owned_by_another_entity_are_reported_not_taken(graph: GraphService) -> None:
    graph.add_entities([{"name": "Alice"}, {"name": "Bob", "aliases": ["Bobby"]}])
    added = graph.add_entities([{"name": "Alice", "aliases": ["bobby", "Ali", "BOB"]}]).entities[0]
    assert added.ignored_aliases == ["bobby", "BOB"] and added.entity.aliases == ["Ali"]
    assert graph.resolve("Bobby").name == "Bob" and graph.resolve("bob").name == "Bob"


def test_re_adding_merges_metadata_new_values_winning(graph: GraphService, settings: Settings) -> None:
    alice = graph.add_entities([{"name": "Alice", "metadata": {"team": "core", "city": "Oslo"}}]).entities[0].entity
    again = graph.add_entities([{"name": "alice", "metadata": {"team": "infra"}}]).entities[0].entity
    assert again.metadata == {"team": "infra", "city": "Oslo"}
    assert on_disk(settings, "entities", alice.id)["metadata"] == {"team": "infra", "city": "Oslo"}


def test_resolve_by_name_alias_or_id_in_any_case(graph: GraphService) -> None:
    alice = graph.add_entities([{"name": "Alice Smith", "aliases": ["A. Smith"]}]).entities[0].entity
    for label in ("alice smith", "ALICE   SMITH", "a. smith", alice.id):
        assert graph.resolve(label).id == alice.id
    with pytest.raises(NotFoundError, match="graph find lists what exists"):
        graph.resolve("Alicia")


@pytest.mark.parametrize(
    ("items", "message"),
    [
        ("Alice", "non-empty list"),
        ({"name": "Alice"}, "non-empty list"),
        ([], "non-empty list"),
        ([{"name": f"E{i}"} for i in range(MAX_ITEMS + 1)], "at most 1000"),
        (["Alice"], "object"),
        ([{"type": "person"}], "name must be text"),
        ([{"name": "   "}], "invalid name"),
        ([{"name": "Al\x00ice"}], "control characters"),
        ([{"name": "Esc\x1b[31m"}], "control characters"),
        ([{"name": "x" * 201}], "1-200 characters"),
        ([{"name": "Alice", "type": "Not a type!"}], "entity type"),
        ([{"name": "Alice", "type": 3}], "entity type"),
        ([{"name": "Alice", "aliases": "Al"}], "aliases"),
        ([{"name": "Alice", "aliases": [f"a{i}" for i in range(51)]}], "at most 50"),
        ([{"name": "Alice", "aliases": [""]}], "invalid alias"),
        ([{"name": "Alice", "aliases": [7]}], "alias must be text"),
        ([{"name": "Alice", "metadata": ["team", "core"]}], "metadata"),
        ([{"name": "Alice", "metadata": {"age": 41}}], "must map strings to strings"),
        ([{"name": "Alice", "metadata": {"blob": "x" * 20_000}}], "ROCKMEM_MAX_METADATA_BYTES"),
    ],
)
def test_bad_entities_are_refused_and_nothing_is_written(
    graph: GraphService, settings: Settings, items: Any, message: str
) -> None:
    with pytest.raises(InvalidInputError, match=message):
        graph.add_entities([{"name": "Zed"}, *items] if isinstance(items, list) and items else items)
    assert graph.entities == {} and files_in(settings, "entities") == []


# ---------------------------------------------------------------------------------------------- triples
def test_triples_resolve_their_ends_and_create_missing_entities(graph: GraphService, settings: Settings) -> None:
    alice = graph.add_entities([{"name": "Alice", "type": "person", "aliases": ["Al"]}]).entities[0].entity
    result = graph.add_triples(
        [{"subject": "al", "predicate": "Works On", "object": "RockBot", "confidence": 0.9, "source": "user"}]
    )
    added = result.triples[0]
    rockbot = graph.resolve("rockbot")
    assert added.created and result.created_entities == ["RockBot"] and rockbot.type == "concept"
    fact = added.fact
    assert (fact.subject, fact.predicate, fact.object, fact.confidence, fact.source) == (
        "Alice",
        "works_on",
        "RockBot",
        0.9,
        "user",
    )
    assert (fact.subject_id, fact.object_id) == (alice.id, rockbot.id)
    assert fact.line() == "- Alice --works_on--> RockBot (confidence=0.90)"
    stored = on_disk(settings, "triples", fact.id)
    assert (stored["subject"], stored["predicate"], stored["object"]) == (alice.id, "works_on", rockbot.id)
    assert files_in(settings, "entities") == sorted([f"{alice.id}.json", f"{rockbot.id}.json"])
    by_id = graph.add_triples([{"subject": alice.id, "predicate": "likes", "object": rockbot.id}])
    assert by_id.created_entities == [] and by_id.triples[0].fact.object_id == rockbot.id


@pytest.mark.parametrize(("given", "stored"), [(1.7, 1.0), (-0.3, 0.0), (1, 1.0), (0, 0.0), (None, 1.0), (0.25, 0.25)])
def test_confidence_is_clamped_to_zero_to_one(graph: GraphService, given: Any, stored: float) -> None:
    fact = graph.add_triples([{"subject": "A1", "predicate": "p", "object": "B1", "confidence": given}]).triples[0].fact
    assert fact.confidence == stored and graph.triples[fact.id].confidence == stored


def test_confidence_defaults_to_one(graph: GraphService) -> None:
    fact = graph.add_triples([{"subject": "A1", "predicate": "p", "object": "B1"}]).triples[0].fact
    assert fact.confidence == 1.0


def test_the_same_triple_again_keeps_one_with_the_higher_confidence(graph: GraphService, settings: Settings) -> None:
    graph.add_entities([{"name": "Alice", "aliases": ["Al"]}])
    first = graph.add_triples([{"subject": "Alice", "predicate": "works on", "object": "RockBot", "confidence": 0.4}])
    triple_id = first.triples[0].fact.id
    higher = graph.add_triples([{"subject": "al", "predicate": "worksOn", "object": "ROCKBOT", "confidence": 0.8}])
    assert not higher.triples[0].created and higher.triples[0].fact.id == triple_id
    assert higher.triples[0].fact.confidence == 0.8 and higher.created_entities == []
    lower = graph.add_triples([{"subject": "Alice", "predicate": "Works-On", "object": "RockBot", "confidence": 0.1}])
    assert lower.triples[0].fact.confidence == 0.8
    assert files_in(settings, "triples") == [f"{triple_id}.json"]
    assert on_disk(settings, "triples", triple_id)["confidence"] == 0.8
    reverse = graph.add_triples([{"subject": "RockBot", "predicate": "works_on", "object": "Alice"}])
    assert reverse.triples[0].created  # direction matters


def test_a_later_source_fills_a_missing_one(graph: GraphService) -> None:
    triple_id = add(graph, "Alice", "knows", "Bob", 0.5)
    graph.add_triples([{"subject": "Alice", "predicate": "knows", "object": "Bob", "confidence": 0.5, "source": "m1"}])
    assert graph.triples[triple_id].source == "m1"


@pytest.mark.parametrize(
    "loop",
    [
        {"subject": "Alice", "predicate": "knows", "object": "alice"},
        {"subject": "Alice", "predicate": "knows", "object": "Al"},  # by alias
        {"subject": "Carol", "predicate": "knows", "object": "CAROL"},  # created, then met again
    ],
)
def test_a_triple_from_an_entity_to_itself_fails_the_whole_call(
    opener: Opener, settings: Settings, loop: dict[str, str]
) -> None:
    graph = opener()
    graph.add_entities([{"name": "Alice", "aliases": ["Al"]}, {"name": "Bob"}])
    kept = add(graph, "Alice", "knows", "Bob", 0.5)
    before, entity_files, triple_files = snapshot(graph), files_in(settings, "entities"), files_in(settings, "triples")
    watcher = opener()  # another process: nothing may reach it either
    batch = [
        {"subject": "Alice", "predicate": "knows", "object": "Bob", "confidence": 0.9},  # would raise 0.5
        {"subject": "Dave", "predicate": "likes", "object": "Zed"},  # would create two entities
        loop,
    ]
    with pytest.raises(InvalidInputError, match="same entity"):
        graph.add_triples(batch)
    assert snapshot(graph) == before
    assert files_in(settings, "entities") == entity_files and files_in(settings, "triples") == triple_files
    assert on_disk(settings, "triples", kept)["confidence"] == 0.5
    for name in ("Dave", "Zed", "Carol"):
        with pytest.raises(NotFoundError):
            graph.resolve(name)
    assert graph.find_entities("dave").results == []
    watcher.stats()  # catches up with the journal
    assert snapshot(watcher) == before and snapshot(opener()) == before
    assert graph.traverse("Alice").facts[0].confidence == 0.5  # the adjacency index was rolled back too


@pytest.mark.parametrize(
    ("items", "message"),
    [
        ("Alice knows Bob", "non-empty list"),
        ([], "non-empty list"),
        ([{"subject": f"A{i}", "predicate": "p", "object": "B"} for i in range(MAX_ITEMS + 1)], "at most 1000"),
        ([["Alice", "knows", "Bob"]], "object"),
        ([{"predicate": "knows", "object": "Bob"}], "subject must be text"),
        ([{"subject": "  ", "predicate": "knows", "object": "Bob"}], "invalid subject"),
        ([{"subject": "Alice", "predicate": "knows", "object": "B\x07ob"}], "control characters"),
        ([{"subject": "Alice", "predicate": "", "object": "Bob"}], "predicate"),
        ([{"subject": "Alice", "predicate": 4, "object": "Bob"}], "predicate must be text"),
        ([{"subject": "Alice", "predicate": "knows", "object": "Bob", "confidence": math.nan}], "confidence"),
        ([{"subject": "Alice", "predicate": "knows", "object": "Bob", "confidence": "0.5"}], "confidence"),
        ([{"subject": "Alice", "predicate": "knows", "object": "Bob", "confidence": True}], "confidence"),
        ([{"subject": "Alice", "predicate": "knows", "object": "Bob", "source": 12}], "source must be text"),
        ([{"subject": "Alice", "predicate": "knows", "object": "Bob", "source": "s" * 1001}], "source"),
    ],
)
def test_bad_triples_are_refused_and_nothing_is_written(
    graph: GraphService, settings: Settings, items: Any, message: str
) -> None:
    good = {"subject": "Xavier", "predicate": "knows", "object": "Yolanda"}
    with pytest.raises(InvalidInputError, match=message):
        graph.add_triples([good, *items] if isinstance(items, list) and items else items)
    assert graph.entities == {} and graph.triples == {}
    assert files_in(settings, "entities") == [] and files_in(settings, "triples") == []


def test_get_entity_lists_outgoing_then_incoming(graph: GraphService) -> None:
    add(graph, "Alice", "works_on", "RockBot", 0.5)
    add(graph, "Alice", "knows", "Bob", 0.9)
    add(graph, "Carol", "mentors", "Alice", 1.0)
    detail = graph.get_entity("alice")
    assert [(f.subject, f.predicate, f.object) for f in detail.facts] == [
        ("Alice", "knows", "Bob"),
        ("Alice", "works_on", "RockBot"),
        ("Carol", "mentors", "Alice"),
    ]
    with pytest.raises(NotFoundError):
        graph.get_entity("Nobody")


# ---------------------------------------------------------------------------------------------- find
def test_find_ranks_word_matches_then_names_containing_the_query(graph: GraphService) -> None:
    graph.add_entities(
        [
            {"name": "RockBot", "type": "project"},
            {"name": "Rock climbing", "type": "topic"},
            {"name": "Rockefeller Center", "type": "place"},
            {"name": "Jazz", "type": "topic"},
        ]
    )
    found = graph.find_entities("rock")
    names = [h.entity.name for h in found.results]
    assert names == ["Rock climbing", "RockBot", "Rockefeller Center"] and found.total_matches == 3
    word, *partial = found.results
    assert word.score is not None and word.score > 0
    assert all(h.score is not None and 0 < h.score < 1 for h in partial)
    assert partial[0].score > partial[1].score  # closer in length to the query first
    assert [h.entity.name for h in graph.find_entities("rock", limit=1).results] == ["Rock climbing"]


def test_find_searches_aliases_and_metadata_and_counts_triples(graph: GraphService) -> None:
    graph.add_entities([{"name": "Alice", "aliases": ["Ally"], "metadata": {"team": "platform"}}, {"name": "Bob"}])
    add(graph, "Alice", "knows", "Bob")
    for query in ("ally", "platform", "ALICE"):
        hits = graph.find_entities(query).results
        assert [h.entity.name for h in hits] == ["Alice"] and hits[0].triples == 1


def test_find_filters_by_type(graph: GraphService) -> None:
    graph.add_entities(
        [{"name": "Python", "type": "tool"}, {"name": "Python course", "type": "event"}, {"name": "Pythonista"}]
    )
    assert [h.entity.name for h in graph.find_entities("python", entity_type="Tool").results] == ["Python"]
    assert [h.entity.name for h in graph.find_entities("pyth", entity_type="concept").results] == ["Pythonista"]
    assert [h.entity.name for h in graph.find_entities(entity_type="event").results] == ["Python course"]
    with pytest.raises(InvalidInputError, match="entity type"):
        graph.find_entities("python", entity_type="no such type!")


def test_find_without_a_query_lists_the_newest_first(graph: GraphService) -> None:
    for name in ("First", "Second", "Third", "Fourth"):
        graph.add_entities([{"name": name}])
    listed = graph.find_entities(limit=3)
    assert [h.entity.name for h in listed.results] == ["Fourth", "Third", "Second"]
    assert listed.total_matches == 4 and all(h.score is None for h in listed.results)
    assert graph.find_entities("zebra").results == []


@pytest.mark.parametrize("name", ["R", "The Who"])
def test_find_finds_an_entity_by_its_exact_name_even_if_it_has_no_searchable_words(
    graph: GraphService, name: str
) -> None:
    # 'R' is one letter and 'The Who' is all stopwords, so neither has a BM25 token; the spec's fallback,
    # names containing the query, should still find them.
    graph.add_entities([{"name": name, "type": "tool"}, {"name": "Rust", "type": "tool"}])
    assert [h.entity.name for h in graph.find_entities(name).results][:1] == [name]


# ---------------------------------------------------------------------------------------------- traverse
def test_traverse_goes_both_ways_breadth_first_with_hop_numbers(graph: GraphService) -> None:
    add(graph, "Alice", "works_on", "RockBot", 0.9)
    add(graph, "Bob", "works_on", "RockBot", 0.6)
    add(graph, "RockBot", "uses", "Python", 0.8)
    add(graph, "Python", "created_by", "Guido", 1.0)  # three hops from Alice
    walk = graph.traverse("alice")
    assert walk.start.name == "Alice" and not walk.truncated
    assert [(f.hop, f.subject, f.predicate, f.object) for f in walk.facts] == [
        (1, "Alice", "works_on", "RockBot"),
        (2, "RockBot", "uses", "Python"),
        (2, "Bob", "works_on", "RockBot"),
    ]
    assert walk.entities_reached == 4
    three = graph.traverse("Alice", max_hops=3)
    assert [f.object for f in three.facts if f.hop == 3] == ["Guido"]
    from_guido = graph.traverse("Guido", max_hops=1)  # incoming edges are followed too
    assert [(f.subject, f.object) for f in from_guido.facts] == [("Python", "Guido")]


def test_traverse_visits_each_triple_once_and_stops_at_cycles(graph: GraphService) -> None:
    ab = add(graph, "A1", "next", "B1", 0.9)
    bc = add(graph, "B1", "next", "C1", 0.8)
    ca = add(graph, "C1", "next", "A1", 0.7)
    ba = add(graph, "B1", "back", "A1", 0.6)
    walk = graph.traverse("A1", max_hops=5, limit=50)
    assert sorted(f.id for f in walk.facts) == sorted([ab, bc, ca, ba])
    assert [(f.id, f.hop) for f in walk.facts] == [(ab, 1), (ca, 1), (ba, 1), (bc, 2)]
    assert walk.entities_reached == 3 and not walk.truncated


def test_traverse_puts_higher_confidence_first_and_says_when_the_limit_cut_it(graph: GraphService) -> None:
    for leaf, confidence in [("L1", 0.3), ("L2", 0.9), ("L3", 0.5), ("L4", 1.0), ("L5", 0.7)]:
        add(graph, "Hub", "links", leaf, confidence)
    cut = graph.traverse("Hub", limit=3)
    assert [f.confidence for f in cut.facts] == [1.0, 0.9, 0.7] and cut.truncated
    whole = graph.traverse("Hub", limit=5)
    assert [f.confidence for f in whole.facts] == [1.0, 0.9, 0.7, 0.5, 0.3] and not whole.truncated


def test_truncated_when_the_limit_is_met_exactly_and_the_next_hop_had_more(graph: GraphService) -> None:
    add(graph, "Hub", "links", "L1")
    add(graph, "Hub", "links", "L2")
    add(graph, "L1", "links", "Far")
    exact = graph.traverse("Hub", limit=2)
    assert len(exact.facts) == 2 and exact.truncated
    assert not graph.traverse("Hub", limit=3).truncated
    assert not graph.traverse("Hub", limit=2, max_hops=1).truncated


def test_traverse_skips_and_does_not_follow_triples_below_min_confidence(graph: GraphService) -> None:
    add(graph, "Alice", "knows", "Bob", 0.2)
    add(graph, "Bob", "knows", "Carol", 0.9)
    add(graph, "Alice", "likes", "Tea", 0.8)
    walk = graph.traverse("Alice", min_confidence=0.5)
    assert [(f.subject, f.object) for f in walk.facts] == [("Alice", "Tea")]


def test_traverse_refuses_bad_arguments(graph: GraphService) -> None:
    add(graph, "Alice", "knows", "Bob")
    with pytest.raises(InvalidInputError):
        graph.traverse("Alice", max_hops=0)
    with pytest.raises(InvalidInputError):
        graph.traverse("Alice", limit=0)
    with pytest.raises(NotFoundError):
        graph.traverse("Nobody")


# ---------------------------------------------------------------------------------------------- delete
def test_deleting_an_entity_deletes_its_triples_and_their_files(graph: GraphService, settings: Settings) -> None:
    graph.add_entities([{"name": "Alice", "aliases": ["Al"]}])
    add(graph, "Alice", "knows", "Bob")
    add(graph, "Carol", "mentors", "Alice")
    keep = add(graph, "Bob", "knows", "Carol")
    alice = graph.resolve("Alice")
    deleted = graph.delete_entity("al")
    assert deleted.entity.id == alice.id and deleted.triples_deleted == 2
    assert files_in(settings, "triples") == [f"{keep}.json"] and f"{alice.id}.json" not in files_in(
        settings, "entities"
    )
    assert list(graph.triples) == [keep] and [f.id for f in graph.get_entity("Bob").facts] == [keep]
    assert [f.id for f in graph.traverse("Bob", max_hops=3).facts] == [keep]
    assert graph.find_entities("alice").results == []
    with pytest.raises(NotFoundError):
        graph.resolve("Al")
    reborn = graph.add_entities([{"name": "Alice"}]).entities[0]  # the name is free again
    assert reborn.created and reborn.entity.id != alice.id
    with pytest.raises(NotFoundError):
        graph.delete_entity("Nobody")


def test_deleting_a_triple_keeps_its_entities(graph: GraphService, settings: Settings) -> None:
    triple_id = add(graph, "Alice", "knows", "Bob", 0.7)
    deleted = graph.delete_triple(triple_id)
    assert (deleted.fact.subject, deleted.fact.object, deleted.fact.confidence) == ("Alice", "Bob", 0.7)
    assert graph.triples == {} and files_in(settings, "triples") == []
    assert graph.get_entity("Alice").facts == [] and graph.resolve("Bob")
    for bad in (triple_id, "nope", 42):
        with pytest.raises(NotFoundError, match="no triple"):
            graph.delete_triple(bad)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------- merge
def test_merging_folds_names_triples_and_metadata_into_the_kept_entity(
    opener: Opener, settings: Settings, clock: FakeClock
) -> None:
    graph = opener()
    early = opener(FakeClock(T0 - timedelta(days=1)))
    gone = early.add_entities(
        [{"name": "Alice Smith", "aliases": ["A. Smith"], "metadata": {"team": "b", "email": "a@x"}}]
    ).entities[0]
    kept = graph.add_entities([{"name": "Alice", "aliases": ["Al"], "metadata": {"team": "a"}}]).entities[0].entity
    duplicate = add(graph, "Alice", "works_on", "RockBot", 0.6)
    add(graph, "Alice Smith", "works_on", "RockBot", 0.9)  # folds into `duplicate`, raising it to 0.9
    add(graph, "Alice Smith", "knows", "Bob", 0.7)
    add(graph, "Bob", "mentors", "A. Smith", 0.8)
    merged = graph.merge_entities("al", "alice smith")
    assert merged.merged_id == gone.entity.id and merged.triples_repointed == 2 and merged.duplicates_folded == 1
    entity = merged.entity
    assert entity.id == kept.id and entity.name == "Alice" and entity.aliases == ["Al", "Alice Smith", "A. Smith"]
    assert entity.metadata == {"team": "a", "email": "a@x"} and entity.created_at == gone.entity.created_at
    assert graph.resolve("a. smith").id == graph.resolve("ALICE SMITH").id == kept.id
    assert files_in(settings, "entities") == sorted(f"{e.id}.json" for e in graph.entities.values())
    assert f"{gone.entity.id}.json" not in files_in(settings, "entities")
    assert on_disk(settings, "entities", kept.id)["aliases"] == ["Al", "Alice Smith", "A. Smith"]
    facts = {(f.subject, f.predicate, f.object): f.confidence for f in graph.get_entity("Alice").facts}
    assert facts == {
        ("Alice", "works_on", "RockBot"): 0.9,
        ("Alice", "knows", "Bob"): 0.7,
        ("Bob", "mentors", "Alice"): 0.8,
    }
    assert graph.triples[duplicate].confidence == 0.9 and on_disk(settings, "triples", duplicate)["confidence"] == 0.9
    assert len(files_in(settings, "triples")) == len(graph.triples) == 3
    for triple_id in graph.triples:
        stored = on_disk(settings, "triples", triple_id)
        assert gone.entity.id not in (stored["subject"], stored["object"])
    with pytest.raises(NotFoundError):
        graph.get_entity(gone.entity.id)


def test_a_triple_between_the_two_merged_entities_is_dropped(graph: GraphService, settings: Settings) -> None:
    between = add(graph, "Alice", "same_person_as", "Alice Smith")
    back = add(graph, "Alice Smith", "knows", "Alice")
    other = add(graph, "Alice Smith", "likes", "Tea")
    merged = graph.merge_entities("Alice", "Alice Smith")
    assert merged.triples_repointed == 1
    assert between not in graph.triples and back not in graph.triples
    assert [(f.subject, f.object) for f in graph.get_entity("Alice").facts] == [("Alice", "Tea")]
    assert files_in(settings, "triples") == [f"{t}.json" for t in graph.triples] and other not in graph.triples
    assert all(t.subject != t.object for t in graph.triples.values())


def test_merging_an_entity_into_itself_or_an_unknown_one_is_refused(graph: GraphService) -> None:
    graph.add_entities([{"name": "Alice", "aliases": ["Al"]}, {"name": "Bob"}])
    with pytest.raises(InvalidInputError, match="same entity"):
        graph.merge_entities("Alice", "al")
    with pytest.raises(NotFoundError):
        graph.merge_entities("Alice", "Nobody")
    with pytest.raises(NotFoundError):
        graph.merge_entities("Nobody", "Bob")
    assert len(graph.entities) == 2


# ---------------------------------------------------------------------------------------------- files
def test_a_new_instance_loads_what_is_on_disk(opener: Opener) -> None:
    graph = opener()
    graph.add_entities([{"name": "Alice", "type": "person", "aliases": ["Al"]}])
    add(graph, "Al", "works_on", "RockBot", 0.9)
    reopened = opener()
    assert snapshot(reopened) == snapshot(graph)
    assert reopened.resolve("al").name == "Alice"
    assert [f.object for f in reopened.traverse("Alice").facts] == ["RockBot"]
    assert (
        not reopened.add_triples([{"subject": "alice", "predicate": "works on", "object": "rockbot"}])
        .triples[0]
        .created
    )


def test_malformed_files_are_skipped_with_a_warning_and_kept(
    opener: Opener, settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    graph = opener()
    add(graph, "Alice", "knows", "Bob")
    bad_entity, bad_triple = (
        settings.graph_dir / "entities" / "broken.json",
        settings.graph_dir / "triples" / "torn.json",
    )
    bad_entity.write_text('{"id": "broken", "name": ')
    bad_triple.write_text('{"id": "torn", "subject": "x", "predicate": "p", "object": "y", "confidence": 2}')
    with caplog.at_level(logging.WARNING):
        reopened = opener()
    warnings = " ".join(r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
    assert str(bad_entity) in warnings and str(bad_triple) in warnings
    assert snapshot(reopened) == snapshot(graph)
    add(reopened, "Alice", "likes", "Tea")
    reopened.delete_entity("Bob")
    assert bad_entity.exists() and bad_triple.exists()


def test_no_temp_files_or_strays_are_left_behind(graph: GraphService, settings: Settings) -> None:
    add(graph, "Alice", "knows", "Bob")
    add(graph, "Alice", "likes", "Tea")
    graph.merge_entities("Alice", "Bob")
    graph.delete_entity("Tea")
    assert files_in(settings, "entities") == [f"{i}.json" for i in graph.entities]
    assert files_in(settings, "triples") == []


# ---------------------------------------------------------------------------------------------- two processes
def test_two_instances_see_each_others_writes_on_their_next_call(opener: Opener) -> None:
    one, two = opener(), opener()
    alice = one.add_entities([{"name": "Alice", "aliases": ["Al"]}]).entities[0].entity
    assert two.resolve("al").id == alice.id
    again = two.add_entities([{"name": "ALICE", "aliases": ["Ally"]}]).entities[0]
    assert not again.created and again.entity.id == alice.id  # no twin across processes
    assert one.resolve("ally").id == alice.id
    triple_id = two.add_triples([{"subject": "Ally", "predicate": "works on", "object": "RockBot", "confidence": 0.4}])
    assert [f.id for f in one.traverse("Alice").facts] == [triple_id.triples[0].fact.id]
    one.add_triples([{"subject": "Alice", "predicate": "works_on", "object": "RockBot", "confidence": 0.8}])
    assert [f.confidence for f in two.get_entity("RockBot").facts] == [0.8] and len(two.triples) == 1
    assert [h.entity.name for h in two.find_entities("rockbot").results] == ["RockBot"]
    one.delete_entity("RockBot")
    assert two.get_entity("Alice").facts == [] and two.triples == {}
    with pytest.raises(NotFoundError):
        two.resolve("RockBot")
    assert two.stats() == one.stats() == {"entities": 1, "triples": 0}


def test_a_failed_call_in_one_instance_reaches_no_other(opener: Opener) -> None:
    one, two = opener(), opener()
    add(one, "Alice", "knows", "Bob")
    two.stats()
    journal = sorted((one.settings.index_dir / "graph").glob("changes-*.jsonl"))
    sizes = [p.stat().st_size for p in journal]
    with pytest.raises(InvalidInputError):
        one.add_triples(
            [
                {"subject": "Dave", "predicate": "p", "object": "Eve"},
                {"subject": "X1", "predicate": "p", "object": "x1"},
            ]
        )
    assert [p.stat().st_size for p in journal] == sizes  # nothing journaled
    assert two.stats() == {"entities": 2, "triples": 1}


def test_a_merge_in_one_instance_resolves_the_merged_names_in_the_other(opener: Opener) -> None:
    # The other instance applies the journal's records for the kept entity (rewritten) and the merged one
    # (removed). Repeated so that the outcome cannot depend on the order it happens to apply them in.
    one, two = opener(), opener()
    for i in range(16):
        one.add_entities([{"name": f"Keep{i}"}, {"name": f"Gone{i}", "aliases": [f"Gone alias {i}"]}])
        two.stats()  # caught up: knows both entities
        one.merge_entities(f"Keep{i}", f"Gone{i}")
        kept = one.resolve(f"Keep{i}").id
        assert two.resolve(f"Gone{i}").id == kept, f"round {i}: merged name lost in the other instance"
        assert two.resolve(f"gone alias {i}").id == kept


def test_a_triple_deleted_and_added_again_is_not_duplicated_by_the_other_instance(
    opener: Opener, settings: Settings
) -> None:
    # The other instance applies "old triple removed" and "new triple with the same (s, p, o) added" from the
    # journal; whatever the order, it must still know that (s, p, o) exists. Repeated for the same reason.
    one, two = opener(), opener()
    for i in range(16):
        old = add(one, f"Alice{i}", "knows", f"Bob{i}")
        two.stats()
        one.delete_triple(old)
        new = add(one, f"Alice{i}", "knows", f"Bob{i}")
        again = two.add_triples([{"subject": f"Alice{i}", "predicate": "knows", "object": f"Bob{i}"}]).triples[0]
        assert not again.created and again.fact.id == new, f"round {i}: a second copy of one triple"
    assert len(files_in(settings, "triples")) == 16


# ---------------------------------------------------------------------------------------------- recall's side
def test_mentions_are_whole_words_any_case_and_names_under_three_characters_are_skipped(graph: GraphService) -> None:
    graph.add_entities(
        [
            {"name": "Alice"},
            {"name": "AI"},
            {"name": "Node.js"},
            {"name": "New York"},
            {"name": "RockBot", "aliases": ["rb"]},
            {"name": "ML", "aliases": ["machine learning"]},
        ]
    )
    found = graph.mentioned("ALICE's AI moved to new   york; Node.js and Machine Learning, not Alicent or rb or rock")
    assert sorted(e.name for e in found) == ["Alice", "ML", "New York", "Node.js"]
    assert graph.mentioned("nothing here") == []


CAFE_NFC = "José Café"
CAFE_NFD = unicodedata.normalize("NFD", CAFE_NFC)


@pytest.mark.parametrize("twin", [CAFE_NFD, "JOSÉ CAFÉ", "José\u200b Café", "\u202eJosé Café\u202c", "Ｊｏｓé Ｃａｆé"])
def test_unicode_twins_of_a_name_are_one_entity(graph: GraphService, settings: Settings, twin: str) -> None:
    first = graph.add_entities([{"name": CAFE_NFC}]).entities[0]
    again = graph.add_entities([{"name": twin}]).entities[0]
    assert (again.created, again.entity.id) == (False, first.entity.id)
    assert graph.resolve(twin).id == first.entity.id
    assert graph.add_triples([{"subject": twin, "predicate": "owns", "object": "Bar"}]).created_entities == ["Bar"]
    assert len(files_in(settings, "entities")) == 2  # José Café and Bar: no twin


def test_names_are_stored_nfc_without_invisible_characters_and_invisible_only_names_are_refused(
    graph: GraphService,
) -> None:
    entity = graph.add_entities([{"name": "Al\u200bice\u202e", "aliases": [CAFE_NFD]}]).entities[0].entity
    assert (entity.name, entity.aliases) == ("Alice", [CAFE_NFC])
    with pytest.raises(InvalidInputError, match="zero-width and bidi characters are removed"):
        graph.add_entities([{"name": "\u200b\u202e\ufeff"}])


def test_a_name_is_mentioned_whatever_unicode_form_the_message_uses(graph: GraphService) -> None:
    add(graph, CAFE_NFD, "works_at", "Ａｃｍｅ Corp")
    entities, facts = graph.recall_facts(f"what does {CAFE_NFC} do?")
    assert [e.name for e in entities] == [CAFE_NFC]
    assert [(f.subject, f.object) for f in facts] == [(CAFE_NFC, "Ａｃｍｅ Corp")]
    assert [e.name for e in graph.mentioned("news from acme corp today")] == ["Ａｃｍｅ Corp"]
    assert [e.name for e in graph.mentioned(f"ask {CAFE_NFD.upper()}")] == [CAFE_NFC]


def test_recall_facts_walk_two_hops_at_most_fifteen_without_writing_files(
    graph: GraphService, settings: Settings, clock: FakeClock
) -> None:
    add(graph, "Alice", "works_on", "RockBot", 0.9)
    add(graph, "RockBot", "uses", "Python", 0.8)
    add(graph, "Python", "created_by", "Guido", 0.7)  # third hop: left out
    for i in range(20):
        add(graph, "Hub", "links", f"Leaf{i:02d}", 0.5)
    entities, facts = graph.recall_facts("what is alice doing?")
    assert [e.name for e in entities] == ["Alice"]
    assert [(f.subject, f.object, f.hop) for f in facts] == [("Alice", "RockBot", 1), ("RockBot", "Python", 2)]
    _, many = graph.recall_facts("hub")
    assert len(many) == 15
    alice = graph.resolve("Alice")
    # Being named is a use, counted in the access log (tests/unit/graph/test_graph_salience.py), not a write.
    assert on_disk(settings, "entities", alice.id)["last_referenced_at"] is None
    assert graph.recall_facts("no entity named here") == ([], [])


# ---------------------------------------------------------------------------------------------- random sequences
NAMES = ["Alice", "alice", "Bob", "Carol", "Dave", "Eve", "Rock Bot", "ROCK  BOT", "Zed"]
PREDICATES = {"works on": "works_on", "worksOn": "works_on", "likes": "likes", "knows": "knows"}
CONFIDENCES = [0.2, 0.5, 0.9, 1.0]


class Model:
    """What the graph should hold: entity id -> the name keys naming it, and (s, p, o) -> confidence."""

    def __init__(self) -> None:
        self.labels: dict[str, set[str]] = {}
        self.triples: dict[tuple[str, str, str], float] = {}

    def owner(self, label: str) -> str | None:
        key = name_key(label)
        return next((entity_id for entity_id, keys in self.labels.items() if key in keys), None)

    def copy(self) -> Model:
        twin = Model()
        twin.labels = {i: set(keys) for i, keys in self.labels.items()}
        twin.triples = dict(self.triples)
        return twin


def step_add_entity(graph: GraphService, model: Model, rng: random.Random) -> None:
    name, aliases = rng.choice(NAMES), rng.sample(NAMES, rng.randint(0, 2))
    existing = model.owner(name) or next(filter(None, map(model.owner, aliases)), None)
    added = graph.add_entities([{"name": name, "aliases": aliases}]).entities[0]
    assert added.created == (existing is None)
    entity_id = existing or added.entity.id
    known = model.labels.get(entity_id, {name_key(name)})
    ignored = []
    for label in ([name] if existing else []) + aliases:
        key = name_key(label)
        if key in known:
            continue
        if model.owner(label) not in (None, entity_id):
            ignored.append(normalize_name(label))  # reported as stored: whitespace collapsed
            continue
        known.add(key)
    model.labels[entity_id] = known
    assert added.entity.id == entity_id and added.ignored_aliases == ignored


def step_add_triples(graph: GraphService, model: Model, rng: random.Random) -> None:
    items = [
        {
            "subject": rng.choice(NAMES),
            "predicate": rng.choice(list(PREDICATES)),
            "object": rng.choice(NAMES),
            "confidence": rng.choice(CONFIDENCES),
        }
        for _ in range(rng.randint(1, 3))
    ]
    sim, created, expected, loop = model.copy(), [], [], False
    for item in items:
        ends = []
        for label in (item["subject"], item["object"]):
            entity_id = sim.owner(label)
            if entity_id is None:
                entity_id = f"new:{name_key(label)}"
                sim.labels[entity_id] = {name_key(label)}
                created.append(normalize_name(label))
            ends.append(entity_id)
        if ends[0] == ends[1]:
            loop = True
            break
        spo = (ends[0], PREDICATES[item["predicate"]], ends[1])
        expected.append((spo, spo not in sim.triples))
        sim.triples[spo] = max(sim.triples.get(spo, 0.0), item["confidence"])
    if loop:
        with pytest.raises(InvalidInputError):
            graph.add_triples(items)
        return
    result = graph.add_triples(items)
    assert result.created_entities == created
    real: dict[str, str] = {}
    for (spo, was_new), added in zip(expected, result.triples, strict=True):
        assert added.created == was_new
        real[spo[0]], real[spo[2]] = added.fact.subject_id, added.fact.object_id
    model.labels = {real.get(i, i): keys for i, keys in sim.labels.items()}
    model.triples = {(real.get(s, s), p, real.get(o, o)): c for (s, p, o), c in sim.triples.items()}


def step_delete_entity(graph: GraphService, model: Model, rng: random.Random) -> None:
    name = rng.choice(NAMES)
    entity_id = model.owner(name)
    if entity_id is None:
        with pytest.raises(NotFoundError):
            graph.delete_entity(name)
        return
    touching = [spo for spo in model.triples if entity_id in (spo[0], spo[2])]
    assert graph.delete_entity(name).triples_deleted == len(touching)
    del model.labels[entity_id]
    for spo in touching:
        del model.triples[spo]


def step_delete_triple(graph: GraphService, model: Model, rng: random.Random) -> None:
    if not model.triples or rng.random() < 0.2:
        with pytest.raises(NotFoundError):
            graph.delete_triple("nosuchtriple")
        return
    spo = rng.choice(sorted(model.triples))
    triple_id = next(t.id for t in graph.triples.values() if (t.subject, t.predicate, t.object) == spo)
    graph.delete_triple(triple_id)
    del model.triples[spo]


def step_merge(graph: GraphService, model: Model, rng: random.Random) -> None:
    keep, merge = rng.choice(NAMES), rng.choice(NAMES)
    kept, gone = model.owner(keep), model.owner(merge)
    if kept is None or gone is None:
        with pytest.raises(NotFoundError):
            graph.merge_entities(keep, merge)
        return
    if kept == gone:
        with pytest.raises(InvalidInputError):
            graph.merge_entities(keep, merge)
        return
    result = graph.merge_entities(keep, merge)
    repointed = folded = 0
    moved = {spo: c for spo, c in model.triples.items() if gone in (spo[0], spo[2])}
    for spo in moved:
        del model.triples[spo]
    for (s, p, o), confidence in moved.items():
        s, o = (kept if s == gone else s), (kept if o == gone else o)
        if s == o:
            folded += 1  # dropped; the service counts it with the folded duplicates
        elif (s, p, o) in model.triples:
            folded += 1
            model.triples[(s, p, o)] = max(model.triples[(s, p, o)], confidence)
        else:
            repointed += 1
            model.triples[(s, p, o)] = confidence
    assert (result.triples_repointed, result.duplicates_folded) == (repointed, folded)
    model.labels[kept] |= model.labels.pop(gone)


def check(graph: GraphService, model: Model) -> None:
    assert set(graph.entities) == set(model.labels)
    for entity_id, entity in graph.entities.items():
        assert {name_key(label) for label in (entity.name, *entity.aliases)} == model.labels[entity_id]
    spo = {(t.subject, t.predicate, t.object): t.confidence for t in graph.triples.values()}
    assert spo == model.triples and len(graph.triples) == len(spo)  # no two triples share (s, p, o)
    for triple in graph.triples.values():
        assert triple.subject in graph.entities and triple.object in graph.entities
        assert triple.subject != triple.object
    for entity_id, keys in model.labels.items():
        for key in keys:
            assert graph.resolve(key).id == entity_id


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_sequences_match_a_simple_model_and_the_files(opener: Opener, settings: Settings, seed: int) -> None:
    rng = random.Random(seed)
    graph, model = opener(), Model()
    observer = opener()  # another process that only reads
    steps = [step_add_entity, step_add_triples, step_delete_entity, step_delete_triple, step_merge]
    for _ in range(80):
        rng.choices(steps, weights=[3, 6, 1, 1, 2])[0](graph, model, rng)
        check(graph, model)
    assert files_in(settings, "entities") == sorted(f"{i}.json" for i in graph.entities)
    assert files_in(settings, "triples") == sorted(f"{i}.json" for i in graph.triples)
    reopened = opener()
    assert snapshot(reopened) == snapshot(graph)
    check(reopened, model)
    observer.stats()
    assert snapshot(observer) == snapshot(graph)  # (its name index is covered by the two-instance tests)


def test_a_type_given_later_replaces_the_default_but_not_a_chosen_one(graph: GraphService) -> None:
    graph.add_triples([{"subject": "Alice", "predicate": "uses", "object": "Zed"}])  # Zed made as a concept
    assert graph.add_entities([{"name": "zed", "type": "tool"}]).entities[0].entity.type == "tool"
    assert graph.add_entities([{"name": "Zed", "type": "project"}]).entities[0].entity.type == "tool"
    assert graph.add_entities([{"name": "Zed"}]).entities[0].entity.type == "tool"
    assert graph.resolve("ZED").type == "tool"
