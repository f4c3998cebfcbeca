"""What a dream merge must keep, and when two memories contradict each other.

One module, used by every merge path (the deterministic pass, a server model's plan, MCP sampling, an agent's
apply_dream, a CLI plan file). The facts of a text are:
- its numbers (dates written with digits among them) and proper nouns: capitalised words that are not common
  words ("Bob", "Zürich", "March", "S3");
- its date words written in lower case ("friday", "june");
- its negations, each with the word it negates: "Bob is not allergic" negates "allergic", "never wants emails"
  negates "want" (stemmed, so "does not want" keeps it).
A merged text keeps a source's facts when each of them is in it, a negation reaching the same word again
("does not seem allergic" keeps "not allergic"; "allergic to peanuts, not shellfish" does not).
A merged text that negates a word a source affirms (and affirms it nowhere) inverts that source's fact.
Two texts contradict when they are about the same thing (most of their content words shared, or most of the
shorter one's: "Bob is allergic" against "Bob is not allergic, his doctor confirmed") and one negates a word
the other affirms.

Every check is linear in the size of the texts: word sets, no search of one text per fact of another (a
merge of five 100 KB near-duplicates used to take seconds in a regular-expression search per detail).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from rockmem_mcp.search.tokenizer import STOPWORDS, tokenize

# Standalone, with a short unit written onto it ("9am", "10:30pm", "5kg", "3rd" are facts; issue 45: a merge of
# "standup at 9am" and "… 10am" kept 10am only), but the 3 of "S3" is part of a name.
_NUMBER = re.compile(r"(?<!\w)\d+(?:[.,:/]\d+)*(?:[^\W\d_]{1,3})?(?!\w)")
_WORD = re.compile(r"[^\W\d_][\w'-]*")
_COMMON = STOPWORDS | {
    "user", "users", "the", "i", "we", "they", "he", "she", "it", "this", "that", "these", "those", "don't",
    "do", "never", "always", "use", "prefer", "prefers", "likes", "wants", "instead", "when", "if", "for",
}  # fmt: skip
_DATE_WORDS = frozenset(
    "monday tuesday wednesday thursday friday saturday sunday january february april june july august "
    "september october november december".split()  # "may" and "march" are common words in lower case
)
_NEGATIONS = frozenset("not no never cannot nor neither none nobody nothing nowhere without".split())
NEGATION_SCOPE = 3  # a negation reaches the next three words and negates the first content word among them
SAME_SUBJECT = 0.6  # content-word Jaccard from which two texts are about the same thing
SAME_SUBJECT_SHORTER = 0.75  # or share of the shorter text's content words (padding lowers the Jaccard)


@dataclass(frozen=True)
class Facts:
    details: frozenset[str]  # numbers, proper nouns and date words, casefolded
    negated: frozenset[str]  # stems of the words a negation negates ("not" itself when none follows)
    in_scope: frozenset[str]  # stems of every content word within a negation's reach
    affirmed: frozenset[str]  # stems of the content words that are not under a negation
    words: frozenset[str]  # every casefolded word (and its parts around - and ') and number: what it carries


_SPACED_UNIT = re.compile(r"(?<=\d) +(am|pm)\b", re.IGNORECASE)


def _plain(text: str) -> str:
    # Models often write the typographic apostrophe; "10 am" is the fact "10am" (a twin written either way merges)
    return _SPACED_UNIT.sub(r"\1", text.replace("\u2019", "'"))


def _is_negation(word: str) -> bool:
    return word in _NEGATIONS or word.endswith("n't")


@lru_cache(maxsize=256)
def facts(text: str) -> Facts:
    plain = _plain(text)
    numbers = frozenset(n.casefold() for n in _NUMBER.findall(plain))
    found = _WORD.findall(plain)
    folded = [w.casefold() for w in found]
    details = {w.casefold().removesuffix("'s") for w in found if w[0].isupper() and w.casefold() not in _COMMON}
    details |= {w for w in folded if w in _DATE_WORDS}
    stems_of = {w: [] if _is_negation(w) else tokenize(w) for w in set(folded)}
    negated: set[str] = set()
    under: set[int] = set()
    for i, word in enumerate(folded):
        if _is_negation(word):
            scope = [j for j in range(i + 1, min(i + 1 + NEGATION_SCOPE, len(folded))) if stems_of[folded[j]]]
            negated.add(stems_of[folded[scope[0]]][0] if scope else "not")
            under.update(scope)
    affirmed = {s for j, w in enumerate(folded) if j not in under for s in stems_of[w]}
    in_scope = {s for j in under for s in stems_of[folded[j]]}
    return Facts(
        details=frozenset(details) | numbers,
        negated=frozenset(negated),
        in_scope=frozenset(in_scope | negated),
        affirmed=frozenset(affirmed),
        words=frozenset(folded) | {p for w in folded for p in re.split(r"[-']", w) if p} | numbers,
    )


def details(text: str) -> set[str]:
    """Numbers, proper nouns and date words of `text`, casefolded."""
    return set(facts(text).details)


def lost_facts(sources: list[str], merged: str) -> list[str]:
    """The facts of `sources` that `merged` no longer carries: details by name, negations as "not <word>",
    words a source affirms that `merged` only negates as "<word> now negated"."""
    kept = facts(merged)
    inverted = kept.negated - kept.affirmed
    missing: set[str] = set()
    for source in sources:
        found = facts(source)
        missing |= found.details - kept.words
        missing |= {f"not {w}" if w != "not" else "a negation" for w in found.negated - kept.in_scope}
        missing |= {f"{w} now negated" for w in found.affirmed & inverted}
    return sorted(missing)


def contradiction(a: str, b: str) -> str | None:
    """Why `a` and `b` contradict each other, or None: about the same thing, one negates what the other
    affirms. (Different numbers are not a contradiction here: "note 1" and "note 2" are two notes; a merge
    that drops one is refused by `lost_facts`.)"""
    fa, fb = facts(a), facts(b)
    content_a, content_b = fa.affirmed | fa.in_scope, fb.affirmed | fb.in_scope
    shared, union = len(content_a & content_b), len(content_a | content_b)
    shorter = min(len(content_a), len(content_b))
    if not shorter or (shared / union < SAME_SUBJECT and shared / shorter < SAME_SUBJECT_SHORTER):
        return None
    flipped = sorted((fa.negated & (fb.affirmed - fb.in_scope)) | (fb.negated & (fa.affirmed - fa.in_scope)))
    return f"one negates what the other affirms: {', '.join(flipped)}" if flipped else None


def contradictions(texts: dict[str, str]) -> list[tuple[str, str, str]]:
    """Every pair of `texts` (id → text) that contradicts: (id, id, reason)."""
    ids = list(texts)
    found = []
    for i, a in enumerate(ids):
        for b in ids[i + 1 :]:
            if (reason := contradiction(texts[a], texts[b])) is not None:
                found.append((a, b, reason))
    return found
