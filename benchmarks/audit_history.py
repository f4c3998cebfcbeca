"""An item's history and its revert on a long audit log (issue 45): before and after the audit index, same run.

    git worktree add /tmp/audit-base BASE        # the code before
    python -m benchmarks audit_history --baseline /tmp/audit-base     # → results/audit-history.json
    git worktree remove /tmp/audit-base

For each size (20k and 200k lines by default) and each code (the baseline's, then this tree's), a worker process
builds a home with git history: one memory saved, SIZE lines about other memories appended to meta/audit.log (a
save's two lines: the memory's CREATE and its day log's APPEND, as a busy agent's log holds between one item's
changes; the item's CREATE is then far back), committed, then the memory edited three times (a commit each).
Then, on the library the server's tools call:

- `history`: AuditTrail.item_history(ID), what `audit(item=ID, history=true)`, `rockmem://history/ID` and the
  page's history tab run; ROUNDS calls, median and each;
- `revert`: Rollback.revert_item(ID) (back to the version before the latest, alternating); between two calls the
  history commits the revert and the index catches up, as the server's committer does in the background (not
  timed: a commit stages the whole log, a cost of the git history, not of reading the trail);
- `index_build_s` (this tree only): the index built from nothing over the whole log, once (a first start, or after
  retention or a redaction rewrote the log; done by the committer in the background);
- `rss_growth_mb`: the worker's peak resident memory growth over the calls.

Each worker reports the rockmem_mcp it imported, so a baseline that ran this tree's code shows.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
ROUNDS = 5
CHUNK = 10_000  # lines appended at a time (the setup's memory stays small)


def worker(size: int, rounds: int) -> dict[str, Any]:
    """Runs in a process of its own, with the code under test first on sys.path."""
    import rockmem_mcp
    from rockmem_mcp.audit.log import AuditLine
    from rockmem_mcp.config import Settings
    from rockmem_mcp.governance.history import GitHistory
    from rockmem_mcp.governance.rollback import Rollback
    from rockmem_mcp.governance.trail import AuditTrail
    from rockmem_mcp.memory.service import MemoryService

    with tempfile.TemporaryDirectory(prefix="rockmem-audit-history-") as tmp:
        settings = Settings.load({"home": Path(tmp) / "home", "embedding_model": "off"}, env={})
        memory = MemoryService(settings, embed_in_background=False)
        history = GitHistory(settings, memory.audit)
        history.settle_seconds = 0
        try:
            history.flush()
            item = memory.save("The deploy window is Thursday", category="work")
            history.flush()
            for start in range(0, size, CHUNK):
                moment = datetime.now(UTC)
                day = f"episodes/{moment:%Y-%m-%d}.jsonl"
                lines = []
                for n in range(start, min(size, start + CHUNK), 2):
                    lines.append(
                        AuditLine(moment, "CREATE", f"memory/notes/{n:012x}.json", "main", "auto", f'saved "note {n}"')
                    )
                    lines.append(AuditLine(moment, "APPEND", day, "main", "auto", f'episode: saved "note {n}"'))
                memory.audit.log.append(lines)
            history.flush()
            for day in ("Friday", "Monday", "Tuesday"):
                memory.update(item.id, content=f"The deploy window is {day}")
                history.flush()
            log_bytes = memory.audit.log.path.stat().st_size
            index = getattr(memory.audit, "index", None)
            build = None
            if index is not None:
                t = time.perf_counter()
                index.catch_up()
                build = time.perf_counter() - t
            trail = AuditTrail(memory.audit, history)
            rollback = Rollback(settings, memory.audit, history, memory)
            rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            history_s = []
            for _ in range(rounds):
                t = time.perf_counter()
                result = trail.item_history(item.id)
                history_s.append(time.perf_counter() - t)
            assert len(result.versions) >= 4 and result.entries[0].action == "EDIT", result
            revert_s = []
            for _ in range(rounds):
                t = time.perf_counter()
                reverted = rollback.revert_item(item.id)
                revert_s.append(time.perf_counter() - t)
                assert reverted.restored, reverted
                history.flush()  # the committer's work, in the background in a server
                if index is not None:
                    index.catch_up()
            rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            index_path = settings.index_dir / "audit-lines.sqlite"
        finally:
            history.close()
            memory.close()
        return {
            "code": str(Path(rockmem_mcp.__file__).parent),
            "log_lines": size + 5,
            "log_mb": round(log_bytes / 1e6, 1),
            "index_mb": round(index_path.stat().st_size / 1e6, 1) if index_path.exists() else None,
            "index_build_s": None if build is None else round(build, 3),
            "history_p50_s": round(statistics.median(history_s), 4),
            "history_s": [round(x, 4) for x in history_s],
            "revert_p50_s": round(statistics.median(revert_s), 4),
            "revert_s": [round(x, 4) for x in revert_s],
            "rss_growth_mb": round((rss_after - rss_before) / 1024, 1),  # ru_maxrss is in KiB on Linux
        }


def run_worker(code: Path, size: int, rounds: int) -> dict[str, Any]:
    """This file as a script (not `-m`, which would put the working directory first), `code` first on the path."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(code), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
    }
    args = [sys.executable, str(Path(__file__).resolve()), "--worker", "--size", str(size), "--rounds", str(rounds)]
    done = subprocess.run(args, env=env, check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, action="append", help="log lines (repeatable; default 20000 and 200000)")
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--baseline", type=Path, help="a checkout of the code before (git worktree add …)")
    parser.add_argument("--out", type=Path, default=RESULTS / "audit-history.json")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    sizes = args.size or [20_000, 200_000]
    if args.worker:
        print(json.dumps(worker(sizes[0], args.rounds)))
        return
    codes = {"after": HERE.parent}
    if args.baseline is not None:
        codes = {"before": args.baseline.resolve(), **codes}
    report: dict[str, Any] = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        "rounds": args.rounds,
        "sizes": {},
    }
    for size in sizes:
        report["sizes"][str(size)] = {name: run_worker(code, size, args.rounds) for name, code in codes.items()}
        print(json.dumps({size: report["sizes"][str(size)]}, indent=2), flush=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
