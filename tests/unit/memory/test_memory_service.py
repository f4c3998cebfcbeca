"""MemoryService: files first, index in step, several processes (here: instances) on one home."""

from __future__ import annotations

import json
import os
import re
import shutil
import time
import unicodedata
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest

from rockmem_mcp.config import Settings
from rockmem_mcp.errors import InvalidInputError, NotFoundError
from rockmem_mcp.memory.service import SNAPSHOT_NAME, MemoryService
from rockmem_mcp.models import MemoryEntry
from rockmem_mcp.search.memory_index import MemoryIndex
from tests.unit.helpers import T0, FakeClock, Services, entry_files


def found(service: MemoryService, query: str | None = None, **kwargs) -> list[str]:
    return [r.entry.id for r in service.search(query, **kwargs).results]


def write_by_hand(settings: Settings, relative: str, **fields) -> Path:
    """An entry file written the way a user (or another tool) would, bypassing the service."""
    path = settings.memory_dir / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {"id": path.stem, "content": "hand written", "created_at": "2024-01-01T00:00:00Z",
            "last_seen_at": T0.isoformat(), **fields}  # fmt: skip
    path.write_text(json.dumps(data))
    return path


# ---------------------------------------------------------------------- save / get / search
def test_save_writes_a_valid_file_at_the_category_path(service: MemoryService, settings: Settings) -> None:
    e = service.save("User prefers dark mode", category="user-preferences/ui", tags=["UI", " ui ", "theme"])
    assert re.fullmatch(r"[0-9a-f]{12}", e.id)
    assert e.created_at == T0 and e.last_seen_at == T0
    assert e.tags == ["UI", "theme"]
    assert e.importance == 0.7  # an agent's own save (salience base)
    path = settings.memory_dir / "user-preferences" / "ui" / f"{e.id}.json"
    on_disk = json.loads(path.read_text())
    assert on_disk["content"] == "User prefers dark mode"
    assert on_disk["category"] == "user-preferences/ui"
    assert MemoryEntry.model_validate(on_disk) == e
    assert entry_files(settings) == [f"user-preferences/ui/{e.id}.json"]


def test_unicode_twins_of_a_tag_or_word_are_one(service: MemoryService) -> None:
    nfd = unicodedata.normalize("NFD", "Café")
    e = service.save(f"Meet at the {nfd} near the station", tags=[nfd, "café", "Ｃａｆé", "ca\u200bfé"])
    assert e.tags == ["Café"]  # one tag, stored NFC, invisible characters removed
    for tag in ("CAFÉ", nfd, "ｃａｆé", "\u202ecafé"):
        assert found(service, tags=[tag]) == [e.id], tag
    for query in ("café", "CAFÉ", nfd, "Ｃａｆé"):
        assert found(service, query) == [e.id], query


def test_uncategorized_entries_live_in_the_memory_root(service: MemoryService, settings: Settings) -> None:
    e = service.save("no category here", category="")
    assert e.category is None
    assert entry_files(settings) == [f"{e.id}.json"]


def test_read_your_writes(service: MemoryService) -> None:
    e = service.save("The deploy key rotates every Tuesday", metadata={"source": "user"}, importance=0.9)
    assert service.get(e.id) == e
    results = service.search("deploy key").results
    assert [r.entry for r in results] == [e]
    assert results[0].score is not None and results[0].score > 0
    listed = service.search().results
    assert [r.entry.id for r in listed] == [e.id] and listed[0].score is None


def test_search_ranks_and_filters(service: MemoryService) -> None:
    a = service.save("python packaging with uv", category="dev/python", tags=["tools"])
    b = service.save("python typing tips", category="dev/python")
    c = service.save("packaging tape for moving", category="home")
    assert found(service, "python packaging")[0] == a.id
    assert set(found(service, "packaging")) == {a.id, c.id}
    assert found(service, "packaging", category="dev/") == [a.id]
    assert found(service, "python", tags=["TOOLS"]) == [a.id]
    assert found(service, limit=2) == [c.id, b.id]  # no query: newest first
    assert found(service, created_after=b.created_at) == [c.id, b.id]
    assert found(service, created_before=b.created_at) == [a.id]
    assert service.search("python", limit=1).total_matches == 2
    assert found(service, "to a") == []  # only short words


