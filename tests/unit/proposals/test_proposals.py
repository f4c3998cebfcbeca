"""Gated writes (seed 004 §13): proposals filed by sub-agents, conflicts, the main agent's review, audit actors."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from rockmem_mcp.audit.service import Audit
from rockmem_mcp.config import Settings
from rockmem_mcp.consolidation.compaction import Compactor
from rockmem_mcp.conversation.service import ConversationMemory
from rockmem_mcp.errors import InvalidInputError, WritesGatedError
from rockmem_mcp.models import RoutedMemory
from rockmem_mcp.proposals.service import Proposals, committing, conflicting, gates, subject_and_value
from tests.unit.recall.test_remembering import Home, open_home

SUB = {"namespace": "subagent/researcher", "gated_writes": True}


@pytest.fixture
def base(tmp_path: Path) -> Settings:
    return Settings(home=tmp_path / "home", audit_git=False, encode_driver="rules", embedding_model="off")


@pytest.fixture
def main(base: Settings) -> Iterator[Home]:
    opened = open_home(base)
    yield opened
    opened.procedures.close()
    opened.graph.close()
    opened.memory.close()


def review(home: Home, **settings: object) -> Proposals:
    """The main agent's Proposals on `home` (a commit writes through its stores)."""
    changed = home.settings.model_copy(update=settings)
    return Proposals(changed, Audit(changed), home.remembering.write)


def sub_agent(base: Settings, name: str = "researcher", **settings: object) -> Proposals:
    changed = base.model_copy(update={**SUB, "namespace": f"subagent/{name}", **settings})
    return Proposals(changed, Audit(changed))


def audit_lines(home: Home, action: str) -> list[tuple[str, str, str]]:
    return [
        (line.actor, line.approval, line.summary) for line in Audit(home.settings).log.lines() if line.action == action
    ]


# ---------------------------------------------------------------------------------------------- conflicts
@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("Project deadline is March 15", "Project deadline is March 30"),
        ("The project deadline is March 15.", "project deadline: March 30"),
        ("Alice's team size = 4", "Alice's team size is 5"),
        ("The API base URL is https://a.example", "the api base url is https://b.example"),
    ],
)
def test_same_subject_and_attribute_with_another_value_conflicts(a: str, b: str) -> None:
    assert conflicting(a, b) and conflicting(b, a)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("Project deadline is March 15", "The project deadline is March 15."),  # the same value
        ("Project deadline is March 15", "Project budget is 10k"),  # another attribute
        ("User prefers tea", "User prefers coffee"),  # no copula: not this rule's to judge
        ("Deadline is March 15", "A very long sentence that happens to say something is about a deadline"),
    ],
)
def test_same_value_another_subject_or_no_copula_does_not_conflict(a: str, b: str) -> None:
    assert not conflicting(a, b)


def test_the_subject_loses_its_article_and_the_value_its_punctuation() -> None:
    assert subject_and_value("The project deadline is March 15.") == ("project deadline", "march 15")
    assert subject_and_value("no copula here") is None


# ---------------------------------------------------------------------------------------------- proposing
def test_only_a_subagent_namespace_with_the_setting_is_gated(base: Settings) -> None:
    assert gates(base.model_copy(update=SUB))
    # Seed 004 §13.1 by default: a sub-agent is gated unless RockBot's direct writes are asked for
    assert gates(base.model_copy(update={"namespace": "subagent/researcher"}))
    assert not gates(base.model_copy(update={"namespace": "subagent/researcher", "gated_writes": False}))
    assert not gates(base.model_copy(update={"gated_writes": True, "namespace": "patrol/nightly"}))
    assert not gates(base.model_copy(update={"gated_writes": True}))
    with pytest.raises(WritesGatedError, match="save_memory or remember"):
        sub_agent(base).refuse("add_triples")


