"""The bundled embedding model's own cost (issue 24): load, texts per second, per-query latency, memory.

    python -m benchmarks.studies.static_model_speed            # writes benchmarks/results/static-model.json

Texts are the speed corpus's memories (benchmarks/corpus.py) and its queries. "cold" starts with an empty
word cache (every distinct word tokenized once), "warm" encodes the same texts again; a query is one
`embed` call of one text, as a search makes it. Runs in this process.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import time
from pathlib import Path
from typing import Any

from benchmarks.corpus import Corpus
from rockmem_mcp.search.static_model import StaticEmbeddings, bundled_path

RESULTS = Path(__file__).parents[1] / "results"


def rss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def rate(embed: Any, texts: list[str], batch: int = 256) -> float:
    started = time.perf_counter()
    for i in range(0, len(texts), batch):
        embed(texts[i : i + batch])
    return round(len(texts) / (time.perf_counter() - started))


def per_query_ms(embed: Any, queries: list[str]) -> dict[str, float]:
    samples = []
    for query in queries:
        started = time.perf_counter()
        embed([query])
        samples.append(time.perf_counter() - started)
    samples.sort()
    return {
        "p50_ms": round(statistics.median(samples) * 1e3, 3),
        "p95_ms": round(samples[int(len(samples) * 0.95)] * 1e3, 3),
    }


def run(count: int, queries: int) -> dict[str, Any]:
    corpus = Corpus()
    texts = [str(r["content"]) for r in corpus.records(count)]
    asked = Corpus(seed=99).queries(queries)
    before = rss_mb()
    started = time.perf_counter()
    model = StaticEmbeddings()
    model.embed(["load"])
    report: dict[str, Any] = {
        "benchmark": "static-model",
        "date": time.strftime("%Y-%m-%d"),
        "texts": count,
        "mean_chars": round(sum(map(len, texts)) / count),
        "load_s": round(time.perf_counter() - started, 3),
        "files_mb": round(sum(p.stat().st_size for p in bundled_path().iterdir()) / 1e6, 1),
    }
    report["queries_per_query_cold_cache"] = per_query_ms(model.embed, asked)
    report["texts_per_s_cold_cache"] = rate(model.embed, texts)
    report["texts_per_s_warm_cache"] = rate(model.embed, texts)
    report["queries_per_query_warm_cache"] = per_query_ms(model.embed, asked)
    report["peak_rss_mb"] = {"before_load": before, "after": rss_mb()}
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=20_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--out", type=Path, default=RESULTS / "static-model.json")
    args = parser.parse_args()
    report = run(args.texts, args.queries)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
