"""The one token estimator: the rules its docstring states."""

from __future__ import annotations

import pytest

from rockmem_mcp.tokens import estimate_tokens


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("", 0),
        ("memory", 1),  # up to 6 letters: one token
        ("architecture", 2),  # 12 letters: two
        ("The quick brown fox jumps over the lazy dog.", 10),  # leading spaces free, "." one
        ("- Name: Alice\n", 5),  # "-", "Name", ":", "Alice", the line break
        ("1234567", 3),  # digits in threes
        ("東京タワー", 5),  # each non-ASCII character one
        ("a\n\n\nb", 3),  # a run of blank lines costs one
    ],
)
def test_the_estimate_follows_its_rules(text: str, tokens: int) -> None:
    assert estimate_tokens(text) == tokens


def test_english_prose_costs_about_four_characters_a_token() -> None:
    prose = (
        "Seed four keeps a core memory that is always loaded and hard capped, which the agent edits itself "
        "and must summarise or prune before it overflows. Learnings record tool failures and corrections. "
    ) * 20
    assert 3.5 <= len(prose) / estimate_tokens(prose) <= 5.0
