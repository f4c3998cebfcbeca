"""What accountability costs: durable saves with the audit log on and off, and undoing a 1,000-change dream.

    python -m benchmarks.audit            # → results/audit.json

- `save_stdio`: save_memory over raw JSON-RPC (what a client waits for), servers with the audit log off, on, and
  on with the git history committing in the background; 300 saves each on a fresh home, the three rotated for
  ROUNDS rounds; the median of the rounds' p50s, and the ratios (same run). save_memory writes the memory and
  the episode that logs it: two audit lines.
- `save_library`: MemoryService.save on the library (one audit line), the same three, rotated the same way.
- `rollback_dream`: a home of 1,000 memories committed to git; a "dream" (acting as dream:RUN) edits 500 and
  archives 500; then the time Rollback.revert_run takes to undo all 1,000 (read from git, written, logged,
  reindexed), median of 3.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import speed
from rockmem_mcp.audit.service import acting_as
from rockmem_mcp.config import Settings
from rockmem_mcp.governance.history import GitHistory
from rockmem_mcp.governance.rollback import Rollback
from rockmem_mcp.memory.service import MemoryService

RESULTS = Path(__file__).parent / "results"
ROUNDS = 7
SAVES = 300
NOTE = "benchmark note {i}: the deploy review happens on Thursday at 10:30 in room {i}"


CONFIGS = {"off": (False, False), "audit_log": (True, False), "audit_log_and_git": (True, True)}


def saves_stdio(home: Path, config: str, count: int = SAVES) -> float:
    """p50 ms of save_memory over raw JSON-RPC lines."""
    audit, git = CONFIGS[config]
    env = {**os.environ, "ROCKMEM_AUDIT": str(audit).lower(), "ROCKMEM_AUDIT_GIT": str(git).lower()}
    with speed.jsonrpc_server(home, env) as (_, call):
        samples = []
        for i in range(1, count + 1):
            params = {"name": "save_memory", "arguments": {"content": NOTE.format(i=i), "category": "notes"}}
            t = time.perf_counter()
            reply = call({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": params})
            samples.append(time.perf_counter() - t)
            assert reply is not None and not reply["result"].get("isError"), reply
    return statistics.median(samples) * 1e3


def saves_library(home: Path, config: str, count: int = SAVES) -> float:
    audit, git = CONFIGS[config]
    settings = Settings.load({"home": home, "audit": audit, "audit_git": git}, env={})
    memory = MemoryService(settings, embed_in_background=False)
    history = GitHistory(settings, memory.audit)
    if git:
        history.start()  # commits in the background while the saves go on, as in a server
    try:
        samples = []
        for i in range(count):
            t = time.perf_counter()
            memory.save(NOTE.format(i=i), "notes")
            samples.append(time.perf_counter() - t)
    finally:
        history.close()
        memory.close()
    return statistics.median(samples) * 1e3


def alternated(measure: Any, root: Path, name: str) -> dict[str, Any]:
    """Each configuration once per round, the order rotated round by round; medians of the rounds' p50s."""
    rounds: dict[str, list[float]] = {config: [] for config in CONFIGS}
    order = list(CONFIGS)
    for round_ in range(ROUNDS):
        for config in order[round_ % 3 :] + order[: round_ % 3]:
            rounds[config].append(measure(root / f"{name}-{round_}-{config}", config))
    p50 = {config: statistics.median(values) for config, values in rounds.items()}
    return {
        **{f"{config}_p50_ms": round(value, 3) for config, value in p50.items()},
        "ratio_audit_log_over_off": round(p50["audit_log"] / p50["off"], 3),
        "ratio_audit_log_and_git_over_off": round(p50["audit_log_and_git"] / p50["off"], 3),
        "rounds": {config: [round(x, 3) for x in values] for config, values in rounds.items()},
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
