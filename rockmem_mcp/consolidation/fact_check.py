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
A merged text must also keep every content word of each source (`lost_words`: the search tokenizer's stems,
stopwords aside), so a merge of "Bob is allergic to peanuts" and "Bob likes hiking" into "Bob likes hiking" is
refused naming "allergic, peanuts" (issue 45). Two allowances: `REWORDABLE` framing words, which say how a
fact is held rather than what it is ("likes" may become "prefers", "the user" may become a name), and another
form of a word whose stem begins with the other's, both at least `SAME_ROOT` letters ("allergic" kept by
"allergy": allerg/allergi, which the stemmer leaves apart).
Two texts contradict when they are about the same thing (most of their content words shared, or most of the
shorter one's: "Bob is allergic" against "Bob is not allergic, his doctor confirmed") and one negates a word
the other affirms, or each gives a value of one kind the other does not: times ("standup at 9am" / "… at
10am"), dates ("2026-03-05", "March 15"), amounts with one unit ("5kg" / "6kg"), ordinals and decimals. A bare
integer is taken for a name or a count, not a value: "note 1" and "note 2" are two notes (a merge must still
keep both numbers).

Every check is linear in the size of the texts: word sets, no search of one text per fact of another (a
merge of five 100 KB near-duplicates used to take seconds in a regular-expression search per detail).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache

from rockmem_mcp.search.tokenizer import STOPWORDS, tokenize

# Standalone, with a short unit written onto it ("9am", "10:30pm", "5kg", "3rd" are facts; issue 45: a merge of
# "standup at 9am" and "… 10am" kept 10am only), but the 3 of "S3" is part of a name.
_NUMBER = re.compile(r"(?<!\w)\d+(?:[.,:/]\d+)*(?:[^\W\d_]{1,3})?(?!\w)")
_WORD = re.compile(r"(?<!\w)[^\W\d_][\w'-]*")  # not the unit of "9am" or "5kg": that is the number's
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
# Framing words a merge may reword: they say how a fact is held, not what it is (see the module docstring).
REWORDABLE = frozenset(tokenize("user prefer like want use"))
SAME_ROOT = 5  # a stem this long that begins another is one word in another form (shorter: "car" in "card")
_MONTHS = "January|February|March|April|May|June|July|August|September|October|November|December"
# A day written with its month ("March 15", "15th of March") is a date though its number is bare.
_MONTH_DAY = re.compile(
    rf"\b(?:({_MONTHS})\s+(\d{{1,2}})(?:st|nd|rd|th)?|(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?({_MONTHS}))\b"
)
_ISO_DATE = re.compile(r"(?<!\w)\d{4}-\d{2}-\d{2}(?!\w)")
_VALUE_PARTS = re.compile(r"([\d.,:/]+)(\D*)")
_ORDINALS = frozenset({"st", "nd", "rd", "th"})
_KIND_NAMES = {"time": "times", "date": "dates", "ordinal": "ordinals", "decimal": "numbers"}


@dataclass(frozen=True)
class Facts:
    details: frozenset[str]  # numbers, proper nouns and date words, casefolded
    negated: frozenset[str]  # stems of the words a negation negates ("not" itself when none follows)
    in_scope: frozenset[str]  # stems of every content word within a negation's reach
    affirmed: frozenset[str]  # stems of the content words that are not under a negation
    words: frozenset[str]  # every casefolded word (and its parts around - and ') and number: what it carries
    values: frozenset[tuple[str, str, str]]  # (kind, comparable value, as written): see `_values`


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
        values=_values(plain),
    )


def _values(plain: str) -> frozenset[tuple[str, str, str]]:
    """The values `plain` gives, each as (kind, a key equal for equal values, as written): times (9am, 9:00 and
    09:00 are one), ISO dates and days with their month name, amounts by their unit, ordinals, decimals. Bare
    integers are left out (module docstring)."""
    found: set[tuple[str, str, str]] = set()
    taken: set[int] = set()  # where a number already read as part of a date starts
    for match in _ISO_DATE.finditer(plain):
        found.add(("date", match[0], match[0]))
        taken.update(range(match.start(), match.end()))
    for match in _MONTH_DAY.finditer(plain):
        month, day = match[1] or match[4], match[2] or match[3]
        found.add(("date", f"{month.casefold()} {int(day)}", match[0]))
        taken.update(range(match.start(), match.end()))
    for match in _NUMBER.finditer(plain):
        if match.start() not in taken and (value := _value(match[0])) is not None:
            found.add(value)
    return frozenset(found)


def _value(number: str) -> tuple[str, str, str] | None:
    parts = _VALUE_PARTS.fullmatch(number.casefold())
    if parts is None:
        return None
    digits, unit = parts[1], parts[2]
    if unit in ("am", "pm") or (":" in digits and not unit):
        hour, _, minute = digits.replace(".", ":").partition(":")
        if not hour.isdigit() or not (minute or "0").isdigit():
            return None
        hours = int(hour) % 12 + (12 if unit == "pm" else 0) if unit else int(hour)
        return "time", f"{hours:02d}:{int(minute or 0):02d}", number
    if unit in _ORDINALS:
        return "ordinal", digits, number
    if unit:
        return unit, digits.replace(",", ""), number
    if "/" in digits:
        return "date", digits, number
    if "." in digits or "," in digits:
        return "decimal", digits.replace(",", ""), number
    return None


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


def lost_words(sources: Mapping[str, str], merged: str) -> dict[str, list[str]]:
    """The content words of each source (id → text) that `merged` does not carry, as the source writes them,
    keyed by the source's id: words compared by the search tokenizer's stems ("peanut" keeps "peanuts"),
    stopwords, negations (`lost_facts` checks those) and `REWORDABLE` words aside; a stem that begins another
    (SAME_ROOT letters or more) is the same word."""
    kept = set(tokenize(_plain(merged)))
    # Every prefix of SAME_ROOT letters or more of a kept stem: a set, so the check stays linear in the texts
    begun = {stem[:n] for stem in kept for n in range(SAME_ROOT, len(stem) + 1)}

    def carried(stem: str) -> bool:
        if stem in kept or (len(stem) >= SAME_ROOT and stem in begun):
            return True
        return any(stem[:n] in kept for n in range(SAME_ROOT, len(stem)))

    dropped = {}
    for source_id, text in sources.items():
        if words := [word for stem, word in _content_words(text) if not carried(stem)]:
            dropped[source_id] = words
    return dropped


@lru_cache(maxsize=256)
def _content_words(text: str) -> tuple[tuple[str, str], ...]:
    """(stem, word as written) of each content word of `text`, first occurrence of each stem, in order."""
    found: dict[str, str] = {}
    for word in _WORD.findall(_plain(text)):
        if not _is_negation(word.casefold()):
            for stem in tokenize(word):
                if stem not in REWORDABLE:
                    found.setdefault(stem, word)
    return tuple(found.items())


def merge_loss(sources: Mapping[str, str], merged: str) -> str | None:
    """Why `merged` does not keep every fact of `sources` (id → text), or None when it does: the details and
    negations it drops (`lost_facts`), then each source whose words it drops, by id, with the words. Written
    for the model that proposed the merge, so it can retry."""
    missing = lost_facts(list(sources.values()), merged)
    named = set(missing)
    words = {
        source_id: shown
        for source_id, dropped in lost_words(sources, merged).items()
        if (shown := [w for w in dropped if w.casefold().removesuffix("'s") not in named])
    }
    parts = [f"the merged text drops details of its sources: {', '.join(missing)}"] if missing else []
    if words:
        said = "; ".join(f'{i} ("{_excerpt(sources[i])}"): {", ".join(w)}' for i, w in words.items())
        parts.append(
            f"the merged text drops words of {said} — write every fact of each source into it (only how a fact is "
            "held may be reworded: user, likes, prefers, wants, uses), or leave that memory out of the merge"
        )
    return "; ".join(parts) or None


def _excerpt(text: str, limit: int = 60) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def contradiction(a: str, b: str) -> str | None:
    """Why `a` and `b` contradict each other, or None: about the same thing, and one negates what the other
    affirms, or each gives a time, date or amount of one kind the other does not ("standup at 9am" / "… at
    10am"; module docstring). Bare integers differing are no contradiction ("note 1" and "note 2" are two
    notes); a merge that drops one is refused by `lost_facts`."""
    return clash(facts(a), facts(b))


def clash(fa: Facts, fb: Facts) -> str | None:
    """`contradiction` of two texts' facts (a scan over many texts reads each text's facts once)."""
    content_a, content_b = fa.affirmed | fa.in_scope, fb.affirmed | fb.in_scope
    shared, union = len(content_a & content_b), len(content_a | content_b)
    shorter = min(len(content_a), len(content_b))
    if not shorter or (shared / union < SAME_SUBJECT and shared / shorter < SAME_SUBJECT_SHORTER):
        return None
    flipped = sorted((fa.negated & (fb.affirmed - fb.in_scope)) | (fb.negated & (fa.affirmed - fa.in_scope)))
    if flipped:
        return f"one negates what the other affirms: {', '.join(flipped)}"
    return _different_values(fa.values, fb.values)


def _different_values(a: frozenset[tuple[str, str, str]], b: frozenset[tuple[str, str, str]]) -> str | None:
    """A kind of value of which each text gives one the other does not (one giving more is only more detail)."""
    for kind in sorted({k for k, _, _ in a} & {k for k, _, _ in b}):
        keys_a, keys_b = {key for k, key, _ in a if k == kind}, {key for k, key, _ in b if k == kind}
        if keys_a - keys_b and keys_b - keys_a:
            only_a = sorted({said for k, key, said in a if k == kind and key not in keys_b})
            only_b = sorted({said for k, key, said in b if k == kind and key not in keys_a})
            name = _KIND_NAMES.get(kind, f"amounts in {kind}")
            return f"they give different {name}: {', '.join(only_a)} / {', '.join(only_b)}"
    return None


_NEGATION_CLUE = re.compile(r"\b(?:" + "|".join(sorted(_NEGATIONS)) + r")\b|n['\u2019]t\b", re.IGNORECASE)
_DIGIT = re.compile(r"\d")


def clues(text: str) -> tuple[bool, bool]:
    """(whether `text` has a negation, whether it has a digit), by regular expressions: a pair of texts can only
    contradict when one has a negation or both have a digit (a value to differ), so a scan reads the facts of
    the few pairs that pass."""
    return bool(_NEGATION_CLUE.search(text)), bool(_DIGIT.search(text))


def contradictions(texts: dict[str, str]) -> list[tuple[str, str, str]]:
    """Every pair of `texts` (id → text) that contradicts: (id, id, reason)."""
    ids = list(texts)
    found = []
    for i, a in enumerate(ids):
        for b in ids[i + 1 :]:
            if (reason := contradiction(texts[a], texts[b])) is not None:
                found.append((a, b, reason))
    return found
