"""The rule-based memory router: which store a remembered text goes to, its entities, tags and confidence."""

from __future__ import annotations

import pytest

from rockmem_mcp.recall.router import RoutedMemory, route_memory


@pytest.mark.parametrize(
    ("text", "store"),
    [
        ("Never forget that my son is allergic to shellfish", "vault"),
        ("To deploy, first run the tests, then tag the release", "procedural"),
        ("My name is Alex and I work at Acme", "core"),
        ("We decided yesterday to move the standup to 10:30", "episodic"),
        ("The release went out on 2026-03-04", "episodic"),  # any time phrase makes it an event
        ("The garage code is 7719", "semantic"),
    ],
)
def test_each_kind_of_text_goes_to_its_store(text: str, store: str) -> None:
    routed = route_memory(text)
    assert routed.store == store and routed.core_update == (store == "core")


def test_entities_tags_confidence_and_summary_follow_the_seeds_shape() -> None:
    routed = route_memory("Alice leads the billing team at Acme Corp; billing moved to Lisbon.", ["alice", "Acme"])
    assert [e.name for e in routed.entities] == ["alice", "Acme", "Lisbon"]  # known names first, no "Acme Corp" twin
    assert routed.tags[0] == "billing" and 2 <= len(routed.tags) <= 5
    assert routed.confidence == "high" and route_memory("x y", asked=False).confidence == "medium"
    assert route_memory("Tea.").tags == ["tea", "remembered"]  # never fewer than 2 tags
    long = route_memory("word " * 100)
    assert len(long.summary) == 200 and long.summary.endswith("…")
    seed_answer = {"store": "semantic", "relations": [{"from": "a", "relation": "uses", "to": "b"}], "summary": "s"}
    assert RoutedMemory.model_validate(seed_answer).relations[0].predicate == "uses"  # a model's answer parses
