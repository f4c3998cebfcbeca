"""The doctor: every kind of finding, --fix quarantining instead of deleting, a healthy home after."""

from __future__ import annotations

import json
import os
from datetime import timedelta
from pathlib import Path

import pytest

from rockmem_mcp.config import Settings
from rockmem_mcp.errors import HomeInUseError
from rockmem_mcp.graph.service import GraphService
from rockmem_mcp.home.doctor import Doctor, Finding
from rockmem_mcp.memory.service import MemoryService
from rockmem_mcp.working.service import WorkingMemory
from tests.unit.helpers import T0, FakeClock


def damaged_home(settings: Settings) -> dict[str, bytes]:
    """A home with one of each problem; the user files the doctor must not lose, by relative path."""
    memory = MemoryService(settings)
    kept = memory.save("A healthy memory", "notes")
    memory.close()
    graph = GraphService(settings)
    graph.add_triples([{"subject": "Alice", "predicate": "knows", "object": "Bob"}])
    graph.close()
    home = settings.home
    bad = {
        "memory/notes/aaaaaaaaaaaa.json": b"{not json",
        "memory/notes/readme.txt": b"a stray note",
        "knowledge-graph/entities/bbbbbbbbbbbb.json": b'{"id": "x"}',
        "knowledge-graph/triples/cccccccccccc.json": json.dumps(
            {
                "id": "cccccccccccc",
                "subject": "dddddddddddd",
                "predicate": "p",
                "object": "eeeeeeeeeeee",
                "created_at": "2026-01-01T00:00:00Z",
            }
        ).encode(),
        "working-memory/patrol.json": b"[]",
        "dream-reports/20260101T000000000000Z.json": b"{}",
    }
    for relative, data in bad.items():
        (home / relative).parent.mkdir(parents=True, exist_ok=True)
        (home / relative).write_bytes(data)
    (home / "memory" / "notes" / ".x.json.abcd.tmp").write_bytes(b"half")
    (home / ".embeddings").mkdir(exist_ok=True)
    (home / ".embeddings" / "ffffffffffff.bin").write_bytes(b"\0" * 16)
    (home / "index" / "graph-snapshot.jsonl").write_bytes(b"{damaged")
    assert kept.id
    return bad


def test_a_healthy_home_has_no_findings(settings: Settings) -> None:
    memory = MemoryService(settings)
    memory.save("Fine", "notes")
    memory.close()
    report = Doctor(settings).run()
    assert report.healthy and report.checked["memory files"] == 1
    assert Doctor(settings.model_copy(update={"home": settings.home / "absent"})).run().healthy


def test_every_problem_is_found_and_named(settings: Settings) -> None:
    damaged_home(settings)
    found = {(f.kind, f.path) for f in Doctor(settings).run().findings}
    assert found == {
        ("malformed", "memory/notes/aaaaaaaaaaaa.json"),
        ("malformed", "memory/notes/readme.txt"),
        ("malformed", "knowledge-graph/entities/bbbbbbbbbbbb.json"),
        ("orphaned-triple", "knowledge-graph/triples/cccccccccccc.json"),
        ("malformed", "working-memory/patrol.json"),
        ("malformed", "dream-reports/20260101T000000000000Z.json"),
        ("temp-file", "memory/notes/.x.json.abcd.tmp"),
        ("orphaned-vector", ".embeddings/ffffffffffff.bin"),
        ("stale-index", "index/graph-snapshot.jsonl"),
    }


def test_fix_quarantines_user_files_and_leaves_a_healthy_home(settings: Settings) -> None:
    bad = damaged_home(settings)
    report = Doctor(settings).run(fix=True)
    assert all(f.fixed for f in report.findings) and report.quarantine
    quarantine = settings.home / report.quarantine
    for relative, data in bad.items():  # nothing deleted: every user file is in quarantine, byte for byte
        assert (quarantine / relative).read_bytes() == data
        assert not (settings.home / relative).exists()
    assert Doctor(settings).run().healthy
    memory, graph = MemoryService(settings), GraphService(settings)
    assert [e.content for e in memory.iter_entries()] == ["A healthy memory"]
    assert [f.line() for f in graph.traverse("alice").facts] == ["- Alice --knows--> Bob (confidence=1.00)"]
    memory.close()
    graph.close()


