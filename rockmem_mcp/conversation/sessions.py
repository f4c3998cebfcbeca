"""State a server process keeps per caller-chosen session id (recall's delta sets, conversation windows).

Any caller may name a new session on every call, so the table is bounded: at most `max_sessions` sessions
and about `max_bytes` in all (least recently used released first), and a session unused for `idle` is
released. Every operation is O(1) amortised: the sessions are kept in order of last use, so the idle and
the evicted are always at the front. Not thread-safe: callers hold their own lock.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Generic, TypeVar

MAX_SESSIONS = 1_000  # per table; the least recently used beyond it is released

State = TypeVar("State")


class SessionTable(Generic[State]):
    def __init__(
        self,
        *,
        idle: timedelta,
        max_bytes: int,
        size: Callable[[State], int],
        clock: Callable[[], datetime],
        max_sessions: int = MAX_SESSIONS,
    ) -> None:
        self._idle = idle
        self._max_bytes = max_bytes
        self._max_sessions = max_sessions
        self._size = size
        self._clock = clock
        self._states: OrderedDict[str, State] = OrderedDict()  # least recently used first
        self._used: dict[str, datetime] = {}
        self._sizes: dict[str, int] = {}
        self.bytes = 0  # the sizes of every session's state together, as `size` measures them

    def __len__(self) -> int:
        self._release_idle()
        return len(self._states)

    def __contains__(self, session_id: str) -> bool:
        self._release_idle()
        return session_id in self._states

    def peek(self, session_id: str) -> State | None:
        """The session's state, if it has one; reading does not count as use."""
        self._release_idle()
        return self._states.get(session_id)

    def open(self, session_id: str, new: Callable[[], State], used_at: datetime | None = None) -> State:
        """The session's state (made with `new` if it has none), marked as used now (or at `used_at`: a session
        restored from an earlier process, opened oldest first, keeps its own idle time)."""
        self._release_idle()
        state = self._states.get(session_id)
        if state is None:
            state = self._states[session_id] = new()
            self._sizes[session_id] = 0
        self._states.move_to_end(session_id)
        self._used[session_id] = used_at or self._clock()
        self.resized(session_id)
        return state

    def resized(self, session_id: str) -> None:
        """Call after changing a session's state: measures it again and releases the least recently used
        other sessions while the table is over its bounds."""
        if session_id not in self._states:
            return
        size = self._size(self._states[session_id])
        self.bytes += size - self._sizes[session_id]
        self._sizes[session_id] = size
        while len(self._states) > 1 and (len(self._states) > self._max_sessions or self.bytes > self._max_bytes):
            order = iter(self._states)
            victim = next(order)
            self.pop(victim if victim != session_id else next(order))

    def items(self) -> list[tuple[str, State]]:
        """Every live session's id and state, least recently used first."""
        self._release_idle()
        return list(self._states.items())

    def pop(self, session_id: str) -> State | None:
        state = self._states.pop(session_id, None)
        if state is not None:
            del self._used[session_id]
            self.bytes -= self._sizes.pop(session_id)
        return state

    def _release_idle(self) -> None:
        cutoff = self._clock() - self._idle
        while self._states:
            oldest = next(iter(self._states))
            if self._used[oldest] > cutoff:
                return
            self.pop(oldest)
