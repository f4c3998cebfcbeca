"""MaxScore in BM25 search (issue 25, part 4: 1M search p50 <= 5 ms): a home's search with and without it.

    python -m benchmarks.max_score --home /tmp/w1m/rockmem-home --home /tmp/w100k/rockmem-home

Opens each home as a server does (embeddings off: BM25 and salience), then asks the 300 corpus questions
`benchmarks.speed` asks through `MemoryService.search` (20 results read back), once scoring every posting
(`bm25.PRUNE_FROM` out of reach) and once with MaxScore as shipped, alternating over `--rounds` rounds in one
process. Every question's results (ids, scores, total) must be the same both ways; the report counts the
questions MaxScore took (the rest scored everything). Also timed: the index alone (`MemoryIndex.search`,
no read-back). Writes benchmarks/results/max-score.json (or --out).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

from benchmarks.corpus import Corpus
from benchmarks.speed import QUERY_SEED, home_settings
from rockmem_mcp.memory.service import MemoryService
from rockmem_mcp.search import bm25
from rockmem_mcp.search.memory_index import SearchFilter

RESULTS = Path(__file__).parent / "results"
SHIPPED = bm25.PRUNE_FROM
WAYS = {"score_every_posting": 1 << 62, "max_score": SHIPPED}


def measure(home: Path, queries: list[str], rounds: int = 3) -> dict[str, Any]:
    memory = MemoryService(home_settings(home))
    try:
        taken = took = 0
        best = bm25.BM25Index.best

        def counting(self: bm25.BM25Index, *args: Any, **kwargs: Any) -> bm25.Hits | None:
            nonlocal taken
            hits = best(self, *args, **kwargs)
            taken += hits is not None
            return hits

        view = memory.salience_view()
        per_round: dict[str, dict[str, list[float]]] = {way: {"search": [], "index": []} for way in WAYS}
        answers: dict[str, list[Any]] = {}
        for _ in range(rounds):
            for way, prune_from in WAYS.items():
                bm25.PRUNE_FROM = prune_from
                bm25.BM25Index.best = counting  # type: ignore[method-assign]
                taken, search, index, seen = 0, [], [], []
                for query in queries:
                    t = time.perf_counter()
                    found = memory.search(query, limit=20)
                    search.append(time.perf_counter() - t)
                    seen.append(([(r.entry.id, r.score) for r in found.results], found.total_matches))
                    memory.index.bm25._last_scores = None  # the search just made scores the index would reuse
                    t = time.perf_counter()
                    memory.index.search(query, SearchFilter(), 20, salience=view)
                    index.append(time.perf_counter() - t)
                answers.setdefault(way, seen)
                assert seen == answers[way], "a way answered differently from one round to the next"
                per_round[way]["search"].append(statistics.median(search) * 1e3)
                per_round[way]["index"].append(statistics.median(index) * 1e3)
                if way == "max_score":
                    took = taken // 2  # counted for both timed calls
        differing = sum(a != b for a, b in zip(answers["score_every_posting"], answers["max_score"], strict=True))
    finally:
        bm25.PRUNE_FROM, bm25.BM25Index.best = SHIPPED, best  # type: ignore[method-assign]
        memory.close()
    return {
        "memories": len(memory.index),
        "questions": len(queries),
        "questions_max_score_took": took,
        "questions_answered_differently": differing,
        **{
            f"{part}_p50_ms": {way: round(statistics.median(r[part]), 3) for way, r in per_round.items()}
            for part in ("search", "index")
        },
        "search_p50_ms_per_round": {way: [round(v, 3) for v in r["search"]] for way, r in per_round.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--home", type=Path, action="append", required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--out", type=Path, default=RESULTS / "max-score.json")
    args = parser.parse_args()
    queries = Corpus(seed=QUERY_SEED).queries(args.queries)
    report = {str(home): measure(home, queries, args.rounds) for home in args.home}
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
