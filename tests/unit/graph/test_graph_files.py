"""GraphFiles / RecordFiles: one pretty JSON file per entity or triple, atomic writes, bad files skipped."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from pathlib import Path

import pytest

from rockmem_mcp.errors import InvalidInputError
from rockmem_mcp.graph.files import GraphFiles
from rockmem_mcp.graph.shapes import Entity, Triple

T0 = datetime(2024, 5, 1, 9, 0, tzinfo=UTC)


@pytest.fixture
def files(tmp_path: Path) -> GraphFiles:
    return GraphFiles(tmp_path / "knowledge-graph")


def entity(entity_id: str = "e1", name: str = "Alice", **extra: object) -> Entity:
    return Entity(
        id=entity_id, name=name, type="person", aliases=["Al"], metadata={"team": "core"}, created_at=T0, **extra
    )


def triple(triple_id: str = "t1", confidence: float = 0.9) -> Triple:
    return Triple(
        id=triple_id,
        subject="e1",
        predicate="works_on",
        object="e2",
        confidence=confidence,
        source="user",
        created_at=T0,
    )


def every_file(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def test_layout_is_one_file_per_record_under_entities_and_triples(files: GraphFiles) -> None:
    assert files.entities.path("abc123") == files.root / "entities" / "abc123.json"
    assert files.triples.path("abc123") == files.root / "triples" / "abc123.json"
    files.entities.write(entity())
    files.triples.write(triple())
    assert every_file(files.root) == ["entities/e1.json", "triples/t1.json"]


def test_records_round_trip_as_pretty_json(files: GraphFiles) -> None:
    alice = entity(last_referenced_at=T0)
    files.entities.write(alice)
    files.triples.write(triple())
    raw = (files.root / "entities" / "e1.json").read_bytes()
    assert raw.endswith(b"\n") and b'\n  "name": "Alice"' in raw  # indented, greppable
    assert json.loads(raw)["aliases"] == ["Al"]
    assert files.entities.read("e1") == alice
    assert files.triples.read("t1") == triple()


def test_a_write_replaces_the_file_and_leaves_no_temp_files(files: GraphFiles) -> None:
    files.triples.write(triple(confidence=0.2))
    files.triples.write(triple(confidence=0.7))
    assert files.triples.read("t1").confidence == 0.7
    assert every_file(files.root) == ["triples/t1.json"]


def test_write_many_then_remove(files: GraphFiles) -> None:
    assert files.entities.write_many([entity("e1"), entity("e2", "Bob"), entity("e3", "Carol")]) == 3
    assert files.entities.write_many([]) == 0
    assert sorted(files.entities.ids()) == ["e1", "e2", "e3"]
    assert files.entities.remove("e2") is True
    assert files.entities.remove("e2") is False  # already gone
    assert sorted(e.name for e in files.entities.read_all()) == ["Alice", "Carol"]
    assert every_file(files.root) == ["entities/e1.json", "entities/e3.json"]


def test_missing_record_or_folder_reads_as_nothing(files: GraphFiles) -> None:
    assert files.entities.read("nope") is None
    assert files.triples.ids() == [] and files.triples.read_all() == []


@pytest.mark.parametrize("bad_id", ["../escape", "a/b", "", ".hidden", "x" * 65, "sp ace"])
def test_ids_that_are_not_record_ids_are_refused(files: GraphFiles, bad_id: str) -> None:
    with pytest.raises(InvalidInputError):
        files.entities.path(bad_id)
    with pytest.raises(InvalidInputError):
        files.entities.write(entity(bad_id))
    assert not (files.root.parent / "escape.json").exists()


@pytest.mark.parametrize(
    "content",
    [
        b"{not json",
        b"",
        b'{"id": "bad", "name": "X"}',  # created_at missing
        b'{"id": "bad", "subject": "a", "predicate": "p", "object": "b", "confidence": 7, '
        b'"created_at": "2024-01-01T00:00:00Z"}',
    ],
)
def test_malformed_files_are_skipped_with_one_warning_and_never_deleted(
    files: GraphFiles, caplog: pytest.LogCaptureFixture, content: bytes
) -> None:
    files.triples.write(triple("good"))
    files.entities.write(entity("good"))
    for folder in (files.root / "entities", files.root / "triples"):
        (folder / "bad.json").write_bytes(content)
    with caplog.at_level(logging.WARNING):
        assert files.triples.read("bad") is None
        assert [t.id for t in files.triples.read_all()] == ["good"]
        assert [e.id for e in files.entities.read_all()] == ["good"]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    bad_triple = str(files.root / "triples" / "bad.json")
    assert sum(bad_triple in w for w in warnings) == 1  # warned once, however often it is read
    assert any(str(files.root / "entities" / "bad.json") in w for w in warnings)
    assert (files.root / "triples" / "bad.json").read_bytes() == content  # kept for a human to look at
    assert (files.root / "entities" / "bad.json").read_bytes() == content


def test_listing_leaves_out_temp_files_dotfiles_and_strays(files: GraphFiles, caplog: pytest.LogCaptureFixture) -> None:
    files.entities.write(entity("e1"))
    folder = files.root / "entities"
    (folder / ".e2.json.abcd1234.tmp").write_bytes(b"{}")  # a write in progress
    (folder / ".hidden.json").write_bytes(b"{}")
    (folder / "notes.txt").write_bytes(b"hello")
    (folder / "bad name!.json").write_bytes(b"{}")
    with caplog.at_level(logging.WARNING):
        assert files.entities.ids() == ["e1"]
    assert any("bad name!.json" in r.getMessage() for r in caplog.records)
    assert (folder / "bad name!.json").exists()


def test_the_file_name_is_the_id(files: GraphFiles) -> None:
    files.entities.write(entity("e1"))
    (files.root / "entities" / "copied.json").write_bytes((files.root / "entities" / "e1.json").read_bytes())
    assert files.entities.read("copied").id == "copied"
    assert sorted(e.id for e in files.entities.read_all()) == ["copied", "e1"]


def test_unknown_fields_are_ignored_and_naive_times_are_utc(files: GraphFiles) -> None:
    folder = files.root / "entities"
    folder.mkdir(parents=True)
    (folder / "e9.json").write_text(
        json.dumps({"id": "e9", "name": "Zed", "created_at": "2024-05-01T09:00:00", "future_field": [1, 2]})
    )
    read = files.entities.read("e9")
    assert read is not None and read.name == "Zed" and read.type == "concept" and read.aliases == []
    assert read.created_at == T0 and read.created_at.tzinfo is not None


def test_snapshot_records_share_one_fields_set_without_sharing_changes(tmp_path: Path) -> None:
    from rockmem_mcp.graph.files import read_snapshot, write_snapshot
    from rockmem_mcp.storage.changes import JournalPosition

    now = datetime(2026, 1, 1, tzinfo=UTC)
    triples = [Triple(id=f"t{i}", subject="a", predicate="knows", object=f"b{i}", created_at=now) for i in range(3)]
    write_snapshot(tmp_path / "snap.jsonl", JournalPosition(1, 0), [], triples)
    snapshot = read_snapshot(tmp_path / "snap.jsonl")
    assert snapshot is not None and snapshot.triples == triples
    first, second, _ = snapshot.triples
    assert first.__pydantic_fields_set__ is second.__pydantic_fields_set__  # not one set per record
    changed = first.model_copy(update={"confidence": 0.5})
    first.confidence = 0.25  # assigning a field (pydantic adds it to the fields set: already there)
    assert changed.confidence == 0.5 and first.confidence == 0.25 and second.confidence == 1.0
