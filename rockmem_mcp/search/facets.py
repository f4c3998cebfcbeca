"""What a query names about a conversation memory: its speaker and the month it is dated (issue 24, lever 4).

Conversation memories may carry metadata `speaker` (who said it) and `date` (when: ISO "2023-05-08" or
"1:56 pm on 8 May, 2023"). A query that names a speaker or a month (with or without its year) lifts the
memories of that speaker or month: each adds its weight x the query's top score (rank.py). Memories without
the metadata are never touched. Pure functions: the index keeps one code per slot for each.
"""

from __future__ import annotations

import re

import numpy as np

MONTHS = (
    "january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
    "november", "december",
)  # fmt: skip
NO_CODE = -1
_WORD = re.compile(r"[^\W\d_]+|\d{4}")
_ISO = re.compile(r"\b(\d{4})-(\d{1,2})(?:-\d{1,2})?\b")
# "may" is a month only beside a year or after a word that introduces a time ("in May", "early May").
_MAY_CUES = frozenset({"in", "of", "early", "late", "mid", "during", "since", "until", "before", "after", "last"})


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def speaker_key(name: str | None) -> str | None:
    """The speaker as matched against queries: its lowercase words, space-joined; None when it has none."""
    found = [w for w in words(name or "") if not w.isdigit()]
    return " ".join(found) or None


def month_code(date: str | None) -> int:
    """year x 12 + month - 1 of a memory's `date`, or NO_CODE when it names no month and year."""
    if not date:
        return NO_CODE
    iso = _ISO.search(date)
    if iso and 1 <= int(iso.group(2)) <= 12:
        return int(iso.group(1)) * 12 + int(iso.group(2)) - 1
    found = words(date)
    month = next((MONTHS.index(w) for w in found if w in MONTHS), None)
    year = next((int(w) for w in found if w.isdigit()), None)
    return NO_CODE if month is None or year is None else year * 12 + month


def named_months(query: str) -> tuple[frozenset[int], frozenset[int]]:
    """The months (0-11) a query names, and the years it names (empty: any year)."""
    found = words(query)
    years = frozenset(int(w) for w in found if w.isdigit())
    months = set()
    for i, word in enumerate(found):
        if word not in MONTHS:
            continue
        if word == "may" and not years and (i == 0 or found[i - 1] not in _MAY_CUES):
            continue  # "May I ...", "What may ..."
        months.add(MONTHS.index(word))
    return frozenset(months), years


def in_months(codes: np.ndarray, months: frozenset[int], years: frozenset[int]) -> np.ndarray:
    """Which month codes fall in one of `months` (0-11), and in one of `years` unless that is empty."""
    inside = np.isin(codes % 12, list(months)) & (codes != NO_CODE)
    return inside & np.isin(codes // 12, list(years)) if years else inside


def names_speaker(query_words: set[str], speaker: str) -> bool:
    """Whether every word of a speaker key is among the query's words."""
    return all(word in query_words for word in speaker.split())
