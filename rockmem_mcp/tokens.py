"""The one token estimator: what a text costs a model's context, counted offline.

Core-memory caps, the learnings and workspace budgets and the session-start bound are all counted by
`estimate_tokens`. There is no model's tokenizer here (none ships without a download, and every model counts
differently), so the estimate follows how byte-pair tokenizers such as OpenAI's cl100k and o200k split text,
and errs high rather than low:

- a run of ASCII letters costs one token per 6 letters, rounded up ("memory" 1, "architecture" 2), with the
  space before it free (BPE merges a leading space into the word);
- a run of digits costs one token per 3 digits (those tokenizers split numbers in threes);
- every other visible character costs one: punctuation and markdown marks ("-", "#", ":", "**" is 2), and
  each non-ASCII character (a CJK character is about one token; an accented letter splits its word);
- a run of whitespace holding a line break costs one; other whitespace is free.

On English prose it lands at about 4 characters per token, the usual rule of thumb; on list-heavy markdown,
such as MEMORY.md, it counts each mark the rule of thumb would miss.
"""

from __future__ import annotations

import re

_PIECES = re.compile(r"[A-Za-z]+|[0-9]+|\s*\n\s*|\s+|.", re.DOTALL)
LETTERS_PER_TOKEN = 6
DIGITS_PER_TOKEN = 3


def estimate_tokens(text: str) -> int:
    """The estimated token count of `text` (see the module's rules)."""
    total = 0
    for piece in _PIECES.findall(text):
        first = piece[0]
        if first.isascii() and first.isalpha():
            total += -(-len(piece) // LETTERS_PER_TOKEN)
        elif first.isdigit() and first.isascii():
            total += -(-len(piece) // DIGITS_PER_TOKEN)
        elif piece.isspace():
            total += 1 if "\n" in piece else 0
        else:
            total += 1
    return total
