"""The memory service searches conversation memories with their context (issue 24): on by default, and
ROCKMEM_SEARCH_NEIGHBOURS / ROCKMEM_SEARCH_LIFTS switch the two levers off."""

from __future__ import annotations

from pathlib import Path

import pytest

from rockmem_mcp.config import Settings
from rockmem_mcp.memory.service import MemoryService
from tests.unit.helpers import FakeClock, Services

TURNS = [
    ("Mel", "How did the kids handle the accident?"),
    ("Caroline", "They were scared but we reassured them"),
]


def save_turns(service: MemoryService) -> None:
    for n, (speaker, text) in enumerate(TURNS, 1):
        metadata = {"session": "chat-1", "turn": str(n), "speaker": speaker, "date": "2023-05-08"}
        service.save(f"{speaker}: {text}", metadata=metadata)
    service.save("Caroline: reassured the team about the release")  # no session: ranks as it always did


@pytest.mark.parametrize(("neighbours", "answered"), [(True, True), (False, False)])
def test_the_answer_turn_is_found_through_its_question(
    tmp_path: Path, clock: FakeClock, neighbours: bool, answered: bool
) -> None:
    services = Services(Settings(home=tmp_path / "home", search_neighbours=neighbours, embedding_model="off"))
    try:
        service = services.open(clock=clock)
        save_turns(service)
        hits = service.search("kids accident", mode="bm25").results
        assert any("scared" in hit.entry.content for hit in hits) is answered
    finally:
        services.close_all()


def test_defaults_switch_both_levers_on() -> None:
    settings = Settings(home=Path("/nonexistent"))  # embeddings: the default
    assert settings.search_neighbours and settings.search_lifts
