"""rank(): every mode against hand-computed orders and scores on small arrays."""

from __future__ import annotations

import numpy as np
import pytest

from rockmem_mcp.search.bm25 import Hits
from rockmem_mcp.search.rank import (
    HYBRID_MIN_SIMILARITY,
    HYBRID_VECTOR_WEIGHT,
    MODES,
    ROCKBOT_MIN_SIMILARITY,
    Ranking,
    rank,
    uses_vectors,
)

T, F = True, False


def arr(*values: float) -> np.ndarray:
    return np.array(values, dtype=np.float64)


def mask(*values: bool) -> np.ndarray:
    return np.array(values, dtype=np.bool_)


def assert_ranked(hits: Hits, expected: list[tuple[int, float]], total: int) -> None:
    assert hits.slots.tolist() == [slot for slot, _ in expected]
    assert hits.scores.tolist() == pytest.approx([score for _, score in expected])
    assert hits.total == total


# ---------------------------------------------------------------------- settings


def test_only_bm25_runs_without_vectors() -> None:
    assert not uses_vectors("bm25")
    assert all(uses_vectors(mode) for mode in ("vector", "rockbot", "hybrid"))
    assert set(MODES) == {"bm25", "vector", "rockbot", "hybrid"}


def test_the_default_ranking_is_the_hybrid_with_its_tuned_settings() -> None:
    ranking = Ranking()
    assert (ranking.mode, ranking.vector_weight, ranking.min_similarity) == (
        "hybrid",
        HYBRID_VECTOR_WEIGHT,
        HYBRID_MIN_SIMILARITY,
    )
    assert ROCKBOT_MIN_SIMILARITY == 0.5


# ---------------------------------------------------------------------- bm25


def test_bm25_ranks_keyword_matches_and_ignores_similarity() -> None:
    lexical = arr(0.0, 2.0, 0.5, 0.0, 1.0)
    similarity = arr(0.99, 0.0, 0.0, 0.99, 0.0)  # high cosines on the unmatched slots change nothing
    hits = rank(Ranking("bm25"), lexical, similarity, mask(T, T, T, T, T), limit=10)
    assert_ranked(hits, [(1, 2.0), (4, 1.0), (2, 0.5)], total=3)


@pytest.mark.parametrize("mode", ["bm25", "vector", "rockbot", "hybrid"])
def test_without_similarities_every_mode_is_bm25(mode: str) -> None:
    lexical = arr(0.0, 2.0, 0.5, 0.0, 1.0)
    hits = rank(Ranking(mode), lexical, None, mask(T, T, T, T, T), limit=10)
    assert_ranked(hits, [(1, 2.0), (4, 1.0), (2, 0.5)], total=3)


def test_equal_scores_put_the_newest_slot_first() -> None:
    hits = rank(Ranking("bm25"), arr(1.0, 0.0, 1.0, 2.0, 1.0), None, mask(F, F, F, F, F), limit=10)
    assert hits.slots.tolist() == [3, 4, 2, 0]


# ---------------------------------------------------------------------- vector


def test_vector_mode_ranks_by_cosine_over_slots_with_a_vector_only() -> None:
    lexical = arr(0.0, 5.0, 0.0, 1.0)  # slot 1 matches keywords but has no vector: not returned
    similarity = arr(0.2, 0.9, -0.1, 0.6)
    hits = rank(Ranking("vector"), lexical, similarity, mask(T, F, T, T), limit=10)
    assert_ranked(hits, [(3, 0.6), (0, 0.2)], total=2)  # a cosine of 0 or less is no likeness: slot 2 is out


def test_vector_mode_with_a_query_of_no_meaning_finds_nothing() -> None:
    # A query of words the model does not know embeds to zero: every cosine is 0, nothing is like it.
    hits = rank(Ranking("vector"), arr(0.0, 0.0), arr(0.0, 0.0), mask(T, T), limit=10)
    assert hits.slots.tolist() == [] and hits.total == 0


