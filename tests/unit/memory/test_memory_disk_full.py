"""A full disk during a write (issue 17, item 6): the error says so, nothing of the failed write is left (no entry
file, no journal record, no index entry), a retry makes no duplicate, and another instance on the home (another
process) sees exactly what was acknowledged."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from rockmem_mcp.errors import StorageError
from rockmem_mcp.memory.service import MemoryService
from rockmem_mcp.storage import atomic
from rockmem_mcp.storage.changes import ChangeJournal
from tests.unit.helpers import Services, entry_files


def disk_full(*_: object, **__: object) -> None:
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def journal_text(services: Services) -> str:
    return "".join(p.read_text() for p in sorted(services.settings.index_dir.glob("changes-*.jsonl")))


def contents(service: MemoryService) -> list[str]:
    return sorted(hit.entry.content for hit in service.search(None, limit=50).results)


@pytest.mark.parametrize("where", ["entry file", "change journal"])
def test_a_save_refused_by_a_full_disk_leaves_nothing_and_a_retry_makes_one(
    services: Services, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    a, b = services.open(), services.open()
    kept = a.save("saved before the disk filled", category="notes")
    journal_before = journal_text(services)
    with monkeypatch.context() as patch:
        if where == "entry file":
            patch.setattr(atomic.os, "fsync", disk_full)
        else:
            patch.setattr(ChangeJournal, "append", disk_full)
        with pytest.raises(StorageError, match=r"^disk full while saving memory.*No space left on device"):
            a.save("the invoice is due on the 3rd", category="notes")
    assert entry_files(services.settings) == [f"notes/{kept.id}.json"]  # no file, no temp file
    assert journal_text(services) == journal_before
    assert contents(a) == contents(b) == ["saved before the disk filled"]

    retried = a.save("the invoice is due on the 3rd", category="notes")  # space again
    assert sorted(entry_files(services.settings)) == sorted([f"notes/{kept.id}.json", f"notes/{retried.id}.json"])
    for service in (a, b, services.open()):
        assert contents(service) == ["saved before the disk filled", "the invoice is due on the 3rd"]


def test_an_update_or_delete_refused_by_a_full_disk_changes_nothing(
    services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = services.open(), services.open()
    entry = a.save("the standup is at 9:30", category="team")
    before = (services.settings.memory_dir / "team" / f"{entry.id}.json").read_bytes()
    with monkeypatch.context() as patch:
        patch.setattr(ChangeJournal, "append", disk_full)
        with pytest.raises(StorageError, match=rf"^disk full while updating memory {entry.id}"):
            a.update(entry.id, content="the standup is at 10:00", category="meetings")
        with pytest.raises(StorageError, match=rf"^disk full while deleting memory {entry.id}"):
            a.delete(entry.id)
        with pytest.raises(StorageError, match=rf"^disk full while deleting memory {entry.id}"):
            a.delete(entry.id, permanent=True)
    assert entry_files(services.settings) == [f"team/{entry.id}.json"]
    assert (services.settings.memory_dir / "team" / f"{entry.id}.json").read_bytes() == before
    for service in (a, b):
        assert service.get(entry.id) == entry
        assert contents(service) == ["the standup is at 9:30"]


def test_any_other_io_error_names_what_was_being_done(services: Services, monkeypatch: pytest.MonkeyPatch) -> None:
    service = services.open()

    def failing(*_: object, **__: object) -> None:
        raise OSError(errno.EIO, os.strerror(errno.EIO), str(Path("memory/x.json")))

    monkeypatch.setattr(atomic.os, "fsync", failing)
    with pytest.raises(StorageError, match=r"^I/O error while saving memory \(memory/x.json\): Input/output error"):
        service.save("anything")
