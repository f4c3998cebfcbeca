"""Working memory: keys and namespaces, expiry, eviction, sharing between instances, search."""

from __future__ import annotations

import json
import unicodedata
from datetime import UTC, datetime, timedelta

import pytest

from rockmem_mcp.config import Settings
from rockmem_mcp.errors import InvalidInputError, NotFoundError
from rockmem_mcp.models import parse_namespace
from rockmem_mcp.working.service import WorkingMemory, format_remaining, sweep_expired

T0 = datetime(2024, 5, 1, 9, 0, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def opener(settings: Settings, clock: Clock):
    def make(namespace: str = "session/s1", **overrides: object) -> WorkingMemory:
        return WorkingMemory(settings.model_copy(update=overrides), namespace, clock)

    return make


def test_a_plain_key_lands_in_the_callers_namespace(opener) -> None:
    wm = opener()
    saved = wm.save("build-log", "step 1 ok", category="ci", tags=["Build"])
    assert saved.entry.key == "session/s1/build-log" and saved.evicted is None
    assert saved.entry.expires_in == "5m00s" and saved.entry.size == 9
    assert wm.get("build-log").data == "step 1 ok"
    assert wm.get("session/s1/build-log").tags == ["Build"]


def test_entries_expire_and_are_never_returned(opener, clock: Clock) -> None:
    wm = opener()
    wm.save("short", "gone soon", ttl_minutes=1)
    wm.save("long", "stays", ttl_minutes=10)
    clock.advance(seconds=59)
    assert wm.get("short").data == "gone soon"
    assert [i.expires_in for i in wm.list()] == ["1s", "9m01s"]
    clock.advance(seconds=1)
    with pytest.raises(NotFoundError, match="expired"):
        wm.get("short")
    assert [i.key for i in wm.list()] == ["session/s1/long"]
    assert [h.info.key for h in wm.search("gone soon")] == []


def test_expired_entries_leave_the_file_when_it_is_rewritten(opener, clock: Clock, settings: Settings) -> None:
    wm = opener()
    wm.save("old", "x", ttl_minutes=1)
    clock.advance(minutes=2)
    wm.save("new", "y")
    stored = json.loads((settings.working_dir / "session.json").read_text())["entries"]
    assert list(stored) == ["session/s1/new"]


def test_a_sweep_drops_expired_entries_from_every_file_and_leaves_clean_files_alone(
    opener, clock: Clock, settings: Settings
) -> None:
    opener().save("old", "x", ttl_minutes=1)
    opener().save("keep", "y", ttl_minutes=10)
    opener("patrol/disk").save("finding", "z", ttl_minutes=1)
    opener().save("shared/team/plan", "p", ttl_minutes=10)
    shared = settings.working_dir / "shared.json"
    shared_before = shared.stat()
    clock.advance(minutes=2)
    assert sweep_expired(settings, clock) == 2
    stored = {p.stem: list(json.loads(p.read_text())["entries"]) for p in settings.working_dir.glob("*.json")}
    assert stored == {"session": ["session/s1/keep"], "patrol": [], "shared": ["shared/team/plan"]}
    assert shared.stat().st_mtime_ns == shared_before.st_mtime_ns  # nothing expired there: not rewritten
    assert sweep_expired(settings, clock) == 0


def test_writes_outside_the_callers_namespace_are_refused_but_reads_cross(opener) -> None:
    patrol = opener("patrol/disk-check")
    patrol.save("finding", "disk 91% full")
    session = opener("session/s1")
    assert session.get("patrol/disk-check/finding").data == "disk 91% full"
    with pytest.raises(InvalidInputError, match="belongs to namespace 'patrol/disk-check'"):
        session.save("patrol/disk-check/finding", "overwritten")
    with pytest.raises(InvalidInputError, match="belongs to namespace"):
        session.delete("patrol/disk-check/finding")
    assert patrol.get("finding").data == "disk 91% full"


def test_shared_keys_are_written_and_read_by_everyone(opener) -> None:
    opener("subagent/t1").save("shared/plan/steps", "1. build 2. test")
    assert opener("session/s9").get("shared/plan/steps").data == "1. build 2. test"
    assert opener("session/s9").delete("shared/plan/steps") is True
    assert opener("session/s9").delete("shared/plan/steps") is False


def test_overflow_evicts_the_entry_closest_to_expiry_and_says_so(opener) -> None:
    wm = opener(working_max_entries=3)
    wm.save("a", "1", ttl_minutes=10)
    wm.save("b", "2", ttl_minutes=2)  # closest to expiry
    wm.save("c", "3", ttl_minutes=30)
    saved = wm.save("d", "4")
    assert saved.evicted == "session/s1/b"
    assert sorted(i.key.rsplit("/", 1)[1] for i in wm.list()) == ["a", "c", "d"]
    assert opener("session/other", working_max_entries=3).save("x", "other namespace").evicted is None
    assert wm.save("a", "replacing never evicts").evicted is None


@pytest.mark.parametrize("key", ["shared/topic", "shared", "session/abc", "session/s1", "patrol/disk", "subagent"])
def test_a_key_naming_only_a_namespace_is_refused_at_save(opener, key: str) -> None:
    wm = opener()
    with pytest.raises(InvalidInputError, match=r"names a namespace, not an entry: add the entry's name, e\.g\."):
        wm.save(key, "data")
    assert wm.list("shared") == [] and wm.list() == []  # nothing stored that could then be neither read nor deleted


def test_the_cap_holds_for_shared_namespaces(opener) -> None:
    wm = opener(working_max_entries=3)
    for n in range(5):
        wm.save(f"shared/board/card-{n}", "x", ttl_minutes=10 + n)
    assert [i.key for i in wm.list("shared")] == ["shared/board/card-2", "shared/board/card-3", "shared/board/card-4"]


def test_namespaces_of_one_process_share_one_view_of_the_files(opener) -> None:
    first = opener()
    second = first.for_namespace("session/s2")
    assert second.namespace == "session/s2" and second.files is first.files
    second.save("note", "seen by both")
    assert first.get("session/s2/note").data == "seen by both"


@pytest.mark.parametrize(
    "key",
    ["", "../escape", "a/../../b", "/abs", "a//b", "bad key", "nul\x00", "session/s1", "x" * 301, "C:\\win"],
)
def test_bad_keys_are_refused_with_a_hint(opener, key: str, settings: Settings) -> None:
    with pytest.raises(InvalidInputError):
        opener().save(key, "data")
    files = list(settings.home.rglob("*")) if settings.home.exists() else []
    assert all(str(f).startswith(str(settings.home)) for f in files)
    assert not (settings.home.parent / "escape").exists()


@pytest.mark.parametrize("namespace", ["shared/x", "session", "session/a/b", "other/x", "../x", ""])
def test_bad_caller_namespaces_are_refused(namespace: str) -> None:
    with pytest.raises(InvalidInputError):
        parse_namespace(namespace)


def test_limits_on_values_and_ttls(opener) -> None:
    wm = opener(working_max_value_bytes=10)
    with pytest.raises(InvalidInputError, match="limit is 10"):
        wm.save("big", "é" * 6)  # 12 bytes
    for ttl in (0, -1, 10_081, True):
        with pytest.raises(InvalidInputError, match="ttl_minutes"):
            wm.save("k", "v", ttl_minutes=ttl)


def test_two_instances_share_one_home(opener) -> None:
    first, second = opener("session/a"), opener("session/b")
    first.save("note", "from a")
    second.save("shared/team/board", "from b")
    first.save("shared/team/board-2", "from a too")  # must not lose b's entry (read-modify-write under a lock)
    assert {i.key for i in second.list("shared")} == {"shared/team/board", "shared/team/board-2"}
    assert second.get("session/a/note").data == "from a"


def test_list_defaults_to_own_and_shared_and_accepts_a_root(opener) -> None:
    opener("patrol/p1").save("finding", "one")
    opener("patrol/p2").save("finding", "two")
    mine = opener("session/s1")
    mine.save("mine", "x")
    mine.save("shared/team/board", "y")
    assert {i.key for i in mine.list()} == {"session/s1/mine", "shared/team/board"}
    assert {i.key for i in mine.list("patrol")} == {"patrol/p1/finding", "patrol/p2/finding"}
    assert [i.key for i in mine.list("patrol/p2")] == ["patrol/p2/finding"]
    with pytest.raises(InvalidInputError):
        mine.list("nowhere/x")


def test_search_ranks_filters_and_previews(opener, clock: Clock) -> None:
    wm = opener()
    wm.save("deploy-log", "staging deploy failed: missing VPN " + "x" * 300, category="ci/deploy", tags=["ops"])
    clock.advance(seconds=1)
    wm.save("lunch", "order pizza for the team", tags=["food"])
    hits = wm.search("deploy vpn")
    assert [h.info.key for h in hits] == ["session/s1/deploy-log"]
    assert hits[0].score is not None and hits[0].score > 0
    assert hits[0].preview.endswith("…") and len(hits[0].preview) == 201
    assert [h.info.key for h in wm.search(category="ci")] == ["session/s1/deploy-log"]
    assert [h.info.key for h in wm.search(tags=["FOOD"])] == ["session/s1/lunch"]
    assert [h.info.key for h in wm.search()] == ["session/s1/lunch", "session/s1/deploy-log"]  # newest first
    assert wm.search("is it") == []  # only stopwords


def test_tags_match_across_unicode_forms_width_and_invisible_characters(opener) -> None:
    wm = opener()
    saved = wm.save("order", "two coffees", tags=[unicodedata.normalize("NFD", "Café"), "ca\u200bfé"])
    assert saved.entry.tags == ["Café"]
    for tag in ("café", "ＣＡＦÉ", "\u2066cafe\u0301\u2069"):
        assert [h.info.key for h in wm.search(tags=[tag])] == ["session/s1/order"], tag


def test_a_damaged_file_reads_as_empty_and_is_rewritten(opener, settings: Settings) -> None:
    settings.working_dir.mkdir(parents=True)
    (settings.working_dir / "session.json").write_text("{not json")
    wm = opener()
    assert wm.list() == []
    wm.save("k", "v")
    assert wm.get("k").data == "v"


@pytest.mark.parametrize(("seconds", "shown"), [(0, "0s"), (12, "12s"), (272, "4m32s"), (3900, "1h05m"), (-5, "0s")])
def test_time_left_is_shown_compactly(seconds: int, shown: str) -> None:
    assert format_remaining(timedelta(seconds=seconds)) == shown
