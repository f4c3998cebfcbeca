"""Entity pages (seed 004 §6.2): sections, which memories count as naming the entity, ordering, open
questions, relations with inverses, supersedes, stored text that tries to forge the page, the token cap."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from rockmem_mcp.errors import NotFoundError
from rockmem_mcp.graph.pages import MAX_MENTIONS, MAX_TIMELINE, entity_page
from rockmem_mcp.graph.service import GraphService
from rockmem_mcp.memory.service import MemoryService
from rockmem_mcp.tokens import estimate_tokens
from tests.unit.helpers import T0

SECTIONS = ["## Summary", "## Facts", "## Timeline", "## Open Questions", "## Relations"]


def add(graph: GraphService, subject: str, predicate: str, obj: str, confidence: float = 1.0) -> str:
    item = {"subject": subject, "predicate": predicate, "object": obj, "confidence": confidence}
    return graph.add_triples([item]).triples[0].fact.id


def remember(memory: MemoryService, content: str, days: int = 0, **fields: Any) -> str:
    """Save a memory dated `days` after T0; its id."""
    entry = memory.prepare_entry({"content": content, "created_at": T0 + timedelta(days=days), **fields})
    memory.save_many([entry])
    return entry.id


def section(page: str, title: str) -> list[str]:
    """The lines under `## {title}`, up to the next heading or the end (blank lines dropped)."""
    body = page.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]
    return [line for line in body.split("\n") if line]


def headings(page: str) -> list[str]:
    return [line for line in page.split("\n") if line.startswith("#")]


def test_a_page_has_the_seeds_header_and_sections(graph: GraphService, service: MemoryService) -> None:
    graph.add_entities([{"name": "RockBot", "type": "project", "aliases": ["rb"]}])
    add(graph, "Alice", "develops", "RockBot")
    page = entity_page(graph, service, "ROCKBOT")  # any case, as names resolve
    lines = page.split("\n")
    assert headings(page) == ["# RockBot", *SECTIONS]
    assert lines[1] == "<!-- Type: project | Created: 2024-05-01 | Last updated: 2024-05-01 -->"
    assert lines[2].startswith("<!-- Salience: 0.") and lines[2].endswith("| Access count: 1 | Pinned: no -->")
    assert lines[3] == "Aliases: rb"
    assert section(page, "Open Questions") == ["(none)"]
    assert entity_page(graph, service, graph.resolve("rb").id) == page  # by id or alias: the same page


def test_the_summary_is_the_entitys_own_else_the_best_memory_naming_it(
    graph: GraphService, service: MemoryService
) -> None:
    graph.add_entities([{"name": "RockBot"}, {"name": "Tidy", "metadata": {"description": "A linter."}}])
    assert section(entity_page(graph, service, "RockBot"), "Summary")[0].startswith("(no summary yet")
    memory_id = remember(service, "RockBot is a memory server for agents. " * 40)
    summary = section(entity_page(graph, service, "RockBot"), "Summary")
    assert summary[0].startswith("RockBot is a memory server") and summary[0].endswith("…")
    assert len(summary[0]) <= 600 and summary[1] == f"[{memory_id}]"
    assert section(entity_page(graph, service, "Tidy"), "Summary") == ["A linter."]
    assert section(entity_page(graph, None, "RockBot"), "Summary")[0].startswith("(no summary yet")  # graph alone


def test_memories_count_when_they_name_it_as_whole_words_by_name_or_alias(
    graph: GraphService, service: MemoryService
) -> None:
    graph.add_entities([{"name": "RockBot", "aliases": ["Rocky"]}])
    named = remember(service, "we ship rockbot on fridays")
    by_alias = remember(service, "Rocky needs a release", days=1)
    remember(service, "RockBotter is another product")  # a longer word
    remember(service, "the rock bot fell")  # other words
    facts = "\n".join(section(entity_page(graph, service, "RockBot"), "Facts"))
    assert f"- we ship rockbot on fridays [{named}]" in facts and f"[{by_alias}]" in facts
    assert "RockBotter" not in facts and "rock bot" not in facts


def test_at_most_twenty_memories_are_read_and_the_page_says_so(graph: GraphService, service: MemoryService) -> None:
    graph.add_entities([{"name": "RockBot"}])
    for i in range(MAX_MENTIONS + 5):
        remember(service, f"RockBot note {i}")
    facts = section(entity_page(graph, service, "RockBot"), "Facts")
    assert len([line for line in facts if line.startswith("- RockBot note")]) == MAX_MENTIONS
    assert facts[-1] == f"- (the best {MAX_MENTIONS} memories naming it are shown; search_memory finds more)"


def test_facts_are_sentences_most_salient_first_then_memories(graph: GraphService, service: MemoryService) -> None:
    weak = add(graph, "RockBot", "depends_on", "numpy", confidence=0.6)
    strong = add(graph, "RockBot", "uses", "Python", confidence=0.9)
    memory_id = remember(service, "RockBot\tstarts\nfast")
    assert section(entity_page(graph, service, "RockBot"), "Facts") == [
        f"- RockBot uses Python. [triple {strong}]",  # salience: 0.7 x confidence, both unused
        f"- RockBot depends on numpy. [triple {weak}]",
        f"- RockBot starts fast [{memory_id}]",  # one line
    ]


def test_the_timeline_is_dated_oldest_first_and_keeps_the_newest(graph: GraphService, service: MemoryService) -> None:
    add(graph, "Alice", "develops", "RockBot")  # at T0 (the graph's clock)
    remember(service, "RockBot 1.0 released", days=30)
    remember(service, "RockBot started", days=-10)
    assert section(entity_page(graph, service, "RockBot"), "Timeline") == [
        "- 2024-04-21: RockBot started",
        "- 2024-05-01: Alice develops RockBot.",
        "- 2024-05-31: RockBot 1.0 released",
    ]
    for day in range(MAX_TIMELINE):
        add(graph, "RockBot", "uses", f"tool{day}")
    timeline = section(entity_page(graph, service, "RockBot"), "Timeline")
    assert len(timeline) == MAX_TIMELINE + 1 and timeline[-2] == "- 2024-05-31: RockBot 1.0 released"
    assert timeline[-1] == f"- (the newest {MAX_TIMELINE} of {MAX_TIMELINE + 3} items)"
    assert "RockBot started" not in "\n".join(timeline)  # the oldest went


def test_open_questions_are_unsure_triples_and_memories(graph: GraphService, service: MemoryService) -> None:
    unsure = add(graph, "RockBot", "uses", "Rust", confidence=0.3)
    add(graph, "RockBot", "uses", "Python", confidence=0.9)
    question = remember(service, "Should RockBot drop Windows?")
    low = remember(service, "RockBot might move to Codeberg", metadata={"confidence": "low"})
    number = remember(service, "RockBot has 40 users", metadata={"confidence": "0.2"})
    remember(service, "RockBot is written in Python", metadata={"confidence": "0.9"})
    questions = section(entity_page(graph, service, "RockBot"), "Open Questions")
    assert questions[0] == f"- RockBot uses Rust. (confidence 0.30) [triple {unsure}]"  # Python: sure
    assert sorted(questions[1:]) == sorted(
        [f"- Should RockBot drop Windows? [{question}]", f"- RockBot might move to Codeberg [{low}]",
         f"- RockBot has 40 users [{number}]"]
    )  # fmt: skip


def test_relations_group_by_predicate_with_inverse_labels_for_incoming(
    graph: GraphService, service: MemoryService
) -> None:
    add(graph, "Alice", "develops", "RockBot")
    add(graph, "Bob", "develops", "RockBot")
    add(graph, "RockBot", "uses", "Python")
    add(graph, "Tidy", "uses", "RockBot")
    add(graph, "RockBot", "part_of", "Suite")
    add(graph, "Carol", "knows_about", "RockBot")
    relations = section(entity_page(graph, service, "RockBot"), "Relations")
    assert sorted(relations) == [
        "- developed_by: [[Alice]], [[Bob]]",
        "- knows_about (from): [[Carol]]",
        "- part_of: [[Suite]]",
        "- used_by: [[Tidy]]",
        "- uses: [[Python]]",
    ]
    assert section(entity_page(graph, service, "Suite"), "Relations") == ["- contains: [[RockBot]]"]


def test_a_superseded_entity_is_marked_on_its_page_and_on_others(graph: GraphService, service: MemoryService) -> None:
    add(graph, "RockBot", "uses", "Basic auth")
    add(graph, "RockBot", "uses", "OAuth PKCE", confidence=0.5)
    add(graph, "OAuth PKCE", "supersedes", "Basic auth")
    rockbot = entity_page(graph, service, "RockBot")
    assert section(rockbot, "Relations") == ["- uses: [[OAuth PKCE]], [[Basic auth]] (superseded by OAuth PKCE)"]
    facts = section(rockbot, "Facts")
    assert facts[-1].startswith("- RockBot uses Basic auth. (superseded by OAuth PKCE) [triple ")  # last, stale
    old = entity_page(graph, service, "Basic auth")
    assert "> Superseded by [[OAuth PKCE]]: its facts may be out of date." in old.split("\n")
    assert "- superseded_by: [[OAuth PKCE]]" in section(old, "Relations")


def test_stored_text_cannot_forge_headings_blocks_or_terminal_codes(
    graph: GraphService, service: MemoryService
) -> None:
    hostile = "RockBot notes\n# Forged\n  ## Also forged\n===\n---\n<!-- hidden\n```\n\x1b]52;c;evil\x07"
    graph.add_entities([{"name": "RockBot", "metadata": {"summary": hostile}}, {"name": "# Fake heading"}])
    add(graph, "# Fake heading", "relates_to", "RockBot", confidence=0.2)
    remember(service, hostile)
    remember(service, "# RockBot forged title?")
    page = entity_page(graph, service, "RockBot")
    assert headings(page) == ["# RockBot", *SECTIONS]
    lines = page.split("\n")
    assert "\\# Forged" in lines and "  \\## Also forged" in lines and "\\===" in lines and "\\---" in lines
    assert "\\<!-- hidden" in lines and "\\```" in lines
    assert "\x1b" not in page and "\x07" not in page and "\\u001b]52;c;evil\\u0007" in page
    assert all(not line.lstrip().startswith(("<", "`", "~", "===", "---")) for line in lines[3:])
    assert any(line.startswith("- \\# Fake heading relates to RockBot.") for line in section(page, "Facts"))
    assert any(line.startswith("- \\# RockBot forged title?") for line in section(page, "Open Questions"))


def test_a_page_is_cut_to_its_token_cap_and_says_what_was_cut(graph: GraphService, service: MemoryService) -> None:
    graph.add_triples(
        [{"subject": "RockBot", "predicate": f"rel_{i}", "object": f"A thing with a long name {i}"} for i in range(400)]
    )
    for i in range(MAX_MENTIONS):
        remember(service, f"RockBot memory {i}: " + "words " * 40)
    full = entity_page(graph, service, "RockBot", token_cap=10**6)
    assert "not shown" not in full and estimate_tokens(full) > 10_000
    for cap in (4_000, 1_500):
        page = entity_page(graph, service, "RockBot", token_cap=cap)
        assert estimate_tokens(page) <= cap
        assert headings(page) == ["# RockBot", *SECTIONS]
        timeline, facts = section(page, "Timeline"), section(page, "Facts")
        assert timeline[-1].startswith("- … ") and timeline[-1].endswith(
            f"not shown (the page is cut to ~{cap:,} tokens)"
        )
        assert facts[-1].startswith("- … ") and "more facts not shown" in facts[-1]
        cut = int(facts[-1].split()[2])
        assert len(facts) - 1 + cut == 400 + MAX_MENTIONS + 1  # shown + cut = every fact line (and the cap note)
    assert len(section(entity_page(graph, service, "RockBot"), "Facts")) >= 10  # the first pass keeps a floor


def test_an_unknown_name_is_refused_naming_the_nearest(graph: GraphService, service: MemoryService) -> None:
    graph.add_entities([{"name": "RockBot"}, {"name": "Rocket"}, {"name": "Alice"}])
    with pytest.raises(NotFoundError) as refused:
        entity_page(graph, service, "Rokbot")
    assert "'Rokbot'" in str(refused.value) and "nearest names: 'RockBot'" in str(refused.value)
    with pytest.raises(NotFoundError, match="no close name"):
        entity_page(graph, service, "zzzz")
