"""The salience model, number by number against seed 004 §9."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rockmem_mcp.search.salience import (
    ACTIVE,
    ARCHIVE_CANDIDATE,
    DORMANT,
    FADING,
    SECONDS_PER_DAY,
    ranking_factor,
    salience,
    salience_of,
    tier,
    tier_bounds,
    tier_counts,
)

NOW = 1_800_000_000.0
LAM = 0.03


def days_ago(days: float) -> float:
    return NOW - days * SECONDS_PER_DAY


def test_a_fresh_agent_memory_is_its_base_times_the_semantic_weight() -> None:
    assert salience_of(0.7, NOW, 1, False, NOW, LAM) == pytest.approx(0.7 * 1.2)


def test_decay_halves_in_about_23_days_and_is_capped_at_one() -> None:
    half = math.log(2) / LAM  # 23.1 days
    assert salience_of(0.7, days_ago(half), 1, False, NOW, LAM) == pytest.approx(0.84 / 2)
    assert salience_of(1.0, NOW, 1, False, NOW, LAM) == 1.0  # 1.2 capped


def test_uses_count_as_log2_of_count_plus_one() -> None:
    once = salience_of(0.5, days_ago(60), 1, False, NOW, LAM)
    nine = salience_of(0.5, days_ago(60), 9, False, NOW, LAM)
    assert nine / once == pytest.approx(math.log2(10))


def test_pinned_is_always_one_and_type_weight_scales() -> None:
    assert salience_of(0.1, days_ago(10_000), 1, True, NOW, LAM) == 1.0
    episodic = salience_of(0.5, NOW, 1, False, NOW, LAM, type_weight=0.8)
    assert episodic == pytest.approx(0.4)


@pytest.mark.parametrize(
    ("value", "expected"),
    [(1.0, ACTIVE), (0.5, ACTIVE), (0.49, FADING), (0.2, FADING), (0.19, DORMANT), (0.05, DORMANT),
     (0.049, ARCHIVE_CANDIDATE), (0.0, ARCHIVE_CANDIDATE)],
)  # fmt: skip
def test_tiers(value: float, expected: str) -> None:
    assert tier(value) == expected


def test_the_archive_threshold_moves_the_dormant_tiers_floor() -> None:
    """Seed 004's tunable threshold (ROCKMEM_SALIENCE_ARCHIVE_THRESHOLD): 0.1 is dormant by default, an archive
    candidate under 0.2; the tiers above it stay where they were."""
    values = np.array([0.6, 0.3, 0.1, 0.04])
    assert tier(0.1) == DORMANT and tier(0.1, 0.2) == ARCHIVE_CANDIDATE and tier(0.3, 0.2) == FADING
    assert tier_counts(values) == {ACTIVE: 1, FADING: 1, DORMANT: 1, ARCHIVE_CANDIDATE: 1}
    assert tier_counts(values, 0.2) == {ACTIVE: 1, FADING: 1, DORMANT: 0, ARCHIVE_CANDIDATE: 2}
    assert tier_bounds(DORMANT, 0.1) == (0.1, 0.2) and tier_bounds(ARCHIVE_CANDIDATE, 0.1)[1] == 0.1


def test_ranking_factor_leaves_active_alone_and_never_goes_below_the_floor() -> None:
    factor = ranking_factor(np.array([1.0, 0.5, 0.35, 0.2, 0.01]), 0.4)
    assert factor.tolist() == pytest.approx([1.0, 1.0, 0.7, 0.4, 0.4])


def test_the_scalar_formula_is_the_vectorised_one() -> None:
    rng = np.random.default_rng(3)
    base, ages = rng.uniform(0, 1, 200), rng.uniform(0, 400, 200)
    counts, pinned = rng.integers(1, 50, 200), rng.random(200) < 0.1
    vector = salience(base, days_ago(ages), counts, pinned, NOW, LAM, 0.8)
    scalar = [salience_of(float(b), float(days_ago(a)), int(c), bool(p), NOW, LAM, 0.8)
              for b, a, c, p in zip(base, ages, counts, pinned, strict=True)]  # fmt: skip
    assert scalar == pytest.approx(vector.tolist())
