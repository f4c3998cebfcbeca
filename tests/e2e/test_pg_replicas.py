"""Replicas of the real server on one PostgreSQL database (ROCKMEM_STORE), each with its own home: what one is
told to remember, another finds, over stdio and over streamable HTTP."""

from __future__ import annotations

import random
import signal
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from tests.e2e.test_http import serving, serving_process
from tests.pg_server import database  # noqa: F401  (the fixture)

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


async def test_two_replicas_share_long_term_memory(
    database: str,  # noqa: F811
    tmp_path: Path,
    stdio_server: Any,
    call: Any,
) -> None:
    over_http_home, over_stdio_home = tmp_path / "replica-a", tmp_path / "replica-b"
    with serving(over_http_home, tmp_path / "a.log", ROCKMEM_STORE=database, ROCKMEM_EMBEDDING_MODEL="off") as url:
        async with Client(url) as a, stdio_server(over_stdio_home, ROCKMEM_STORE=database) as b:
            saved = await call(a, "save_memory", content="The deploy freeze starts on Friday", category="ops/freeze")
            found = await call(b, "search_memory", query="deploy freeze", stores=["memories"])
            assert [hit["entry"]["id"] for hit in found["results"]] == [saved["id"]]
            await call(b, "update_memory", id=saved["id"], content="The deploy freeze starts on Thursday")
            assert (await call(a, "get_memory", id=saved["id"]))["content"] == "The deploy freeze starts on Thursday"
            await call(a, "delete_memory", id=saved["id"], permanent=True)
            again = await call(b, "search_memory", query="deploy freeze", stores=["memories"])
            assert again["results"] == []
            # Working memory is shared too: one replica parks a result for the team, the other reads it.
            await call(a, "save_to_working_memory", key="shared/team/build", data="green at 14:02")
            assert (await call(b, "get_from_working_memory", key="shared/team/build"))["data"] == "green at 14:02"
    assert not list((over_http_home / "memory").rglob("*.json"))  # the rows are in the database, not the home


OPS_PER_REPLICA = 500
KILLED_AFTER = 250


