"""The one ranker: BM25 scores and embedding similarities in, one ordered list out, for every store.

Modes:
- `bm25`: keywords only.
- `vector`: cosine similarity only; a memory at a cosine of 0 or less is not a match.
- `rockbot`: RockBot's hybrid — BM25 divided by the query's top BM25 score; a cosine counts only at
  >= 0.5; an entry found by both gets the mean of the two, otherwise its single score.
- `hybrid` (the default): BM25 divided by the query's top BM25 score, plus `vector_weight` x cosine (an
  entry without a vector yet keeps its BM25 part). Entries no keyword matched are returned only at a
  cosine >= `min_similarity`, so a query does not drag in unrelated memories. The fusion family was chosen
  over nine (BENCHMARKS.md); its weights across corpora (below).

Context from neighbours (`neighbours`, bm25 and hybrid only): a memory that carries a `session` (metadata,
see docs/recall.md, "Conversation memories") adds to its score `NEIGHBOUR_WEIGHTS[mode]` x the best score among the
turns within `NEIGHBOUR_WINDOW` of it in the same session (a turn's question or answer is often where the
words are). Only candidates lend; a memory that borrows something becomes a candidate. Memories without a
session neither lend nor borrow: their scores are untouched. Metadata keys: search/conversation_metadata.py.

Named speaker and month (`lifts`, bm25 and hybrid only): a memory whose metadata `speaker` the query names,
or whose `date` falls in a month the query names, adds `LIFT_WEIGHTS[mode][kind]` x the query's top score
(search/facets.py). Same selection as the neighbours'.

Every mode but rockbot may be given `weigh`: a factor per candidate slot (salience, search/salience.py) that
multiplies the fused score before the cut; a factor of 0 leaves the candidate out.

A store passes the BM25 score of every slot, the cosine of every slot (or None without embeddings) and
which slots may be returned by similarity (live, filtered, holding a vector).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Literal, get_args

import numpy as np

from rockmem_mcp.search.bm25 import Hits, top_k

Mode = Literal["hybrid", "bm25", "vector", "rockbot"]
MODES: tuple[str, ...] = get_args(Mode)
ROCKBOT_MIN_SIMILARITY = 0.5  # RockBot's MinSimilarityThreshold
# Every constant below was chosen by leave-one-corpus-out over seven development corpora of different shapes
# (conversation turns; short statements beside long answers; the same with half the exchanges saved whole; turns
# pooled without metadata; session summaries; short facts; agent notes: benchmarks/retrieval/, BENCHMARKS.md
# "Recall across corpora"), with the default model (the bundled transformer; the static model chose the same
# weight and threshold): the setting whose worst corpus gains most over textbook BM25, then the best mean, a tie
# keeping the earlier value.
# The cosine's weight against max-normalised BM25. 2.0 was chosen in every fold, for both bundled models.
HYBRID_VECTOR_WEIGHT = 2.0
# Below this a memory sharing no keyword with the query is unrelated for that model. No corpus moved between 0.1
# and 0.3 (BM25 matches most answers), so the higher, safer floor; words the model does not know add nothing to a
# vector (static_model.py, onnx_embeddings.py).
HYBRID_MIN_SIMILARITY = 0.3


# Session neighbours: the weight per mode and the window (memories either side). Only corpora with `session` move.
NEIGHBOUR_WINDOW = 2
NEIGHBOUR_WEIGHTS: dict[str, float] = {"hybrid": 0.5, "bm25": 0.5}
# Named speaker / month: weight x the query's top score. Only one corpus carries speaker and date (LoCoMo's turns),
# so these are chosen there alone; on the others they change nothing (no metadata, no lift).
LIFT_WEIGHTS: dict[str, dict[str, float]] = {
    "hybrid": {"speaker": 0.4, "month": 0.4},  # with the static model 0.2 / 0.3; the transformer chose these
    "bm25": {"speaker": 0.4, "month": 0.4},
}


Weigh = Callable[[np.ndarray], np.ndarray]  # candidate slots -> a factor for each


def uses_vectors(mode: str) -> bool:
    return mode != "bm25"


@dataclass(frozen=True)
class Ranking:
    """How to rank one search: the mode, the hybrid's two settings and whether session neighbours lend."""

    mode: str = "hybrid"
    vector_weight: float = HYBRID_VECTOR_WEIGHT
    min_similarity: float = HYBRID_MIN_SIMILARITY
    neighbours: bool = False

    lifts: bool = False

    @property
    def neighbour_weight(self) -> float:
        return NEIGHBOUR_WEIGHTS.get(self.mode, 0.0) if self.neighbours else 0.0

    def lift_weight(self, kind: str) -> float:
        return LIFT_WEIGHTS.get(self.mode, {}).get(kind, 0.0) if self.lifts else 0.0


