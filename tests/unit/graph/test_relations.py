"""The relation vocabulary (seed 004 §6.3): its table, hints for free predicates near it, the seed's hyphenated
spelling, and what `supersedes` does to traversal and recall."""

from __future__ import annotations

import pytest

from rockmem_mcp.config import Settings
from rockmem_mcp.graph.relations import (
    BY_PREDICATE,
    GROUPS,
    VOCABULARY,
    incoming_label,
    suggest,
    vocabulary_markdown,
)
from rockmem_mcp.graph.service import GraphService
from rockmem_mcp.graph.shapes import normalize_predicate
from tests.unit.helpers import Opener

SEED_SPELLING = [
    "develops", "uses", "used-by", "part-of", "contains", "depends-on", "decided-on", "supersedes",
    "preceded-by", "followed-by", "prefers", "avoids", "confident-about", "uncertain-about", "relates-to",
]  # fmt: skip


def add(graph: GraphService, subject: str, predicate: str, obj: str, confidence: float = 1.0) -> str:
    item = {"subject": subject, "predicate": predicate, "object": obj, "confidence": confidence}
    return graph.add_triples([item]).triples[0].fact.id


def test_every_predicate_the_seed_names_is_in_the_vocabulary_once_normalised_to_snake_case() -> None:
    assert [normalize_predicate(p) for p in SEED_SPELLING] == [r.predicate for r in VOCABULARY]
    assert {r.group for r in VOCABULARY} == set(GROUPS)
    assert all(r.meaning for r in VOCABULARY)


@pytest.mark.parametrize(("a", "b"), [("uses", "used_by"), ("part_of", "contains"), ("preceded_by", "followed_by")])
def test_paired_predicates_are_each_others_inverse(a: str, b: str) -> None:
    assert BY_PREDICATE[a].inverse == b and BY_PREDICATE[b].inverse == a


def test_incoming_relations_read_as_the_inverse_or_say_where_they_come_from() -> None:
    assert incoming_label("develops") == "developed_by"
    assert incoming_label("supersedes") == "superseded_by"
    assert incoming_label("relates_to") == "relates_to"
    assert incoming_label("confident_about") == "confident_about (from)"  # no natural inverse
    assert incoming_label("works_on") == "works_on (from)"


@pytest.mark.parametrize(
    ("free", "meant"),
    [
        ("depends", "depends_on"),
        ("uses_tool", "uses"),
        ("prefer", "prefers"),
        ("use", "uses"),
        ("related_to", "relates_to"),
        ("is_part_of", "part_of"),
        ("decides_on", "decided_on"),
        ("developed_by", "develops"),  # an inverse label written as a predicate
    ],
)
def test_a_free_predicate_close_to_the_vocabulary_is_matched_to_it(free: str, meant: str) -> None:
    assert suggest(free) == meant


@pytest.mark.parametrize("free", ["works_on", "knows", "lives_in", "created_by", "dep", "likes", "uses", "part_of"])
def test_far_or_vocabulary_predicates_get_no_suggestion(free: str) -> None:
    assert suggest(free) is None


def test_add_triples_hints_at_the_vocabulary_and_keeps_the_free_predicate(graph: GraphService) -> None:
    added = graph.add_triples(
        [
            {"subject": "RockBot", "predicate": "depends", "object": "Python"},
            {"subject": "RockBot", "predicate": "Depends-On", "object": "numpy"},  # the seed's spelling
            {"subject": "Alice", "predicate": "works_on", "object": "RockBot"},
        ]
    ).triples
    hint, seed_spelling, far = (t.hint for t in added)
    assert hint is not None and "'depends_on'" in hint and "rockmem://graph-relations" in hint
    assert seed_spelling is None and far is None
    assert [t.fact.predicate for t in added] == ["depends", "depends_on", "works_on"]  # stored, never refused
    assert graph.predicate_counts() == {"depends": 1, "depends_on": 1, "works_on": 1}