async def test_three_replicas_in_a_storm_with_one_killed_lose_no_acknowledged_write(
    database: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    """3 HTTP replicas on one database, 500 mixed calls each at once (saves, updates of their own memories,
    archives, permanent deletes, facts added to the shared graph and topics deleted from it, searches); one replica
    is SIGKILLed halfway. Afterwards every acknowledged write is as acknowledged, seen from each surviving replica,
    and nothing deleted came back."""
    env = {"ROCKMEM_STORE": database, "ROCKMEM_EMBEDDING_MODEL": "off"}
    expected: dict[str, str | None] = {}  # id -> acknowledged content (None: acknowledged permanent delete)
    archived: dict[str, bool] = {}
    topics: dict[str, str | None] = {}  # graph entity name -> who tracks it (None: acknowledged delete)
    with ExitStack() as stack:
        replicas = [
            stack.enter_context(serving_process(tmp_path / f"home-{n}", tmp_path / f"replica-{n}.log", **env))
            for n in range(3)
        ]
        urls = [url for url, _ in replicas]
        killed = replicas[2][1]

        async def storm(n: int) -> None:
            rng = random.Random(n)
            mine: list[str] = []
            my_topics: list[str] = []
            try:
                async with Client(urls[n]) as client:
                    for i in range(OPS_PER_REPLICA):
                        if n == 2 and i == KILLED_AFTER:
                            killed.send_signal(signal.SIGKILL)  # mid-storm: no goodbye
                        roll = rng.random()
                        if roll < 0.35 or not mine:
                            text = f"replica {n} note {i} about storms"
                            result = await client.call_tool("save_memory", {"content": text})
                            entry = result.structured_content
                            expected[entry["id"]], archived[entry["id"]] = text, False
                            mine.append(entry["id"])
                        elif roll < 0.6:
                            target = rng.choice(mine)
                            text = f"replica {n} revised {i}"
                            result = await client.call_tool("update_memory", {"id": target, "content": text})
                            if not result.is_error:
                                expected[target] = text
                        elif roll < 0.7:
                            target = mine.pop(rng.randrange(len(mine)))
                            result = await client.call_tool("delete_memory", {"id": target})
                            if not result.is_error:
                                archived[target] = True
                        elif roll < 0.78:
                            target = mine.pop(rng.randrange(len(mine)))
                            result = await client.call_tool("delete_memory", {"id": target, "permanent": True})
                            if not result.is_error:
                                expected[target] = None
                        elif roll < 0.86:
                            topic, tracker = f"storm topic {n}-{i}", f"Tracker {n}"
                            fact = {"subject": tracker, "predicate": "tracks", "object": topic}
                            result = await client.call_tool("graph", {"action": "add", "triples": [fact]})
                            if not result.is_error:
                                topics[topic] = tracker
                                my_topics.append(topic)
                        elif roll < 0.89 and my_topics:
                            topic = my_topics.pop(rng.randrange(len(my_topics)))
                            result = await client.call_tool("graph", {"action": "delete", "name": topic})
                            if not result.is_error:
                                topics[topic] = None
                        else:
                            result = await client.call_tool("search_memory", {"query": "storms", "limit": 5})
                            assert not result.is_error
            except Exception:
                if n != 2:
                    raise  # only the killed replica's calls may fail, from the kill on

        async with anyio.create_task_group() as group:
            for n in range(3):
                group.start_soon(storm, n)
        assert killed.wait(timeout=10) == -signal.SIGKILL

        async def check(client: Client) -> None:
            for entry_id, content in expected.items():
                result = await client.call_tool("get_memory", {"id": entry_id})
                if content is None:
                    assert result.is_error and "no memory with id" in result.content[0].text, entry_id
                    continue
                assert not result.is_error, (entry_id, result.content)
                got = result.structured_content
                assert got["content"] == content, entry_id
                assert (got["archived_at"] is not None) == archived[entry_id], entry_id
            for topic, tracker in topics.items():
                result = await client.call_tool("graph", {"action": "get", "name": topic})
                if tracker is None:
                    assert result.is_error and "no entity named" in result.content[0].text, topic
                    continue
                assert not result.is_error, (topic, result.content)
                facts = result.structured_content["result"]["facts"]
                assert [(f["subject"], f["predicate"]) for f in facts] == [(tracker, "tracks")], topic

        async with Client(urls[0]) as first, Client(urls[1]) as second, anyio.create_task_group() as checks:
            checks.start_soon(check, first)  # each survivor at once
            checks.start_soon(check, second)
    saves = sum(1 for c in expected.values() if c is not None)
    assert saves > 250  # the storm did happen
    assert sum(1 for t in topics.values() if t is not None) > 50 and None in topics.values()


@contextmanager
def database_cut_off(url: str) -> Iterator[None]:
    """For the body: no new connection to the database at `url`, and every open one cut (an outage, as its clients
    see it)."""
    import psycopg

    name = url.rsplit("/", 1)[1]
    with psycopg.connect(url.rsplit("/", 1)[0] + "/postgres", autocommit=True) as admin:
        admin.execute(f"ALTER DATABASE {name} WITH ALLOW_CONNECTIONS false")
        admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (name,))
        try:
            yield
        finally:
            admin.execute(f"ALTER DATABASE {name} WITH ALLOW_CONNECTIONS true")


def test_health_and_readiness_for_a_load_balancer(database: str, tmp_path: Path) -> None:  # noqa: F811
    """/healthz and /readyz answer without the token (they say nothing of the memory); /readyz checks the store."""
    import httpx

    token = "a-long-enough-balancer-token-0123456789"
    env = {"ROCKMEM_STORE": database, "ROCKMEM_EMBEDDING_MODEL": "off", "ROCKMEM_AUTH_TOKEN": token}
    with serving_process(tmp_path / "home", tmp_path / "replica.log", **env) as (url, _):
        base = url.removesuffix("/mcp")
        assert httpx.get(base + "/healthz").json() == {"status": "ok"}
        ready = httpx.get(base + "/readyz")
        assert ready.status_code == 200 and ready.json() == {"status": "ok"}
        assert httpx.post(url, json={}).status_code == 401  # everything else still needs the token
        # The database goes away (its connections cut): the replica is not ready, and says why.
        with database_cut_off(database):
            down = httpx.get(base + "/readyz")
            assert down.status_code == 503 and down.json()["reason"].startswith("the store does not answer")
            assert httpx.get(base + "/healthz").status_code == 200  # alive all the same
        again = httpx.get(base + "/readyz")
        assert again.status_code == 200  # it reconnects