def test_categories_and_stats(service: MemoryService) -> None:
    service.save("one entry here", category="a")
    service.save("two entry here", category="a/b")
    service.save("three entry here")
    gone = service.save("four entry here", category="c")
    service.delete(gone.id)
    tree = service.categories()
    assert [(c.category, c.entries, c.total) for c in tree.categories] == [("a", 1, 2), ("a/b", 1, 1)]
    assert (tree.uncategorized, tree.total) == (1, 3)
    stats = service.stats()
    assert (stats.active, stats.archived, stats.categories) == (3, 1, 2)


# ---------------------------------------------------------------------- update / delete
def test_update_changes_fields_and_sets_updated_at(service: MemoryService, clock: FakeClock) -> None:
    e = service.save("original wording", category="notes")
    clock.now = T0 + timedelta(days=3)
    updated = service.update(e.id, content="revised wording", tags=["x1"], importance=0.2, metadata={"k": "v"})
    assert updated.updated_at == T0 + timedelta(days=3)
    assert updated.created_at == e.created_at
    assert (updated.content, updated.tags, updated.importance, updated.metadata) == (
        "revised wording",
        ["x1"],
        0.2,
        {"k": "v"},
    )
    assert service.get(e.id) == updated
    assert found(service, "original") == []
    assert found(service, "revised") == [e.id]


def test_update_moves_the_file_when_the_category_changes(service: MemoryService, settings: Settings) -> None:
    e = service.save("movable fact", category="old/place")
    service.update(e.id, category="new/place")
    assert entry_files(settings) == [f"new/place/{e.id}.json"]
    assert service.get(e.id).category == "new/place"
    assert found(service, "movable", category="old") == []
    assert found(service, "movable", category="new") == [e.id]
    service.update(e.id, category="")
    assert entry_files(settings) == [f"{e.id}.json"]
    assert service.get(e.id).category is None


def test_update_needs_a_change(service: MemoryService) -> None:
    e = service.save("something to keep")
    with pytest.raises(InvalidInputError, match="nothing to update"):
        service.update(e.id)


def test_delete_archives_by_default(service: MemoryService, settings: Settings, clock: FakeClock) -> None:
    e = service.save("soon archived fact", category="misc")
    clock.now = T0 + timedelta(hours=5)
    result = service.delete(e.id, reason="outdated")
    assert not result.permanent and result.entry is not None
    path = settings.memory_dir / "misc" / f"{e.id}.json"
    on_disk = json.loads(path.read_text())
    assert on_disk["archived_at"] is not None and on_disk["archive_reason"] == "outdated"
    assert result.entry.archived_at == T0 + timedelta(hours=5)
    assert found(service, "archived") == []
    assert found(service) == []
    assert found(service, "archived", include_archived=True) == [e.id]
    assert service.get(e.id).archived
    again = service.delete(e.id)  # archiving twice changes nothing
    assert again.entry is not None and again.entry.archive_reason == "outdated"


