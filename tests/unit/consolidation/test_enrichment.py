"""Save-time enrichment against a scripted chat server on loopback HTTP."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from rockmem_mcp.config import Settings
from rockmem_mcp.consolidation.enrichment import Enricher
from rockmem_mcp.consolidation.templates import Templates
from rockmem_mcp.memory.service import MemoryService
from tests.embedding_server import EmbeddingServer
from tests.unit.consolidation.test_llm_dream import chat


@pytest.fixture
def server() -> Iterator[EmbeddingServer]:
    scripted = EmbeddingServer()
    yield scripted
    scripted.close()


@pytest.fixture
def opened(settings: Settings, server: EmbeddingServer) -> Iterator[tuple[MemoryService, Enricher]]:
    configured = settings.model_copy(update={"llm_endpoint": server.url, "llm_model": "m", "llm_retries": 0})
    memory = MemoryService(configured)
    enricher = Enricher(memory, configured, Templates(configured.prompts_dir))
    yield memory, enricher
    enricher.close()
    memory.close()


def test_a_saved_memory_is_expanded_into_focused_entries(opened, server) -> None:
    memory, enricher = opened
    answer = {
        "entries": [
            {"content": "Alice leads the Falcon project", "category": "people/alice", "tags": ["falcon"]},
            {"content": "Falcon ships on 2026-12-01", "category": "project-context/falcon", "importance": 0.9},
            {"content": "Alice owns the Falcon roadmap", "category": "people/alice", "importance": 0.3},
            {"content": "Alice leads Falcon, which ships on 2026-12-01", "category": "notes"},  # the original: skipped
            {"content": "", "category": "notes"},  # invalid: skipped
        ]
    }
    server.replies = [chat(answer)]
    original = memory.save("Alice leads Falcon, which ships on 2026-12-01", "notes")
    enricher.submit(original)
    assert enricher.idle.wait(10)
    made = {e.content: e for e in memory.iter_entries() if e.id != original.id}
    assert set(made) == {
        "Alice leads the Falcon project",
        "Falcon ships on 2026-12-01",
        "Alice owns the Falcon roadmap",
    }
    assert all(e.metadata == {"source": "enrichment", "derived_from": original.id} for e in made.values())
    # derived: the base 0.5 (BASE_DERIVED), or lower when the model says so; never an agent's or a user's
    assert made["Alice leads the Falcon project"].importance == 0.5
    assert made["Falcon ships on 2026-12-01"].importance == 0.5
    assert made["Alice owns the Falcon roadmap"].importance == 0.3
    assert memory.get(original.id) == original  # never changed
    body = server.requests[0][0]
    assert body["messages"][1]["content"] == original.content and "tools" not in body  # no memory tools
    assert "Rules for using rockmem memory" in body["messages"][0]["content"]


def test_a_failing_model_loses_nothing_and_is_logged(opened, server, caplog: pytest.LogCaptureFixture) -> None:
    memory, enricher = opened
    server.replies = [lambda body: (500, {"error": "down"})]
    with caplog.at_level(logging.WARNING):
        original = memory.save("The user prefers tabs", "user-preferences")
        enricher.submit(original)
        assert enricher.idle.wait(10)
    assert [e.id for e in memory.iter_entries()] == [original.id]
    assert any("could not enrich memory" in r.getMessage() and original.id in r.getMessage() for r in caplog.records)


def test_the_settings_decide_whether_to_enrich(settings: Settings) -> None:
    assert not Enricher.wanted(settings)
    assert Enricher.wanted(settings.model_copy(update={"llm_endpoint": "http://x", "llm_model": "m"}))
