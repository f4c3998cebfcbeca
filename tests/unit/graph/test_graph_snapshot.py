"""The graph snapshot: a start loads it plus the journal since, and falls back to the files when it is missing,
damaged or behind a journal gap; records changed outside the journal are picked up by the folder listing."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from rockmem_mcp.config import Settings
from rockmem_mcp.graph.files import GraphFiles, read_snapshot
from rockmem_mcp.graph.service import SNAPSHOT_NAME, GraphService
from tests.unit.helpers import FakeClock

TRIPLES = [
    {"subject": "Alice", "predicate": "works on", "object": "RockBot", "confidence": 0.9, "source": "user"},
    {"subject": "RockBot", "predicate": "depends on", "object": "Python"},
    {"subject": "Bob", "predicate": "knows", "object": "Alice", "confidence": 0.4},
]


def state(graph: GraphService) -> tuple[dict, dict]:
    """Everything the service knows after catching up, as plain data (models compared by their JSON)."""
    graph.stats()  # any call catches up with the journal
    return (
        {i: e.model_dump(mode="json") for i, e in graph.entities.items()},
        {i: t.model_dump(mode="json") for i, t in graph.triples.items()},
    )


@pytest.fixture
def built(settings: Settings) -> tuple[dict, dict]:
    """A graph written and closed (which writes the snapshot); its state."""
    graph = GraphService(settings, clock=FakeClock())
    graph.add_entities([{"name": "Alice", "type": "person", "aliases": ["Ally"], "metadata": {"team": "core"}}])
    graph.add_triples(TRIPLES)
    graph.recall_facts("Alice")  # sets a last_referenced_at, a second datetime field
    known = state(graph)
    graph.close()
    return known


def snapshot_path(settings: Settings) -> Path:
    return settings.index_dir / SNAPSHOT_NAME


def test_close_writes_a_snapshot_that_loads_to_the_same_state(settings: Settings, built) -> None:
    snapshot = read_snapshot(snapshot_path(settings))
    assert snapshot is not None
    files = GraphFiles(settings.graph_dir)
    # What the snapshot holds equals the validated files, field for field.
    assert {e.id: e for e in snapshot.entities} == {e.id: e for e in files.entities.read_all()}
    assert {t.id: t for t in snapshot.triples} == {t.id: t for t in files.triples.read_all()}
    reopened = GraphService(settings)
    assert state(reopened) == built
    first = reopened.traverse("ally").facts[0]
    assert first.line() == "- Alice --works_on--> RockBot (confidence=0.90)"
    assert reopened.find_entities("core").results[0].entity.name == "Alice"  # the text index is built on demand
    reopened.close()


def test_changes_after_the_snapshot_come_from_the_journal(settings: Settings, built) -> None:
    first, second = GraphService(settings), GraphService(settings)
    first.delete_entity("Bob")
    first.add_triples([{"subject": "Carol", "predicate": "leads", "object": "RockBot"}])
    expected = state(first)
    # No snapshot was written since (both still open): a third instance replays the journal over the old one.
    third = GraphService(settings)
    assert state(third) == expected == state(second)
    for graph in (first, second, third):
        graph.close()


def test_records_added_or_removed_outside_the_journal_are_picked_up(settings: Settings, built, tmp_path) -> None:
    graph = GraphService(settings)
    carol = graph.add_entities([{"name": "Carol"}]).entities[0].entity
    graph.close()
    kept = tmp_path / "carol.json"
    path = settings.graph_dir / "entities" / f"{carol.id}.json"
    shutil.copy(path, kept)
    path.unlink()  # removed by hand after the snapshot
    reopened = GraphService(settings)
    assert "Carol" not in {e.name for e in reopened.entities.values()}
    reopened.close()
    shutil.copy(kept, path)  # and back again, with no journal record either time
    (settings.graph_dir / "entities" / "not an id.json").write_text("{}")  # a stray is ignored
    again = GraphService(settings)
    assert again.resolve("carol").id == carol.id
    again.close()


def test_records_rewritten_in_place_outside_the_journal_are_reread(settings: Settings, built) -> None:
    # A crash between a record's write and its journal record: the file is new, the snapshot and journal old.
    files = GraphFiles(settings.graph_dir)
    alice = next(e for e in files.entities.read_all() if e.name == "Alice")
    files.entities.write(alice.model_copy(update={"aliases": ["Ally", "Al"]}))
    weak = next(t for t in files.triples.read_all() if t.confidence == 0.4)
    files.triples.write(weak.model_copy(update={"confidence": 0.7}))
    reopened = GraphService(settings)
    assert reopened.resolve("al").id == alice.id
    assert reopened.triples[weak.id].confidence == 0.7
    reopened.close()


def test_a_start_after_a_clean_close_rereads_no_file(settings: Settings, built, monkeypatch) -> None:
    reads: list[str] = []
    original = GraphFiles(settings.graph_dir).entities.read.__func__
    monkeypatch.setattr(
        "rockmem_mcp.graph.files.RecordFiles.read", lambda self, i: reads.append(i) or original(self, i)
    )
    GraphService(settings).close()
    assert reads == []


@pytest.mark.parametrize("damage", [b"", b"{not json", b'{"format": 99}', b'{"format": 1, "generation": 0}'])
def test_a_damaged_or_foreign_snapshot_means_reading_the_files(settings: Settings, built, damage: bytes) -> None:
    snapshot_path(settings).write_bytes(damage)
    graph = GraphService(settings)
    assert state(graph) == built
    graph.close()  # reading the files makes the next start worth a fresh snapshot
    assert read_snapshot(snapshot_path(settings)) is not None


def test_a_row_of_the_wrong_shape_is_refused(settings: Settings, built) -> None:
    body = json.loads(snapshot_path(settings).read_bytes())
    body["triples"][0] = body["triples"][0][:3]
    snapshot_path(settings).write_text(json.dumps(body))
    assert read_snapshot(snapshot_path(settings)) is None
    graph = GraphService(settings)
    assert state(graph) == built
    graph.close()


def test_a_journal_gap_since_the_snapshot_means_reading_the_files(settings: Settings, built) -> None:
    old_snapshot = snapshot_path(settings).read_bytes()
    writer = GraphService(settings)
    for n in range(40):  # enough journal to rotate twice: the snapshot's generation is gone
        writer.add_triples([{"subject": f"Person {n}", "predicate": "knows", "object": "Alice"}])
        if n % 10 == 9:
            writer.journal.rotate()
    expected = state(writer)
    writer.close()
    snapshot_path(settings).write_bytes(old_snapshot)  # its journal generation no longer exists
    assert not (settings.index_dir / "graph" / "changes-00000000.jsonl").exists()
    assert state(GraphService(settings)) == expected
