"""A permanent delete on a home with a long history (governance/history.py `purge`: every commit rewritten).

    python -m benchmarks purge --build /tmp/purge-home --commits 900     # one save and one commit at a time
    git worktree add /tmp/base HEAD~1
    python -m benchmarks purge --home /tmp/purge-home --work /tmp/purge \
        --checkout /tmp/base --checkout . --rounds 3                      # → results/purge.json

`--build` saves COMMITS memories of the benchmark corpus one by one, committing the history after each, as a
server does when saves come a few seconds apart: the audit log grows by a line a commit, and every commit holds
its version of the log. Each measurement copies the home and, in a process of its own from CHECKOUT (so its own
package is imported), deletes one memory for good the way the tool does (`Erasure.delete_memory`: the file, its
day log's lines, the audit log's and every commit's copies of its text), timed. The memory is the one saved at
each `--at` fraction of the history (the rewrite keeps the commits before the item's first as they were).
Checkouts alternate within every round. Reported: seconds per checkout and victim, medians and the ratios to the
first checkout.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.checkouts import run_in_checkout
from benchmarks.salience import machine

RESULTS = Path(__file__).parent / "results"
IDS = "purge-ids.txt"  # beside the home: the memories in the order their commits were made

# Run from each checkout, with only what both sides of an A/B have: no import of this harness.
WORKER = """
import json, sys, time
from pathlib import Path
from rockmem_mcp.config import Settings
from rockmem_mcp.governance.erasure import Erasure
from rockmem_mcp.governance.history import GitHistory
from rockmem_mcp.memory.service import MemoryService

home, victim = Path(sys.argv[1]), sys.argv[2]
settings = Settings.load({"home": home, "embedding_model": "off"}, env={})
memory = MemoryService(settings, embed_in_background=False)
history = GitHistory(settings, memory.audit)
erasure = Erasure(settings, memory.audit, memory, None, history)
started = time.perf_counter()
_, problems = erasure.delete_memory(victim)
seconds = time.perf_counter() - started
memory.close()
print(json.dumps({"purge_s": seconds, "problems": problems}))
"""


def build(home: Path, commits: int) -> None:
    from benchmarks.corpus import Corpus
    from benchmarks.speed import home_settings
    from rockmem_mcp.governance.history import GitHistory
    from rockmem_mcp.memory.service import MemoryService

    settings = home_settings(home, embedding_model="off")
    memory = MemoryService(settings, embed_in_background=False)
    history = GitHistory(settings, memory.audit)
    ids = []
    for record in Corpus().records(commits):
        ids.append(memory.save(record["content"], category=record["category"], tags=record["tags"]).id)
        history.flush()
    memory.close()
    (home.parent / IDS).write_text("\n".join(ids) + "\n")


def purge_once(checkout: Path, home: Path, victim: str) -> dict[str, Any]:
    result = run_in_checkout(checkout, WORKER, str(home), victim)
    if result["problems"]:
        raise SystemExit(f"{checkout}: the delete left traces: {result['problems']}")
    return result


def measure(home: Path, work: Path, checkouts: list[Path], at: list[float], rounds: int) -> dict[str, Any]:
    ids = (home.parent / IDS).read_text().split()
    victims = {fraction: ids[min(len(ids) - 1, int(fraction * len(ids)))] for fraction in at}
    samples: dict[str, dict[str, list[float]]] = {str(c): {str(f): [] for f in at} for c in checkouts}
    for r in range(rounds):
        for checkout in checkouts if r % 2 == 0 else checkouts[::-1]:  # alternate who goes first
            for fraction, victim in victims.items():
                copy = work / "home"
                shutil.rmtree(copy, ignore_errors=True)
                shutil.copytree(home, copy, symlinks=True)
                result = purge_once(checkout, copy, victim)
                samples[str(checkout)][str(fraction)].append(result["purge_s"])
                print(checkout, fraction, result, file=sys.stderr, flush=True)
    shutil.rmtree(work / "home", ignore_errors=True)
    medians = {c: {f: statistics.median(s) for f, s in by.items()} for c, by in samples.items()}
    first = str(checkouts[0])
    return {
        "benchmark": "purge",
        "date": datetime.now(UTC).date().isoformat(),
        "machine": machine(),
        "commits": len(ids),
        "rounds": rounds,
        "purge_s": samples,
        "median_s": medians,
        "ratio_to_first": {c: {f: round(m / medians[first][f], 3) for f, m in by.items()} for c, by in medians.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", type=Path, help="make a home with a long history here")
    parser.add_argument("--commits", type=int, default=900)
    parser.add_argument("--home", type=Path, help="the home --build made")
    parser.add_argument("--work", type=Path, help="where each measurement's copy of the home goes")
    parser.add_argument("--checkout", type=Path, action="append", help="a checkout with its .venv (repeatable)")
    parser.add_argument("--at", type=float, nargs="+", default=[0.1, 0.9], help="victims: where in the history")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=RESULTS / "purge.json")
    args = parser.parse_args()
    if args.build:
        build(args.build, args.commits)
    if args.home:
        checkouts = [c.resolve() for c in args.checkout or [Path(__file__).resolve().parents[1]]]
        report = measure(args.home, args.work or args.home.parent / "purge-work", checkouts, args.at, args.rounds)
        args.out.write_text(json.dumps(report, indent=2) + "\n")
        print(json.dumps(report["median_s"], indent=2), json.dumps(report["ratio_to_first"], indent=2))


if __name__ == "__main__":
    main()
