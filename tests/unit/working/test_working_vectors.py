"""Working-memory search with embeddings: the shared hybrid ranker, vectors made at query time and cached
(bounded), saves that never touch the provider, and BM25 whenever the provider cannot help."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from rockmem_mcp.config import Settings
from rockmem_mcp.errors import EmbeddingError, EmbeddingRefused
from rockmem_mcp.vector_worker import PROBE_TEXT, Embedder
from rockmem_mcp.working.service import WorkingMemory
from rockmem_mcp.working.vectors import WorkingVectors
from tests.embedding_server import concept_vectors

T0 = datetime(2024, 5, 1, 9, 0, tzinfo=UTC)
CAT = "Whiskerino, the tabby, naps on the windowsill every afternoon"


class ConceptProvider:
    """Concept vectors; records the texts of each call; can fail or refuse texts holding a word."""

    model_id = "concepts"

    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self.failure: Exception | None = None
        self.refuse = "\x00never"

    def embed(self, texts: Sequence[str], *, interactive: bool = False) -> np.ndarray:
        if self.failure is not None:
            raise self.failure
        if any(self.refuse in text for text in texts):
            raise EmbeddingRefused("HTTP 400: this model cannot take that input")
        if list(texts) != [PROBE_TEXT]:
            self.calls.append(list(texts))
        return concept_vectors(texts)

    def embedded_keys(self) -> list[list[str]]:
        """Per call, the working-memory keys embedded (a query's call is left out)."""
        return [[t.split()[2] for t in call] for call in self.calls if call[0].startswith("session ")]


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)  # each save gets its own time
        return self.now


@pytest.fixture
def provider() -> ConceptProvider:
    return ConceptProvider()


@pytest.fixture
def vectors(settings: Settings, provider: ConceptProvider) -> WorkingVectors:
    configured = settings.model_copy(update={"embedding_model": "given"})
    return WorkingVectors(Embedder(configured, opener=lambda _: provider, clock=lambda: 0.0))


def keys(hits: list) -> list[str]:
    return [h.info.key for h in hits]


def test_with_embeddings_search_finds_a_paraphrase_keywords_miss(settings: Settings, vectors: WorkingVectors) -> None:
    working = WorkingMemory(settings, "session/s1", Clock(), vectors)
    working.save("pet-notes", CAT)
    working.save("ops-notes", "The staging deploy needs the VPN turned on first")
    working.save("money", "Quarterly taxes are due on the fifteenth")
    assert WorkingMemory(settings, "session/s1", Clock()).search("my cat") == []  # keywords alone
    hits = working.search("my cat")
    assert keys(hits) == ["session/s1/pet-notes"] and hits[0].score is not None and hits[0].score > 0
    both = working.search("vpn kitten")  # a keyword match and a meaning match, fused by the one ranker
    assert set(keys(both)) == {"session/s1/ops-notes", "session/s1/pet-notes"}


def test_saves_never_embed_and_a_search_embeds_each_version_once(
    settings: Settings, vectors: WorkingVectors, provider: ConceptProvider
) -> None:
    working = WorkingMemory(settings, "session/s1", Clock(), vectors)
    for name in ("alpha", "bravo", "charlie"):
        working.save(name, f"a note about {name}")
    assert provider.calls == []  # a save never reaches the provider
    working.search("note")
    assert provider.embedded_keys() == [["alpha", "bravo", "charlie"][::-1]]  # newest first, one call
    working.search("note")
    working.search("tabby")
    assert len(provider.embedded_keys()) == 1  # cached: later searches embed only their query
    working.save("bravo", "a note about bravo, changed")
    working.search("note")
    assert provider.embedded_keys()[-1] == ["bravo"]  # a new version is embedded again, alone


def test_the_cache_and_each_search_are_bounded(settings: Settings, provider: ConceptProvider) -> None:
    configured = settings.model_copy(update={"embedding_model": "given", "embedding_batch_size": 2})
    vectors = WorkingVectors(Embedder(configured, opener=lambda _: provider, clock=lambda: 0.0), capacity=3)
    working = WorkingMemory(configured, "session/s1", Clock(), vectors)
    for i in range(5):
        working.save(f"k{i}", f"note {i}")
    assert len(working.search("note")) == 5  # all found; the two newest got vectors this time
    assert provider.embedded_keys() == [["k4", "k3"]] and len(vectors) == 2
    working.search("note")
    working.search("note")
    assert provider.embedded_keys()[1:] == [["k2", "k1"], ["k3", "k0"]] and len(vectors) == 3  # LRU, capped


def test_a_failing_or_refusing_provider_leaves_search_on_keywords(
    settings: Settings, vectors: WorkingVectors, provider: ConceptProvider
) -> None:
    working = WorkingMemory(settings, "session/s1", Clock(), vectors)
    working.save("pet-notes", CAT)
    working.save("odd", "a tabby note with \x01 bytes")
    provider.refuse = "\x01"
    assert set(keys(working.search("tabby"))) == {"session/s1/pet-notes", "session/s1/odd"}
    assert keys(working.search("my cat")) == []  # refused together: found by keywords only...
    calls = len(provider.calls)
    working.search("tabby")
    assert len(provider.calls) == calls + 1  # ...and not asked again (only the query is embedded)
    provider.failure = EmbeddingError("unreachable")
    working.save("later", "a tabby that came later")
    assert len(working.search("tabby")) == 3
