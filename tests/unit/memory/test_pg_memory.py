"""Long-term memories in PostgreSQL (storage/pg.py, memory/postgres.py) against the machine's real server: the
schema applied once when replicas start together, and MemoryService over one database from several replicas,
each with its own home and index: read-your-writes, moves, archives, deletes, no lost update, a fresh replica
built from the rows and a restarted one caught up from its snapshot."""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from rockmem_mcp.config import Settings
from rockmem_mcp.errors import NotFoundError, StorageError
from rockmem_mcp.memory.service import MemoryService
from rockmem_mcp.storage.access_log import Access
from rockmem_mcp.storage.pg import MIGRATIONS, Database, redacted
from rockmem_mcp.storage.pg_id_locks import LostLockError
from tests.pg_server import database  # noqa: F401  (the fixture)

Replica = Callable[[], MemoryService]


@pytest.fixture
def replica(database: str, tmp_path: Path) -> Iterator[Replica]:  # noqa: F811
    opened: list[MemoryService] = []

    def start() -> MemoryService:
        home = tmp_path / f"replica-{len(opened)}"
        settings = Settings.load({"home": home, "store": database}, env={"ROCKMEM_EMBEDDING_MODEL": "off"})
        service = MemoryService(settings, embed_in_background=False)
        opened.append(service)
        return service

    yield start
    for service in opened:
        service.close()


def contents(service: MemoryService, query: str) -> list[str]:
    return [hit.entry.content for hit in service.search(query).results]