def test_a_proposal_is_durable_audited_and_rendered(main: Home, base: Settings) -> None:
    filed = sub_agent(base).propose(
        "User prefers academic sources", trigger="save_memory", entities=["preference--source-quality"]
    )
    assert review(main).pending() == [filed]
    assert filed.from_agent == "researcher" and filed.status == "pending"
    [(actor, approval, summary)] = audit_lines(main, "PROPOSE")
    assert (actor, approval) == ("subagent:researcher", "pending") and filed.id in summary
    text = (base.meta_dir / "pending-memories.md").read_text()
    assert text.count("## Proposal #") == 1
    assert f"## Proposal #{filed.id}\n- **From**: researcher" in text
    assert "- **Entities**: [preference--source-quality]" in text and "- **Status**: pending" in text


def test_contradicting_proposals_are_both_marked_with_cross_references(main: Home, base: Settings) -> None:
    first = sub_agent(base, "researcher").propose("Project deadline is March 15", trigger="t")
    second = sub_agent(base, "coder").propose("Project deadline is March 30", trigger="t")
    other = sub_agent(base, "coder").propose("Project budget is 10k", trigger="t")
    first = review(main).get(first.id)
    assert (first.status, first.conflict_with) == ("conflict", [second.id])
    assert (second.status, second.conflict_with) == ("conflict", [first.id])
    assert review(main).get(other.id).status == "pending"
    text = (base.meta_dir / "pending-memories.md").read_text()
    assert f"## Proposal #{first.id} ⚠️ CONFLICT with #{second.id}" in text
    assert f"## Proposal #{second.id} ⚠️ CONFLICT with #{first.id}" in text
    assert f"- **Status**: conflict — see #{first.id}" in text
    assert text.count("## Proposal #") == 3


def test_resolving_one_side_of_a_conflict_frees_the_other(main: Home, base: Settings) -> None:
    first = sub_agent(base).propose("Project deadline is March 15", trigger="t")
    second = sub_agent(base, "coder").propose("Project deadline is March 30", trigger="t")
    review(main).reject(first.id, "the coder read the newer plan")
    freed = review(main).get(second.id)
    assert (freed.status, freed.conflict_with) == ("pending", [])
    assert first.id in freed.reason and "rejected" in freed.reason
    assert "CONFLICT" not in (base.meta_dir / "pending-memories.md").read_text()


def test_heal_makes_a_one_sided_conflict_mark_agree(main: Home, base: Settings) -> None:
    first = sub_agent(base).propose("Project deadline is March 15", trigger="t")
    second = sub_agent(base, "coder").propose("Project deadline is March 30", trigger="t")
    proposals = review(main)
    # What a kill between the two records' writes leaves: the older one not marked yet.
    proposals.files.write(proposals.get(first.id).model_copy(update={"status": "pending", "conflict_with": []}))
    lone = sub_agent(base).propose("Budget is 10k", trigger="t")  # a mark naming a proposal no longer there
    proposals.files.write(lone.model_copy(update={"status": "conflict", "conflict_with": ["0" * 13]}))
    assert proposals.heal() == 2
    assert (proposals.get(first.id).status, proposals.get(first.id).conflict_with) == ("conflict", [second.id])
    assert (proposals.get(lone.id).status, proposals.get(lone.id).conflict_with) == ("pending", [])
    assert proposals.heal() == 0
    assert "conflict marks made to agree" in audit_lines(main, "EDIT")[-1][2]


# ---------------------------------------------------------------------------------------------- review
def test_commit_writes_the_suggested_store_as_bot_commit_from(main: Home, base: Settings) -> None:
    filed = sub_agent(base).propose_save("User's timezone is Europe/Berlin", "user-preferences/timezone", ["tz"])
    done = review(main).commit(filed.id)
    assert done.status == "committed" and done.committed_as[0].startswith("memory:")
    entry = main.memory.get(done.committed_as[0].removeprefix("memory:"))
    assert entry.category == "user-preferences/timezone" and entry.metadata["proposal"] == filed.id
    assert main.memory.search("timezone Berlin").results[0].entry.id == entry.id
    [(actor, approval, summary)] = audit_lines(main, "COMMIT")
    assert (actor, approval) == ("bot:commit-from:researcher", "approved") and filed.id in summary
    assert any(a == "bot:commit-from:researcher" for a, _, _ in audit_lines(main, "CREATE"))  # the memory's line
    assert review(main).pending() == []
    assert filed.id not in (base.meta_dir / "pending-memories.md").read_text()


