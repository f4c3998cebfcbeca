"""Categories on a case-insensitive filesystem (macOS and Windows defaults).

There a category's folder keeps the case it was first made with: `work/notes` and `Work/Notes` are one folder.
rockmem files an entry by its category's spelling (so the filesystem puts it in that one folder) and takes
the category from the entry's own file when it differs from the folder only by case. So: changing only the
case of a category keeps the memory; every entry keeps the case it was saved with across restarts; and two
categories that differ only by case stay two categories (search and the category list tell them apart, as on
any filesystem) that happen to share a folder.
"""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from rockmem_mcp.audit.log import AuditLog
from rockmem_mcp.config import Settings
from rockmem_mcp.consolidation.dream import Dreamer
from rockmem_mcp.consolidation.shapes import DreamPlan, PlanUpdate
from rockmem_mcp.consolidation.templates import Templates
from rockmem_mcp.errors import StorageError
from rockmem_mcp.graph.service import GraphService
from rockmem_mcp.home.doctor import Doctor
from rockmem_mcp.memory.service import SNAPSHOT_NAME, MemoryService
from rockmem_mcp.models import MemoryEntry
from rockmem_mcp.storage.changes import ChangeJournal
from tests.unit.case_folding import case_insensitive_folder


@pytest.fixture
def folded_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Settings]:
    with case_insensitive_folder(tmp_path, monkeypatch) as (folder, how):
        print(f"case-insensitive folder: {how}")
        assert (folder / "probe").exists() is False
        (folder / "Probe").mkdir()
        assert (folder / "PROBE").is_dir() and os.listdir(folder) == ["Probe"]  # folds case, keeps the first
        (folder / "Probe").rmdir()
        yield Settings(home=folder / "home", embedding_model="off")


def contents(service: MemoryService, **search: object) -> list[tuple[str, str | None]]:
    return sorted((r.entry.content, r.entry.category) for r in service.search(limit=50, **search).results)  # type: ignore[arg-type]


def test_changing_only_the_case_of_a_category_keeps_the_memory_and_its_case(folded_settings: Settings) -> None:
    first = MemoryService(folded_settings)
    standup = first.save("Standup moved to ten", category="Work/Notes")
    budget = first.save("Review the ferry budget", category="Work/Notes")

    moved = first.update(budget.id, category="work/notes")
    assert moved.category == "work/notes"
    assert first.get(budget.id).content == "Review the ferry budget"
    assert [r.entry.id for r in first.search("ferry budget").results] == [budget.id]
    folder = folded_settings.memory_dir / "Work" / "Notes"
    assert sorted(os.listdir(folder)) == sorted([f"{standup.id}.json", f"{budget.id}.json"])  # one folder

    # Another process sees the move through the journal, with the new case.
    other = MemoryService(folded_settings)
    assert other.get(budget.id).category == "work/notes"
    other.close()

    later = first.save("Book the ferry", category="WORK/notes")  # a third spelling: same folder, own category
    first.close()

    expected = [
        ("Book the ferry", "WORK/notes"),
        ("Review the ferry budget", "work/notes"),
        ("Standup moved to ten", "Work/Notes"),
    ]
    for from_snapshot in (True, False):  # a restart that loads the index snapshot, then one that reads the files
        if not from_snapshot:
            (folded_settings.index_dir / SNAPSHOT_NAME).unlink()
        again = MemoryService(folded_settings)
        assert contents(again) == expected
        assert again.get(budget.id).category == "work/notes" and again.get(later.id).category == "WORK/notes"
        best = again.search("ferry budget").results[0].entry
        assert (best.id, best.category) == (budget.id, "work/notes")
        # Categories that differ only by case stay apart, as on a case-sensitive filesystem.
        assert contents(again, category="work/notes") == [("Review the ferry budget", "work/notes")]
        assert contents(again, category="Work") == [("Standup moved to ten", "Work/Notes")]
        listed = {c.category: c.entries for c in again.categories().categories}
        assert listed == {"WORK": 0, "WORK/notes": 1, "Work": 0, "Work/Notes": 1, "work": 0, "work/notes": 1}
        again.close()

    # Moving back, and moving out of the shared folder, leave exactly one file each.
    last = MemoryService(folded_settings)
    assert last.update(budget.id, category="Work/Notes").category == "Work/Notes"
    assert last.update(later.id, category="travel").category == "travel"
    assert last.get(budget.id).content == "Review the ferry budget" and last.get(later.id).category == "travel"
    last.close()
    assert sorted(os.listdir(folder)) == sorted([f"{standup.id}.json", f"{budget.id}.json"])
    assert os.listdir(folded_settings.memory_dir / "travel") == [f"{later.id}.json"]
    assert Doctor(folded_settings).run().healthy  # no entry reported as misplaced


