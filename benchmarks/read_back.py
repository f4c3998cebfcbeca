"""Three in-process probes behind issue 25's 2026-11-28 changes, on an existing home.

    python -m benchmarks.read_back --home /tmp/stdio-start-100k/rockmem-home     # a home stdio_start --build made

- **read back**: the 20 results of each of 200 corpus questions (as `benchmarks.speed` asks them) read back from
  their files as a search does, parsing every file (`fresh`) and through the kept parsed entries
  (`storage/records.ParsedFiles`), alternating per question after one untimed pass; milliseconds per 20, median.
- **vector scan**: one query against a 100,000 x 256 matrix of random unit rows, as float32 (`matrix @ query`)
  and as the int8 rows of `search/vectors.VectorTable`; median of 30, and the largest difference of a cosine.
- **episode index**: VmRSS before and after the home's episode index is built (`Episodes.warm`, which a server
  runs in the background after its start), and the seconds it took.
Writes benchmarks/results/read-back.json (or --out).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.corpus import Corpus
from benchmarks.speed import QUERY_SEED
from rockmem_mcp.config import Settings
from rockmem_mcp.search.vectors import VectorTable
from rockmem_mcp.services.episodes import Episodes
from rockmem_mcp.services.memory import MemoryService

RESULTS = Path(__file__).parent / "results"


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


def episode_index(settings: Settings) -> dict[str, Any]:
    episodes = Episodes(settings)
    before = rss_mb()
    started = time.perf_counter()
    episodes.warm()
    return {
        "episodes": len(episodes.index.live()),
        "build_s": round(time.perf_counter() - started, 2),
        "rss_before_mb": before,
        "rss_after_mb": rss_mb(),
    }


def measure(home: Path, questions: int = 200, scan_rows: int = 100_000) -> dict[str, Any]:
    settings = Settings(home=home, embedding_model="off")
    report: dict[str, Any] = {"benchmark": "read_back", "date": time.strftime("%Y-%m-%d"), "home": str(home)}
    report["episode_index"] = episode_index(settings)  # first: its RSS is measured before the memory store's
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
