"""Episodes in PostgreSQL (storage/pg_daily_log.py with its change rows, search/episode_index.py following them)
against the machine's real server: episodes recorded on any replica are found on every other by their next search,
a delete on one is gone from all, appends racing on several replicas are all indexed (the feed is ordered where row
numbers are not), a fresh replica reads every row, and nothing is written to a replica's home."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from rockmem_mcp.config import Settings
from rockmem_mcp.episodes.service import Episodes
from tests.pg_server import database  # noqa: F401  (the fixture)

Replica = Callable[[], Episodes]


@pytest.fixture
def replica(database: str, tmp_path: Path) -> Iterator[Replica]:  # noqa: F811
    opened: list[Episodes] = []

    def start() -> Episodes:
        home = tmp_path / f"replica-{len(opened)}"
        settings = Settings.load({"home": home, "store": database}, env={"ROCKMEM_EMBEDDING_MODEL": "off"})
        episodes = Episodes(settings)
        opened.append(episodes)
        return episodes

    yield start
    for episodes in opened:
        episodes.close()


def found(episodes: Episodes, query: str) -> list[str]:
    return sorted(hit.episode.content for hit in episodes.search(query, limit=500).hits)


def test_an_episode_recorded_on_one_replica_is_found_on_another(replica: Replica) -> None:
    one, two = replica(), replica()
    assert found(two, "deploy") == []  # built (empty) before the others write
    first = one.record("We chose to deploy on Fridays", type="decision")
    two.record("The deploy failed at noon", type="event")
    assert (
        found(one, "deploy") == found(two, "deploy") == ["The deploy failed at noon", "We chose to deploy on Fridays"]
    )
    assert two.get(first.id).content == "We chose to deploy on Fridays"
    day = first.at.date()
    assert [e.content for e in two.on(day)] == ["We chose to deploy on Fridays", "The deploy failed at noon"]
    assert "We chose to deploy on Fridays" in two.markdown(day)
    assert not list(one.settings.home.rglob("*.jsonl"))  # rows in the database, not day files


def test_a_delete_on_one_replica_is_gone_from_every_replicas_search(replica: Replica) -> None:
    one, two = replica(), replica()
    kept = one.record("Alice prefers tea")
    gone = one.record("Alice prefers coffee")
    assert found(two, "alice prefers") == ["Alice prefers coffee", "Alice prefers tea"]
    two.remove(gone.id)
    assert found(one, "alice prefers") == found(two, "alice prefers") == ["Alice prefers tea"]
    assert one.put_back(gone)  # a restore on one: back on both
    assert found(two, "alice prefers") == ["Alice prefers coffee", "Alice prefers tea"]
    assert two.get(kept.id).id == kept.id


def test_appends_racing_on_three_replicas_are_all_indexed_everywhere(replica: Replica) -> None:
    watcher = replica()
    writers = [replica() for _ in range(3)]
    assert found(watcher, "storm") == []
    errors: list[BaseException] = []
    barrier = threading.Barrier(len(writers) * 2)

    def write(episodes: Episodes, name: str) -> None:
        try:
            barrier.wait()
            for n in range(25):
                episodes.record(f"storm {name} {n}")
                if n % 5 == 0:
                    episodes.search("storm")  # follow while the others still write
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(w, f"{i}-{t}")) for i, w in enumerate(writers) for t in "ab"]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    for episodes in (watcher, *writers):
        assert len(found(episodes, "storm")) == 150
    assert sum(count for _, count in replica().days()) == 150  # a fresh replica reads every row


def test_an_episode_on_an_older_day_is_found_by_its_period(replica: Replica) -> None:
    one, two = replica(), replica()
    assert found(two, "launch") == []
    one.record("The launch slipped a week", at=datetime(2025, 3, 4, 12, tzinfo=UTC))
    hits = two.search(None, since=datetime(2025, 3, 4, tzinfo=UTC), until=datetime(2025, 3, 5, tzinfo=UTC))
    assert [h.episode.content for h in hits.hits] == ["The launch slipped a week"]


def test_a_searchs_hits_are_read_from_the_database_in_one_query(
    replica: Replica, monkeypatch: pytest.MonkeyPatch
) -> None:
    one = replica()
    for n in range(8):
        one.record(f"lighthouse log entry {n}")
    assert len(found(one, "lighthouse")) == 8  # the index is built and followed
    calls: list[int] = []
    real = one.log.read_rows  # type: ignore[attr-defined]

    def counted(rows: list[int]) -> object:
        calls.append(len(rows))
        return real(rows)

    monkeypatch.setattr(one.log, "read_rows", counted)
    assert len(one.search("lighthouse", limit=5).hits) == 5
    assert calls == [5]  # not a round trip per hit
