"""`doctor --fix` beside a running server (issue 17, item 3): it refuses, naming the server's process, and
moves nothing to quarantine; the report-only doctor still runs and says who has the home open. Once the
server is gone the repair runs, and every memory and triple the server acknowledged is still in place."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

pytestmark = pytest.mark.anyio

WRITES = 30


def doctor(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ROCKMEM_")}
    return subprocess.run(
        [sys.executable, "-m", "rockmem_mcp", "--home", str(home), "doctor", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


async def test_doctor_fix_refuses_beside_a_running_server_and_quarantines_nothing(stdio_server, home, call) -> None:
    memories: list[str] = []
    triples: list[str] = []
    refusals: list[subprocess.CompletedProcess[str]] = []
    async with stdio_server(home) as client:

        async def write() -> None:
            for k in range(WRITES):
                saved = await call(client, "save_memory", content=f"meeting note {k}", category="notes")
                memories.append(saved["id"])
                fact = {"subject": f"Person{k}", "predicate": "knows", "object": f"Team{k}"}
                made = await call(client, "add_triples", triples=[fact])
                triples.append(made["triples"][0]["fact"]["id"])

        async with anyio.create_task_group() as tg:
            tg.start_soon(write)
            for _ in range(3):  # while the server writes (new entities and triples in flight)
                refusals.append(await anyio.to_thread.run_sync(doctor, home, "--fix"))
        report = await anyio.to_thread.run_sync(doctor, home)
        refusals.append(await anyio.to_thread.run_sync(doctor, home, "--fix", "--json"))

    for refused in refusals:
        assert refused.returncode == 1, refused.stdout + refused.stderr
        assert "Traceback" not in refused.stderr
        assert "in use by pid " in refused.stderr and f"rockmem_mcp --home {home}" in refused.stderr
        assert "doctor without --fix only reports" in refused.stderr
    assert not (home / "quarantine").exists()
    assert "Traceback" not in report.stderr
    assert "in use by pid" in report.stderr and f"rockmem_mcp --home {home}" in report.stderr

    fixed = await anyio.to_thread.run_sync(doctor, home, "--fix")  # the server has stopped
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert "in use" not in fixed.stderr
    assert not (home / "quarantine").exists()
    assert sorted(p.stem for p in (home / "memory" / "notes").glob("*.json")) == sorted(memories)
    assert sorted(p.stem for p in (home / "knowledge-graph" / "triples").glob("*.json")) == sorted(triples)
    assert "healthy" in (await anyio.to_thread.run_sync(doctor, home)).stderr
