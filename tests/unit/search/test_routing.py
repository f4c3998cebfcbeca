"""Retrieval by kind of question: which route a message takes, and the period a time phrase names."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from rockmem_mcp.search.routing import route, time_period

NOW = datetime(2026, 3, 4, 15, 0, tzinfo=UTC)  # a Wednesday in March


@pytest.mark.parametrize(
    ("message", "kind", "subject"),
    [
        ("When did we switch to PostgreSQL?", "when", "switch PostgreSQL"),
        ("How do I deploy to staging?", "how", "deploy staging"),
        ("What do you know about Alice?", "about", "Alice"),
        ("What's the latest on the migration?", "latest", "migration"),
        ("Remind me of the timezone", "general", "Remind me of the timezone"),
        ("what did we decide last week about pricing", "when", "pricing"),
    ],
)
def test_each_kind_of_question_takes_its_route(message: str, kind: str, subject: str) -> None:
    routed = route(message, NOW)
    assert (routed.kind, routed.subject) == (kind, subject)


def days(text: str) -> tuple[date, date] | None:
    found = time_period(text, NOW)
    return None if found is None else (found[0].date(), (found[1]).date())


def test_time_phrases_name_whole_utc_days_until_exclusive() -> None:
    assert days("what happened yesterday") == (date(2026, 3, 3), date(2026, 3, 4))
    assert days("last 7 days") == (date(2026, 2, 26), date(2026, 3, 5))  # today and the 6 before: 7 days
    assert days("the past week") == (date(2026, 2, 26), date(2026, 3, 5))  # the last 7 days, not last week
    assert days("last week") == (date(2026, 2, 23), date(2026, 3, 2))  # Monday to Sunday before this week
    assert days("on Monday") == (date(2026, 3, 2), date(2026, 3, 3))
    assert days("in March") == (date(2026, 3, 1), date(2026, 3, 5))  # this March, while it lasts
    assert days("last March") == (date(2025, 3, 1), date(2025, 4, 1))  # in March: a year ago
    assert days("in December") == (date(2025, 12, 1), date(2026, 1, 1))
    assert days("between 2026-02-10 and 2026-02-01") == (date(2026, 2, 1), date(2026, 2, 11))
    assert days("since 2027-01-01") == (date(2027, 1, 1), date(2027, 1, 2))  # the future: that day, not backwards
    assert days("2 weeks ago") == (date(2026, 2, 18), date(2026, 2, 25))


def test_dates_that_are_no_period_are_left_alone() -> None:
    for text in ("billing on 9999-12-31", "on 2026-02-30", "nothing here"):
        assert days(text) is None, text
    assert days("between 2026-01-01 and 9999-12-31") == (date(2026, 1, 1), date(2026, 1, 2))  # the date it can use
    assert route("what happened on 9999-12-31", NOW).since is None  # no crash, no period