def test_an_archived_memory_is_restored_and_not_changed_behind_its_archive(
    service: MemoryService, settings: Settings, clock: FakeClock
) -> None:
    e = service.save("The user lives in Lisbon", category="user-facts")
    service.delete(e.id, reason="moved to Porto", superseded_by="0123456789ab")
    path = settings.memory_dir / "user-facts" / f"{e.id}.json"
    archived_file = path.read_bytes()
    with pytest.raises(InvalidInputError, match=r"is archived \(on .*: moved to Porto\); pass restore=true"):
        service.update(e.id, content="The user lives in Porto")
    assert path.read_bytes() == archived_file  # refused: nothing written
    clock.now = T0 + timedelta(days=3)
    back = service.update(e.id, content="The user lives in Porto", restore=True)
    assert not back.archived and back.archive_reason is None and back.superseded_by is None
    assert back.updated_at == T0 + timedelta(days=3) and back.content == "The user lives in Porto"
    assert found(service, "Porto") == [e.id] and service.stats().archived == 0
    assert service.update(e.id, restore=True) == back  # restoring a live memory changes nothing
    service.delete(e.id)
    assert found(service, "Porto") == []
    assert not service.update(e.id, restore=True).archived and found(service, "Porto") == [e.id]


def test_permanent_delete_removes_the_file(service: MemoryService, settings: Settings) -> None:
    keep = service.save("kept entry words")
    e = service.save("doomed entry words", category="tmp")
    result = service.delete(e.id, permanent=True)
    assert result.permanent and result.entry is None
    assert entry_files(settings) == [f"{keep.id}.json"]
    assert found(service, "entry", include_archived=True) == [keep.id]
    with pytest.raises(NotFoundError):
        service.get(e.id)


def test_permanent_delete_of_an_archived_entry(service: MemoryService, settings: Settings) -> None:
    e = service.save("archived then purged")
    service.delete(e.id)
    service.delete(e.id, permanent=True)
    assert entry_files(settings) == []
    assert found(service, "purged", include_archived=True) == []


# ---------------------------------------------------------------------- rejected input
@pytest.mark.parametrize(
    ("content", "message"),
    [("", "content is empty"), ("   \n\t ", "content is empty"), ("x" * 65, "limit is 64"), ("é" * 33, "66 bytes")],
    ids=["empty", "whitespace", "too-long", "too-many-utf8-bytes"],
)
def test_bad_content_is_rejected_and_nothing_is_written(
    services: Services, settings: Settings, content: str, message: str
) -> None:
    small = settings.model_copy(update={"max_content_bytes": 64})
    service = services.open(small)
    service.save("x" * 64)  # exactly at the limit is fine
    before = entry_files(settings)
    with pytest.raises(InvalidInputError, match=message):
        service.save(content)
    assert entry_files(settings) == before


def test_oversized_content_message_is_actionable(services: Services, settings: Settings) -> None:
    service = services.open(settings.model_copy(update={"max_content_bytes": 10}))
    with pytest.raises(InvalidInputError) as info:
        service.save("this is far too long")
    assert "ROCKMEM_MAX_CONTENT_BYTES" in str(info.value) and "Split" in str(info.value)


@pytest.mark.parametrize("category", ["../escape", "/abs", "a//b", "a b", "a\\b"])
def test_invalid_category_is_rejected_and_nothing_is_written(
    service: MemoryService, settings: Settings, category: str
) -> None:
    with pytest.raises(InvalidInputError, match="category"):
        service.save("content", category=category)
    assert entry_files(settings) == []
    assert not (settings.home / "escape").exists()


def test_invalid_update_leaves_the_entry_alone(service: MemoryService, settings: Settings) -> None:
    e = service.save("stable content", category="a")
    for bad in ({"content": " "}, {"category": "../x"}, {"importance": 2}, {"metadata": {"k": 1}}):
        with pytest.raises(InvalidInputError):
            service.update(e.id, **bad)
    assert service.get(e.id) == e
    assert entry_files(settings) == [f"a/{e.id}.json"]


@pytest.mark.parametrize(
    "kwargs",
    [{"importance": 1.5}, {"importance": True}, {"metadata": {"k": 3}}, {"metadata": {" ": "v"}}, {"tags": ["a\x00"]}],
)
def test_other_invalid_fields_are_rejected(service: MemoryService, settings: Settings, kwargs: dict) -> None:
    with pytest.raises(InvalidInputError):
        service.save("content", **kwargs)
    assert entry_files(settings) == []


