"""JSON Lines import and export of long-term memory."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from rockmem_mcp.config import Settings
from rockmem_mcp.home.transfer import (
    MAX_IMPORT_LINE_BYTES,
    ImportReport,
    bounded_lines,
    export_jsonl,
    import_jsonl,
)
from rockmem_mcp.memory.service import MemoryService
from rockmem_mcp.models import MAX_USE_COUNT
from tests.unit.helpers import Services, entry_files


def export_text(service: MemoryService) -> str:
    out = io.StringIO()
    export_jsonl(service, out)
    return out.getvalue()


def line(**fields) -> str:
    return json.dumps(fields)


def test_import_reports_bad_lines_by_number_and_imports_the_good_ones(
    service: MemoryService, settings: Settings
) -> None:
    lines = [
        line(content="first good line", category="imported", tags=["a1"]),  # 1
        "",  # 2: blank lines are skipped silently
        "   ",  # 3
        "{not json",  # 4
        "[1, 2, 3]",  # 5: not an object
        line(category="x"),  # 6: no content
        line(content="   "),  # 7: blank content
        line(content="bad category", category="../up"),  # 8
        line(content="bad id", id="../x"),  # 9
        line(content="bad date", created_at="yesterday"),  # 10
        line(content="second good line", id="keepthisid01", created_at="2020-02-02T10:00:00Z"),  # 11
    ]
    report = import_jsonl(service, lines)
    assert report.imported == 2 and report.replaced == 0
    assert [e.line for e in report.errors] == [4, 5, 6, 7, 8, 9, 10]
    assert all(e.error and "\n" not in e.error for e in report.errors)
    assert "JSON object" in report.errors[1].error
    assert "category" in report.errors[4].error
    imported = service.get("keepthisid01")
    assert imported.created_at.isoformat() == "2020-02-02T10:00:00+00:00"
    assert sorted(r.entry.content for r in service.search("good line").results) == [
        "first good line",
        "second good line",
    ]
    assert len(entry_files(settings)) == 2
    assert not any(name.startswith(".") or "/." in name for name in entry_files(settings))


def test_import_accepts_bytes_lines_and_reports_progress(service: MemoryService) -> None:
    lines = [line(content=f"bulk entry {i}").encode() + b"\n" for i in range(7)]
    seen: list[int] = []
    report = import_jsonl(service, lines, progress=seen.append, batch_size=3)
    assert report.imported == 7 and not report.errors
    assert seen == [3, 6, 7]
    assert service.search("bulk entry", limit=20).total_matches == 7


def test_importing_an_existing_id_replaces_it(service: MemoryService, settings: Settings) -> None:
    original = service.save("original text", category="old")
    report = import_jsonl(service, [line(id=original.id, content="replacement text", category="new")])
    assert (report.imported, report.replaced) == (1, 1)
    assert service.get(original.id).content == "replacement text"
    assert entry_files(settings) == [f"new/{original.id}.json"]  # the old file moved, not duplicated
    assert [r.entry.id for r in service.search("text").results] == [original.id]


def test_duplicate_ids_within_an_import_last_one_wins(service: MemoryService) -> None:
    report = import_jsonl(service, [line(id="dup000000001", content="first"), line(id="dup000000001", content="last")])
    assert (report.imported, report.replaced) == (2, 1)
    assert service.get("dup000000001").content == "last"


def test_import_does_not_split_a_string_of_tags_into_letters(service: MemoryService) -> None:
    report = import_jsonl(service, [line(content="tagged by a string", tags="python", id="tagstring001")])
    if report.errors:  # rejecting the line is acceptable...
        assert report.errors[0].line == 1
        return
    assert service.get("tagstring001").tags == ["python"]  # ...splitting it into letters is not


def test_an_imported_use_count_beyond_int32_is_clamped_and_the_index_stays_whole(settings: Settings) -> None:
    """A count the index cannot hold once raised OverflowError midway and left its columns out of step."""
    huge = 9007199254740993
    service = MemoryService(settings)
    try:
        report = import_jsonl(service, [line(content="used a lot", id="usedalot0001", reinforcement_count=huge)])
        assert report.imported == 1 and not report.errors
        assert service.get("usedalot0001").reinforcement_count == MAX_USE_COUNT
        service.save("saved after the big count")
        assert {r.entry.content for r in service.search("used saved").results} == {
            "used a lot",
            "saved after the big count",
        }
    finally:
        service.close()
    reopened = MemoryService(settings)  # from the snapshot written at close: every column in step
    try:
        assert [r.entry.id for r in reopened.search("used lot").results] == ["usedalot0001"]
    finally:
        reopened.close()


def test_imported_entries_are_visible_to_another_instance(services: Services) -> None:
    a, b = services.open(), services.open()
    import_jsonl(a, [line(content="imported elsewhere", id="elsewhere001")])
    assert [r.entry.id for r in b.search("imported elsewhere").results] == ["elsewhere001"]


def populated(service: MemoryService) -> None:
    plain = service.save("plain entry")
    service.save("categorized entry", category="a/b-c", tags=["T1", "t2"], metadata={"src": "test"}, importance=0.8)
    service.save('unicode entry: Zürich café ✓ "quoted"\nsecond line')
    archived = service.save("archived entry", category="old")
    service.delete(archived.id, reason="obsolete")
    service.update(plain.id, content="plain entry, edited", category="moved")


def test_export_then_import_into_an_empty_home_round_trips_byte_for_byte(
    services: Services, settings: Settings, tmp_path: Path
) -> None:
    source = services.open()
    populated(source)
    exported = export_text(source)
    assert len(exported.splitlines()) == 4
    assert all(json.loads(x)["id"] for x in exported.splitlines())

    target = services.open(Settings(home=tmp_path / "other-home", embedding_model="off"))
    report = import_jsonl(target, io.StringIO(exported))
    assert (report.imported, report.replaced, report.errors) == (4, 0, [])
    assert export_text(target) == exported
    assert sorted(entry_files(target.settings)) == sorted(entry_files(settings))
    assert [r.entry.content for r in target.search("archived", include_archived=True).results] == ["archived entry"]
    assert target.search("archived").results == []


def test_export_survives_a_restart_of_the_importer(services: Services, settings: Settings, tmp_path: Path) -> None:
    source = services.open()
    populated(source)
    exported = export_text(source)
    other = Settings(home=tmp_path / "other-home", embedding_model="off")
    importer = services.open(other)
    import_jsonl(importer, exported.splitlines())
    services.close(importer)
    assert export_text(services.open(other)) == exported


def test_export_of_an_empty_home(service: MemoryService) -> None:
    out = io.StringIO()
    assert export_jsonl(service, out) == 0
    assert out.getvalue() == ""


@pytest.mark.parametrize("batch_size", [1, 2, 1000])
def test_batch_size_does_not_change_the_result(services: Services, tmp_path: Path, batch_size: int) -> None:
    lines = [
        line(content=f"entry number {i}", id=f"batch{i:07d}", created_at=f"2024-01-01T00:00:{i:02d}Z") for i in range(5)
    ]
    service = services.open(Settings(home=tmp_path / f"home-{batch_size}", embedding_model="off"))
    report = import_jsonl(service, [*lines, lines[0]], batch_size=batch_size)
    assert (report.imported, report.replaced) == (6, 1)
    assert [json.loads(x)["id"] for x in export_text(service).splitlines()] == [f"batch{i:07d}" for i in range(5)]


def test_a_line_nested_too_deep_is_reported_not_raised(service: MemoryService) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    report = import_jsonl(service, [deep, json.dumps({"content": "still imported"})])
    assert report.imported == 1 and [e.line for e in report.errors] == [1]


def test_bounded_lines_cut_an_overlong_line_and_skip_the_rest_of_it() -> None:
    source = io.BytesIO(b"short\n" + b"x" * 50 + b"\n" + b"y" * 10 + b"\n" + b"end")
    assert list(bounded_lines(source, limit=10)) == [b"short\n", b"x" * 11, b"y" * 10 + b"\n", b"end"]


def test_a_line_over_the_import_cap_is_reported_and_the_next_one_imported(service: MemoryService) -> None:
    too_long = json.dumps({"content": "x" * 20}).encode() + b" " * MAX_IMPORT_LINE_BYTES + b"\n"
    source = io.BytesIO(too_long + (line(content="after the long line") + "\n").encode())
    report = import_jsonl(service, bounded_lines(source))
    assert report.imported == 1
    assert [(e.line, e.error) for e in report.errors] == [(1, f"line is longer than {MAX_IMPORT_LINE_BYTES:,} bytes")]


def restore(settings: Settings, services: Services, lines: list[dict[str, Any]]) -> ImportReport:
    """Import `lines` as a backup of a whole home (the tagged records go to their stores)."""
    from rockmem_mcp.graph.service import GraphService
    from rockmem_mcp.home.transfer import HomeStores

    graph = GraphService(settings)
    try:
        return import_jsonl(services.open(settings), [json.dumps(x) for x in lines], others=HomeStores(settings, graph))
    finally:
        graph.close()


def test_restoring_a_backup_holds_its_records_to_the_tools_caps(settings: Settings, services: Services) -> None:
    now = "2026-01-01T00:00:00Z"
    lines = [
        {"store": "working", "key": "shared/team/big", "data": "w" * 1_000_001, "created_at": now, "expires_at": now},
        {"store": "working", "key": "shared/team/late", "data": "d", "created_at": now,
         "expires_at": "2999-01-01T00:00:00Z"},
        {"store": "feedback", "id": "c0ffee0000c1", "type": "Correction", "content": "f" * 100_001, "session_id": "s",
         "at": now},
        {"store": "entity", "id": "c0ffee0000a1", "name": "n" * 201, "created_at": now},
        {"store": "entity", "id": "c0ffee0000a2", "name": "Alice", "aliases": [f"a{i}" for i in range(51)],
         "created_at": now},
        {"store": "entity", "id": "c0ffee0000a3", "name": "Bob", "metadata": {"k": "v" * 16_001}, "created_at": now},
        {"store": "entity", "id": "c0ffee0000a4", "name": "Carol", "type": "t" * 100_000, "created_at": now},
        {"store": "feedback", "id": "c0ffee0000c2", "type": "Correction", "content": "c", "session_id": "s" * 100_000,
         "at": now},
    ]  # fmt: skip
    report = restore(settings, services, lines)
    assert [e.line for e in report.errors] == [1, 2, 3, 4, 5, 6, 7, 8]
    reasons = [e.error for e in report.errors]
    assert "ROCKMEM_WORKING_MAX_VALUE_BYTES" in reasons[0] and "ROCKMEM_WORKING_MAX_TTL_MINUTES" in reasons[1]
    assert "ROCKMEM_MAX_CONTENT_BYTES" in reasons[2] and "1-200 characters" in reasons[3]
    assert "51 aliases; at most 50" in reasons[4] and "16000" in reasons[5].replace(",", "")
    assert "invalid entity type" in reasons[6] and "session_id is longer than 300 characters" in reasons[7]
    assert not any(report.other_stores.values())


def test_a_restore_holds_the_working_memory_cap_and_refuses_namespace_only_keys(
    settings: Settings, services: Services
) -> None:
    from rockmem_mcp.working.service import WorkingMemory

    now = datetime.now(UTC)
    lines = [
        {"store": "working", "key": key, "data": "d", "created_at": now.isoformat(),
         "expires_at": (now + timedelta(minutes=10 + n)).isoformat()}
        for n, key in enumerate([f"session/s1/n{n}" for n in range(60)] + ["session/abc", "shared/topic"])
    ]  # fmt: skip
    report = restore(settings, services, lines)
    assert [e.line for e in report.errors] == [61, 62]
    assert all("names a namespace, not an entry" in e.error for e in report.errors)
    listed = WorkingMemory(settings, "session/s1").list()
    assert [i.key for i in listed] == [f"session/s1/n{n}" for n in range(10, 60)]  # the 50 furthest from expiry
    assert report.other_stores["working"] == 50
    assert len(report.skipped) == 10 and "at most 50 entries (ROCKMEM_WORKING_MAX_ENTRIES)" in report.skipped[0]


def test_an_imported_archive_reason_is_capped_like_a_delete_reason(service: MemoryService) -> None:
    archived = {"archived_at": "2026-01-01T00:00:00Z", "superseded_by": "c0ffee0000d1"}
    report = import_jsonl(
        service,
        [
            line(content="too long a reason", archive_reason="why " * 1_001, **archived),
            line(content="a bad successor", archive_reason="merged", archived_at="2026-01-01T00:00:00Z",
                 superseded_by="../x"),
            line(content="kept", archive_reason="merged", **archived),
        ],
    )  # fmt: skip
    assert report.imported == 1 and [e.line for e in report.errors] == [1, 2]
    assert "archive_reason is 4004 bytes; the limit is 4000" in report.errors[0].error
    assert "invalid memory id '../x'" in report.errors[1].error


def test_a_backup_carries_core_memory_and_a_restore_never_overwrites_one(
    settings: Settings, services: Services, tmp_path: Path
) -> None:
    from rockmem_mcp.graph.service import GraphService
    from rockmem_mcp.home.transfer import HomeStores

    settings.home.mkdir(parents=True, exist_ok=True)
    core = "# MEMORY.md\n\n## Identity\n- Name: Alice — café\n"
    settings.core_file.write_text(core, encoding="utf-8")
    (settings.home / "SOUL.md").write_text("Be kind.\n")
    graph = GraphService(settings)
    try:
        lines = [json.loads(line) for line in HomeStores(settings, graph).export_lines()]
    finally:
        graph.close()
    assert lines == [
        {"store": "file", "name": "MEMORY.md", "text": core},
        {"store": "file", "name": "SOUL.md", "text": "Be kind.\n"},
    ]

    fresh = Settings(home=tmp_path / "fresh", embedding_model="off")
    report = restore(fresh, services, lines)
    assert fresh.core_file.read_text(encoding="utf-8") == core and report.other_stores["files"] == 2
    assert (fresh.home / "SOUL.md").read_text() == "Be kind.\n"
    assert not report.skipped and not list(fresh.home.glob(".*.tmp"))

    fresh.core_file.write_text("## Identity\n- Name: Bob\n")  # written since: the restore keeps it
    report = restore(fresh, services, lines)
    assert fresh.core_file.read_text() == "## Identity\n- Name: Bob\n" and report.other_stores["files"] == 0
    assert report.skipped == ["file MEMORY.md: the home has its own, kept (the backup's not restored)"]  # SOUL: same

    refused = restore(fresh, services, [{"store": "file", "name": "../escape.md", "text": "x"}])
    assert "is not one rockmem keeps" in refused.errors[0].error and not (tmp_path / "escape.md").exists()


def test_a_backup_restores_a_workspace_file_larger_than_a_memory_and_refuses_a_bad_file_record(
    settings: Settings, services: Services, tmp_path: Path
) -> None:
    from rockmem_mcp.core.workspace_files import MAX_FILE_BYTES
    from rockmem_mcp.graph.service import GraphService
    from rockmem_mcp.home.transfer import HomeStores

    settings.home.mkdir(parents=True, exist_ok=True)
    user = "Likes tea — and long notes.\n" * 5_000  # 150 KB: over a memory's 100,000 bytes
    assert len(user.encode()) == 150_000
    (settings.home / "USER.md").write_text(user, encoding="utf-8")
    graph = GraphService(settings)
    try:
        lines = [json.loads(line) for line in HomeStores(settings, graph).export_lines()]
    finally:
        graph.close()

    bad = [
        {"store": "file", "name": ["MEMORY.md"], "text": "x"},
        {"store": "file", "name": "SOUL.md", "text": ["x"]},
        {"store": "file", "name": "AGENTS.md", "text": "a" * (MAX_FILE_BYTES + 1)},
    ]
    fresh = Settings(home=tmp_path / "fresh", embedding_model="off")
    report = restore(fresh, services, [*bad, *lines])
    assert (fresh.home / "USER.md").read_bytes() == user.encode("utf-8")
    assert report.other_stores["files"] == 1
    assert [e.line for e in report.errors] == [1, 2, 3]
    assert "file ['MEMORY.md'] is not one rockmem keeps" in report.errors[0].error
    assert "file SOUL.md must be text, got list" in report.errors[1].error
    assert f"the limit is {MAX_FILE_BYTES}" in report.errors[2].error
    assert "shorten the text in the backup line" in report.errors[2].error
    assert not (fresh.home / "SOUL.md").exists() and not (fresh.home / "AGENTS.md").exists()


def test_a_backup_carries_the_episode_logs_and_a_restore_twice_adds_each_once(
    settings: Settings, services: Services, tmp_path: Path
) -> None:
    from datetime import UTC, datetime

    from rockmem_mcp.episodes.service import Episodes
    from rockmem_mcp.graph.service import GraphService
    from rockmem_mcp.home.transfer import HomeStores

    episodes = Episodes(settings)
    old = episodes.record("Deployed 2.4 to staging", type="task", tags=["deploy"], at=datetime(2026, 1, 5, tzinfo=UTC))
    new = episodes.record("Chose PostgreSQL", type="decision", confidence="high")
    graph = GraphService(settings)
    try:
        lines = [json.loads(line) for line in HomeStores(settings, graph).export_lines()]
    finally:
        graph.close()
    assert [(line["store"], line["id"]) for line in lines] == [("episode", old.id), ("episode", new.id)]

    fresh = Settings(home=tmp_path / "fresh", embedding_model="off")
    restored = Episodes(fresh)
    assert restored.search("staging").hits == []  # followed from before the restore
    report = restore(fresh, services, lines)
    assert report.other_stores["episodes"] == 2 and not report.skipped
    assert [h.episode for h in restored.search("staging").hits] == [old]  # an old day's log: seen at once
    assert restore(fresh, services, lines).other_stores["episodes"] == 0
    assert [e.id for e in restored.on(old.at.date())] == [old.id]
    bad = restore(fresh, services, [{**lines[0], "id": "f" * 12, "memory_id": "../x"}])
    assert "invalid memory id" in bad.errors[0].error


def test_a_backup_carries_procedures_with_their_history_and_never_overwrites_one(
    settings: Settings, services: Services, tmp_path: Path
) -> None:
    from rockmem_mcp.graph.service import GraphService
    from rockmem_mcp.home.transfer import HomeStores
    from rockmem_mcp.procedures.service import Procedures

    store = Procedures(settings)
    store.save("How to deploy", ["deploy", "ship"], ["Run the tests", "Tag the release"])
    store.save("How to deploy", ["deploy", "ship"], ["Run the tests", "Tag", "Deploy to staging"], reason="staging")
    store.close()
    graph = GraphService(settings)
    try:
        lines = [json.loads(line) for line in HomeStores(settings, graph).export_lines()]
    finally:
        graph.close()
    assert [(line["store"], line["name"], line["version"]) for line in lines] == [("procedure", "How to deploy", 2)]

    fresh = Settings(home=tmp_path / "fresh", embedding_model="off")
    report = restore(fresh, services, lines)
    assert report.other_stores["procedures"] == 1 and not report.skipped
    restored = Procedures(fresh)
    try:
        procedure = restored.get("how to deploy")
        assert procedure.steps[-1] == "Deploy to staging" and [v.version for v in procedure.history] == [1]
        restored.save("How to deploy", ["deploy"], ["Mine now"])
        again = restore(fresh, services, lines)
        assert again.other_stores["procedures"] == 0
        assert again.skipped == ["procedure How to deploy: the home has its own, kept (the backup's not restored)"]
        assert restored.get("How to deploy").steps == ["Mine now"]
    finally:
        restored.close()


def test_import_writes_the_conversation_contract_from_top_level_fields(service: MemoryService) -> None:
    # A chat export: top-level session/speaker/date go into metadata, and each session's turns are numbered in
    # file order where a line gives none (search/conversation_metadata.py); metadata of the same name wins.
    lines = [
        line(content="I just adopted a beagle", session="chat-1", speaker="user", date="2026-03-04"),
        line(content="Congratulations on the beagle!", session="chat-1", speaker="assistant"),
        line(content="Another chat opens", session="chat-2", turn=7),
        line(content="and goes on", session="chat-2"),
        line(content="metadata wins", session="chat-1", metadata={"session": "chat-9", "speaker": "Ann"}),
        line(content="no conversation at all"),
        line(content="bad speaker", session="chat-1", speaker=["x"]),
        line(content="a turn in metadata must be a string", session="chat-3", metadata={"turn": 5}),
        line(content="a float turn", session="chat-4", turn=3.0),
    ]
    report = import_jsonl(service, lines)  # a bad line is reported and skipped, never the end of the import
    assert report.imported == 7 and [e.line for e in report.errors] == [7, 8]
    meta = {e.content: e.metadata for e in service.iter_entries()}
    assert meta["I just adopted a beagle"] == {
        "session": "chat-1",
        "turn": "0",
        "speaker": "user",
        "date": "2026-03-04",
    }
    assert meta["Congratulations on the beagle!"] == {"session": "chat-1", "turn": "1", "speaker": "assistant"}
    assert meta["Another chat opens"]["turn"] == "7" and meta["and goes on"]["turn"] == "8"
    assert meta["metadata wins"] == {"session": "chat-9", "speaker": "Ann", "turn": "0"}
    assert meta["no conversation at all"] == {}
    assert meta["a float turn"] == {"session": "chat-4", "turn": "3.0"}
