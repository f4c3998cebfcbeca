"""Feedback: signals about how the agent did (a correction, a failed tool, a session summary, thumbs up or
down), logged durably per day in feedback/{date}.jsonl. The dream pass turns corrections into anti-patterns."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import get_args

from rockmem_mcp.audit.service import Audit, quoted
from rockmem_mcp.config import Settings
from rockmem_mcp.conversation.service import check_session_id
from rockmem_mcp.errors import InvalidInputError
from rockmem_mcp.models import Feedback, FeedbackType, check_metadata, check_text, new_entry_id, utc_now
from rockmem_mcp.storage.daily_log import DailyLog
from rockmem_mcp.storage.pg import is_database_url

FEEDBACK_TYPES: tuple[str, ...] = get_args(FeedbackType)
RECENT_DAYS = 7
RECENT_LIMIT = 50


def feedback_log(settings: Settings) -> DailyLog[Feedback]:
    """The feedback log: the home's day files, or the database replicas share (ROCKMEM_STORE), so corrections
    recorded on any replica become every replica's learnings and the dream's anti-patterns."""
    if is_database_url(settings.store):
        from rockmem_mcp.storage.pg import shared_database
        from rockmem_mcp.storage.pg_daily_log import PgDailyLog

        db = shared_database(str(settings.store), "stores", settings.store_schema)
        return PgDailyLog(db, "feedback", Feedback, settings.feedback_dir)  # type: ignore[return-value]
    return DailyLog(settings.feedback_dir, Feedback)


class FeedbackLog:
    def __init__(self, settings: Settings, clock: Callable[[], datetime] = utc_now) -> None:
        self.settings = settings
        self.log = feedback_log(settings)
        self.audit = Audit(settings)  # stamped by the wall clock: a store's own clock is its records' time
        self._clock = clock

    def record(
        self, feedback_type: str, content: str, session_id: str, metadata: dict[str, str] | None = None
    ) -> Feedback:
        if feedback_type not in FEEDBACK_TYPES:
            raise InvalidInputError(f"type must be one of {', '.join(FEEDBACK_TYPES)}; got {feedback_type!r}")
        check_text(content, "content", self.settings.max_content_bytes, "ROCKMEM_MAX_CONTENT_BYTES", "Summarise it.")
        if not content.strip():
            raise InvalidInputError("content is empty: say what happened, e.g. what the user corrected")
        now = self._clock()
        feedback = Feedback(
            id=new_entry_id(),
            type=feedback_type,  # type: ignore[arg-type]
            content=content,
            session_id=check_session_id(session_id),
            metadata=check_metadata(metadata, self.settings.max_metadata_bytes),
            at=now,
        )
        day = now.date()
        self.log.append(feedback, day)
        self.audit.record(
            "APPEND", self.log.path(day), f"{feedback.type} [{feedback.id}] {quoted(content)}",
            undo=lambda: self.log.remove_where(day, lambda f: f.id == feedback.id),
        )  # fmt: skip
        return feedback

    def recent(
        self, days: int = RECENT_DAYS, limit: int = RECENT_LIMIT, types: tuple[str, ...] = FEEDBACK_TYPES
    ) -> list[Feedback]:
        """The newest `limit` signals of these types from the last `days` days, oldest first."""
        if limit <= 0:
            return []
        now = self._clock()
        since = now - timedelta(days=days)
        found = [
            f
            for day in self.log.days()
            if day >= since.date()
            for f in self.log.read(day)
            if f.at >= since and f.type in types
        ]
        return found[-limit:]
