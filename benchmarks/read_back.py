"""Three in-process probes behind issue 25's 2026-11-28 changes, on an existing home.

    python -m benchmarks.read_back --home /tmp/stdio-start-100k/rockmem-home     # a home stdio_start --build made

- **read back**: the 20 results of each of 200 corpus questions (as `benchmarks.speed` asks them) read back from
  their files as a search does, parsing every file (`fresh`) and through the kept parsed entries
  (`storage/records.ParsedFiles`), alternating per question after one untimed pass; milliseconds per 20, median.
- **vector scan**: one query against a 100,000 x 256 matrix of random unit rows, as float32 (`matrix @ query`)
  and as the int8 rows of `search/vectors.VectorTable`; median of 30, and the largest difference of a cosine.
- **episode index**: VmRSS before and after the home's episode index is made ready (`Episodes.warm`, which a
  server runs in the background after its start), and the seconds it took: `build` parses every day file (no
  snapshot), `restore` starts from the snapshot the build wrote (to a temp file) and checks each day file
  against it. Each in a fresh interpreter.
Writes benchmarks/results/read-back.json (or --out).
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

import numpy as np

from benchmarks.corpus import Corpus
from benchmarks.speed import QUERY_SEED
from rockmem_mcp.config import Settings
from rockmem_mcp.memory.service import MemoryService
from rockmem_mcp.search.vectors import VectorTable

RESULTS = Path(__file__).parent / "results"
ROOT = Path(__file__).resolve().parent.parent  # this checkout, for the workers' imports


def rss_mb() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) // 1024 for line in f if line.startswith("VmRSS"))


def read_back(memory: MemoryService, questions: list[str]) -> dict[str, Any]:
    groups = []
    for question in questions:
        ids = [hit.entry.id for hit in memory.search(question, limit=20).results]
        groups.append([location for i in ids if (location := memory.index.location(i)) is not None])
    timings: dict[str, list[float]] = {"fresh": [], "kept": []}
    for group in groups:  # untimed: fills what is kept
        for location in group:
            memory.files.read(location)
    for n, group in enumerate(groups):
        for way in ("fresh", "kept") if n % 2 == 0 else ("kept", "fresh"):
            started = time.perf_counter()
            for location in group:
                memory.files.read(location, fresh=way == "fresh")
            timings[way].append(time.perf_counter() - started)
    return {way: round(statistics.median(samples) * 1e3, 3) for way, samples in timings.items()} | {
        "searches": len(groups)
    }


def vector_scan(rows: int = 100_000, dim: int = 256, runs: int = 30) -> dict[str, Any]:
    rng = np.random.default_rng(5)
    matrix = rng.standard_normal((rows, dim), dtype=np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    query = matrix[7] * 0.5 + matrix[11] * 0.5
    query /= np.linalg.norm(query)
    table = VectorTable(rows=rows)
    table.adopt("probe", dim)
    table.put(np.arange(rows), matrix)
    timings: dict[str, list[float]] = {"float32": [], "int8": []}
    for _ in range(runs):
        for way, scan in (("float32", lambda: matrix @ query), ("int8", lambda: table.similarities(query))):
            started = time.perf_counter()
            scan()
            timings[way].append(time.perf_counter() - started)
    return {
        **{f"{way}_ms": round(statistics.median(samples) * 1e3, 3) for way, samples in timings.items()},
        "max_cosine_difference": round(float(np.abs(table.similarities(query) - matrix @ query).max()), 5),
        "matrix_mb": {"float32": round(matrix.nbytes / 1e6, 1), "int8": round(table.matrix.view.nbytes / 1e6, 1)},
    }


EPISODE_WORKER = r"""
import json, sys, time
from pathlib import Path
from benchmarks.read_back import rss_mb
from rockmem_mcp.config import Settings
from rockmem_mcp.episodes.service import Episodes

home, snapshot, mode = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
episodes = Episodes(Settings(home=home, embedding_model="off"))
episodes.index.snapshot = snapshot if mode == "restore" else None
before = rss_mb()
started = time.perf_counter()
with episodes.index.lock:
    episodes.index.sync()
seconds = time.perf_counter() - started
report = {"episodes": int(episodes.index.live().sum()), "s": round(seconds, 2), "rss_added_mb": rss_mb() - before}
if mode == "build":
    episodes.index.save(snapshot)
print(json.dumps(report))
"""


def episode_index(home: Path) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as work:
        snapshot = Path(work) / "episode-index.npz"
        report = {}
        for mode in ("build", "restore"):
            out = subprocess.run(
                [sys.executable, "-c", EPISODE_WORKER, str(home), str(snapshot), mode],
                check=True, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)},
            )  # fmt: skip
            report[mode] = json.loads(out.stdout.strip().splitlines()[-1])
    return report


def measure(home: Path, questions: int = 200, scan_rows: int = 100_000) -> dict[str, Any]:
    settings = Settings(home=home, embedding_model="off")
    report: dict[str, Any] = {"benchmark": "read_back", "date": time.strftime("%Y-%m-%d"), "home": str(home)}
    report["episode_index"] = episode_index(home)
    memory = MemoryService(settings)
    try:
        report["read_back_ms_per_20"] = read_back(memory, Corpus(seed=QUERY_SEED).queries(questions))
    finally:
        memory.close()
    report["vector_scan"] = vector_scan(scan_rows)
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--home", type=Path, required=True)
    parser.add_argument("--questions", type=int, default=200)
    parser.add_argument("--out", type=Path, default=RESULTS / "read-back.json")
    args = parser.parse_args()
    report = measure(args.home, args.questions)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
