"""Conversation memory: a sliding window of recent turns per session, and an optional log for the dream pass.

The window lives in this process (a session is one client's conversation with it): the latest
`conversation_window` turns per session; a session idle for `conversation_idle_minutes` is forgotten, and
so is the least recently used one beyond 1,000 sessions or 64 MB of windows. With `conversation_log` on,
every turn is also appended, durably, to `conversations/{date}.jsonl`.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import get_args

from rockmem_mcp.config import Settings
from rockmem_mcp.errors import InvalidInputError
from rockmem_mcp.models import Conversation, ConversationTurn, Role, check_text, utc_now, working_key_segments
from rockmem_mcp.services.sessions import SessionTable
from rockmem_mcp.storage.daily_log import DailyLog

ROLES: tuple[str, ...] = get_args(Role)
MAX_LAST_N = 200
MAX_WINDOW_BYTES = 64_000_000  # the windows of every session together; the least recently used go first
TURN_OVERHEAD = 200  # bytes a turn costs besides its text (object, session id, time)


def check_session_id(session_id: object) -> str:
    parts = working_key_segments(session_id, "session_id")
    if len(parts) != 1:
        raise InvalidInputError("session_id is one segment of letters, digits, '.', ':', '-' or '_', e.g. 'chat-42'")
    return parts[0]


class ConversationMemory:
    def __init__(self, settings: Settings, clock: Callable[[], datetime] = utc_now) -> None:
        self.settings = settings
        self._clock = clock
        self._lock = threading.Lock()
        self._sessions: SessionTable[deque[ConversationTurn]] = SessionTable(
            idle=timedelta(minutes=settings.conversation_idle_minutes),
            max_bytes=MAX_WINDOW_BYTES,
            size=lambda window: sum(len(turn.content) + TURN_OVERHEAD for turn in window),
            clock=clock,
        )
        self.log = conversation_log(settings)

    def record(self, session_id: str, role: str, content: str) -> ConversationTurn:
        session_id = check_session_id(session_id)
        if role not in ROLES:
            raise InvalidInputError(f"role must be one of {', '.join(ROLES)}; got {role!r}")
        limit = self.settings.max_content_bytes
        check_text(content, "content", limit, "ROCKMEM_MAX_CONTENT_BYTES", "Record a summary of the turn.")
        now = self._clock()
        turn = ConversationTurn(session_id=session_id, role=role, content=content, at=now)  # type: ignore[arg-type]
        if self.settings.conversation_log:
            self.log.append(turn, now.date())  # first: a turn the window shows is never missing from the log
        with self._lock:
            window = self._sessions.open(session_id, lambda: deque(maxlen=self.settings.conversation_window))
            window.append(turn)
            self._sessions.resized(session_id)
        return turn

    def recent(self, session_id: str, last_n: int = 20) -> Conversation:
        session_id = check_session_id(session_id)
        if isinstance(last_n, bool) or not isinstance(last_n, int) or not 1 <= last_n <= MAX_LAST_N:
            raise InvalidInputError(f"last_n must be an integer from 1 to {MAX_LAST_N}")
        with self._lock:
            window = list(self._sessions.peek(session_id) or ())
        return Conversation(session_id=session_id, turns=window[-last_n:], kept=len(window))


def conversation_log(settings: Settings) -> DailyLog[ConversationTurn]:
    """The durable conversation log the dream pass reads (written only with `conversation_log` on)."""
    return DailyLog(settings.conversations_dir, ConversationTurn)