Named = Callable[[np.ndarray], np.ndarray]  # candidate slots -> whether the query names each


@dataclass(frozen=True)
class Lifts:
    """What a query names (its speaker, its month): per kind, which candidate slots it names, and the weight.
    Asked of candidates only, so a lift costs what the query matched, not the index's size."""

    named: tuple[tuple[Named, float], ...]


def lift(slots: np.ndarray, values: np.ndarray, lifts: Lifts | None) -> np.ndarray:
    """Each named candidate plus weight x the top candidate value (taken before any lift)."""
    if lifts is None or not lifts.named or not len(slots):
        return values
    top = max(float(values.max()), 0.0)
    lifted = values.copy()
    for named, weight in lifts.named:
        lifted += np.where(named(slots), weight * top, 0.0)
    return lifted


@dataclass(frozen=True)
class Neighbours:
    """The memories that belong to a session, in session order, and which rows lie within the window of each."""

    slots: np.ndarray  # (m,) live session members: each session's turns in order, sessions one after another
    same: np.ndarray  # (2 x window, m) bool: whether the member `offset` rows away is in the same session
    row_of: np.ndarray  # per slot: its row in `slots`, -1 without a session
    eligible: np.ndarray  # bool per slot: may be returned by this search (live, filtered)

    @staticmethod
    def within_sessions(session: np.ndarray, window: int) -> np.ndarray:
        """`same` for members in session order whose session codes are `session`."""
        m = len(session)
        same = np.zeros((2 * window, m), dtype=bool)
        for column, d in enumerate(_offsets(window)):
            lo, hi = max(0, -d), min(m, m - d)  # rows whose row + d exists
            if lo < hi:
                same[column, lo:hi] = session[lo + d : hi + d] == session[lo:hi]
        return same


def _offsets(window: int) -> list[int]:
    return [d for d in range(-window, window + 1) if d]


def borrow_from_neighbours(
    scores: np.ndarray, candidate: np.ndarray, neighbours: Neighbours | None, weight: float
) -> tuple[np.ndarray, np.ndarray]:
    """Scores and candidates (per slot) after each session member adds `weight` x its best neighbour's score
    (a candidate's, floored at 0). Shifted contiguous rows rather than gathers: a few passes over the session
    members, whatever the number of candidates. Without session memories it returns its inputs unchanged."""
    if neighbours is None or weight <= 0 or not len(neighbours.slots):
        return scores, candidate
    m, window = len(neighbours.slots), neighbours.same.shape[0] // 2
    found = np.flatnonzero(candidate)
    rows = neighbours.row_of[found]
    inside = rows >= 0
    lender = np.zeros(m + 2 * window)  # padded: row r of the members is lender[window + r]
    lender[window + rows[inside]] = np.maximum(scores[found[inside]], 0.0)
    best = np.zeros(m)
    for same, d in zip(neighbours.same, _offsets(window), strict=True):
        np.maximum(best, lender[window + d : window + d + m] * same, out=best)
    rows = np.flatnonzero(best > 0)  # members next to a candidate that lends something
    targets, lent = neighbours.slots[rows], weight * best[rows]
    receives = neighbours.eligible[targets]
    targets, lent = targets[receives], lent[receives]
    if not len(targets):
        return scores, candidate
    scores, candidate = scores.copy(), candidate.copy()
    scores[targets] = np.where(candidate[targets], scores[targets], 0.0) + lent
    candidate[targets] = True
    return scores, candidate