def test_commit_to_another_store_than_suggested(main: Home, base: Settings) -> None:
    filed = sub_agent(base).propose("Deployed the release to staging at noon", trigger="t", store="semantic")
    done = review(main).commit(filed.id, store="episodic")
    assert [w.split(":")[0] for w in done.committed_as] == ["episode"]
    assert main.memory_count() == 0 and main.episode_count() == 1
    assert "as episodic" in audit_lines(main, "COMMIT")[0][2]


def test_reject_needs_a_reason_and_keeps_the_record(main: Home, base: Settings) -> None:
    filed = sub_agent(base).propose("A duplicate fact", trigger="t")
    with pytest.raises(InvalidInputError, match="reason is required"):
        review(main).reject(filed.id, " ")
    done = review(main).reject(filed.id, "duplicate")
    assert (done.status, done.reason) == ("rejected", "duplicate")
    assert review(main).get(filed.id).status == "rejected" and review(main).pending() == []
    assert audit_lines(main, "REJECT") == [("main", "auto", f"rejected proposal #{filed.id} — duplicate")]
    with pytest.raises(InvalidInputError, match="already rejected"):
        review(main).commit(filed.id)
    assert main.memory_count() == 0


def test_defer_leaves_it_for_reflection(main: Home, base: Settings) -> None:
    filed = sub_agent(base).propose("Maybe the user likes jazz", trigger="t", confidence="low")
    review(main).defer(filed.id, "unsure")
    assert review(main).pending() == [] and [p.id for p in review(main).deferred()] == [filed.id]
    assert review(main).commit(filed.id).status == "committed"  # the reflection engine's later commit


def test_a_subagent_cannot_decide(main: Home, base: Settings) -> None:
    filed = sub_agent(base).propose("A fact", trigger="t")
    with pytest.raises(InvalidInputError, match="only the main agent"):
        sub_agent(base).reject(filed.id, "no")


def test_manual_mode_commits_only_with_the_users_confirmation(main: Home, base: Settings) -> None:
    filed = sub_agent(base).propose("A fact worth keeping", trigger="t")
    with pytest.raises(InvalidInputError, match="user_confirmed"):
        review(main, proposal_review="manual").commit(filed.id)
    assert review(main, proposal_review="manual").commit(filed.id, user_confirmed=True).status == "committed"


def test_a_rules_commit_of_a_decided_proposal_is_refused(main: Home, base: Settings) -> None:
    filed = sub_agent(base).propose("A fact", trigger="t")
    review(main).reject(filed.id, "wrong")
    with pytest.raises(InvalidInputError, match="already rejected"):
        review(main).commit(filed.id, approval="auto")  # the reflection engine's commit checks too
    with pytest.raises(InvalidInputError, match="user_confirmed"):  # manual mode: a rule does not confirm either
        review(main, proposal_review="manual").commit(sub_agent(base).propose("B", trigger="t").id, approval="auto")


def test_the_settings_come_from_the_environment(tmp_path: Path) -> None:
    env = {
        "ROCKMEM_GATED_WRITES": "1",
        "ROCKMEM_PROPOSAL_REVIEW": "auto",
        "ROCKMEM_TRUSTED_AGENTS": "researcher, coder",
        "ROCKMEM_AUTO_COMMIT_CONFIDENCE": "medium",
        "ROCKMEM_NAMESPACE": "subagent/coder",
    }
    settings = Settings.load({"home": tmp_path}, env=env)
    assert settings.trusted_agents == ["researcher", "coder"] and settings.auto_commit_confidence == "medium"
    assert gates(settings) and settings.proposal_review == "auto"
    assert Settings.load({"home": tmp_path}, env={}).proposal_review == "batch"


def test_auto_mode_commits_trusted_agents_at_the_confidence(main: Home, base: Settings) -> None:
    auto = {"proposal_review": "auto", "trusted_agents": ["researcher"]}
    changed = base.model_copy(update={**SUB, **auto})
    proposer = Proposals(changed, Audit(changed), main.remembering.write)  # the sub-agent's process commits
    high = proposer.propose("The user's editor is Helix", trigger="t", confidence="high")
    medium = proposer.propose("The user may like Rust", trigger="t", confidence="medium")
    assert high.status == "committed" and medium.status == "pending"
    coder = base.model_copy(update={**SUB, **auto, "namespace": "subagent/coder"})
    untrusted = Proposals(coder, Audit(coder), main.remembering.write).propose("X is 1", trigger="t", confidence="high")
    assert untrusted.status == "pending"
    [(actor, approval, _)] = audit_lines(main, "COMMIT")
    assert (actor, approval) == ("bot:commit-from:researcher", "auto")