def test_expired_working_memory_is_reported_and_swept(settings: Settings) -> None:
    clock = FakeClock(T0, timedelta(0))
    WorkingMemory(settings, "session/s1", clock).save("old", "x", ttl_minutes=1)
    WorkingMemory(settings, "session/s1", clock).save("new", "y", ttl_minutes=60)
    later = FakeClock(T0 + timedelta(minutes=5), timedelta(0))
    report = Doctor(settings, later).run(fix=True)
    assert [(f.kind, f.fixed) for f in report.findings] == [("expired-working", "swept (1 dropped)")]
    stored = json.loads((settings.working_dir / "session.json").read_text())["entries"]
    assert list(stored) == ["session/s1/new"]


def test_symlinks_are_not_followed_out_of_the_home(settings: Settings, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.json").write_text("{not json")
    settings.memory_dir.mkdir(parents=True)
    os.symlink(outside, settings.memory_dir / "linked")
    os.symlink(outside / "secret.json", settings.memory_dir / "c0ffee000001.json")
    report = Doctor(settings).run(fix=True)
    assert sorted((f.kind, f.path) for f in report.findings) == [
        ("symlink", "memory/c0ffee000001.json"),
        ("symlink", "memory/linked"),
    ]
    # The links moved to quarantine as links; their targets untouched.
    assert all(f.fixed.startswith("moved to quarantine/") for f in report.findings)
    moved = sorted(p.name for p in (settings.home / "quarantine").rglob("*") if p.is_symlink())
    assert moved == ["c0ffee000001.json", "linked"]
    assert sorted(p.name for p in outside.iterdir()) == ["secret.json"]
    assert (outside / "secret.json").read_text() == "{not json"
    assert Doctor(settings).run().healthy


def test_a_linked_store_folder_is_reported_and_nothing_is_done_through_it(settings: Settings, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "bad.json").write_text("{not json")
    settings.home.mkdir(parents=True)
    os.symlink(outside, settings.memory_dir)
    report = Doctor(settings).run(fix=True)
    assert [(f.kind, f.path, f.fixed) for f in report.findings] == [("linked-folder", "memory", "")]
    assert "the home does not open" in report.findings[0].detail
    assert sorted(p.name for p in outside.iterdir()) == ["bad.json"]
    assert not (settings.home / "quarantine").exists()


def test_a_memory_index_snapshot_that_disagrees_with_the_files_is_stale(settings: Settings) -> None:
    memory = MemoryService(settings)
    gone = memory.save("an entry whose file goes away", "notes")
    kept = memory.save("an entry that stays", "notes")
    memory.close()  # the snapshot holds both
    (settings.memory_dir / "notes" / f"{gone.id}.json").unlink()
    copy = json.loads((settings.memory_dir / "notes" / f"{kept.id}.json").read_text())
    (settings.memory_dir / "notes" / "0000aaaa0001.json").write_text(json.dumps({**copy, "id": "0000aaaa0001"}))
    assert Doctor(settings).run().findings == [
        Finding("stale-index", "index/memory-index.npz", "its entries differ from the files (caught up at each start)")
    ]
    fixed = Doctor(settings).run(fix=True)
    assert fixed.findings[0].fixed.startswith("removed")
    reopened = MemoryService(settings)  # rebuilt from the files
    assert {hit.entry.id for hit in reopened.search(category="notes").results} == {kept.id, "0000aaaa0001"}
    reopened.close()
    assert Doctor(settings).run().healthy


def test_fix_is_refused_while_a_store_has_the_home_open_and_report_only_runs(settings: Settings) -> None:
    stores = damaged_home(settings)
    for opened in (lambda: MemoryService(settings), lambda: GraphService(settings)):  # a graph alone, too (CLI)
        store = opened()
        with pytest.raises(HomeInUseError, match="in use by"):
            Doctor(settings).run(fix=True)
        assert not (settings.home / "quarantine").exists()
        assert Doctor(settings).run().findings  # the report still runs
        store.close()
    assert all((settings.home / relative).exists() for relative in stores)
    assert Doctor(settings).run(fix=True).quarantine  # alone now: repaired


def test_episode_logs_with_unreadable_lines_keep_their_good_lines_and_lose_nothing(settings: Settings) -> None:
    from rockmem_mcp.episodes.service import Episodes

    episodes = Episodes(settings)
    good = episodes.record("Deployed to staging", at=T0)
    path = settings.episodes_dir / f"{T0.date().isoformat()}.jsonl"
    original = path.read_bytes() + b'{"id": "torn\n'
    path.write_bytes(original)
    (settings.episodes_dir / "notes.txt").write_bytes(b"not a log")
    found = {(f.kind, f.path, f.detail) for f in Doctor(settings).run().findings}
    assert found == {
        ("malformed", f"episodes/{path.name}", "1 unreadable line(s) of 2 (first: line 2), skipped"),
        ("misplaced", "episodes/notes.txt", "not an episode log (YYYY-MM-DD.jsonl): never read"),
    }
    report = Doctor(settings).run(fix=True)
    assert all(f.fixed for f in report.findings)
    assert (settings.home / report.quarantine / "episodes" / path.name).read_bytes() == original  # nothing lost
    assert [e.id for e in Episodes(settings).on(T0.date())] == [good.id]
    assert Doctor(settings).run().healthy


def test_unusable_procedure_files_are_reported_and_left_as_they_are(settings: Settings) -> None:
    from rockmem_mcp.procedures.service import Procedures

    store = Procedures(settings)
    store.save("How to deploy", ["deploy"], ["Run the tests"])
    store.close()
    (settings.procedures_dir / "broken.json").write_text("{")
    report = Doctor(settings).run(fix=True)
    assert [(f.kind, f.path) for f in report.findings] == [("malformed", "procedures/broken.json")]
    assert report.findings[0].detail.endswith("left as it is") and report.checked["procedures"] == 2
    assert (settings.procedures_dir / "broken.json").read_text() == "{"  # a person may be editing it


def test_a_file_where_a_store_folder_belongs_is_reported_and_moved_aside(settings: Settings) -> None:
    settings.home.mkdir(parents=True, exist_ok=True)
    (settings.home / "episodes").write_text("not a folder")
    (settings.home / "procedures").write_text("nor this")
    found = {(f.kind, f.path) for f in Doctor(settings).run().findings}
    assert found == {("misplaced", "episodes"), ("misplaced", "procedures")}
    report = Doctor(settings).run(fix=True)
    assert all(f.fixed.startswith("moved to quarantine") for f in report.findings)
    assert (settings.home / report.quarantine / "episodes").read_text() == "not a folder"
    assert Doctor(settings).run().healthy


def test_unreadable_reflections_and_proposals_are_reported_and_quarantined(settings: Settings) -> None:
    for folder, name in (("reflections", "r-001.json"), ("proposals", "0001abcd.json")):
        (settings.meta_dir / folder).mkdir(parents=True, exist_ok=True)
        (settings.meta_dir / folder / name).write_text('{"id": "torn')
    found = {(f.kind, f.path) for f in Doctor(settings).run().findings}
    assert found == {("malformed", "meta/reflections/r-001.json"), ("malformed", "meta/proposals/0001abcd.json")}
    report = Doctor(settings).run(fix=True)
    assert all(f.fixed.startswith("moved to quarantine") for f in report.findings)
    assert report.checked["reflections"] == 1 and report.checked["proposals"] == 1
    assert Doctor(settings).run().healthy
