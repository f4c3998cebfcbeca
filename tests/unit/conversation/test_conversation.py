"""Conversation memory: the window, idle sessions, validation, the log."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta

import pytest

from rockmem_mcp.config import Settings
from rockmem_mcp.conversation import service as conversation
from rockmem_mcp.conversation.service import ConversationMemory, conversation_log
from rockmem_mcp.conversation.sessions import MAX_SESSIONS
from rockmem_mcp.errors import InvalidInputError


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2024, 5, 1, 9, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


def test_the_window_keeps_the_latest_turns_oldest_first(settings: Settings) -> None:
    memory = ConversationMemory(settings.model_copy(update={"conversation_window": 3}), Clock())
    for i in range(5):
        memory.record("chat-1", "user" if i % 2 == 0 else "assistant", f"turn {i}")
    window = memory.recent("chat-1", last_n=10)
    assert [t.content for t in window.turns] == ["turn 2", "turn 3", "turn 4"] and window.kept == 3
    assert [t.content for t in memory.recent("chat-1", last_n=2).turns] == ["turn 3", "turn 4"]
    assert memory.recent("other").turns == []


def test_an_idle_session_is_forgotten(settings: Settings) -> None:
    clock = Clock()
    memory = ConversationMemory(settings, clock)
    memory.record("quiet", "user", "hello")
    memory.record("busy", "user", "hello")
    clock.now += timedelta(minutes=59)
    memory.record("busy", "assistant", "still here")
    assert memory.recent("quiet").kept == 1
    clock.now += timedelta(minutes=1)
    assert memory.recent("quiet").kept == 0
    assert memory.recent("busy").kept == 2


@pytest.mark.parametrize(
    ("session_id", "role", "content", "message"),
    [
        ("a/b", "user", "x", "one segment"),
        ("../x", "user", "x", "session_id"),
        ("chat", "robot", "x", "role must be one of user, assistant, system, tool"),
        ("chat", "user", 5, "content must be text"),
        ("chat", "user", "x" * 100_001, "limit is 100000"),
    ],
)
def test_bad_turns_are_refused_clearly(settings: Settings, session_id, role, content, message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        ConversationMemory(settings, Clock()).record(session_id, role, content)


def test_last_n_is_bounded(settings: Settings) -> None:
    for last_n in (0, 201, True):
        with pytest.raises(InvalidInputError, match="last_n"):
            ConversationMemory(settings, Clock()).recent("chat", last_n)


def test_the_log_is_off_by_default_and_appends_every_turn_when_on(settings: Settings) -> None:
    ConversationMemory(settings, Clock()).record("chat", "user", "not logged")
    assert not settings.conversations_dir.exists()
    logged = settings.model_copy(update={"conversation_log": True})
    first, second = ConversationMemory(logged, Clock()), ConversationMemory(logged, Clock())  # two processes
    first.record("chat", "user", "I prefer tabs")
    second.record("chat", "assistant", "Noted: tabs")
    turns = conversation_log(logged).read(date(2024, 5, 1))
    assert [(t.role, t.content) for t in turns] == [("user", "I prefer tabs"), ("assistant", "Noted: tabs")]
    lines = (logged.conversations_dir / "2024-05-01.jsonl").read_text().splitlines()
    assert json.loads(lines[0])["session_id"] == "chat"


def test_windows_are_bounded_in_sessions_and_bytes(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    memory = ConversationMemory(settings, Clock())
    for n in range(MAX_SESSIONS + 1):  # any caller may name a new session on every call
        memory.record(f"chat-{n}", "user", "hi")
    assert memory.recent("chat-0").kept == 0  # the least recently used went
    assert memory.recent("chat-1").kept == 1 and memory.recent(f"chat-{MAX_SESSIONS}").kept == 1
    monkeypatch.setattr(conversation, "MAX_WINDOW_BYTES", 100_000)
    small = ConversationMemory(settings, Clock())
    for n in range(10):
        small.record(f"chat-{n}", "user", "x" * 30_000)
    assert [n for n in range(10) if small.recent(f"chat-{n}").kept] == [7, 8, 9]  # ~90 KB of windows kept


# ------------------------------------------------------------------ windows across restarts
def test_windows_are_kept_for_the_next_start_and_restored_with_their_idle_time(settings: Settings) -> None:
    clock = Clock()
    first = ConversationMemory(settings, clock)
    first.record("chat-1", "user", "hello")
    first.record("chat-1", "assistant", "hi, Ada")
    clock.now += timedelta(minutes=50)
    first.record("chat-2", "user", "later")
    first.keep_windows()

    again = ConversationMemory(settings, clock)  # a new process on the same home
    assert [t.content for t in again.recent("chat-1").turns] == ["hello", "hi, Ada"]
    assert [t.content for t in again.recent("chat-2").turns] == ["later"]
    clock.now += timedelta(minutes=10)  # chat-1's last turn is now 60 minutes old: idle, as it would have been
    assert again.recent("chat-1").kept == 0 and again.recent("chat-2").kept == 1
    assert ConversationMemory(settings, clock).recent("chat-1").kept == 0  # not restored once idle either


def test_two_processes_keep_both_their_sessions_and_the_later_window_wins(settings: Settings) -> None:
    clock = Clock()
    one, two = ConversationMemory(settings, clock), ConversationMemory(settings, clock)
    one.record("shared", "user", "from one")
    one.record("only-one", "user", "a")
    clock.now += timedelta(minutes=1)
    two.record("shared", "user", "from two, later")
    two.record("only-two", "user", "b")
    two.keep_windows()
    one.keep_windows()  # closes last, but its "shared" window is older
    restored = ConversationMemory(settings, clock)
    assert [t.content for t in restored.recent("shared").turns] == ["from two, later"]
    assert restored.recent("only-one").kept == 1 and restored.recent("only-two").kept == 1


def test_keeping_windows_can_be_turned_off_and_a_damaged_file_is_skipped(settings: Settings, caplog) -> None:
    off = settings.model_copy(update={"conversation_keep_windows": False})
    memory = ConversationMemory(off, Clock())
    memory.record("chat", "user", "private")
    memory.keep_windows()
    assert not (settings.conversations_dir / conversation.WINDOWS_FILE).exists()

    settings.conversations_dir.mkdir(parents=True, exist_ok=True)
    (settings.conversations_dir / conversation.WINDOWS_FILE).write_text('[{"session_id": "empty", "turns": []}]')
    ConversationMemory(settings, Clock()).keep_windows()  # an empty window is nothing to keep, not an error
    (settings.conversations_dir / conversation.WINDOWS_FILE).write_text("[{not json")
    restored = ConversationMemory(settings, Clock())
    assert restored.recent("chat").kept == 0
    assert "conversation windows in" in caplog.text and "not restored" in caplog.text
    restored.record("chat", "user", "again")
    restored.keep_windows()  # the damaged file is replaced by a good one
    assert ConversationMemory(settings, Clock()).recent("chat").kept == 1
