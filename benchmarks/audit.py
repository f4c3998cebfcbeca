"""What accountability costs: durable saves with the audit log on and off, and undoing a 1,000-change dream.

    python -m benchmarks.audit            # → results/audit.json

- `save_stdio`: save_memory over raw JSON-RPC (what a client waits for), one server with ROCKMEM_AUDIT=false and
  one with the audit log and git history on, 300 saves each, alternated for ROUNDS rounds on fresh homes; the
  median of the rounds' p50s, and their ratio (same run).
- `save_library`: MemoryService.save on the library, audit off and on, alternated the same way.
- `rollback_dream`: a home of 1,000 memories committed to git; a "dream" (acting as dream:RUN) edits 500 and
  archives 500; then the time Rollback.revert_run takes to undo all 1,000 (read from git, written, logged,
  reindexed), median of 3.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rockmem_mcp.services.history import GitHistory

from benchmarks import speed
from rockmem_mcp.config import Settings
from rockmem_mcp.services.audit import acting_as
from rockmem_mcp.services.memory import MemoryService
from rockmem_mcp.services.rollback import Rollback

RESULTS = Path(__file__).parent / "results"
ROUNDS = 5
SAVES = 300
NOTE = "benchmark note {i}: the deploy review happens on Thursday at 10:30 in room {i}"


def saves_stdio(home: Path, audit: bool, count: int = SAVES) -> float:
    """p50 ms of save_memory over raw JSON-RPC lines."""
    env = {**os.environ, "ROCKMEM_AUDIT": str(audit).lower(), "ROCKMEM_AUDIT_GIT": str(audit).lower()}
    proc = subprocess.Popen(
        [sys.executable, "-m", "rockmem_mcp", "--home", str(home)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
    )
    assert proc.stdin is not None and proc.stdout is not None
    stdin, stdout = proc.stdin, proc.stdout

    def call(message: dict[str, Any]) -> dict[str, Any] | None:
        stdin.write((json.dumps(message) + "\n").encode())
        stdin.flush()
        return json.loads(stdout.readline()) if "id" in message else None

    try:
        hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}
        call({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": hello})
        call({"jsonrpc": "2.0", "method": "notifications/initialized"})
        samples = []
        for i in range(1, count + 1):
            params = {"name": "save_memory", "arguments": {"content": NOTE.format(i=i), "category": "notes"}}
            t = time.perf_counter()
            reply = call({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": params})
            samples.append(time.perf_counter() - t)
            assert reply is not None and not reply["result"].get("isError"), reply
    finally:
        stdin.close()
        proc.wait(timeout=60)
    return statistics.median(samples) * 1e3


def saves_library(home: Path, audit: bool, count: int = SAVES) -> float:
    memory = MemoryService(Settings.load({"home": home, "audit": audit}, env={}), embed_in_background=False)
    try:
        samples = []
        for i in range(count):
            t = time.perf_counter()
            memory.save(NOTE.format(i=i), "notes")
            samples.append(time.perf_counter() - t)
    finally:
        memory.close()
    return statistics.median(samples) * 1e3


def alternated(measure: Any, root: Path, name: str) -> dict[str, Any]:
    off, on = [], []
    for round_ in range(ROUNDS):
        for audit, into in ((False, off), (True, on)) if round_ % 2 == 0 else ((True, on), (False, off)):
            into.append(measure(root / f"{name}-{round_}-{audit}", audit))
    p50_off, p50_on = statistics.median(off), statistics.median(on)
    return {
        "audit_off_p50_ms": round(p50_off, 3),
        "audit_on_p50_ms": round(p50_on, 3),
        "ratio_on_over_off": round(p50_on / p50_off, 3),
        "rounds_off": [round(x, 3) for x in off],
        "rounds_on": [round(x, 3) for x in on],
    }


def rollback_dream(root: Path, changes: int = 1_000) -> dict[str, Any]:
    runs = []
    for attempt in range(3):
        settings = Settings.load({"home": root / f"rollback-{attempt}"}, env={})
        memory = MemoryService(settings, embed_in_background=False)
        history = GitHistory(settings, memory.audit)
        try:
            entries = [memory.prepare_entry({"content": NOTE.format(i=i), "category": "notes"}) for i in range(changes)]
            memory.save_many(entries)
            history.flush()
            with acting_as(f"dream:d-bench-{attempt}"):
                for entry in entries[: changes // 2]:
                    memory.update(entry.id, content=entry.content + " (moved to Friday)")
                for entry in entries[changes // 2 :]:
                    memory.delete(entry.id, reason="dream: noise")
            history.flush()
            rollback = Rollback(settings, memory.audit, history, memory)
            t = time.perf_counter()
            result = rollback.revert_run(f"dream:d-bench-{attempt}")
            runs.append(time.perf_counter() - t)
            assert len(result.restored) == changes and not result.skipped, result
            assert memory.get(entries[-1].id).archived_at is None
        finally:
            history.close()
            memory.close()
    return {"changes": changes, "p50_s": round(statistics.median(runs), 3), "runs_s": [round(r, 3) for r in runs]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=RESULTS / "audit.json")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="rockmem-audit-bench-") as tmp:
        root = Path(tmp)
        report = {
            "machine": speed.machine_info() if hasattr(speed, "machine_info") else None,
            "save_stdio": alternated(saves_stdio, root, "stdio"),
            "save_library": alternated(saves_library, root, "library"),
            "rollback_dream": rollback_dream(root),
        }
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