def test_vector_mode_without_any_vector_finds_nothing() -> None:
    hits = rank(Ranking("vector"), arr(1.0, 2.0), arr(0.0, 0.0), mask(F, F), limit=10)
    assert hits.slots.tolist() == []
    assert hits.total == 0


# ---------------------------------------------------------------------- rockbot


def test_rockbot_means_both_signals_and_keeps_a_single_one_as_is() -> None:
    # top BM25 = 4.0, so normalised lexical = [1.0, 0.5, 0, 0, 0.25, 0, 0.5]
    lexical = arr(4.0, 2.0, 0.0, 0.0, 1.0, 0.0, 2.0)
    similarity = arr(0.6, 0.4, 0.5, 0.49, 0.8, 0.9, 0.9)
    with_vector = mask(T, T, T, T, T, F, F)
    hits = rank(Ranking("rockbot"), lexical, similarity, with_vector, limit=10)
    assert_ranked(
        hits,
        [
            (0, 0.8),  # both: (1.0 + 0.6) / 2
            (4, 0.525),  # both: (0.25 + 0.8) / 2
            (6, 0.5),  # keywords only: no vector, so its 0.9 cosine is not averaged in
            (2, 0.5),  # cosine only, exactly at the threshold
            (1, 0.5),  # keywords only: a 0.4 cosine is below the threshold (not averaged down to 0.45)
        ],
        total=5,  # slot 3 (0.49, no keyword) and slot 5 (no vector, no keyword) are not candidates
    )


def test_rockbot_threshold_is_inclusive_and_just_below_does_not_count() -> None:
    below = np.nextafter(np.float32(0.5), np.float32(0.0))
    similarity = np.array([0.5, below, 0.7], dtype=np.float32)
    hits = rank(Ranking("rockbot"), arr(0.0, 0.0, 0.0), similarity, mask(T, T, T), limit=10)
    assert_ranked(hits, [(2, 0.7), (0, 0.5)], total=2)


def test_rockbot_cosine_below_threshold_does_not_touch_a_keyword_score() -> None:
    below = float(np.nextafter(0.5, 0.0))
    hits = rank(Ranking("rockbot"), arr(3.0, 1.5), arr(below, 0.5), mask(T, T), limit=10)
    # slot 0: top, keyword only -> 1.0; slot 1: (0.5 + 0.5) / 2
    assert_ranked(hits, [(0, 1.0), (1, 0.5)], total=2)


def test_rockbot_normalises_by_the_top_bm25_score_whatever_its_scale() -> None:
    similarity = arr(0.0, 0.0, 0.0)
    small = rank(Ranking("rockbot"), arr(0.2, 0.1, 0.05), similarity, mask(T, T, T), limit=10)
    large = rank(Ranking("rockbot"), arr(20.0, 10.0, 5.0), similarity, mask(T, T, T), limit=10)
    assert_ranked(small, [(0, 1.0), (1, 0.5), (2, 0.25)], total=3)
    assert_ranked(large, [(0, 1.0), (1, 0.5), (2, 0.25)], total=3)


# ---------------------------------------------------------------------- hybrid


def test_hybrid_adds_weighted_cosine_to_normalised_bm25() -> None:
    # top BM25 = 6.0: normalised = [0.5, 0.25, 0, 0, 0, 1.0]; weight 2
    lexical = arr(3.0, 1.5, 0.0, 0.0, 0.0, 6.0)
    similarity = arr(0.1, 0.4, 0.3, 0.29, 0.9, 0.2)
    with_vector = mask(T, T, T, T, F, F)
    hits = rank(Ranking("hybrid", vector_weight=2.0, min_similarity=0.3), lexical, similarity, with_vector, limit=10)
    assert_ranked(
        hits,
        [
            (1, 1.05),  # 0.25 + 2 * 0.4
            (5, 1.0),  # no vector yet: keeps its BM25 part, its (stale) 0.2 cosine is ignored
            (0, 0.7),  # 0.5 + 2 * 0.1: a keyword match is kept whatever its cosine
            (2, 0.6),  # no keyword: 0 + 2 * 0.3, at min_similarity
        ],
        total=4,  # slot 3 is below min_similarity; slot 4 has no vector, so its 0.9 cannot bring it in
    )


