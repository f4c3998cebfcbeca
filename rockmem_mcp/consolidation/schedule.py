"""When the reflection schedule fires (`reflection_at`, local time): one home for the rule, read by the reflection
(its summary names the next run) and by the triggers (they start it)."""

from __future__ import annotations

from datetime import datetime, time, timedelta


def _local(moment: datetime) -> datetime:
    return moment.astimezone()  # the machine's zone: "3 a.m." is the user's night


def last_scheduled(now: datetime, at: str) -> datetime:
    """The latest scheduled moment at or before `now` (local time `at`, HH:MM)."""
    hour, minute = (int(part) for part in at.split(":"))
    local = _local(now)
    today = datetime.combine(local.date(), time(hour, minute), local.tzinfo)
    return today if today <= local else today - timedelta(days=1)


def next_scheduled(now: datetime, at: str) -> datetime:
    """The next scheduled moment after `now`, local time."""
    return last_scheduled(now, at) + timedelta(days=1)
