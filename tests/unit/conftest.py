"""Fixtures for the service tests: settings on tmp_path, a fake clock, services closed at the end."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from rockmem_mcp.config import Settings
from rockmem_mcp.graph.service import GraphService
from rockmem_mcp.memory.service import MemoryService
from tests.unit.helpers import FakeClock, Opener, Services


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    # Embeddings off: these tests pin keyword search and the stores; the ones about vectors bring their own
    # provider (test_embedding.embedder_for), and the bundled default has its own tests there.
    return Settings(home=tmp_path / "home", embedding_model="off")


@pytest.fixture
def services(settings: Settings) -> Iterator[Services]:
    opened = Services(settings)
    yield opened
    opened.close_all()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def service(services: Services, clock: FakeClock) -> MemoryService:
    return services.open(clock=clock)


@pytest.fixture
def opener(settings: Settings, clock: FakeClock) -> Iterator[Opener]:
    opened: list[GraphService] = []

    def make(clock_: FakeClock | None = None) -> GraphService:
        graph = GraphService(settings, clock=clock_ or clock)
        opened.append(graph)
        return graph

    yield make
    for graph in opened:
        graph.close()


@pytest.fixture
def graph(opener: Opener) -> GraphService:
    return opener()
