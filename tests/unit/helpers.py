"""Helpers for the service tests: a fake clock, a fake embedding provider, a service opener that closes
what it opened."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta

import numpy as np

from rockmem_mcp.config import Settings
from rockmem_mcp.errors import EmbeddingRefused
from rockmem_mcp.graph.service import GraphService
from rockmem_mcp.memory.service import MemoryService
from rockmem_mcp.vector_worker import PROBE_TEXT, Embedder
from tests.embedding_server import hashed_vectors

Opener = Callable[..., GraphService]  # opens a GraphService (closed at the end of the test)

T0 = datetime(2024, 5, 1, 9, 0, tzinfo=UTC)


class FakeClock:
    """Returns `now`, then moves it on by `step`, so successive entries get distinct, ordered times."""

    def __init__(self, start: datetime = T0, step: timedelta = timedelta(seconds=1)) -> None:
        self.now, self.step = start, step

    def __call__(self) -> datetime:
        now = self.now
        self.now += self.step
        return now


class Services:
    """Opens MemoryService instances and closes whichever are still open when the test ends."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._open: list[MemoryService] = []

    def open(
        self,
        settings: Settings | None = None,
        clock: FakeClock | None = None,
        embedder: Embedder | None = None,
        embed_in_background: bool = True,
    ) -> MemoryService:
        service = MemoryService(
            settings or self.settings,
            clock=clock or FakeClock(),
            embedder=embedder,
            embed_in_background=embed_in_background,
        )
        self._open.append(service)
        return service

    def close(self, service: MemoryService) -> None:
        self._open.remove(service)
        service.close()

    def close_all(self) -> None:
        while self._open:
            self.close(self._open[-1])


def entry_files(settings: Settings) -> list[str]:
    """Every entry file under memory/, relative, sorted (temp files included: none should linger)."""
    root = settings.memory_dir
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


class FakeProvider:
    """An embedding provider with bag-of-words vectors; it records calls, can fail, and can hold back
    background (non-interactive) calls until `gate` is set."""

    def __init__(self, model_id: str = "fake-a", dim: int = 64, gate: threading.Event | None = None) -> None:
        self.model_id, self.dim, self.gate = model_id, dim, gate
        self.calls: list[tuple[list[str], bool]] = []
        self.failure: Exception | None = None
        self.dim_override: int | None = None  # answer with this many dims instead (a misbehaving endpoint)
        self.refuse: tuple[str, ...] = ()  # a batch holding a text with one of these words is refused (HTTP 4xx)

    def embed(self, texts: Sequence[str], *, interactive: bool = False) -> np.ndarray:
        self.calls.append((list(texts), interactive))
        if self.failure is not None:
            raise self.failure
        if any(word in text for text in texts for word in self.refuse):
            raise EmbeddingRefused("HTTP 400: input too long for this model")
        if self.gate is not None and not interactive:
            assert self.gate.wait(30), "the test never opened the gate"
        return hashed_vectors(texts, self.dim_override or self.dim)

    def document_calls(self) -> list[str]:
        """Texts embedded for entries (the probe excluded)."""
        return [t for texts, interactive in self.calls if not interactive for t in texts if t != PROBE_TEXT]
