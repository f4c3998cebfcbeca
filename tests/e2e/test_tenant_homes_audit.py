"""The server's home and its tenants' homes (server/tenancy.py) keep apart histories: a tenant's files are never
reported in the server's own audit trail as changes made outside the server (issue 45)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_http import serving
from tests.e2e.test_tenants import as_tenant, tenant_token

pytestmark = pytest.mark.anyio


def audit_of(home: Path) -> list[str]:
    log = home / "meta" / "audit.log"
    return log.read_text(encoding="utf-8").splitlines() if log.exists() else []


def audit_once_it_names(home: Path, file: str, timeout_s: float = 30.0) -> list[str]:
    """The server's audit lines once the history's start-up check has logged `file` (changed by hand while the
    server was down); a tenant's home it took for a change would be in the same batch of lines."""
    deadline = time.monotonic() + timeout_s
    while True:
        lines = audit_of(home)
        if any(f"| {file} |" in line for line in lines):
            return lines
        assert time.monotonic() < deadline, f"the start-up check never logged {file}: {lines}"
        time.sleep(0.1)


async def test_tenant_homes_are_never_logged_as_changes_to_the_servers_home(tmp_path: Path, call: Any) -> None:
    home, tenants_file = tmp_path / "home", tmp_path / "tenants.json"
    env = {"ROCKMEM_TENANTS_FILE": str(tenants_file)}
    alice, bob = tenant_token(tenants_file, "add", "alice"), tenant_token(tenants_file, "add", "bob")
    with serving(home, tmp_path / "first.log", **env) as url:
        for token, fact in ((alice, "Alice ships on Monday"), (bob, "Bob ships on Friday")):
            async with as_tenant(url, token) as client:
                await call(client, "save_memory", content=fact, category="plans")
        time.sleep(2)  # the start-up check's second look (0.5 s after its first) sees both tenants' homes
    assert (home / "tenants" / "alice" / "memory").is_dir() and (home / "tenants" / "bob" / "memory").is_dir()
    assert [line for line in audit_of(home) if "tenants/" in line] == []

    for start in ("second", "third"):
        (home / f"{start}.md").write_text("a note written by hand while the server was down\n", encoding="utf-8")
        with serving(home, tmp_path / f"{start}.log", **env):
            lines = audit_once_it_names(home, f"{start}.md")  # a real hand edit is still reported ...
        assert [line for line in lines if "tenants/" in line] == []  # ... and no tenant's home
        assert f"| CREATE | {start}.md | manual |" in "\n".join(lines)
    assert (home / "tenants" / ".gitignore").read_text(encoding="utf-8").splitlines()[-1] == "*"
