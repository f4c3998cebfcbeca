"""The one tokenizer, shared by indexing and querying in every store."""

from __future__ import annotations

import re

# Bump when tokenization changes: index snapshots made with another version are rebuilt.
TOKENIZER_VERSION = 1
MIN_TOKEN_CHARS = 3

# Runs of Unicode letters and digits; '_' and every other character separates (RockBot splits on
# [^a-z0-9]; matching letters in any script keeps 'café' and 'Zürich' searchable).
_WORD = re.compile(r"[^\W_]+")


def tokenize(text: str) -> list[str]:
    """Lowercase words of at least three characters, in order (order matters for word pairs)."""
    return [w for w in _WORD.findall(text.lower()) if len(w) >= MIN_TOKEN_CHARS]