def test_a_store_outage_during_a_working_memory_sweep_leaves_the_server_serving(database: str, tmp_path: Path) -> None:  # noqa: F811
    """The periodic sweep of expired working memory reads the store. An outage at that moment is a warning in the
    log, and the server is ready again once the store answers (the sweep's StorageError once ended every service:
    /readyz said "starting" until a restart)."""
    import time

    import httpx

    log = tmp_path / "replica.log"
    env = {"ROCKMEM_STORE": database, "ROCKMEM_EMBEDDING_MODEL": "off", "ROCKMEM_WORKING_SWEEP_SECONDS": "0.1"}
    with serving_process(tmp_path / "home", log, **env) as (url, _):
        ready = url.removesuffix("/mcp") + "/readyz"
        assert httpx.get(ready).status_code == 200
        with database_cut_off(database):
            deadline = time.monotonic() + 60
            while "working-memory sweep failed" not in log.read_text() and time.monotonic() < deadline:
                time.sleep(0.05)  # the log file is the only signal the process gives
            assert "working-memory sweep failed" in log.read_text()
        deadline = time.monotonic() + 60  # its connections come back as the store's pool retries
        while (answer := httpx.get(ready).json()) != {"status": "ok"} and time.monotonic() < deadline:
            assert not answer["reason"].startswith("starting"), answer  # the services ended with the sweep
            time.sleep(0.05)
        assert answer == {"status": "ok"}


def test_migrate_store_moves_every_memory_to_the_database_and_back_exactly(database: str, tmp_path: Path) -> None:  # noqa: F811
    """A file home -> PostgreSQL -> another file home: the two homes' exports of long-term memory are the same
    file (archived and pinned memories, categories, tags, metadata, uses and times included)."""
    import json

    from tests.test_cli import clean_env, ok

    first, second = tmp_path / "first", tmp_path / "second"
    env = clean_env(ROCKMEM_EMBEDDING_MODEL="off")
    lines = [json.dumps({"content": f"fact {i} about lighthouses", "category": f"coast/{i % 3}", "tags": [f"t{i % 4}"],
                         "metadata": {"n": str(i)}, "importance": 0.6}) for i in range(250)]  # fmt: skip
    ok("--home", first, "import", "-", env=env, stdin="\n".join(lines) + "\n")
    pinned = json.loads(ok("--home", first, "add", "The keeper's name is Ida", "--pin", "--json", env=env).stdout)
    gone = json.loads(ok("--home", first, "add", "The old lamp was oil", "--json", env=env).stdout)
    ok("--home", first, "delete", gone["id"], env=env)

    there = ok("--home", tmp_path / "replica", "migrate-store", "--from", first, "--to", database, "--json", env=env)
    report = json.loads(there.stdout)
    assert report["moved"] == report["checked"] == 252 and report["differing"] == []
    back = ok("--home", tmp_path / "replica", "migrate-store", "--from", database, "--to", second, "--json", env=env)
    assert json.loads(back.stdout)["differing"] == []

    def memories(home: Path) -> list[str]:
        exported = ok("--home", home, "export", "-", env=env).stdout.splitlines()
        return sorted(line for line in exported if '"store"' not in line)

    assert memories(first) == memories(second) and len(memories(first)) == 252
    moved = json.loads(ok("--home", second, "get", pinned["id"], "--json", env=env).stdout)
    assert moved["pinned"] is True
    assert json.loads(ok("--home", second, "get", gone["id"], "--json", env=env).stdout)["archived_at"]


