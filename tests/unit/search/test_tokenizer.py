from __future__ import annotations

import pytest

from rockmem_mcp.search.tokenizer import MIN_TOKEN_CHARS, tokenize


def test_lowercases() -> None:
    assert tokenize("Hello WORLD MiXeD") == ["hello", "world", "mixed"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("snake_case_name", ["snake", "case", "name"]),
        ("kebab-case-name", ["kebab", "case", "name"]),
        ("path/to/file.txt", ["path", "file", "txt"]),
        ("one,two;three:four", ["one", "two", "three", "four"]),
        ("tabs\tand\nnewlines", ["tabs", "and", "newlines"]),
        ("email@example.com", ["email", "example", "com"]),
    ],
)
def test_splits_on_every_non_alphanumeric_including_underscore_and_dash(text: str, expected: list[str]) -> None:
    assert tokenize(text) == expected


def test_drops_tokens_shorter_than_three_characters() -> None:
    assert MIN_TOKEN_CHARS == 3
    assert tokenize("a an the I go to Rome") == ["the", "rome"]
    assert tokenize("x_y-z ab") == []


def test_digits_are_word_characters() -> None:
    assert tokenize("version 2024 of py3k v2") == ["version", "2024", "py3k"]


def test_keeps_unicode_letters() -> None:
    assert tokenize("Zürich café naïve ΑΘΗΝΑ") == ["zürich", "café", "naïve", "αθηνα"]


def test_preserves_order_and_duplicates() -> None:
    assert tokenize("gamma alpha beta alpha") == ["gamma", "alpha", "beta", "alpha"]


def test_empty_and_punctuation_only() -> None:
    assert tokenize("") == []
    assert tokenize("!!! ... --- ___") == []
