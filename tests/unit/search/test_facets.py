"""Named speaker and month (issue 24, lever 4): parsing, and the lift they give in a search."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest

from rockmem_mcp.models import MemoryEntry
from rockmem_mcp.search import facets
from rockmem_mcp.search.memory_index import MemoryIndex, SearchFilter
from rockmem_mcp.search.rank import LIFT_WEIGHTS, Ranking

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
ON = Ranking("bm25", lifts=True)
OFF = Ranking("bm25", lifts=False)


def memory(entry_id: str, content: str, **metadata: str) -> MemoryEntry:
    return MemoryEntry(id=entry_id, content=content, metadata=metadata, created_at=T0)


def found(index: MemoryIndex, query: str, ranking: Ranking = ON) -> dict[str, float]:
    hits = index.search(query, SearchFilter(), 100, ranking)
    return {index.bm25.keys[s]: float(v) for s, v in zip(hits.slots.tolist(), hits.scores.tolist(), strict=True)}


@pytest.mark.parametrize(
    ("date", "code"),
    [
        ("2023-05-08", 2023 * 12 + 4),
        ("1:56 pm on 8 May, 2023", 2023 * 12 + 4),
        ("November 2022", 2022 * 12 + 10),
        ("8 May", facets.NO_CODE),  # no year
        ("", facets.NO_CODE),
        (None, facets.NO_CODE),
    ],
)
def test_month_code_of_a_date(date: str | None, code: int) -> None:
    assert facets.month_code(date) == code


@pytest.mark.parametrize(
    ("query", "months", "years"),
    [
        ("Which tournament did Nate win in November 2022?", {10}, {2022}),
        ("What happened in May?", {4}, set()),
        ("May I ask what Caroline painted?", set(), set()),
        ("What may Caroline paint next?", set(), set()),
        ("Plans for May 2023 and June", {4, 5}, {2023}),
    ],
)
def test_months_a_query_names(query: str, months: set[int], years: set[int]) -> None:
    assert facets.named_months(query) == (frozenset(months), frozenset(years))


def test_month_codes_inside_the_named_months() -> None:
    codes = np.array([2022 * 12 + 10, 2023 * 12 + 10, 2023 * 12 + 4, facets.NO_CODE])
    assert facets.in_months(codes, frozenset({10}), frozenset()).tolist() == [True, True, False, False]
    assert facets.in_months(codes, frozenset({10}), frozenset({2023})).tolist() == [False, True, False, False]
    assert not facets.in_months(codes, frozenset({11}), frozenset()).any()  # NO_CODE % 12 == 11: never named


def test_speaker_keys_and_matching() -> None:
    assert facets.speaker_key("Mel Smith") == "mel smith"
    assert facets.speaker_key("  ") is None
    assert facets.names_speaker({"what", "did", "mel", "smith", "say"}, "mel smith")
    assert not facets.names_speaker({"mel"}, "mel smith")


def test_a_named_speaker_lifts_their_memories_only() -> None:
    index = MemoryIndex()
    index.upsert_many(
        [
            memory("c", "painting a sunrise by the lake", speaker="Caroline"),
            memory("m", "painting a sunrise by the lake", speaker="Melanie"),
            memory("x", "painting a sunrise by the lake"),
        ]
    )
    off, on = (
        found(index, "What did Caroline paint at sunrise?", OFF),
        found(index, "What did Caroline paint at sunrise?"),
    )
    top = max(off.values())
    assert on["c"] == pytest.approx(off["c"] + LIFT_WEIGHTS["bm25"]["speaker"] * top)
    assert on["m"] == off["m"] and on["x"] == off["x"]


def test_a_named_month_lifts_memories_dated_in_it_and_others_are_untouched() -> None:
    index = MemoryIndex()
    index.upsert_many(
        [
            memory("nov22", "won the chess tournament", date="5 November, 2022"),
            memory("nov23", "won the chess tournament", date="2023-11-02"),
            memory("plain", "won the chess tournament"),
        ]
    )
    off = found(index, "Which tournament was won in November 2022?", OFF)
    on = found(index, "Which tournament was won in November 2022?")
    assert on["nov22"] == pytest.approx(off["nov22"] + LIFT_WEIGHTS["bm25"]["month"] * max(off.values()))
    assert on["nov23"] == off["nov23"] and on["plain"] == off["plain"]
    any_year = found(index, "Which tournament was won in November?")
    assert any_year["nov22"] == any_year["nov23"] > any_year["plain"]


def test_without_the_metadata_a_query_naming_them_ranks_as_before() -> None:
    index = MemoryIndex()
    index.upsert_many([memory("a", "Caroline went hiking in May 2023"), memory("b", "Melanie hiked too")])
    query = "Where did Caroline hike in May 2023?"
    assert found(index, query) == found(index, query, OFF)
