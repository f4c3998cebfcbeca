"""A commit of many changed files in a big home's history (governance/history.py: which paths .gitignore leaves out).

    python -m benchmarks history_commit --build /tmp/hc-home --size 100000   # memories, then the history's start
    git worktree add /tmp/base HEAD~1
    python -m benchmarks history_commit --home /tmp/hc-home --work /tmp/hc \
        --checkout /tmp/base --checkout . --changes 10 1000 --rounds 3        # → results/history-commit.json

`--build` saves SIZE memories of the benchmark corpus (`MemoryService.save_many`, as an import does) and begins the
home's history (its first commit holds every file). Any home with a history will do for `--home`. The home is
copied once per checkout (it is left as it was). Each measurement runs in a process of its own from
CHECKOUT (so its own package is imported): K memories of the copy are changed in one durable batch
(`MemoryService.revise_many`, as a dream's decay pass or a migration changes them: files, journal, one audit line
each), then `GitHistory.flush()` commits them, timed. Checkouts alternate within every round; each copy's history
grows by the same commits. Reported: the commit's seconds for each checkout and K, their medians and the ratios to
the first checkout.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.checkouts import run_in_checkout
from benchmarks.salience import machine

RESULTS = Path(__file__).parent / "results"

# Run from each checkout, with only what both sides of an A/B have: no import of this harness.
WORKER = """
import json, sys, time
from pathlib import Path
from rockmem_mcp.audit.service import Audit
from rockmem_mcp.config import Settings
from rockmem_mcp.governance.history import GitHistory
from rockmem_mcp.memory.service import MemoryService

home, changes, step = Path(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
settings = Settings.load({"home": home, "embedding_model": "off"}, env={})
history = GitHistory(settings, Audit(settings))
history.flush()  # whatever was pending before: not timed
memory = MemoryService(settings, embed_in_background=False)
ids = []
for entry in memory.iter_entries():
    ids.append(entry.id)
    if len(ids) == changes:
        break
changed = memory.revise_many(ids, lambda entry: {"importance": round((entry.importance + step) % 1.0, 4)})
memory.close()
started = time.perf_counter()
history.flush()
print(json.dumps({"changed": changed, "commit_s": time.perf_counter() - started}))
"""


def build(home: Path, size: int) -> None:
    from benchmarks.corpus import Corpus
    from benchmarks.speed import home_settings
    from rockmem_mcp.audit.service import Audit
    from rockmem_mcp.governance.history import GitHistory
    from rockmem_mcp.memory.service import MemoryService

    settings = home_settings(home)
    memory = MemoryService(settings, embed_in_background=False)
    records = list(Corpus().records(size))
    for start in range(0, size, 2000):
        memory.save_many([memory.prepare_entry(record) for record in records[start : start + 2000]])
    memory.close()
    GitHistory(settings, Audit(settings)).flush()


def commit_once(checkout: Path, home: Path, changes: int, step: float) -> dict[str, Any]:
    return run_in_checkout(checkout, WORKER, str(home), str(changes), str(step))


def measure(home: Path, work: Path, checkouts: list[Path], changes: list[int], rounds: int) -> dict[str, Any]:
    copies = {}
    for number, checkout in enumerate(checkouts):
        copy = work / f"checkout-{number}"
        if not copy.exists():
            shutil.copytree(home, copy, symlinks=True)
        copies[checkout] = copy
    runs: dict[str, dict[str, list[float]]] = {str(c): {str(k): [] for k in changes} for c in checkouts}
    for r in range(rounds):
        for k in changes:
            for checkout in checkouts if r % 2 == 0 else checkouts[::-1]:
                step = 0.01 * (r + 1)  # another value each round: every file changes each time
                result = commit_once(checkout, copies[checkout], k, step)
                assert result["changed"] == k, result
                runs[str(checkout)][str(k)].append(round(result["commit_s"], 4))
    medians = {c: {k: statistics.median(v) for k, v in by_k.items()} for c, by_k in runs.items()}
    first = medians[str(checkouts[0])]
    ratios = {c: {k: round(m / first[k], 4) for k, m in by_k.items()} for c, by_k in medians.items()}
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "home": str(home),
        "rounds": rounds,
        "commit_s": runs,
        "commit_s_median": medians,
        "ratio_to_first": ratios,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", type=Path, help="make a home of --size memories with its history here, and stop")
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--home", type=Path, help="a home with a history (left as it is)")
    parser.add_argument("--work", type=Path, help="where each checkout's copy of the home goes")
    parser.add_argument("--checkout", type=Path, action="append", help="a source tree (repeat)")
    parser.add_argument("--changes", type=int, nargs="+", default=[10, 1000], help="memories changed per commit")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=RESULTS / "history-commit.json")
    args = parser.parse_args()
    if args.build:
        build(args.build, args.size)
        return
    if not (args.home and args.work and args.checkout):
        parser.error("--home, --work and at least one --checkout are needed (or --build)")
    report = measure(args.home, args.work, [c.resolve() for c in args.checkout], args.changes, args.rounds)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report["commit_s_median"], indent=2), json.dumps(report["ratio_to_first"], indent=2))


if __name__ == "__main__":
    main()
