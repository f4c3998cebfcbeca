"""migrate-store's last part (home/store_migration.py): the stores a backup does not carry — conversation turns,
proposals, reflections with their log, dream reports, forgotten items, permanent deletes, uses and the audit trail
with its digests — go from a file home to the machine's PostgreSQL and back to another home, each record intact,
and a record the target already holds is left as it is."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from rockmem_mcp.audit.retention import ARCHIVE_NAME, DigestDocuments
from rockmem_mcp.audit.service import Audit
from rockmem_mcp.config import Settings
from rockmem_mcp.consolidation.dream_reports import report_store
from rockmem_mcp.consolidation.reflection import reflection_store
from rockmem_mcp.consolidation.shapes import DreamReport, Reflection
from rockmem_mcp.conversation.service import conversation_log
from rockmem_mcp.governance.forgetting import forgotten_store
from rockmem_mcp.governance.forgotten_files import ForgottenRecord
from rockmem_mcp.home.store_migration import STORES, migrate_records
from rockmem_mcp.memory.service import MemoryService
from rockmem_mcp.models import ConversationTurn, Episode
from rockmem_mcp.proposals.service import proposal_store
from rockmem_mcp.proposals.shapes import Proposal
from rockmem_mcp.storage.access_log import Access
from tests.pg_server import database  # noqa: F401  (the fixture)

AT = datetime(2026, 11, 20, 9, 30, tzinfo=UTC)


@pytest.fixture
def sides(tmp_path: Path, database: str) -> Iterator[dict[str, MemoryService]]:  # noqa: F811
    env = {"ROCKMEM_EMBEDDING_MODEL": "off"}
    opened = {
        "first": MemoryService(Settings.load({"home": tmp_path / "first"}, env=env), embed_in_background=False),
        "store": MemoryService(
            Settings.load({"home": tmp_path / "replica", "store": database}, env=env), embed_in_background=False
        ),
        "second": MemoryService(Settings.load({"home": tmp_path / "second"}, env=env), embed_in_background=False),
    }
    yield opened
    for service in opened.values():
        service.close()


def seed(settings: Settings) -> None:
    conversation_log(settings).append(ConversationTurn(session_id="s1", role="user", content="I prefer tea", at=AT),
                                      AT.date())  # fmt: skip
    proposal = Proposal(id="019ab2c3d4e5f", from_agent="researcher", time=AT, trigger="save_memory",
                        store="semantic", content="The deploy window is Tuesday")  # fmt: skip
    proposal_store(settings).create(proposal)
    reflections = reflection_store(settings)
    reflections.write(Reflection(id="r-001", number=1, trigger="manual", mode="deterministic", status="applied",
                                 needs_approval=False, started_at=AT))  # fmt: skip
    reflections.append_log("## r-001\nNothing to change.")
    report_store(settings).write(DreamReport(id="20261120T093000Z", dream_pass="decay", mode="deterministic",
                                             dry_run=False, started_at=AT))  # fmt: skip
    episode = Episode(id="0a1b2c3d4e5f", at=AT, type="fact", confidence="medium", tags=[], source="conversation",
                      content="An old address")  # fmt: skip
    forgotten = forgotten_store(settings)
    forgotten.write(ForgottenRecord(id=f"episode:{episode.id}", store="episode", at=AT, text=episode.content,
                                    episodes=[episode]), episode.id)  # fmt: skip
    forgotten.log_deleted(AT, "memory", "memory:9f8e7d6c5b4a", "my old phone number", "the user asked")
    Audit(settings).record("CREATE", settings.home / "memory" / "x.json", "a memory")
    DigestDocuments(settings).write(ARCHIVE_NAME, b"# Audit Digest - October 2026\n")


def test_every_store_goes_to_the_database_and_back_record_for_record(sides: dict[str, MemoryService]) -> None:
    first, store, second = sides["first"], sides["store"], sides["second"]
    seed(first.settings)
    first.reinforcer.adopt([("episode", "0a1b2c3d4e5f", Access(4, AT.timestamp()))])
    there = migrate_records(first.settings, store.settings, first.reinforcer, store.reinforcer)
    assert there.differing == []
    assert {name: n for name, n in there.moved.items() if n} == {
        "conversation turns": 1, "proposals": 1, "reflections": 2, "dream reports": 1, "forgotten items": 1,
        "permanent deletes": 1, "audit lines": 2, "uses": 1,
    }  # fmt: skip  # reflections: the record and its log; audit: the line and the digest
    back = migrate_records(store.settings, second.settings, store.reinforcer, second.reinforcer)
    assert back.differing == []
    for name, read, _ in STORES:
        assert read(second.settings).keys() >= read(first.settings).keys(), name
    assert second.reinforcer.copy("episode")["0a1b2c3d4e5f"] == Access(4, AT.timestamp())
    assert not list((store.settings.home / "meta").glob("reflections/*.json"))  # the database's rows, not files


def test_a_record_the_target_holds_is_left_as_it_is(sides: dict[str, MemoryService]) -> None:
    first, store = sides["first"], sides["store"]
    seed(first.settings)
    reflection_store(store.settings).put_text(reflection_store(store.settings).log_file, "# Reflection Log\nmine\n")
    again = migrate_records(first.settings, store.settings, first.reinforcer, store.reinforcer)
    twice = migrate_records(first.settings, store.settings, first.reinforcer, store.reinforcer)
    assert again.differing == [] and twice.differing == []  # the log is the target's own; nothing else is missing
    assert again.kept == ["reflections reflection-log.md: the target has its own, kept"]  # and said so
    assert {name: n for name, n in twice.moved.items() if n} == {}  # nothing twice
    store_reflections = reflection_store(store.settings)
    assert store_reflections.read_text(store_reflections.log_file, 1000) == "# Reflection Log\nmine\n"