def test_migrate_store_moves_every_other_store_to_the_database_and_back_exactly(database: str, tmp_path: Path) -> None:  # noqa: F811
    """Besides memories: the graph, live working memory, feedback, episodes, procedures, core memory and a workspace
    file go home -> PostgreSQL -> another home, and the two homes' whole exports are the same lines."""
    import json

    from rockmem_mcp.config import Settings
    from rockmem_mcp.conversation.feedback import FeedbackLog
    from rockmem_mcp.episodes.service import Episodes
    from rockmem_mcp.graph.service import GraphService
    from rockmem_mcp.procedures.service import Procedures
    from rockmem_mcp.working.service import WorkingMemory
    from tests.test_cli import clean_env, ok

    first, second = tmp_path / "first", tmp_path / "second"
    settings = Settings.load({"home": first}, env={"ROCKMEM_EMBEDDING_MODEL": "off"})
    graph = GraphService(settings)
    graph.add_triples([{"subject": "Ida", "predicate": "keeps", "object": "the lighthouse", "confidence": 0.9}])
    graph.close()
    episodes = Episodes(settings)
    episodes.record("The lamp was lit at dusk", type="event", tags=["lamp"])
    episodes.close()
    FeedbackLog(settings).record("Correction", "Ida spells her name with one d", "session-1")
    Procedures(settings).save("light the lamp", ["dusk"], ["trim the wick", "light it"])
    WorkingMemory(settings, "session/s1").save("now", "lighting the lamp", ttl_minutes=60)
    (first / "MEMORY.md").write_text("# MEMORY\n\n## Identity\n- the keeper's agent\n", "utf-8")
    (first / "USER.md").write_text("# USER\n\nIda, the keeper.\n", "utf-8")
    env = clean_env(ROCKMEM_EMBEDDING_MODEL="off")
    ok("--home", first, "add", "The old lamp burned oil", env=env)

    there = ok("--home", tmp_path / "replica", "migrate-store", "--from", first, "--to", database, "--json", env=env)
    report = json.loads(there.stdout)
    assert report["differing"] == [], report
    assert [reason.split(":")[0] for reason in report["skipped"]] == ["file USER.md"]  # each replica's own
    assert {k: v for k, v in report["other_stores"].items() if v} == {
        "files": 1, "entities": 2, "triples": 1, "working": 1, "feedback": 1, "episodes": 2, "procedures": 1,
        "audit lines": 8,  # the source home's trail: what made each record there
    }  # fmt: skip
    back = ok("--home", tmp_path / "replica", "migrate-store", "--from", database, "--to", second, "--json", env=env)
    assert json.loads(back.stdout)["differing"] == []

    def everything(home: Path) -> list[str]:
        return sorted(line for line in ok("--home", home, "export", "-", env=env).stdout.splitlines()
                      if '"USER.md"' not in line)  # fmt: skip

    assert everything(first) == everything(second)
    assert len(everything(first)) == 10  # 1 memory, 2 entities, a triple, 2 episodes, MEMORY.md, one of each other


def test_doctor_checks_a_database_store_and_quarantines_a_broken_row(database: str, tmp_path: Path) -> None:  # noqa: F811
    import json

    import psycopg

    from tests.test_cli import clean_env, ok, rockmem

    env = clean_env(ROCKMEM_STORE=database, ROCKMEM_EMBEDDING_MODEL="off")
    home = tmp_path / "replica"
    kept = json.loads(ok("--home", home, "add", "A sound memory", "--json", env=env).stdout)
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute("INSERT INTO memories (id, category, doc) VALUES ('0badc0ffee00', NULL, '{\"content\": 5')")
    checked = rockmem("--home", home, "doctor", "--json", env=env)
    report = json.loads(checked.stdout)
    assert checked.returncode == 1 and not report["healthy"]
    assert report["checked"]["store memories"] == 2 and report["checked"]["store schema"] >= 1
    assert [(f["kind"], f["path"]) for f in report["findings"]] == [("malformed", "store:memories/0badc0ffee00")]
    fixed = json.loads(rockmem("--home", home, "doctor", "--fix", "--json", env=env).stdout)
    assert fixed["findings"][0]["fixed"].startswith("moved to quarantine/")
    assert next((home / "quarantine").rglob("0badc0ffee00.json")).read_text() == '{"content": 5'
    again = json.loads(ok("--home", home, "doctor", "--json", env=env).stdout)
    assert again["healthy"] and again["checked"]["store memories"] == 1
    assert json.loads(ok("--home", home, "get", kept["id"], "--json", env=env).stdout)["content"] == "A sound memory"


def test_doctor_checks_the_stores_graph_rows_and_quarantines_broken_ones(database: str, tmp_path: Path) -> None:  # noqa: F811
    import json

    import psycopg

    from rockmem_mcp.config import Settings
    from rockmem_mcp.graph.service import GraphService
    from tests.test_cli import clean_env, ok, rockmem

    env = clean_env(ROCKMEM_STORE=database, ROCKMEM_EMBEDDING_MODEL="off")
    home = tmp_path / "replica"
    graph = GraphService(Settings.load({"home": tmp_path / "other", "store": database}, env={}))
    graph.add_triples([{"subject": "Ida", "predicate": "keeps", "object": "the lighthouse"}])
    graph.add_triples([{"subject": "Ida", "predicate": "knows", "object": "Bo"}])
    bo = graph.resolve("Bo").id
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute("DELETE FROM graph_records WHERE kind = 'e' AND id = %s", (bo,))  # leaves its triple orphaned
        conn.execute("INSERT INTO graph_records (kind, id, doc) VALUES ('e', '0badc0ffee00', '{\"name\": 5')")
    checked = rockmem("--home", home, "doctor", "--json", env=env)
    report = json.loads(checked.stdout)
    assert checked.returncode == 1 and report["checked"]["store graph records"] == 5
    assert sorted(f["kind"] for f in report["findings"]) == ["malformed", "orphaned-triple"]
    fixed = json.loads(rockmem("--home", home, "doctor", "--fix", "--json", env=env).stdout)
    assert all(f["fixed"].startswith("moved to quarantine/") for f in fixed["findings"])
    assert json.loads(ok("--home", home, "doctor", "--json", env=env).stdout)["healthy"]
    assert [f.predicate for f in graph.traverse("Ida").facts] == ["keeps"]  # a running replica dropped the triple
    graph.close()
    fresh = GraphService(Settings.load({"home": tmp_path / "fresh", "store": database}, env={}))
    assert fresh.stats() == {"entities": 2, "triples": 1}
    fresh.close()