def test_the_schema_is_applied_once_when_replicas_start_together(database: str) -> None:  # noqa: F811
    results: list[object] = []

    def start() -> None:
        try:
            results.append(Database(database))
        except Exception as exc:  # reported below
            results.append(exc)

    threads = [threading.Thread(target=start) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(isinstance(r, Database) for r in results), results
    epochs = {r.epoch for r in results}  # type: ignore[union-attr]
    assert len(epochs) == 1
    db = results[0]
    assert isinstance(db, Database)
    assert db.all("SELECT version FROM rockmem_schema") == [(v,) for v, _ in MIGRATIONS]
    assert db.migrate() == 0  # idempotent
    for r in results:
        r.close()  # type: ignore[union-attr]


def test_a_save_on_one_replica_is_found_by_another_at_once(replica: Replica) -> None:
    a, b = replica(), replica()
    saved = a.save("Ada drinks green tea", "people/ada", ["tea"])
    assert contents(b, "green tea") == ["Ada drinks green tea"]  # read-your-writes across replicas
    assert b.get(saved.id).tags == ["tea"]

    b.update(saved.id, content="Ada drinks black tea", category="people/ada-lovelace")  # a move between categories
    assert a.get(saved.id).category == "people/ada-lovelace"
    assert contents(a, "black tea") == ["Ada drinks black tea"] and contents(a, "green") == []
    assert [c.category for c in a.categories().categories if c.entries] == ["people/ada-lovelace"]

    a.delete(saved.id)  # archived
    assert b.get(saved.id).archived and contents(b, "tea") == []
    b.update(saved.id, restore=True)
    assert not a.get(saved.id).archived

    a.delete(saved.id, permanent=True)  # an acknowledged delete stays deleted everywhere
    with pytest.raises(NotFoundError):
        b.get(saved.id)
    with pytest.raises(NotFoundError):
        b.update(saved.id, content="brought back by a stale replica")
    assert contents(b, "tea") == []


def test_concurrent_updates_of_one_memory_from_two_replicas_lose_nothing(replica: Replica) -> None:
    a, b = replica(), replica()
    saved = a.save("Bob keeps bees")
    rounds = 25

    def tagger() -> None:
        for i in range(rounds):
            a.update(saved.id, tags=[f"t{i}"])

    def refiler() -> None:
        for i in range(rounds):
            b.update(saved.id, category=f"people/bob-{i}")

    threads = [threading.Thread(target=tagger), threading.Thread(target=refiler)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for service in (a, b):
        final = service.get(saved.id)
        assert final.tags == [f"t{rounds - 1}"] and final.category == f"people/bob-{rounds - 1}"
    assert contents(a, "bees") == contents(b, "bees") == ["Bob keeps bees"]


def test_a_new_replica_builds_from_the_rows_and_a_restarted_one_catches_up(replica: Replica, tmp_path: Path) -> None:
    a = replica()
    ids = [a.save(f"fact number {i} about otters").id for i in range(30)]
    fresh = replica()
    assert len(fresh.index) == 30 and len(contents(fresh, "otters")) == 20  # a search's default limit
    home = a.settings.home
    a.close()  # writes its snapshot: (epoch, seq) of the change feed
    fresh.update(ids[0], content="the first otter moved to the river")
    fresh.delete(ids[1], permanent=True)
    settings = Settings.load({"home": home, "store": a.settings.store}, env={"ROCKMEM_EMBEDDING_MODEL": "off"})
    again = MemoryService(settings, embed_in_background=False)
    try:
        assert again.get(ids[0]).content == "the first otter moved to the river"
        assert ids[1] not in again.index and len(again.index) == 29
    finally:
        again.close()


def test_an_unreachable_store_is_one_line_without_its_password(tmp_path: Path) -> None:
    url = "postgresql://rockmem:s3cret-pass@127.0.0.1:1/nowhere"
    assert redacted(url) == "postgresql://rockmem@127.0.0.1:1/nowhere"
    assert redacted("postgresql://u@h/db?password=s3cret&sslmode=require") == "postgresql://u@h/db?…"
    for odd in ("postgresql://u:pa/ss@h:5432/db", "postgresql://u:s3cret@h:notaport/db"):
        assert "pa/ss" not in redacted(odd) and "s3cret" not in redacted(odd)
    settings = Settings.load({"home": tmp_path / "h", "store": url}, env={"ROCKMEM_EMBEDDING_MODEL": "off"})
    with pytest.raises(StorageError) as refused:
        MemoryService(settings, embed_in_background=False)
    assert str(refused.value) == "cannot reach the shared store (the server's log says why)"  # no address


def test_a_new_replica_starts_from_the_snapshot_another_kept_in_the_database(replica: Replica, caplog) -> None:
    a = replica()
    ids = [a.save(f"note {i} about herons").id for i in range(40)]
    a.write_snapshot()  # kept in the home and in the database
    a.update(ids[0], content="the first heron flew south")  # after the snapshot: replayed from the feed
    a.delete(ids[1], permanent=True)
    with caplog.at_level("INFO", logger="rockmem_mcp.memory.service"):
        b = replica()
    assert any("index snapshot taken from the store" in r.getMessage() for r in caplog.records)
    assert not any("indexed" in r.getMessage() and "memories from" in r.getMessage() for r in caplog.records)
    assert len(b.index) == 39 and ids[1] not in b.index
    assert contents(b, "flew south") == ["the first heron flew south"]
    assert a.settings.store is not None
    from rockmem_mcp.storage.pg import Database

    db = Database(a.settings.store)
    try:
        (seq,) = db.one("SELECT seq FROM snapshots WHERE name = 'memory-index.npz'")
        assert seq > 0
    finally:
        db.close()


def test_one_dream_at_a_time_across_replicas(replica: Replica) -> None:
    from rockmem_mcp.consolidation.dream import DreamBusy, Dreamer
    from rockmem_mcp.consolidation.templates import Templates
    from rockmem_mcp.graph.service import GraphService

    dreamers = []
    for memory in (replica(), replica()):
        graph = GraphService(memory.settings)
        dreamers.append((Dreamer(memory, graph, memory.settings, Templates(memory.settings.prompts_dir)), graph))
    (first, _), (second, _) = dreamers
    try:
        with first.locked(), pytest.raises(DreamBusy, match="another replica is dreaming on this store"):
            second.run_deterministic()
        assert second.run_deterministic().mode == "deterministic"  # released with the first's run
    finally:
        for _, graph in dreamers:
            graph.close()


def test_vectors_are_kept_in_the_database_and_embedded_once_for_every_replica(database: str, tmp_path: Path) -> None:  # noqa: F811
    from tests.embedding_server import EmbeddingServer, local_embedder, model_reply

    server = EmbeddingServer()
    server.replies = [model_reply(local_embedder())]
    env = {"ROCKMEM_EMBEDDING_ENDPOINT": server.url, "ROCKMEM_EMBEDDING_MODEL": "test-embedder"}
    opened: list[MemoryService] = []
    try:

        def start(name: str) -> MemoryService:
            settings = Settings.load({"home": tmp_path / name, "store": database}, env=env)
            opened.append(MemoryService(settings, embed_in_background=False))
            return opened[-1]

        a = start("a")
        for text in ("green tea in the morning", "a bicycle with red wheels", "the tea ceremony"):
            a.save(text)
        assert a.vector_worker.drain() == 3
        embedded = len(server.requests)
        b = start("b")  # a new replica: the vectors are in the database already
        b.vector_worker.drain()
        later = [text for body, _ in server.requests[embedded:] for text in body["input"]]
        assert later in ([], ["rockmem embedding probe"])  # at most the model's probe: no memory embedded again
        assert b.missing_vector_count() == 0
        found = b.search("tea drinking", mode="vector").results
        assert {hit.entry.content for hit in found[:2]} == {"green tea in the morning", "the tea ceremony"}
        assert not list((tmp_path / "a").rglob("*.bin"))  # not in the homes
    finally:
        for service in opened:
            service.close()
        server.close()


def test_a_serving_replica_is_woken_by_another_replicas_write(database: str, tmp_path: Path) -> None:  # noqa: F811
    """LISTEN/NOTIFY as the wake-up: an idle serving replica follows another's save without being asked."""
    import time

    env = {"ROCKMEM_EMBEDDING_MODEL": "off"}
    idle = MemoryService(Settings.load({"home": tmp_path / "idle", "store": database}, env=env))  # a server's
    writer = MemoryService(
        Settings.load({"home": tmp_path / "w", "store": database}, env=env), embed_in_background=False
    )
    try:
        assert len(idle.index) == 0
        writer.save("Kim moved the standup to 9:15")
        deadline = time.monotonic() + 10
        while len(idle.index) == 0 and time.monotonic() < deadline:  # len() reads nothing: only the wake-up
            time.sleep(0.01)
        assert len(idle.index) == 1
    finally:
        writer.close()
        idle.close()


def test_a_row_and_its_change_are_one_transaction(replica: Replica) -> None:
    """The row write itself records the change (no separate step that a failure or a crash could skip)."""
    a, b = replica(), replica()
    entry = a.save("Lena keeps the keys")
    assert contents(b, "keys") == ["Lena keeps the keys"]
    changed = entry.model_copy(update={"content": "Lena keeps the spare keys"})
    a.files.write(changed)  # the row alone, as if the process died right after: the change is there already
    assert b.get(entry.id).content == "Lena keeps the spare keys"
    assert contents(b, "spare keys") == ["Lena keeps the spare keys"]


def test_a_feed_behind_a_replicas_position_is_a_gap(replica: Replica, database: str, tmp_path: Path) -> None:  # noqa: F811
    """A database restored from a backup: its feed restarts below what a replica's snapshot records, which
    must rebuild rather than wait for the numbers to catch up."""
    import psycopg

    home = tmp_path / "restarted"
    settings = Settings.load({"home": home, "store": database}, env={"ROCKMEM_EMBEDDING_MODEL": "off"})
    a = MemoryService(settings, embed_in_background=False)
    for i in range(5):
        a.save(f"ledger line {i}")
    a.close()  # its snapshot records the position (seq 5)
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute("DELETE FROM changes")
        conn.execute("ALTER SEQUENCE changes_seq_seq RESTART WITH 1")
    b = replica()
    late = b.save("written after the restore")  # seq 1: below a's position
    again = MemoryService(settings, embed_in_background=False)
    try:
        assert again.get(late.id).content == "written after the restore"
        assert len(again.index) == 6 and contents(again, "restore") == ["written after the restore"]
    finally:
        again.close()


def test_old_changes_are_pruned_and_a_replica_behind_them_starts_from_the_stores_snapshot(
    database: str,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from rockmem_mcp.storage import pg_changes

    monkeypatch.setattr(pg_changes, "KEEP_CHANGES", 2)
    env = {"ROCKMEM_EMBEDDING_MODEL": "off"}
    late_settings = Settings.load({"home": tmp_path / "late", "store": database}, env=env)
    late = MemoryService(late_settings, embed_in_background=False)  # its snapshot: the empty store, at seq 0
    late.close()
    a = MemoryService(Settings.load({"home": tmp_path / "a", "store": database}, env=env), embed_in_background=False)
    try:
        ids = [a.save(f"harbour note {i}").id for i in range(10)]
        a.write_snapshot()  # kept in the store at seq 10
        a.journal.rotate()  # prunes the changes up to 8
        assert a.files.db.one("SELECT count(*) FROM changes") == (2,)
        position = a.journal.end()
        assert a.journal.read_since(type(position)(position.generation, 3)).gap  # behind the mark: told
        again = MemoryService(late_settings, embed_in_background=False)  # its own snapshot is behind the mark
        try:
            assert len(again.index) == 10 and again.get(ids[0]).content == "harbour note 0"
        finally:
            again.close()
    finally:
        a.close()


def test_uses_on_one_replica_weigh_in_every_replicas_salience(replica: Replica) -> None:
    """The access log is the store's (storage/pg_access_log.py): a use flushed by one replica is seen by another,
    and by a replica started afterwards, and the larger count wins whichever replica flushes last."""
    one, two = replica(), replica()
    two.reinforcer._reader.every_s = 0  # type: ignore[union-attr]  # asks at every read (by default once a second)
    entry = one.save("Alice prefers green tea")
    one.reinforcer.settings = one.settings.model_copy(update={"reinforce_interval_s": 0})  # a use right after saving
    one.get(entry.id, reinforce=True)
    assert two.get(entry.id).reinforcement_count == 1  # not flushed yet
    one.reinforcer.flush()
    assert two.get(entry.id).reinforcement_count == 2
    two.reinforcer.table["memory"].pop(entry.id, None)  # an older count flushed later never lowers it
    two.reinforcer._pending[("memory", entry.id)] = Access(1, 0.0)
    two.reinforcer.flush()
    assert replica().get(entry.id).reinforcement_count == 2


def test_a_write_whose_lock_connection_was_lost_is_refused_not_written(
    replica: Replica,
    database: str,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An id lock lives on its own connection, and the write goes on that same connection: if it drops after the
    read — here between the row's write and its commit, while another replica takes the freed lock and updates
    the memory — the first write is lost with the lock and refused, never committed over the other's."""
    import threading

    from rockmem_mcp.memory import postgres as pg_memory

    one, two = replica(), replica()
    entry = one.save("The lamp burns kerosene")
    real_append = pg_memory.append_changes
    acknowledged: list[str] = []

    def lose_the_lock_then_append(cursor: object, writer: str, records: list[dict[str, object]]) -> None:
        if writer == one.files.db.writer_id:  # type: ignore[attr-defined]
            pid = one._id_locks._conn.info.backend_pid  # type: ignore[attr-defined]
            Database(database).all("SELECT pg_terminate_backend(%s)", (pid,))
            other = threading.Thread(
                target=lambda: acknowledged.append(two.update(entry.id, content="The lamp burns whale oil").content)
            )
            other.start()
            other.join(10)
        real_append(cursor, writer, records)  # type: ignore[arg-type]

    monkeypatch.setattr(pg_memory, "append_changes", lose_the_lock_then_append)
    with pytest.raises(LostLockError, match="nothing was written"):
        one.update(entry.id, tags=["lamp"])
    monkeypatch.setattr(pg_memory, "append_changes", real_append)
    assert acknowledged == ["The lamp burns whale oil"]
    fresh = replica().get(entry.id)
    assert (fresh.content, fresh.tags) == ("The lamp burns whale oil", [])  # the acknowledged update stands
    one.update(entry.id, tags=["lamp"])  # a new lock, a new connection: written over what it read now
    assert two.get(entry.id).tags == ["lamp"] and two.get(entry.id).content == "The lamp burns whale oil"


def test_old_access_change_rows_are_pruned_by_a_flush(replica: Replica, database: str) -> None:  # noqa: F811
    """Uses are kept in the access table; their change rows only carry them to other replicas, so those older than
    an hour go (a read-heavy store's feed would otherwise grow without end), and the uses stay."""
    one = replica()
    entry = one.save("Alice prefers green tea")
    one.reinforcer.settings = one.settings.model_copy(update={"reinforce_interval_s": 0})
    one.get(entry.id, reinforce=True)
    one.reinforcer.flush()
    db = Database(database)
    with db.transaction() as cursor:
        cursor.execute("UPDATE changes SET at = now() - interval '2 hours' WHERE record->>'s' = 'access'")
    one.get(entry.id, reinforce=True)
    one.reinforcer.log._pruned_at = -math.inf  # type: ignore[union-attr]  # ten minutes later: this flush prunes too
    one.reinforcer.flush()
    (old,) = db.one("SELECT count(*) FROM changes WHERE record->>'s' = 'access' AND at < now() - interval '1 hour'")
    (kept,) = db.one("SELECT count FROM access WHERE id = %s", (entry.id,))
    assert old == 0 and kept == 3


def test_a_write_waits_for_another_replicas_lock_only_so_long(
    replica: Replica,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A replica that holds a write lock and stops (stuck, or cut off with its connection half-open) holds up
    another replica's write of that item for at most the lock timeout, then the write says so; nothing changed."""
    from rockmem_mcp.storage import pg_id_locks

    monkeypatch.setattr(pg_id_locks, "LOCK_TIMEOUT_S", 1)  # 30 s in service
    one, two = replica(), replica()
    entry = one.save("The lamp burns kerosene")
    with one._id_locks.hold([entry.id]):
        with pytest.raises(StorageError, match="another replica has held this write lock for over 1 s"):
            two.update(entry.id, content="The lamp burns oil")
        assert [hit.entry.id for hit in two.search("lamp").results] == [entry.id]  # it serves on
    two.update(entry.id, content="The lamp burns oil")  # the lock is free: written
    assert one.get(entry.id).content == "The lamp burns oil"


def test_a_failed_undo_on_a_store_that_went_away_reports_the_first_error(
    replica: Replica,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A save whose audit line fails is undone; if the undo fails too (the database went away), the error the
    caller gets is the first one, and this replica's index does not list the memory it was told was not saved."""
    one = replica()

    def refuse(*args: object, **kwargs: object) -> None:
        raise StorageError("the shared store failed (the first error)")

    monkeypatch.setattr(one.audit.log, "append", refuse)
    monkeypatch.setattr(one.files, "remove", lambda location: refuse())
    with pytest.raises(StorageError, match="the first error"):
        one.save("The lamp burns kerosene")
    assert one.search("kerosene").results == []
