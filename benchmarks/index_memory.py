"""A big home's memory over a server's life (issue 25, part 4: RSS at 1M stated and <= 1.5 GB).

    python -m benchmarks.index_memory --home /tmp/home-1m                       # this checkout, 3 rounds
    python -m benchmarks.index_memory --home /tmp/base-home --checkout /tmp/base --home /tmp/home-1m --checkout .

Each round starts a fresh interpreter per checkout (run from its folder with PYTHONSAFEPATH, so its own package
is imported) that opens the home's memory store as a server does (embeddings off: BM25 alone), and reports:
  - `open_s`, `rss_open_mb`, `peak_open_mb`: the time to open, VmRSS after, and the peak (ru_maxrss) so far,
    which loading the index snapshot sets;
  - `search_p50_ms`: 300 corpus questions (as `benchmarks.speed` asks them) through `MemoryService.search`
    (20 results read back), and `rss_searched_mb` after them (the steady figure);
  - `snapshot_s`, `peak_snapshot_mb`: one index snapshot written (as every N changes and at close), and the
    peak that sets.
`--home` and `--checkout` pair up in order (one home per checkout: an older checkout may not read a newer
snapshot format). Checkouts alternate within each round; medians over rounds. Writes
benchmarks/results/index-memory.json (or --out).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.corpus import Corpus
from benchmarks.speed import QUERY_SEED

RESULTS = Path(__file__).parent / "results"
QUERIES = 300

WORKER = r"""
import json, resource, statistics, sys, time
from pathlib import Path
from rockmem_mcp.config import Settings
try:
    from rockmem_mcp.memory.service import MemoryService
except ImportError:  # a checkout from before issue 42's layout
    from rockmem_mcp.services.memory import MemoryService

def rss_mb():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) // 1024 for line in f if line.startswith("VmRSS"))

def peak_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024

home, queries = Path(sys.argv[1]), json.loads(sys.argv[2])
report = {}
started = time.perf_counter()
memory = MemoryService(Settings(home=home, embedding_model="off"))
report["open_s"] = round(time.perf_counter() - started, 2)
report["rss_open_mb"], report["peak_open_mb"] = rss_mb(), peak_mb()
samples = []
for query in queries:
    t = time.perf_counter()
    memory.search(query, limit=20)
    samples.append(time.perf_counter() - t)
report["search_p50_ms"] = round(statistics.median(samples) * 1e3, 3)
report["rss_searched_mb"] = rss_mb()
started = time.perf_counter()
memory.write_snapshot()
report["snapshot_s"] = round(time.perf_counter() - started, 2)
report["peak_snapshot_mb"] = peak_mb()
report["entries"] = len(memory.index)
memory.close()
print(json.dumps(report))
"""


def measure(home: Path, checkout: Path, queries: list[str]) -> dict[str, Any]:
    env = {**os.environ, "PYTHONSAFEPATH": "1", "PYTHONPATH": str(checkout.resolve())}
    out = subprocess.run(
        [sys.executable, "-c", WORKER, str(home), json.dumps(queries)],
        cwd=checkout, env=env, check=True, capture_output=True, text=True,
    )  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def run(pairs: list[tuple[Path, Path]], rounds: int, queries: list[str]) -> dict[str, Any]:
    per: dict[str, list[dict[str, Any]]] = {str(checkout): [] for _, checkout in pairs}
    for r in range(rounds):
        for home, checkout in pairs if r % 2 == 0 else pairs[::-1]:
            per[str(checkout)].append(measure(home, checkout, queries))
    medians = {
        checkout: {key: statistics.median(one[key] for one in runs) for key in runs[0]}
        for checkout, runs in per.items()
    }
    return {
        "benchmark": "index_memory",
        "date": time.strftime("%Y-%m-%d"),
        "homes": {str(checkout): str(home) for home, checkout in pairs},
        "rounds": rounds,
        "medians": medians,
        "runs": per,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--home", type=Path, action="append", required=True)
    parser.add_argument("--checkout", type=Path, action="append", default=None)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--queries", type=int, default=QUERIES)
    parser.add_argument("--out", type=Path, default=RESULTS / "index-memory.json")
    args = parser.parse_args()
    checkouts = args.checkout or [Path(".")]
    if len(checkouts) != len(args.home):
        parser.error("give one --home per --checkout")
    queries = Corpus(seed=QUERY_SEED).queries(args.queries)  # the questions benchmarks.speed asks
    report = run(list(zip(args.home, checkouts, strict=True)), args.rounds, queries)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report["medians"], indent=2))


if __name__ == "__main__":
    main()
