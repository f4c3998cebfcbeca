"""Every store's durable changes and their meta/audit.log lines (issue 22): the action, the file (relative to the
home, existing or once existing), the actor; and a line that cannot be written (a full disk) undoes the change
where the store can, and the error is raised: no acknowledged change without its line, no line without a change."""

from __future__ import annotations

import errno
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import pytest

from rockmem_mcp import cli
from rockmem_mcp.audit.log import NO_APPROVAL, AuditLine, AuditLog
from rockmem_mcp.audit.service import MANUAL, acting_as
from rockmem_mcp.config import Settings
from rockmem_mcp.consolidation.dream import Dreamer
from rockmem_mcp.consolidation.shapes import DreamPlan
from rockmem_mcp.consolidation.templates import Templates
from rockmem_mcp.conversation.feedback import FeedbackLog
from rockmem_mcp.core.service import CoreMemory
from rockmem_mcp.core.workspace import Workspace
from rockmem_mcp.episodes.service import Episodes
from rockmem_mcp.errors import ChangedSinceReadError, NotFoundError
from rockmem_mcp.governance.forgetting import Forgetting
from rockmem_mcp.governance.forgotten_files import line_hash
from rockmem_mcp.graph.service import GraphService
from rockmem_mcp.home.doctor import Doctor
from rockmem_mcp.memory.service import MemoryService
from rockmem_mcp.procedures.service import Procedures
from tests.unit.helpers import FakeClock, Opener

DAY = date(2024, 5, 1)  # the fake clock's day (helpers.T0)


# ---------------------------------------------------------------------------------------------- helpers
class Audited:
    """The home's audit log: the lines written since the last `new()`."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.log = AuditLog(settings.meta_dir / "audit.log")
        self.seen = 0

    def all(self) -> list[AuditLine]:
        return list(self.log.lines())

    def new(self) -> list[AuditLine]:
        lines = self.all()
        fresh, self.seen = lines[self.seen :], len(lines)
        return fresh

    def said(self) -> list[tuple[str, str, str]]:
        """The new lines as (action, file, actor)."""
        return [(line.action, line.file, line.actor) for line in self.new()]


@pytest.fixture
def audited(settings: Settings) -> Audited:
    return Audited(settings)


@pytest.fixture
def disk_full(monkeypatch: pytest.MonkeyPatch) -> Callable[[], None]:
    """Call to make every later audit append fail as on a full disk."""

    def fail() -> None:
        def append(self: AuditLog, lines: list[AuditLine]) -> None:
            raise OSError(errno.ENOSPC, "No space left on device", str(self.path))

        monkeypatch.setattr(AuditLog, "append", append)

    return fail


def stores(settings: Settings) -> dict[str, bytes]:
    """Every file of the stores (derived indexes, access logs and the audit log itself left out)."""
    home = settings.home
    found = {}
    for path in sorted(home.rglob("*")):
        relative = path.relative_to(home).as_posix()
        if not path.is_file() or path.name.startswith(".") or relative.split("/")[0] in ("index", "meta"):
            continue
        found[relative] = path.read_bytes()
    return found


def refused(audited: Audited, settings: Settings, change: Callable[[], object]) -> None:
    """`change` raises the full disk's error, leaves every store file as it was and writes no line."""
    before = stores(settings)
    with pytest.raises(OSError) as raised:
        change()
    assert raised.value.errno == errno.ENOSPC or "disk full" in str(raised.value)
    assert stores(settings) == before
    assert audited.new() == []


@pytest.fixture
def episodes(settings: Settings, service: MemoryService, clock: FakeClock) -> Episodes:
    return Episodes(settings, clock=clock, reinforcer=service.reinforcer)


@pytest.fixture
def procedures(settings: Settings, service: MemoryService, clock: FakeClock) -> Iterator[Procedures]:
    found = Procedures(settings, service.reinforcer, clock)
    yield found
    found.close()


