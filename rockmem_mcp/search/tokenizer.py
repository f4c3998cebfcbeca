"""The one tokenizer, shared by indexing and querying in every store.

Words are runs of Unicode letters and digits, folded as names are (`text.fold`: NFKC and case folding, so
"café" typed composed or decomposed and the full-width "ｃａｆé" are one word), English stopwords dropped,
each reduced to its Snowball (Porter 2) stem so "painting", "painted" and "paints" meet. Measured on LoCoMo
dev (BENCHMARKS.md): stopwords and stemming lift turn-level recall@5 from 0.486 to 0.58 over RockBot's plain
3-character rule.
"""

from __future__ import annotations

import re
import threading
from functools import lru_cache

import snowballstemmer

from rockmem_mcp.text import fold

# Bump when tokenization changes: index snapshots made with another version are rebuilt.
TOKENIZER_VERSION = 3
# Letters-only words shorter than this are dropped ("a", "I"); numbers of any length are kept ("5", "42").
MIN_TOKEN_CHARS = 2

# Runs of Unicode letters and digits; '_' and every other character separates (RockBot splits on
# [^a-z0-9]; matching letters in any script keeps 'café' and 'Zürich' searchable).
_WORD = re.compile(r"[^\W_]+")

# Function words that carry no topic: they match nearly every memory, inflate posting lists and, as
# neighbours, turn the pair bonus into noise. A common English IR list, plus contractions split by _WORD.
STOPWORDS = frozenset(
    """
    a about above after again against all also am an and any are as at be because been before being below
    between both but by can could did do does doing down during each either ever few for from further had has
    have having he her here hers herself him himself his how i if in into is it its itself just let me more
    most my myself no nor not now of off on once only or other ought our ours ourselves out over own same
    she should so some such than that the their theirs them themselves then there these they this those
    through to too under until up very was we were what when where which while who whom why will with would
    you your yours yourself yourselves ll re ve don didn doesn isn wasn aren weren won wouldn couldn
    shouldn haven hasn hadn
    """.split()
)


class _ThreadStemmers(threading.local):
    """One Snowball stemmer per thread: a stemmer keeps the word it works on in its own attributes, so two
    threads sharing one (a tool call and the graph loading in the background) garble each other's stems or
    fail with IndexError, and the cache below would keep a garbled stem for good."""

    def __init__(self) -> None:
        self.english = snowballstemmer.stemmer("english")


_STEMMERS = _ThreadStemmers()


@lru_cache(maxsize=262_144)
def _stem(word: str) -> str:
    # Stemming is the costly step; vocabularies repeat, so a bounded cache makes it a dict lookup.
    return _STEMMERS.english.stemWord(word)


def tokenize(text: str) -> list[str]:
    """Stemmed content words of `text`, in order (order matters for word pairs)."""
    return [
        _stem(w) for w in _WORD.findall(fold(text)) if w not in STOPWORDS and (len(w) >= MIN_TOKEN_CHARS or w.isdigit())
    ]