async def test_two_replicas_share_one_core_memory(database: str, tmp_path: Path, stdio_server: Any, call: Any) -> None:  # noqa: F811
    """MEMORY.md is a row of the store: an edit through one replica is what the other loads; no critical-file
    alert is raised for a file that is not on disk."""
    async with (
        stdio_server(tmp_path / "a", ROCKMEM_STORE=database) as a,
        stdio_server(tmp_path / "b", ROCKMEM_STORE=database) as b,
    ):
        version = (await call(a, "core_memory", action="read"))["version"]
        edit = {"action": "append", "block": "Critical Facts", "text": "The user is allergic to penicillin"}
        await call(a, "core_memory", version=version, **edit)
        core = await call(b, "core_memory", action="read")
        assert core["blocks"][3]["lines"] == ["- The user is allergic to penicillin"]
        stale = await b.call_tool("core_memory", {"action": "append", "block": "Persona", "text": "x",
                                                  "version": version})  # fmt: skip
        assert stale.is_error  # read before a's edit: refused, as for a file
        recalled = (await b.call_tool("recall", {"message": "what should I know about medicine?"})).content[0].text
        assert "penicillin" in recalled and "CRITICAL" not in recalled  # the core is loaded, no alert
        pinned = await call(b, "search_memory", query="penicillin", stores=["memories"])
        assert pinned["results"] and pinned["results"][0]["entry"]["pinned"]  # Critical Facts mirrored in the vault
    assert not (tmp_path / "a" / "MEMORY.md").exists() and not (tmp_path / "b" / "MEMORY.md").exists()


def test_a_reflection_run_on_one_replica_is_approved_on_another(database: str, tmp_path: Path) -> None:  # noqa: F811
    import json

    from tests.test_cli import clean_env, ok

    env = clean_env(ROCKMEM_STORE=database, ROCKMEM_EMBEDDING_MODEL="off", ROCKMEM_REFLECTION_APPROVAL="always")
    a, b = tmp_path / "a", tmp_path / "b"
    for _ in range(2):
        ok("--home", a, "add", "Mo runs the Tuesday standup", env=env)
    ok("--home", a, "reflect", "--run", env=env)
    pending = json.loads(ok("--home", b, "reflect", "--json", env=env).stdout)  # the other replica sees it
    assert [r["id"] for r in pending] == ["r-001"] and pending[0]["actions"]
    ok("--home", b, "reflect", "r-001", "--approve", env=env)
    assert json.loads(ok("--home", a, "reflect", "r-001", "--json", env=env).stdout)[0]["status"] == "approved"
    hits = [json.loads(line) for line in ok("--home", a, "search", "standup", "--json", env=env).stdout.splitlines()]
    assert len(hits) == 1  # the duplicates merged, seen from the replica that ran it
    ok("--home", b, "reflect", "--run", env=env)
    second = json.loads(ok("--home", a, "reflect", "r-002", "--json", env=env).stdout)  # numbered after the first
    assert second[0]["id"] == "r-002" and second[0]["since"] is not None  # it knew of r-001: one numbering
    assert not list(a.rglob("meta/reflections/r-*.json")) and not list(b.rglob("meta/reflections/r-*.json"))


def test_dream_reports_are_the_stores_so_replicas_schedule_one_dream(database: str, tmp_path: Path) -> None:  # noqa: F811
    from tests.test_cli import clean_env, ok

    env = clean_env(ROCKMEM_STORE=database, ROCKMEM_EMBEDDING_MODEL="off")
    a, b = tmp_path / "a", tmp_path / "b"
    ok("--home", a, "add", "Ola waters the ferns", env=env)
    ok("--home", a, "dream", "--force", env=env)
    later = ok("--home", b, "dream", env=env)  # another replica: the store dreamed a moment ago
    assert "skipped: the last dream finished at" in later.stderr
    assert not list(a.rglob("dream-reports/*.json")) and not list(b.rglob("dream-reports/*.json"))
