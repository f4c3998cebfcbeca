"""The episodic store (seed 004 §5): what happened, when, as typed events in append-only daily logs.

An episode has content, a type (decision, fact, preference, task, event, emotion, correction), a confidence
(high, medium, low), tags and a source (conversation, reflection, user-explicit). Each is appended durably
to `episodes/{YYYY-MM-DD}.jsonl` (the UTC day it happened) and read back in order; the seed's daily
markdown log is a view of that file. Episodes are never edited; a user's explicit delete rewrites the day
without it. Time queries ("on", "between", "last week") read only the days in range.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, datetime, timedelta
from typing import get_args

from rockmem_mcp.config import Settings
from rockmem_mcp.errors import InvalidInputError
from rockmem_mcp.models import (
    Confidence,
    Episode,
    EpisodeSource,
    EpisodeType,
    as_utc,
    check_text,
    new_entry_id,
    normalize_tags,
    utc_now,
    validate_entry_id,
)
from rockmem_mcp.search.tokenizer import tokenize
from rockmem_mcp.storage.daily_log import DailyLog

EPISODE_TYPES: tuple[str, ...] = get_args(EpisodeType)
CONFIDENCES: tuple[str, ...] = get_args(Confidence)
SOURCES: tuple[str, ...] = get_args(EpisodeSource)


class Episodes:
    def __init__(self, settings: Settings, clock: Callable[[], datetime] = utc_now) -> None:
        self.settings = settings
        self.log = DailyLog(settings.episodes_dir, Episode)
        self._clock = clock

    def record(
        self,
        content: str,
        type: str = "event",
        confidence: str = "medium",
        tags: list[str] | None = None,
        source: str = "conversation",
        memory_id: str | None = None,
        at: datetime | None = None,
    ) -> Episode:
        """Append an episode to its day's log, durably; `at` defaults to now."""
        _one_of(type, EPISODE_TYPES, "type")
        _one_of(confidence, CONFIDENCES, "confidence")
        _one_of(source, SOURCES, "source")
        check_text(content, "content", self.settings.max_content_bytes, "ROCKMEM_MAX_CONTENT_BYTES", "Summarise it.")
        if not content.strip():
            raise InvalidInputError("content is empty: say what happened")
        episode = Episode(
            id=new_entry_id(),
            at=as_utc(at) if at is not None else self._clock(),
            type=type,  # type: ignore[arg-type]
            confidence=confidence,  # type: ignore[arg-type]
            tags=normalize_tags(tags, self.settings.max_tags),
            source=source,  # type: ignore[arg-type]
            content=content,
            memory_id=validate_entry_id(memory_id) if memory_id else None,
        )
        self.log.append(episode, episode.at.date())
        return episode

    def on(self, day: date) -> list[Episode]:
        """The day's episodes, in the order they happened."""
        return sorted(self.log.read(day), key=lambda e: e.at)

    def between(
        self, start: datetime, end: datetime, query: str | None = None, limit: int | None = None
    ) -> list[Episode]:
        """Episodes from `start` (inclusive) to `end` (exclusive), oldest first; with `query`, only those whose
        text holds every searchable word of it (as search tokenizes words)."""
        start, end = as_utc(start), as_utc(end)
        if end <= start:
            raise InvalidInputError("the end of the period must come after its start")
        words = set(tokenize(query)) if query else set()
        found = []
        for day in self.log.days():
            if start.date() <= day <= end.date():
                for episode in self.on(day):
                    if start <= episode.at < end and (not words or words <= set(tokenize(_text(episode)))):
                        found.append(episode)
        return found[:limit] if limit is not None else found

    def last(self, days: int, query: str | None = None) -> list[Episode]:
        """The last `days` days' episodes ("last week": 7), oldest first."""
        now = self._clock()
        return self.between(now - timedelta(days=days), now + timedelta(microseconds=1), query)

    def delete(self, episode_id: str, day: date) -> bool:
        """A user's explicit delete: the day's log is rewritten without the episode. False if it was not there."""
        validate_entry_id(episode_id)
        return self.log.remove_where(day, lambda episode: episode.id == episode_id) > 0

    def markdown(self, day: date) -> str:
        """The day as the seed's episode log: a title, then `## HH:MM | type | confidence:… | tags:[…]` and the
        content per episode. A content line that starts with `#` is escaped (`\\#`), so stored text cannot
        forge a heading."""
        lines = [f"# {day.isoformat()} — Episode Log", ""]
        for episode in self.on(day):
            at = episode.at  # UTC, as stored (strftime would cost a third of a 10,000-episode day)
            tags = ", ".join(episode.tags)
            lines.append(
                f"## {at.hour:02d}:{at.minute:02d} | {episode.type} | confidence:{episode.confidence} | tags:[{tags}]"
            )
            content = episode.content
            if "#" in content:
                content = "\n".join(
                    f"\\{line}" if line.lstrip().startswith("#") else line for line in content.split("\n")
                )
            lines += (content, "")
        return "\n".join(lines)


def _text(episode: Episode) -> str:
    return " ".join([episode.content, *episode.tags, episode.type])


def _one_of(value: str, allowed: tuple[str, ...], what: str) -> None:
    if value not in allowed:
        raise InvalidInputError(f"{what} must be one of {', '.join(allowed)}; got {value!r}")
