"""Three-tier retrieval (seed 003, layer 2): rank the categories for a query, search inside the best few,
fall back to the flat search when they hold too few hits.

- Tier 1 scores every category that holds a candidate with a rule from RULES, computed from its members'
  scores for this query (or, for `centroid`, their cosine to it).
- Tier 2 keeps the candidates filed in the best `categories` of them, best first.
- Tier 3 fills the places tier 2 left empty with the best candidates outside them, in the flat order.

One scoring pass serves the three tiers: every candidate's score is the flat search's (search/rank.py
`scored`, over the whole index, salience included), so the tiers only decide which candidates come first,
and the hits of tier 2 and tier 3 are on one scale. Uncategorized entries form one category of their own.
Off by default (`ROCKMEM_SEARCH_TIERS`): on LoCoMo dev it gained only in hybrid mode with memories filed by
conversation session, and not significantly (BENCHMARKS.md, "Issue 20: three-tier retrieval").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, get_args

import numpy as np

from rockmem_mcp.errors import InvalidInputError
from rockmem_mcp.search.bm25 import Hits
from rockmem_mcp.search.rank import cut

TierRule = Literal["max", "top3", "sum", "mean", "centroid"]
RULE_NAMES: tuple[str, ...] = get_args(TierRule)
DEFAULT_RULE: TierRule = "max"
DEFAULT_CATEGORIES = 3
TOP_N = 3  # the `top3` rule's n


@dataclass(frozen=True)
class Members:
    """Every searchable entry's category code and, with embeddings, its cosine to the query (NaN where it
    has no vector yet): for the rules that look past the matched entries. Built only when a rule asks."""

    codes: np.ndarray
    similarity: np.ndarray | None = None


CategoryRule = Callable[[np.ndarray, np.ndarray, int, Callable[[], Members]], np.ndarray]


def by_max(codes: np.ndarray, values: np.ndarray, n: int, members: Callable[[], Members]) -> np.ndarray:
    """A category is as good as its best candidate."""
    scores = np.full(n, -np.inf)  # a cosine (vector mode) may be negative
    np.maximum.at(scores, codes, values)
    return scores


def by_top_n(codes: np.ndarray, values: np.ndarray, n: int, members: Callable[[], Members]) -> np.ndarray:
    """The mean of a category's best TOP_N candidates (a missing one counts 0): several good matches beat
    one."""
    order = np.lexsort((-values, codes))
    sorted_codes = codes[order]
    place = np.arange(len(order)) - np.searchsorted(sorted_codes, sorted_codes)  # rank within its category
    best = order[place < TOP_N]
    return np.bincount(codes[best], weights=values[best], minlength=n) / TOP_N


def by_sum(codes: np.ndarray, values: np.ndarray, n: int, members: Callable[[], Members]) -> np.ndarray:
    """The sum of a category's candidate scores: favours large categories with many matches."""
    return np.bincount(codes, weights=values, minlength=n)


def by_mean(codes: np.ndarray, values: np.ndarray, n: int, members: Callable[[], Members]) -> np.ndarray:
    """The sum of a category's candidate scores over its size (every searchable member): the score of its
    average member, the lexical counterpart of a centroid."""
    sizes = np.bincount(members().codes, minlength=n)
    return by_sum(codes, values, n, members) / np.maximum(sizes, 1)


def by_centroid(codes: np.ndarray, values: np.ndarray, n: int, members: Callable[[], Members]) -> np.ndarray:
    """The query's cosine to the category's centroid (the mean of its members' vectors, not renormalised:
    the mean of their cosines). Without embeddings it is `mean`."""
    group = members()
    if group.similarity is None:
        return by_mean(codes, values, n, members)
    has = ~np.isnan(group.similarity)
    sums = np.bincount(group.codes[has], weights=group.similarity[has], minlength=n)
    return sums / np.maximum(np.bincount(group.codes[has], minlength=n), 1)


RULES: dict[str, CategoryRule] = {
    "max": by_max,
    "top3": by_top_n,
    "sum": by_sum,
    "mean": by_mean,
    "centroid": by_centroid,
}


@dataclass(frozen=True)
class Tiers:
    """How one search uses the tiers: how many categories tier 2 searches, and the rule that ranks them."""

    categories: int = DEFAULT_CATEGORIES
    rule: str = DEFAULT_RULE

    def __post_init__(self) -> None:
        if self.rule not in RULES:
            raise InvalidInputError(f"tier rule must be one of {', '.join(RULES)}; got {self.rule!r}")
        if self.categories < 1:
            raise InvalidInputError(f"tiers need at least 1 category to search; got {self.categories}")


def rank_categories(
    rule: str, codes: np.ndarray, values: np.ndarray, n: int, members: Callable[[], Members]
) -> np.ndarray:
    """Tier 1: the category codes that hold a candidate, best first (ties: the lower code first).

    `codes` and `values` are the candidates' category codes (0..n-1) and scores."""
    return _best_first(RULES[rule](codes, values, n, members), _present(codes, n))


def _present(codes: np.ndarray, n: int) -> np.ndarray:
    """The codes that occur, ascending (a count, not a sort: a query may match most of the index)."""
    return np.flatnonzero(np.bincount(codes, minlength=n))


def _best_first(scores: np.ndarray, present: np.ndarray) -> np.ndarray:
    return present[np.argsort(-scores[present], kind="stable")]


def tiered(
    tiers: Tiers,
    slots: np.ndarray,
    values: np.ndarray,
    codes: np.ndarray,
    n: int,
    limit: int,
    members: Callable[[], Members],
) -> Hits:
    """The best `limit` candidates, those in the best `tiers.categories` categories first (tier 2), the
    rest of the places filled in the flat order (tier 3). `slots`, `values` and `codes` describe the
    candidates: slot, score and category code (0..n-1). The total is every candidate, as for a flat search."""
    present = _present(codes, n)
    if len(present) <= tiers.categories:  # every category is among the best: the flat search
        return cut(slots, values, limit)
    best = _best_first(RULES[tiers.rule](codes, values, n, members), present)[: tiers.categories]
    chosen = np.zeros(n, dtype=bool)
    chosen[best] = True
    inside = chosen[codes]
    scoped = cut(slots[inside], values[inside], limit)
    missing = limit - len(scoped.slots)
    if missing <= 0:
        return Hits(scoped.slots, scoped.scores, len(slots))
    fallback = cut(slots[~inside], values[~inside], missing)
    return Hits(
        np.concatenate([scoped.slots, fallback.slots]), np.concatenate([scoped.scores, fallback.scores]), len(slots)
    )