def test_the_vocabulary_page_counts_triples_per_predicate_and_lists_free_ones(graph: GraphService) -> None:
    add(graph, "Alice", "develops", "RockBot")
    add(graph, "Bob", "develops", "RockBot")
    add(graph, "RockBot", "uses_tool", "git")
    page = vocabulary_markdown(graph.predicate_counts())
    assert "| `develops` | `developed_by` | a person builds a project or tool | 2 |" in page
    assert "| `avoids` | `avoided_by` | an anti-preference | 0 |" in page
    free = page.split("## Free predicates in use")[1]
    assert "| `uses_tool` | 1 | `uses` |" in free and "develops" not in free
    assert [line for line in page.split("\n") if line.startswith("#")] == [
        "# Relation vocabulary", "## Structural", "## Temporal", "## Qualitative", "## Free predicates in use",
    ]  # fmt: skip


def test_a_hand_edited_predicate_cannot_break_the_table_or_forge_a_heading() -> None:
    page = vocabulary_markdown({"a|b`c\n# Forged\x1b[2J": 1})
    [row] = [line for line in page.split("\n") if "Forged" in line]
    assert row == "| `a\\|b'c # Forged\\u001b[2J` | 1 |  |"
    assert "# Forged" not in [line.strip() for line in page.split("\n")]


# ------------------------------------------------------------------------------------------ supersedes
def test_supersedes_marks_the_older_entitys_other_facts_in_traversal(graph: GraphService) -> None:
    uses_old = add(graph, "RockBot", "uses", "Basic auth")
    by = add(graph, "Basic auth", "created_by", "Bob")
    uses_new = add(graph, "RockBot", "uses", "OAuth PKCE")
    before = {f.id: f.superseded_by for f in graph.traverse("RockBot", max_hops=2, limit=50).facts}
    assert before == {uses_old: None, by: None, uses_new: None}

    supersedes = add(graph, "OAuth PKCE", "supersedes", "Basic auth")
    facts = {f.id: f for f in graph.traverse("RockBot", max_hops=2, limit=50).facts}
    assert facts[uses_old].superseded_by == "OAuth PKCE" and facts[by].superseded_by == "OAuth PKCE"
    assert facts[uses_new].superseded_by is None
    assert facts[supersedes].superseded_by is None  # the fact that says so is not itself out of date
    assert facts[uses_old].line().endswith("(superseded by OAuth PKCE)")
    assert graph.superseders(graph.entities) == {graph.resolve("Basic auth").id: "OAuth PKCE"}

    graph.delete_triple(supersedes)
    assert all(f.superseded_by is None for f in graph.traverse("RockBot", max_hops=2, limit=50).facts)


def test_superseded_facts_are_cut_first_within_a_hop_and_recalled_last(graph: GraphService) -> None:
    add(graph, "RockBot", "uses", "Basic auth", confidence=1.0)
    add(graph, "RockBot", "uses", "OAuth PKCE", confidence=0.6)
    add(graph, "OAuth PKCE", "supersedes", "Basic auth")
    # One slot at hop 1: without supersedes the more confident fact would win it.
    [only] = graph.traverse("RockBot", max_hops=1, limit=1).facts
    assert (only.object, only.superseded_by) == ("OAuth PKCE", None)

    _, facts = graph.recall_facts("what does RockBot use?", limit=15)
    assert [f.superseded_by for f in facts][-1] == "OAuth PKCE"
    assert [f.object for f in facts if f.superseded_by is None] == ["OAuth PKCE", "Basic auth"]
    stale = [f for f in facts if f.superseded_by]
    assert [(f.subject, f.predicate, f.object) for f in stale] == [("RockBot", "uses", "Basic auth")]


def test_supersedes_is_known_again_after_a_restart(settings: Settings, opener: Opener) -> None:
    graph = GraphService(settings)
    stale = add(graph, "RockBot", "uses", "Basic auth")
    add(graph, "OAuth PKCE", "supersedes", "Basic auth")
    graph.close()  # writes the snapshot the next start loads
    assert opener().fact(stale).superseded_by == "OAuth PKCE"
