"""The dream pass: every safeguard of `Dreamer.apply` (whatever the plan says), each pass's own kind of change,
dry runs, reports, the lock, the schedule, the deterministic pass (duplicates, decay tiers, purge, graph sweep), the
material an agent reads, and random memory sets with random plans checked against the invariants."""

from __future__ import annotations

import contextlib
import json
import math
import random
import re
from collections.abc import Iterator
from datetime import date, datetime, timedelta
from typing import Any

import pytest

from rockmem_mcp.config import Settings
from rockmem_mcp.consolidation import dream as dream_module
from rockmem_mcp.consolidation.dream import DreamBusy, Dreamer, protected
from rockmem_mcp.consolidation.fact_check import details
from rockmem_mcp.consolidation.fact_check import lost_facts as lost_details
from rockmem_mcp.consolidation.shapes import (
    DreamPlan,
    DreamProcedure,
    DreamReport,
    EntityMergeInput,
    PlanArchive,
    PlanCreate,
    PlanMerge,
    PlanUpdate,
)
from rockmem_mcp.consolidation.templates import Templates
from rockmem_mcp.conversation.service import conversation_log
from rockmem_mcp.errors import InvalidInputError, NotFoundError
from rockmem_mcp.graph.service import GraphService
from rockmem_mcp.graph.shapes import EntityInput, TripleInput
from rockmem_mcp.memory.service import MemoryService
from rockmem_mcp.models import ConversationTurn, MemoryEntry
from rockmem_mcp.storage.access_log import Access
from rockmem_mcp.vector_worker import Embedder
from tests.unit.helpers import T0, FakeClock, FakeProvider, Services

PASSES = ("consolidation", "preferences", "anti-patterns", "entities", "graph", "episodes")
ALLOWED = {
    "consolidation": {"merges", "archives", "updates"},
    "preferences": {"creates"},
    "anti-patterns": {"creates"},
    "entities": {"entities", "triples"},
    "graph": {"entity_merges", "drop_triples"},
    "episodes": {"creates", "entities", "triples", "procedures"},
}
FIELDS = (
    *("merges", "archives", "updates", "creates", "entities", "triples", "entity_merges", "drop_triples"),
    "procedures",
)
DAY = timedelta(days=1)


# ---------------------------------------------------------------------------------------------- fixtures, helpers
@pytest.fixture
def graph(settings: Settings, clock: FakeClock) -> Iterator[GraphService]:
    opened = GraphService(settings, clock=clock)
    yield opened
    opened.close()


@pytest.fixture
def dreamer(service: MemoryService, graph: GraphService, settings: Settings, clock: FakeClock) -> Dreamer:
    return Dreamer(service, graph, settings, Templates(settings.prompts_dir), clock)


def seed(memory: MemoryService, content: str, **fields: Any) -> MemoryEntry:
    """Save one entry with chosen fields (times, importance, reinforcement, archive state)."""
    entry = memory.prepare_entry({"content": content, **fields})
    memory.save_many([entry])
    return entry


def files(settings: Settings) -> dict[str, bytes]:
    """Every entry file's bytes by entry id (temp files excluded)."""
    found: dict[str, bytes] = {}
    for path in settings.memory_dir.rglob("*.json"):
        if not path.name.startswith("."):
            assert path.stem not in found, f"two files for {path.stem}"
            found[path.stem] = path.read_bytes()
    return found


def report_file(settings: Settings, report: DreamReport) -> DreamReport:
    return DreamReport.model_validate_json((settings.dream_reports_dir / f"{report.id}.json").read_bytes())


def kinds(actions: list) -> list[str]:
    return [a.action for a in actions]


def protected_fields(pinned: bool = False, reinforcement: int = 1) -> dict[str, Any]:
    return {"pinned": pinned, "reinforcement_count": reinforcement}


# ---------------------------------------------------------------------------------------------- pure helpers
def test_details_are_numbers_and_proper_nouns_not_common_words() -> None:
    found = details("The user met Alice in Berlin on 2024-05-01 at 10:00 and paid 3.5 euros")
    assert {"alice", "berlin", "10:00", "3.5"} <= found
    assert "the" not in found and "user" not in found and "euros" not in found
    assert details("the user prefers dark mode") == set()


def test_lost_details_names_what_a_merged_text_drops() -> None:
    sources = ["Alice deploys Falcon on Tuesdays", "deploys happen at 10:00 with 3 reviewers"]
    assert lost_details(sources, "ALICE deploys FALCON on tuesdays at 10:00 with 3 reviewers") == []
    assert lost_details(sources, "Alice deploys on Tuesdays at 10:00 with 3 reviewers") == ["falcon"]
    assert lost_details(sources, "Alice deploys Falcon on Tuesdays at 10 with 3 reviewers") == ["10:00"]
    # whole words only: 'Falconer' does not keep 'Falcon', '13' does not keep '3'
    assert set(lost_details(sources, "Alice deploys Falconer on Tuesdays at 10:00 with 13 reviewers")) == {
        "3",
        "falcon",
    }
    assert lost_details([], "anything") == []


@pytest.mark.parametrize(
    ("importance", "pinned", "reinforcement", "expected"),
    [(0.79, False, 4, False), (0.95, False, 1, False), (1.0, False, 1, False), (0.1, True, 1, True),
     (0.1, False, 5, True), (0.5, False, 9, True), (0.0, False, 1, False)],
)  # fmt: skip
def test_protected_is_pinned_or_used_at_least_5_times_not_a_high_importance(
    service: MemoryService, importance: float, pinned: bool, reinforcement: int, expected: bool
) -> None:
    entry = service.prepare_entry({"content": "x", "importance": importance, **protected_fields(pinned, reinforcement)})
    assert protected(entry) is expected


# ---------------------------------------------------------------------------------------------- consolidation: merges
def test_a_merge_archives_every_source_superseded_by_the_merged_memory(
    dreamer: Dreamer, service: MemoryService
) -> None:
    a = seed(service, "the user drinks green tea", category="user-preferences")
    b = seed(service, "the user drinks tea every morning", category="user-preferences")
    c = seed(service, "green tea, mornings", category="notes")
    plan = DreamPlan(merges=[PlanMerge(ids=[a.id, b.id, c.id], content="the user drinks green tea every morning")])
    report = dreamer.apply(plan, "consolidation")
    assert kinds(report.applied) == ["merge"] and report.rejected == []
    action = report.applied[0]
    assert action.ids == [a.id, b.id, c.id] and action.result_id
    merged = service.get(action.result_id)
    assert not merged.archived and merged.content == "the user drinks green tea every morning"
    for source in (a, b, c):
        after = service.get(source.id)  # archived, never deleted
        assert after.archived and after.superseded_by == merged.id
        assert after.archive_reason == f"merged into {merged.id}"
        assert after.content == source.content
    live = [e.id for e in service.iter_entries() if not e.archived]
    assert live == [merged.id]
    assert service.search("green tea").results[0].entry.id == merged.id


