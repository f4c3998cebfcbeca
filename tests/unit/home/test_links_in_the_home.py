"""Links planted in a home, through the services and the command line: nothing is read, written, moved or
deleted outside the home (each of these went through the link once; found by review)."""

from __future__ import annotations

import contextlib
import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from rockmem_mcp import cli
from rockmem_mcp.config import Settings
from rockmem_mcp.errors import LinkRefusedError, NotFoundError
from rockmem_mcp.home.doctor import Doctor
from rockmem_mcp.memory.service import SNAPSHOT_NAME, STORE, MemoryService
from rockmem_mcp.models import MemoryEntry
from rockmem_mcp.search.memory_index import MemoryIndex
from rockmem_mcp.storage.changes import JournalPosition

ID = "a1b2c3d4e5f6"


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    folder = tmp_path / "outside"
    folder.mkdir()
    return folder


def _settings(tmp_path: Path) -> Settings:
    return Settings.load({"home": tmp_path / "home"}, env={})


def _plant_category_link(settings: Settings, memory: MemoryService, outside: Path) -> None:
    """memory/evil -> outside (holding an entry file), and a journal line naming it (as another writer)."""
    secret = MemoryEntry(id=ID, content="outside secret", category="evil", created_at=datetime.now(UTC))
    (outside / f"{ID}.json").write_bytes(secret.model_dump_json().encode())
    os.symlink(outside, settings.memory_dir / "evil")
    line = json.dumps({"w": "other", "s": STORE, "op": "put", "id": ID, "c": "evil"}) + "\n"
    with open(settings.index_dir / "changes-00000001.jsonl", "a") as f:
        f.write(line)


def test_journal_named_entry_is_not_read_through_a_linked_category_folder(tmp_path: Path, outside: Path) -> None:
    settings = _settings(tmp_path)
    memory = MemoryService(settings, embed_in_background=False)
    try:
        _plant_category_link(settings, memory, outside)
        hits = memory.search("outside secret", None, None, 10).results
        assert not any("outside secret" in h.entry.content for h in hits)
        with pytest.raises((NotFoundError, LinkRefusedError)):
            memory.get(ID)
    finally:
        memory.close()


def test_delete_does_not_unlink_through_a_linked_category_folder(tmp_path: Path, outside: Path) -> None:
    settings = _settings(tmp_path)
    memory = MemoryService(settings, embed_in_background=False)
    try:
        _plant_category_link(settings, memory, outside)
        with contextlib.suppress(NotFoundError, LinkRefusedError):
            memory.delete(ID, permanent=True)
    finally:
        memory.close()
    assert (outside / f"{ID}.json").exists()


def test_reindex_does_not_delete_through_a_linked_index_folder(tmp_path: Path, outside: Path) -> None:
    settings = _settings(tmp_path)
    settings.home.mkdir()
    (outside / SNAPSHOT_NAME).write_bytes(b"keep me")
    (outside / "graph-snapshot.jsonl").write_bytes(b"keep me")
    os.symlink(outside, settings.index_dir)
    assert cli.main(["reindex", "--home", str(settings.home)]) != 0
    assert (outside / SNAPSHOT_NAME).exists() and (outside / "graph-snapshot.jsonl").exists()


@pytest.mark.parametrize("command", [["dream", "--dry-run"], ["import-graph", "-"]])
def test_graph_commands_create_nothing_through_a_linked_folder(
    tmp_path: Path, outside: Path, command: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import io
    import sys

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"")))
    settings = _settings(tmp_path)
    settings.index_dir.mkdir(parents=True)
    os.symlink(outside, settings.index_dir / "graph")
    cli.main([*command, "--home", str(settings.home)])
    assert sorted(p.name for p in outside.iterdir()) == []


def test_quarantine_does_not_move_files_out_through_a_linked_time_folder(tmp_path: Path, outside: Path) -> None:
    settings = _settings(tmp_path)
    settings.memory_dir.mkdir(parents=True)
    (settings.memory_dir / f"{ID}.json").write_bytes(b"not json")
    now = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
    (settings.home / "quarantine").mkdir()
    os.symlink(outside, settings.home / "quarantine" / now.strftime("%Y%m%dT%H%M%SZ"))
    with pytest.raises(LinkRefusedError):
        Doctor(settings, clock=lambda: now).run(fix=True)
    assert list(outside.rglob("*")) == []
    assert (settings.memory_dir / f"{ID}.json").read_bytes() == b"not json"


def test_index_snapshot_link_is_not_loaded(tmp_path: Path, outside: Path) -> None:
    index = MemoryIndex()
    index.upsert(MemoryEntry(id=ID, content="outside words", created_at=datetime.now(UTC)))
    target = outside / "snap.npz"
    index.save(target, JournalPosition(1, 0))
    link = tmp_path / SNAPSHOT_NAME
    os.symlink(target, link)
    assert MemoryIndex.load(link) is None
