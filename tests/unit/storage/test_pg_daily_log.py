"""The conversation log in PostgreSQL (storage/pg_daily_log.py) against the machine's real server: turns recorded on
two replicas are one log, read in order with positions, consumed up to a mark (what came after stays)."""

from __future__ import annotations

from pathlib import Path

from rockmem_mcp.config import Settings
from rockmem_mcp.conversation.service import ConversationMemory, consume_log, conversation_log, read_log
from tests.pg_server import database  # noqa: F401  (the fixture)


def replica_settings(tmp_path: Path, name: str, store: str) -> Settings:
    env = {"ROCKMEM_EMBEDDING_MODEL": "off", "ROCKMEM_CONVERSATION_LOG": "true"}
    return Settings.load({"home": tmp_path / name, "store": store}, env=env)


def test_replicas_share_one_conversation_log(database: str, tmp_path: Path) -> None:  # noqa: F811
    a_settings, b_settings = replica_settings(tmp_path, "a", database), replica_settings(tmp_path, "b", database)
    a, b = ConversationMemory(a_settings), ConversationMemory(b_settings)
    a.record("s1", "user", "I prefer tea in the morning")
    b.record("s2", "user", "Please answer in French")
    a.record("s1", "assistant", "Noted: tea")
    logged = read_log(b_settings)  # what a dream on either replica reads
    assert [turn.content for turn, _ in logged] == [
        "I prefer tea in the morning", "Please answer in French", "Noted: tea"
    ]  # fmt: skip
    through = logged[1][1]
    b.record("s2", "assistant", "D'accord")  # after the read: stays for the next pass
    consume_log(a_settings, through)
    assert [turn.content for turn, _ in read_log(b_settings)] == ["Noted: tea", "D'accord"]
    log = conversation_log(a_settings)
    day = log.days()[0]
    assert log.remove_where(day, lambda turn: turn.role == "assistant") == 2
    assert read_log(a_settings) == []
    assert not list((tmp_path / "a").rglob("*.jsonl"))  # in the database, not the homes


def test_feedback_on_one_replica_is_every_replicas_learning(database: str, tmp_path: Path) -> None:  # noqa: F811
    from rockmem_mcp.conversation.feedback import FeedbackLog
    from rockmem_mcp.core.learnings import Learnings
    from rockmem_mcp.memory.service import MemoryService

    a_settings, b_settings = replica_settings(tmp_path, "a", database), replica_settings(tmp_path, "b", database)
    recorded = FeedbackLog(a_settings).record("Correction", "Use metric units, not imperial", "s1")
    b_log = FeedbackLog(b_settings)
    assert [f.id for f in b_log.recent()] == [recorded.id]
    memory = MemoryService(b_settings, embed_in_background=False)
    try:
        learnings = Learnings(b_log, memory, b_settings)
        assert "Use metric units, not imperial" in learnings.markdown("corrections")
        FeedbackLog(a_settings).record("ToolFailure", "grep timed out on the monorepo", "s1")
        assert "grep timed out on the monorepo" in learnings.markdown("errors")  # the day's log changed: re-read
    finally:
        memory.close()
    assert not list((tmp_path / "a").rglob("feedback/*.jsonl"))


def test_a_proposal_filed_on_one_replica_is_reviewed_from_another(database: str, tmp_path: Path) -> None:  # noqa: F811
    from rockmem_mcp.audit.service import Audit
    from rockmem_mcp.proposals.service import Proposals

    def proposals(name: str, namespace: str | None = None) -> Proposals:
        env = {"ROCKMEM_EMBEDDING_MODEL": "off"}
        settings = Settings.load({"home": tmp_path / name, "store": database, "namespace": namespace}, env=env)
        return Proposals(settings, Audit(settings))

    scout = proposals("a", "subagent/scout")  # a gated sub-agent's replica
    filed = scout.propose_save("The staging cluster is in eu-west-2")
    lead = proposals("b")  # the main agent's replica
    assert [p.id for p in lead.pending()] == [filed.id]
    rejected = lead.reject(filed.id, "wrong region")
    assert rejected.status == "rejected" and scout.get(filed.id).status == "rejected"
    assert (tmp_path / "b" / "meta" / "pending-memories.md").exists()  # the readable view, in each home
    assert not list((tmp_path / "a").rglob("meta/proposals/*.json"))  # the records are in the database


def test_a_procedure_learned_through_one_replica_is_offered_by_another(database: str, tmp_path: Path) -> None:  # noqa: F811
    from rockmem_mcp.procedures.service import Procedures

    a = Procedures(replica_settings(tmp_path, "a", database))
    b = Procedures(replica_settings(tmp_path, "b", database))
    try:
        saved = a.save("Deploy the site", ["deploy"], ["build", "push", "check the health page"])
        assert [p.name for _, p in b.search("deploy the site", 3)] == ["Deploy the site"]
        b.save("Deploy the site", ["deploy"], ["build", "push", "check the health page", "announce it"],
               version=saved.version)  # fmt: skip
        assert a.get("Deploy the site").steps[-1] == "announce it"  # the other replica's change, read
        a.archive("Deploy the site")
        assert b.list() == [] and b.get("Deploy the site").archived
        assert not list((tmp_path / "a").rglob("procedures/*.json"))
    finally:
        a.close()
        b.close()
