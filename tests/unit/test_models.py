"""Validation rules for categories, tags, ids and entries."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone

import pytest

from rockmem_mcp.errors import InvalidInputError
from rockmem_mcp.models import (
    MAX_CATEGORY_CHARS,
    MAX_TAG_CHARS,
    MemoryEntry,
    as_utc,
    category_matches,
    check_text,
    new_entry_id,
    normalize_category,
    normalize_tags,
    validate_entry_id,
)


# ---------------------------------------------------------------------- categories
@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("a/b-c/d_e", "a/b-c/d_e"),
        ("project", "project"),
        ("Work/2024", "Work/2024"),
        ("a/b/", "a/b"),
        ("  spaced/out  ", "spaced/out"),
        ("", None),
        ("   ", None),
        (None, None),
    ],
)
def test_normalize_category_accepts(raw: str | None, expected: str | None) -> None:
    assert normalize_category(raw) == expected


@pytest.mark.parametrize(
    "raw",
    [
        "..",
        ".",
        "a/../b",
        "a/./b",
        "../escape",
        "/abs",
        "/",
        "a//b",
        "a/b//",
        "a b",
        "a\\b",
        "a/b c",
        "tab\there",
        "new\nline",
        "café",
        "x" * (MAX_CATEGORY_CHARS + 1),
    ],
)
def test_normalize_category_rejects(raw: str) -> None:
    with pytest.raises(InvalidInputError, match="category"):
        normalize_category(raw)


def test_category_error_messages_say_how_to_fix() -> None:
    with pytest.raises(InvalidInputError, match=re.escape("user-preferences/timezone")):
        normalize_category("a b")


def test_longest_category_is_accepted() -> None:
    longest = "/".join(["x" * 9] * 20)  # 20 segments of 9 + 19 slashes = 199
    assert len(longest) <= MAX_CATEGORY_CHARS
    assert normalize_category(longest) == longest


def test_category_matches_whole_segments() -> None:
    assert category_matches("project", "project")
    assert category_matches("project/x", "project")
    assert not category_matches("projects", "project")
    assert not category_matches(None, "project")


# ---------------------------------------------------------------------- tags
def test_normalize_tags_strips_and_dedupes_case_insensitively_keeping_the_first_spelling() -> None:
    assert normalize_tags([" Python ", "python", "PYTHON", "Work", "", "  ", "work", "other"], 10) == [
        "Python",
        "Work",
        "other",
    ]


def test_normalize_tags_of_nothing() -> None:
    assert normalize_tags(None, 5) == []
    assert normalize_tags([], 5) == []


@pytest.mark.parametrize("bad", ["tab\tinside", "nul\x00", "bell\x07x", "del\x7f", "x" * (MAX_TAG_CHARS + 1)])
def test_normalize_tags_rejects_control_characters_and_long_tags(bad: str) -> None:
    with pytest.raises(InvalidInputError, match="tag"):
        normalize_tags(["fine", bad], 10)


def test_normalize_tags_rejects_non_strings() -> None:
    with pytest.raises(InvalidInputError):
        normalize_tags(["ok", 3], 10)  # type: ignore[list-item]


def test_normalize_tags_rejects_a_bare_string() -> None:
    """A string is not a list of tags: it must not be split into one-letter tags."""
    try:
        result = normalize_tags("python", 10)  # type: ignore[arg-type]
    except InvalidInputError:
        return
    assert result == ["python"]


def test_normalize_tags_limit_counts_distinct_tags() -> None:
    assert normalize_tags(["a1", "A1", "b2"], 2) == ["a1", "b2"]
    with pytest.raises(InvalidInputError, match="too many tags"):
        normalize_tags(["a1", "b2", "c3"], 2)


# ---------------------------------------------------------------------- ids
@pytest.mark.parametrize("good", ["abc123def456", "A", "x-y_z", "9" * 64])
def test_validate_entry_id_accepts(good: str) -> None:
    assert validate_entry_id(good) == good


@pytest.mark.parametrize(
    "bad", ["", "../x", "a/b", "a\\b", ".hidden", "-lead", "_lead", "a.b", "a b", "9" * 65, None, 5]
)
def test_validate_entry_id_rejects(bad: object) -> None:
    with pytest.raises(InvalidInputError, match="memory id"):
        validate_entry_id(bad)  # type: ignore[arg-type]


def test_new_entry_ids_are_12_hex_and_unique() -> None:
    ids = {new_entry_id() for _ in range(200)}
    assert len(ids) == 200
    assert all(re.fullmatch(r"[0-9a-f]{12}", i) for i in ids)


# ---------------------------------------------------------------------- entries
def test_as_utc_treats_naive_as_utc_and_converts_aware() -> None:
    assert as_utc(datetime(2024, 1, 1, 12)) == datetime(2024, 1, 1, 12, tzinfo=UTC)
    plus_two = timezone(timedelta(hours=2))
    converted = as_utc(datetime(2024, 1, 1, 12, tzinfo=plus_two))
    assert converted.utcoffset() == timedelta(0) and converted.hour == 10


def test_entry_times_are_normalized_to_utc() -> None:
    e = MemoryEntry(id="a1", content="c", created_at="2024-01-01T12:00:00+02:00")  # type: ignore[arg-type]
    assert e.created_at == datetime(2024, 1, 1, 10, tzinfo=UTC)
    assert e.created_at.utcoffset() == timedelta(0)


def test_entry_document_text_and_archived_flag() -> None:
    e = MemoryEntry(
        id="a1", content="Body", tags=["t-one", "two"], category="user-prefs/time-zone", created_at=datetime.now(UTC)
    )
    assert e.document_text() == "Body t-one two user prefs time zone"
    assert not e.archived
    assert e.model_copy(update={"archived_at": datetime.now(UTC)}).archived


def test_entry_ignores_unknown_fields_and_checks_ranges() -> None:
    e = MemoryEntry.model_validate({"id": "a1", "content": "c", "created_at": "2024-01-01T00:00:00Z", "future": 1})
    assert not hasattr(e, "future")
    with pytest.raises(ValueError):
        MemoryEntry(id="a1", content="c", created_at=datetime.now(UTC), importance=1.5)


def test_a_datetime_out_of_range_in_utc_is_a_clear_error() -> None:
    from datetime import datetime as dt

    from rockmem_mcp.errors import InvalidInputError
    from rockmem_mcp.models import as_utc

    with pytest.raises(InvalidInputError, match="out of range once converted to UTC"):
        as_utc(dt.fromisoformat("0001-01-01T00:00:00+14:00"))


def test_check_text_refuses_a_lone_surrogate_with_a_clear_error() -> None:
    with pytest.raises(
        InvalidInputError, match=r"content is not valid Unicode \(a lone surrogate U\+D800 at character 1\)"
    ):
        check_text("a\ud800b", "content", 100, "ROCKMEM_MAX_CONTENT_BYTES", "")
