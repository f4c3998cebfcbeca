"""Hybrid search with one OpenBLAS thread (the package's default since issue 24) against two, same run.

    python -m benchmarks.studies.blas_threads            # 10,000 corpus facts, 3 rounds → results/blas-threads.json

A home of SIZE corpus facts is embedded with the bundled model once; then, alternating, a fresh process per
setting (OPENBLAS_NUM_THREADS=1 or 2, set before numpy loads) opens it and times 300 hybrid and bm25 searches.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RESULTS = Path(__file__).parents[1] / "results"
PROBE = """
import json, statistics, sys, time
from rockmem_mcp.config import Settings
from rockmem_mcp.memory.service import MemoryService
from benchmarks.corpus import Corpus
m = MemoryService(Settings.load({"home": sys.argv[1]}, env={}))
t = time.time()
while m.missing_vector_count() and time.time() - t < 120:
    time.sleep(0.1)
out = {}
for mode in ("bm25", "hybrid"):
    lat = []
    for q in Corpus(seed=99).queries(300):
        a = time.perf_counter(); m.search(q, limit=20, mode=mode); lat.append(time.perf_counter() - a)
    out[mode] = statistics.median(lat) * 1000
m.close()
print(json.dumps(out))
"""


def main(size: int = 10_000, rounds: int = 3) -> int:
    import rockmem_mcp  # noqa: F401
    from benchmarks.corpus import Corpus
    from rockmem_mcp.config import Settings
    from rockmem_mcp.memory.service import MemoryService

    home = Path(tempfile.mkdtemp(prefix="rockmem-blas-"))
    memory = MemoryService(Settings.load({"home": home}, env={}))
    memory.save_many([memory.prepare_entry(r) for r in Corpus().records(size)])
    while memory.missing_vector_count():
        time.sleep(0.2)
    memory.close()
    runs: dict[str, list[dict[str, float]]] = {"1": [], "2": []}
    for _ in range(rounds):
        for threads in ("2", "1"):
            env = {**os.environ, "OPENBLAS_NUM_THREADS": threads}
            done = subprocess.run([sys.executable, "-c", PROBE, str(home)], env=env, capture_output=True, text=True,
                                  check=True, cwd=Path(__file__).parents[2])  # fmt: skip
            runs[threads].append(json.loads(done.stdout))
    report = {
        "benchmark": "blas-threads",
        "size": size,
        "date": time.strftime("%Y-%m-%d"),
        "runs": runs,
        "hybrid_p50_ms": {t: statistics.median(r["hybrid"] for r in rs) for t, rs in runs.items()},
        "bm25_p50_ms": {t: statistics.median(r["bm25"] for r in rs) for t, rs in runs.items()},
    }
    (RESULTS / "blas-threads.json").write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps({k: v for k, v in report.items() if k != "runs"}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
