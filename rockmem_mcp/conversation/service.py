"""Conversation memory: a sliding window of recent turns per session, and an optional log for the dream pass.

The window lives in this process (a session is one client's conversation with it): the latest
`conversation_window` turns per session; a session idle for `conversation_idle_minutes` is forgotten, and
so is the least recently used one beyond 1,000 sessions or 64 MB of windows. On its own the window drops its
oldest turn when full; made with `compacted=True`, it leaves a full window to a Compactor
(consolidation/compaction.py), which saves what the old turns said and then puts a summary turn in their place
(`replace_window`). With `conversation_log` on, every turn is also appended, durably, to
`conversations/{date}.jsonl` (a summary turn is not: it is no turn anyone said).

The preference dream pass consumes the log, as RockBot's does: the turns it read are removed afterwards,
whatever the model made of them (today's file too; turns logged since are kept). A reader notes how far it
read as a `LogMark`; an agent reading the log in batches over several calls leaves the mark of its last batch
in `conversations/.read-through.json` for the plan it applies.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
from collections import deque
from collections.abc import Callable
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import NamedTuple, get_args

from rockmem_mcp.config import Settings
from rockmem_mcp.conversation.sessions import MAX_SESSIONS, SessionTable
from rockmem_mcp.errors import InvalidInputError
from rockmem_mcp.models import Conversation, ConversationTurn, Role, check_text, utc_now, working_key_segments
from rockmem_mcp.storage.atomic import atomic_write
from rockmem_mcp.storage.daily_log import DailyLog
from rockmem_mcp.storage.edited_files import held
from rockmem_mcp.storage.no_follow import make_folders, read_bytes
from rockmem_mcp.storage.pg import is_database_url

log = logging.getLogger(__name__)

ROLES: tuple[str, ...] = get_args(Role)
MAX_LAST_N = 200
MAX_WINDOW_BYTES = 64_000_000  # the windows of every session together; the least recently used go first
TURN_OVERHEAD = 200  # bytes a turn costs besides its text (object, session id, time)
# A compacted window a compactor could not trim (a full disk) still stops growing at this many times its size.
OVERFLOW_CAP = 4


def check_session_id(session_id: object) -> str:
    parts = working_key_segments(session_id, "session_id")
    if len(parts) != 1:
        raise InvalidInputError("session_id is one segment of letters, digits, '.', ':', '-' or '_', e.g. 'chat-42'")
    return parts[0]


class ConversationMemory:
    def __init__(self, settings: Settings, clock: Callable[[], datetime] = utc_now, compacted: bool = False) -> None:
        """`compacted`: a Compactor trims full windows, so a turn is never dropped to make room (up to
        OVERFLOW_CAP times the window, should compaction keep failing)."""
        self.settings = settings
        self.compacted = compacted
        self._clock = clock
        self._lock = threading.Lock()
        self._sessions: SessionTable[deque[ConversationTurn]] = SessionTable(
            idle=timedelta(minutes=settings.conversation_idle_minutes),
            max_bytes=MAX_WINDOW_BYTES,
            size=lambda window: sum(len(turn.content) + TURN_OVERHEAD for turn in window),
            clock=clock,
        )
        self.log = conversation_log(settings)
        self.last_turn_at: datetime | None = None  # this process's newest turn (a reflection's idle trigger)
        if settings.conversation_keep_windows:
            self._restore_windows()

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
        size = self.settings.conversation_window
        with self._lock:
            window = self._sessions.open(session_id, deque)
            window.append(turn)
            if len(window) > (size * OVERFLOW_CAP if self.compacted else size):
                window.popleft()
                if self.compacted:  # write-then-compact could not write: say so
                    log.warning("conversation %s: a turn dropped uncompacted (compaction keeps failing)", session_id)
            self._sessions.resized(session_id)
            self.last_turn_at = now
        return turn

    def held(self, session_id: str) -> int:
        """How many turns the session's window holds (cheap: no copy)."""
        with self._lock:
            return len(self._sessions.peek(session_id) or ())

    def window(self, session_id: str) -> list[ConversationTurn]:
        """Every turn the session's window holds, oldest first (a summary turn, if any, first)."""
        with self._lock:
            return list(self._sessions.peek(check_session_id(session_id)) or ())

    def replace_window(self, session_id: str, summary: ConversationTurn, through: ConversationTurn | None) -> bool:
        """Put `summary` in place of the window's turns up to and including `through` (None: none of them; the
        previous summary turn goes either way). The turns recorded after `through` stay, so a turn recorded while
        a compaction ran is never lost. False if `through` is no longer in the window (the session was
        forgotten, or another compaction took it): nothing changes then."""
        with self._lock:
            window = self._sessions.peek(session_id)
            if window is None:
                return False
            turns = list(window)
            cut = next((i + 1 for i, turn in enumerate(turns) if turn is through), None) if through else 0
            if cut is None:
                return False
            kept = [turn for turn in turns[cut:] if turn.role != "summary"]
            window.clear()
            window.extend([summary, *kept])
            self._sessions.resized(session_id)
            return True

    def recent(self, session_id: str, last_n: int = 20) -> Conversation:
        session_id = check_session_id(session_id)
        if isinstance(last_n, bool) or not isinstance(last_n, int) or not 1 <= last_n <= MAX_LAST_N:
            raise InvalidInputError(f"last_n must be an integer from 1 to {MAX_LAST_N}")
        with self._lock:
            window = list(self._sessions.peek(session_id) or ())
        return Conversation(session_id=session_id, turns=window[-last_n:], kept=len(window))

    # ------------------------------------------------------------------ across restarts
    def _windows_path(self) -> Path:
        return self.settings.conversations_dir / WINDOWS_FILE

    def _read_windows(self) -> dict[str, list[ConversationTurn]]:
        """The windows an earlier process kept (a damaged file is skipped with a warning: they are a convenience,
        and the turns themselves are in the conversation log when it is on)."""
        try:
            records = json.loads(read_bytes(self._windows_path()))
            windows = {
                check_session_id(r["session_id"]): [ConversationTurn.model_validate(t) for t in r["turns"]]
                for r in records
            }
            return {session_id: turns for session_id, turns in windows.items() if turns}
        except FileNotFoundError:
            return {}
        except (OSError, ValueError, KeyError, TypeError, InvalidInputError) as exc:
            log.warning("conversation windows in %s not restored (%s)", self._windows_path(), exc)
            return {}

    def _restore_windows(self) -> None:
        """Sessions still within their idle time get their windows back, oldest first, as they were."""
        cutoff = self._clock() - timedelta(minutes=self.settings.conversation_idle_minutes)
        kept = [(sid, turns) for sid, turns in self._read_windows().items() if turns and turns[-1].at > cutoff]
        with self._lock:
            for session_id, turns in sorted(kept, key=lambda item: item[1][-1].at):
                window = self._sessions.open(session_id, deque, used_at=turns[-1].at)
                window.extend(turns)
                self._sessions.resized(session_id)

    def keep_windows(self) -> None:
        """Write this process's windows to the home for the next start (at close), merged with those other
        processes kept: per session the window with the later turn wins, idle ones are dropped, and the file stays
        within the same bounds as the windows in memory (the newest sessions first)."""
        if not self.settings.conversation_keep_windows:
            return
        with held(self.settings.conversations_dir / ".windows.lock"):
            windows = self._read_windows()
            with self._lock:
                ours = {sid: list(window) for sid, window in self._sessions.items() if window}
            for session_id, turns in ours.items():
                theirs = windows.get(session_id)
                if not theirs or theirs[-1].at <= turns[-1].at:
                    windows[session_id] = turns
            cutoff = self._clock() - timedelta(minutes=self.settings.conversation_idle_minutes)
            newest = sorted((item for item in windows.items() if item[1][-1].at > cutoff), key=lambda i: i[1][-1].at)
            records, total = [], 0
            for session_id, turns in reversed(newest[-MAX_SESSIONS:]):
                size = sum(len(turn.content) + TURN_OVERHEAD for turn in turns)
                if total + size > MAX_WINDOW_BYTES:
                    break
                total += size
                records.append({"session_id": session_id, "turns": [t.model_dump(mode="json") for t in turns]})
            make_folders(self.settings.conversations_dir)
            atomic_write(self._windows_path(), json.dumps(records, ensure_ascii=False).encode())