def test_hybrid_uses_the_default_weight() -> None:
    hits = rank(Ranking(), arr(2.0, 1.0), arr(0.1, 0.5), mask(T, T), limit=10)
    assert_ranked(hits, [(1, 0.5 + HYBRID_VECTOR_WEIGHT * 0.5), (0, 1.0 + HYBRID_VECTOR_WEIGHT * 0.1)], total=2)


def test_hybrid_min_similarity_is_inclusive_for_entries_without_keywords() -> None:
    below = float(np.nextafter(0.3, 0.0))
    hits = rank(Ranking("hybrid", 1.0, 0.3), arr(0.0, 0.0), arr(0.3, below), mask(T, T), limit=10)
    assert_ranked(hits, [(0, 0.3)], total=1)


def test_hybrid_keeps_a_keyword_match_with_a_negative_cosine() -> None:
    hits = rank(Ranking("hybrid", 1.0, 0.3), arr(4.0, 1.0), arr(-0.5, 0.0), mask(T, T), limit=10)
    # slot 0: 1.0 + (-0.5) = 0.5, below min_similarity yet kept for its keywords; slot 1: 0.25 + 0
    assert_ranked(hits, [(0, 0.5), (1, 0.25)], total=2)


def test_hybrid_without_any_keyword_match_ranks_by_cosine_alone() -> None:
    similarity = arr(0.5, 0.2, 0.35, 0.9)
    hits = rank(Ranking(), arr(0.0, 0.0, 0.0, 0.0), similarity, mask(T, T, T, F), limit=10)
    assert_ranked(hits, [(0, HYBRID_VECTOR_WEIGHT * 0.5), (2, HYBRID_VECTOR_WEIGHT * 0.35)], total=2)
    assert np.isfinite(hits.scores).all()


@pytest.mark.parametrize("mode", ["vector", "rockbot", "hybrid"])
def test_nothing_found_gives_empty_hits(mode: str) -> None:
    hits = rank(Ranking(mode), arr(0.0, 0.0), arr(0.1, 0.1), mask(F, F), limit=10)
    assert hits.slots.tolist() == []
    assert hits.scores.tolist() == []
    assert hits.total == 0


# ---------------------------------------------------------------------- limit and total


# normalised lexical [0, 0.5, 0.25, 1.0, 0]; hybrid (a weight of 3) = that + 3 * cos = [2.7, 0.8, 0.85, 1.3, 2.4]
@pytest.mark.parametrize(
    ("mode", "best_two", "total"),
    [
        ("bm25", [(3, 4.0), (1, 2.0)], 3),  # three keyword matches
        ("vector", [(0, 0.9), (4, 0.8)], 5),  # every slot has a vector
        ("rockbot", [(3, 1.0), (0, 0.9)], 5),  # [0.9, 0.5, 0.25, 1.0, 0.8]: no slot has both signals
        ("hybrid", [(0, 2.7), (4, 2.4)], 5),  # three keyword matches + two cosines >= 0.3
    ],
)
def test_limit_cuts_but_total_counts_every_candidate(mode: str, best_two: list[tuple[int, float]], total: int) -> None:
    lexical = arr(0.0, 2.0, 1.0, 4.0, 0.0)
    similarity = arr(0.9, 0.1, 0.2, 0.1, 0.8)
    hits = rank(Ranking(mode, vector_weight=3.0), lexical, similarity, mask(T, T, T, T, T), limit=2)
    assert_ranked(hits, best_two, total=total)


def test_limit_cut_through_a_tie_keeps_the_newest() -> None:
    hits = rank(Ranking("vector"), arr(0, 0, 0, 0), arr(0.5, 0.9, 0.5, 0.5), mask(T, T, T, T), limit=3)
    assert_ranked(hits, [(1, 0.9), (3, 0.5), (2, 0.5)], total=4)
