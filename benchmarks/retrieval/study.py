"""Ranking constants chosen by leave-one-corpus-out over the development corpora (corpora.py).

    python -m benchmarks retrieval_study            # every corpus that can be built here
    python -m benchmarks.retrieval.study --out benchmarks/results/retrieval-study.json

The product's own parts score every question: its tokenizer and BM25 index (search/bm25.py) for each k1 and
b, its embedding model for the cosines, its fusion, session neighbours and named speaker / month lifts
(search/rank.py). Each part is computed once per question and the grid is searched over the cached parts, so
a grid of hundreds of settings costs seconds. A setting is judged (`objective`) by being below textbook BM25 at
R@1 on no corpus, then by its worst R@5 gain over textbook, then by its mean R@5. For each corpus the setting
best on the *other* corpora is applied to it (its leave-one-corpus-out estimate); the product's constants are
the best on all. Stages run in turn, each on the previous stage's all-corpora choice, so a later stage's
estimate holds the earlier constants fixed (BM25's own held-out estimates are in its stage). Textbook BM25
(rank-bm25's BM25Okapi, k1 1.5, b 0.75, lowercase
`\\w+` words) runs on the same questions as the baseline.
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.retrieval import embedders
from benchmarks.retrieval.corpora import SHAPES, Home, corpora
from rockmem_mcp.models import MemoryEntry
from rockmem_mcp.search import facets
from rockmem_mcp.search.bm25 import BM25Index, top_k
from rockmem_mcp.search.memory_index import MemoryIndex
from rockmem_mcp.search.rank import Lifts, borrow_from_neighbours, lift
from rockmem_mcp.search.tokenizer import tokenize

RESULTS = Path(__file__).resolve().parents[1] / "results"
KS = (1, 5, 10)
START = datetime(2026, 1, 1, tzinfo=UTC)


class TextbookBM25:
    """rank-bm25's BM25Okapi (k1 1.5, b 0.75) over lowercase `\\w+` words: the baseline."""

    def __init__(self, texts: list[str], k1: float = 1.5, b: float = 0.75) -> None:
        from rank_bm25 import BM25Okapi  # test extra; only the baseline needs it

        self.bm25 = BM25Okapi([self.words(t) for t in texts], k1=k1, b=b)

    @staticmethod
    def words(text: str) -> list[str]:
        return re.findall(r"\w+", text.lower())

    def ranked(self, query: str, k: int) -> list[int]:
        scores = self.bm25.get_scores(self.words(query))
        order = np.argsort(-scores, kind="stable")[:k]
        return [int(i) for i in order if scores[i] > 0]


def entries_of(home: Home) -> list[MemoryEntry]:
    return [
        MemoryEntry(id=f"{i:012x}", content=m.content, metadata=m.metadata, category=m.category,
                    created_at=START + timedelta(seconds=i))
        for i, m in enumerate(home.memories)
    ]  # fmt: skip


@dataclass
class Parts:
    """What every setting of one home is computed from: per question, BM25 scores per (k1, b), cosines, and
    which slots its speaker / month lifts name."""

    keys: list[str]
    evidence: list[frozenset[int]]
    lexical: dict[tuple[float, float, float], list[np.ndarray]]
    similarity: list[np.ndarray] | None
    index: MemoryIndex  # for neighbours (sessions) and lifts
    named: list[list[tuple[np.ndarray, str]]]  # per question: (named slots mask, kind)
    textbook: list[list[int]]


