"""Shared test setup: no test may touch the real user data directory."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _isolated_rockmem_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROCKMEM_HOME", str(tmp_path_factory.mktemp("rockmem-home")))