# ---------------------------------------------------------------------------------------------- graph
def test_graph_entity_create_edit_and_a_refused_create(
    graph: GraphService, audited: Audited, settings: Settings, disk_full: Callable[[], None]
) -> None:
    ada = graph.add_entities([{"name": "Ada Lovelace", "type": "person"}]).entities[0].entity
    [line] = audited.new()
    assert (line.action, line.file, line.actor, line.approval) == (
        "CREATE", f"knowledge-graph/entities/{ada.id}.json", "main", "auto"
    )  # fmt: skip
    assert '"Ada Lovelace"' in line.summary and (settings.home / line.file).exists()
    graph.add_entities([{"name": "Ada Lovelace", "aliases": ["Countess of Lovelace"]}])
    [line] = audited.new()
    assert (line.action, line.file) == ("EDIT", f"knowledge-graph/entities/{ada.id}.json")
    assert "aliases" in line.summary
    graph.add_entities([{"name": "Ada Lovelace"}])  # nothing new: no write, no line
    assert audited.new() == []

    disk_full()
    refused(audited, settings, lambda: graph.add_entities([{"name": "Charles Babbage"}]))
    with pytest.raises(NotFoundError):
        graph.resolve("Charles Babbage")  # the index follows the files back
    refused(audited, settings, lambda: graph.add_entities([{"name": "Ada Lovelace", "aliases": ["A.A.L."]}]))
    assert graph.resolve("Ada Lovelace").aliases == ["Countess of Lovelace"]


