"""Helpers for the service tests: a fake clock, a service opener that closes what it opened."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from rockmem_mcp.config import Settings
from rockmem_mcp.services.memory import MemoryService

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

    def open(self, settings: Settings | None = None, clock: FakeClock | None = None) -> MemoryService:
        service = MemoryService(settings or self.settings, clock=clock or FakeClock())
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
