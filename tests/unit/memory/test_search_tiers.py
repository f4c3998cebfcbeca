"""The three-tier settings (ROCKMEM_SEARCH_TIERS, _TIER_CATEGORIES, _TIER_RULE) reach MemoryService.search."""

from __future__ import annotations

from pathlib import Path

import pytest

from rockmem_mcp.config import Settings
from rockmem_mcp.errors import ConfigError
from rockmem_mcp.memory.service import MemoryService
from tests.unit.helpers import Services

MEMORIES = [  # the best keyword match alone in `notes`; three weaker ones in `home/yard`
    ("garden garden garden tomatoes", "notes"),
    ("garden fence painted", "home/yard"),
    ("garden shed roof", "home/yard"),
    ("garden hose broken", "home/yard"),
]


def filled(services: Services, settings: Settings) -> MemoryService:
    service = services.open(settings=settings)
    for content, category in MEMORIES:
        service.save(content, category)
    return service


def top_contents(service: MemoryService, limit: int = 3) -> list[str]:
    return [r.entry.content for r in service.search("garden", limit=limit, mode="bm25").results]


def test_tiers_are_off_by_default(tmp_path: Path) -> None:
    settings = Settings.load({"home": tmp_path}, env={})
    assert (settings.search_tiers, settings.search_tier_categories, settings.search_tier_rule) == (False, 3, "max")


def test_the_environment_switches_tiers_on_and_search_honours_them(tmp_path: Path) -> None:
    env = {"ROCKMEM_SEARCH_TIERS": "true", "ROCKMEM_SEARCH_TIER_CATEGORIES": "1", "ROCKMEM_SEARCH_TIER_RULE": "top3"}
    tiered_settings = Settings.load({"home": tmp_path / "tiered"}, env=env)
    flat_settings = Settings.load({"home": tmp_path / "flat"}, env={})
    services = Services(flat_settings)
    try:
        flat = filled(services, flat_settings)
        tiered = filled(services, tiered_settings)
        assert top_contents(flat)[0] == "garden garden garden tomatoes"
        # top3 over 1 category: home/yard's three matches outweigh the single note.
        assert sorted(top_contents(tiered)) == ["garden fence painted", "garden hose broken", "garden shed roof"]
        # Tier 3: past home/yard's three, the flat search fills the rest.
        assert top_contents(tiered, limit=4)[3] == "garden garden garden tomatoes"
        assert tiered.search("garden", limit=3, mode="bm25").total_matches == 4
    finally:
        services.close_all()


def test_an_unknown_tier_rule_is_a_config_error_naming_the_choices(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"ROCKMEM_SEARCH_TIER_RULE.*'max', 'top3', 'sum', 'mean' or 'centroid'"):
        Settings.load({"home": tmp_path}, env={"ROCKMEM_SEARCH_TIER_RULE": "best"})
