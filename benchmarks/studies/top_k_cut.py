"""The sampled cut in `bm25.top_k` (issue 25, part 4): BM25 index search at 1M with and without it.

    python -m benchmarks.studies.top_k_cut --size 100k --size 1m

Builds an in-memory BM25 index of the seeded corpus (no files), then times the index's top-10 for 300 corpus
queries with `kth_largest` as shipped and as a partition of every match, alternating over 4 rounds in one
process (the score cache cleared before every query). Writes benchmarks/results/top-k-cut.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import speed
from benchmarks.corpus import Corpus
from rockmem_mcp.search import bm25
from rockmem_mcp.search.tokenizer import tokenize

RESULTS = Path(__file__).parents[1] / "results"
BATCH = 50_000


def partition_all(values: np.ndarray, k: int) -> np.generic:
    return np.partition(values, len(values) - k)[len(values) - k]


def measure(size: int, queries: int = 300, rounds: int = 4) -> dict[str, Any]:
    index = bm25.BM25Index()
    records = Corpus(seed=7).records(size)
    batch: list[tuple[str, list[str], bool]] = []
    for i, record in enumerate(records):
        batch.append((f"{i:012x}", tokenize(str(record["content"])), False))
        if len(batch) == BATCH:
            index.add_many(batch)
            batch = []
    if batch:
        index.add_many(batch)
    asked = [tokenize(q) for q in Corpus(seed=speed.QUERY_SEED).queries(queries)]
    shipped = bm25.kth_largest
    ways = {"sampled_cut": shipped, "partition_all": partition_all}
    p50: dict[str, list[float]] = {name: [] for name in ways}
    try:
        for r in range(rounds):
            for name in list(ways) if r % 2 == 0 else list(ways)[::-1]:
                bm25.kth_largest = ways[name]  # type: ignore[assignment]
                samples = []
                for tokens in asked:
                    index._last_scores = None
                    started = time.perf_counter()
                    index.search(tokens, limit=10)
                    samples.append(time.perf_counter() - started)
                p50[name].append(round(statistics.median(samples) * 1000, 3))
    finally:
        bm25.kth_largest = shipped  # type: ignore[assignment]
    return {"size": size, "p50_ms_per_round": p50, "p50_ms": {k: statistics.median(v) for k, v in p50.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=speed.parse_size, action="append")
    parser.add_argument("--out", type=Path, default=RESULTS / "top-k-cut.json")
    args = parser.parse_args()
    report = {"benchmark": "top_k_cut", "date": time.strftime("%Y-%m-%d")}
    report["sizes"] = [measure(size) for size in args.size or [100_000, 1_000_000]]
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