def test_a_case_only_move_refused_by_a_full_disk_keeps_the_memory(
    folded_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The undo of a failed move must not remove the file it just put back (one file under both spellings)."""
    service = MemoryService(folded_settings)
    entry = service.save("Review the ferry budget", category="Work/Notes")

    def disk_full(*_: object, **__: object) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    with monkeypatch.context() as patch:
        patch.setattr(ChangeJournal, "append", disk_full)
        with pytest.raises(StorageError, match=r"^disk full while updating memory"):
            service.update(entry.id, category="work/notes")
    assert service.get(entry.id) == entry
    service.close()
    reopened = MemoryService(folded_settings)
    assert reopened.get(entry.id) == entry
    reopened.close()


# ---------------------------------------------------------------------------------- every path that re-files a memory
def entry_files(settings: Settings, entry_id: str) -> list[tuple[str, dict[str, object]]]:
    """Every file of one memory under the memory folder, found by listing (as a restart does): the folder it is
    in, relative, and its JSON."""
    root = settings.memory_dir
    return [
        (os.path.relpath(folder, root), json.loads(Path(folder, f"{entry_id}.json").read_bytes()))
        for folder, _, names in os.walk(root)
        if f"{entry_id}.json" in names
    ]


def assert_one_file(settings: Settings, entry: MemoryEntry, folder: str) -> None:
    """Exactly one file holds the memory, in the folder the filesystem already had, saying what `entry` says."""
    found = entry_files(settings, entry.id)
    assert [(where, data["content"], data["category"]) for where, data in found] == [
        (folder, entry.content, entry.category)
    ]


def assert_consistent(settings: Settings, entries: list[MemoryEntry]) -> None:
    """A restart, from the index snapshot and then from the files alone, finds each entry as it is, by get and by
    search; the index holds the ids the files hold; doctor finds nothing wrong."""
    for from_snapshot in (True, False):
        if not from_snapshot:
            (settings.index_dir / SNAPSHOT_NAME).unlink(missing_ok=True)
        again = MemoryService(settings)
        try:
            for entry in entries:
                assert again.get(entry.id) == entry
                hits = again.search(entry.content, include_archived=entry.archived).results
                assert (hits[0].entry.id, hits[0].entry.category) == (entry.id, entry.category)
            indexed = {e.id for e in again.iter_entries()}
            on_disk = {n[:-5] for _, _, names in os.walk(settings.memory_dir) for n in names if n.endswith(".json")}
            assert indexed == on_disk
        finally:
            again.close()
    report = Doctor(settings).run()
    assert report.healthy, report.findings


def test_a_case_only_move_with_new_content_keeps_one_file_for_every_reader(folded_settings: Settings) -> None:
    service = MemoryService(folded_settings)
    neighbour = service.save("Standup moved to ten", category="Work")
    entry = service.save("Review the ferry budget", category="Work")
    follower = MemoryService(folded_settings)  # another process, following the journal
    assert follower.get(entry.id) == entry

    moved = service.update(entry.id, content="Review the ferry and rail budget", category="work")
    assert (moved.content, moved.category) == ("Review the ferry and rail budget", "work")
    assert_one_file(folded_settings, moved, "Work")  # the folder keeps the first spelling
    assert service.get(entry.id) == moved
    assert [r.entry.id for r in service.search("rail budget").results] == [entry.id]
    assert follower.get(entry.id) == moved
    assert [(r.entry.id, r.entry.category) for r in follower.search("rail budget").results] == [(entry.id, "work")]
    follower.close()
    service.close()

    assert_consistent(folded_settings, [moved, neighbour])
    assert_one_file(folded_settings, neighbour, "Work")


def test_archiving_and_restoring_across_a_case_only_move_keeps_the_memory(folded_settings: Settings) -> None:
    service = MemoryService(folded_settings)
    entry = service.save("Review the ferry budget", category="Work")
    service.delete(entry.id, reason="done for now")
    restored = service.update(entry.id, category="work", restore=True)  # restore and re-file at once
    assert (restored.archived, restored.category) == (False, "work")
    assert_one_file(folded_settings, restored, "Work")

    archived = service.delete(entry.id, reason="done again").entry  # archived under the new spelling
    assert archived is not None and archived.archived
    assert_one_file(folded_settings, archived, "Work")
    back = service.update(entry.id, category="Work", restore=True)
    assert (back.archived, back.category) == (False, "Work")
    assert_one_file(folded_settings, back, "Work")
    service.close()
    assert_consistent(folded_settings, [back])


def test_a_dream_refiling_a_memory_by_case_keeps_it(folded_settings: Settings) -> None:
    service = MemoryService(folded_settings)
    graph = GraphService(folded_settings)
    entry = service.save("Review the ferry budget", category="Work/Notes")
    dreamer = Dreamer(service, graph, folded_settings, Templates(folded_settings.prompts_dir))
    report = dreamer.apply(DreamPlan(updates=[PlanUpdate(id=entry.id, category="work/notes")]), "consolidation")
    assert [a.action for a in report.applied] == ["update"] and report.rejected == []
    moved = service.get(entry.id)
    assert (moved.content, moved.category) == (entry.content, "work/notes")
    assert_one_file(folded_settings, moved, "Work/Notes")
    graph.close()
    service.close()
    assert_consistent(folded_settings, [moved])


def test_an_import_refiling_by_case_keeps_the_memory_and_so_does_its_undo(
    folded_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """save_many (import, the dream's merges) moves in a batch; a batch whose audit lines cannot be written is put
    back (`_put_back`), which must not remove the file it just put back either."""
    service = MemoryService(folded_settings)
    entry = service.save("Review the ferry budget", category="Work")

    def disk_full(*_: object, **__: object) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    refiled = entry.model_copy(update={"category": "work", "content": "Review the ferry and rail budget"})
    with monkeypatch.context() as patch:
        patch.setattr(AuditLog, "append", disk_full)
        with pytest.raises(OSError):
            service.save_many([refiled])
    assert service.get(entry.id) == entry
    assert_one_file(folded_settings, entry, "Work")

    assert service.save_many([refiled]) == 1
    assert service.get(entry.id) == refiled
    assert_one_file(folded_settings, refiled, "Work")
    service.close()
    assert_consistent(folded_settings, [refiled])


def test_a_stray_copy_of_an_entry_in_an_unchanged_folder_spelled_otherwise_is_settled(
    folded_settings: Settings,
) -> None:
    """A start lists only changed folders (memory/files.py, folder stamps). An entry filed as "work" in the folder
    "Work", unchanged since, whose copy turns up in another folder: the copy goes to quarantine as at any start,
    and the entry its folder holds stays; the one folder two spellings share is never taken for two."""
    settings = folded_settings.model_copy(update={"snapshot_every_changes": 1})  # any listing's stamps are kept
    first = MemoryService(settings)
    first.save("Standup moved to ten", category="Work")
    kept = first.save("Review the ferry budget", category="work")
    first.close()
    old = os.stat(settings.memory_dir).st_mtime - 3600
    for folder in (settings.memory_dir, settings.memory_dir / "Work"):
        os.utime(folder, (old, old))
    MemoryService(settings).close()  # stamps both folders
    stray = settings.memory_dir / "other" / f"{kept.id}.json"
    stray.parent.mkdir()
    stray.write_text(json.dumps({**json.loads(kept.model_dump_json()), "content": "a stray copy"}))

    again = MemoryService(settings)
    try:
        assert again.get(kept.id).content == "Review the ferry budget"
        assert not stray.exists()  # quarantined
        assert contents(again) == [("Review the ferry budget", "work"), ("Standup moved to ten", "Work")]
    finally:
        again.close()
