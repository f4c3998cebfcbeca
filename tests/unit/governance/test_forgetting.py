"""Forgetting across every store: find (changes nothing), soft forget and restore, permanent delete with its log
line, per-item errors, a pinned memory, a core line changed meanwhile, entities and their triples."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from rockmem_mcp.config import Settings
from rockmem_mcp.core.service import CoreMemory
from rockmem_mcp.episodes.service import Episodes
from rockmem_mcp.errors import InvalidInputError, NotFoundError
from rockmem_mcp.governance.forgetting import REASON, Forgetting, parse_id
from rockmem_mcp.governance.forgotten_files import line_hash
from rockmem_mcp.graph.service import GraphService
from rockmem_mcp.memory.service import MemoryService
from rockmem_mcp.procedures.service import Procedures
from rockmem_mcp.tokens import estimate_tokens
from tests.unit.helpers import FakeClock, Opener

CORE_LINE = "- Sister: Anna, lives in Lisbon"


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """Every use counts (no interval between two counted uses), so a find that counted one would show it."""
    return Settings(home=tmp_path / "home", reinforce_interval_s=0, embedding_model="off")


@dataclass
class World:
    settings: Settings
    memory: MemoryService
    episodes: Episodes
    procedures: Procedures
    graph: GraphService
    core: CoreMemory
    forgetting: Forgetting
    ids: dict[str, str]


@pytest.fixture
def world(settings: Settings, service: MemoryService, opener: Opener, clock: FakeClock) -> Iterator[World]:
    episodes = Episodes(settings, clock=clock, reinforcer=service.reinforcer)
    procedures = Procedures(settings, service.reinforcer, clock)
    graph = opener()
    core = CoreMemory(settings, service)
    forgetting = Forgetting(settings, service, episodes, procedures, lambda: graph, core, clock)
    memory = service.save("My sister Anna lives in Lisbon", category="family", tags=["family"])
    logged = episodes.log_save(memory)
    episode = episodes.record("Visited Anna in Lisbon for her birthday", type="event")
    procedures.save("visit anna", ["visit anna"], ["Book a flight to Lisbon", "Bring a gift"])
    graph.add_triples([{"subject": "Anna", "predicate": "lives_in", "object": "Lisbon"}])
    anna = graph.resolve("Anna")
    core.edit("append", "Identity", core.read().version, CORE_LINE)
    service.save("The office coffee machine is broken")  # matches nothing below
    ids = {
        "memory": f"memory:{memory.id}",
        "logged": logged.id,
        "episode": f"episode:{episode.id}",
        "procedure": "procedure:visit-anna",
        "entity": f"entity:{anna.id}",
        "core": f"core:Identity:{line_hash(CORE_LINE)}",
    }
    yield World(settings, service, episodes, procedures, graph, core, forgetting, ids)


def stores_on_disk(settings: Settings) -> dict[str, bytes]:
    home = settings.home
    found = {}
    for folder in ("memory", "episodes", "procedures", "knowledge-graph", "forgotten"):
        for path in sorted((home / folder).rglob("*")):
            if path.is_file() and not path.name.startswith("."):
                found[str(path.relative_to(home))] = path.read_bytes()
    found["MEMORY.md"] = settings.core_file.read_bytes()
    return found


def visible(world: World) -> dict[str, bool]:
    """Whether each item of the world is found where a user would look for it."""
    found_memories = {h.entry.id for h in world.memory.search("Anna Lisbon").results}
    found_episodes = {h.episode.id for h in world.episodes.search("Anna Lisbon").hits}
    lines = [line for block in world.core.read().blocks for line in block.lines]
    entities = {h.entity.id for h in world.graph.find_entities("Anna").results}
    lisbon = world.graph.traverse("Lisbon")
    return {
        "memory": world.ids["memory"].split(":")[1] in found_memories,
        "logged": world.ids["logged"] in found_episodes,
        "episode": world.ids["episode"].split(":")[1] in found_episodes,
        "procedure": [p.slug for _, p in world.procedures.search("visit Anna")] == ["visit-anna"],
        "entity": world.ids["entity"].split(":")[1] in entities and len(lisbon.facts) == 1,
        "core": CORE_LINE in lines,
    }


ALL_VISIBLE = dict.fromkeys(("memory", "logged", "episode", "procedure", "entity", "core"), True)
NONE_VISIBLE = dict.fromkeys(ALL_VISIBLE, False)
FORGETTABLE = ("memory", "episode", "procedure", "entity", "core")


def test_find_lists_matches_from_every_store_best_first_and_changes_nothing(world: World) -> None:
    before = stores_on_disk(world.settings)
    uses = world.memory.get(world.ids["memory"].split(":")[1]).reinforcement_count
    found = world.forgetting.find("Anna in Lisbon")
    lisbon = f"entity:{world.graph.resolve('Lisbon').id}"
    # save_memory's episode is left out: the memory speaks for it
    assert {c.id for c in found} == {*(world.ids[name] for name in FORGETTABLE), lisbon}
    assert [c.score for c in found] == sorted((c.score for c in found), reverse=True)
    by_store = {c.store: c for c in found}
    assert by_store["core"].text == f"Identity: {CORE_LINE}" and by_store["core"].score == 1.0
    assert by_store["memory"].text == "My sister Anna lives in Lisbon"
    assert all(len(c.text) <= 200 for c in found)
    assert stores_on_disk(world.settings) == before
    assert world.memory.get(world.ids["memory"].split(":")[1]).reinforcement_count == uses
    for kind in ("memory", "episode", "entity", "triple", "procedure"):  # no use counted, in memory or on disk
        assert not world.memory.reinforcer.accesses(kind), kind
    assert [c.store for c in world.forgetting.find("coffee machine")] == ["memory"]
    assert len(world.forgetting.find("Anna", limit=2)) == 2


def test_a_soft_forget_hides_every_store_and_restore_brings_it_all_back(world: World, settings: Settings) -> None:
    assert visible(world) == ALL_VISIBLE
    memory_id = world.ids["memory"].split(":")[1]
    episode_before = world.episodes.get(world.ids["episode"].split(":")[1])
    triple_before = world.graph.traverse("Lisbon").facts[0]
    result = world.forgetting.forget([world.ids[name] for name in FORGETTABLE], reason="user asked")
    assert [item.ok for item in result.items] == [True] * 5, result.items
    assert visible(world) == NONE_VISIBLE
    archived = world.memory.get(memory_id)
    assert archived.archived_at is not None and archived.archive_reason == "user asked"
    assert world.procedures.get("visit-anna").archived
    with pytest.raises(NotFoundError):
        world.graph.get_entity("Anna")
    assert (settings.forgotten_dir / "graph" / f"{world.ids['entity'].split(':')[1]}.json").exists()
    assert (settings.forgotten_dir / "core" / f"identity-{line_hash(CORE_LINE)}.json").exists()
    listed = world.forgetting.forgotten()
    assert sorted(item.id for item in listed) == sorted(world.ids[name] for name in FORGETTABLE)
    assert [item.at for item in listed] == sorted((item.at for item in listed), reverse=True)
    assert [c.text for c in world.forgetting.find("Anna Lisbon")] == ["entity Lisbon (concept; 0 triple(s))"]

    restored = world.forgetting.restore([world.ids[name] for name in FORGETTABLE])
    assert [item.ok for item in restored.items] == [True] * 5, restored.items
    assert visible(world) == ALL_VISIBLE
    assert world.memory.get(memory_id).archived_at is None
    assert world.episodes.get(episode_before.id) == episode_before  # same id, same time
    assert world.graph.traverse("Lisbon").facts[0].id == triple_before.id
    assert world.forgetting.forgotten() == []
    assert not settings.forgotten_dir.exists() or not any(p.is_file() for p in settings.forgotten_dir.rglob("*"))


def test_permanent_delete_removes_the_files_and_logs_a_line_each(world: World, settings: Settings) -> None:
    world.forgetting.forget([world.ids["episode"]])  # soft-forgotten first: erased from the forgotten record too
    result = world.forgetting.forget([world.ids[name] for name in FORGETTABLE], permanent=True, reason="gone")
    assert [item.ok for item in result.items] == [True] * 5, result.items
    memory_id = world.ids["memory"].split(":")[1]
    with pytest.raises(NotFoundError):
        world.memory.get(memory_id)
    with pytest.raises(NotFoundError):
        world.procedures.get("visit-anna")
    with pytest.raises(NotFoundError):
        world.graph.resolve("Anna")
    assert world.graph.stats() == {"entities": 1, "triples": 0}  # Lisbon stays, the fact went with Anna
    assert visible(world) == NONE_VISIBLE
    assert world.forgetting.forgotten() == []
    lines = [json.loads(line) for line in (settings.meta_dir / "forget.log").read_text().splitlines()]
    assert [(line["store"], line["id"], line["reason"]) for line in lines] == [
        (name, world.ids[name], "gone") for name in FORGETTABLE
    ]
    # ids, reasons and a hash: never the text the user asked to be gone (issue 45)
    assert all(len(line["sha256"]) == 16 and line["at"] and "summary" not in line for line in lines)
    assert "Anna" not in (settings.meta_dir / "forget.log").read_text()
    again = world.forgetting.forget([world.ids["memory"]], permanent=True)
    assert not again.items[0].ok and len((settings.meta_dir / "forget.log").read_text().splitlines()) == 5


def test_unknown_and_malformed_ids_are_reported_per_item_and_the_rest_happen(world: World) -> None:
    bad = ["nonsense", "memory:not an id!", "memory:abcdef123456", "core:Nowhere:1a2b3c4d", "entity:Nobody"]
    result = world.forgetting.forget([*bad, world.ids["memory"]])
    assert [item.ok for item in result.items] == [False] * 5 + [True]
    assert "forget takes the ids a find returns" in result.items[0].done
    assert "invalid memory id" in result.items[1].done
    assert "abcdef123456" in result.items[2].done
    assert "core:Persona:1a2b3c4d" in result.items[3].done
    assert "no entity named 'Nobody'" in result.items[4].done
    assert world.memory.get(world.ids["memory"].split(":")[1]).archived_at is not None
    restored = world.forgetting.restore(["episode:abcdef123456"])
    assert not restored.items[0].ok and "is not forgotten" in restored.items[0].done


def test_a_pinned_memory_is_forgotten_because_the_user_confirmed_it(world: World) -> None:
    pinned = world.memory.save("Anna's flat door code is 4412", pinned=True)
    result = world.forgetting.forget([f"memory:{pinned.id}"])
    assert result.items[0].ok and "it was pinned" in result.items[0].done
    assert world.memory.get(pinned.id).archive_reason == REASON
    assert world.forgetting.restore([f"memory:{pinned.id}"]).items[0].ok
    back = world.memory.get(pinned.id)
    assert back.archived_at is None and back.pinned


def test_a_core_line_keeps_its_id_when_lines_move_and_a_changed_line_is_not_forgotten(world: World) -> None:
    core = world.core
    # A line comes before it: it moves from line 1 to line 2, and its id stays.
    core.edit("replace_block", "Identity", core.read().version, f"- Name: Alice\n{CORE_LINE}")
    assert world.forgetting.forget([world.ids["core"]]).items[0].ok
    assert CORE_LINE not in core.read("Identity").blocks[0].lines
    assert world.forgetting.restore([world.ids["core"]]).items[0].ok
    assert core.read("Identity").blocks[0].lines[-1] == CORE_LINE  # appended back
    view = core.read("Identity")
    at = view.blocks[0].lines.index(CORE_LINE) + 1
    core.edit("replace_line", "Identity", view.version, "- Sister: Anna, lives in Porto now", line=at)
    result = world.forgetting.forget([world.ids["core"]])
    assert not result.items[0].ok and "changed or went" in result.items[0].done
    assert "- Sister: Anna, lives in Porto now" in core.read("Identity").blocks[0].lines


def test_a_core_edit_between_the_read_and_the_removal_is_retried_once(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    core = world.core
    edit = core.edit
    raced: list[str] = []

    def racing_edit(
        action: str, block: str, version: str, text: str | None = None, line: int | None = None, **audit: Any
    ):
        if not raced:  # another agent edits another block just before ours lands
            raced.append(version)
            edit("append", "Persona", version, "- Likes brevity")
        return edit(action, block, version, text, line, **audit)

    monkeypatch.setattr(core, "edit", racing_edit)
    result = world.forgetting.forget([world.ids["core"]])
    assert result.items[0].ok, result.items
    lines = [line for block in core.read().blocks for line in block.lines]
    assert CORE_LINE not in lines and "- Likes brevity" in lines


def test_a_core_line_that_no_longer_fits_is_refused_on_restore_and_stays_forgotten(world: World) -> None:
    assert world.forgetting.forget([world.ids["core"]]).items[0].ok
    core = world.core
    lines: list[str] = []
    while estimate_tokens("\n".join([*lines, "- filler line"])) <= core.caps["Identity"]:
        lines.append("- filler line")
    core.edit("replace_block", "Identity", core.read().version, "\n".join(lines))
    result = world.forgetting.restore([world.ids["core"]])
    assert not result.items[0].ok and "cap" in result.items[0].done
    assert [item.id for item in world.forgetting.forgotten()] == [world.ids["core"]]


def test_a_failed_step_undoes_the_item(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(world.memory, "delete", broken)
    result = world.forgetting.forget([world.ids["memory"], world.ids["episode"]])
    assert [item.ok for item in result.items] == [False, True]
    assert "No space left" in result.items[0].done
    assert [item.id for item in world.forgetting.forgotten()] == [world.ids["episode"]]
    assert visible(world)["memory"] and visible(world)["logged"]


def test_an_entity_whose_name_was_taken_meanwhile_is_not_restored(world: World) -> None:
    assert world.forgetting.forget([world.ids["entity"]]).items[0].ok
    world.graph.add_entities([{"name": "anna", "type": "person"}])
    result = world.forgetting.restore([world.ids["entity"]])
    assert not result.items[0].ok and "merge or delete that one first (graph)" in result.items[0].done
    assert [item.id for item in world.forgetting.forgotten()] == [world.ids["entity"]]


def test_a_triple_between_two_forgotten_entities_comes_back_with_the_second(world: World) -> None:
    lisbon = world.graph.resolve("Lisbon")
    assert world.forgetting.forget([world.ids["entity"], f"entity:{lisbon.id}"]).items[1].ok
    assert world.graph.stats() == {"entities": 0, "triples": 0}
    first = world.forgetting.restore([world.ids["entity"]]).items[0]
    assert first.ok and "1 more come back when the other entity is restored" in first.done
    assert world.graph.stats() == {"entities": 1, "triples": 0}
    assert world.forgetting.restore([f"entity:{lisbon.id}"]).items[0].ok
    assert [f.object for f in world.graph.traverse("Anna").facts] == ["Lisbon"]


def test_ids_are_parsed_by_store() -> None:
    assert parse_id("core:critical  facts:1a2b3c4d") == ("core", "Critical Facts:1a2b3c4d")
    assert parse_id("procedure:Visit Anna") == ("procedure", "visit-anna")
    assert parse_id("MEMORY:abc123") == ("memory", "abc123")


def test_an_empty_query_says_what_to_pass(world: World) -> None:
    with pytest.raises(InvalidInputError, match="say what the user wants forgotten"):
        world.forgetting.find("  ")


def test_the_log_survives_a_torn_last_line(world: World, settings: Settings) -> None:
    settings.meta_dir.mkdir(parents=True, exist_ok=True)
    (settings.meta_dir / "forget.log").write_bytes(b'{"torn": ')
    assert world.forgetting.forget([world.ids["procedure"]], permanent=True).items[0].ok
    lines = (settings.meta_dir / "forget.log").read_text().splitlines()
    assert json.loads(lines[-1])["id"] == "procedure:visit-anna"


def test_a_find_that_must_not_wait_leaves_out_episodes_while_their_index_is_built(world: World) -> None:
    episodes = Episodes(world.settings, reinforcer=world.memory.reinforcer)  # a fresh process: nothing indexed yet
    forgetting = Forgetting(
        world.settings, world.memory, episodes, world.procedures, lambda: world.graph, world.core
    )  # fmt: skip
    holding, release = threading.Event(), threading.Event()

    def build() -> None:  # the server's start-up warm-up, holding the index while it reads every day
        with episodes.index.lock:
            holding.set()
            release.wait(timeout=60)  # a find that waits (the bug) gets the index after this, and fails below

    builder = threading.Thread(target=build)
    builder.start()
    holding.wait()
    try:
        stores = {c.store for c in forgetting.find("Anna Lisbon", wait=False)}
    finally:
        release.set()
        builder.join()
    assert "episode" not in stores and {"memory", "core", "entity"} <= stores
    assert "episode" in {c.store for c in forgetting.find("Anna Lisbon")}


def test_forgetting_an_entity_for_good_leaves_other_entities_triples_and_their_lines_alone(world: World) -> None:
    """Review finding: an entity's name is redacted in its own triples' files and lines only. "Anna" forgotten for
    good, "Anna Maria" (another entity, whose name starts with it) keeps her triple and its audit line."""
    world.graph.add_triples([{"subject": "Anna Maria", "predicate": "works_at", "object": "Porto Labs"}])
    other = world.graph.resolve("Anna Maria")
    other_triple = world.graph.get_entity(other.id).facts[0].id
    assert world.forgetting.forget([world.ids["entity"]], permanent=True).items[0].ok
    triple_file = world.settings.graph_dir / "triples" / f"{other_triple}.json"
    log = (world.settings.meta_dir / "audit.log").read_text()
    lines = [line for line in log.splitlines() if f"triples/{other_triple}.json" in line]
    assert lines and all("Anna Maria" in line and "forgotten sha256" not in line for line in lines), lines
    assert triple_file.exists() and world.graph.get_entity("Anna Maria").facts[0].object == "Porto Labs"
