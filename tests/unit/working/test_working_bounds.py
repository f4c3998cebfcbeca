"""Working memory's byte bound per namespace (issue 45): what a save past it evicts, what it refuses, and that
one namespace's large values leave the others alone."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from rockmem_mcp.config import Settings
from rockmem_mcp.errors import InvalidInputError
from rockmem_mcp.working.service import WorkingMemory, make_room

NOW = datetime(2024, 5, 1, 9, 0, tzinfo=UTC)
MB = 1_000_000


@pytest.fixture
def opener(settings: Settings):
    def make(namespace: str = "session/s1", **overrides: object) -> WorkingMemory:
        return WorkingMemory(settings.model_copy(update=overrides), namespace, lambda: NOW)

    return make


def held(wm: WorkingMemory, namespace: str) -> int:
    return sum(info.size for info in wm.list(namespace))


def test_forty_values_of_a_megabyte_keep_the_namespace_under_the_default_bound(opener, settings: Settings) -> None:
    bound = Settings().working_max_namespace_bytes
    assert bound == 8 * MB  # the documented default: eight values at the largest size
    wm = opener()
    other = wm.for_namespace("session/s2")
    other.save("note", "another session's small note", ttl_minutes=1)  # closer to expiry than anything below
    wm.save("shared/team/plan", "a shared plan", ttl_minutes=1)
    value = "x" * (MB - 1_000)  # under the per-value cap, as in the issue
    evicted = []
    for n in range(40):
        saved = wm.save(f"chunk-{n:02d}", value, ttl_minutes=60 + n)  # later chunks live longer
        evicted += saved.evicted_keys
        assert saved.evicted == (saved.evicted_keys[0] if saved.evicted_keys else None)
        assert held(wm, "session/s1") <= bound
    kept = [info.key for info in wm.list("session/s1")]
    assert kept == [f"session/s1/chunk-{n:02d}" for n in range(32, 40)]  # the newest eight fit
    assert evicted == [f"session/s1/chunk-{n:02d}" for n in range(32)]  # each closest to expiry, named once
    # Other namespaces, even with entries closer to expiry, are not touched.
    assert other.get("note").data == "another session's small note"
    assert other.get("shared/team/plan").data == "a shared plan"
    assert (settings.working_dir / "session.json").stat().st_size < bound + 100_000


def test_a_large_save_evicts_as_many_entries_as_it_needs_and_names_them_all(opener) -> None:
    wm = opener(working_max_namespace_bytes=1_000)
    for n in range(10):
        wm.save(f"small-{n}", "s" * 100, ttl_minutes=10 + n)
    saved = wm.save("big", "b" * 450, ttl_minutes=5)  # needs the room of five: the five closest to expiry go
    assert saved.evicted_keys == [f"session/s1/small-{n}" for n in range(5)]
    assert saved.evicted == "session/s1/small-0"
    assert held(wm, "session/s1") == 950
    assert wm.get("big").data == "b" * 450  # the entry saved is never the one evicted, even if soonest to expire


def test_bytes_are_utf8_and_a_replaced_value_no_longer_counts(opener) -> None:
    wm = opener(working_max_namespace_bytes=1_000)
    wm.save("a", "é" * 300, ttl_minutes=10)  # 600 bytes
    assert wm.save("a", "é" * 450, ttl_minutes=10).evicted_keys == []  # replaces its 600 bytes: 900 held
    saved = wm.save("b", "x" * 101, ttl_minutes=20)  # 1,001 bytes: one byte too many
    assert saved.evicted == "session/s1/a" and saved.evicted_keys == ["session/s1/a"]


def test_a_value_bigger_than_the_bound_is_refused_naming_the_setting_and_nothing_changes(opener) -> None:
    wm = opener(working_max_namespace_bytes=1_000)
    wm.save("keep", "k" * 500)
    refusal = r"data is 1001 bytes; the limit is 1000 \(ROCKMEM_WORKING_MAX_NAMESPACE_BYTES\)"
    with pytest.raises(InvalidInputError, match=refusal):
        wm.save("huge", "h" * 1_001)
    assert [info.key for info in wm.list()] == ["session/s1/keep"]  # nothing was evicted for it
    assert wm.save("fits", "f" * 500).evicted is None  # exactly at the bound is allowed


def test_the_bound_holds_per_shared_namespace_too(opener) -> None:
    writer = opener(working_max_namespace_bytes=1_000)
    for n in range(3):
        writer.save(f"shared/board/card-{n}", "c" * 400, ttl_minutes=10 + n)
    writer.save("shared/other/card", "o" * 900)
    assert [i.key for i in writer.list("shared/board")] == ["shared/board/card-1", "shared/board/card-2"]
    assert [i.key for i in writer.list("shared/other")] == ["shared/other/card"]


def test_make_room_without_a_byte_bound_counts_entries_only() -> None:
    """A restore passes no byte bound (home/transfer.py): the count cap alone, as before."""
    entries = {f"session/s1/{n}": {"data": "x" * 1_000, "expires_at": f"2024-05-01T09:0{n}:00+00:00"} for n in range(3)}
    assert make_room(dict(entries), 3, {"session/s1"}) == []
    assert make_room(dict(entries), 2, {"session/s1"}) == ["session/s1/0"]
    assert make_room(dict(entries), 3, {"session/s1"}, max_bytes=2_000) == ["session/s1/0"]
