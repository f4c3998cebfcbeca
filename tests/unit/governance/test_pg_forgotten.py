"""What a soft forget keeps, in PostgreSQL (governance/forgotten_postgres.py), against the machine's real server: an
episode and an entity forgotten through one replica are listed and restored through another, and a permanent delete's
line is in the store's one forget log."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from rockmem_mcp.config import Settings
from rockmem_mcp.core.service import CoreMemory
from rockmem_mcp.episodes.service import Episodes
from rockmem_mcp.errors import NotFoundError
from rockmem_mcp.governance.forgetting import Forgetting
from rockmem_mcp.graph.service import GraphService
from rockmem_mcp.memory.service import MemoryService
from rockmem_mcp.procedures.service import Procedures
from tests.pg_server import database  # noqa: F401  (the fixture)


@pytest.fixture
def replicas(database: str, tmp_path: Path) -> Iterator[list[Forgetting]]:  # noqa: F811
    closing: list[object] = []
    made = []
    for name in ("a", "b"):
        settings = Settings.load({"home": tmp_path / name, "store": database}, env={"ROCKMEM_EMBEDDING_MODEL": "off"})
        memory = MemoryService(settings, embed_in_background=False)
        graph = GraphService(settings, reinforcer=memory.reinforcer)
        episodes = Episodes(settings, reinforcer=memory.reinforcer)
        procedures = Procedures(settings, memory.reinforcer)
        made.append(Forgetting(settings, memory, episodes, procedures, lambda g=graph: g, CoreMemory(settings, memory)))
        closing += [graph, memory]
    yield made
    for service in closing:
        service.close()  # type: ignore[attr-defined]


def test_what_one_replica_forgets_another_lists_and_restores(replicas: list[Forgetting]) -> None:
    a, b = replicas
    episode = a.episodes.record("Visited Anna in Lisbon for her birthday", type="event")
    a._graph().add_triples([{"subject": "Anna", "predicate": "lives_in", "object": "Lisbon"}])
    anna = b._graph().resolve("Anna")
    done = a.forget([f"episode:{episode.id}", f"entity:{anna.id}"])
    assert all(item.ok for item in done.items), done
    assert {item.id for item in b.forgotten()} == {f"episode:{episode.id}", f"entity:{anna.id}"}
    with pytest.raises(NotFoundError):
        b._graph().resolve("Anna")
    back = b.restore([f"episode:{episode.id}", f"entity:{anna.id}"])
    assert all(item.ok for item in back.items), back
    assert a._graph().resolve("Anna").id == anna.id and [f.object for f in a._graph().traverse("Anna").facts]
    assert a.episodes.get(episode.id).content == "Visited Anna in Lisbon for her birthday"
    assert a.forgotten() == [] and not list(a.settings.home.rglob("forgotten/**/*.json"))


def test_a_permanent_delete_is_logged_once_in_the_store(replicas: list[Forgetting]) -> None:
    a, b = replicas
    episode = a.episodes.record("The old address was 12 Elm Street", type="fact")
    assert a.forget([f"episode:{episode.id}"], permanent=True, reason="moved house").items[0].ok
    assert [(line["store"], line["id"], line["reason"]) for line in b.files.deleted()] == [
        ("episode", f"episode:{episode.id}", "moved house")
    ]