def home_parts(home: Home, grid_bm25: list[tuple[float, float, float]], embed: Any | None) -> Parts:
    entries = entries_of(home)
    slot_of = {m.key: i for i, m in enumerate(home.memories)}
    evidence = [frozenset(slot_of[k] for k in q.evidence if k in slot_of) for q in home.questions]
    lexical: dict[tuple[float, float, float], list[np.ndarray]] = {}
    index = None
    for k1, b, pair in grid_bm25:
        index = MemoryIndex(BM25Index(k1, b, pair))
        index.upsert_many(entries)
        lexical[(k1, b, pair)] = [index.bm25.scores(tokenize(q.text), None, False) for q in home.questions]
    assert index is not None
    similarity = None
    if embed is not None:
        similarity = list(embed([e.document_text() for e in entries], [q.text for q in home.questions]))
    named = []
    every = np.arange(len(entries))
    for q in home.questions:
        masks = []
        query_words = set(facets.words(q.text))
        codes = [code for code, key in enumerate(index.speakers) if facets.names_speaker(query_words, key)]
        if codes:
            masks.append((np.isin(index.speaker_code.view[every], codes), "speaker"))
        months, years = facets.named_months(q.text)
        if months:
            masks.append((facets.in_months(index.month_code.view[every], months, years), "month"))
        named.append(masks)
    textbook = TextbookBM25([m.content for m in home.memories])
    baseline = [textbook.ranked(q.text, max(KS)) for q in home.questions]
    return Parts([m.key for m in home.memories], evidence, lexical, similarity, index, named, baseline)


@dataclass(frozen=True)
class Setting:
    k1: float = 1.5
    b: float = 0.75
    pair: float = 2.0  # RockBot's word-pair boost
    vector_weight: float = 0.0  # 0: bm25 mode
    min_similarity: float = 0.3
    neighbour_weight: float = 0.0
    speaker: float = 0.0
    month: float = 0.0


def ranked(parts: Parts, n: int, s: Setting, neighbours: Any) -> list[int]:
    lexical = parts.lexical[(s.k1, s.b, s.pair)][n]
    matched = lexical > 0
    if s.vector_weight > 0 and parts.similarity is not None:
        sim = parts.similarity[n]
        top = lexical.max(initial=0.0)
        scores = (lexical / top if top > 0 else lexical) + s.vector_weight * sim
        candidate = matched | (sim >= s.min_similarity)
    else:
        scores, candidate = lexical, matched
    scores, candidate = borrow_from_neighbours(scores, candidate, neighbours, s.neighbour_weight)
    slots = np.flatnonzero(candidate)
    named = tuple(
        (lambda x, m=mask: m[x], s.speaker if kind == "speaker" else s.month)
        for mask, kind in parts.named[n]
        if (s.speaker if kind == "speaker" else s.month) > 0
    )
    values = lift(slots, scores[slots], Lifts(named) if named else None)
    order = top_k(slots, values, max(KS))
    return slots[order].tolist()


def recall(parts: Parts, rankings: list[list[int]]) -> dict[str, float]:
    out = {}
    for k in KS:
        hits = [bool(set(r[:k]) & e) for r, e in zip(rankings, parts.evidence, strict=True)]
        out[f"R@{k}"] = sum(hits) / max(len(hits), 1)
    return out


def corpus_scores(homes: list[Parts], s: Setting) -> dict[str, float]:
    totals = dict.fromkeys((f"R@{k}" for k in KS), 0.0)
    n = 0
    for parts in homes:
        neighbours = parts.index.neighbours(np.ones(len(parts.keys), dtype=bool)) if s.neighbour_weight else None
        scores = recall(parts, [ranked(parts, i, s, neighbours) for i in range(len(parts.evidence))])
        q = len(parts.evidence)
        for name, value in scores.items():
            totals[name] += value * q
        n += q
    return {name: round(value / n, 4) for name, value in totals.items()}


def textbook_scores(homes: list[Parts]) -> dict[str, float]:
    n = sum(len(p.evidence) for p in homes)
    return {
        name: round(sum(recall(p, p.textbook)[name] * len(p.evidence) for p in homes) / n, 4)
        for name in (f"R@{k}" for k in KS)
    }


def objective(
    table: dict[str, dict[Setting, dict[str, float]]], names: list[str], textbook: dict[str, dict[str, float]]
) -> Any:
    """How a setting is judged on some corpora: first that it is below textbook BM25 nowhere at R@1, then its
    worst gain over textbook at R@5 on any of them (a constant must hold on every shape; a mean would let the
    three LoCoMo-derived corpora outvote the others), then its mean R@5."""

    def judge(s: Setting) -> tuple[float, float, float]:
        below = min(min(table[n][s]["R@1"] - textbook[n]["R@1"] for n in names), 0.0)
        worst = min(table[n][s]["R@5"] - textbook[n]["R@5"] for n in names)
        return round(below, 3), round(worst, 3), float(np.mean([table[n][s]["R@5"] for n in names]))

    return judge