def test_unknown_and_malformed_ids(service: MemoryService) -> None:
    with pytest.raises(NotFoundError, match="abcdefabcdef"):
        service.get("abcdefabcdef")
    with pytest.raises(NotFoundError):
        service.update("abcdefabcdef", content="x")
    with pytest.raises(NotFoundError):
        service.delete("abcdefabcdef")
    with pytest.raises(InvalidInputError, match="memory id"):
        service.get("../etc/passwd")


@pytest.mark.parametrize("limit", [0, -1, 201, True, 2.5])
def test_search_limit_is_checked(service: MemoryService, limit: object) -> None:
    with pytest.raises(InvalidInputError, match="limit"):
        service.search("anything", limit=limit)  # type: ignore[arg-type]


# ---------------------------------------------------------------------- damaged and hand-made files
def test_a_malformed_file_is_skipped_at_start_and_kept(services: Services, settings: Settings) -> None:
    first = services.open()
    good = first.save("healthy entry text", category="cat")
    services.close(first)
    bad = settings.memory_dir / "cat" / "badbadbad123.json"
    bad.write_bytes(b'{"id": "badbadbad123", "content": ')
    shutil.rmtree(settings.index_dir)  # force a start that reads every file

    service = services.open()
    assert found(service, "healthy") == [good.id]
    assert found(service) == [good.id]
    assert bad.read_bytes() == b'{"id": "badbadbad123", "content": '


def test_a_malformed_file_added_while_stopped_is_skipped_at_start_from_snapshot(
    services: Services, settings: Settings
) -> None:
    first = services.open()
    good = first.save("healthy entry text")
    services.close(first)
    bad = write_by_hand(settings, "x/broken00001.json")
    bad.write_text("{ nope")
    service = services.open()
    assert found(service) == [good.id]
    assert bad.read_text() == "{ nope"


def test_files_changed_by_hand_while_stopped_are_picked_up(services: Services, settings: Settings) -> None:
    first = services.open()
    moved = first.save("moved by hand", category="before")
    removed = first.save("removed by hand")
    kept = first.save("kept as is")
    services.close(first)
    assert (settings.index_dir / SNAPSHOT_NAME).exists()

    write_by_hand(settings, "cat/handmade0001.json", content="added by hand while stopped", tags=["manual"])
    (settings.memory_dir / "before" / f"{moved.id}.json").rename(settings.memory_dir / f"{moved.id}.json")
    (settings.memory_dir / f"{removed.id}.json").unlink()

    service = services.open()
    added = service.get("handmade0001")
    assert (added.category, added.tags) == ("cat", ["manual"])
    assert found(service, "added while stopped") == ["handmade0001"]
    assert service.get(moved.id).category is None
    assert found(service, "moved", category="before") == []
    assert found(service, "moved") == [moved.id]
    with pytest.raises(NotFoundError):
        service.get(removed.id)
    assert sorted(found(service)) == sorted([kept.id, moved.id, "handmade0001"])


def test_a_copy_of_an_indexed_entry_added_by_hand_does_not_displace_it(services: Services, settings: Settings) -> None:
    first = services.open()
    original = first.save("the original wording", category="home")
    services.close(first)
    write_by_hand(settings, f"elsewhere/{original.id}.json", content="a stray copy")
    write_by_hand(settings, "elsewhere/not an id!.json", content="ignored: the name is not an id")

    service = services.open()
    assert service.get(original.id).category == "home"
    assert found(service, "original") == [original.id]
    assert found(service, "stray") == []
    assert found(service, "ignored") == []


# ---------------------------------------------------------------------- a start lists only changed folders
def _aged(settings: Settings) -> None:
    """Every memory folder last changed an hour ago (a folder changed in the last seconds is always listed)."""
    old = time.time() - 3600
    for folder in [settings.memory_dir, *(p for p in settings.memory_dir.rglob("*") if p.is_dir())]:
        os.utime(folder, (old, old))


