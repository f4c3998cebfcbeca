"""SIGKILL during a storm of proposals (gated writes): after a restart every acknowledged proposal is there,
whole, listed, audited and rendered, and conflict marks agree on both sides."""

from __future__ import annotations

import random
from pathlib import Path

import anyio
import pytest

from rockmem_mcp.audit.log import AuditLog
from tests.e2e.disk_checks import unparsable
from tests.e2e.test_crash import RawServer, ServerGone, raw_server

pytestmark = pytest.mark.anyio

ROUNDS = 4
LANES = 6
SEED = 20261125
KILL_AFTER = (0.1, 0.5)
GATED = {"ROCKMEM_NAMESPACE": "subagent/researcher", "ROCKMEM_GATED_WRITES": "1"}


async def storm(
    server: RawServer, round_: int, lane: int, acknowledged: dict[str, str], under_way: anyio.Event
) -> None:
    """Propose until the server dies; every fifth one says the shared deadline (conflicts, two records each).
    `under_way` is set once the round has 2 x LANES acknowledged, so a slow start cannot leave a round empty."""
    for n in range(10_000):
        tag = f"r{round_}l{lane}n{n}"
        content = f"Storm deadline is {tag}" if n % 5 == 0 else f"Storm note {tag} is kept"
        try:
            filed = await server.call("save_memory", content=content)
        except ServerGone:
            return
        acknowledged[filed["id"]] = content
        if sum(f"r{round_}l" in c for c in acknowledged.values()) >= 2 * LANES:
            under_way.set()


async def test_every_acknowledged_proposal_survives_a_sigkill(home: Path, tmp_path: Path) -> None:
    rng = random.Random(SEED)
    acknowledged: dict[str, str] = {}
    log = tmp_path / "server.stderr"
    for round_ in range(ROUNDS):
        async with raw_server(home, log, **GATED) as server, anyio.create_task_group() as lanes:
            under_way = anyio.Event()
            for lane in range(LANES):
                lanes.start_soon(storm, server, round_, lane, acknowledged, under_way)
            await under_way.wait()
            await anyio.sleep(rng.uniform(*KILL_AFTER))  # the storm runs on for a seeded while, then the kill
            await server.kill()
        assert unparsable(home) == [], f"round {round_}: torn files"
    assert len(acknowledged) > ROUNDS * LANES  # the storms did propose
    async with raw_server(home, log) as main:  # the main agent, after the last kill
        listed = await main.call("review_proposals")
    records = {p["id"]: p for p in listed["proposals"]}
    missing = set(acknowledged) - set(records)
    assert not missing, f"{len(missing)} acknowledged proposals lost"
    assert all(records[i]["content"] == content for i, content in acknowledged.items())
    for record in records.values():  # conflicts agree both ways (the start healed what a kill left one-sided)
        for rival in record["conflict_with"]:
            assert record["id"] in records[rival]["conflict_with"]
        assert (record["status"] == "conflict") == bool(record["conflict_with"])
    proposed = {
        line.summary.split()[1] for line in AuditLog(home / "meta" / "audit.log").lines() if line.action == "PROPOSE"
    }
    assert {f"#{i}" for i in acknowledged} <= proposed
    rendered = (home / "meta" / "pending-memories.md").read_text()
    assert all(f"## Proposal #{i}" in rendered for i in acknowledged)
