"""Text that comes out of memory: one way to compare it, one way to show it on a terminal.

Names, aliases, tags and search words are compared by `fold`: NFKC (so the full-width "Ａｌｉｃｅ" and the
ligature "ﬁ" meet their plain forms, and "José" typed decomposed meets "José" typed composed), then case
folding ("Straße" meets "STRASSE"), with the invisible characters in `INVISIBLE` removed first — a zero-width
space inside "Alice" or a right-to-left override around it would otherwise make a twin nobody can tell apart.
`clean` is the form a name or tag is stored in: NFC with the same invisible characters removed, the user's
spelling otherwise kept.

`visible` makes text safe for a terminal: control characters (C0 but newline and tab, DEL, C1) and bidi
embeddings, overrides and isolates become the six characters `\\u001b` etc., so stored text cannot set the
window title, move the cursor, write the clipboard (OSC 52) or reorder what is shown. The escape is JSON's,
so the same function keeps JSON output valid (raw C0 never occurs in JSON; C1 and bidi characters inside a
JSON string become escapes that decode to the same string). `inert_markdown` is `visible` for text shown
inside a markdown page: a stored line cannot become a heading, an HTML block or a code fence there.
"""

from __future__ import annotations

import re
import unicodedata

# Zero-width space/non-joiner/joiner, word joiner, BOM (zero-width no-break space), LRM/RLM, the Arabic letter
# mark, bidi embeddings and overrides (U+202A-U+202E) and isolates (U+2066-U+2069); soft hyphen, combining
# grapheme joiner, Mongolian vowel separator, invisible operators (U+2061-U+2064), Hangul fillers; and the
# tag characters (U+E0000-U+E007F).
INVISIBLE = (
    "\u200b\u200c\u200d\u2060\ufeff\u200e\u200f\u061c\u202a-\u202e\u2066-\u2069"
    "\u00ad\u034f\u180e\u2061-\u2064\u115f\u1160\u3164\uffa0\U000e0000-\U000e007f"
)
_INVISIBLE = re.compile(f"[{INVISIBLE}]")
_TERMINAL_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def clean(text: str) -> str:
    """The stored form of a name, alias or tag: NFC, invisible characters removed."""
    return text if text.isascii() else unicodedata.normalize("NFC", _INVISIBLE.sub("", text))


def fold(text: str) -> str:
    """The comparison key of `text`: invisible characters removed, NFKC, case folded (Unicode's
    compatibility caseless match). ASCII text, the common case, is just lowercased."""
    if text.isascii():
        return text.lower()
    # normalize() answers already-normalized text (nearly all) from a quick check, without a copy. The second
    # pass: case folding can undo NFKC (U+01F0 folds to 'j' and a combining caron).
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", _INVISIBLE.sub("", text)).casefold())


def visible(text: str) -> str:
    """`text` with every terminal control character (newline and tab excepted) shown as a `\\uXXXX` escape."""
    return _TERMINAL_UNSAFE.sub(lambda m: f"\\u{ord(m[0]):04x}", text)


# A line markdown would read as structure rather than text: an ATX heading, a setext underline (which makes
# the line above a heading), an HTML block or a code fence (either can swallow the rest of a page) — also inside
# list items and quotes ("* # x", "1. # x", "> # x").
_MARKDOWN_BLOCK = re.compile(r"(?:(?:[-*+]|\d{1,9}[.)])\s+|>\s*)*(?:#|<|```|~~~)|=+\s*$|-+\s*$")


def inert_markdown(text: str) -> str:
    """`text` made `visible`, each of its lines that markdown would take for a heading, a setext underline, an
    HTML block or a code fence escaped with a backslash (`\\# Forged`), so stored text shown inside a
    markdown page cannot forge its structure."""
    if "\n" not in text and text.isprintable() and not _MARKDOWN_BLOCK.match(text.lstrip()):
        return text  # one plain line (most stored text): nothing to escape
    lines = visible(text).split("\n")
    for i, line in enumerate(lines):
        body = line.lstrip()
        if _MARKDOWN_BLOCK.match(body):
            lines[i] = f"{line[: len(line) - len(body)]}\\{body}"
    return "\n".join(lines)