def _stamped_home(services: Services, settings: Settings, texts: dict[str, str]) -> dict[str, str]:
    """A home whose snapshot holds every folder's stamp: entries saved, folders aged, one start that lists them
    and keeps their stamps. Returns the ids by text."""
    first = services.open()
    ids = {text: first.save(text, category=category).id for text, category in texts.items()}
    services.close(first)
    _aged(settings)
    second = services.open(settings.model_copy(update={"snapshot_every_changes": 1}))  # any listing is saved
    assert second.index.folder_stamps, "aged folders are stamped"
    services.close(second)
    return ids


@pytest.fixture
def listed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The folders os.listdir reads, as they are read."""
    import rockmem_mcp.memory.files as files_module

    seen: list[str] = []
    real = os.listdir

    def spying(path: str) -> list[str]:
        seen.append(str(path))
        return real(path)

    monkeypatch.setattr(files_module.os, "listdir", spying)
    return seen


def memory_folders(listed: list[str], settings: Settings) -> list[str]:
    return [path for path in listed if Path(path).is_relative_to(settings.memory_dir)]


def test_a_start_lists_only_the_folders_changed_since_the_last_one(
    services: Services, settings: Settings, listed: list[str]
) -> None:
    ids = _stamped_home(services, settings, {"a quiet fact": "quiet", "a busy fact": "busy/deep"})
    listed.clear()
    service = services.open()
    assert memory_folders(listed, settings) == []  # nothing changed: none is read, every entry is still there
    assert sorted(found(service)) == sorted(ids.values())
    services.close(service)

    write_by_hand(settings, "busy/deep/handmade0001.json", content="added by hand to a busy folder")
    listed.clear()
    service = services.open()
    assert memory_folders(listed, settings) == [str(settings.memory_dir / "busy" / "deep")]
    assert found(service, "added by hand") == ["handmade0001"]
    assert sorted(found(service)) == sorted([*ids.values(), "handmade0001"])


def test_removals_new_folders_and_moves_by_hand_are_still_seen(services: Services, settings: Settings) -> None:
    ids = _stamped_home(services, settings, {"goes away": "quiet", "moves": "quiet/inner", "stays": "other"})
    (settings.memory_dir / "quiet" / f"{ids['goes away']}.json").unlink()
    write_by_hand(settings, "other/fresh/handmade0002.json", content="in a folder made by hand")
    moved = settings.memory_dir / "quiet" / "inner" / f"{ids['moves']}.json"
    moved.rename(settings.memory_dir / "other" / moved.name)

    service = services.open()
    with pytest.raises(NotFoundError):
        service.get(ids["goes away"])
    assert service.get("handmade0002").category == "other/fresh"
    assert service.get(ids["moves"]).category == "other"
    assert sorted(found(service)) == sorted([ids["moves"], ids["stays"], "handmade0002"])


def test_a_copy_in_a_changed_folder_of_an_entry_in_an_unchanged_one_does_not_displace_it(
    services: Services, settings: Settings
) -> None:
    ids = _stamped_home(services, settings, {"the original wording": "home", "elsewhere fact": "elsewhere"})
    original = ids["the original wording"]
    write_by_hand(settings, f"elsewhere/{original}.json", content="a stray copy")

    service = services.open()
    assert service.get(original).category == "home"
    assert found(service, "original") == [original]
    assert found(service, "stray") == []
    assert not (settings.memory_dir / "elsewhere" / f"{original}.json").exists()  # quarantined, as at any start


def test_a_folder_swapped_for_a_copy_with_the_same_times_is_listed(services: Services, settings: Settings) -> None:
    """A stamp is the folder's inode and times: a copy (cp -a, a restore) keeps the times but not the inode."""
    ids = _stamped_home(services, settings, {"first fact": "box", "second fact": "other"})
    box = settings.memory_dir / "box"
    shutil.copytree(box, settings.memory_dir / "box-copy")
    write_by_hand(settings, "box-copy/handmade0003.json", content="only in the copy")
    shutil.copystat(box, settings.memory_dir / "box-copy")  # the same times as the folder it replaces
    shutil.rmtree(box)
    (settings.memory_dir / "box-copy").rename(box)

    service = services.open()
    assert sorted(found(service)) == sorted([*ids.values(), "handmade0003"])


