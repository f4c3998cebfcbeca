"""Fixtures for the service tests: settings on tmp_path, a fake clock, services closed at the end."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from rockmem_mcp.config import Settings
from rockmem_mcp.services.memory import MemoryService

from .helpers import FakeClock, Services


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(home=tmp_path / "home")


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
