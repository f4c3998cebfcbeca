from __future__ import annotations

import sys
import threading
import unicodedata
from collections.abc import Iterator

import pytest
import snowballstemmer

from rockmem_mcp.search import tokenizer
from rockmem_mcp.search.tokenizer import MIN_TOKEN_CHARS, STOPWORDS, tokenize


def test_lowercases() -> None:
    assert tokenize("Hello WORLD Rome") == ["hello", "world", "rome"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("snake_case_name", ["snake", "case", "name"]),
        ("kebab-case-name", ["kebab", "case", "name"]),
        ("path/to/file.txt", ["path", "file", "txt"]),
        ("one,two;three:four", ["one", "two", "three", "four"]),
        ("tabs\tplus\nnewlines", ["tab", "plus", "newlin"]),
        ("email@example.com", ["email", "exampl", "com"]),
    ],
)
def test_splits_on_every_non_alphanumeric_including_underscore_and_dash(text: str, expected: list[str]) -> None:
    assert tokenize(text) == expected


def test_inflections_share_a_stem() -> None:
    assert tokenize("painting painted paints") == ["paint"] * 3
    assert tokenize("adopting adoption adopts") == ["adopt"] * 3


def test_drops_stopwords_and_single_letters() -> None:
    assert {"the", "and", "what", "did", "was", "to"} <= STOPWORDS
    assert tokenize("What did I go to the UK for?") == ["go", "uk"]
    assert tokenize("x_y-z a") == []


def test_numbers_of_any_length_are_kept() -> None:
    assert MIN_TOKEN_CHARS == 2
    assert tokenize("version 2024 of py3k v2, 5 cats") == ["version", "2024", "py3k", "v2", "5", "cat"]


def test_keeps_unicode_letters() -> None:
    assert tokenize("Zürich café ΑΘΗΝΑ") == ["zürich", "café", "αθηνα"]


def test_unicode_forms_width_and_invisible_characters_give_one_word() -> None:
    composed = "café Straße"
    for twin in (unicodedata.normalize("NFD", composed), "ＣＡＦÉ STRASSE", "ca\u200bfé straße"):
        assert tokenize(twin) == tokenize(composed) == ["café", "strass"], twin


def test_preserves_order_and_duplicates() -> None:
    assert tokenize("gamma alpha beta alpha") == ["gamma", "alpha", "beta", "alpha"]


def test_empty_punctuation_and_stopword_only() -> None:
    assert tokenize("") == []
    assert tokenize("!!! ... --- ___") == []
    assert tokenize("it is what it was") == []


@pytest.fixture
def switching_often() -> Iterator[None]:
    """Threads handed the interpreter every microsecond, so a stem shared between them would be cut mid-word."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(before)


def test_threads_stemming_at_once_get_the_stems_one_thread_gets(switching_often: None) -> None:
    # Seen at 100k: find_entities building the graph's word index while another thread tokenized failed with
    # IndexError inside the stemmer; a garbled stem would also have stayed in the cache for good.
    endings = ("ing", "ed", "ations", "ational", "fulness", "ively", "ers", "izing")
    stems = ("paint", "connect", "generaliz", "relat", "hope")
    lanes = [[f"{stem}{'x' * n}{'q' * lane}{ending}" for n in range(15) for stem in stems for ending in endings]
             for lane in range(4)]  # fmt: skip
    own = snowballstemmer.stemmer("english")  # nobody else's
    expected = [[own.stemWord(word) for word in words] for words in lanes]
    tokenizer._stem.cache_clear()  # every word stemmed now, by the threads at once
    results: dict[int, list[str]] = {}
    errors: list[BaseException] = []

    def stem_all(lane: int) -> None:
        try:
            results[lane] = [tokenizer._stem(word) for word in lanes[lane]]
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=stem_all, args=(lane,)) for lane in range(len(lanes))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert [results[lane] for lane in range(len(lanes))] == expected