def test_a_graph_batch_is_one_append_and_all_of_it_is_undone_when_it_fails(
    graph: GraphService,
    audited: Audited,
    settings: Settings,
    disk_full: Callable[[], None],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    appends: list[int] = []
    append = AuditLog.append
    monkeypatch.setattr(AuditLog, "append", lambda self, lines: appends.append(len(lines)) or append(self, lines))
    triples = [
        {"subject": "Ada", "predicate": "worked_with", "object": "Babbage"},
        {"subject": "Babbage", "predicate": "designed", "object": "Analytical Engine"},
    ]
    added = graph.add_triples(triples)
    assert appends == [5]  # 3 entities and 2 triples: one durable write
    said = audited.said()
    assert sorted(action for action, _, _ in said) == ["CREATE"] * 5
    files = {file for _, file, _ in said}
    assert {f"knowledge-graph/triples/{t.fact.id}.json" for t in added.triples} <= files
    assert all((settings.home / file).exists() for file in files)
    line = next(line for line in audited.all() if added.triples[0].fact.id in line.file)
    assert '"Ada" --worked_with--> "Babbage"' in line.summary

    disk_full()
    refused(audited, settings, lambda: graph.add_triples([{"subject": "Ada", "predicate": "wrote", "object": "Notes"}]))
    assert graph.stats() == {"entities": 3, "triples": 2}


def test_graph_deletes_and_merges(
    graph: GraphService, audited: Audited, settings: Settings, disk_full: Callable[[], None]
) -> None:
    graph.add_triples([
        {"subject": "Ada", "predicate": "knows", "object": "Babbage"},
        {"subject": "Ada L.", "predicate": "wrote", "object": "Notes"},
        {"subject": "Notes", "predicate": "about", "object": "Engine"},
    ])  # fmt: skip
    fact = graph.get_entity("Notes").facts[0]
    audited.new()
    graph.delete_triple(fact.id)
    assert audited.said() == [("DELETE", f"knowledge-graph/triples/{fact.id}.json", "main")]

    babbage = graph.resolve("Babbage")
    knows = graph.get_entity("Babbage").facts[0].id
    disk_full_later = graph.resolve("Ada L.")
    merged = graph.merge_entities("Ada", "Ada L.")
    said = audited.said()
    assert ("MERGE", f"knowledge-graph/entities/{merged.entity.id}.json", "main") in said
    assert ("DELETE", f"knowledge-graph/entities/{disk_full_later.id}.json", "main") in said
    merge_line = next(line for line in audited.all() if line.action == "MERGE")
    assert '"Ada L." into "Ada"' in merge_line.summary and "1 triples re-pointed" in merge_line.summary

    disk_full()
    refused(audited, settings, lambda: graph.delete_entity("Babbage"))
    assert graph.resolve("Babbage") == babbage and graph.fact(knows).subject == "Ada"
    refused(audited, settings, lambda: graph.merge_entities("Ada", "Engine"))
    refused(audited, settings, lambda: graph.delete_triple(knows))


def test_graph_entity_delete_lists_the_entity_and_its_triples(graph: GraphService, audited: Audited) -> None:
    graph.add_triples([{"subject": "Ada", "predicate": "knows", "object": "Babbage"}])
    fact = graph.get_entity("Ada").facts[0]
    audited.new()
    graph.delete_entity("Ada")
    assert sorted(audited.said()) == [
        ("DELETE", f"knowledge-graph/entities/{fact.subject_id}.json", "main"),
        ("DELETE", f"knowledge-graph/triples/{fact.id}.json", "main"),
    ]


# ---------------------------------------------------------------------------------------------- episodes
def test_episodes_append_remove_and_put_back(
    episodes: Episodes, audited: Audited, settings: Settings, disk_full: Callable[[], None]
) -> None:
    episode = episodes.record("Chose the hybrid approach", type="decision")
    [line] = audited.new()
    day_file = f"episodes/{episode.at.date().isoformat()}.jsonl"
    assert (line.action, line.file, line.actor) == ("APPEND", day_file, "main")
    assert episode.id in line.summary and '"Chose the hybrid approach"' in line.summary
    episodes.remove(episode.id)
    assert audited.said() == [("DELETE", day_file, "main")]
    assert episodes.put_back(episode)
    [line] = audited.new()
    assert (line.action, line.file) == ("EDIT", day_file) and "restored" in line.summary

    disk_full()
    refused(audited, settings, lambda: episodes.record("Lost to a full disk"))
    refused(audited, settings, lambda: episodes.remove(episode.id))
    assert episodes.get(episode.id) == episode


# ---------------------------------------------------------------------------------------------- procedures
def test_procedures_create_edit_archive_restore_delete(
    procedures: Procedures, audited: Audited, settings: Settings, disk_full: Callable[[], None]
) -> None:
    path = "procedures/deploy.json"
    procedures.save("deploy", ["deploy"], ["build", "ship"])
    procedures.save("deploy", ["deploy"], ["build", "test", "ship"], reason="tests first")
    procedures.archive("deploy", "replaced")
    procedures.restore("deploy")
    said = audited.new()
    assert [(line.action, line.file) for line in said] == [
        ("CREATE", path), ("EDIT", path), ("ARCHIVE", path), ("EDIT", path)
    ]  # fmt: skip
    assert "version 2" in said[1].summary and "tests first" in said[1].summary
    assert "replaced" in said[2].summary and "restored" in said[3].summary

    disk_full()
    refused(audited, settings, lambda: procedures.save("release", ["release"], ["tag"]))
    refused(audited, settings, lambda: procedures.save("deploy", ["deploy"], ["just ship"]))
    refused(audited, settings, lambda: procedures.archive("deploy"))
    refused(audited, settings, lambda: procedures.delete("deploy"))
    assert procedures.get("deploy").steps == ["build", "test", "ship"]


def test_procedure_delete_is_logged(procedures: Procedures, audited: Audited, settings: Settings) -> None:
    procedures.save("deploy", ["deploy"], ["ship"])
    audited.new()
    procedures.delete("deploy")
    assert audited.said() == [("DELETE", "procedures/deploy.json", "main")]
    assert not (settings.home / "procedures" / "deploy.json").exists()


# ---------------------------------------------------------------------------------------------- core memory
def test_core_edits_name_the_block_and_the_text(
    service: MemoryService, audited: Audited, settings: Settings, disk_full: Callable[[], None]
) -> None:
    core = CoreMemory(settings, service)
    core.edit("append", "Active Context", core.read().version, "Working on the audit log")
    [line] = audited.new()
    assert (line.action, line.file, line.actor) == ("CREATE", "MEMORY.md", "main")  # the first edit makes it
    assert "Active Context" in line.summary and '"Working on the audit log"' in line.summary
    core.edit("replace_line", "Active Context", core.read().version, "Reviewing the audit log", line=1)
    [line] = audited.new()
    assert (line.action, line.file) == ("EDIT", "MEMORY.md")
    assert "replaced line 1 of Active Context" in line.summary and '"Reviewing the audit log"' in line.summary
    # A Critical Facts line: the file's EDIT, and the pinned mirror's CREATE from the memory store (vault sync).
    core.edit("append", "Critical Facts", core.read().version, "Allergic to penicillin")
    said = audited.said()
    assert said[0] == ("EDIT", "MEMORY.md", "main")
    assert said[1][0] == "CREATE" and said[1][1].startswith("memory/core/critical-facts/")
    with pytest.raises(ChangedSinceReadError):  # refused before any write: no line
        core.edit("append", "Persona", "000000000000", "Terse")
    assert audited.new() == []

    disk_full()
    version = core.read().version
    refused(audited, settings, lambda: core.edit("remove_line", "Active Context", version, line=1))
    assert core.read().version == version


def test_the_first_core_edit_is_undone_whole_when_its_line_fails(
    audited: Audited, settings: Settings, disk_full: Callable[[], None]
) -> None:
    core = CoreMemory(settings)
    disk_full()
    refused(audited, settings, lambda: core.edit("append", "Persona", core.read().version, "Terse"))
    assert not settings.core_file.exists()


# ---------------------------------------------------------------------------------------------- workspace files
def test_workspace_files_create_and_edit(audited: Audited, settings: Settings, disk_full: Callable[[], None]) -> None:
    workspace = Workspace(settings)
    workspace.write("SOUL.md", "# Soul\nBe kind.\n")
    first = workspace.write("SOUL.md", "# Soul\nBe kind.\nBe brief.\n")
    said = audited.new()
    assert [(line.action, line.file) for line in said] == [("CREATE", "SOUL.md"), ("EDIT", "SOUL.md")]
    assert "+1 -0 lines" in said[1].summary

    disk_full()
    refused(audited, settings, lambda: workspace.write("SOUL.md", "# Soul\nBe cruel.\n", first.version))
    assert workspace.read("SOUL.md").version == first.version  # the cache follows the disk back too
    refused(audited, settings, lambda: workspace.write("USER.md", "# User\n"))
    assert not (settings.home / "USER.md").exists()


# ---------------------------------------------------------------------------------------------- feedback
def test_feedback_is_appended(audited: Audited, settings: Settings, disk_full: Callable[[], None]) -> None:
    feedback = FeedbackLog(settings)
    signal = feedback.record("Correction", "Use UTC in reports", "s-1")
    [line] = audited.new()
    assert (line.action, line.file, line.actor) == ("APPEND", f"feedback/{signal.at.date()}.jsonl", "main")
    assert signal.id in line.summary
    disk_full()
    refused(audited, settings, lambda: feedback.record("Correction", "Lost", "s-1"))
    assert [f.id for f in feedback.recent()] == [signal.id]


# ---------------------------------------------------------------------------------------------- forgetting
@dataclass
class World:
    memory: MemoryService
    episodes: Episodes
    graph: GraphService
    core: CoreMemory
    forgetting: Forgetting


@pytest.fixture
def world(
    settings: Settings, service: MemoryService, episodes: Episodes, procedures: Procedures, opener: Opener
) -> World:
    graph = opener()
    core = CoreMemory(settings, service)
    return World(
        service, episodes, graph, core, Forgetting(settings, service, episodes, procedures, lambda: graph, core)
    )


def test_a_soft_forgotten_memory_is_archived_once_with_its_episodes(world: World, audited: Audited) -> None:
    entry = world.memory.save("My sister Anna lives in Lisbon", category="family")
    logged = world.episodes.log_save(entry)
    audited.new()
    assert world.forgetting.forget([f"memory:{entry.id}"]).items[0].ok
    said = audited.said()
    assert said == [
        ("ARCHIVE", f"memory/family/{entry.id}.json", "main"),  # MemoryService's line, once
        ("ARCHIVE", f"episodes/{logged.at.date()}.jsonl", "main"),
    ]
    assert world.forgetting.restore([f"memory:{entry.id}"]).items[0].ok
    assert audited.said() == [
        ("EDIT", f"memory/family/{entry.id}.json", "main"),
        ("EDIT", f"episodes/{logged.at.date()}.jsonl", "main"),
    ]


def test_a_forget_whose_line_fails_leaves_the_memory_as_it_was(
    world: World, audited: Audited, settings: Settings, disk_full: Callable[[], None]
) -> None:
    entry = world.memory.save("My sister Anna lives in Lisbon", category="family")
    world.episodes.log_save(entry)
    audited.new()
    before = stores(settings)
    disk_full()
    outcome = world.forgetting.forget([f"memory:{entry.id}"]).items[0]
    assert not outcome.ok and "disk full" in outcome.done
    assert stores(settings) == before and audited.new() == []
    assert world.memory.get(entry.id).archived_at is None


def test_episode_forget_archive_delete_of_its_record_and_restore(
    world: World, audited: Audited, settings: Settings
) -> None:
    episode = world.episodes.record("Visited Anna in Lisbon")
    day_file = f"episodes/{episode.at.date()}.jsonl"
    audited.new()
    assert world.forgetting.forget([f"episode:{episode.id}"]).items[0].ok
    [line] = audited.new()
    assert (line.action, line.file) == ("ARCHIVE", day_file)
    assert f"forgotten/episodes/{episode.id}.json" in line.summary
    assert world.forgetting.restore([f"episode:{episode.id}"]).items[0].ok
    assert audited.said() == [("EDIT", day_file, "main")]
    assert world.forgetting.forget([f"episode:{episode.id}"]).items[0].ok
    audited.new()
    # Forgotten before, now for good: only its record under forgotten/ was left, and that is what goes.
    assert world.forgetting.forget([f"episode:{episode.id}"], permanent=True).items[0].ok
    assert audited.said() == [("DELETE", f"forgotten/episodes/{episode.id}.json", "main")]
    assert not (settings.home / "forgotten" / "episodes" / f"{episode.id}.json").exists()


def test_entity_forget_is_an_archive_and_its_restore_an_edit(world: World, audited: Audited) -> None:
    world.graph.add_triples([{"subject": "Anna", "predicate": "lives_in", "object": "Lisbon"}])
    anna = world.graph.get_entity("Anna")
    audited.new()
    assert world.forgetting.forget([f"entity:{anna.entity.id}"]).items[0].ok
    said = audited.new()
    assert sorted((line.action, line.file) for line in said) == [
        ("ARCHIVE", f"knowledge-graph/entities/{anna.entity.id}.json"),
        ("ARCHIVE", f"knowledge-graph/triples/{anna.facts[0].id}.json"),
    ]
    assert all("forgotten/graph/" in line.summary for line in said)
    assert world.forgetting.restore([f"entity:{anna.entity.id}"]).items[0].ok
    assert sorted(audited.said()) == [
        ("EDIT", f"knowledge-graph/entities/{anna.entity.id}.json", "main"),
        ("EDIT", f"knowledge-graph/triples/{anna.facts[0].id}.json", "main"),
    ]


def test_core_line_forget_soft_and_for_good(world: World, audited: Audited) -> None:
    line = "- Sister: Anna, lives in Lisbon"
    world.core.edit("append", "Identity", world.core.read().version, line)
    audited.new()
    core_id = f"core:Identity:{line_hash(line)}"
    assert world.forgetting.forget([core_id]).items[0].ok
    [archived] = audited.new()
    assert (archived.action, archived.file) == ("ARCHIVE", "MEMORY.md") and "forgotten/core/" in archived.summary
    assert world.forgetting.restore([core_id]).items[0].ok
    [restored] = audited.new()
    assert (restored.action, restored.file) == ("EDIT", "MEMORY.md") and restored.summary.startswith("restored")
    assert world.forgetting.forget([core_id], permanent=True).items[0].ok
    assert audited.said() == [("DELETE", "MEMORY.md", "main")]


# ---------------------------------------------------------------------------------------------- dream, decay
def test_a_dream_runs_lines_all_carry_its_run_id(
    service: MemoryService, graph: GraphService, settings: Settings, clock: FakeClock, audited: Audited
) -> None:
    first = service.save("The staging server is called kestrel")
    second = service.save("The staging server is called kestrel.")
    audited.new()
    report = Dreamer(service, graph, settings, Templates(settings.prompts_dir), clock).run_deterministic()
    assert re.fullmatch(r"d-\d{8}-\d{6}-[0-9a-f]{4}", report.run_id or "")
    said = audited.new()
    # The decay pass's tier transitions are the decay system's (seed 004 §12.3); the rest is the run's.
    assert said and {line.actor for line in said if line.action != "DECAY"} == {f"dream:{report.run_id}"}
    assert [line.actor for line in said if line.action == "DECAY"] == ["system:decay"]
    by_action = {line.action: [] for line in said}
    for line in said:
        by_action[line.action].append(line.file)
    [merged_id] = [a.result_id for a in report.applied if a.action == "merge"]
    assert by_action["MERGE"] == [f"memory/{merged_id}.json"]
    assert sorted(by_action["ARCHIVE"]) == sorted([f"memory/{first.id}.json", f"memory/{second.id}.json"])
    assert by_action["DECAY"] == ["meta/decay-scores.json"]
    assert by_action["CREATE"] == [f"dream-reports/{report.id}.json"]
    decay = next(line for line in said if line.action == "DECAY")
    assert decay.summary == "0 entries transitioned; 1 scored"
    assert all((settings.home / file).exists() for files in by_action.values() for file in files)


def test_a_dream_plan_applied_is_the_runs_too(
    service: MemoryService, graph: GraphService, settings: Settings, clock: FakeClock, audited: Audited
) -> None:
    plan = DreamPlan.model_validate({"triples": [{"subject": "Ada", "predicate": "knows", "object": "Babbage"}]})
    report = Dreamer(service, graph, settings, Templates(settings.prompts_dir), clock).apply(plan, "entities")
    said = audited.new()
    assert [line.action for line in said] == ["CREATE"] * 4  # 2 entities, the triple, the report
    assert {line.actor for line in said} == {f"dream:{report.run_id}"}


def test_the_decay_files_line_fails_and_the_file_is_as_it_was(
    service: MemoryService,
    graph: GraphService,
    settings: Settings,
    clock: FakeClock,
    audited: Audited,
    disk_full: Callable[[], None],
) -> None:
    dreamer = Dreamer(service, graph, settings, Templates(settings.prompts_dir), clock)
    service.save("Kestrel is the staging server")
    dreamer.run_deterministic()
    scores = settings.meta_dir / "decay-scores.json"
    before, reports = scores.read_bytes(), dreamer.reports()
    service.save("Falcon is the production server")
    disk_full()
    with pytest.raises(OSError):
        dreamer.run_deterministic()
    assert scores.read_bytes() == before and dreamer.reports() == reports


# ---------------------------------------------------------------------------------------------- doctor
def test_doctor_repairs_are_the_doctors(audited: Audited, settings: Settings, disk_full: Callable[[], None]) -> None:
    bad = settings.memory_dir / "notes" / "0123456789ab.json"
    bad.parent.mkdir(parents=True)
    bad.write_text("{not json")
    with acting_as(MANUAL):  # as the CLI runs it: the repairs still say the doctor did them
        report = Doctor(settings).run(fix=True)
    [line] = audited.new()
    assert (line.action, line.file, line.actor) == ("RENAME", "memory/notes/0123456789ab.json", "system:doctor")
    assert line.summary.startswith(f"moved to {report.quarantine}/memory/notes/0123456789ab.json")
    assert not bad.exists() and (settings.home / report.quarantine / "memory/notes/0123456789ab.json").exists()

    bad.write_text("{not json either")
    disk_full()
    with pytest.raises(OSError):
        Doctor(settings).run(fix=True)
    assert bad.read_text() == "{not json either"  # moved back: nothing done without its line


# ---------------------------------------------------------------------------------------------- CLI
def test_cli_import_is_manual(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home = tmp_path / "cli-home"
    lines = [
        {"id": "note-1", "content": "Deploy on Tuesdays", "category": "ops"},
        {"store": "episode", "id": "0123456789ab", "at": "2024-05-01T09:00:00Z", "type": "event",
         "confidence": "medium", "tags": [], "source": "conversation", "content": "Deployed"},
        {"store": "file", "name": "USER.md", "text": "# User\n"},
    ]  # fmt: skip
    source = tmp_path / "backup.jsonl"
    source.write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert cli.main(["--home", str(home), "import", str(source)]) == 0
    said = [(line.action, line.file, line.actor, line.approval) for line in AuditLog(home / "meta/audit.log").lines()]
    imported = [entry for entry in said if not entry[2].startswith("system:")]  # migrations are system:init's
    assert imported == [
        ("CREATE", "memory/ops/note-1.json", MANUAL, NO_APPROVAL),
        ("APPEND", "episodes/2024-05-01.jsonl", MANUAL, NO_APPROVAL),
        ("CREATE", "USER.md", MANUAL, NO_APPROVAL),
    ]


def test_cli_dream_lines_are_the_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home = tmp_path / "cli-home"
    assert cli.main(["--home", str(home), "dream", "--force"]) == 0
    lines = AuditLog(home / "meta/audit.log").lines()
    actors = {line.actor for line in lines if line.actor not in ("system:init", "system:decay")}
    assert len(actors) == 1 and next(iter(actors)).startswith("dream:d-")


# ---------------------------------------------------------------------------------------------- what is not audited
def test_working_memory_and_uses_write_no_line(service: MemoryService, settings: Settings, audited: Audited) -> None:
    from rockmem_mcp.working.service import WorkingMemory

    entry = service.save("Kestrel is the staging server")
    audited.new()
    working = WorkingMemory(settings, "session/s-1")
    working.save("shared/plan/steps", "pack the bikes", 60)
    service.get(entry.id, reinforce=True)
    service.reinforcer.flush()
    assert audited.new() == []
