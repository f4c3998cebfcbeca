"""The dream's episodes pass: its material (the episodes since the pass's mark that log no memory, with the
known procedures and entity names), what a plan may do with it (memories naming their source episodes,
graph additions, procedures created or updated with their history), the links it must name, the mark that
moves only when a plan is applied (never on a dry run), paging, and the episodes left as they were."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from rockmem_mcp.config import Settings
from rockmem_mcp.consolidation.dream import Dreamer
from rockmem_mcp.consolidation.shapes import DreamPlan, DreamProcedure, PlanCreate
from rockmem_mcp.consolidation.templates import Templates
from rockmem_mcp.episodes.service import Episodes
from rockmem_mcp.graph.service import GraphService
from rockmem_mcp.graph.shapes import EntityInput, TripleInput
from rockmem_mcp.llm import ChatLLM
from rockmem_mcp.memory.service import MemoryService
from rockmem_mcp.models import Episode, MemoryEntry
from rockmem_mcp.procedures.service import Procedures
from tests.embedding_server import EmbeddingServer
from tests.unit.consolidation.test_llm_dream import chat
from tests.unit.helpers import T0, FakeClock

HOUR = timedelta(hours=1)


@pytest.fixture
def episodes(settings: Settings, clock: FakeClock, service: MemoryService) -> Episodes:
    return Episodes(settings, clock, service.reinforcer)


@pytest.fixture
def procedures(settings: Settings, clock: FakeClock, service: MemoryService) -> Procedures:
    return Procedures(settings, service.reinforcer, clock)


def dreamer_for(
    service: MemoryService, graph: GraphService, settings: Settings, clock: FakeClock, **stores: object
) -> Dreamer:
    return Dreamer(service, graph, settings, Templates(settings.prompts_dir), clock, **stores)  # type: ignore[arg-type]


@pytest.fixture
def dreamer(
    service: MemoryService,
    graph: GraphService,
    settings: Settings,
    clock: FakeClock,
    episodes: Episodes,
    procedures: Procedures,
) -> Dreamer:
    return dreamer_for(service, graph, settings, clock, episodes=episodes, procedures=procedures)


@pytest.fixture
def batched(
    service: MemoryService, graph: GraphService, settings: Settings, clock: FakeClock, episodes: Episodes
) -> Dreamer:
    """A dreamer whose material comes 2 episodes a batch."""
    small = settings.model_copy(update={"dream_batch_size": 2})
    return dreamer_for(service, graph, small, clock, episodes=episodes)


def record(episodes: Episodes, content: str, at: datetime, **fields: object) -> Episode:
    return episodes.record(content, at=at, **fields)  # type: ignore[arg-type]


def shown_ids(material: str) -> list[str]:
    return [line.split("[", 1)[1].split("]", 1)[0] for line in material.splitlines() if "[" in line]


def day_files(settings: Settings) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(settings.episodes_dir.glob("*.jsonl"))}


def dream_memories(service: MemoryService) -> list[MemoryEntry]:
    return [e for e in service.iter_entries() if e.metadata.get("source") == "dream"]


# ---------------------------------------------------------------------------------------------- material
def test_material_is_the_unlogged_episodes_oldest_first_with_procedures_and_entities(
    dreamer: Dreamer, episodes: Episodes, procedures: Procedures, service: MemoryService, graph: GraphService
) -> None:
    later = record(episodes, "Deployed   Falcon\nto staging", T0 + 2 * HOUR, type="task", tags=["falcon", "deploy"])
    first = record(episodes, "The user prefers tabs", T0 - 25 * HOUR, type="preference", confidence="high")
    saved = service.save("The staging database runs PostgreSQL 15", "project-context/db")
    episodes.log_save(saved)  # save_memory's episode: its memory says the same, so it is not material
    procedures.save("how-to-release", ["release", "cut a release"], ["tag", "push"])
    graph.add_entities([{"name": "Falcon"}, {"name": "Alice"}])
    material = dreamer.material("episodes")
    assert (material.dream_pass, material.items, material.remaining) == ("episodes", 2, 0)
    assert material.material.splitlines() == [
        f"1. [{first.id}] 2024-04-30 08:00 preference (high): The user prefers tabs",
        f"2. [{later.id}] 2024-05-01 11:00 task (medium) #falcon #deploy: Deployed Falcon to staging",
    ]
    assert "- how-to-release (trigger: release; cut a release)" in material.directive
    assert "Alice, Falcon" in material.directive
    assert "{{" not in material.directive and "source_episodes" in material.directive
    assert "procedures" in material.plan_schema["properties"]


def test_material_pages_with_offset_and_remaining(batched: Dreamer, episodes: Episodes) -> None:
    dreamer = batched
    recorded = [record(episodes, f"step {n} of the migration", T0 + n * HOUR).id for n in range(5)]
    seen: list[str] = []
    for offset, items, remaining in [(0, 2, 3), (2, 2, 1), (4, 1, 0), (5, 0, 0)]:
        material = dreamer.material("episodes", offset)
        assert (material.items, material.remaining) == (items, remaining), offset
        assert [line.split(".")[0] for line in material.material.splitlines() if items] == [
            str(offset + n) for n in range(1, items + 1)
        ]
        seen += shown_ids(material.material)
    assert seen == recorded


# ---------------------------------------------------------------------------------------------- the mark
def test_the_mark_moves_past_what_was_shown_when_a_plan_is_applied_never_on_a_dry_run(
    dreamer: Dreamer, episodes: Episodes, settings: Settings
) -> None:
    a = record(episodes, "Chose SQLite for the cache", T0, type="decision")
    b = record(episodes, "Alice joined the Falcon team", T0 + HOUR, type="fact")
    assert shown_ids(dreamer.material("episodes").material) == [a.id, b.id]
    dreamer.apply(DreamPlan(), "episodes", dry_run=True)
    assert shown_ids(dreamer.material("episodes").material) == [a.id, b.id]  # a dry run moves nothing
    for other in ("consolidation", "entities"):
        dreamer.apply(DreamPlan(), other)
    assert shown_ids(dreamer.material("episodes").material) == [a.id, b.id]  # nor does another pass
    dreamer.apply(DreamPlan(), "episodes")
    assert dreamer.material("episodes").material == "(nothing to consider)"
    c = record(episodes, "Falcon's launch moved to June", T0 + 3 * HOUR, type="event")
    assert shown_ids(dreamer.material("episodes").material) == [c.id]  # what came after the mark
    assert (settings.meta_dir / "dream-episodes.json").is_file()


def test_a_plan_moves_the_mark_only_as_far_as_the_batches_shown(batched: Dreamer, episodes: Episodes) -> None:
    dreamer = batched
    ids = [record(episodes, f"note {n} about Falcon", T0 + n * HOUR).id for n in range(5)]
    dreamer.material("episodes", 0)
    dreamer.apply(DreamPlan(), "episodes")  # the agent applied after its first batch
    after_first = dreamer.material("episodes", 0)
    assert shown_ids(after_first.material) == ids[2:4] and after_first.remaining == 1
    dreamer.material("episodes", 2)  # and read one more batch before its next plan
    dreamer.apply(DreamPlan(), "episodes")
    assert shown_ids(dreamer.material("episodes").material) == []  # both batches shown: all read
    assert dreamer.material("episodes").items == 0


def test_episodes_at_one_time_split_by_a_batch_are_neither_skipped_nor_repeated(
    batched: Dreamer, episodes: Episodes
) -> None:
    dreamer = batched
    ids = [record(episodes, f"standup item {n}", T0).id for n in range(3)]  # one minute, one time
    assert shown_ids(dreamer.material("episodes").material) == ids[:2]
    dreamer.apply(DreamPlan(), "episodes")
    assert shown_ids(dreamer.material("episodes").material) == ids[2:]


def test_an_unreadable_mark_shows_every_episode_again(
    dreamer: Dreamer, episodes: Episodes, settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    a = record(episodes, "Picked Rust for the parser", T0, type="decision")
    dreamer.material("episodes")
    dreamer.apply(DreamPlan(), "episodes")
    (settings.meta_dir / "dream-episodes.json").write_text("{not json")
    assert shown_ids(dreamer.material("episodes").material) == [a.id]
    assert "cannot be read" in caplog.text


# ---------------------------------------------------------------------------------------------- creates
def test_creates_name_their_source_episodes_and_the_safeguards_hold(
    dreamer: Dreamer, episodes: Episodes, service: MemoryService, settings: Settings
) -> None:
    tabs = record(episodes, "The user said: tabs, never spaces", T0, type="preference", confidence="high")
    again = record(episodes, "Reminded me again: tabs", T0 + HOUR, type="correction")
    known = service.save("The user deploys on Tuesdays", "project-context/falcon")
    plan = DreamPlan(
        creates=[
            PlanCreate(
                content="The user indents with tabs, never spaces",
                category="user-preferences/editor",
                tags=["indent"],
                source_episodes=[tabs.id, again.id, tabs.id],
                reason="said twice",
            ),
            PlanCreate(content="the user deploys on tuesdays ", source_episodes=[tabs.id]),  # already remembered
            PlanCreate(content="The user likes tea"),  # no source episodes
            PlanCreate(content="The user likes coffee", source_episodes=["0123456789ab"]),  # no such episode
        ]
    )
    before = day_files(settings)
    dry = dreamer.apply(plan, "episodes", dry_run=True)
    assert dream_memories(service) == []
    report = dreamer.apply(plan, "episodes")
    assert [(a.action, a.reason) for a in report.applied] == [("create", "said twice")]
    assert [(a.action, a.reason) for a in dry.applied] == [("create", "said twice")]
    rejected = [(a.action, a.ids, a.reason) for a in report.rejected]
    assert rejected[0] == ("create", [known.id], "already remembered")
    assert rejected[1][2].startswith("name the episodes it is from in source_episodes")
    assert rejected[2] == ("create", ["0123456789ab"], "unknown episode ids in source_episodes: 0123456789ab")
    [made] = dream_memories(service)
    assert made.id == report.applied[0].result_id
    assert made.content == "The user indents with tabs, never spaces"
    assert made.category == "user-preferences/editor" and made.tags == ["indent"]
    assert made.metadata == {"source": "dream", "source_episodes": f"{tabs.id},{again.id}"}
    assert day_files(settings) == before  # episodes are never changed
    assert "1 create" in report.summary


def test_source_episodes_belong_to_the_episodes_pass(dreamer: Dreamer, episodes: Episodes) -> None:
    one = record(episodes, "Told me: no emojis", T0, type="preference")
    plan = DreamPlan(creates=[PlanCreate(content="The user wants no emojis", source_episodes=[one.id])])
    report = dreamer.apply(plan, "preferences")
    assert report.applied == [] and "episodes pass" in report.rejected[0].reason


def test_entities_and_triples_from_episodes_reach_the_graph(
    dreamer: Dreamer, episodes: Episodes, graph: GraphService
) -> None:
    one = record(episodes, "Alice now leads Falcon", T0, type="fact")
    plan = DreamPlan(
        entities=[EntityInput(name="Alice", type="person"), EntityInput(name="Falcon", type="project")],
        triples=[TripleInput(subject="Alice", predicate="leads", object="Falcon", confidence=0.9, source=one.id)],
    )
    report = dreamer.apply(plan, "episodes")
    assert [a.action for a in report.applied] == ["entity", "entity", "triple"]
    [fact] = graph.traverse("alice").facts
    assert fact.line() == "- Alice --leads--> Falcon (confidence=0.90)"
    assert graph.fact(fact.id).source == one.id


# ---------------------------------------------------------------------------------------------- procedures
def test_a_procedure_is_created_then_updated_only_when_its_steps_differ_keeping_its_history(
    dreamer: Dreamer, episodes: Episodes, procedures: Procedures
) -> None:
    first = record(episodes, "Deployed: ran the tests, then make ship", T0, type="task")
    second = record(episodes, "Deployed again: tests, staging, make ship", T0 + 24 * HOUR, type="task")
    learned = DreamProcedure(
        name="how-to-deploy",
        trigger=["deploy", "push to production"],
        steps=["Run the test suite", "make ship"],
        notes=["Never on Fridays"],
        learned_from=[first.id],
        reason="deployed this way",
    )
    dry = dreamer.apply(DreamPlan(procedures=[learned]), "episodes", dry_run=True)
    assert [a.action for a in dry.applied] == ["procedure"] and procedures.list() == []
    report = dreamer.apply(DreamPlan(procedures=[learned]), "episodes")
    assert [(a.action, a.ids, a.reason) for a in report.applied] == [
        ("procedure", ["how-to-deploy"], "created: deployed this way")
    ]
    made = procedures.get("how-to-deploy")
    assert (made.version, made.trigger, made.steps) == (1, ["deploy", "push to production"], learned.steps)
    assert made.notes == ["Never on Fridays"] and made.learned_from == [first.id]
    assert made.reason == "dream: deployed this way"

    same = learned.model_copy(update={"steps": ["run the  test suite", "make ship"], "learned_from": [second.id]})
    report = dreamer.apply(DreamPlan(procedures=[same]), "episodes")
    assert report.applied == [] and report.rejected[0].reason == "'how-to-deploy' already has these steps"
    assert procedures.get("how-to-deploy").version == 1

    refined = DreamProcedure(
        name="How to deploy",  # the same procedure (its slug), however the model spells it
        trigger=["deploy"],
        steps=["Run the test suite", "Deploy to staging", "make ship"],
        learned_from=[second.id],
    )
    report = dreamer.apply(DreamPlan(procedures=[refined]), "episodes")
    assert [(a.action, a.reason) for a in report.applied] == [
        ("procedure", "updated 'how-to-deploy' (version 1 kept in its history): learned from episodes")
    ]
    updated = procedures.get("how-to-deploy")
    assert updated.name == "how-to-deploy" and updated.version == 2
    assert updated.steps == refined.steps and updated.trigger == ["deploy"]
    assert updated.notes == ["Never on Fridays"]  # no notes proposed: the known ones stay
    assert updated.learned_from == [first.id, second.id]
    assert updated.reason == "dream: learned from episodes"
    [earlier] = updated.history
    assert (earlier.version, earlier.steps, earlier.reason) == (1, learned.steps, "dream: deployed this way")


def test_procedure_links_must_name_episodes_that_exist(
    dreamer: Dreamer, episodes: Episodes, procedures: Procedures, service: MemoryService
) -> None:
    one = record(episodes, "Backed up the laptop to the NAS", T0, type="task")
    memory = service.save("Backups go to the NAS", "project-context/home")
    proposals = [
        DreamProcedure(name="backup", trigger=["back up"], steps=["rsync to the NAS"], learned_from=[one.id, "x1"]),
        DreamProcedure(name="backup-2", trigger=["back up"], steps=["rsync"], learned_from=[memory.id]),
        DreamProcedure(name="backup-3", trigger=["back up"], steps=["rsync"]),
    ]
    report = dreamer.apply(DreamPlan(procedures=proposals), "episodes")
    assert report.applied == []
    assert [(a.ids, a.reason) for a in report.rejected] == [
        (["backup"], "unknown episode ids in learned_from: x1"),
        (["backup-2"], f"unknown episode ids in learned_from: {memory.id}"),  # a memory is not an episode
        (["backup-3"], "name the episodes it was learned from in learned_from"),
    ]
    assert procedures.list() == []


def test_a_procedure_once_per_plan_and_never_an_archived_one(
    dreamer: Dreamer, episodes: Episodes, procedures: Procedures
) -> None:
    one = record(episodes, "Rotated the keys", T0, type="task")
    procedures.save("rotate-keys", ["rotate keys"], ["old step"])
    procedures.archive("rotate-keys", reason="not needed")
    twice = [
        DreamProcedure(name="renew-cert", trigger=["renew"], steps=["certbot renew"], learned_from=[one.id]),
        DreamProcedure(name="Renew cert", trigger=["renew"], steps=["other"], learned_from=[one.id]),
        DreamProcedure(name="rotate-keys", trigger=["rotate"], steps=["new step"], learned_from=[one.id]),
    ]
    report = dreamer.apply(DreamPlan(procedures=twice), "episodes")
    assert [a.ids for a in report.applied] == [["renew-cert"]]
    assert [a.reason for a in report.rejected] == [
        "already changed by another action of this plan",
        "'rotate-keys' is archived: restore it to let a dream update it",
    ]
    assert procedures.get("renew-cert").steps == ["certbot renew"]
    assert procedures.get("rotate-keys").steps == ["old step"]


def test_procedures_belong_to_the_episodes_pass(dreamer: Dreamer, episodes: Episodes, procedures: Procedures) -> None:
    one = record(episodes, "Rotated the keys", T0, type="task")
    plan = DreamPlan(procedures=[DreamProcedure(name="x", trigger=["rotate"], steps=["a"], learned_from=[one.id])])
    report = dreamer.apply(plan, "entities")
    assert report.rejected[0].reason == "1 procedures are not part of the entities pass" and procedures.list() == []


def test_a_dreamer_opens_the_episode_and_procedure_stores_it_was_not_given(
    service: MemoryService, graph: GraphService, settings: Settings, clock: FakeClock, episodes: Episodes
) -> None:
    one = record(episodes, "Cut the 2.0 release", T0, type="task")
    alone = dreamer_for(service, graph, settings, clock)  # as the CLI makes it
    assert shown_ids(alone.material("episodes").material) == [one.id]
    learned = DreamProcedure(name="release", trigger=["release"], steps=["tag", "push"], learned_from=[one.id])
    assert [a.action for a in alone.apply(DreamPlan(procedures=[learned]), "episodes").applied] == ["procedure"]
    assert Procedures(settings, service.reinforcer).get("release").learned_from == [one.id]


# ---------------------------------------------------------------------------------------------- a model's pass
def test_a_model_pass_moves_the_mark_past_the_batches_it_answered_only(
    service: MemoryService, graph: GraphService, settings: Settings, clock: FakeClock, episodes: Episodes
) -> None:
    server = EmbeddingServer()
    try:
        configured = settings.model_copy(
            update={"llm_endpoint": server.url, "llm_model": "m", "llm_retries": 1, "dream_batch_size": 2}
        )
        dreamer = dreamer_for(service, graph, configured, clock, episodes=episodes)
        ids = [record(episodes, f"The user asked for metric units ({n})", T0 + n * HOUR).id for n in range(5)]
        fact = {"content": "The user wants metric units", "source_episodes": ids[:2]}
        server.replies = [chat({"creates": [fact]}), chat("not JSON"), chat("still not JSON")]
        report = dreamer.run_llm("episodes", ChatLLM(configured, backoff_s=0.0))
        assert [a.action for a in report.applied] == ["create"]
        assert "gave no valid answer" in report.rejected[0].reason
        # The second batch failed: it is read again, not skipped.
        assert shown_ids(dreamer.material("episodes").material) == ids[2:4]
    finally:
        server.close()