def test_a_folder_changed_in_the_last_seconds_is_listed_again_next_time(
    services: Services, settings: Settings, listed: list[str]
) -> None:
    """Its next change could fall in the same tick of its timestamp and leave its stamp as it was: it is listed
    at the next start even though its parent, stamped, is not."""
    service = services.open()
    service.save("first", category="box")
    services.close(service)
    _aged(settings)
    os.utime(settings.memory_dir / "box")  # changed just now; the memory folder itself an hour ago
    service = services.open(settings.model_copy(update={"snapshot_every_changes": 1}))
    services.close(service)
    write_by_hand(settings, "box/handmade0009.json", content="added by hand later")  # the memory folder unchanged
    listed.clear()
    service = services.open()
    assert str(settings.memory_dir / "box") in memory_folders(listed, settings)
    assert found(service, "added by hand") == ["handmade0009"]


@pytest.mark.parametrize("other_folder", ["projects/deep", "empty"])
def test_uncategorized_entries_removed_by_hand_go_beside_folders_that_are_no_category(
    services: Services, settings: Settings, other_folder: str
) -> None:
    """A folder holding only another folder (or nothing) is no category of the index: unchanged, it must not
    stand for the uncategorized entries, whose folder (the memory folder itself) did change."""
    ids = _stamped_home(services, settings, {"root fact": "", "deep fact": "projects/deep"})
    (settings.memory_dir / "empty").mkdir()
    _aged(settings)
    service = services.open(settings.model_copy(update={"snapshot_every_changes": 1}))
    services.close(service)
    (settings.memory_dir / f"{ids['root fact']}.json").unlink()

    service = services.open()
    assert ids["root fact"] not in service.index
    assert found(service) == [ids["deep fact"]]


def test_an_unreadable_file_fixed_in_place_is_read_at_the_next_start(services: Services, settings: Settings) -> None:
    """A fix in place changes no folder: the folder of a file that could not be read is listed again anyway."""
    _stamped_home(services, settings, {"fact": "box"})
    path = settings.memory_dir / "box" / "handmade0007.json"
    path.write_text("{ not json")
    _aged(settings)
    service = services.open(settings.model_copy(update={"snapshot_every_changes": 1}))
    assert found(service, "fixed") == []
    services.close(service)
    with path.open("r+") as file:  # the same file, rewritten in place
        file.truncate(0)
        file.write(json.dumps({"id": "handmade0007", "content": "fixed by hand", "created_at": T0.isoformat()}))

    service = services.open()
    assert found(service, "fixed by hand") == ["handmade0007"]


def test_a_snapshot_without_stamps_lists_every_folder(
    services: Services, settings: Settings, listed: list[str]
) -> None:
    """Snapshots from before the stamps (or any without them) fall back to listing every folder."""
    ids = _stamped_home(services, settings, {"one fact": "one", "two fact": "two"})
    path = settings.index_dir / SNAPSHOT_NAME
    with np.load(path) as data:
        arrays = {name: data[name] for name in data.files if not name.startswith("folder_")}
    MemoryIndex.write_snapshot(path, arrays)
    listed.clear()
    service = services.open()
    assert {str(settings.memory_dir / "one"), str(settings.memory_dir / "two")} <= set(memory_folders(listed, settings))
    assert sorted(found(service)) == sorted(ids.values())


