"""Retrieval quality per development corpus, as users run the product: R@1/5/10 of every ranking mode.

    python -m benchmarks.retrieval.report                      # every corpus that can be built here
    python -m benchmarks.retrieval.report --corpora agent --out /tmp/agent.json

Each home of each corpus (corpora.py) is imported through `rockmem-mcp import`'s code path into a fresh data
home with the default settings (the bundled model, salience on, neighbours and lifts on), embedded as the
server's background worker does, and every question is asked through MemoryService.search in each mode:
`hybrid` (the default), `bm25`, `vector`; then `hybrid` again with the memories imported without metadata, which
measures what the metadata features (session neighbours, named speaker and month) add. Textbook BM25 (rank-bm25's
BM25Okapi, k1 1.5, b 0.75, lowercase `\\w+` words) ranks the same memories in the same run.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.retrieval.corpora import SHAPES, Home, corpora
from benchmarks.retrieval.study import KS, TextbookBM25
from rockmem_mcp.config import Settings
from rockmem_mcp.home.transfer import import_jsonl
from rockmem_mcp.memory.service import MemoryService

RESULTS = Path(__file__).resolve().parents[1] / "results"
MODES = ("hybrid", "bm25", "vector")


def rankings(home: Home, metadata: bool, modes: tuple[str, ...], model: str | None) -> dict[str, list[list[str]]]:
    """The keys each mode returns for each question (top max(KS)), from a fresh home holding `home`."""
    with tempfile.TemporaryDirectory(prefix="rockmem-retrieval-") as folder:
        overrides: dict[str, Any] = {"home": folder} | ({"embedding_model": model} if model else {})
        memory = MemoryService(Settings.load(overrides, env={}), embed_in_background=False)
        try:
            lines = [
                json.dumps({"id": f"{i:012x}", "content": m.content} | ({"metadata": m.metadata} if metadata else {}))
                for i, m in enumerate(home.memories)
            ]
            report = import_jsonl(memory, lines)
            assert not report.errors, report.errors[:3]
            if memory.embedder.configured:
                memory.vector_worker.drain()
            out: dict[str, list[list[str]]] = {}
            for mode in modes:
                found = []
                for question in home.questions:
                    results = memory.search(question.text, limit=max(KS), mode=mode).results
                    found.append([home.memories[int(r.entry.id, 16)].key for r in results])
                out[mode] = found
            return out
        finally:
            memory.close()


def recall_at(home_rankings: list[tuple[Home, list[list[str]]]]) -> dict[str, float]:
    hits = {k: 0 for k in KS}
    total = 0
    for home, ranked in home_rankings:
        for question, keys in zip(home.questions, ranked, strict=True):
            for k in KS:
                hits[k] += bool(set(keys[:k]) & question.evidence)
            total += 1
    return {f"R@{k}": round(hits[k] / max(total, 1), 4) for k in KS}


def run(names: tuple[str, ...], model: str | None) -> dict[str, Any]:
    report: dict[str, Any] = {"date": time.strftime("%Y-%m-%d"), "model": model or "default (bundled)", "corpora": {}}
    for corpus in corpora(names):
        started = time.perf_counter()
        by_method: dict[str, list[tuple[Home, list[list[str]]]]] = {}
        for home in corpus.homes:
            textbook = TextbookBM25([m.content for m in home.memories])
            keys = [[home.memories[i].key for i in textbook.ranked(q.text, max(KS))] for q in home.questions]
            by_method.setdefault("textbook_bm25", []).append((home, keys))
            for mode, ranked in rankings(home, True, MODES, model).items():
                by_method.setdefault(mode, []).append((home, ranked))
            if any(m.metadata for m in home.memories):
                ranked = rankings(home, False, ("hybrid",), model)["hybrid"]
                by_method.setdefault("hybrid_no_metadata", []).append((home, ranked))
        report["corpora"][corpus.name] = {
            "homes": len(corpus.homes),
            "memories": sum(len(h.memories) for h in corpus.homes),
            "questions": corpus.questions,
            "methods": {method: recall_at(rows) for method, rows in by_method.items()},
            "seconds": round(time.perf_counter() - started, 1),
        }
        print(corpus.name, json.dumps(report["corpora"][corpus.name]["methods"]), file=sys.stderr)
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpora", nargs="*", default=list(SHAPES))
    parser.add_argument("--model", default=None, help="ROCKMEM_EMBEDDING_MODEL for the run (default: the product's)")
    parser.add_argument("--out", type=Path, default=RESULTS / "retrieval.json")
    args = parser.parse_args()
    report = run(tuple(args.corpora), args.model)
    if not report["corpora"]:
        sys.exit("no corpus can be built here (LoCoMo lives in ../shared/bench/locomo)")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
