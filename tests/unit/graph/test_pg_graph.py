"""The knowledge graph in PostgreSQL (graph/postgres.py) against the machine's real server: GraphService over one
database from several replicas, each with its own home and index — every write seen by the others on their next
call, no twin of a name when two replicas add it at once, a merge seen whole, nothing written to a replica's home,
a fresh replica built from the rows and a restarted one caught up from its own snapshot."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from rockmem_mcp.config import Settings
from rockmem_mcp.errors import NotFoundError
from rockmem_mcp.graph.service import GraphService
from rockmem_mcp.storage.pg import Database
from tests.pg_server import database  # noqa: F401  (the fixture)

Replica = Callable[[], GraphService]


@pytest.fixture
def replica(database: str, tmp_path: Path) -> Iterator[Replica]:  # noqa: F811
    opened: list[GraphService] = []

    def start() -> GraphService:
        home = tmp_path / f"replica-{len(opened)}"
        settings = Settings.load({"home": home, "store": database}, env={"ROCKMEM_EMBEDDING_MODEL": "off"})
        graph = GraphService(settings)
        opened.append(graph)
        return graph

    yield start
    for graph in opened:
        graph.close()


def fact(graph: GraphService, subject: str, predicate: str, obj: str, confidence: float = 1.0) -> str:
    item = {"subject": subject, "predicate": predicate, "object": obj, "confidence": confidence}
    return graph.add_triples([item]).triples[0].fact.id


def test_replicas_see_each_others_graph_writes_on_their_next_call(replica: Replica) -> None:
    one, two = replica(), replica()
    alice = one.add_entities([{"name": "Alice", "aliases": ["Al"]}]).entities[0].entity
    assert two.resolve("al").id == alice.id
    again = two.add_entities([{"name": "ALICE", "aliases": ["Ally"]}]).entities[0]
    assert not again.created and again.entity.id == alice.id  # no twin across replicas
    assert one.resolve("ally").id == alice.id
    works = fact(two, "Ally", "works on", "RockBot", 0.4)
    assert [f.id for f in one.traverse("Alice").facts] == [works]
    one.add_triples([{"subject": "Alice", "predicate": "works_on", "object": "RockBot", "confidence": 0.8}])
    assert [f.confidence for f in two.get_entity("RockBot").facts] == [0.8] and len(two.triples) == 1
    assert [h.entity.name for h in two.find_entities("rockbot").results] == ["RockBot"]
    one.delete_entity("RockBot")
    assert two.get_entity("Alice").facts == [] and two.triples == {}
    with pytest.raises(NotFoundError):
        two.resolve("RockBot")
    assert two.stats() == one.stats() == {"entities": 1, "triples": 0}


def test_nothing_is_written_to_a_replicas_home_and_every_record_is_a_row(replica: Replica, database: str) -> None:  # noqa: F811
    graph = replica()
    fact(graph, "Alice", "knows", "Bob")
    assert not (graph.settings.graph_dir / "entities").exists() and not (graph.settings.graph_dir / "triples").exists()
    rows = Database(database).all("SELECT kind, count(*) FROM graph_records GROUP BY kind ORDER BY kind")
    assert rows == [("e", 2), ("t", 1)]


def test_two_replicas_adding_one_name_at_once_make_one_entity(replica: Replica) -> None:
    replicas = [replica(), replica(), replica()]
    barrier = threading.Barrier(len(replicas))
    made: list[str] = []
    errors: list[BaseException] = []

    def add(graph: GraphService) -> None:
        try:
            barrier.wait()
            for n in range(20):
                made.append(graph.add_entities([{"name": f"Project {n}"}]).entities[0].entity.id)
                fact(graph, f"Project {n}", "depends on", "Postgres")
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=add, args=(g,)) for g in replicas]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert len(set(made)) == 20  # each name made once, whichever replica asked
    for graph in replicas:
        assert graph.stats() == {"entities": 21, "triples": 20}  # no twin entity, no duplicate triple


def test_a_merge_on_one_replica_is_seen_whole_on_another(replica: Replica) -> None:
    one, two = replica(), replica()
    fact(one, "Bob", "works on", "RockBot")
    fact(one, "Robert", "works on", "RockBot", 0.5)
    fact(one, "Robert", "lives in", "Paris")
    two.stats()
    one.merge_entities("Bob", "Robert")
    assert two.resolve("Robert").name == "Bob"
    assert sorted(f.predicate for f in two.get_entity("Bob").facts) == ["lives_in", "works_on"]
    assert two.stats() == {"entities": 3, "triples": 2}


def test_a_fresh_replica_builds_from_the_rows_and_a_restarted_one_catches_up(replica: Replica) -> None:
    one = replica()
    fact(one, "Alice", "knows", "Bob")
    one.write_snapshot()
    two = replica()  # a new home: from the rows
    assert [f.predicate for f in two.traverse("Alice").facts] == ["knows"]
    fact(two, "Bob", "knows", "Carol")
    two.delete_entity("Alice")
    assert (one.settings.index_dir / "graph-snapshot.jsonl").exists()
    one.close()
    restarted = GraphService(one.settings)  # its own snapshot, then the feed since it
    try:
        assert [f.object for f in restarted.traverse("Bob").facts] == ["Carol"]
        with pytest.raises(NotFoundError):
            restarted.resolve("Alice")
    finally:
        restarted.close()


def test_a_failed_change_writes_no_row_and_reaches_no_other_replica(
    replica: Replica,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    one, two = replica(), replica()
    fact(one, "Alice", "knows", "Bob")
    two.stats()

    def refuse(*args: object, **kwargs: object) -> None:
        raise OSError("the audit trail cannot be written")

    monkeypatch.setattr(one.audit.log, "append", refuse)
    with pytest.raises(OSError):
        one.delete_entity("Alice")
    assert one.resolve("Alice") and two.resolve("Alice")  # put back on both, and the index in line
    assert one.stats() == two.stats() == {"entities": 2, "triples": 1}
