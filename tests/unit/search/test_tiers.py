"""Three-tier retrieval: tier 1's category rules, tier 2's restriction to the best K, tier 3's flat fallback,
on hand-made candidates and through MemoryIndex.search."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from rockmem_mcp.errors import InvalidInputError
from rockmem_mcp.models import MemoryEntry
from rockmem_mcp.search.memory_index import MemoryIndex, SalienceView, SearchFilter
from rockmem_mcp.search.rank import Ranking
from rockmem_mcp.search.tiers import RULE_NAMES, RULES, Members, Tiers, rank_categories, tiered

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


def arr(*values: float) -> np.ndarray:
    return np.array(values, dtype=np.float64)


def codes(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.int64)


def no_members() -> Members:
    raise AssertionError("this rule should not need the members")


def members_of(*member_codes: int, similarity: np.ndarray | None = None) -> Members:
    return Members(codes(*member_codes), similarity)


# ---------------------------------------------------------------------- tier 1: ranking categories

# One strong candidate in category 1; three fair ones in category 2; a weak one in category 3.
CODES = codes(1, 2, 2, 2, 3)
VALUES = arr(0.9, 0.6, 0.55, 0.5, 0.2)


def test_max_ranks_a_category_by_its_best_candidate() -> None:
    assert rank_categories("max", CODES, VALUES, 4, no_members).tolist() == [1, 2, 3]


def test_top3_prefers_several_good_matches_to_one() -> None:
    assert RULES["top3"](CODES, VALUES, 4, no_members).tolist() == pytest.approx([0, 0.3, 0.55, 0.2 / 3])
    assert rank_categories("top3", CODES, VALUES, 4, no_members).tolist() == [2, 1, 3]


def test_top3_takes_only_the_best_three_of_a_category() -> None:
    scores = RULES["top3"](codes(0, 0, 0, 0), arr(0.1, 0.9, 0.8, 0.7), 1, no_members)
    assert scores.tolist() == pytest.approx([0.8])


def test_sum_adds_every_candidate() -> None:
    assert RULES["sum"](CODES, VALUES, 4, no_members).tolist() == pytest.approx([0, 0.9, 1.65, 0.2])


def test_mean_divides_by_every_searchable_member_not_only_the_matched() -> None:
    # Category 2 has 10 members (3 matched), category 1 only its matched one.
    members = members_of(1, *[2] * 10, 3)
    assert RULES["mean"](CODES, VALUES, 4, lambda: members).tolist() == pytest.approx([0, 0.9, 0.165, 0.2])


def test_centroid_is_the_mean_cosine_of_the_members_that_have_a_vector() -> None:
    similarity = arr(0.2, 0.8, 0.6, math.nan, 0.1)  # the third member of category 2 has no vector yet
    members = members_of(1, 2, 2, 2, 3, similarity=similarity)
    scores = RULES["centroid"](CODES, VALUES, 4, lambda: members)
    assert scores.tolist() == pytest.approx([0, 0.2, 0.7, 0.1])
    assert rank_categories("centroid", CODES, VALUES, 4, lambda: members).tolist() == [2, 1, 3]


def test_centroid_without_embeddings_is_mean() -> None:
    members = members_of(1, 2, 2, 2, 3)
    assert RULES["centroid"](CODES, VALUES, 4, lambda: members).tolist() == pytest.approx(
        RULES["mean"](CODES, VALUES, 4, lambda: members).tolist()
    )


def test_only_categories_holding_a_candidate_are_ranked_ties_to_the_lower_code() -> None:
    # Category 0 and 4 have members but no candidate; 1 and 3 tie.
    members = members_of(0, 0, 1, 3, 4, similarity=arr(0.9, 0.9, 0.5, 0.5, 0.9))
    ranked = rank_categories("centroid", codes(3, 1), arr(0.4, 0.4), 5, lambda: members)
    assert ranked.tolist() == [1, 3]


def test_every_rule_is_in_the_registry() -> None:
    assert set(RULES) == set(RULE_NAMES)


def test_an_unknown_rule_or_no_categories_is_refused_with_the_choices() -> None:
    with pytest.raises(InvalidInputError, match="max, top3, sum, mean, centroid"):
        Tiers(rule="best")
    with pytest.raises(InvalidInputError, match="at least 1"):
        Tiers(categories=0)


# ---------------------------------------------------------------------- tiers 2 and 3

SLOTS = codes(0, 1, 2, 3, 4)


def test_tier_two_puts_the_best_categories_first_in_their_own_order() -> None:
    # top3 with K=1: category 2 (slots 1-3) comes before slot 0, the best single candidate.
    hits = tiered(Tiers(1, "top3"), SLOTS, VALUES, CODES, 4, 3, no_members)
    assert hits.slots.tolist() == [1, 2, 3]
    assert hits.scores.tolist() == pytest.approx([0.6, 0.55, 0.5])
    assert hits.total == 5  # every candidate, as a flat search counts


def test_tier_three_fills_the_rest_in_the_flat_order_when_the_best_categories_are_short() -> None:
    hits = tiered(Tiers(1, "top3"), SLOTS, VALUES, CODES, 4, 5, no_members)
    assert hits.slots.tolist() == [1, 2, 3, 0, 4]
    hits = tiered(Tiers(1, "max"), SLOTS, VALUES, CODES, 4, 3, no_members)
    assert hits.slots.tolist() == [0, 1, 2]  # category 1 holds one hit; the flat search gives the next two


def test_two_best_categories_exclude_the_third() -> None:
    hits = tiered(Tiers(2, "max"), SLOTS, VALUES, CODES, 4, 4, no_members)
    assert hits.slots.tolist() == [0, 1, 2, 3]
    hits = tiered(Tiers(2, "max"), codes(0, 1, 2), arr(0.9, 0.8, 0.85), codes(1, 2, 3), 4, 2, no_members)
    assert hits.slots.tolist() == [0, 2]  # flat order among the chosen two


def test_no_more_categories_than_k_is_the_flat_search() -> None:
    hits = tiered(Tiers(3, "top3"), SLOTS, VALUES, CODES, 4, 3, no_members)
    assert hits.slots.tolist() == [0, 1, 2]


def test_no_candidates_gives_no_hits() -> None:
    hits = tiered(Tiers(1, "max"), codes(), arr(), codes(), 2, 5, no_members)
    assert hits.slots.tolist() == [] and hits.total == 0


# ---------------------------------------------------------------------- through MemoryIndex.search


def entry(entry_id: str, content: str, category: str | None, minutes: int = 0) -> MemoryEntry:
    return MemoryEntry(id=entry_id, content=content, category=category, created_at=T0 + timedelta(minutes=minutes))


def sample_index() -> MemoryIndex:
    """The best keyword match alone in `notes` (with an unrelated note); three weaker ones in `home/yard`; one
    uncategorized."""
    index = MemoryIndex()
    index.upsert_many(
        [
            entry("note", "garden garden garden tomatoes", "notes"),
            entry("note2", "shopping list eggs", "notes", 1),
            entry("g1", "garden fence painted", "home/yard", 2),
            entry("g2", "garden shed roof", "home/yard", 3),
            entry("g3", "garden hose broken", "home/yard", 4),
            entry("loose", "garden party invitation", None, 5),
        ]
    )
    return index


def keys(index: MemoryIndex, slots: np.ndarray) -> list[str]:
    return [index.bm25.keys[s] for s in slots.tolist()]


def test_memory_index_search_honours_tiers() -> None:
    index = sample_index()
    flat = index.search("garden", SearchFilter(), 5)
    assert keys(index, flat.slots) == ["note", "loose", "g3", "g2", "g1"]
    best_category = index.search("garden", SearchFilter(), 3, tiers=Tiers(1, "top3"))
    assert keys(index, best_category.slots) == ["g3", "g2", "g1"]
    assert best_category.total == flat.total == 5
    with_fallback = index.search("garden", SearchFilter(), 5, tiers=Tiers(1, "top3"))
    assert keys(index, with_fallback.slots) == ["g3", "g2", "g1", "note", "loose"]


def test_uncategorized_entries_form_a_category_of_their_own() -> None:
    index = sample_index()
    index.upsert(entry("loose2", "garden garden garden garden compost", None, 6))
    hits = index.search("garden", SearchFilter(), 2, tiers=Tiers(1, "max"))
    assert keys(index, hits.slots) == ["loose2", "loose"]


def test_tiers_keep_the_filters_and_salience() -> None:
    index = sample_index()
    view = SalienceView(now=T0.timestamp(), lam=0.01, floor=0.4)
    hits = index.search("garden", SearchFilter(category="home"), 5, salience=view, tiers=Tiers(1, "max"))
    assert keys(index, hits.slots) == ["g3", "g2", "g1"]
    hits = index.search("garden", SearchFilter(created_after=T0 + timedelta(minutes=3)), 5, tiers=Tiers(1, "top3"))
    assert keys(index, hits.slots) == ["g3", "g2", "loose"]  # the note is filtered out before tier 1


def test_tiers_rank_hybrid_scores_and_the_centroid_reads_every_member_vector() -> None:
    index = sample_index()
    index.vectors.adopt("test", 2)
    vectors = [[1, 0], [0, 1], [0.8, 0.6], [0.8, 0.6], [0.8, 0.6], [0, 1]]  # note, note2, g1-g3, loose
    index.vectors.put(codes(0, 1, 2, 3, 4, 5), np.array(vectors, dtype=np.float32))
    query_vector = np.array([1, 0], dtype=np.float32)

    def search(tiers: Tiers | None) -> list[str]:
        return keys(
            index, index.search("garden", SearchFilter(), 3, Ranking("hybrid"), query_vector, tiers=tiers).slots
        )

    assert search(None) == ["note", "g3", "g2"]
    assert search(Tiers(1, "max")) == ["note", "g3", "g2"]  # notes first, then the flat order fills in
    # The centroid of notes is 0.5 (note2 matches nothing but is a member), that of home/yard 0.8.
    assert search(Tiers(1, "centroid")) == ["g3", "g2", "g1"]


def test_a_query_without_searchable_words_finds_nothing_with_tiers() -> None:
    assert sample_index().search("a b", SearchFilter(), 5, tiers=Tiers()).slots.tolist() == []