def rank(
    ranking: Ranking,
    lexical: np.ndarray,
    similarity: np.ndarray | None,
    with_vector: np.ndarray,
    limit: int,
    weigh: Weigh | None = None,
    neighbours: Neighbours | None = None,
    lifts: Lifts | None = None,
) -> Hits:
    """The best `limit` slots; without similarities (no embeddings) every mode ranks by BM25."""
    return cut(*scored(ranking, lexical, similarity, with_vector, weigh, neighbours, lifts), limit)


def scored(
    ranking: Ranking,
    lexical: np.ndarray,
    similarity: np.ndarray | None,
    with_vector: np.ndarray,
    weigh: Weigh | None = None,
    neighbours: Neighbours | None = None,
    lifts: Lifts | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Every candidate slot and its final score, unordered: what `rank` cuts, for a caller that looks at all
    of them first (three-tier retrieval ranks categories by them)."""
    matched = lexical > 0
    mode = ranking.mode
    if similarity is None or mode == "bm25":
        # bm25's weight, also for hybrid's fallback without embeddings; rockbot's stays RockBot's exactly
        weight = 0.0 if mode == "rockbot" else replace(ranking, mode="bm25").neighbour_weight
        scores, candidate = borrow_from_neighbours(lexical, matched, neighbours, weight)
        return _candidates(candidate, scores, weigh, lifts)
    if mode == "vector":  # a cosine of 0 or less is no likeness (a query of unknown words has none at all)
        return _candidates(with_vector & (similarity > 0), similarity, weigh)
    top = lexical.max(initial=0.0)
    normalised = lexical / top if top > 0 else lexical
    if mode == "rockbot":
        dense = with_vector & (similarity >= ROCKBOT_MIN_SIMILARITY)
        dense_score = np.where(dense, similarity, 0.0)
        fused = np.where(matched & dense, (normalised + dense_score) / 2, normalised + dense_score)
        return _candidates(matched | dense, fused)
    fused = normalised + ranking.vector_weight * np.where(with_vector, similarity, 0.0)
    candidate = matched | (with_vector & (similarity >= ranking.min_similarity))
    fused, candidate = borrow_from_neighbours(fused, candidate, neighbours, ranking.neighbour_weight)
    return _candidates(candidate, fused, weigh, lifts)


def best_lexical(
    lexical: np.ndarray, limit: int, weigh: Weigh | None = None, neighbours: Neighbours | None = None,
    neighbour_weight: float = 0.0, lifts: Lifts | None = None,
) -> Hits:  # fmt: skip
    """BM25 alone: the matched slots by score (times `weigh`), session neighbours lending `neighbour_weight`,
    named speakers and months lifted."""
    scores, candidate = borrow_from_neighbours(lexical, lexical > 0, neighbours, neighbour_weight)
    return cut(*_candidates(candidate, scores, weigh, lifts), limit)


def cut(slots: np.ndarray, values: np.ndarray, limit: int) -> Hits:
    """The best `limit` of candidate slots by value; the total is every candidate."""
    order = top_k(slots, values, limit)
    return Hits(slots[order], values[order], len(slots))


def _candidates(
    candidates: np.ndarray, scores: np.ndarray, weigh: Weigh | None = None, lifts: Lifts | None = None
) -> tuple[np.ndarray, np.ndarray]:
    slots = np.flatnonzero(candidates)
    values = lift(slots, scores[slots], lifts)
    if weigh is not None:  # a factor of 0 leaves a candidate out
        factor = weigh(slots)
        if len(factor) and factor.min() <= 0:
            kept = factor > 0
            slots, values, factor = slots[kept], values[kept], factor[kept]
        values = values * factor
    return slots, values
