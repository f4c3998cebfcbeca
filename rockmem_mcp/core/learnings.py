"""Learnings (seed 003, layer 4): what went wrong before, so a session does not repeat it.

Two views over what is already stored — nothing new is written:
- `markdown`: the ToolFailure ("errors") or Correction ("corrections") feedback of the feedback log as a
  markdown page, newest first, each with its time, session and metadata (the seed's learnings/errors.md and
  learnings/corrections.md, served as resources rather than written into the home).
- `session_lines`: the lines a session's first recall adds — the anti-patterns (memories under the
  `anti-patterns` category, which the dream writes from corrections) that match the message, then the newest
  tool failures and corrections, all within `learnings_tokens` as `estimate_tokens` counts them.

The feedback log is one file per day and is read newest day first, only as far back as the listing needs;
each day's learnings are kept per file identity (inode, size, mtime), so a read after the first costs a
directory listing and a stat per day used. Stored text is data: on the page every content line is indented
(a markdown code block, where nothing forms a heading, list or tag) and metadata sits in code spans after a
fixed word; every piece of it goes through `visible`, so no terminal control code comes out.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import date, datetime
from typing import Literal

from rockmem_mcp.config import Settings
from rockmem_mcp.conversation.feedback import FeedbackLog
from rockmem_mcp.errors import InvalidInputError
from rockmem_mcp.memory.service import MemoryService
from rockmem_mcp.models import Feedback, ScoredEntry
from rockmem_mcp.text import visible
from rockmem_mcp.tokens import estimate_tokens

LearningKind = Literal["errors", "corrections"]
FEEDBACK_TYPE: dict[str, str] = {"errors": "ToolFailure", "corrections": "Correction"}
LEARNING_TYPES = ("ToolFailure", "Correction")
PAGE_TITLE = {"errors": "tool failures", "corrections": "corrections"}
LINE_LABEL = {"ToolFailure": "tool failure", "Correction": "correction"}

PAGE_LIMIT = 200  # items on a markdown page by default
MAX_PAGE_LIMIT = 1_000
ANTI_PATTERN_CATEGORY = "anti-patterns"
MAX_ANTI_PATTERNS = 5  # in a session's first recall
MAX_LINE_CONTENT_CHARS = 200
MAX_LINE_METADATA_CHARS = 80
CACHED_PER_DAY = 5_000  # a day with more learnings than this is parsed again at each read, not held
ANTI_PATTERNS_HEADING = "Anti-patterns (don't repeat these):"
LEARNINGS_HEADING = "Learnings (recent tool failures and corrections):"


@dataclass(frozen=True)
class _Day:
    identity: tuple[int, ...]  # the day's log as it was read (DailyLog.identity)
    learnings: tuple[Feedback, ...]  # its ToolFailure and Correction records, newest first


class Learnings:
    def __init__(self, feedback: FeedbackLog, memory: MemoryService, settings: Settings) -> None:
        self.feedback = feedback
        self.memory = memory
        self.settings = settings
        self._days: dict[date, _Day] = {}
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ reading the feedback log
    def newest(self, limit: int, types: tuple[str, ...] = LEARNING_TYPES) -> tuple[list[Feedback], bool]:
        """The newest `limit` feedback records of `types`, newest first, and whether older ones exist."""
        found: list[Feedback] = []
        if limit <= 0:
            return found, False
        days = self.feedback.log.days()
        for day in reversed(days):
            found += [f for f in self._learnings_of(day) if f.type in types]
            if len(found) > limit:
                break  # one more than asked: older ones exist, and older days hold only older ones
        self._forget_days_not_in(days)
        found.sort(key=lambda f: f.at, reverse=True)  # stable: records of one moment keep newest-first order
        return found[:limit], len(found) > limit

    def _learnings_of(self, day: date) -> tuple[Feedback, ...]:
        identity = self.feedback.log.identity(day)
        if identity is None:
            return ()
        with self._lock:
            cached = self._days.get(day)
        if cached is not None and cached.identity == identity:
            return cached.learnings
        # Read after the stat: a record appended meanwhile changes the size, so the next read sees it.
        learnings = tuple(f for f in reversed(self.feedback.log.read(day)) if f.type in LEARNING_TYPES)
        if len(learnings) <= CACHED_PER_DAY:
            with self._lock:
                self._days[day] = _Day(identity, learnings)
        return learnings

    def _forget_days_not_in(self, days: list[date]) -> None:
        with self._lock:
            if self._days.keys() - set(days):
                self._days = {day: held for day, held in self._days.items() if day in days}

    # ------------------------------------------------------------------ the resources' pages
    def markdown(self, kind: LearningKind, limit: int = PAGE_LIMIT) -> str:
        """The `kind` learnings as a markdown page, newest first, each under a heading with its time and
        session, then its id and metadata, then its content as an indented block."""
        if kind not in FEEDBACK_TYPE:
            raise InvalidInputError(f"kind must be one of {', '.join(FEEDBACK_TYPE)}; got {kind!r}")
        if not 1 <= limit <= MAX_PAGE_LIMIT:
            raise InvalidInputError(f"limit must be between 1 and {MAX_PAGE_LIMIT}; got {limit}")
        feedback_type = FEEDBACK_TYPE[kind]
        items, more = self.newest(limit, (feedback_type,))
        lines = [f"# Learnings — {PAGE_TITLE[kind]}", ""]
        if not items:
            lines.append(f"No {PAGE_TITLE[kind]} recorded yet (record_feedback with type {feedback_type}).")
            return "\n".join(lines) + "\n"
        summary = f"{feedback_type} feedback recorded with record_feedback, newest first: {len(items)} shown."
        if more:
            summary += f" Older ones exist: only the {limit} newest are shown (all are in feedback/*.jsonl)."
        lines += [summary, ""]
        for item in items:
            lines += _section(item)
        return "\n".join(lines)

    # ------------------------------------------------------------------ a session's first recall
    def anti_patterns(self, message: str) -> list[ScoredEntry]:
        """The anti-pattern memories that match `message` (BM25, as RockBot surfaces them), best first; with
        a blank message, the most salient ones."""
        if message.strip():
            return self.memory.search(
                message, category=ANTI_PATTERN_CATEGORY, limit=MAX_ANTI_PATTERNS, mode="bm25"
            ).results
        return self.memory.most_salient(MAX_ANTI_PATTERNS, category=ANTI_PATTERN_CATEGORY)

    def session_lines(self, message: str) -> list[str]:
        """The lines for a session's first recall (not wrapped: the caller wraps them): a heading and the
        anti-patterns that match `message`, then a heading and the newest `learnings_limit` tool failures and
        corrections, newest first; together within `learnings_tokens` (a part whose heading and first line do
        not fit is left out). [] when there is nothing."""
        budget = self.settings.learnings_tokens
        lines: list[str] = []
        if budget <= 0:
            return lines
        spent = 0
        newest = self.newest(min(self.settings.learnings_limit, MAX_PAGE_LIMIT))[0]
        parts = (
            (ANTI_PATTERNS_HEADING, map(_anti_pattern_line, self.anti_patterns(message))),
            (LEARNINGS_HEADING, map(_learning_line, newest)),
        )
        for heading, items in parts:
            taken: list[str] = []
            cost = _line_cost(heading)
            for item in items:  # formatted one by one: those past the budget are never formatted
                item_cost = _line_cost(item)
                if spent + cost + item_cost > budget:
                    break  # in order: a later, shorter item would break "newest first"
                taken.append(item)
                cost += item_cost
            if taken:
                lines += [heading, *taken]
                spent += cost
        return lines


def _line_cost(line: str) -> int:
    """A line's tokens with its line break: the lines' costs add up to at least the joined text's."""
    return estimate_tokens(line) + 1


