"""rockmem_mcp.text: the one comparison key for names and tags, and the one terminal-safe rendering."""

from __future__ import annotations

import json
import unicodedata

import pytest

from rockmem_mcp.text import clean, fold, inert_markdown, visible

NFC = "José Café"
NFD = unicodedata.normalize("NFD", NFC)


def test_the_two_unicode_forms_of_a_name_fold_to_one_key() -> None:
    assert NFD != NFC
    assert fold(NFD) == fold(NFC) == "josé café"


@pytest.mark.parametrize(
    "twin",
    [
        "Alice",
        "ALICE",
        "Ａｌｉｃｅ",  # full width (NFKC)
        "Al\u200bice",  # zero-width space
        "\ufeffAlice",  # BOM
        "A\u2060lice\u200d",  # word joiner, zero-width joiner
        "\u202eAlice\u202c",  # right-to-left override ... pop
        "\u2066Alice\u2069",  # isolate
        "Alice\u200e",  # left-to-right mark
    ],
)
def test_invisible_width_and_case_twins_fold_to_one_key(twin: str) -> None:
    assert fold(twin) == "alice"


def test_case_folding_is_full_not_just_lowercase() -> None:
    assert fold("Straße") == fold("STRASSE") == "strasse"
    assert fold("ǰ") == unicodedata.normalize("NFKC", "ǰ".casefold())  # folding's decomposition is recomposed


def test_clean_keeps_the_spelling_but_is_nfc_and_drops_invisible_characters() -> None:
    assert clean(NFD) == NFC
    assert clean("Al\u200bice\u202e") == "Alice"
    assert clean("Ａｌｉｃｅ") == "Ａｌｉｃｅ"  # shown as typed; only compared in NFKC
    assert clean("plain ascii") == "plain ascii"
    for c in "\u200b\u200d\u2060\ufeff\u200f\u061c\u202e\u2069\u00ad\u034f\u180e\u2063\u3164\U000e0041":
        assert clean(f"x{c}y") == "xy" and fold(f"Al{c}ice") == fold("Alice"), hex(ord(c))
    assert clean("x-y") == "x-y"


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("\x1b]0;pwned\x07", "\\u001b]0;pwned\\u0007"),  # OSC window title
        ("\x1b]52;c;aGk=\x07", "\\u001b]52;c;aGk=\\u0007"),  # OSC 52 clipboard
        ("\x1b[2J\x1b[H", "\\u001b[2J\\u001b[H"),  # clear screen, cursor home
        ("\x9b31m", "\\u009b31m"),  # C1 CSI
        ("\x9d0;t\x9c", "\\u009d0;t\\u009c"),  # C1 OSC ... ST
        ("a\rb\x08c\x7f", "a\\u000db\\u0008c\\u007f"),  # carriage return, backspace, DEL
        ("evil\u202etxt.exe", "evil\\u202etxt.exe"),  # bidi override
        ("two\nlines\tand a tab", "two\nlines\tand a tab"),
        ("café ☕ 東京", "café ☕ 東京"),
    ],
)
def test_visible_shows_terminal_controls_as_escapes(raw: str, shown: str) -> None:
    assert visible(raw) == shown


def test_visible_keeps_json_valid_and_lossless() -> None:
    value = {"content": "a\x9b1m b\u202e c\x1b[2J"}
    line = visible(json.dumps(value, ensure_ascii=False))
    assert not any(0x80 <= ord(c) <= 0x9F or c in "\x1b\u202e" for c in line)
    assert json.loads(line) == value


@pytest.mark.parametrize(
    ("line", "shown"),
    [
        ("# Forged", "\\# Forged"),
        ("   ## Indented", "   \\## Indented"),
        ("===", "\\==="),
        ("--- ", "\\--- "),
        ("<!-- hide the rest", "\\<!-- hide the rest"),
        ("```python", "\\```python"),
        ("~~~", "\\~~~"),
        ("- a list item", "- a list item"),
        ("a # in the middle", "a # in the middle"),
        ("#hashtag", "\\#hashtag"),
        ("\x1b[2J", "\\u001b[2J"),
    ],
)
def test_inert_markdown_escapes_lines_that_would_be_structure(line: str, shown: str) -> None:
    assert inert_markdown(f"text\n{line}") == f"text\n{shown}"
