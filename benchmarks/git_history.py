"""Git history under a stream of saves (issue 22, part 2): every audited save is in git soon after the last.

    python -m benchmarks.git_history                  # 10,000 saves, 3 runs → results/git-history.json
    python -m benchmarks.git_history --saves 1000 --runs 1

Each run: a fresh home, a MemoryService and a started GitHistory (governance/history.py, committing every
`audit_commit_seconds`, 1 s by default) in one process, as the server runs them. SAVES memories are saved one
at a time, each durable before the next (MemoryService.save: file, journal and audit line fsync'd). Then, from
the moment the last save returned, HEAD:meta/audit.log is polled (a separate `git cat-file`, every 20 ms) until
it holds every line: the lag. Afterwards every saved file is checked in HEAD's tree, and the history is closed.
A baseline run saves the same way without the history, so the save latency with the committer running
beside it can be compared (it must never make a save wait). Reported: the lag per run and its median, save
p50/p95 with and without history, commits made, and the repository's size.
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
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.salience import machine
from benchmarks.speed import percentiles
from rockmem_mcp.config import Settings
from rockmem_mcp.governance.history import GitHistory
from rockmem_mcp.memory.service import MemoryService

RESULTS = Path(__file__).parent / "results"
POLL_S = 0.02
LAG_LIMIT_S = 600.0


def git(home: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    env = {
        "PATH": os.environ.get("PATH", ""),
        "GIT_DIR": str(home / ".git"),
        "GIT_WORK_TREE": str(home),
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
    }
    return subprocess.run(["git", *args], capture_output=True, env=env, cwd=home)


def saves(memory: MemoryService, count: int) -> tuple[list[float], list[str]]:
    latencies, ids = [], []
    for i in range(count):
        started = time.perf_counter()
        entry = memory.save(f"note {i}: the deploy review moved to Thursday 10:30 in room {i % 7}", f"bench/n{i % 20}")
        latencies.append(time.perf_counter() - started)
        ids.append(entry.id)
    return latencies, ids


def run(work: Path, count: int, with_history: bool) -> dict[str, Any]:
    home = Path(tempfile.mkdtemp(dir=work))
    settings = Settings.load({"home": home}, env={})
    memory = MemoryService(settings, embed_in_background=False)
    history = GitHistory(settings, memory.audit) if with_history else None
    if history is not None:
        history.start()
        assert history.ready.wait(60), "the history did not start"
    latencies, ids = saves(memory, count)
    last_save = time.perf_counter()
    result: dict[str, Any] = {"save": percentiles(latencies)}
    if history is not None:
        log_size = (settings.meta_dir / "audit.log").stat().st_size
        while True:
            size = git(home, "cat-file", "-s", "HEAD:meta/audit.log").stdout.strip()
            if size and int(size) == log_size:
                lag = time.perf_counter() - last_save
                break
            if time.perf_counter() - last_save > LAG_LIMIT_S:
                raise SystemExit(f"HEAD:meta/audit.log never held every line ({size!r} of {log_size} bytes)")
            time.sleep(POLL_S)  # polling the repository from outside, as a reader would
        committed = git(home, "show", "HEAD:meta/audit.log").stdout.count(b"\n")
        tree = set(git(home, "ls-tree", "-r", "--name-only", "HEAD").stdout.decode().splitlines())
        in_tree = sum(memory.audit.file(memory.files.path_for(i, memory.get(i).category)) in tree for i in ids)
        history.close()
        commits = int(git(home, "rev-list", "--count", "HEAD").stdout)
        git_bytes = sum(f.stat().st_size for f in (home / ".git").rglob("*") if f.is_file())
        result |= {
            "lag_s": round(lag, 3),
            "audit_lines_in_head": committed,
            "saved_files_in_head": in_tree,
            "commits": commits,
            "git_mb": round(git_bytes / 1e6, 1),
        }
    memory.close()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--saves", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", type=Path, default=RESULTS / "git-history.json")
    args = parser.parse_args()
    git_version = subprocess.run(["git", "--version"], capture_output=True, text=True).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="rockmem-git-bench-") as tmp:
        work = Path(tmp)
        baseline = run(work, args.saves, with_history=False)
        print(f"baseline: {baseline}", file=sys.stderr)
        runs = []
        for n in range(args.runs):
            runs.append(run(work, args.saves, with_history=True))
            print(f"run {n + 1}: {runs[-1]}", file=sys.stderr)
    report = {
        "benchmark": "git-history",
        "saves": args.saves,
        "runs": args.runs,
        "date": datetime.now(UTC).date().isoformat(),
        "machine": machine() | {"git": git_version},
        "commit_every_s": Settings.model_fields["audit_commit_seconds"].default,
        "lag_s_median": statistics.median(r["lag_s"] for r in runs),
        "lag_s": [r["lag_s"] for r in runs],
        "every_line_in_head": all(r["audit_lines_in_head"] == args.saves for r in runs),
        "every_file_in_head": all(r["saved_files_in_head"] == args.saves for r in runs),
        "save_without_history": baseline["save"],
        "save_with_history": [r["save"] for r in runs],
        "commits": [r["commits"] for r in runs],
        "git_mb": [r["git_mb"] for r in runs],
    }
    args.out.parent.mkdir(exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
