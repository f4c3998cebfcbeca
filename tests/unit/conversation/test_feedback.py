"""FeedbackLog: recording the five kinds of signal durably per day, validation, and `recent` (the last 7 days,
at most 50, oldest first) as the dream pass reads it."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from rockmem_mcp.config import Settings
from rockmem_mcp.conversation.feedback import FEEDBACK_TYPES, RECENT_DAYS, RECENT_LIMIT, FeedbackLog
from rockmem_mcp.errors import InvalidInputError
from rockmem_mcp.models import Feedback
from tests.unit.helpers import T0, FakeClock

TYPES = ("Correction", "ToolFailure", "SessionSummary", "UserThumbsUp", "UserThumbsDown")


@pytest.fixture
def feedback(settings: Settings, clock: FakeClock) -> FeedbackLog:
    return FeedbackLog(settings, clock)


def test_the_five_types_and_the_dream_window() -> None:
    assert FEEDBACK_TYPES == TYPES
    assert (RECENT_DAYS, RECENT_LIMIT) == (7, 50)


@pytest.mark.parametrize("feedback_type", TYPES)
def test_each_type_is_recorded_on_disk_as_one_json_line(
    feedback: FeedbackLog, settings: Settings, feedback_type: str
) -> None:
    recorded = feedback.record(feedback_type, "the user said: not like that", "chat-1", {"tool": "grep"})
    assert recorded.type == feedback_type and recorded.session_id == "chat-1"
    assert recorded.content == "the user said: not like that" and recorded.metadata == {"tool": "grep"}
    assert recorded.at == T0 and recorded.id
    path = settings.feedback_dir / f"{T0.date().isoformat()}.jsonl"
    raw = path.read_bytes()
    assert raw.endswith(b"\n") and raw.count(b"\n") == 1
    assert Feedback.model_validate(json.loads(raw)) == recorded


def test_records_are_durable_across_instances_and_ids_distinct(settings: Settings, clock: FakeClock) -> None:
    first = FeedbackLog(settings, clock)
    made = [first.record("Correction", f"correction {n}", "chat-1") for n in range(5)]
    assert len({f.id for f in made}) == 5
    assert FeedbackLog(settings, clock).recent() == made


def test_records_go_to_the_file_of_their_utc_day(feedback: FeedbackLog, settings: Settings, clock: FakeClock) -> None:
    clock.now = T0.replace(hour=23, minute=59, second=59)
    late = feedback.record("SessionSummary", "long day", "chat-1")
    early = feedback.record("UserThumbsUp", "good morning", "chat-1")  # one second later: the next day
    assert late.at.date() != early.at.date()
    assert sorted(p.name for p in settings.feedback_dir.iterdir()) == [
        f"{late.at.date().isoformat()}.jsonl",
        f"{early.at.date().isoformat()}.jsonl",
    ]
    assert feedback.recent() == [late, early]


@pytest.mark.parametrize("feedback_type", ["Praise", "correction", "", "Correction ", None])
def test_an_unknown_type_is_refused(feedback: FeedbackLog, settings: Settings, feedback_type: object) -> None:
    with pytest.raises(InvalidInputError, match="type must be one of"):
        feedback.record(feedback_type, "x", "chat-1")  # type: ignore[arg-type]
    assert not settings.feedback_dir.exists() or list(settings.feedback_dir.iterdir()) == []


@pytest.mark.parametrize("content", ["", "   ", "\n\t"])
def test_empty_content_is_refused(feedback: FeedbackLog, content: str) -> None:
    with pytest.raises(InvalidInputError, match="empty"):
        feedback.record("Correction", content, "chat-1")
    assert feedback.recent() == []


def test_content_over_the_limit_is_refused(settings: Settings, clock: FakeClock) -> None:
    small = settings.model_copy(update={"max_content_bytes": 10})
    log = FeedbackLog(small, clock)
    log.record("Correction", "x" * 10, "chat-1")
    with pytest.raises(InvalidInputError, match="MAX_CONTENT_BYTES"):
        log.record("Correction", "é" * 6, "chat-1")  # 12 bytes
    with pytest.raises(InvalidInputError):
        log.record("Correction", 42, "chat-1")  # type: ignore[arg-type]
    assert [f.content for f in log.recent()] == ["x" * 10]


@pytest.mark.parametrize("session_id", ["", "a/b", "has space", "../up", None])
def test_a_bad_session_id_is_refused(feedback: FeedbackLog, session_id: object) -> None:
    with pytest.raises(InvalidInputError):
        feedback.record("Correction", "x", session_id)  # type: ignore[arg-type]
    assert feedback.recent() == []


@pytest.mark.parametrize("metadata", [{"n": 1}, {"": "x"}, ["a"], {"k": "v" * 20_000}])
def test_bad_metadata_is_refused(feedback: FeedbackLog, metadata: object) -> None:
    with pytest.raises(InvalidInputError, match="metadata"):
        feedback.record("ToolFailure", "x", "chat-1", metadata)  # type: ignore[arg-type]
    assert feedback.recent() == []


def test_recent_is_the_last_seven_days_oldest_first(feedback: FeedbackLog, clock: FakeClock) -> None:
    made = []
    for days_ago in (10, 8, 7, 6, 3, 0):
        clock.now = T0 - timedelta(days=days_ago)
        made.append(feedback.record("Correction", f"{days_ago} days ago", "chat-1"))
    clock.now = T0
    clock.step = timedelta(0)
    recent = feedback.recent()
    assert [f.content for f in recent] == ["7 days ago", "6 days ago", "3 days ago", "0 days ago"]
    assert recent == made[2:]
    assert [f.content for f in feedback.recent(days=3)] == ["3 days ago", "0 days ago"]
    assert [f.content for f in feedback.recent(days=30)] == [f"{d} days ago" for d in (10, 8, 7, 6, 3, 0)]


def test_recent_keeps_the_newest_fifty(feedback: FeedbackLog, clock: FakeClock) -> None:
    for n in range(60):
        feedback.record("ToolFailure", f"failure {n}", "chat-1")
    recent = feedback.recent()
    assert [f.content for f in recent] == [f"failure {n}" for n in range(10, 60)]
    assert [f.content for f in feedback.recent(limit=3)] == ["failure 57", "failure 58", "failure 59"]


def test_recent_with_a_limit_of_zero_returns_nothing(feedback: FeedbackLog) -> None:
    feedback.record("Correction", "one", "chat-1")
    feedback.record("Correction", "two", "chat-1")
    assert feedback.recent(limit=0) == []


def test_recent_filters_by_type_before_the_limit(feedback: FeedbackLog) -> None:
    for n in range(30):
        feedback.record("Correction", f"correction {n}", "chat-1")
        feedback.record("UserThumbsUp", f"thumbs {n}", "chat-1")
    corrections = feedback.recent(types=("Correction",))
    assert len(corrections) == 30 and {f.type for f in corrections} == {"Correction"}
    both = feedback.recent(types=("Correction", "ToolFailure"), limit=5)
    assert [f.content for f in both] == [f"correction {n}" for n in range(25, 30)]
    assert len(feedback.recent()) == 50
    assert feedback.recent(types=()) == []


def test_recent_skips_unreadable_lines(feedback: FeedbackLog, settings: Settings, caplog) -> None:
    good = feedback.record("Correction", "kept", "chat-1")
    path = settings.feedback_dir / f"{T0.date().isoformat()}.jsonl"
    with path.open("ab") as f:
        f.write(b'{"truncated": \n')
        f.write(b'{"id": "x", "type": "Nonsense", "content": "c", "session_id": "s", "at": "2024-05-01T09:00:00Z"}\n')
    later = feedback.record("ToolFailure", "also kept", "chat-1")
    with caplog.at_level("WARNING"):
        assert feedback.recent() == [good, later]
    assert any("unreadable" in r.message for r in caplog.records)


def test_recent_with_no_log_is_empty(feedback: FeedbackLog) -> None:
    assert feedback.recent() == []