def conversation_log(settings: Settings) -> DailyLog[ConversationTurn]:
    """The durable conversation log the dream pass reads (written only with `conversation_log` on): the home's
    day files, or the database replicas share (ROCKMEM_STORE), so a dream reads every replica's turns."""
    if is_database_url(settings.store):
        from rockmem_mcp.storage.pg import shared_database
        from rockmem_mcp.storage.pg_daily_log import PgDailyLog

        db = shared_database(str(settings.store), "stores", settings.store_schema)
        return PgDailyLog(db, "conversations", ConversationTurn, settings.conversations_dir)  # type: ignore[return-value]
    return DailyLog(settings.conversations_dir, ConversationTurn)


READ_MARK = ".read-through.json"
WINDOWS_FILE = "windows.json"  # the conversation windows kept across restarts (conversation_keep_windows)


class LogMark(NamedTuple):
    """Where a read of the conversation log ended: the day file, the offset past the last turn read, and the
    file's inode (offsets are only good for the file they were read from)."""

    day: date
    end: int
    inode: int


def read_log(settings: Settings) -> list[tuple[ConversationTurn, LogMark]]:
    """Every logged turn, oldest day first, each with the mark just past it."""
    log = conversation_log(settings)
    found = []
    for day in log.days():
        records, inode = log.read_positions(day)
        found += [(turn, LogMark(day, end, inode)) for turn, end in records]
    return found


def remember_read(settings: Settings, mark: LogMark) -> None:
    """An agent has been shown the log through `mark` (its last batch): its plan consumes that much."""
    record = {"day": mark.day.isoformat(), "end": mark.end, "inode": mark.inode}
    make_folders(settings.conversations_dir)
    atomic_write(settings.conversations_dir / READ_MARK, json.dumps(record).encode())


def take_read_mark(settings: Settings) -> LogMark | None:
    """The mark an agent's reading left (and forget it), or None."""
    path = settings.conversations_dir / READ_MARK
    try:
        record = json.loads(read_bytes(path))
        mark = LogMark(date.fromisoformat(record["day"]), int(record["end"]), int(record["inode"]))
    except (OSError, ValueError, KeyError, TypeError):
        mark = None
    with contextlib.suppress(OSError):
        path.unlink()
    return mark


def consume_log(settings: Settings, through: LogMark) -> None:
    """Remove the turns logged up to `through`: earlier days' files and the part of its day's file that was
    read; what was logged after the read stays for the next pass."""
    log = conversation_log(settings)
    for day in log.days():
        if day < through.day:
            log.consume(day)
        elif day == through.day:
            log.consume(day, through.end, through.inode)
    with contextlib.suppress(OSError):
        (settings.conversations_dir / READ_MARK).unlink()