# ---------------------------------------------------------------------- several instances on one home
def test_writes_in_one_instance_are_seen_by_another_without_restart(services: Services, settings: Settings) -> None:
    a, b = services.open(), services.open()
    assert found(b) == []
    e = a.save("shared between processes", category="team")
    assert found(b, "shared") == [e.id]
    assert b.get(e.id) == e

    a.update(e.id, content="changed between processes", category="team/sub")
    assert found(b, "shared") == []
    assert found(b, "changed", category="team/sub") == [e.id]
    assert b.get(e.id).category == "team/sub"

    a.delete(e.id)
    assert found(b, "changed") == []
    assert found(b, "changed", include_archived=True) == [e.id]

    a.delete(e.id, permanent=True)
    with pytest.raises(NotFoundError):
        b.get(e.id)
    assert found(b, include_archived=True) == []


def test_both_instances_write(services: Services) -> None:
    a, b = services.open(), services.open()
    ea = a.save("written by alpha instance")
    eb = b.save("written by beta instance")
    for service in (a, b):
        assert sorted(found(service, "written instance")) == sorted([ea.id, eb.id])
    b.update(ea.id, content="alpha entry edited by beta")
    assert a.get(ea.id).content == "alpha entry edited by beta"
    assert found(a, "edited") == [ea.id]


# ---------------------------------------------------------------------- restarts and snapshots
def populate(service: MemoryService) -> dict[str, str | None]:
    kept = service.save("restart survivor alpha", category="a", tags=["t1"])
    changed = service.save("restart survivor beta", category="b")
    service.update(changed.id, content="restart survivor gamma", category="c/d")
    archived = service.save("restart archived delta")
    service.delete(archived.id)
    purged = service.save("restart purged epsilon")
    service.delete(purged.id, permanent=True)
    return {"kept": kept.id, "changed": changed.id, "archived": archived.id}


def assert_populated(service: MemoryService, ids: dict[str, str | None]) -> None:
    assert sorted(found(service, "restart survivor")) == sorted([ids["kept"], ids["changed"]])
    assert found(service, "gamma", category="c") == [ids["changed"]]
    assert found(service, "beta") == []
    assert found(service, "epsilon", include_archived=True) == []
    assert found(service, "delta") == []
    assert found(service, "delta", include_archived=True) == [ids["archived"]]
    assert found(service, tags=["T1"]) == [ids["kept"]]


