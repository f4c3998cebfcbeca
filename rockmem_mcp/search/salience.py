"""Salience: how alive a memory is — one model for ranking, recall, the session start and the dream.

Seed 004 §9, to the letter:

    salience = base · e^(−λ · days since last access) · log2(access_count + 1) · type_weight,  capped at 1

- base is the memory's `importance`: 1.0 for what the user asked to remember, 0.7 (the default) for what an
  agent saved on its own, 0.5 for what was inferred or derived (enrichment, dream, preference inference).
- λ = 0.03 (half-life ≈ 23 days; `ROCKMEM_SALIENCE_LAMBDA`).
- access_count starts at 1 (the save) and grows on use (`Reinforcer`); days are counted from the last use.
- type_weight: core 1.5, semantic 1.2, procedural 1.0, episodic 0.8; plain memories and graph items are
  semantic.
- pinned: always 1.

Tiers: active ≥ 0.5, fading 0.2–0.5, dormant 0.05–0.2, archive candidate < 0.05 (the seed's tunable archive
threshold: `ROCKMEM_SALIENCE_ARCHIVE_THRESHOLD`, passed to the tier functions as `archive_below`).

Ranking (every mode but `rockbot`, which stays RockBot's): relevance × `ranking_factor` = min(1,
max(floor, salience / 0.5)): active memories rank on relevance alone (seed: "normal ranking"), fading ones
lose up to 1 − floor (floor 0.4 by default), so a match 2.5× stronger is never outranked by salience alone.
Dormant and archive candidates are left out unless asked for (`include_dormant`, by id, in dreams).
Uses are tracked by `reinforcement.py`.
"""

from __future__ import annotations

import math

import numpy as np

BASE_EXPLICIT = 1.0  # the user asked to remember it
BASE_AGENT = 0.7  # an agent saved it on its own: save_memory's default importance
BASE_DERIVED = 0.5  # inferred, enriched or written by a dream
TYPE_WEIGHTS = {"core": 1.5, "semantic": 1.2, "procedural": 1.0, "episodic": 0.8}
MEMORY_TYPE_WEIGHT = TYPE_WEIGHTS["semantic"]

ACTIVE, FADING, DORMANT, ARCHIVE_CANDIDATE = "active", "fading", "dormant", "archive_candidate"
TIERS = (ACTIVE, FADING, DORMANT, ARCHIVE_CANDIDATE)
ACTIVE_MIN = 0.5
FADING_MIN = 0.2
DORMANT_MIN = 0.05  # the default archive threshold (seed 004 §9.2)
RANKING_FLOOR = 0.4
SECONDS_PER_DAY = 86_400.0


def salience(
    base: np.ndarray,
    last_access: np.ndarray,
    access_count: np.ndarray,
    pinned: np.ndarray,
    now: float,
    lam: float,
    type_weight: float | np.ndarray = MEMORY_TYPE_WEIGHT,
) -> np.ndarray:
    """Vectorised salience (`last_access` and `now` in seconds since the epoch)."""
    days = np.maximum(now - last_access, 0.0) / SECONDS_PER_DAY
    value = base * np.exp(-lam * days) * np.log2(np.maximum(access_count, 1) + 1.0) * type_weight
    return np.where(pinned, 1.0, np.minimum(value, 1.0))


def salience_of(
    base: float, last_access: float, access_count: int, pinned: bool, now: float, lam: float,
    type_weight: float = MEMORY_TYPE_WEIGHT,
) -> float:  # fmt: skip
    """One item's salience, the same formula in plain Python (numpy costs more than it saves for a few)."""
    if pinned:
        return 1.0
    days = max(now - last_access, 0.0) / SECONDS_PER_DAY
    return min(1.0, base * math.exp(-lam * days) * math.log2(max(access_count, 1) + 1.0) * type_weight)


def tier(value: float, archive_below: float = DORMANT_MIN) -> str:
    """The tier of a salience; under `archive_below` (at most FADING_MIN, as the setting is bounded) it is an
    archive candidate."""
    if value >= ACTIVE_MIN:
        return ACTIVE
    if value >= FADING_MIN:
        return FADING
    if value >= archive_below:
        return DORMANT
    return ARCHIVE_CANDIDATE


def tier_bounds(name: str, archive_below: float = DORMANT_MIN) -> tuple[float, float]:
    """The salience range [low, high) of tier `name` (as `tier` draws it)."""
    bounds = {ACTIVE: (ACTIVE_MIN, float("inf")), FADING: (FADING_MIN, ACTIVE_MIN),
              DORMANT: (archive_below, FADING_MIN), ARCHIVE_CANDIDATE: (float("-inf"), archive_below)}  # fmt: skip
    if name not in bounds:
        raise ValueError(f"tier must be one of {', '.join(TIERS)}; got {name!r}")
    return bounds[name]


def ranking_factor(values: np.ndarray, floor: float) -> np.ndarray:
    return np.clip(values / ACTIVE_MIN, floor, 1.0)


def derived_importance(proposed: float | None) -> float:
    """A derived entry's (inferred, enriched, dream-made) base: BASE_DERIVED, or lower if proposed lower."""
    return BASE_DERIVED if proposed is None else min(proposed, BASE_DERIVED)


def tier_counts(values: np.ndarray, archive_below: float = DORMANT_MIN) -> dict[str, int]:
    """How many of `values` fall in each tier (every tier named, zeros included)."""
    edges = np.array([archive_below, FADING_MIN, ACTIVE_MIN])
    counts = np.bincount(np.searchsorted(edges, values, side="right"), minlength=4)
    return {ACTIVE: int(counts[3]), FADING: int(counts[2]), DORMANT: int(counts[1]), ARCHIVE_CANDIDATE: int(counts[0])}
