"""Retrieval by kind of question (seed 004 §11.1): which store a message is answered from, by phrase rules.

No model is needed: a message is matched against the rules below, in this order, case-insensitively; the first
that matches names the route, and what the rule's phrase and any time phrase leave of the message is the
subject that is searched for.

| route    | phrases (examples)                                                      | answered from              |
|----------|-------------------------------------------------------------------------|----------------------------|
| `when`   | "when did/was/were/have …", "what happened …", "what did we do …",      | episodes: the period's, by |
|          | "how long ago …", "what date …"                                         | time and keywords          |
| `how`    | "how do/can/should I/we …", "how to …", "how did we …", "steps to …",   | procedures whose trigger   |
|          | "what's the process/procedure/way to …"                                 | matches, then memories     |
| `about`  | "what do you know/remember about X", "tell me about X", "who is X"      | the entity X and 2 hops of |
|          |                                                                         | the graph, memories of X   |
| `latest` | "what's the latest on X", "any updates on X", "what's new with X",       | recent episodes (14 days)  |
|          | "status of X"                                                           | and core's Active Context  |
| `general`| anything else                                                           | hybrid over every store    |

Time phrases, found anywhere in a message (they also narrow the `when` route's period): an ISO date
(`on 2026-03-04`), `between <date> and <date>`, `today`, `yesterday`, `this/last week`, `this/last month`,
`this/last year`, `past week/month/year` (the last 7/30/365 days, today included), `last/past N
days/weeks/months` (N days with today: "last 7 days" is today and the 6 before), `N days/weeks/months ago`, a
weekday (`on Monday`: the last one before today), a month name (`in March`: the last March begun, this one
while it lasts; `last March`: the one before the current month's year when it is March now). A date past the
calendar's end is no period.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Literal

RouteKind = Literal["when", "how", "about", "latest", "general"]
LATEST_DAYS = 14

_RULES: list[tuple[RouteKind, re.Pattern[str]]] = [
    (kind, re.compile(pattern, re.IGNORECASE))
    for kind, pattern in [
        ("when", r"\bwhen (?:did|was|were|do|does|is|are|have|has|had|will)\b"),
        ("when", r"\bwhat (?:happened|did (?:we|i|you) (?:do|decide|discuss|talk about))\b"),
        ("when", r"\bhow long ago\b|\bwhat (?:date|day|time) (?:did|was|were)\b"),
        ("how", r"\bhow (?:do|can|should|would|did|to)(?: (?:i|we|you))?(?: usually)?\b"),
        ("how", r"\b(?:steps|procedure|process|way|workflow) (?:to|for)\b"),
        ("about", r"\bwhat (?:do|did) you (?:know|remember|recall) (?:about|of|on)\b"),
        ("about", r"\btell me (?:about|everything about)\b|\bwho (?:is|are|was)\b"),
        (
            "latest",
            r"\b(?:what(?:'s| is) the latest|any (?:updates?|news)|what(?:'s| is) new)(?: (?:on|with|about|for))?\b",
        ),
        ("latest", r"\b(?:the )?(?:current )?status (?:of|on)\b|\bwhere are we (?:on|with)\b"),
    ]
]

_WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
_MONTHS = [
    *("january", "february", "march", "april", "may", "june", "july"),
    *("august", "september", "october", "november", "december"),
]
_UNITS = {"day": 1, "week": 7, "month": 30, "year": 365}
_ISO = r"(\d{4}-\d{2}-\d{2})"
_TIME_PHRASES: list[tuple[str, re.Pattern[str]]] = [
    (name, re.compile(pattern, re.IGNORECASE))
    for name, pattern in [
        ("between", rf"\b(?:between|from) {_ISO} (?:and|to|until) {_ISO}\b"),
        ("on", rf"\b(?:on |since )?{_ISO}\b"),
        ("relative", r"\b(today|yesterday)\b"),
        ("this-last", r"\b(this|last|past) (week|month|year)\b"),
        ("past-n", r"\b(?:last|past|previous) (\d{1,3}) (day|week|month|year)s?\b"),
        ("ago", r"\b(\d{1,3}) (day|week|month|year)s? ago\b"),
        ("weekday", rf"\b(?:on |last )?({'|'.join(_WEEKDAYS)})\b"),
        ("month", rf"\b(?:in |last |during )({'|'.join(_MONTHS)})\b"),
    ]
]
_FILLER = re.compile(
    r"\b(?:we|i|you|us|our|my|the|a|an|did|do|does|was|were|is|are|have|has|had|on|in|at|of|about|with|for|to|"
    r"what|when|how|who|usually|again|happened|any|me|tell|know|remember|recall|latest|updates?|news|new|"
    r"status|current|where)\b|[?!.,;:]",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Route:
    kind: RouteKind
    subject: str  # the message less the rule's phrase and the time phrase: what is searched for
    since: datetime | None = None  # the period a time phrase named (UTC; `until` exclusive)
    until: datetime | None = None
    rule: str = ""  # the phrase that chose the route (or the time phrase), for the reply

    def describe(self) -> str:
        period = ""
        if self.since is not None and self.until is not None:
            period = ", " + period_text(self.since, self.until)
        said = f' ("{self.rule}"' + period + ")" if self.rule else (f" ({period[2:]})" if period else "")
        return f"{self.kind}{said}"


def route(message: str, now: datetime) -> Route:
    """The route for `message` at `now` (UTC)."""
    text = " ".join(message.split())
    kind: RouteKind = "general"
    rule = ""
    for candidate, pattern in _RULES:
        found = pattern.search(text)
        if found:
            kind, rule = candidate, found.group(0)
            text = text[: found.start()] + " " + text[found.end() :]
            break
    since = until = None
    period = time_period(text, now)
    if period is not None:
        since, until, phrase = period
        text = text.replace(phrase, " ")
        if kind == "general":  # "what did we decide last week": a time phrase alone asks for episodes
            kind, rule = "when", phrase
    if kind == "latest" and since is None:
        today = now.astimezone(UTC).date()
        since, until = _midnight(today - timedelta(days=LATEST_DAYS)), _midnight(today + timedelta(days=1))
    subject = " ".join(_FILLER.sub(" ", text).split()) if kind != "general" else " ".join(message.split())
    return Route(kind, subject, since, until, rule)


def period_text(since: datetime, until: datetime) -> str:
    """A period as its first and last day, e.g. '2026-11-16 to 2026-11-22'."""
    return f"{since.date().isoformat()} to {(until - timedelta(microseconds=1)).date().isoformat()}"


def time_period(text: str, now: datetime) -> tuple[datetime, datetime, str] | None:
    """The first time phrase in `text`: its period [since, until) in UTC and the phrase itself."""
    today = now.astimezone(UTC).date()
    for name, pattern in _TIME_PHRASES:
        found = pattern.search(text)
        if not found:
            continue
        try:
            days = _days(name, found, today)
            if days is not None:
                first, last = days
                return _midnight(first), _midnight(last + timedelta(days=1)), found.group(0)
        except OverflowError:  # a date at the calendar's end (9999-12-31): no period a search could use
            continue
    return None


def _days(name: str, found: re.Match[str], today: date) -> tuple[date, date] | None:
    """The first and last day a time phrase names (None for one that names no real date)."""
    groups = [g.lower() if g else g for g in found.groups()]
    try:
        if name == "between":
            first, last = date.fromisoformat(groups[0]), date.fromisoformat(groups[1])
            return (first, last) if first <= last else (last, first)
        if name == "on":
            day = date.fromisoformat(groups[0])
            return (day, max(day, today)) if found.group(0).lower().startswith("since") else (day, day)
    except ValueError:
        return None
    if name == "relative":
        day = today if groups[0] == "today" else today - timedelta(days=1)
        return day, day
    if name == "this-last":
        which, unit = groups
        if which == "past":  # "past week": the last 7 days (as "past 7 days"), not the calendar week before
            return today - timedelta(days=_UNITS[unit] - 1), today
        if unit == "week":
            start = today - timedelta(days=today.weekday())
            return (start, today) if which == "this" else (start - timedelta(days=7), start - timedelta(days=1))
        if unit == "month":
            start = today.replace(day=1)
            if which == "this":
                return start, today
            previous = (start - timedelta(days=1)).replace(day=1)
            return previous, start - timedelta(days=1)
        start = today.replace(month=1, day=1)
        return (start, today) if which == "this" else (start.replace(year=start.year - 1), start - timedelta(days=1))
    if name == "past-n":  # "last 7 days": today and the 6 before it
        return today - timedelta(days=int(groups[0]) * _UNITS[groups[1]] - 1), today
    if name == "ago":
        day = today - timedelta(days=int(groups[0]) * _UNITS[groups[1]])
        return day, day if groups[1] == "day" else day + timedelta(days=_UNITS[groups[1]] - 1)
    if name == "weekday":
        back = (today.weekday() - _WEEKDAYS.index(groups[0])) % 7 or 7
        day = today - timedelta(days=back)
        return day, day
    month = _MONTHS.index(groups[0]) + 1
    last = found.group(0).lower().startswith("last")  # "last March" in March: a year ago; "in March": this one
    year = today.year if month < today.month or (month == today.month and not last) else today.year - 1
    start = date(year, month, 1)
    end = date(year + (month == 12), month % 12 + 1, 1) - timedelta(days=1)
    return start, min(end, today)


def _midnight(day: date) -> datetime:
    return datetime.combine(day, time(0), tzinfo=UTC)
