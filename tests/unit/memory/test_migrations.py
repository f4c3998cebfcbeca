"""The one-time migration of an old home (format 1: before salience) when its memory store opens: each mapping
rule, idempotence, an interruption mid-way, a concurrent write, and a read-only home left alone."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from rockmem_mcp.config import Settings
from rockmem_mcp.memory import migrations
from rockmem_mcp.memory.service import MemoryService
from rockmem_mcp.storage import home_claim
from tests.unit.helpers import T0, FakeClock

# (fields of an old entry, (importance, pinned) after the migration)
CASES: dict[str, tuple[dict[str, Any], tuple[float, bool]]] = {
    "high": ({"importance": 0.9}, (0.9, True)),
    "at-threshold": ({"importance": 0.8}, (0.8, True)),
    "below": ({"importance": 0.79}, (0.79, False)),
    "old-default": ({"importance": 0.5}, (0.7, False)),
    "low": ({"importance": 0.3}, (0.3, False)),
    "inferred": ({"importance": 0.5, "metadata": {"source": "inferred"}, "tags": ["inferred"]}, (0.5, False)),
    "anti-pattern": ({"importance": 0.5, "metadata": {"source": "dream"}, "tags": ["anti-pattern"]}, (0.5, False)),
    "enriched": ({"importance": 0.5, "metadata": {"source": "enrichment", "derived_from": "abc"}}, (0.5, False)),
    "decayed": ({"importance": 0.3, "metadata": {"importance_before_decay": "0.6", "k": "v"}}, (0.6, False)),
    "decayed-high": ({"importance": 0.2, "metadata": {"importance_before_decay": "0.9"}}, (0.9, True)),
    "decayed-default": ({"importance": 0.1, "metadata": {"importance_before_decay": "0.5"}}, (0.7, False)),
}


def old_home(settings: Settings, clock: FakeClock) -> dict[str, str]:
    """Write one entry per case and remove the format marker, as a home from before salience; ids by case."""
    service = MemoryService(settings, clock, embed_in_background=False)
    ids = {}
    for name, (fields, _) in CASES.items():
        entry = service.prepare_entry({"content": f"note {name}", "created_at": T0, **fields})
        service.save_many([entry])
        ids[name] = entry.id
    service.close()
    migrations.marker_path(service).unlink()
    return ids


def entry_files(settings: Settings) -> dict[str, bytes]:
    return {p.stem: p.read_bytes() for p in settings.memory_dir.rglob("*.json") if not p.name.startswith(".")}


def marker(settings: Settings) -> dict[str, Any]:
    path = settings.meta_dir / migrations.MARKER_NAME
    return json.loads(path.read_text()) if path.exists() else {}


def assert_migrated(service: MemoryService, ids: dict[str, str]) -> None:
    for name, (_, expected) in CASES.items():
        entry = service.get(ids[name])
        assert (entry.importance, entry.pinned) == expected, name
        assert "importance_before_decay" not in entry.metadata, name
    assert service.get(ids["decayed"]).metadata == {"k": "v"}


def test_every_rule_maps_an_old_home_once(settings: Settings, clock: FakeClock) -> None:
    ids = old_home(settings, clock)
    service = MemoryService(settings, clock, embed_in_background=False)
    assert_migrated(service, ids)
    assert marker(settings)["format"] == migrations.FORMAT
    assert service.search("note", limit=50).results  # the index follows the files
    hits = {h.entry.id: h for h in service.search("note high", limit=50).results}
    assert hits[ids["high"]].salience == 1.0  # pinned in the index too
    service.close()
    after = entry_files(settings)
    MemoryService(settings, clock, embed_in_background=False).close()
    assert entry_files(settings) == after  # the marker: a second open changes nothing


def test_running_the_mapping_again_changes_nothing(settings: Settings, clock: FakeClock) -> None:
    ids = old_home(settings, clock)
    service = MemoryService(settings, clock, embed_in_background=False)
    after = entry_files(settings)
    migrations.marker_path(service).unlink()  # as if the marker were lost: the mapping itself is idempotent
    assert migrations.migrate(service, clock) == 0
    assert entry_files(settings) == after
    assert_migrated(service, ids)
    service.close()


def test_an_interrupted_migration_finishes_on_the_next_open(
    settings: Settings, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = old_home(settings, clock)
    monkeypatch.setattr(migrations, "BATCH", 3)
    original = MemoryService.revise_many
    calls = []

    def crash_after_one_batch(self: MemoryService, *args: Any) -> int:
        if calls:
            raise OSError("killed")
        calls.append(1)
        return original(self, *args)

    monkeypatch.setattr(MemoryService, "revise_many", crash_after_one_batch)
    with pytest.raises(OSError, match="killed"):
        MemoryService(settings, clock, embed_in_background=False)
    assert marker(settings)["format"] == 1  # started, not done
    monkeypatch.setattr(MemoryService, "revise_many", original)
    service = MemoryService(settings, clock, embed_in_background=False)
    assert_migrated(service, ids)
    assert marker(settings)["format"] == migrations.FORMAT
    service.close()


def test_a_concurrent_write_is_not_overwritten(
    settings: Settings, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = old_home(settings, clock)
    original = MemoryService.revise_many
    other: list[MemoryService] = []
    started: list[bool] = []

    def another_process_writes_first(self: MemoryService, entry_ids: list[str], revise: Any) -> int:
        if started:
            return original(self, entry_ids, revise)
        started.append(True)
        # Another process opens the home meanwhile (migrating it too), then edits two entries after this one
        # listed them.
        writer = MemoryService(settings, clock, embed_in_background=False)
        other.append(writer)
        writer.update(ids["old-default"], content="note old-default, corrected", importance=0.5)
        writer.update(ids["high"], tags=["vault"])
        return original(self, entry_ids, revise)

    monkeypatch.setattr(MemoryService, "revise_many", another_process_writes_first)
    monkeypatch.setattr(migrations, "BATCH", 100)
    service = MemoryService(settings, clock, embed_in_background=False)
    corrected = service.get(ids["old-default"])
    assert (corrected.content, corrected.importance) == ("note old-default, corrected", 0.5)  # as written
    assert service.get(ids["high"]).tags == ["vault"]  # the concurrent edit kept
    assert service.get(ids["low"]).importance == 0.3 and service.get(ids["below"]).importance == 0.79
    assert service.get(ids["decayed"]).importance == 0.6
    for opened in (*other, service):
        opened.close()


def test_a_read_only_home_is_not_migrated(
    settings: Settings, clock: FakeClock, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    ids = old_home(settings, clock)
    before = entry_files(settings)

    class ReadOnlyClaim(home_claim.HomeClaim):
        def __init__(self, *args: Any) -> None:
            super().__init__(*args)
            self.read_only = "read-only file system"

    monkeypatch.setattr("rockmem_mcp.memory.service.HomeClaim", ReadOnlyClaim)
    with caplog.at_level(logging.WARNING):
        service = MemoryService(settings, clock, embed_in_background=False)
    assert service.get(ids["high"]).pinned is False and service.get(ids["old-default"]).importance == 0.5
    assert entry_files(settings) == before and marker(settings) == {}
    assert sum("not migrated" in r.getMessage() for r in caplog.records) == 1
    service.close()
