"""The tenants file (server/tenancy.py): hashes only, read again when it changes, a broken edit keeps the
tenants read before, names checked; each tenant's settings point at a home and a schema of its own."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import anyio
import pytest

from rockmem_mcp.config import Settings
from rockmem_mcp.errors import ConfigError, InvalidInputError
from rockmem_mcp.server.tenancy import TenantTokens, edit_tenants, keep_tenants_apart, tenant_settings, token_hash
from tests.pg_server import database  # noqa: F401  (the fixture)


def test_tokens_are_kept_as_hashes_and_changes_are_read_without_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "tenants.json"
    first = edit_tenants(path, "design", "add")
    assert first and first not in path.read_text() and token_hash(first) in path.read_text()
    assert os.stat(path).st_mode & 0o777 == 0o600
    tokens = TenantTokens(path)
    assert tokens.tenant_of(first) == "design" and tokens.tenant_of("guess") is None and tokens.tenant_of(None) is None
    second = edit_tenants(path, "ops", "add")
    assert tokens.tenant_of(second) == "ops"  # the file changed: read again
    edit_tenants(path, "design", "revoke")
    assert tokens.tenant_of(first) is None and tokens.names() == ["ops"]
    path.write_text("{ not json")  # a broken edit: the tenants read before stay
    assert tokens.tenant_of(second) == "ops"
    with pytest.raises(ConfigError, match="not usable"):
        TenantTokens(path)  # but a server does not start on it
    with pytest.raises(InvalidInputError, match="invalid tenant name"):
        edit_tenants(tmp_path / "other.json", "Bad Name", "add")


def test_a_plain_token_in_the_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "tenants.json"
    path.write_text(json.dumps({"tenants": {"ops": ["a-plain-token"]}}))
    with pytest.raises(ConfigError, match="sha256"):
        TenantTokens(path)


def test_a_tenant_has_its_own_home_and_schema(tmp_path: Path) -> None:
    settings = Settings.load({"home": tmp_path, "store": "postgresql://x@127.0.0.1/db"}, env={})
    mine = tenant_settings(settings, "design-team")
    assert mine.home == tmp_path / "tenants" / "design-team" and mine.store_schema == "tenant_design_team"
    assert mine.store == settings.store and mine.tenants_file is None


def test_two_tenants_never_share_a_schema(tmp_path: Path) -> None:
    settings = Settings.load({"home": tmp_path, "store": "postgresql://x@127.0.0.1/db"}, env={})
    assert tenant_settings(settings, "a-b").store_schema == "tenant_a_b"
    with pytest.raises(InvalidInputError):
        tenant_settings(settings, "a_b")  # would be the same schema: '_' is not allowed in a name
    with pytest.raises(InvalidInputError):
        edit_tenants(tmp_path / "t.json", "a_b", "add")


def test_a_tenants_file_that_goes_and_comes_back_broken_keeps_the_tenants_read(tmp_path: Path) -> None:
    path = tmp_path / "tenants.json"
    token = edit_tenants(path, "ops", "add")
    tokens = TenantTokens(path)
    path.unlink()
    assert tokens.tenant_of(token) is None  # removed: nobody
    path.write_text("{ half written")
    assert tokens.tenant_of(token) is None and tokens.names() == []  # never an error on a request


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_the_tenants_homes_are_left_out_of_the_servers_own_history(tmp_path: Path) -> None:
    def status(home: Path) -> str:
        done = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=home, check=True,
                              capture_output=True, text=True)  # fmt: skip
        return done.stdout

    home = tmp_path / "home"
    for repo in (home, home / "tenants" / "alice"):  # each home its own repository, as the history makes them
        repo.mkdir(parents=True)
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (home / "tenants" / "alice" / "fact.json").write_text("{}")
    (home / "mine.md").write_text("the server's own\n")
    assert "tenants/alice/" in status(home)  # what the start-up check took for a change made outside the server
    keep_tenants_apart(home)
    assert status(home).splitlines() == ["?? mine.md"]  # the server's own files are still its history's
    assert "fact.json" in status(home / "tenants" / "alice")  # and a tenant's its own

    (home / "tenants" / ".gitignore").write_text("alice/\n")  # one of the user's own is kept
    keep_tenants_apart(home)
    assert (home / "tenants" / ".gitignore").read_text() == "alice/\n"


def test_a_store_that_is_not_a_database_address_is_refused() -> None:
    for typo in ("PostgreSQL://u@h/db", "postgresql+psycopg://u@h/db", "mysql://u@h/db", "/var/lib/db"):
        with pytest.raises(ConfigError, match="ROCKMEM_STORE"):
            Settings.load({}, env={"ROCKMEM_STORE": typo})
    assert Settings.load({}, env={"ROCKMEM_STORE": "postgres://u@h/db"}).store == "postgres://u@h/db"


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_an_idle_or_revoked_tenants_stores_close_and_reopen_at_its_next_request(
    tmp_path: Path, anyio_backend: str
) -> None:
    import contextlib
    from collections.abc import AsyncIterator

    from rockmem_mcp.server.tenancy import Tenants

    path = tmp_path / "tenants.json"
    edit_tenants(path, "design", "add")
    edit_tenants(path, "ops", "add")
    events: list[str] = []

    @contextlib.asynccontextmanager
    async def open_services(settings: Settings) -> AsyncIterator[str]:
        name = settings.home.name
        events.append(f"open {name}")
        try:
            yield f"services of {name}"
        finally:
            events.append(f"close {name}")

    now = [0.0]
    settings = Settings.load({"home": tmp_path, "tenant_idle_minutes": 15}, env={})
    tenants = Tenants(settings, TenantTokens(path), open_services, clock=lambda: now[0])
    async with tenants.running():
        async with tenants.using("design") as design:
            assert design == "services of design"
            now[0] += 3600
            assert tenants.close_idle() == []  # a request of its is being served: never closed under it
        async with tenants.using("ops"):
            pass
        now[0] += 14 * 60
        assert tenants.close_idle() == []  # idle 14 minutes: kept
        now[0] += 2 * 60
        assert sorted(tenants.close_idle()) == ["design", "ops"]
        async with tenants.using("design") as again:
            assert again == "services of design"  # opened anew
        edit_tenants(path, "design", "revoke")
        assert tenants.close_idle() == ["design"]  # revoked: closed at once, idle or not
        await anyio.wait_all_tasks_blocked()
    assert events == ["open design", "open ops", "close design", "close ops", "open design", "close design"]


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_stores_that_fail_to_close_leave_the_tenants_next_opening_alone(
    tmp_path: Path, anyio_backend: str
) -> None:
    """A close that raises (a disk full writing a snapshot) is logged; it is not taken for a failed opening, so it
    never drops the ready mark of the opening made since, and the server still stops."""
    import contextlib
    from collections.abc import AsyncIterator

    from rockmem_mcp.server.tenancy import Tenants

    path = tmp_path / "tenants.json"
    edit_tenants(path, "design", "add")
    opened: list[int] = []

    @contextlib.asynccontextmanager
    async def open_services(settings: Settings) -> AsyncIterator[str]:
        opened.append(len(opened) + 1)
        number = len(opened)
        yield f"services {number}"
        if number == 1:
            raise OSError("disk full while writing the snapshot")

    now = [0.0]
    settings = Settings.load({"home": tmp_path, "tenant_idle_minutes": 15}, env={})
    tenants = Tenants(settings, TenantTokens(path), open_services, clock=lambda: now[0])
    with anyio.fail_after(10):  # the server stops: nothing hangs
        async with tenants.running():
            async with tenants.using("design") as first:
                assert first == "services 1"
            now[0] += 3600
            assert tenants.close_idle() == ["design"]
            async with tenants.using("design") as second:  # while the first is closing (and failing)
                assert second == "services 2"
            await anyio.wait_all_tasks_blocked()
            async with tenants.using("design") as third:
                assert third == "services 2"  # the same opening: its ready mark was kept
    assert opened == [1, 2]


def test_a_tenant_stays_open_past_its_idle_reflection_when_the_server_runs_them(tmp_path: Path) -> None:
    from rockmem_mcp.server.tenancy import idle_limit_minutes

    plain = Settings.load({"home": tmp_path, "tenant_idle_minutes": 15}, env={})
    reflecting = Settings.load(
        {"home": tmp_path, "tenant_idle_minutes": 15, "reflection_in_server": True, "reflection_idle_minutes": 30},
        env={},
    )
    assert idle_limit_minutes(plain) == 15
    assert idle_limit_minutes(reflecting) > 31  # the idle trigger, and its next check, come first
    never = Settings.load({"home": tmp_path, "tenant_idle_minutes": 0, "reflection_in_server": True}, env={})
    assert idle_limit_minutes(never) == 0


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_tenant_reopened_while_its_stores_close_leaves_no_connection_open(
    tmp_path: Path,
    anyio_backend: str,
    monkeypatch: pytest.MonkeyPatch,
    database: str,  # noqa: F811
) -> None:
    """The next request arrives while an idle close is still running (a big snapshot being written): the new
    opening waits for it, so the old close cannot take the shared connections the new one uses; after the server
    stops, none of the tenant's connections is left."""
    import time

    import psycopg

    from rockmem_mcp.memory.service import MemoryService
    from rockmem_mcp.server.app import open_services
    from rockmem_mcp.server.tenancy import Tenants

    url = database
    real_close = MemoryService.close

    def slow_close(self: MemoryService) -> None:
        time.sleep(1.0)
        real_close(self)

    monkeypatch.setattr(MemoryService, "close", slow_close)
    import threading

    from rockmem_mcp.server import app

    real_close_shared, shared_closed = app.close_shared, threading.Event()

    def close_shared(url: str, schema: str | None) -> None:
        real_close_shared(url, schema)
        shared_closed.set()

    monkeypatch.setattr(app, "close_shared", close_shared)
    path = tmp_path / "tenants.json"
    edit_tenants(path, "alice", "add")
    settings = Settings.load({"home": tmp_path / "home", "store": url, "tenant_idle_minutes": 15},
                             env={"ROCKMEM_EMBEDDING_MODEL": "off"})  # fmt: skip
    now = [0.0]
    tenants = Tenants(settings, TenantTokens(path), open_services, clock=lambda: now[0])
    async with tenants.running():
        async with tenants.using("alice") as first:
            await anyio.to_thread.run_sync(first.memory.save, "Alice keeps the lighthouse log")
        now[0] += 3600
        assert tenants.close_idle() == ["alice"]
        async with tenants.using("alice") as second:  # at once, while the first close sleeps
            found = await anyio.to_thread.run_sync(second.memory.search, "lighthouse")
            assert [hit.entry.content for hit in found.results] == ["Alice keeps the lighthouse log"]
            assert await anyio.to_thread.run_sync(shared_closed.wait, 10)  # the first opening's close is done
            await anyio.to_thread.run_sync(second.memory.save, "Alice saved again")  # its audit line: shared
    # Every connection is closed by now; a server process leaves pg_stat_activity when it has exited, which a
    # loaded machine may take a moment to get to (seen in CI: 2 still listed at once).
    query = "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'rockmem-mcp tenant_alice'"
    with psycopg.connect(url, autocommit=True) as conn, anyio.fail_after(30):
        while conn.execute(query).fetchone() != (0,):
            await anyio.sleep(0.05)
