"""The reflection engine (seed 004 §10): a cycle with a scripted model on real loopback HTTP, the pending
proposal, every resolution, the budget, the logs and the one-at-a-time lock."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import pytest

from rockmem_mcp.audit.service import acting_as
from rockmem_mcp.config import Settings
from rockmem_mcp.consolidation.dream import DreamBusy, Dreamer
from rockmem_mcp.consolidation.reflection import MILESTONES, Reflector
from rockmem_mcp.consolidation.reflection_files import ReflectionBusy
from rockmem_mcp.consolidation.templates import Templates
from rockmem_mcp.core.service import CoreMemory
from rockmem_mcp.errors import InvalidInputError
from rockmem_mcp.graph.service import GraphService
from rockmem_mcp.llm import ChatLLM
from rockmem_mcp.memory.service import MemoryService
from tests.embedding_server import EmbeddingServer, Reply


def scripted(answers: dict[str, Callable[[dict[str, Any]], dict[str, Any]]], completion: int = 50) -> Reply:
    """A chat model that answers by the phase its system prompt names (meta, core, or a dream pass)."""

    def reply(body: dict) -> tuple[int, object]:
        system, user = body["messages"][0]["content"], body["messages"][-1]["content"]
        if "meta-reflection phase" in system:
            answer = answers.get("meta", lambda _: {})(body)
        elif "rewriting core memory" in system:
            answer = answers.get("core", lambda _: {"blocks": []})(body)
        elif "consolidating" in system:
            answer = answers.get("consolidation", lambda _: {})(body)
        else:
            answer = {}
        message = {"role": "assistant", "content": json.dumps(answer)}
        usage = {"total_tokens": completion * 3, "completion_tokens": completion}
        del user
        return 200, {"choices": [{"index": 0, "message": message}], "usage": usage}

    return reply


class Home:
    def __init__(self, settings: Settings, server: EmbeddingServer) -> None:
        self.settings = settings.model_copy(
            update={"llm_endpoint": server.url, "llm_model": "reflector-1", "llm_retries": 0}
        )
        self.server = server
        self.memory = MemoryService(self.settings)
        self.graph = GraphService(self.settings)
        self.core = CoreMemory(self.settings)
        self.dreamer = Dreamer(self.memory, self.graph, self.settings, Templates(self.settings.prompts_dir))
        self.reflector = Reflector(self.settings, self.dreamer, self.core)

    def llm(self) -> ChatLLM:
        return ChatLLM(self.settings, backoff_s=0.0)

    def close(self) -> None:
        self.memory.close()
        self.graph.close()


@pytest.fixture
def home(settings: Settings) -> Iterator[Home]:
    """A home whose reflections wait for approval only when a model planned them (`model`, the default before
    seed 004 §10.6 became it): these tests are about what a reflection does once resolved; the default's own test
    is test_every_reflection_waits_for_the_user_by_default."""
    server = EmbeddingServer()
    opened = Home(settings.model_copy(update={"reflection_approval": "model"}), server)
    yield opened
    opened.close()
    server.close()


def merge_of(ids: list[str]) -> Callable[[dict[str, Any]], dict[str, Any]]:
    return lambda _: {"merges": [{"ids": ids, "content": "The user drinks green tea every morning"}]}


def seed(home: Home) -> list[str]:
    memory = home.memory
    return [
        memory.save("The user drinks green tea every morning", "user-preferences").id,
        memory.save("Every morning the user drinks green tea", "user-preferences").id,
        memory.save("Deploys happen on Tuesdays at 10:00", "project-context/falcon").id,
    ]


def test_a_model_reflection_waits_for_approval_and_changes_nothing_until_then(home: Home) -> None:
    a, b, _ = seed(home)
    meta = {"patterns": ["tea comes up a lot"], "evolution": ["the user is a creature of habit"], "guidance": "tea"}
    core = {"blocks": [{"block": "Active Context", "text": "Working on falcon deploys", "reason": "current"}]}
    answers = {"meta": lambda _: meta, "consolidation": merge_of([a, b]), "core": lambda _: core}
    home.server.replies = [scripted(answers)]
    reflection = home.reflector.run("manual", home.llm())
    assert reflection.status == "pending" and reflection.needs_approval and reflection.mode == "llm"
    assert [x.kind for x in reflection.actions] == ["merge", "core"]
    assert [x.id for x in reflection.actions] == ["a1", "a2"]
    assert not any(e.archived for e in home.memory.iter_entries())  # nothing applied
    assert "falcon" not in home.core.read().text
    pending = home.settings.meta_dir / "pending-reflection.md"
    text = pending.read_text()
    for section in ("New Knowledge", "New Connections", "Proposed Archival", "Contradictions", "Core Memory Changes"):
        assert section in text
    assert "Philosophical Evolution" in text and "Questions for You" in text and "[a1] merge" in text
    assert "creature of habit" in text and "**Reflection #**: 1" in text
    assert home.reflector.session_lines("hi")[0].startswith("Reflections waiting for the user's approval (1)")
    # The meta-reflection read the survey; the consolidation request carried its guidance.
    systems = [body["messages"][0]["content"] for body, _ in home.server.requests]
    assert any("Guidance for this cycle" in s and "tea" in s for s in systems if "consolidating" in s)


def test_approve_applies_every_action_logs_it_and_grows_the_evolution_file(home: Home) -> None:
    a, b, _ = seed(home)
    meta = {"evolution": ["prefers routines"], "patterns": ["habits"]}
    core = {"blocks": [{"block": "Active Context", "text": "Working on falcon deploys"}]}
    answers = {"meta": lambda _: meta, "consolidation": merge_of([a, b]), "core": lambda _: core}
    home.server.replies = [scripted(answers)]
    reflection = home.reflector.run("manual", home.llm())
    done = home.reflector.resolve(reflection.id, "approve")
    assert done.status == "approved" and done.resolution is not None
    assert done.resolution.applied == {"core": 1, "merge": 1} and done.resolution.refused == 0
    assert {e.id for e in home.memory.iter_entries() if e.archived} == {a, b}
    assert "Working on falcon deploys" in home.core.read().text
    log = (home.settings.meta_dir / "reflection-log.md").read_text()
    assert "## Reflection #1" in log and "decision: approve" in log and "Tokens used: " in log
    evolution = (home.settings.meta_dir / "evolution.md").read_text()
    assert "prefers routines" in evolution
    assert not (home.settings.meta_dir / "pending-reflection.md").exists()
    audit = (home.settings.meta_dir / "audit.log").read_text().splitlines()
    mine = [line for line in audit if "| reflection:r-001 |" in line]
    assert any("| MERGE |" in line and "| approved |" in line for line in mine)
    assert any("MEMORY.md" in line for line in mine)
    with pytest.raises(InvalidInputError, match="not pending"):
        home.reflector.resolve(reflection.id, "approve")


def test_partial_applies_only_the_chosen_actions(home: Home) -> None:
    a, b, _ = seed(home)
    core = {"blocks": [{"block": "Persona", "text": "Be brief"}]}
    home.server.replies = [scripted({"consolidation": merge_of([a, b]), "core": lambda _: core})]
    reflection = home.reflector.run("manual", home.llm())
    done = home.reflector.resolve(reflection.id, "partial", action_ids=["a2"])
    assert done.status == "partial"
    assert not any(e.archived for e in home.memory.iter_entries())
    assert "Be brief" in home.core.read().text
    outcomes = {x.id: x.outcome for x in done.actions}
    assert outcomes == {"a1": "not chosen", "a2": "applied"}
    home.server.replies = [scripted({"consolidation": merge_of([a, b])})]
    again = home.reflector.run("manual", home.llm())
    with pytest.raises(InvalidInputError, match="action_ids"):
        home.reflector.resolve(again.id, "partial")
    with pytest.raises(InvalidInputError, match="no action a9"):
        home.reflector.resolve(again.id, "partial", action_ids=["a9"])


def test_approve_with_changes_applies_the_edited_action(home: Home) -> None:
    a, b, _ = seed(home)
    home.server.replies = [scripted({"consolidation": merge_of([a, b])})]
    reflection = home.reflector.run("manual", home.llm())
    edited = "The user drinks green tea every morning, with honey"
    done = home.reflector.resolve(reflection.id, "approve_with_changes", edits={"a1": {"content": edited}})
    assert done.resolution is not None and done.resolution.edited == ["a1"]
    merged = [e for e in home.memory.iter_entries() if not e.archived and "honey" in e.content]
    assert len(merged) == 1
    with pytest.raises(InvalidInputError, match="not valid"):
        fresh = home.reflector.run("manual", home.llm())
        home.reflector.resolve(fresh.id, "approve_with_changes", edits={"a1": {"ids": "not a list"}})


def test_reject_needs_a_reason_changes_nothing_and_is_logged(home: Home) -> None:
    a, b, _ = seed(home)
    home.server.replies = [scripted({"consolidation": merge_of([a, b])})]
    reflection = home.reflector.run("manual", home.llm())
    with pytest.raises(InvalidInputError, match="reason"):
        home.reflector.resolve(reflection.id, "reject")
    done = home.reflector.resolve(reflection.id, "reject", reason="those are two habits")
    assert done.status == "rejected" and all(x.outcome == "rejected" for x in done.actions)
    assert not any(e.archived for e in home.memory.iter_entries())
    log = (home.settings.meta_dir / "reflection-log.md").read_text()
    assert "those are two habits" in log
    assert not (home.settings.meta_dir / "evolution.md").exists()


def test_the_output_budget_stops_the_cycle_and_says_what_it_left_out(home: Home) -> None:
    for n in range(30):
        home.memory.save(f"note number {n} about topic {n}", "notes")
    budget_settings = home.settings.model_copy(update={"reflection_token_budget": 2_000, "dream_batch_size": 5})
    home.dreamer.settings = budget_settings
    reflector = Reflector(budget_settings, home.dreamer, home.core)
    home.server.replies = [scripted({}, completion=150)]
    model = home.llm()
    reflection = reflector.run("manual", model)
    assert reflection.output_tokens <= 2_000 and reflection.output_tokens == model.output_tokens
    assert any("output budget" in n for n in reflection.not_covered), reflection.not_covered
    asked = [body.get("max_tokens") for body, _ in home.server.requests]
    assert all(isinstance(m, int) and 0 < m <= 2_000 for m in asked)


def test_every_reflection_waits_for_the_user_by_default(settings: Settings) -> None:
    """Seed 004 §10.6: "NEVER apply changes without user approval", a reflection without a model too."""
    assert settings.reflection_approval == "always"
    server = EmbeddingServer()
    home = Home(settings, server)
    try:
        memory = home.memory
        a = memory.save("The office is in Berlin", "facts").id
        memory.save("The office is in Berlin", "facts")
        reflection = home.reflector.run("threshold")
        assert reflection.mode == "deterministic" and reflection.needs_approval and reflection.status == "pending"
        assert not memory.get(a).archived  # nothing changed until the user resolves it
        assert [r.id for r in home.reflector.pending()] == [reflection.id]
    finally:
        home.close()
        server.close()


def test_without_a_model_a_reflection_applies_at_once_when_only_model_plans_wait(home: Home) -> None:
    memory = home.memory
    a = memory.save("The office is in Berlin", "facts").id
    b = memory.save("The office is in Berlin", "facts").id
    reflection = home.reflector.run("threshold")
    assert reflection.mode == "deterministic" and not reflection.needs_approval
    assert reflection.status == "applied" and [x.kind for x in reflection.actions] == ["merge"]
    assert {e.id for e in memory.iter_entries() if e.archived} == {a, b}
    assert "## Reflection #1" in (home.settings.meta_dir / "reflection-log.md").read_text()
    always = home.settings.model_copy(update={"reflection_approval": "always"})
    assert Reflector(always, home.dreamer, home.core).run("manual").status == "pending"


def test_contradictions_and_archive_candidates_are_proposed(home: Home, settings: Settings) -> None:
    memory = home.memory
    yes = memory.save("The user is allergic to peanuts", "health").id
    no = memory.save("The user is not allergic to peanuts", "health").id
    old = memory.save("A passing remark about the weather last spring", "chat").id
    # A year unused: an archive candidate.
    later = home.memory._clock
    home.memory._clock = lambda: later() + timedelta(days=400)
    try:
        reflection = home.reflector.run("manual")
    finally:
        home.memory._clock = later
    assert any(yes in c and no in c for c in reflection.contradictions)
    assert any("which one is right" in q for q in reflection.questions)
    archived = [x for x in reflection.actions if x.kind == "archive"]
    assert old in {x.item["id"] for x in archived}


def test_a_planned_merge_the_dream_would_refuse_is_not_proposed_and_a_contradiction_is_asked(home: Home) -> None:
    """Issue 45: a model's merge that drops "allergic to peanuts" is left out saying so; one of "standup at 9am"
    and "… at 10am" becomes a contradiction for the user, in the summary and its questions, never an action."""
    memory = home.memory
    peanuts = memory.save("Bob is allergic to peanuts", "people").id
    hiking = memory.save("Bob likes hiking", "people").id
    nine = memory.save("The team standup is at 9am", "work").id
    ten = memory.save("The team standup is at 10am", "work").id
    merges = [
        {"ids": [peanuts, hiking], "content": "Bob likes hiking"},
        {"ids": [nine, ten], "content": "The team standup is at 10am"},
    ]
    home.server.replies = [scripted({"consolidation": lambda _: {"merges": merges}})]
    reflection = home.reflector.run("manual", home.llm())
    assert [x.kind for x in reflection.actions] == []
    [left_out] = [n for n in reflection.not_covered if peanuts in n]
    assert f'drops words of {peanuts} ("Bob is allergic to peanuts"): allergic, peanuts' in left_out
    assert [(c.ids, c.reason) for c in reflection.conflicts] == [([nine, ten], "they give different times: 9am / 10am")]
    assert reflection.contradictions == [f"{nine} and {ten}: they give different times: 9am / 10am"]
    assert any(nine in q and ten in q and "which one is right" in q for q in reflection.questions)
    text = (home.settings.meta_dir / "pending-reflection.md").read_text()
    contradictions = text.split("## ⚠️ Contradictions Detected")[1].split("##")[0]
    assert "9am / 10am" in contradictions
    assert not any(e.archived for e in memory.iter_entries())


def test_a_reflection_without_a_model_asks_about_two_times_for_one_thing(home: Home) -> None:
    """Not near-duplicates by their words, yet about one thing: found without a model or embeddings."""
    nine = home.memory.save("The team standup is at 9am every weekday", "work").id
    ten = home.memory.save("Team standup: 10am", "work").id
    reflection = home.reflector.run("manual")
    assert [(c.ids, c.reason) for c in reflection.conflicts] == [([nine, ten], "they give different times: 9am / 10am")]
    assert not home.memory.get(nine).archived and not home.memory.get(ten).archived


def test_milestones_and_numbering(home: Home) -> None:
    assert set(MILESTONES) == {10, 25, 50, 100}
    first = home.reflector.run("manual")
    second = home.reflector.run("manual")
    assert (first.id, second.id) == ("r-001", "r-002") and second.since == first.started_at
    for _ in range(8):
        home.reflector.run("manual")
    evolution = (home.settings.meta_dir / "evolution.md").read_text()
    assert evolution.count("## Reflection #") == 10
    assert "### Milestone 10: First evolution summary" in evolution and "### Milestone 9" not in evolution
    home.server.replies = [scripted({})]
    home.reflector.run("manual", home.llm())  # #11: the meta-reflection is told no milestone
    asked = [
        b["messages"][0]["content"] for b, _ in home.server.requests if "meta-reflection" in b["messages"][0]["content"]
    ]
    assert "reflection #11" in asked[-1] and "Milestone task for this reflection: None this cycle." in asked[-1]


def test_only_one_reflection_runs_per_home(home: Home) -> None:
    with home.reflector.files.claim(), pytest.raises(ReflectionBusy):
        home.reflector.run("manual")


def test_a_reflection_cut_off_while_applying_is_marked_interrupted(home: Home) -> None:
    reflection = home.reflector.run("manual")
    reflection.status = "applying"
    home.reflector.files.write(reflection)
    assert home.reflector.recover() == [reflection.id]
    assert home.reflector.get(reflection.id).status == "interrupted"
    assert any("r-001 was cut off while being applied" in line for line in home.reflector.session_lines("hi"))
    with pytest.raises(InvalidInputError, match="not pending"):
        home.reflector.resolve(reflection.id, "approve")
    closed = home.reflector.resolve(reflection.id, "reject", reason="the user has been told")
    assert closed.status == "rejected" and home.reflector.session_lines("hi") == []


def test_stored_text_in_the_summary_is_one_printable_line(home: Home) -> None:
    memory = home.memory
    with acting_as("main"):
        a = memory.save("Alarm \x1b[31mred\x1b[0m text", "x").id
        b = memory.save("Alarm \x1b[31mred\x1b[0m text", "x").id
    always = home.settings.model_copy(update={"reflection_approval": "always"})
    reflection = Reflector(always, home.dreamer, home.core).run("manual")
    assert a in reflection.summary and b in reflection.summary
    assert "\x1b" not in reflection.summary


def test_a_start_beside_a_reflection_being_applied_leaves_it_alone(home: Home) -> None:
    """The start-up check must not mark a live apply interrupted, nor fail because the lock is held."""
    reflection = home.reflector.run("manual")
    reflection.status = "applying"
    home.reflector.files.write(reflection)
    with home.reflector.files.claim():  # another process is applying it now
        assert home.reflector.recover() == []
    assert home.reflector.get(reflection.id).status == "applying"


def test_pending_reflections_are_found_without_parsing_every_record(home: Home) -> None:
    always = Reflector(home.settings.model_copy(update={"reflection_approval": "always"}), home.dreamer, home.core)
    done = home.reflector.run("manual")  # applied at once
    waiting = always.run("manual")
    assert done.status == "applied" and [r.id for r in home.reflector.pending()] == [waiting.id]
    broken = home.reflector.files.path(done.id)
    broken.write_bytes(broken.read_bytes()[:-40])  # a record past its status, torn: never parsed for this
    assert [r.id for r in home.reflector.pending()] == [waiting.id]


def test_a_dream_running_at_approval_leaves_the_reflection_pending(home: Home) -> None:
    a, b, _ = seed(home)
    home.server.replies = [scripted({"consolidation": merge_of([a, b])})]
    reflection = home.reflector.run("manual", home.llm())
    with home.dreamer.locked(), pytest.raises(DreamBusy):
        home.reflector.resolve(reflection.id, "approve")
    assert home.reflector.get(reflection.id).status == "pending"
    assert home.reflector.resolve(reflection.id, "approve").status == "approved"


def test_an_action_whose_memory_changed_since_planning_is_refused(home: Home) -> None:
    a, b, _ = seed(home)
    home.server.replies = [scripted({"consolidation": merge_of([a, b])})]
    reflection = home.reflector.run("manual", home.llm())
    home.memory.update(b, content="Every morning the user drinks green tea; the user is allergic to honey")
    done = home.reflector.resolve(reflection.id, "approve")
    assert done.actions[0].outcome is not None and "changed since the reflection read it" in done.actions[0].outcome
    assert done.resolution is not None and done.resolution.applied == {} and done.resolution.refused == 1
    assert "allergic to honey" in home.memory.get(b).content and not home.memory.get(b).archived


def test_outcomes_and_counts_follow_what_the_dream_did(home: Home) -> None:
    _, _, c = seed(home)
    home.memory.update(c, pinned=True)
    plan = {
        "archives": [{"id": c, "reason": "stale"}],  # pinned: the dream refuses it
        "creates": [{"content": "A create the consolidation pass may not make"}],
    }
    home.server.replies = [scripted({"consolidation": lambda _: plan})]
    reflection = home.reflector.run("manual", home.llm())
    assert [x.kind for x in reflection.actions] == ["archive"]  # the create is not this pass's
    assert any("1 creates left out" in n for n in reflection.not_covered)
    done = home.reflector.resolve(reflection.id, "approve")
    assert done.actions[0].outcome is not None and done.actions[0].outcome.startswith("refused: ")
    assert done.resolution is not None and done.resolution.applied == {} and done.resolution.refused == 1
    log = (home.settings.meta_dir / "reflection-log.md").read_text()
    assert "Applied: nothing; refused by the safeguards: 1" in log


class DeferredOne:
    """The proposals store as the reflection uses it: one deferred proposal, commits recorded."""

    def __init__(self) -> None:
        self.committed: list[str] = []

    def deferred(self) -> list[SimpleNamespace]:
        return [SimpleNamespace(id="p1", content="The user prefers tea")]

    def commit(self, proposal_id: str, **_: object) -> None:
        self.committed.append(proposal_id)


def test_an_automatic_reflection_never_commits_a_deferred_proposal(home: Home) -> None:
    proposals = DeferredOne()
    automatic = Reflector(home.settings, home.dreamer, home.core, proposals=proposals).run("schedule")  # type: ignore[arg-type]
    assert automatic.status == "applied" and proposals.committed == []
    assert not [x for x in automatic.actions if x.kind == "proposal"]
    assert any("1 deferred sub-agent proposals wait" in q for q in automatic.questions)
    always = home.settings.model_copy(update={"reflection_approval": "always"})
    waiting = Reflector(always, home.dreamer, home.core, proposals=proposals).run("manual")  # type: ignore[arg-type]
    assert [x.item["proposal"] for x in waiting.actions if x.kind == "proposal"] == ["p1"]
    assert proposals.committed == []
    Reflector(always, home.dreamer, home.core, proposals=proposals).resolve(waiting.id, "approve")  # type: ignore[arg-type]
    assert proposals.committed == ["p1"]
