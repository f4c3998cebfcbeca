"""Search speed with issue 41's BM25 constants against the earlier ones, in one process on one index.

    python -m benchmarks.retrieval.speed_ab --size 100000

A home of `size` speed-corpus memories (benchmarks/corpus.py, as benchmarks/speed.py fills one) is indexed once;
then rounds alternate the two constant sets on that index (k1, b and the pair weight are read per query; the
length norms are recomputed when they change) and time `MemoryIndex.search` for 300 corpus questions, top 20, in
bm25 mode as a default search runs it (MaxScore, salience aside). Hybrid search the same way, each side with its
own model reading and vector weight (the query's embedding included). Then the bundled model's embedding rate, as the
product reads a text (whole, known words) and as model2vec does (first 512 tokens), over 20,000 speed-corpus facts
and 2,000 long replies of the `long` corpus (where LoCoMo is beside the checkout). Medians over rounds; writes
benchmarks/results/retrieval-speed-ab.json (or --out). b and k1 bound what MaxScore may skip, so they set its cost.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

from benchmarks.corpus import Corpus
from rockmem_mcp.models import MemoryEntry
from rockmem_mcp.search.bm25 import CONSTANTS
from rockmem_mcp.search.memory_index import MemoryIndex, SearchFilter
from rockmem_mcp.search.rank import Ranking
from rockmem_mcp.search.vectors import VectorTable

RESULTS = Path(__file__).resolve().parents[1] / "results"
EARLIER = (1.5, 0.3, 2.0)  # before issue 41


def run(size: int, rounds: int, queries: int, embedded: tuple[int, int] = (20_000, 2_000)) -> dict[str, object]:
    """`embedded`: how many short and long texts the embedding rates are taken over."""
    corpus = Corpus()
    start = datetime(2026, 1, 1, tzinfo=UTC)
    entries = [
        MemoryEntry(id=f"{i:012x}", content=str(r["content"]), created_at=start + timedelta(seconds=i))
        for i, r in enumerate(corpus.records(size))
    ]
    index = MemoryIndex()
    index.upsert_many(entries)
    questions = corpus.queries(queries)
    hybrid = hybrid_p50(index, entries, questions, rounds)
    sets = {"issue41": CONSTANTS["tuned"], "earlier": EARLIER}
    p50: dict[str, list[float]] = {name: [] for name in sets}
    for _ in range(rounds):
        for name, (k1, b, pair) in sets.items():
            index.bm25.k1, index.bm25.b, index.bm25.pair_weight = k1, b, pair
            index.bm25._length_norm = None
            index.search(questions[0], SearchFilter(), 20, Ranking("bm25"))  # norms computed outside the timing
            times = []
            for question in questions:
                began = time.perf_counter()
                index.search(question, SearchFilter(), 20, Ranking("bm25"))
                times.append((time.perf_counter() - began) * 1000)
            p50[name].append(statistics.median(times))
    medians = {name: round(statistics.median(values), 3) for name, values in p50.items()}
    return {
        "hybrid_top20_p50_ms": hybrid,
        "embedding_texts_per_s": embedding_rates(
            [str(r["content"]) for r in corpus.records(embedded[0])], rounds, embedded[1]
        ),
        "date": time.strftime("%Y-%m-%d"),
        "size": size,
        "questions": queries,
        "rounds": rounds,
        "search_top20_p50_ms_per_round": {name: [round(v, 3) for v in values] for name, values in p50.items()},
        "median_p50_ms": medians,
        "issue41_over_earlier": round(medians["issue41"] / medians["earlier"], 3),
    }


def hybrid_p50(index: MemoryIndex, entries: list[MemoryEntry], questions: list[str], rounds: int) -> dict[str, float]:
    """Hybrid search p50 (query embedded, every vector scanned, fused, top 20) with each side's model reading,
    constants and vector weight, alternating on the one index."""
    from rockmem_mcp.search.static_model import StaticEmbeddings

    sides = {
        "issue41": (StaticEmbeddings(), CONSTANTS["tuned"], Ranking("hybrid")),
        "earlier": (StaticEmbeddings(model2vec_exact=True), EARLIER, Ranking("hybrid", vector_weight=3.0)),
    }
    vectors = {name: model.embed([e.document_text() for e in entries]) for name, (model, _, _) in sides.items()}
    slots = np.arange(len(entries))
    p50: dict[str, list[float]] = {name: [] for name in sides}
    for _ in range(rounds):
        for name, (model, (k1, b, pair), ranking) in sides.items():
            index.bm25.k1, index.bm25.b, index.bm25.pair_weight = k1, b, pair
            index.bm25._length_norm = None
            index.vectors = VectorTable(model.model_id, model.dim, rows=index.bm25.slot_count)
            index.vectors.put(slots, vectors[name])
            times = []
            for question in questions:
                began = time.perf_counter()
                index.search(question, SearchFilter(), 20, ranking, model.embed([question])[0])
                times.append((time.perf_counter() - began) * 1000)
            p50[name].append(statistics.median(times))
    return {name: round(statistics.median(values), 3) for name, values in p50.items()}


def embedding_rates(short: list[str], rounds: int, long_count: int) -> dict[str, dict[str, float]]:
    from benchmarks.retrieval.corpora import locomo_available, long_corpus
    from rockmem_mcp.search.static_model import StaticEmbeddings

    texts = {"short": short}
    if locomo_available():
        texts["long"] = [m.content for h in long_corpus().homes for m in h.memories if m.key.endswith("/reply")][
            :long_count
        ]
    rates: dict[str, dict[str, float]] = {}
    for kind, batch in texts.items():
        for label, exact in (("issue41", False), ("model2vec", True)):
            runs = []
            for _ in range(rounds):
                model = StaticEmbeddings(model2vec_exact=exact)  # a cold word cache each time, as a new process
                began = time.perf_counter()
                model.embed(batch)
                runs.append(len(batch) / (time.perf_counter() - began))
            rates.setdefault(kind, {})[label] = round(statistics.median(runs))
    return rates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--out", type=Path, default=RESULTS / "retrieval-speed-ab.json")
    args = parser.parse_args()
    report = run(args.size, args.rounds, args.queries)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report["median_p50_ms"]), report["issue41_over_earlier"])


if __name__ == "__main__":
    main()