def _flat(text: str) -> str:
    """One line, terminal-safe."""
    return visible(" ".join(text.split()))


def _cut(text: str, chars: int) -> str:
    flat = _flat(text)
    return flat if len(flat) <= chars else flat[:chars].rstrip() + "…"


def _when(at: datetime) -> str:
    return at.strftime("%Y-%m-%d %H:%M UTC")


def _anti_pattern_line(hit: ScoredEntry) -> str:
    entry = hit.entry
    return f"- [{entry.id}] ({entry.category}): {_cut(entry.content, MAX_LINE_CONTENT_CHARS)}"


def _learning_line(item: Feedback) -> str:
    context = ", ".join(f"{k}={v}" for k, v in item.metadata.items())
    context = f"; {_cut(context, MAX_LINE_METADATA_CHARS)}" if context else ""
    where = f"{_flat(item.session_id)}{context}"
    return f"- {_when(item.at)} {LINE_LABEL[item.type]} ({where}): {_cut(item.content, MAX_LINE_CONTENT_CHARS)}"


def _section(item: Feedback) -> list[str]:
    """One item of a page: the heading, a line starting with a fixed word (so no stored key can begin a line
    and make it a heading) holding the id and metadata in code spans, then every content line indented by
    four spaces — an indented code block, in which markdown forms nothing."""
    context = " · ".join([f"id {_code(item.id)}", *(f"{_code(k)} = {_code(v)}" for k, v in item.metadata.items())])
    body = [f"    {visible(line)}" if line.strip() else "" for line in item.content.strip("\r\n").splitlines()]
    return [f"## {_when(item.at)} · {_flat(item.session_id)}", "", f"Context: {context}", "", *body, ""]


def _code(text: str) -> str:
    """`text` as one inline code span: flattened, and fenced with more backticks than it holds in a row, so
    it cannot close the span early."""
    flat = _flat(text)
    longest = run = 0
    for char in flat:
        run = run + 1 if char == "`" else 0
        longest = max(longest, run)
    fence = "`" * (longest + 1)
    pad = " " if flat.startswith("`") or flat.endswith("`") else ""
    return f"{fence}{pad}{flat}{pad}{fence}"