def test_restart_loads_the_snapshot_and_sees_everything(
    services: Services, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = services.open()
    ids = populate(first)
    services.close(first)
    assert (settings.index_dir / SNAPSHOT_NAME).is_file()

    loads: list[object] = []
    real_load = MemoryIndex.load.__func__  # type: ignore[attr-defined]

    def spy(cls: type[MemoryIndex], path: Path, with_vectors: bool = True):
        result = real_load(cls, path, with_vectors)
        loads.append(result)
        return result

    monkeypatch.setattr(MemoryIndex, "load", classmethod(spy))
    service = services.open()
    assert loads and loads[0] is not None  # started from the snapshot
    assert_populated(service, ids)


def test_journal_changes_after_the_snapshot_are_replayed_at_start(services: Services) -> None:
    a = services.open()
    ids = populate(a)
    a.write_snapshot()
    late = a.save("written after the snapshot")
    b = services.open()  # a still runs: its last write is only in the journal
    assert found(b, "after snapshot") == [late.id]
    assert_populated(b, ids)


def test_losing_the_index_folder_loses_nothing(services: Services, settings: Settings) -> None:
    first = services.open()
    ids = populate(first)
    services.close(first)
    shutil.rmtree(settings.index_dir)
    service = services.open()
    assert_populated(service, ids)
    assert (settings.index_dir / SNAPSHOT_NAME).is_file()  # rebuilt and saved again


def test_a_garbage_snapshot_is_rebuilt(services: Services, settings: Settings) -> None:
    first = services.open()
    ids = populate(first)
    services.close(first)
    (settings.index_dir / SNAPSHOT_NAME).write_bytes(b"\x00garbage" * 100)
    assert_populated(services.open(), ids)


def test_removing_the_index_folder_while_running_does_not_break_the_service(
    services: Services, settings: Settings
) -> None:
    service = services.open()
    e = service.save("still searchable afterwards")
    shutil.rmtree(settings.index_dir)
    try:
        assert found(service, "searchable") == [e.id]
        later = service.save("saved after the folder vanished")
        assert found(service, "vanished") == [later.id]
    finally:
        settings.index_dir.mkdir(exist_ok=True)  # let teardown close the service either way


def test_an_instance_that_fell_behind_rotations_reloads(services: Services, settings: Settings) -> None:
    small = settings.model_copy(update={"journal_rotate_bytes": 1_000})
    a, b = services.open(small), services.open(small)
    saved = []
    for round_ in range(2):  # two rotations: b's journal generation is deleted
        saved += [a.save(f"rotation filler {round_} {i}").id for i in range(15)]
        a.write_snapshot()
    assert not (settings.index_dir / "changes-00000001.jsonl").exists()
    assert sorted(found(b, "rotation filler", limit=100)) == sorted(saved)


def test_changes_made_by_another_instance_during_rotation_are_not_lost(services: Services, settings: Settings) -> None:
    """A write landing between write_snapshot's journal read and its rotation must still be applied."""
    small = settings.model_copy(update={"journal_rotate_bytes": 1_000})
    a, b = services.open(small), services.open(small)
    e = a.save("original wording here")
    for i in range(20):
        a.save(f"journal filler {i}")
    real_rotate = a.journal.rotate

    def rotate_after_a_concurrent_write():
        b.update(e.id, content="concurrently replaced wording")
        return real_rotate()

    a.journal.rotate = rotate_after_a_concurrent_write  # type: ignore[method-assign]
    a.write_snapshot()
    assert found(a, "concurrently replaced") == [e.id]
    assert found(a, "original") == []


def test_snapshot_is_refreshed_after_enough_changes(services: Services, settings: Settings) -> None:
    """snapshot_every_changes triggers a (background) snapshot; close() waits for it."""
    service = services.open(settings.model_copy(update={"snapshot_every_changes": 3}))
    snapshot = settings.index_dir / SNAPSHOT_NAME
    before = snapshot.stat().st_mtime_ns, snapshot.stat().st_size
    for i in range(3):
        service.save(f"background snapshot {i}")
    services.close(service)  # joins the background thread
    loaded = MemoryIndex.load(snapshot)
    assert loaded is not None and len(loaded[0]) == 3
    assert (snapshot.stat().st_mtime_ns, snapshot.stat().st_size) != before


def test_ids_are_unique_even_when_the_generator_repeats(
    service: MemoryService, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rockmem_mcp.memory import service as memory_module

    ids = iter(["aaaaaaaaaaaa", "aaaaaaaaaaaa", "aaaaaaaaaaaa", "bbbbbbbbbbbb"])
    monkeypatch.setattr(memory_module, "new_entry_id", lambda: next(ids))
    first = service.save("first one")
    second = service.save("second one")
    assert (first.id, second.id) == ("aaaaaaaaaaaa", "bbbbbbbbbbbb")
    assert service.get(first.id).content == "first one"


def test_iter_entries_is_oldest_first_including_archived(service: MemoryService) -> None:
    a = service.save("first saved")
    b = service.save("second saved")
    c = service.save("third saved")
    service.update(a.id, content="first saved, edited later")
    service.delete(b.id)
    assert [e.id for e in service.iter_entries()] == [a.id, b.id, c.id]


def test_clock_drives_created_at_ordering(services: Services) -> None:
    clock = FakeClock(step=timedelta(0))
    service = services.open(clock=clock)
    first = service.save("earlier entry")
    clock.now = T0 - timedelta(days=1)  # a clock that went backwards
    second = service.save("later but older timestamp")
    assert found(service) == [first.id, second.id]