def test_the_main_sessions_first_recall_lists_open_proposals(main: Home, base: Settings) -> None:
    assert review(main).session_lines() == []
    first = sub_agent(base).propose("Project deadline is March 15", trigger="t")
    sub_agent(base, "coder").propose("Project deadline is March 30", trigger="t")
    lines = review(main).session_lines()
    assert lines[0].startswith("Memory proposals from sub-agents") and len(lines) == 3
    assert lines[1].startswith(f"- #{first.id} from researcher → semantic (medium): Project deadline is March 15")
    assert "⚠️ conflict with #" in lines[1]
    assert sub_agent(base).session_lines() == []  # not in a sub-agent's session
    assert review(main, proposal_review="auto").session_lines() == lines  # what no rule committed waits as in batch


# ---------------------------------------------------------------------------------------------- the gate's paths
def test_a_gated_remember_files_a_proposal_and_writes_nothing(base: Settings) -> None:
    gated = open_home(base.model_copy(update=SUB))
    try:
        proposals = Proposals(gated.settings, gated.memory.audit, gated.remembering.write)
        gated.remembering.propose = proposals.propose_route
        done = gated.remembering.remember("Remember that Alice is my manager")
        assert done.proposal is not None and "main agent reviews" in done.note
        assert gated.memory_count() == 0 and gated.episode_count() == 0
        assert proposals.get(done.proposal).trigger == "remember (routed by rules)"
    finally:
        gated.procedures.close()
        gated.graph.close()
        gated.memory.close()


def test_a_core_route_is_proposed_as_core_worthy(main: Home, base: Settings) -> None:
    routed = RoutedMemory(store="core", summary="The user is Sam", confidence="high")
    done = sub_agent(base).propose_route("The user is Sam", routed, "agent")
    filed = review(main).get(done.proposal or "")
    assert (filed.store, filed.core_worthy, filed.confidence) == ("semantic", True, "high")


def test_a_gated_compaction_proposes_its_facts_and_logs_no_episode(base: Settings) -> None:
    settings = base.model_copy(update={**SUB, "conversation_window": 6})
    gated = open_home(settings)
    try:
        proposals = Proposals(settings, gated.memory.audit, gated.remembering.write)
        compactor = Compactor(ConversationMemory(settings, compacted=True), gated.memory, gated.episodes, settings)
        compactor.propose_fact = proposals.propose_fact
        for n in range(8):
            compactor.record("s1", "user", f"My locker code is 447{n}.")
        assert gated.memory_count() == 0 and gated.episode_count() == 0
        filed = proposals.pending()
        assert filed and "My locker code is 4470." in [p.content for p in filed]
        assert all(p.trigger == "conversation compaction (s1)" for p in filed)
    finally:
        gated.procedures.close()
        gated.graph.close()
        gated.memory.close()


def test_a_commit_cut_off_after_its_write_is_not_written_twice(
    main: Home, base: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    filed = sub_agent(base).propose("The user prefers academic sources", trigger="t")
    first = committing(main.settings, main.remembering)

    def killed(*_: object, **__: object) -> None:
        raise KeyboardInterrupt("killed between the write and the record")

    monkeypatch.setattr(first, "_decide", killed)
    with pytest.raises(KeyboardInterrupt):
        first.commit(filed.id)
    assert first.get(filed.id).open and first.get(filed.id).committing_at is not None
    monkeypatch.undo()
    again = committing(main.settings, main.remembering).commit(filed.id)  # the next process commits it
    written = [h.entry.id for h in main.memory.search("academic sources").results]
    assert len(written) == 1 and again.committed_as == [f"memory:{written[0]}"]
    assert again.status == "committed" and again.committing_at is None