def test_a_plan_s_merges_are_written_in_batches_and_only_the_one_whose_source_changed_is_skipped(
    dreamer: Dreamer, service: MemoryService, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    pairs = [
        (seed(service, f"fact {n} about the falcon deploy"), seed(service, f"Fact {n} about the falcon deploy."))
        for n in range(dream_module.MERGE_BATCH + 5)  # two batches
    ]
    changed = pairs[7][1]
    other = MemoryService(settings)  # another process edits one source after the run read it

    def edit_at(point: str) -> None:
        if point == "planned":
            other.update(changed.id, content="Fact 7 about the falcon deploy, moved to Friday")

    monkeypatch.setattr(dream_module, "checkpoint", edit_at)
    try:
        plan = DreamPlan(merges=[PlanMerge(ids=[a.id, b.id], content=a.content) for a, b in pairs])
        report = dreamer.apply(plan, "consolidation")
    finally:
        other.close()
    assert len(report.applied) == len(pairs) - 1
    assert [r.ids for r in report.rejected] == [[pairs[7][0].id, changed.id]]
    assert "changed since the dream read it" in report.rejected[0].reason
    assert service.get(changed.id).content.endswith("moved to Friday") and not service.get(changed.id).archived
    assert not service.get(pairs[7][0].id).archived  # its merge was skipped whole
    merged_ids = {action.result_id for action in report.applied}
    for a, b in pairs[:7] + pairs[8:]:
        assert service.get(a.id).superseded_by == service.get(b.id).superseded_by in merged_ids
    lines = (settings.meta_dir / "audit.log").read_text().splitlines()
    assert sum("| MERGE |" in line for line in lines) == len(pairs) - 1
    assert sum("| ARCHIVE |" in line for line in lines) == 2 * (len(pairs) - 1)


def test_merge_arithmetic_earliest_created_latest_seen_summed_reinforcement_highest_importance(
    dreamer: Dreamer, service: MemoryService
) -> None:
    a = seed(
        service,
        "Alice likes tea",
        category="people/alice",
        tags=["tea", "alice"],
        metadata={"origin": "a", "shared": "from-a"},
        importance=0.3,
        reinforcement_count=2,
        created_at=T0 - 10 * DAY,
        last_seen_at=T0 - 9 * DAY,
    )
    b = seed(
        service,
        "Alice drinks tea daily",
        category="notes",
        tags=["Tea", "daily"],
        metadata={"other": "b", "shared": "from-b"},
        importance=0.7,
        reinforcement_count=1,
        created_at=T0 - 20 * DAY,
        last_seen_at=T0 - 2 * DAY,
    )
    c = seed(
        service, "tea for Alice", importance=0.5, reinforcement_count=3, created_at=T0 - 5 * DAY,
        last_seen_at=T0 - 4 * DAY,
    )  # fmt: skip
    service.reinforce([c.id])  # a use in the access log (not yet in c's file) counts in the merge too
    used_at = service.get(c.id).last_seen_at
    assert used_at > T0
    report = dreamer.apply(
        DreamPlan(merges=[PlanMerge(ids=[a.id, b.id, c.id], content="Alice drinks tea daily")]), "consolidation"
    )
    merged = service.get(report.applied[0].result_id)
    assert merged.created_at == T0 - 20 * DAY
    assert merged.last_seen_at == used_at
    assert merged.reinforcement_count == 2 + 1 + (3 + 1)
    assert merged.importance == 0.7
    assert merged.category == "people/alice"  # the first source's, when the plan names none
    assert merged.tags == ["tea", "alice", "daily"]  # the sources' tags together, once each
    assert merged.metadata["origin"] == "a" and merged.metadata["other"] == "b"
    assert merged.metadata["shared"] == "from-a"
    assert merged.metadata["merged_from"] == f"{a.id},{b.id},{c.id}"


def test_merge_takes_the_plans_category_and_tags(dreamer: Dreamer, service: MemoryService) -> None:
    a = seed(service, "the user uses vim", category="notes", tags=["x"])
    b = seed(service, "the user edits in vim", category="notes", tags=["y"])
    merge = PlanMerge(ids=[a.id, b.id], content="the user edits in vim", category="user-preferences/editor", tags=["e"])
    report = dreamer.apply(DreamPlan(merges=[merge]), "consolidation")
    merged = service.get(report.applied[0].result_id)
    assert merged.category == "user-preferences/editor" and merged.tags == ["e"]


@pytest.mark.parametrize(
    ("contents", "merged_text", "dropped"),
    [
        (["Alice deploys Falcon", "deploys happen on Tuesdays"], "deploys happen on Tuesdays", "alice"),
        (["the standup is at 9:30", "the standup is daily"], "the standup is daily", "9:30"),
        (["the budget is 1200 per month", "the budget is monthly"], "the budget is monthly", "1200"),
    ],
)
def test_a_merge_that_drops_a_proper_noun_or_a_number_is_rejected(
    dreamer: Dreamer, service: MemoryService, settings: Settings, contents: list[str], merged_text: str, dropped: str
) -> None:
    ids = [seed(service, text).id for text in contents]
    before = files(settings)
    report = dreamer.apply(DreamPlan(merges=[PlanMerge(ids=ids, content=merged_text)]), "consolidation")
    assert report.applied == [] and kinds(report.rejected) == ["merge"]
    assert dropped in report.rejected[0].reason and report.rejected[0].ids == ids
    assert files(settings) == before


@pytest.mark.parametrize(("pinned", "reinforcement"), [(True, 1), (True, 2), (True, 12)])
def test_a_merge_with_a_protected_source_is_rejected_and_leaves_it_byte_identical(
    dreamer: Dreamer, service: MemoryService, settings: Settings, pinned: bool, reinforcement: int
) -> None:
    keep = seed(service, "the user drinks tea", **protected_fields(pinned, reinforcement))
    other = seed(service, "the user drinks tea daily")
    before = files(settings)
    report = dreamer.apply(
        DreamPlan(merges=[PlanMerge(ids=[other.id, keep.id], content="the user drinks tea daily")]), "consolidation"
    )
    assert report.applied == [] and kinds(report.rejected) == ["merge"]
    assert keep.id in report.rejected[0].reason and "protected" in report.rejected[0].reason
    assert files(settings) == before


@pytest.mark.parametrize("uses", [5, 12])
def test_a_memory_in_use_may_be_merged_but_never_pruned(
    dreamer: Dreamer, service: MemoryService, settings: Settings, uses: int
) -> None:
    used = seed(service, "the user drinks tea", reinforcement_count=uses)
    other = seed(service, "the user drinks tea daily")
    before = files(settings)
    pruned = dreamer.apply(DreamPlan(archives=[PlanArchive(id=used.id, reason="noise")]), "consolidation")
    assert pruned.applied == [] and f"{used.id} was used {uses} times" in pruned.rejected[0].reason
    assert files(settings) == before
    merged = dreamer.apply(
        DreamPlan(merges=[PlanMerge(ids=[other.id, used.id], content="the user drinks tea daily")]), "consolidation"
    )
    assert kinds(merged.applied) == ["merge"]
    assert service.get(merged.applied[0].result_id).reinforcement_count == uses + 1  # the uses carry over


def test_a_merge_naming_an_unknown_or_archived_id_is_rejected_with_the_id(
    dreamer: Dreamer, service: MemoryService, settings: Settings
) -> None:
    a = seed(service, "the user drinks tea")
    gone = seed(service, "the user drank tea", archived_at=T0 - DAY, archive_reason="old")
    before = files(settings)
    plan = DreamPlan(
        merges=[
            PlanMerge(ids=[a.id, "nosuchid0001"], content="the user drinks tea"),
            PlanMerge(ids=[a.id, gone.id], content="the user drinks tea"),
            PlanMerge(ids=[a.id, "../../etc/passwd"], content="the user drinks tea"),
        ]
    )
    report = dreamer.apply(plan, "consolidation")
    assert report.applied == [] and kinds(report.rejected) == ["merge"] * 3
    assert "nosuchid0001" in report.rejected[0].reason and "unknown" in report.rejected[0].reason
    assert gone.id in report.rejected[1].reason
    assert "../../etc/passwd" in report.rejected[2].reason
    assert files(settings) == before


def test_a_merge_of_one_distinct_memory_is_rejected(dreamer: Dreamer, service: MemoryService) -> None:
    a = seed(service, "the user drinks tea")
    report = dreamer.apply(DreamPlan(merges=[PlanMerge(ids=[a.id, a.id], content="tea")]), "consolidation")
    assert report.applied == [] and report.rejected[0].ids == [a.id]
    assert not service.get(a.id).archived


def test_a_merge_with_an_invalid_category_is_rejected_without_archiving(
    dreamer: Dreamer, service: MemoryService, settings: Settings
) -> None:
    a, b = seed(service, "the user drinks tea"), seed(service, "the user likes tea")
    before = files(settings)
    merge = PlanMerge(ids=[a.id, b.id], content="the user likes and drinks tea", category="../outside")
    report = dreamer.apply(DreamPlan(merges=[merge]), "consolidation")
    assert report.applied == [] and kinds(report.rejected) == ["merge"]
    assert files(settings) == before


# ---------------------------------------------------------------------------------------------- one action per memory
def test_one_memory_is_changed_by_at_most_one_action_of_a_plan(
    dreamer: Dreamer, service: MemoryService, settings: Settings
) -> None:
    a, b, c = (seed(service, f"the user note number {n}") for n in (1, 2, 3))
    plan = DreamPlan(
        merges=[
            PlanMerge(ids=[a.id, b.id], content="the user note number 1 and number 2"),
            PlanMerge(ids=[b.id, c.id], content="the user note number 2 and number 3"),
        ],
        archives=[PlanArchive(id=a.id, reason="noise"), PlanArchive(id=c.id, reason="stale")],
        updates=[PlanUpdate(id=b.id, category="notes"), PlanUpdate(id=c.id, tags=["t"])],
    )
    report = dreamer.apply(plan, "consolidation")
    assert kinds(report.applied) == ["merge", "archive"]
    assert [x.ids for x in report.applied] == [[a.id, b.id], [c.id]]
    assert kinds(report.rejected) == ["merge", "archive", "update", "update"]
    assert all("already changed" in x.reason for x in report.rejected)
    assert len(report.applied) + len(report.rejected) == 6
    assert service.get(c.id).tags == [] and service.get(c.id).archive_reason == "dream: stale"
    touched = [i for x in report.applied for i in x.ids]
    assert len(touched) == len(set(touched))


# ---------------------------------------------------------------------------------------------- consolidation: archives
def test_an_archive_keeps_the_memory_on_disk_with_the_reason(
    dreamer: Dreamer, service: MemoryService, settings: Settings
) -> None:
    a = seed(service, "ok thanks", category="notes")
    report = dreamer.apply(DreamPlan(archives=[PlanArchive(id=a.id, reason="small talk")]), "consolidation")
    assert kinds(report.applied) == ["archive"] and report.applied[0].ids == [a.id]
    after = service.get(a.id)
    assert after.archived and after.archive_reason == "dream: small talk" and after.superseded_by is None
    assert a.id in files(settings)
    assert service.search("thanks").results == []
    no_reason = seed(service, "fine")
    dreamer.apply(DreamPlan(archives=[PlanArchive(id=no_reason.id)]), "consolidation")
    assert service.get(no_reason.id).archive_reason.startswith("dream:")


@pytest.mark.parametrize(("pinned", "reinforcement"), [(True, 1), (False, 5)])
def test_a_protected_memory_is_never_archived(
    dreamer: Dreamer, service: MemoryService, settings: Settings, pinned: bool, reinforcement: int
) -> None:
    a = seed(service, "the user is allergic to peanuts", **protected_fields(pinned, reinforcement))
    before = files(settings)
    report = dreamer.apply(DreamPlan(archives=[PlanArchive(id=a.id, reason="stale")]), "consolidation")
    assert report.applied == [] and "protected" in report.rejected[0].reason
    assert files(settings) == before


def test_archiving_an_unknown_or_archived_id_is_rejected(
    dreamer: Dreamer, service: MemoryService, settings: Settings
) -> None:
    gone = seed(service, "old", archived_at=T0 - DAY)
    before = files(settings)
    report = dreamer.apply(
        DreamPlan(archives=[PlanArchive(id="deadbeef0000"), PlanArchive(id=gone.id), PlanArchive(id="bad id!")]),
        "consolidation",
    )
    assert report.applied == [] and [x.ids for x in report.rejected] == [["deadbeef0000"], [gone.id], ["bad id!"]]
    assert all("unknown" in x.reason for x in report.rejected)
    assert files(settings) == before


# ---------------------------------------------------------------------------------------------- consolidation: updates
def test_an_update_changes_category_and_tags_only(dreamer: Dreamer, service: MemoryService) -> None:
    a = seed(service, "the user edits in vim", category="notes", tags=["old"], importance=0.4)
    report = dreamer.apply(
        DreamPlan(updates=[PlanUpdate(id=a.id, category="user-preferences/editor", tags=["vim", "editor"])]),
        "consolidation",
    )
    assert kinds(report.applied) == ["update"]
    after = service.get(a.id)
    assert after.category == "user-preferences/editor" and after.tags == ["vim", "editor"]
    assert (after.content, after.importance, after.created_at) == (a.content, a.importance, a.created_at)
    only_tags = dreamer.apply(DreamPlan(updates=[PlanUpdate(id=a.id, tags=["vim"])]), "consolidation")
    assert kinds(only_tags.applied) == ["update"]
    assert service.get(a.id).category == "user-preferences/editor" and service.get(a.id).tags == ["vim"]


def test_updates_that_cannot_apply_are_rejected(dreamer: Dreamer, service: MemoryService, settings: Settings) -> None:
    kept = seed(service, "the user is allergic to peanuts", pinned=True)
    plain = seed(service, "the user edits in vim", category="notes")
    gone = seed(service, "old", archived_at=T0 - DAY)
    before = files(settings)
    plan = DreamPlan(
        updates=[
            PlanUpdate(id=kept.id, category="health"),  # protected
            PlanUpdate(id=plain.id),  # nothing to change
            PlanUpdate(id="cafecafe0000", category="notes"),  # unknown
            PlanUpdate(id=gone.id, category="notes"),  # archived
        ]
    )
    report = dreamer.apply(plan, "consolidation")
    assert report.applied == [] and len(report.rejected) == 4
    assert "protected" in report.rejected[0].reason
    assert "unknown" in report.rejected[2].reason and "unknown" in report.rejected[3].reason
    assert files(settings) == before
    bad = dreamer.apply(DreamPlan(updates=[PlanUpdate(id=plain.id, category="../x")]), "consolidation")
    assert bad.applied == [] and kinds(bad.rejected) == ["update"]
    assert files(settings) == before


# ---------------------------------------------------------------------------------------------- each pass its own kind
@pytest.mark.parametrize("dream_pass", PASSES)
def test_a_pass_may_only_do_its_own_kind_of_change(
    dreamer: Dreamer, service: MemoryService, graph: GraphService, settings: Settings, dream_pass: str
) -> None:
    a = seed(service, "the user drinks tea")
    b = seed(service, "the user drinks tea daily")
    graph.add_triples([{"subject": "Alice", "predicate": "knows", "object": "Bob", "confidence": 0.2}])
    triple = graph.weakest_facts(1)[0]
    episode = dreamer.episodes.record("Shipped the release with make ship after the tests passed", type="task")
    plan = DreamPlan(
        merges=[PlanMerge(ids=[a.id, b.id], content="the user drinks tea daily")],
        archives=[PlanArchive(id=a.id)],
        updates=[PlanUpdate(id=b.id, category="drinks")],
        creates=[
            PlanCreate(content="Don't run tests on the shared box for speed — instead use the CI runner"),
            PlanCreate(content="Releases ship with make ship", source_episodes=[episode.id]),  # episodes only
        ],
        entities=[EntityInput(name="Carol", type="person")],
        triples=[TripleInput(subject="Carol", predicate="manages", object="Alice")],
        entity_merges=[EntityMergeInput(keep="Alice", merge="Bob")],
        drop_triples=[triple.id],
        procedures=[DreamProcedure(name="ship", trigger=["ship"], steps=["make ship"], learned_from=[episode.id])],
    )
    report = dreamer.apply(plan, dream_pass, dry_run=True)
    refused = {x.action for x in report.rejected if x.ids == [] and "not part of" in x.reason}
    assert refused == set(FIELDS) - ALLOWED[dream_pass]
    for field in refused:
        assert any(x.action == field and dream_pass in x.reason for x in report.rejected)
    applied = set(kinds(report.applied))
    own = {
        "consolidation": {"merge"},  # the archive and update name memories the merge already took
        "preferences": {"create"},
        "anti-patterns": {"create"},
        "entities": {"entity", "triple"},
        "graph": {"entity_merge", "drop_triple"},
        "episodes": {"create", "entity", "triple", "procedure"},
    }[dream_pass]
    assert applied == own


def test_a_refused_kind_of_change_changes_nothing(
    dreamer: Dreamer, service: MemoryService, graph: GraphService, settings: Settings
) -> None:
    a = seed(service, "the user drinks tea")
    b = seed(service, "the user drinks tea daily")
    before = files(settings)
    report = dreamer.apply(
        DreamPlan(
            merges=[PlanMerge(ids=[a.id, b.id], content="the user drinks tea daily")],
            archives=[PlanArchive(id=a.id)],
            entities=[EntityInput(name="Carol")],
        ),
        "preferences",
    )
    assert report.applied == [] and {x.action for x in report.rejected} == {"merges", "archives", "entities"}
    assert report.rejected[0].reason == "1 merges are not part of the preferences pass"
    assert files(settings) == before and graph.stats() == {"entities": 0, "triples": 0}


def test_an_unknown_pass_is_refused(dreamer: Dreamer) -> None:
    with pytest.raises(InvalidInputError, match="unknown dream pass"):
        dreamer.apply(DreamPlan(), "nightmare")
    with pytest.raises(InvalidInputError, match="unknown dream pass"):
        dreamer.material("nightmare")


# ---------------------------------------------------------------------------------------------- preferences
def created(service: MemoryService, report: DreamReport) -> list[MemoryEntry]:
    return [service.get(x.result_id) for x in report.applied if x.action == "create"]


def test_a_preference_is_created_inferred_under_user_preferences(dreamer: Dreamer, service: MemoryService) -> None:
    report = dreamer.apply(
        DreamPlan(creates=[PlanCreate(content="The user prefers answers without emojis", importance=0.6)]),
        "preferences",
    )
    [entry] = created(service, report)
    assert entry.category == "user-preferences/inferred"
    assert "inferred" in entry.tags
    assert entry.metadata["source"] == "inferred" and "requires_user_permission" not in entry.metadata
    assert entry.importance == 0.5  # a derived entry's base (BASE_DERIVED): a plan's higher importance is capped


@pytest.mark.parametrize(("dream_pass", "content"), [
    ("preferences", "The user prefers short answers"),
    ("anti-patterns", "Don't retry a failed deploy blindly - instead read the log first"),
])  # fmt: skip
def test_dream_created_entries_get_the_derived_base_unless_a_lower_one(
    dreamer: Dreamer, service: MemoryService, dream_pass: str, content: str
) -> None:
    plain = dreamer.apply(DreamPlan(creates=[PlanCreate(content=content)]), dream_pass)
    lower = dreamer.apply(DreamPlan(creates=[PlanCreate(content=content + " please", importance=0.2)]), dream_pass)
    higher = dreamer.apply(DreamPlan(creates=[PlanCreate(content=content + " always", importance=1.0)]), dream_pass)
    assert [e.importance for r in (plain, lower, higher) for e in created(service, r)] == [0.5, 0.2, 0.5]


@pytest.mark.parametrize(
    ("category", "expected"),
    [
        (None, "user-preferences/inferred"),
        ("user-preferences/editor", "user-preferences/editor"),
        ("user-preferences/tools/shell", "user-preferences/tools/shell"),
        ("user-preferences", "user-preferences/inferred"),
        ("project-context/falcon", "user-preferences/inferred"),
        ("anti-patterns/general", "user-preferences/inferred"),
    ],
)
def test_a_preference_lands_in_user_preferences_inferred_or_narrower(
    dreamer: Dreamer, service: MemoryService, category: str | None, expected: str
) -> None:
    report = dreamer.apply(
        DreamPlan(creates=[PlanCreate(content="The user likes short answers", category=category, tags=["style"])]),
        "preferences",
    )
    [entry] = created(service, report)
    assert entry.category == expected
    assert entry.tags == ["style", "inferred"]


def test_a_preference_category_with_a_trailing_slash_still_lands_below_user_preferences(
    dreamer: Dreamer, service: MemoryService
) -> None:
    report = dreamer.apply(
        DreamPlan(creates=[PlanCreate(content="The user likes short answers", category="user-preferences/")]),
        "preferences",
    )
    [entry] = created(service, report)
    assert entry.category is not None and entry.category.startswith("user-preferences/")


@pytest.mark.parametrize(
    "content",
    [
        "The user keeps their password manager locked after 5 minutes",
        "The user's API key for the weather service lives in a vault",
        "The user banks with a credit union and checks the bank app daily",
        "The user wants invoices paid within 30 days",
        "The user's monthly cloud budget is $200",
        "The user connects to servers over SSH with ed25519 keys",
        "The user stores secrets in 1Password",
        "The user wants money transfers double-checked",
    ],
)
def test_a_preference_on_credentials_or_money_requires_the_users_permission(
    dreamer: Dreamer, service: MemoryService, content: str
) -> None:
    [entry] = created(service, dreamer.apply(DreamPlan(creates=[PlanCreate(content=content)]), "preferences"))
    assert entry.metadata["requires_user_permission"] == "true"
    assert entry.metadata["source"] == "inferred"


def test_a_preference_on_security_requires_the_users_permission(dreamer: Dreamer, service: MemoryService) -> None:
    content = "The user wants security updates and full-disk encryption enabled on every laptop"
    [entry] = created(service, dreamer.apply(DreamPlan(creates=[PlanCreate(content=content)]), "preferences"))
    assert entry.metadata.get("requires_user_permission") == "true"


def test_a_preference_already_remembered_is_not_created_again(dreamer: Dreamer, service: MemoryService) -> None:
    seed(service, "The user likes short answers", category="user-preferences/inferred")
    report = dreamer.apply(DreamPlan(creates=[PlanCreate(content="the user likes short answers ")]), "preferences")
    assert report.applied == [] and "already remembered" in report.rejected[0].reason
    assert sum(1 for _ in service.iter_entries()) == 1


def turn(day: date, text: str, role: str = "user") -> ConversationTurn:
    at = datetime(day.year, day.month, day.day, 12, tzinfo=T0.tzinfo)
    return ConversationTurn(session_id="chat-1", role=role, content=text, at=at)  # type: ignore[arg-type]


def test_the_preferences_pass_consumes_the_turns_it_read_today_included(
    dreamer: Dreamer, settings: Settings, clock: FakeClock
) -> None:
    log = conversation_log(settings)
    today, yesterday, older = T0.date(), T0.date() - DAY, T0.date() - 3 * DAY
    for day in (older, yesterday, today):
        log.append(turn(day, f"turn on {day}"), day)
    dreamer.apply(DreamPlan(), "preferences", dry_run=True)
    assert log.days() == [older, yesterday, today]
    for other in ("consolidation", "anti-patterns", "entities", "graph"):
        dreamer.apply(DreamPlan(), other)
    assert log.days() == [older, yesterday, today]
    dreamer.apply(DreamPlan(), "preferences")
    assert log.days() == []  # RockBot: cleared after the pass, whatever the model proposed (nothing here)


def test_turns_logged_after_the_agent_read_the_log_are_kept_for_the_next_pass(
    dreamer: Dreamer, settings: Settings
) -> None:
    log = conversation_log(settings)
    today = T0.date()
    log.append(turn(today, "No emojis, please"), today)
    assert dreamer.material("preferences").items == 1  # the agent reads the log to its end
    log.append(turn(today, "Answers in British English, please"), today)  # the user goes on meanwhile
    dreamer.apply(DreamPlan(creates=[PlanCreate(content="The user wants no emojis")]), "preferences")
    assert [t.content for t in log.read(today)] == ["Answers in British English, please"]
    assert dreamer.material("preferences").material == "1. [chat-1] user: Answers in British English, please"


def test_a_log_longer_than_a_batch_is_consumed_once_the_agent_has_read_every_batch(
    service: MemoryService, graph: GraphService, settings: Settings, clock: FakeClock
) -> None:
    small = settings.model_copy(update={"dream_batch_size": 2})
    dreamer = Dreamer(service, graph, small, Templates(small.prompts_dir), clock)
    log = conversation_log(small)
    for day, text in [(T0.date() - DAY, "one"), (T0.date() - DAY, "two"), (T0.date(), "three")]:
        log.append(turn(day, text), day)
    assert dreamer.material("preferences", 0).remaining == 1
    dreamer.apply(DreamPlan(), "preferences")  # a plan for the first batch: the rest is still unread
    assert [t.content for day in log.days() for t in log.read(day)] == ["one", "two", "three"]
    assert dreamer.material("preferences", 2).items == 1
    dreamer.apply(DreamPlan(), "preferences")
    assert log.days() == []


# ---------------------------------------------------------------------------------------------- anti-patterns
@pytest.mark.parametrize(
    ("category", "expected"),
    [(None, "anti-patterns/general"), ("anti-patterns/git", "anti-patterns/git"), ("notes", "anti-patterns/general")],
)
def test_an_anti_pattern_is_created_under_anti_patterns(
    dreamer: Dreamer, service: MemoryService, category: str | None, expected: str
) -> None:
    content = "Don't force-push to main for quick fixes — instead open a pull request"
    report = dreamer.apply(DreamPlan(creates=[PlanCreate(content=content, category=category)]), "anti-patterns")
    [entry] = created(service, report)
    assert entry.category == expected and entry.content == content
    assert entry.metadata["source"] == "dream" and "inferred" not in entry.tags
    assert entry.tags == ["anti-pattern"]  # RockBot's tag for them


def test_an_anti_pattern_keeps_its_own_tags_and_gets_the_anti_pattern_tag(
    dreamer: Dreamer, service: MemoryService
) -> None:
    content = "Don't run the full suite for a docs change — instead run the docs tests"
    plan = DreamPlan(creates=[PlanCreate(content=content, tags=["testing", "Anti-Pattern"])])
    [entry] = created(service, dreamer.apply(plan, "anti-patterns"))
    assert entry.tags == ["testing", "Anti-Pattern"]  # already tagged (case aside): not twice


@pytest.mark.parametrize(
    "content",
    [
        "Don't guess file paths for edits — instead list the directory first",
        "do not retry a failing tool more than twice for flaky errors; instead report it",
        "Never answer with emojis for this user, instead use plain text",
    ],
)
def test_anti_patterns_in_the_dont_instead_form_are_accepted(
    dreamer: Dreamer, service: MemoryService, content: str
) -> None:
    report = dreamer.apply(DreamPlan(creates=[PlanCreate(content=content)]), "anti-patterns")
    assert kinds(report.applied) == ["create"] and report.rejected == []


@pytest.mark.parametrize(
    "content",
    [
        "Always open a pull request instead of force-pushing",  # not a "don't"
        "Don't force-push to main",  # no "instead"
        "Force-pushing is bad — instead open a pull request",
        "The user dislikes force pushes",
    ],
)
def test_anti_patterns_not_in_the_dont_instead_form_are_rejected(
    dreamer: Dreamer, service: MemoryService, settings: Settings, content: str
) -> None:
    report = dreamer.apply(DreamPlan(creates=[PlanCreate(content=content)]), "anti-patterns")
    assert report.applied == [] and kinds(report.rejected) == ["create"]
    assert "Don't X for Y" in report.rejected[0].reason
    assert files(settings) == {}


# ------------------------------------------------------------------------------------------ entities and graph passes
def test_the_entities_pass_adds_entities_and_triples(dreamer: Dreamer, graph: GraphService) -> None:
    plan = DreamPlan(
        entities=[EntityInput(name="Alice", type="person", aliases=["Al"]), EntityInput(name="Falcon", type="project")],
        triples=[
            TripleInput(subject="Alice", predicate="works on", object="Falcon", confidence=0.9),
            TripleInput(subject="Falcon", predicate="knows", object="Falcon"),  # an entity to itself
        ],
    )
    report = dreamer.apply(plan, "entities")
    assert kinds(report.applied) == ["entity", "entity", "triple"] and kinds(report.rejected) == ["triple"]
    alice = graph.resolve("Al")
    assert alice.name == "Alice" and alice.type == "person"
    assert report.applied[0].ids == [alice.id]
    fact = graph.fact(report.applied[2].ids[0])
    assert (fact.subject, fact.predicate, fact.object, fact.confidence) == ("Alice", "works_on", "Falcon", 0.9)


def test_the_graph_pass_merges_entities_and_drops_triples(dreamer: Dreamer, graph: GraphService) -> None:
    graph.add_entities([{"name": "Robert", "type": "person"}, {"name": "Bob"}])
    graph.add_triples(
        [
            {"subject": "Bob", "predicate": "works on", "object": "Falcon"},
            {"subject": "Robert", "predicate": "lives in", "object": "Berlin", "confidence": 0.1},
        ]
    )
    robert, bob = graph.resolve("Robert"), graph.resolve("Bob")
    weak = graph.weakest_facts(1)[0]
    plan = DreamPlan(
        entity_merges=[
            EntityMergeInput(keep="Robert", merge="Bob", reason="same person"),
            EntityMergeInput(keep="Robert", merge="Nobody"),
        ],
        drop_triples=[weak.id, "nosuchtriple"],
    )
    report = dreamer.apply(plan, "graph")
    assert kinds(report.applied) == ["entity_merge", "drop_triple"]
    assert report.applied[0].ids == [robert.id, bob.id] and report.applied[0].reason == "same person"
    assert kinds(report.rejected) == ["entity_merge", "drop_triple"]
    assert report.rejected[1].ids == ["nosuchtriple"]
    assert graph.resolve("Bob").id == robert.id
    with pytest.raises(NotFoundError):
        graph.fact(weak.id)
    assert [f.object for f in graph.get_entity("Robert").facts] == ["Falcon"]


def test_graph_passes_on_a_dry_run_change_nothing(dreamer: Dreamer, graph: GraphService) -> None:
    graph.add_triples([{"subject": "Bob", "predicate": "knows", "object": "Alice", "confidence": 0.1}])
    weak = graph.weakest_facts(1)[0]
    before = (graph.stats(), graph.get_entity("Bob"))
    report = dreamer.apply(
        DreamPlan(entity_merges=[EntityMergeInput(keep="Alice", merge="Bob")], drop_triples=[weak.id]),
        "graph",
        dry_run=True,
    )
    assert kinds(report.applied) == ["entity_merge", "drop_triple"] and report.dry_run
    report = dreamer.apply(
        DreamPlan(
            entities=[EntityInput(name="Carol")], triples=[TripleInput(subject="Carol", predicate="x", object="Dan")]
        ),
        "entities",
        dry_run=True,
    )
    assert kinds(report.applied) == ["entity", "triple"]
    assert (graph.stats(), graph.get_entity("Bob")) == before


def outcome(report: DreamReport) -> tuple[list[str], list[str]]:
    return kinds(report.applied), kinds(report.rejected)


def test_a_dry_run_of_the_entities_pass_predicts_the_real_run(dreamer: Dreamer, graph: GraphService) -> None:
    plan = DreamPlan(
        entities=[EntityInput(name="Alice"), EntityInput(name="   ")],  # a blank name is refused
        triples=[TripleInput(subject="Alice", predicate="knows", object="alice")],  # one entity to itself
    )
    dry = dreamer.apply(plan, "entities", dry_run=True)
    real = dreamer.apply(plan, "entities")
    assert outcome(real) == (["entity"], ["entity", "triple"])
    assert outcome(dry) == outcome(real)


def test_a_dry_run_of_the_graph_pass_predicts_the_real_run(dreamer: Dreamer, graph: GraphService) -> None:
    graph.add_triples([{"subject": "Bob", "predicate": "knows", "object": "Alice", "confidence": 0.1}])
    weak = graph.weakest_facts(1)[0]
    plan = DreamPlan(
        entity_merges=[EntityMergeInput(keep="Alice", merge="alice")],  # the same entity twice
        drop_triples=[weak.id, weak.id],  # the second finds nothing left to drop
    )
    dry = dreamer.apply(plan, "graph", dry_run=True)
    real = dreamer.apply(plan, "graph")
    assert outcome(real) == (["drop_triple"], ["entity_merge", "drop_triple"])
    assert outcome(dry) == outcome(real)


# ---------------------------------------------------------------------------------------------- dry runs
def test_a_consolidation_dry_run_changes_nothing_but_reports_what_would_change(
    dreamer: Dreamer, service: MemoryService, settings: Settings
) -> None:
    a, b = seed(service, "the user drinks tea"), seed(service, "the user drinks tea daily")
    c, d = seed(service, "ok"), seed(service, "the user uses vim", category="notes")
    plan = DreamPlan(
        merges=[PlanMerge(ids=[a.id, b.id], content="the user drinks tea daily")],
        archives=[PlanArchive(id=c.id, reason="noise"), PlanArchive(id="nosuchid")],
        updates=[PlanUpdate(id=d.id, category="user-preferences/editor")],
    )
    before = files(settings)
    dry = dreamer.apply(plan, "consolidation", dry_run=True)
    assert files(settings) == before
    assert dry.dry_run and kinds(dry.applied) == ["merge", "archive", "update"] and kinds(dry.rejected) == ["archive"]
    assert dry.applied[0].result_id and "would apply" in dry.summary
    assert report_file(settings, dry) == dry
    real = dreamer.apply(plan, "consolidation")
    strip = [(x.action, x.ids, x.reason) for x in dry.applied + dry.rejected]
    assert strip == [(x.action, x.ids, x.reason) for x in real.applied + real.rejected]
    assert service.get(a.id).archived and service.get(d.id).category == "user-preferences/editor"


def test_a_dry_run_of_an_update_with_bad_tags_predicts_the_real_run(dreamer: Dreamer, service: MemoryService) -> None:
    a = seed(service, "the user uses vim")
    plan = DreamPlan(updates=[PlanUpdate(id=a.id, tags=["fine", "bell\x07tag"])])  # control characters are refused
    dry = dreamer.apply(plan, "consolidation", dry_run=True)
    real = dreamer.apply(plan, "consolidation")
    assert outcome(real) == ([], ["update"])
    assert outcome(dry) == outcome(real)


def test_a_dry_run_create_changes_nothing(dreamer: Dreamer, service: MemoryService, settings: Settings) -> None:
    report = dreamer.apply(DreamPlan(creates=[PlanCreate(content="The user likes tea")]), "preferences", dry_run=True)
    assert kinds(report.applied) == ["create"] and report.applied[0].result_id
    assert files(settings) == {}
    with pytest.raises(NotFoundError):
        service.get(report.applied[0].result_id)


# ---------------------------------------------------------------------------------------------- reports
def test_every_run_writes_its_report(dreamer: Dreamer, service: MemoryService, settings: Settings) -> None:
    assert dreamer.reports() == []
    with pytest.raises(InvalidInputError, match="no dream report yet"):
        dreamer.report()
    first = dreamer.apply(DreamPlan(), "consolidation", dry_run=True)
    second = dreamer.run_deterministic()
    third = dreamer.apply(DreamPlan(archives=[PlanArchive(id="nosuchid")]), "graph", mode="agent")
    assert dreamer.reports() == [first.id, second.id, third.id]  # oldest first
    for report in (first, second, third):
        path = settings.dream_reports_dir / f"{report.id}.json"
        assert json.loads(path.read_bytes())["id"] == report.id
        assert dreamer.report(report.id) == report
        assert report.finished_at is not None and report.finished_at >= report.started_at
    assert dreamer.report() == third
    assert second.mode == "deterministic" and second.dream_pass == "deterministic" and not second.dry_run
    assert third.summary.startswith("graph (agent):") and "1 rejected" in third.summary
    with pytest.raises(InvalidInputError, match="nosuch"):
        dreamer.report("nosuch")
    with pytest.raises(InvalidInputError):
        dreamer.report("../../memory/x")


def test_the_summary_counts_what_was_applied(dreamer: Dreamer, service: MemoryService) -> None:
    a, b, c = seed(service, "x one"), seed(service, "x two"), seed(service, "ok")
    report = dreamer.apply(
        DreamPlan(archives=[PlanArchive(id=a.id), PlanArchive(id=b.id)], updates=[PlanUpdate(id=c.id, tags=["t"])]),
        "consolidation",
    )
    assert report.summary == "consolidation (agent): applied 2 archive, 1 update; 0 rejected"
    empty = dreamer.apply(DreamPlan(), "consolidation", dry_run=True)
    assert empty.summary == "consolidation (agent): would apply no changes; 0 rejected"


def test_problems_met_while_planning_are_reported(dreamer: Dreamer) -> None:
    report = dreamer.apply(DreamPlan(), "consolidation", mode="llm", problems=["the model timed out"])
    assert [(x.action, x.reason) for x in report.rejected] == [("plan", "the model timed out")]
    assert report.mode == "llm"


# ---------------------------------------------------------------------------------------------- schedule and lock
def test_last_run_and_due_follow_real_runs_with_a_fake_clock(dreamer: Dreamer, clock: FakeClock) -> None:
    assert dreamer.last_run() is None and dreamer.due()
    dreamer.run_deterministic(dry_run=True)
    assert dreamer.last_run() is None and dreamer.due()  # a dry run does not count
    report = dreamer.run_deterministic()
    assert dreamer.last_run() == report.finished_at
    assert not dreamer.due()
    clock.now = report.finished_at + timedelta(hours=5, minutes=59)
    assert not dreamer.due()
    clock.now = report.finished_at + timedelta(hours=6)
    assert dreamer.due()
    dreamer.apply(DreamPlan(), "consolidation", dry_run=True)  # a later dry run leaves the last real run
    assert dreamer.last_run() == report.finished_at


def test_an_unreadable_report_is_skipped_by_last_run(dreamer: Dreamer, settings: Settings, clock: FakeClock) -> None:
    report = dreamer.run_deterministic()
    (settings.dream_reports_dir / "29990101T000000000000Z.json").write_text("{not json")
    assert dreamer.last_run() == report.finished_at


def test_two_dreams_never_overlap(
    dreamer: Dreamer, services: Services, settings: Settings, clock: FakeClock, service: MemoryService
) -> None:
    a = seed(service, "ok")
    other_memory = services.open(clock=clock)
    other_graph = GraphService(settings, clock=clock)
    try:
        other = Dreamer(other_memory, other_graph, settings, Templates(settings.prompts_dir), clock)
        with dreamer.locked():
            with pytest.raises(DreamBusy):
                other.apply(DreamPlan(archives=[PlanArchive(id=a.id)]), "consolidation")
            with pytest.raises(DreamBusy):
                other.run_deterministic()
            with pytest.raises(DreamBusy), other.locked():
                pass
            with pytest.raises(DreamBusy):  # the lock is not re-entrant: one dream at a time, even in one process
                dreamer.apply(DreamPlan(), "consolidation")
        assert dreamer.reports() == [] and not service.get(a.id).archived
        report = other.apply(DreamPlan(archives=[PlanArchive(id=a.id)]), "consolidation")
        assert kinds(report.applied) == ["archive"] and service.get(a.id).archived
        with other.locked(), pytest.raises(DreamBusy):
            dreamer.run_deterministic()
        dreamer.run_deterministic()
    finally:
        other_graph.close()


# ---------------------------------------------------------------------------------------------- deterministic pass
def test_exact_duplicates_are_merged(dreamer: Dreamer, service: MemoryService, clock: FakeClock) -> None:
    a = seed(service, "The user drinks green tea", created_at=T0 - 3 * DAY, reinforcement_count=2, importance=0.4)
    b = seed(service, "the user  drinks GREEN tea ", created_at=T0 - 2 * DAY, importance=0.6)
    other = seed(service, "the user edits in vim on Linux")
    report = dreamer.run_deterministic()
    [merge] = [x for x in report.applied if x.action == "merge"]
    assert merge.ids == [a.id, b.id]  # oldest first
    merged = service.get(merge.result_id)
    assert merged.reinforcement_count == 3 and merged.importance == 0.6 and merged.created_at == a.created_at
    assert all(service.get(i).superseded_by == merged.id and service.get(i).archived for i in (a.id, b.id))
    assert not service.get(other.id).archived


def test_near_duplicates_by_word_overlap_are_merged_and_different_memories_kept(
    dreamer: Dreamer, service: MemoryService
) -> None:
    assert not service.embedder.configured
    a = seed(service, "the user drinks green tea every morning before work")
    b = seed(service, "every morning before work, the user drinks green tea")
    c = seed(service, "the user drinks black coffee every evening after dinner")
    d = seed(service, "the user drinks green tea every evening after dinner")  # overlap 0.5 with a
    report = dreamer.run_deterministic()
    [merge] = [x for x in report.applied if x.action == "merge"]
    assert set(merge.ids) == {a.id, b.id}
    assert not service.get(c.id).archived and not service.get(d.id).archived
    assert dropped_details([a.content, b.content], service.get(merge.result_id).content) == []


CONTRADICTIONS = [
    ("Bob is allergic to peanuts", "Bob is not allergic to peanuts"),
    ("The user wants emails about releases", "The user never wants emails about releases"),
]


@pytest.mark.parametrize("embeddings", [False, True], ids=["word-overlap", "embeddings"])
def test_contradicting_memories_are_reported_never_merged(
    services: Services, graph: GraphService, settings: Settings, clock: FakeClock, embeddings: bool
) -> None:
    """Word sets drop "not" and "never" as stopwords and embeddings barely see them: without a check, each of
    these pairs was a near-duplicate and merged into one text that kept only one of the two polarities."""
    embedder = Embedder(settings.model_copy(update={"embedding_model": "given"}), opener=lambda _: FakeProvider())
    service = services.open(clock=clock, embedder=embedder if embeddings else None, embed_in_background=False)
    pairs = [(seed(service, a), seed(service, b)) for a, b in CONTRADICTIONS]
    twins = (
        seed(service, "the user drinks green tea every morning"),
        seed(service, "every morning the user drinks green tea"),
    )
    if embeddings:
        service.vector_worker.drain()
        ids, matrix = service.vectors_for([e.id for pair in pairs for e in pair]) or ([], None)
        assert len(ids) == 4 and all(float(matrix[i] @ matrix[i + 1]) >= 0.88 for i in (0, 2))  # near-duplicates
    dreamer = Dreamer(service, graph, settings, Templates(settings.prompts_dir), clock)
    report = dreamer.run_deterministic()
    assert [x.ids for x in report.applied if x.action == "merge"] == [[e.id for e in twins]]
    assert sorted(x.ids for x in report.contradictions) == sorted([a.id, b.id] for a, b in pairs)
    assert {x.reason for x in report.contradictions} == {
        "one negates what the other affirms: allerg",
        "one negates what the other affirms: want",
    }
    assert "2 contradictions to resolve" in report.summary
    assert report_file(settings, report).contradictions == report.contradictions
    for a, b in pairs:
        assert service.get(a.id) == a and service.get(b.id) == b


def test_a_merge_that_drops_a_negation_a_date_or_a_name_is_refused(dreamer: Dreamer, service: MemoryService) -> None:
    a = seed(service, "Bob is not allergic to peanuts")
    b = seed(service, "Bob isn't allergic to peanuts; checked on Friday 2026-03-05")
    c = seed(service, "Bob is allergic to peanuts")
    plan = DreamPlan(
        merges=[
            PlanMerge(ids=[a.id, b.id], content="Bob is allergic to peanuts; checked on Friday 2026-03-05"),
            PlanMerge(ids=[a.id, b.id], content="He is not allergic to peanuts; checked 2026-03"),
            PlanMerge(ids=[a.id, c.id], content="Bob is not allergic to peanuts"),
        ]
    )
    report = dreamer.apply(plan, "consolidation")
    assert report.applied == []
    assert [x.reason for x in report.rejected] == [
        "the merged text drops details of its sources: not allerg",
        "the merged text drops details of its sources: 05, bob, friday",
        f"{a.id} and {c.id} contradict each other (one negates what the other affirms: allerg): keep both, or "
        "archive one",
    ]
    assert not any(service.get(e.id).archived for e in (a, b, c))
    kept = PlanMerge(ids=[a.id, b.id], content="Bob does not seem allergic to peanuts; checked on Friday 2026-03-05")
    assert kinds(dreamer.apply(DreamPlan(merges=[kept]), "consolidation").applied) == ["merge"]


def test_a_merge_that_drops_a_sources_words_is_refused_naming_them(dreamer: Dreamer, service: MemoryService) -> None:
    """Issue 45: "allergic to peanuts" dropped from one of two sources, no name or number lost, was applied."""
    peanuts = seed(service, "Bob is allergic to peanuts")
    hiking = seed(service, "Bob likes hiking")
    dropped = PlanMerge(ids=[peanuts.id, hiking.id], content="Bob likes hiking")
    report = dreamer.apply(DreamPlan(merges=[dropped]), "consolidation")
    assert report.applied == [] and len(report.rejected) == 1
    why = report.rejected[0].reason
    assert why.startswith(f'the merged text drops words of {peanuts.id} ("Bob is allergic to peanuts"): allergic, ')
    assert "peanuts" in why and hiking.id not in why and "leave that memory out of the merge" in why
    assert not service.get(peanuts.id).archived and not service.get(hiking.id).archived
    kept = PlanMerge(ids=[peanuts.id, hiking.id], content="Bob is allergic to peanuts and enjoys hiking")
    assert kinds(dreamer.apply(DreamPlan(merges=[kept]), "consolidation").applied) == ["merge"]


def test_a_merge_of_two_times_for_one_thing_is_refused_and_listed_as_a_contradiction(
    dreamer: Dreamer, service: MemoryService, settings: Settings
) -> None:
    """Keeping both times ("9am or 10am") passes the details check; the sources still contradict each other."""
    nine = seed(service, "The team standup is at 9am")
    ten = seed(service, "The team standup is at 10am")
    plan = DreamPlan(merges=[PlanMerge(ids=[nine.id, ten.id], content="The team standup is at 9am or 10am")])
    report = dreamer.apply(plan, "consolidation")
    assert report.applied == []
    assert report.rejected[0].reason == (
        f"{nine.id} and {ten.id} contradict each other (they give different times: 9am / 10am): keep both, or "
        "archive one"
    )
    assert [(x.ids, x.reason) for x in report.contradictions] == [
        ([nine.id, ten.id], "they give different times: 9am / 10am")
    ]
    assert "1 contradictions to resolve" in report.summary
    assert report_file(settings, report).contradictions == report.contradictions
    assert not service.get(nine.id).archived and not service.get(ten.id).archived


def test_the_deterministic_pass_reports_two_times_for_one_thing_without_embeddings(
    dreamer: Dreamer, service: MemoryService
) -> None:
    """Not near-duplicates by their words (the times differ, one says more), yet about one thing: reported."""
    nine = seed(service, "The team standup is at 9am every weekday")
    ten = seed(service, "Team standup: 10am")
    seed(service, "The flight lands at 10am")  # another subject: no contradiction
    report = dreamer.run_deterministic()
    assert kinds(report.applied) == []
    assert [(x.ids, x.reason) for x in report.contradictions] == [
        ([nine.id, ten.id], "they give different times: 9am / 10am")
    ]
    assert dreamer.contradicting_pairs(list(service.iter_entries())) == [
        (nine.id, ten.id, "they give different times: 9am / 10am")
    ]


def test_near_duplicates_merge_into_the_text_that_keeps_every_word(dreamer: Dreamer, service: MemoryService) -> None:
    """The longest text (as many details) drops "nightly": the one that keeps every source's words is chosen."""
    short = seed(service, "Build artifacts are uploaded nightly to the Hetzner bucket")
    longer = seed(service, "Build artifacts are all uploaded to the Hetzner bucket that is in Falkenstein")
    covering = seed(service, "Build artifacts are uploaded nightly to the Hetzner bucket in Falkenstein")
    report = dreamer.run_deterministic()
    [merge] = [x for x in report.applied if x.action == "merge"]
    assert set(merge.ids) == {short.id, longer.id, covering.id} and report.rejected == []
    assert service.get(merge.result_id).content == covering.content


def test_duplicates_with_a_protected_member_are_not_merged(
    dreamer: Dreamer, service: MemoryService, settings: Settings
) -> None:
    a = seed(service, "the user is allergic to peanuts", pinned=True)
    b = seed(service, "the user is allergic to peanuts")
    before = files(settings)
    report = dreamer.run_deterministic()
    assert "merge" not in kinds(report.applied) and kinds(report.rejected) == ["merge"]
    assert files(settings)[a.id] == before[a.id] and not service.get(b.id).archived


def idle(days: float, **fields: Any) -> dict[str, Any]:
    """Fields of a memory last used `days` before T0."""
    return {"created_at": T0 - timedelta(days=days + 1), "last_seen_at": T0 - timedelta(days=days), **fields}


def scores(settings: Settings) -> dict[str, Any]:
    """The tiers the decay pass recorded (meta/decay-scores.json), by memory id."""
    data = json.loads((settings.meta_dir / "decay-scores.json").read_text("utf-8"))
    assert data["version"] == 1 and data["last_updated"].endswith("Z")
    return {key.removeprefix("memory:"): entry for key, entry in data["entries"].items()}


# Importance 0.7, one use, type weight 1.2: salience 0.84 · e^(−0.03·days): active under 17.3 days since the
# last use, fading under 47.8, dormant under 94, an archive candidate after.
def test_the_decay_pass_records_every_tier_change_and_changes_no_memory(
    dreamer: Dreamer, service: MemoryService, settings: Settings, clock: FakeClock
) -> None:
    ages = seed(service, "a note that ages", **idle(10))
    stays = seed(service, "a note that stays active", **idle(0))
    first = dreamer.run_deterministic()
    assert first.tier_changes == []  # nothing recorded before: no change to report
    assert first.tiers == {"active": 2, "fading": 0, "dormant": 0, "archive_candidate": 0}
    assert {i: s["status"] for i, s in scores(settings).items()} == {ages.id: "active", stays.id: "active"}
    before = files(settings)
    clock.now = T0 + 20 * DAY  # 30 days unused: fading; the other 20 days: fading too
    second = dreamer.run_deterministic()
    changes = {c.id: (c.from_tier, c.to_tier) for c in second.tier_changes}
    assert changes == {ages.id: ("active", "fading"), stays.id: ("active", "fading")}
    [aged] = [c for c in second.tier_changes if c.id == ages.id]
    assert aged.salience == pytest.approx(0.84 * math.exp(-0.03 * 30), abs=1e-3)
    assert "2 salience tier changes" in second.summary and report_file(settings, second) == second
    clock.now = T0 + 60 * DAY  # 70 and 60 days: dormant
    third = dreamer.run_deterministic()
    assert {c.id: (c.from_tier, c.to_tier) for c in third.tier_changes} == {
        ages.id: ("fading", "dormant"),
        stays.id: ("fading", "dormant"),
    }
    assert files(settings) == before  # importance, uses, everything in the files as they were
    assert [x for x in third.applied if x.ids and x.ids[0] in (ages.id, stays.id)] == []


def test_archive_candidates_are_listed_for_review_never_archived_and_pinned_ones_stay_active(
    dreamer: Dreamer, service: MemoryService, settings: Settings
) -> None:
    gone = seed(service, "the old build server was called hermes and ran on a tower under the desk", **idle(120))
    older = seed(service, "an even older note", **idle(400))
    pinned = seed(service, "the user's passport number is in the safe", pinned=True, **idle(1000))
    dormant = seed(service, "a dormant note", **idle(60))
    before = files(settings)
    report = dreamer.run_deterministic()
    assert [c.id for c in report.archive_candidates] == [older.id, gone.id]  # least salient first
    candidate = report.archive_candidates[1]
    assert candidate.tier == "archive_candidate" and candidate.salience < 0.05 and candidate.uses == 1
    assert candidate.last_use == T0 - 120 * DAY
    assert candidate.preview == "the old build server was called hermes and ran on a tower …"
    assert report.tiers == {"active": 1, "fading": 0, "dormant": 1, "archive_candidate": 2}
    assert "2 archive candidates to review" in report.summary
    assert report.applied == [] and files(settings) == before  # nothing archived, nothing written
    assert not service.get(gone.id).archived and not service.get(older.id).archived
    recorded = scores(settings)
    assert recorded[pinned.id]["status"] == "active" and recorded[pinned.id]["current_score"] == 1.0
    assert recorded[pinned.id]["pinned"] is True and recorded[dormant.id]["status"] == "dormant"
    assert recorded[gone.id] == {
        "store": "semantic",
        "base_relevance": 0.7,
        "created": "2024-01-01T09:00:00Z",
        "last_accessed": "2024-01-02T09:00:00Z",
        "access_count": 1,
        "type_weight": 1.2,
        "current_score": round(0.84 * math.exp(-0.03 * 120), 4),
        "status": "archive_candidate",
        "pinned": False,
    }


def test_a_rerun_records_nothing_new_and_counts_no_use_twice(
    dreamer: Dreamer, service: MemoryService, settings: Settings
) -> None:
    entry = seed(service, "a dormant note", **idle(60))
    assert dreamer.run_deterministic().tier_changes == []
    assert scores(settings)[entry.id]["status"] == "dormant"
    service.reinforce([entry.id])  # a use (in the access log, not the file): 2 uses, last use now
    used = dreamer.run_deterministic()
    assert [(c.from_tier, c.to_tier) for c in used.tier_changes] == [("dormant", "active")]
    after_use = scores(settings)[entry.id]
    assert after_use["access_count"] == 2 and after_use["status"] == "active"
    for _ in range(2):
        again = dreamer.run_deterministic()
        assert again.tier_changes == [] and again.applied == []
        assert scores(settings)[entry.id]["access_count"] == 2
    assert service.get(entry.id).reinforcement_count == 2 and service.get(entry.id).importance == 0.7


def test_a_dry_run_decay_pass_reports_the_changes_and_records_nothing(
    dreamer: Dreamer, service: MemoryService, settings: Settings, clock: FakeClock
) -> None:
    entry = seed(service, "a note that ages", **idle(10))
    dreamer.run_deterministic()
    recorded = (settings.meta_dir / "decay-scores.json").read_bytes()
    clock.now = T0 + 20 * DAY
    dry = dreamer.run_deterministic(dry_run=True)
    assert [(c.id, c.to_tier) for c in dry.tier_changes] == [(entry.id, "fading")]
    assert (settings.meta_dir / "decay-scores.json").read_bytes() == recorded
    assert [(c.id, c.to_tier) for c in dreamer.run_deterministic().tier_changes] == [(entry.id, "fading")]


def test_an_unreadable_decay_record_is_recorded_afresh(
    dreamer: Dreamer, service: MemoryService, settings: Settings
) -> None:
    entry = seed(service, "a note", **idle(60))
    settings.meta_dir.mkdir(parents=True, exist_ok=True)
    (settings.meta_dir / "decay-scores.json").write_text("{not json", "utf-8")
    assert dreamer.run_deterministic().tier_changes == []
    assert scores(settings)[entry.id]["status"] == "dormant"


def test_archives_older_than_90_days_are_purged(dreamer: Dreamer, service: MemoryService, settings: Settings) -> None:
    old = seed(service, "gone for good", archived_at=T0 - 91 * DAY, archive_reason="x", created_at=T0 - 200 * DAY)
    recent = seed(service, "still kept", archived_at=T0 - 89 * DAY, archive_reason="x", created_at=T0 - 200 * DAY)
    live = seed(service, "old but live", importance=0.9, created_at=T0 - 400 * DAY)
    dry = dreamer.run_deterministic(dry_run=True)
    assert [x.ids for x in dry.applied if x.action == "purge"] == [[old.id]]
    assert old.id in files(settings)
    report = dreamer.run_deterministic()
    assert [x.ids for x in report.applied if x.action == "purge"] == [[old.id]]
    assert old.id not in files(settings)
    with pytest.raises(NotFoundError):
        service.get(old.id)
    assert service.get(recent.id).archived and not service.get(live.id).archived


def test_the_graph_sweep_drops_weak_old_triples_and_old_orphans(
    dreamer: Dreamer, graph: GraphService, clock: FakeClock
) -> None:
    clock.now = T0 - 20 * DAY
    graph.add_triples(
        [
            {"subject": "Alice", "predicate": "knows", "object": "Bob", "confidence": 0.3},  # weak and old
            {"subject": "Alice", "predicate": "works on", "object": "Falcon", "confidence": 0.9},  # strong
            {"subject": "Carol", "predicate": "visits", "object": "Berlin", "confidence": 0.39},  # weak and old
        ]
    )
    graph.add_entities([{"name": "Lonely"}, {"name": "Remembered"}])
    clock.now = T0 - 5 * DAY
    graph.add_triples([{"subject": "Dave", "predicate": "knows", "object": "Alice", "confidence": 0.1}])  # new
    graph.add_entities([{"name": "Newcomer"}])
    graph.recall_facts("what about Remembered?")  # referenced 5 days ago
    clock.now = T0
    weak_old = {f.id for f in graph.weakest_facts(10) if f.confidence < 0.4 and f.subject != "Dave"}
    before = graph.stats()
    dry = dreamer.run_deterministic(dry_run=True)
    assert {x.ids[0] for x in dry.applied if x.action == "drop_triple"} == weak_old
    assert graph.stats() == before
    report = dreamer.run_deterministic()
    assert {x.ids[0] for x in report.applied if x.action == "drop_triple"} == weak_old
    dropped = {x.reason.split(":")[0] for x in report.applied if x.action == "drop_entity"}
    assert "Lonely" in dropped
    assert not dropped & {"Remembered", "Newcomer", "Alice", "Falcon", "Dave"}
    names = {h.entity.name for h in graph.find_entities(limit=100).results}
    assert {"Alice", "Falcon", "Dave", "Remembered", "Newcomer"} <= names and "Lonely" not in names
    assert [f.object for f in graph.get_entity("Alice").facts if f.subject == "Alice"] == ["Falcon"]


def test_a_dry_run_graph_sweep_predicts_the_entities_a_real_sweep_drops(
    dreamer: Dreamer, graph: GraphService, clock: FakeClock
) -> None:
    clock.now = T0 - 20 * DAY
    graph.add_triples([{"subject": "Carol", "predicate": "visits", "object": "Berlin", "confidence": 0.2}])
    clock.now = T0
    dry = dreamer.run_deterministic(dry_run=True)
    real = dreamer.run_deterministic()
    assert sorted(kinds(real.applied)) == ["drop_entity", "drop_entity", "drop_triple"]
    assert sorted(kinds(dry.applied)) == sorted(kinds(real.applied))


# ---------------------------------------------------------------------------------------------- material
def test_consolidation_material_lists_live_memories_with_ids_and_flags(
    dreamer: Dreamer, service: MemoryService, graph: GraphService
) -> None:
    a = seed(service, "the user   drinks\ntea", category="user-preferences", tags=["tea", "drink"], importance=0.4)
    p = seed(service, "the user is allergic to peanuts", importance=0.9, reinforcement_count=2, pinned=True)
    used = seed(service, "the user edits in vim", importance=0.9, reinforcement_count=6)
    gone = seed(service, "archived note", archived_at=T0 - DAY)
    graph.add_entities([{"name": "Alice"}, {"name": "Falcon"}])
    dreamer.feedback.record("Correction", "No: the deploy day is Wednesday", "chat-1")
    dreamer.feedback.record("ToolFailure", "search_memory timed out", "chat-1")
    dreamer.feedback.record("SessionSummary", "planned the release", "chat-1")
    dreamer.feedback.record("UserThumbsUp", "nice answer", "chat-1")
    dreamer.feedback.record("UserThumbsDown", "too long", "chat-1")
    material = dreamer.material("consolidation")
    assert material.dream_pass == "consolidation" and material.items == 3 and material.remaining == 0
    lines = material.material.splitlines()
    assert lines[0] == f"1. [{p.id}] (uncategorized) importance=0.90 reinforced=2 PINNED: {p.content}"
    assert lines[1] == f"2. [{used.id}] (uncategorized) importance=0.90 reinforced=6 PROTECTED: {used.content}"
    assert lines[2] == f"3. [{a.id}] (user-preferences) #tea #drink importance=0.40 reinforced=1: the user drinks tea"
    assert gone.id not in material.material
    feedback = material.directive.split("Recent feedback (a Correction makes the memories it contradicts stale):\n")[1]
    assert feedback.splitlines() == [  # every kind of signal, as RockBot's consolidation reads them
        "- Correction: No: the deploy day is Wednesday",
        "- ToolFailure: search_memory timed out",
        "- SessionSummary: planned the release",
        "- UserThumbsUp: nice answer",
        "- UserThumbsDown: too long",
    ]
    assert "{{" not in material.directive
    assert set(material.plan_schema["properties"]) == set(FIELDS)
    entities = dreamer.material("entities")
    assert "Alice, Falcon" in entities.directive and entities.items == 3


def test_material_with_nothing_to_consider(dreamer: Dreamer) -> None:
    for dream_pass in PASSES:
        material = dreamer.material(dream_pass)
        assert material.items == 0 and material.remaining == 0
        assert material.material == "(nothing to consider)"
        assert material.directive and "{{" not in material.directive


def test_material_comes_in_batches_with_offset_and_remaining(
    service: MemoryService, graph: GraphService, settings: Settings, clock: FakeClock
) -> None:
    small = settings.model_copy(update={"dream_batch_size": 2})
    dreamer = Dreamer(service, graph, small, Templates(small.prompts_dir), clock)
    ids = [seed(service, f"note number {n}", created_at=T0 - (10 - n) * DAY).id for n in range(5)]
    seen: list[str] = []
    expected = [(0, 2, 3), (2, 2, 1), (4, 1, 0), (5, 0, 0), (9, 0, 0)]
    for offset, items, remaining in expected:
        material = dreamer.material("consolidation", offset)
        assert (material.items, material.remaining) == (items, remaining), offset
        if items:
            lines = material.material.splitlines()
            assert [line.split(".")[0] for line in lines] == [str(offset + n) for n in range(1, items + 1)]
            seen += [line.split("[")[1].split("]")[0] for line in lines]
        else:
            assert material.material == "(nothing to consider)"
    assert seen == ids  # every memory once, in order


def test_preferences_material_reads_the_conversation_log(
    dreamer: Dreamer, service: MemoryService, settings: Settings
) -> None:
    log = conversation_log(settings)
    log.append(turn(T0.date() - DAY, "I told you,   NO emojis!"), T0.date() - DAY)
    log.append(turn(T0.date(), "Noted.", role="assistant"), T0.date())
    seed(service, "The user likes short answers", category="user-preferences/style")
    material = dreamer.material("preferences")
    assert material.items == 2
    assert material.material.splitlines() == [
        "1. [chat-1] user: I told you, NO emojis!",
        "2. [chat-1] assistant: Noted.",
    ]
    assert "- The user likes short answers" in material.directive


def test_anti_pattern_material_reads_recent_corrections_and_failures(
    dreamer: Dreamer, service: MemoryService, clock: FakeClock
) -> None:
    clock.now = T0 - 8 * DAY
    dreamer.feedback.record("Correction", "too old to matter", "chat-0")
    clock.now = T0
    correction = dreamer.feedback.record("Correction", "wrong   branch", "chat-1")
    failure = dreamer.feedback.record("ToolFailure", "grep timed out", "chat-2")
    dreamer.feedback.record("SessionSummary", "a summary", "chat-2")
    dreamer.feedback.record("UserThumbsDown", "meh", "chat-2")
    seed(service, "Don't guess paths for edits — instead list the folder", category="anti-patterns/files")
    material = dreamer.material("anti-patterns")
    assert material.material.splitlines() == [
        f"1. [{correction.id}] Correction in chat-1: wrong branch",
        f"2. [{failure.id}] ToolFailure in chat-2: grep timed out",
    ]
    assert "Don't guess paths" in material.directive


def test_anti_pattern_material_takes_at_most_50_signals(dreamer: Dreamer) -> None:
    for n in range(55):
        dreamer.feedback.record("Correction", f"correction {n}", "chat-1")
    material = dreamer.material("anti-patterns")
    assert material.items == 50 and material.remaining == 0
    text = material.material + "\n"
    assert "correction 4\n" not in text and "correction 5\n" in text and "correction 54\n" in text


def test_graph_material_lists_entities_and_weakest_triples(dreamer: Dreamer, graph: GraphService) -> None:
    graph.add_entities([{"name": "Robert", "type": "person", "aliases": ["Rob"]}])
    graph.add_triples([{"subject": "Robert", "predicate": "works on", "object": "Falcon", "confidence": 0.5}])
    robert, fact = graph.resolve("Robert"), graph.weakest_facts(1)[0]
    text = dreamer.material("graph").material
    assert f"[entity {robert.id}] Robert (person; aliases: Rob; 1 triples)" in text
    assert f"[triple {fact.id}] Robert --works_on--> Falcon (confidence=0.50)" in text
    assert dreamer.material("graph").items == 3


# ---------------------------------------------------------------------------------------------- random plans
def is_protected(entry: MemoryEntry, action: str = "merge") -> bool:
    """The spec's rule, written out here so a change to the module's own check cannot hide: a pinned memory is
    never changed; one used 5 times or more is never pruned (archived) but may be merged or re-filed."""
    return entry.pinned or (action == "archive" and entry.reinforcement_count >= 5)


def dropped_details(sources: list[str], merged: str) -> list[str]:
    """Names and numbers of the sources (here: capitalised words and digit runs) the merged text lacks."""
    kept = {w.casefold() for w in re.findall(r"[A-Za-z]+|\d+(?:[.:]\d+)*", merged)}
    wanted = {w.casefold() for text in sources for w in re.findall(r"\b[A-Z][a-z]+\b|\d+(?:[.:]\d+)*", text)}
    return sorted(wanted - kept - {"the", "every"})


PROPER = ["Alice", "Falcon", "Berlin", "Postgres", "Kyoto", "Zed"]
WORDS = ["tea", "coffee", "deploy", "server", "morning", "backup", "editor", "garden", "review", "lunch", "music"]
CATEGORIES = [None, "notes", "project-context/falcon", "user-preferences/editor"]
UNKNOWN = ["nosuchid0001", "feedfacecafe"]


def random_content(rng: random.Random) -> str:
    parts = ["the user", *rng.sample(WORDS, 3)]
    if rng.random() < 0.6:
        parts.append(rng.choice(PROPER))
    if rng.random() < 0.5:
        parts.append(str(rng.randint(1, 99)))
    return " ".join(parts)


def random_memories(rng: random.Random, memory: MemoryService) -> list[MemoryEntry]:
    entries = []
    for _ in range(rng.randint(4, 12)):
        created = T0 - timedelta(days=rng.uniform(1, 60))
        fields: dict[str, Any] = {
            "content": random_content(rng),
            "category": rng.choice(CATEGORIES),
            "tags": rng.sample(["a", "b", "c", "d"], rng.randint(0, 2)),
            "importance": rng.choice([0.1, 0.3, 0.5, 0.6, 0.79, 0.8, 0.95]),
            "pinned": rng.random() < 0.2,  # some protected
            "reinforcement_count": rng.choice([1, 1, 1, 2, 3, 4, 5, 7]),
            "created_at": created,
            "last_seen_at": created + timedelta(days=rng.uniform(0, 1)),
        }
        if rng.random() < 0.15:
            fields["archived_at"] = T0 - DAY
            fields["archive_reason"] = "earlier"
        entries.append(memory.prepare_entry(fields))
    memory.save_many(entries)
    return entries


def random_plan(rng: random.Random, entries: list[MemoryEntry]) -> DreamPlan:
    by_id = {e.id: e for e in entries}
    pool = [e.id for e in entries] + UNKNOWN
    live = [e.id for e in entries if not e.archived]
    plain = [e.id for e in entries if not e.archived and not is_protected(e, "archive")]
    merges = []
    for _ in range(rng.randint(0, 4)):
        choice = rng.random()  # mostly plain memories (which may merge), else any id, unknown ones included
        candidates = plain if choice < 0.5 and len(plain) >= 3 else live if choice < 0.7 and len(live) >= 3 else pool
        ids = rng.sample(candidates, rng.randint(2, 3))
        if rng.random() < 0.1:
            ids.append(ids[0])
        known = [by_id[i].content for i in dict.fromkeys(ids) if i in by_id]
        how = rng.random()
        if how < 0.5:
            content = "; ".join(known) or "merged"  # keeps every detail
        elif how < 0.8:
            content = known[0] if known else "merged"  # may drop the others' details
        else:
            content = "the user " + " ".join(rng.sample(WORDS, 2))
        merges.append(PlanMerge(ids=ids, content=content, reason=f"m{len(merges)}"))
    archives = [PlanArchive(id=rng.choice(pool), reason=f"a{n}") for n in range(rng.randint(0, 4))]
    updates = []
    for n in range(rng.randint(0, 3)):
        category = rng.choice([None, "notes", "misc/sorted"])
        tags = rng.choice([None, ["x"], ["y", "z"]])
        updates.append(PlanUpdate(id=rng.choice(pool), category=category, tags=tags, reason=f"u{n}"))
    return DreamPlan(merges=merges, archives=archives, updates=updates)


def plan_actions(plan: DreamPlan) -> list[tuple[str, list[str]]]:
    return (
        [("merge", list(dict.fromkeys(m.ids))) for m in plan.merges]
        + [("archive", [a.id]) for a in plan.archives]
        + [("update", [u.id]) for u in plan.updates]
    )


def check_plan_applied(
    plan: DreamPlan,
    report: DreamReport,
    before: dict[str, MemoryEntry],
    before_files: dict[str, bytes],
    memory: MemoryService,
    settings: Settings,
) -> None:
    """The invariants of any applied consolidation plan."""
    proposed = plan_actions(plan)
    # every proposed action is accounted for, once
    assert len(report.applied) + len(report.rejected) == len(proposed)
    assert all(x.reason for x in report.rejected)
    after_files = files(settings)
    # nothing lost: every memory before is still on disk, live or archived
    for entry_id in before:
        assert entry_id in after_files
        memory.get(entry_id)
    # one memory, one action
    touched = [i for x in report.applied for i in x.ids]
    assert len(touched) == len(set(touched))
    merged_ids = set()
    for action in report.applied:
        sources = [before[i] for i in action.ids]
        assert all(not s.archived and not is_protected(s, action.action) for s in sources)
        if action.action == "merge":
            merged = memory.get(action.result_id)
            merged_ids.add(merged.id)
            assert not merged.archived
            wanted_merge = plan.merges[int(action.reason[1:])]
            assert list(dict.fromkeys(wanted_merge.ids)) == action.ids
            assert merged.content == wanted_merge.content
            assert dropped_details([s.content for s in sources], merged.content) == []
            assert merged.created_at == min(s.created_at for s in sources)
            assert merged.last_seen_at == max(s.last_seen_at for s in sources)
            assert merged.reinforcement_count == sum(s.reinforcement_count for s in sources)
            assert merged.importance == max(s.importance for s in sources)
            for source in sources:
                now = memory.get(source.id)
                assert now.archived and now.superseded_by == merged.id
                assert now.archive_reason == f"merged into {merged.id}" and now.content == source.content
        elif action.action == "archive":
            now = memory.get(action.ids[0])
            assert now.archived and now.superseded_by is None and now.content == sources[0].content
            assert now.archive_reason == f"dream: {action.reason}"
        else:
            assert action.action == "update"
            now = memory.get(action.ids[0])
            wanted = plan.updates[int(action.reason[1:])]
            assert wanted.id == action.ids[0]
            if wanted.category is not None:
                assert now.category == wanted.category
            if wanted.tags is not None:
                assert now.tags == wanted.tags
            assert now.content == sources[0].content and not now.archived
    # what no applied action named is byte-identical; protected memories above all
    for entry_id, data in before_files.items():
        if entry_id not in touched or before[entry_id].pinned:
            assert after_files[entry_id] == data, entry_id
    assert set(after_files) == set(before_files) | merged_ids
    # a clean action (distinct, live, unprotected ids no other action names; details kept) is applied
    named: dict[str, int] = {}
    for _, ids in proposed:
        for i in ids:
            named[i] = named.get(i, 0) + 1
    applied = [(x.action, x.ids) for x in report.applied]
    for (kind, ids), index in zip(proposed, range(len(proposed)), strict=True):
        ok = all(i in before and not before[i].archived and not is_protected(before[i], kind) and named[i] == 1
                 for i in ids)  # fmt: skip
        if kind == "merge":
            merge = plan.merges[index]
            ok = ok and len(ids) >= 2 and not dropped_details([before[i].content for i in ids], merge.content)
        if kind == "update":
            update = plan.updates[index - len(plan.merges) - len(plan.archives)]
            ok = ok and (update.category is not None or update.tags is not None)
        if ok:
            assert (kind, ids) in applied, (kind, ids, report.rejected)


@pytest.mark.parametrize("seed_value", range(25))
def test_random_plans_keep_the_safeguards(
    service: MemoryService, graph: GraphService, settings: Settings, clock: FakeClock, seed_value: int
) -> None:
    rng = random.Random(seed_value)
    dreamer = Dreamer(service, graph, settings, Templates(settings.prompts_dir), clock)
    random_memories(rng, service)
    for _ in range(2):  # a second plan over what the first left
        before = {e.id: e for e in service.iter_entries()}
        before_files = files(settings)
        plan = random_plan(rng, list(before.values()))
        report = dreamer.apply(plan, "consolidation")
        check_plan_applied(plan, report, before, before_files, service, settings)
        assert report_file(settings, report) == report


@pytest.mark.parametrize("seed_value", range(100, 115))
def test_random_plans_dry_run_changes_nothing_and_predicts_the_real_run(
    service: MemoryService, graph: GraphService, settings: Settings, clock: FakeClock, seed_value: int
) -> None:
    rng = random.Random(seed_value)
    dreamer = Dreamer(service, graph, settings, Templates(settings.prompts_dir), clock)
    entries = random_memories(rng, service)
    plan = random_plan(rng, entries)
    before_files = files(settings)
    dry = dreamer.apply(plan, "consolidation", dry_run=True)
    assert files(settings) == before_files
    assert dry.dry_run and report_file(settings, dry) == dry
    real = dreamer.apply(plan, "consolidation")
    assert [(x.action, x.ids, x.reason) for x in dry.applied] == [(x.action, x.ids, x.reason) for x in real.applied]
    assert [(x.action, x.ids, x.reason) for x in dry.rejected] == [(x.action, x.ids, x.reason) for x in real.rejected]


@pytest.mark.parametrize("seed_value", range(200, 212))
def test_random_memories_through_the_deterministic_pass(
    service: MemoryService, graph: GraphService, settings: Settings, clock: FakeClock, seed_value: int
) -> None:
    rng = random.Random(seed_value)
    dreamer = Dreamer(service, graph, settings, Templates(settings.prompts_dir), clock)
    entries = []
    for _ in range(rng.randint(5, 14)):
        created = T0 - timedelta(days=rng.uniform(0, 300))
        content = random_content(rng)
        if entries and rng.random() < 0.3:  # an exact duplicate (up to case and spaces) of an earlier one
            content = "  " + rng.choice(entries).content.upper()
        fields: dict[str, Any] = {
            "content": content,
            "importance": rng.choice([0.1, 0.2, 0.5, 0.7, 0.8, 0.9]),
            "pinned": rng.random() < 0.2,
            "reinforcement_count": rng.choice([1, 2, 5]),
            "created_at": created,
            "last_seen_at": created + timedelta(days=rng.uniform(0, 10)),
        }
        if rng.random() < 0.2:
            fields["archived_at"] = T0 - timedelta(days=rng.uniform(1, 200))
        entries.append(service.prepare_entry(fields))
        service.save_many([entries[-1]])
    before = {e.id: e for e in service.iter_entries()}
    before_files = files(settings)
    report = dreamer.run_deterministic()
    purged = {x.ids[0] for x in report.applied if x.action == "purge"}
    assert all(before[i].archived and before[i].archived_at < T0 - timedelta(days=90) for i in purged)
    old_archives = {i for i, e in before.items() if e.archived and e.archived_at < T0 - timedelta(days=90)}
    assert {i for i in old_archives if not before[i].pinned} == purged  # an archived pinned memory stays
    after_files = files(settings)
    for entry_id, entry in before.items():
        if entry_id not in purged:
            assert entry_id in after_files
            now = service.get(entry_id)
            assert now.content == entry.content
            assert now.importance == entry.importance  # the decay pass never lowers it
            if is_protected(entry) and not entry.archived:
                assert after_files[entry_id] == before_files[entry_id]
            if entry.archived:
                assert after_files[entry_id] == before_files[entry_id]
    for action in report.applied:
        if action.action == "merge":
            assert all(not is_protected(before[i]) and not before[i].archived for i in action.ids)
            assert all(service.get(i).superseded_by == action.result_id for i in action.ids)
            assert not service.get(action.result_id).archived
    # duplicates left live are only those a safeguard kept apart
    live = [e for e in service.iter_entries() if not e.archived]
    texts: dict[str, list[MemoryEntry]] = {}
    for entry in live:
        texts.setdefault(" ".join(entry.content.casefold().split()), []).append(entry)
    for group in texts.values():
        if len(group) > 1:
            ids = {e.id for e in group}
            kept_apart = [x for x in report.rejected if x.action == "merge" and ids <= set(x.ids)]
            assert kept_apart, [e.content for e in group]
    # repeated runs at the same time change nothing more, and record no tier change
    second = dreamer.run_deterministic()
    third = dreamer.run_deterministic()
    assert [x for x in third.applied if x.action == "purge"] == [] and third.tier_changes == []
    assert all(e.importance == before[e.id].importance for e in service.iter_entries() if e.id in before)
    assert second.tiers == third.tiers and sum(third.tiers.values()) == len(
        [e for e in service.iter_entries() if not e.archived]
    )


def test_a_memory_that_reaches_5_uses_while_the_dream_runs_is_still_spared(
    dreamer: Dreamer, service: MemoryService, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    entry = seed(service, "a note another agent is reading right now")
    before = files(settings)
    real_unchanged = service.unchanged

    @contextlib.contextmanager
    def uses_arrive(seen, new_ids=()):  # another process's reinforcement, caught up just before the write
        with real_unchanged(seen, new_ids) as changed:
            service.index.set_access(entry.id, Access(6, T0.timestamp()))
            yield changed

    monkeypatch.setattr(service, "unchanged", uses_arrive)
    report = dreamer.apply(DreamPlan(archives=[PlanArchive(id=entry.id, reason="noise")]), "consolidation")
    assert report.applied == [] and f"{entry.id} was used 6 times" in report.rejected[0].reason
    assert files(settings) == before
