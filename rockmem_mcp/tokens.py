"""The one token estimator: what a text costs a model's context, counted offline.

Core-memory caps, the learnings and workspace budgets and the session-start bound are all counted by
`estimate_tokens`. There is no model's tokenizer here (none ships without a download, and every model counts
differently), so the estimate follows how byte-pair tokenizers such as OpenAI's cl100k and o200k split text.
On prose and markdown it errs high rather than low; strings a tokenizer has never seen (random letters, long
all-caps identifiers) can cost more than it says:

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

# One match per token: letters in runs of up to 6 and digits of up to 3 (greedy, so a run of n letters makes
# ceil(n / 6) matches), a line break with the whitespace after it, any other visible character. Whitespace
# without a line break matches nothing. Counting matches keeps the work in the regex engine (about 20× faster
# than a Python loop over pieces: core memory is counted on every edit).
_TOKENS = re.compile(r"[A-Za-z]{1,6}|[0-9]{1,3}|\n\s*|[^\sA-Za-z0-9]")


def estimate_tokens(text: str) -> int:
    """The estimated token count of `text` (see the module's rules)."""
    return len(_TOKENS.findall(text))
