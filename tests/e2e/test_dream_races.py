"""A dream in one process (the CLI) and a server answering writes in another: an update the server
acknowledged while the dream ran is never replaced with the older text the dream read (merge, archive,
update). The race is made deterministic by the dream's test hook: the CLI stops itself (SIGSTOP) once it has
read the entries and decided its changes, the test awaits that stop with waitpid, updates through the
server, then lets the dream go on (SIGCONT). POSIX only, like the dream's lock."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.anyio

NOW = datetime.now(UTC)
NOTES = [
    {"id": "dark-a", "content": "The user prefers dark mode in every editor", "created_at": NOW - timedelta(days=3)},
    {"id": "dark-b", "content": "the user prefers dark mode in every editor.", "created_at": NOW - timedelta(days=2)},
    {"id": "tz-a", "content": "The team meets on Mondays at the Berlin office", "created_at": NOW - timedelta(days=5)},
    {"id": "tz-b", "content": "On Mondays the team meets at the Berlin office", "created_at": NOW - timedelta(days=4)},
    {
        "id": "stale",
        "content": "Legacy CI ran on Jenkins",
        "importance": 0.6,
        "created_at": NOW - timedelta(days=200),
        "last_seen_at": NOW - timedelta(days=120),
    },
    {"id": "noise", "content": "Build 812 is running", "created_at": NOW - timedelta(days=1)},
    {  # archived over 90 days ago: the deterministic pass purges it, unless restored meanwhile
        "id": "kept",
        "content": "The user's first laptop was a ThinkPad T42",
        "created_at": NOW - timedelta(days=300),
        "archived_at": NOW - timedelta(days=120),
        "archive_reason": "stale",
    },
    {"id": "filed", "content": "The VPN config lives in the ops wiki", "created_at": NOW - timedelta(days=1)},
]
PLAN = {
    "archives": [{"id": "noise", "reason": "transient status"}],
    "updates": [{"id": "filed", "category": "ops"}],
}


def stopped_dream(home: Path, *args: str) -> subprocess.Popen[str]:
    """A CLI dream that stops itself once its changes are decided, nothing written yet."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ROCKMEM_")}
    env["ROCKMEM_DREAM_HOOK"] = "planned:stop"
    dream = subprocess.Popen(
        [sys.executable, "-m", "rockmem_mcp", "--home", str(home), "dream", "--force", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    _, status = os.waitpid(dream.pid, os.WUNTRACED)  # returns when the dream has stopped itself
    assert os.WIFSTOPPED(status), f"the dream ended instead of stopping: {dream.communicate()}"
    return dream


def resumed(dream: subprocess.Popen[str], home: Path) -> dict[str, Any]:
    os.kill(dream.pid, signal.SIGCONT)
    _, err = dream.communicate(timeout=60)
    assert dream.returncode == 0 and "Traceback" not in err, err
    [report] = sorted((home / "dream-reports").glob("*.json"))
    return json.loads(report.read_text())


@pytest.mark.parametrize("how", ["deterministic", "plan"])
async def test_an_update_acknowledged_during_a_cli_dream_survives_it(
    stdio_server, home, seed, call, tmp_path, how
) -> None:
    seed(NOTES)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(PLAN))
    async with stdio_server(home) as client:
        dream = stopped_dream(home, *(["--plan", str(plan)] if how == "plan" else []))
        try:
            if how == "deterministic":  # the dream planned: merge dark-a+b and tz-a+b
                written = {
                    "dark-b": {"content": "The user prefers dark mode in every editor, except in the terminal"},
                    "tz-a": {"content": "The team meets on Tuesdays at the Berlin office"},
                }
            else:  # the dream planned: archive noise, file filed under ops
                written = {
                    "noise": {"content": "Build 812 failed: the release is blocked on it"},
                    "filed": {"content": "The VPN config lives in the ops wiki, page VPN-2"},
                }
            for entry_id, fields in written.items():
                await call(client, "update_memory", id=entry_id, **fields)
            if how == "deterministic":  # a restore acknowledged while the dream waits to purge that archive
                await call(client, "update_memory", id="kept", restore=True)
                written["kept"] = {"content": "The user's first laptop was a ThinkPad T42"}
        finally:
            report = resumed(dream, home)
        for entry_id, fields in written.items():
            now = await call(client, "get_memory", id=entry_id)
            assert {k: now[k] for k in fields} == fields, entry_id
            assert now["archived_at"] is None, entry_id
        skipped = {i for a in report["rejected"] if "changed since the dream read it" in a["reason"] for i in a["ids"]}
        assert set(written) <= skipped
        if how == "deterministic":  # what nobody touched went ahead: the dark-mode merge did not (dark-b changed)
            assert not any(a["action"] == "merge" for a in report["applied"])
            assert (await call(client, "get_memory", id="dark-a"))["archived_at"] is None
            assert (await call(client, "get_memory", id="tz-b"))["archived_at"] is None
        else:
            assert (await call(client, "get_memory", id="filed"))["category"] is None