def loco(table: dict[str, dict[Setting, dict[str, float]]], textbook: dict[str, dict[str, float]]) -> dict[str, Any]:
    """Per corpus: the setting best on the others, and its score on this one; then the best on all."""
    names = list(table)
    settings = list(next(iter(table.values())))
    out: dict[str, Any] = {}
    for held in names:
        others = [n for n in names if n != held] or names
        best = max(settings, key=objective(table, others, textbook))
        out[held] = {"chosen": best.__dict__, "estimate": table[held][best]}
    best_all = max(settings, key=objective(table, names, textbook))
    out["all"] = {"chosen": best_all.__dict__, "scores": {n: table[n][best_all] for n in names}}
    return out


def grid(stage: str, base: Setting) -> list[Setting]:
    """Each stage's settings; the product's current value of a constant comes first, so a tie keeps it."""
    if stage == "bm25":
        return [
            Setting(k1, b, pair)
            for k1, b, pair in itertools.product((0.6, 0.4, 0.9, 1.2, 1.5), (0.9, 0.3, 0.5, 0.75, 1.0), (1.0, 0.0, 2.0))
        ]
    if stage == "hybrid":
        return [
            Setting(base.k1, base.b, base.pair, w, m)
            for w, m in itertools.product((2.0, 0.5, 1.0, 1.5, 3.0, 4.0, 5.0), (0.3, 0.1, 0.15, 0.2, 0.4, 0.5))
        ]
    if stage in ("context", "bm25_context"):
        # current: neighbours 0.5; speaker 0.4 and month 0.4 in both modes
        speaker = (0.4, 0.2, 0.0)
        month = (0.4, 0.3, 0.0)
        return [
            Setting(base.k1, base.b, base.pair, base.vector_weight, base.min_similarity, n, sp, mo)
            for n, sp, mo in itertools.product((0.5, 0.3, 0.2, 0.0), speaker, month)
        ]
    raise ValueError(stage)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpora", nargs="*", default=list(SHAPES))
    parser.add_argument("--model", default="bundled", help="off, or an embedder of embedders.py")
    parser.add_argument("--out", type=Path, default=RESULTS / "retrieval-study.json")
    args = parser.parse_args()
    started = time.perf_counter()
    chosen = corpora(tuple(args.corpora))
    if not chosen:
        sys.exit("no corpus can be built here (LoCoMo lives in ../shared/bench/locomo)")
    embed = None if args.model == "off" else embedders.similarity(args.model)
    bm25_grid = sorted({(s.k1, s.b, s.pair) for s in grid("bm25", Setting())})
    parts: dict[str, list[Parts]] = {c.name: [home_parts(h, bm25_grid, embed) for h in c.homes] for c in chosen}
    report: dict[str, Any] = {"corpora": {c.name: {"homes": len(c.homes), "questions": c.questions} for c in chosen}}
    report["textbook_bm25"] = {n: textbook_scores(p) for n, p in parts.items()}
    base = Setting()
    # bm25's own neighbour and lift weights (bm25_context) are chosen on its best k1 and b; hybrid's after them.
    stages = ("bm25", "bm25_context", "hybrid", "context") if embed else ("bm25", "bm25_context")
    for stage in stages:
        if stage == "hybrid":
            base = Setting(**report["bm25"]["all"]["chosen"])
        table = {n: {s: corpus_scores(p, s) for s in grid(stage, base)} for n, p in parts.items()}
        result = loco(table, report["textbook_bm25"])
        report[stage] = result
        report[f"{stage}_table"] = {
            n: {",".join(f"{v:g}" for v in s.__dict__.values()): t[s] for s in t} for n, t in table.items()
        }
        base = Setting(**result["all"]["chosen"])
        print(f"{stage}: chosen {result['all']['chosen']}", file=sys.stderr)
        for n in parts:
            print(f"  {n:7s} all {result['all']['scores'][n]}  loco {result[n]['estimate']}  "
                  f"textbook {report['textbook_bm25'][n]}", file=sys.stderr)  # fmt: skip
    report["seconds"] = round(time.perf_counter() - started, 1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2, default=str) + "\n")


if __name__ == "__main__":
    main()
