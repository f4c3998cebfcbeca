"""Offline study: which BM25 + embedding fusion beats BM25 alone on LoCoMo turn retrieval, and generalises?

    python -m benchmarks.fusion_study                  # reads ../shared/bench/locomo/locomo-dev.json

Per conversation every turn is a document and every question a query; a hit at k when an evidence turn is in the
top k (turn-level R@1/5/10, pooled over questions). Signals: the product's BM25 (`BM25Index` + `tokenize`) and
cosine similarity of model2vec embeddings (m2v-minilm-l6-256). Both score matrices are computed once; each fusion
variant is a small numpy function of (bm25, cosine) over the documents (last axis), so the winner ports directly.
Families are judged by leave-one-conversation-out: parameters picked by R@5 on four conversations, scored on the
fifth. Writes benchmarks/results/fusion-study.json. The data set is CC BY-NC 4.0 and is read from ../shared.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from model2vec import StaticModel

from benchmarks.locomo import CATEGORIES, DEFAULT_DATA, questions_of, turns_of
from rockmem_mcp.search.bm25 import BM25Index
from rockmem_mcp.search.tokenizer import _WORD, STOPWORDS, tokenize

RESULTS = Path(__file__).parent / "results"
DEFAULT_MODEL = Path(__file__).resolve().parents[2] / "shared" / "models" / "m2v-minilm-l6-256"
KS = (1, 5, 10)
MISS = 1 << 30  # rank given to a question none of whose evidence turns is a candidate

Array = np.ndarray
Fusion = Callable[..., Array]


# ---------------------------------------------------------------- query forms for the embedding side


def query_raw(question: str) -> str:
    return question


def query_content(question: str) -> str:
    """Question words and stopwords dropped, words kept unstemmed ("What did Caroline paint?" -> "caroline paint")."""
    words = [w for w in _WORD.findall(question.lower()) if w not in STOPWORDS]
    return " ".join(words) or question


def query_tokens(question: str) -> str:
    """The BM25 tokens (stemmed content words) joined by spaces."""
    return " ".join(tokenize(question)) or question


QUERY_FORMS: dict[str, Callable[[str], str]] = {"raw": query_raw, "content": query_content, "tokens": query_tokens}


# ---------------------------------------------------------------- fusion functions: (bm25, cos) -> score
# Each takes bm25 scores (0 = not matched) and cosines over the documents on the last axis, works for one
# query (1-D) or a batch (2-D), and returns a score; -inf marks a document that is not returned at all.
# Ties rank the newest (highest) document first, as BM25Index.search does.


def _safe_max(x: Array) -> Array:
    top = x.max(axis=-1, keepdims=True)
    return np.where(top > 0, top, 1.0)


def ordinal_rank(x: Array, eligible: Array) -> Array:
    """1-based rank among eligible documents (best first, ties to the newest); inf for the others."""
    n = x.shape[-1]
    key = np.where(eligible, x, -np.inf)[..., ::-1]
    order = n - 1 - np.argsort(-key, axis=-1, kind="stable")
    rank = np.empty(order.shape, dtype=np.float64)
    np.put_along_axis(rank, order, np.broadcast_to(np.arange(1, n + 1, dtype=np.float64), order.shape), axis=-1)
    return np.where(eligible, rank, np.inf)


def fuse_bm25(bm25: Array, cos: Array) -> Array:
    return np.where(bm25 > 0, bm25, -np.inf)


def fuse_dense(bm25: Array, cos: Array) -> Array:
    return cos


def fuse_rockbot(bm25: Array, cos: Array, tau: float = 0.5) -> Array:
    """BM25 / query's top BM25; cosine only when >= tau; found by both -> mean of the two, else the single score."""
    b = bm25 / _safe_max(bm25)
    has_b, has_d = bm25 > 0, cos >= tau
    both = (b + cos) / 2
    return np.where(has_b & has_d, both, np.where(has_b, b, np.where(has_d, cos, -np.inf)))


def fuse_rrf(bm25: Array, cos: Array, k: float = 60, w_b: float = 1.0, w_d: float = 1.0, dense_top: int = 0) -> Array:
    """w_b/(k + BM25 rank) + w_d/(k + dense rank); BM25 ranks only matched docs, dense ranks all (or its top N)."""
    rank_b = ordinal_rank(bm25, bm25 > 0)
    rank_d = ordinal_rank(cos, np.ones_like(cos, dtype=bool))
    if dense_top:
        rank_d = np.where(rank_d <= dense_top, rank_d, np.inf)
    score = w_b / (k + rank_b) + w_d / (k + rank_d)
    return np.where(score > 0, score, -np.inf)


def _normalise(x: Array, how: str) -> Array:
    if how == "max":
        return x / _safe_max(x)
    if how == "minmax":
        lo, hi = x.min(axis=-1, keepdims=True), x.max(axis=-1, keepdims=True)
        return (x - lo) / np.where(hi > lo, hi - lo, 1.0)
    if how == "z":
        sd = x.std(axis=-1, keepdims=True)
        return (x - x.mean(axis=-1, keepdims=True)) / np.where(sd > 0, sd, 1.0)
    raise ValueError(how)


def fuse_convex(bm25: Array, cos: Array, alpha: float = 0.7, norm: str = "max") -> Array:
    """alpha * norm(bm25) + (1 - alpha) * norm(cos), each normalised over all documents of the query."""
    return alpha * _normalise(bm25, norm) + (1 - alpha) * _normalise(cos, norm)


def fuse_linear(bm25: Array, cos: Array, w: float = 2.0) -> Array:
    """BM25 / query's top BM25 + w * cosine, over all documents: one parameter."""
    return bm25 / _safe_max(bm25) + w * cos


def fuse_boost(bm25: Array, cos: Array, beta: float = 1.0, tau: float = 0.3) -> Array:
    """BM25 / query's top BM25 + beta * max(0, cos - tau); candidates: BM25 matches and docs with cos > tau."""
    score = bm25 / _safe_max(bm25) + beta * np.maximum(0.0, cos - tau)
    return np.where((bm25 > 0) | (cos > tau), score, -np.inf)


def fuse_rerank(bm25: Array, cos: Array, n: int = 50) -> Array:
    """The BM25 top n, reordered by cosine alone."""
    keep = ordinal_rank(bm25, bm25 > 0) <= n
    return np.where(keep, cos, -np.inf)


def fuse_union(bm25: Array, cos: Array, n: int = 50, m: int = 10, alpha: float = 0.7) -> Array:
    """Candidates = BM25 top n | dense top m; score = alpha * minmax(bm25) + (1 - alpha) * minmax(cos) over them."""
    cand = (ordinal_rank(bm25, bm25 > 0) <= n) | (ordinal_rank(cos, np.ones_like(cos, dtype=bool)) <= m)

    def minmax(x: Array) -> Array:
        lo = np.where(cand, x, np.inf).min(axis=-1, keepdims=True)
        hi = np.where(cand, x, -np.inf).max(axis=-1, keepdims=True)
        return (x - lo) / np.where(hi > lo, hi - lo, 1.0)

    return np.where(cand, alpha * minmax(bm25) + (1 - alpha) * minmax(cos), -np.inf)


# ---------------------------------------------------------------- families and parameter grids


@dataclass(frozen=True)
class Family:
    name: str
    fuse: Fusion
    grid: list[dict[str, Any]]  # every setting; "query" (the embedding query form) is handled by the harness
    note: str


def grid(query_forms: list[str], **axes: list[Any]) -> list[dict[str, Any]]:
    names = ["query", *axes]
    return [dict(zip(names, values, strict=True)) for values in itertools.product(query_forms, *axes.values())]


QF = list(QUERY_FORMS)
ALPHAS = [round(0.1 + 0.05 * i, 2) for i in range(17)]
FAMILIES = [
    Family("bm25", fuse_bm25, [{"query": "raw"}], "product BM25 alone"),
    Family("dense", fuse_dense, grid(QF), "cosine alone"),
    Family("rockbot", fuse_rockbot, grid(QF, tau=[0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5]), "RockBot's fusion"),
    Family(
        "rrf",
        fuse_rrf,
        grid(
            QF,
            k=[5, 10, 20, 30, 60],
            w=[(1.0, 1.0), (2.0, 1.0), (3.0, 1.0), (1.0, 0.5), (1.0, 0.3), (1.0, 0.2)],
            dense_top=[0, 10, 20, 50],
        ),
        "reciprocal rank fusion",
    ),
    Family("convex", fuse_convex, grid(QF, norm=["max", "minmax", "z"], alpha=ALPHAS), "alpha*norm(b)+(1-a)*norm(c)"),
    Family(
        "linear",
        fuse_linear,
        grid(QF, w=[0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0, 2.25, 2.5, 3.0, 3.5, 4.0, 5.0]),
        "bm25/max + w*cos",
    ),
    Family(
        "boost",
        fuse_boost,
        grid(QF, beta=[0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0], tau=[0.0, 0.1, 0.2, 0.3, 0.4, 0.5]),
        "bm25/max + beta*max(0, cos-tau)",
    ),
    Family("rerank", fuse_rerank, grid(QF, n=[10, 20, 30, 50, 75, 100]), "cosine rerank of the BM25 top n"),
    Family(
        "union",
        fuse_union,
        grid(QF, n=[20, 50, 100], m=[5, 10, 20], alpha=[0.5, 0.6, 0.7, 0.8, 0.9]),
        "BM25 top n | dense top m, minmax convex",
    ),
]
# free parameters: the grid's axes, counting the embedding query form when the family has more than one setting
N_PARAMS = {f.name: len([key for key in f.grid[0] if key != "query"]) + (len(f.grid) > 1) for f in FAMILIES}


def call(family: Family, setting: dict[str, Any], bm25: Array, cos: Array) -> Array:
    kwargs = {key: value for key, value in setting.items() if key != "query"}
    if isinstance(kwargs.get("w"), tuple):
        kwargs["w_b"], kwargs["w_d"] = kwargs.pop("w")
    return family.fuse(bm25, cos, **kwargs)


# ---------------------------------------------------------------- data and evaluation


@dataclass
class Conversation:
    name: str
    bm25: Array  # questions x turns
    cos: dict[str, Array]  # query form -> questions x turns
    ev_q: Array  # (question, evidence turn) pairs
    ev_d: Array
    n_questions: int
    categories: Array


def load(data: Path, model_path: Path) -> list[Conversation]:
    model = StaticModel.from_pretrained(str(model_path))
    conversations = []
    for sample in json.loads(data.read_text()):
        turns, questions = turns_of(sample), questions_of(sample)
        index = BM25Index()
        index.add_many([(turn.dia_id, tokenize(turn.content), False) for turn in turns])
        bm25 = np.zeros((len(questions), len(turns)))
        for i, question in enumerate(questions):
            hits = index.search(tokenize(question.text), limit=len(turns))
            bm25[i, hits.slots] = hits.scores
        docs = model.encode([turn.content for turn in turns]).astype(np.float32)
        cos = {
            form: model.encode([to_query(q.text) for q in questions]).astype(np.float32) @ docs.T
            for form, to_query in QUERY_FORMS.items()
        }
        position = {turn.dia_id: i for i, turn in enumerate(turns)}
        pairs = [(i, position[e]) for i, q in enumerate(questions) for e in sorted(q.evidence) if e in position]
        ev_q, ev_d = (np.array(column, dtype=np.intp) for column in zip(*pairs, strict=True))
        categories = np.array([q.category for q in questions])
        conversations.append(
            Conversation(sample.get("sample_id", "?"), bm25, cos, ev_q, ev_d, len(questions), categories)
        )
    return conversations


def best_ranks(score: Array, conv: Conversation) -> Array:
    """0-based rank of each question's best-placed evidence turn (ties: newest first); MISS if none is returned."""
    value = score[conv.ev_q, conv.ev_d]
    rows = score[conv.ev_q]
    slot = np.arange(score.shape[1])
    rank = (rows > value[:, None]).sum(axis=1) + ((rows == value[:, None]) & (slot > conv.ev_d[:, None])).sum(axis=1)
    rank = np.where(np.isfinite(value), rank, MISS)
    best = np.full(conv.n_questions, MISS, dtype=np.int64)
    np.minimum.at(best, conv.ev_q, rank)
    return best


def recall(ranks: Array) -> dict[str, float]:
    return {f"R@{k}": round(float(np.mean(ranks < k)), 4) for k in KS}


def sign_test(wins: int, losses: int) -> float:
    """Two-sided exact binomial p-value for wins vs losses (McNemar on paired hits)."""
    n = wins + losses
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(wins, losses) + 1)) / 2**n
    return round(min(1.0, 2 * tail), 4)


def label(setting: dict[str, Any]) -> str:
    return ", ".join(f"{key}={value}" for key, value in setting.items())


def selection_key(ranks: Array) -> tuple[float, float, float]:
    return float(np.mean(ranks < 5)), float(np.mean(ranks < 10)), float(np.mean(ranks < 1))


def run(data: Path, model_path: Path) -> dict[str, Any]:
    started = time.perf_counter()
    conversations = load(data, model_path)
    loaded = time.perf_counter()
    sizes = [c.n_questions for c in conversations]
    bounds = np.cumsum([0, *sizes])

    # ranks[family][setting index] = best evidence rank per question, pooled over conversations in order
    ranks: dict[str, list[Array]] = {}
    variants: list[dict[str, Any]] = []
    for family in FAMILIES:
        ranks[family.name] = []
        for setting in family.grid:
            pooled = np.concatenate(
                [best_ranks(call(family, setting, c.bm25, c.cos[setting["query"]]), c) for c in conversations]
            )
            ranks[family.name].append(pooled)
            variants.append({"family": family.name, "params": setting} | recall(pooled))
    evaluated = time.perf_counter()

    baseline = ranks["bm25"][0]

    def paired(r: Array) -> dict[str, Any]:
        wins, losses = int(np.sum((r < 5) & (baseline >= 5))), int(np.sum((r >= 5) & (baseline < 5)))
        return {"R@5_wins_vs_bm25": wins, "R@5_losses_vs_bm25": losses, "sign_test_p": sign_test(wins, losses)}

    loocv: dict[str, Any] = {}
    families_summary: dict[str, Any] = {}
    for family in FAMILIES:
        folds, held = [], []
        for i, conv in enumerate(conversations):
            train = np.ones(bounds[-1], dtype=bool)
            train[bounds[i] : bounds[i + 1]] = False
            chosen = max(range(len(family.grid)), key=lambda j: selection_key(ranks[family.name][j][train]))
            test = ranks[family.name][chosen][~train]
            held.append(test)
            folds.append(
                {
                    "held_out": conv.name,
                    "chosen": family.grid[chosen],
                    "train_R@5": round(selection_key(ranks[family.name][chosen][train])[0], 4),
                }
                | {f"held_out_{key}": value for key, value in recall(test).items()}
            )
        pooled_held = np.concatenate(held)
        distinct = {label(f["chosen"]) for f in folds}
        loocv[family.name] = {
            "pooled_held_out": recall(pooled_held),
            "distinct_choices": len(distinct),
            "folds": folds,
        }
        full = [selection_key(r) for r in ranks[family.name]]
        best = max(range(len(full)), key=lambda j: full[j])
        r5 = np.array([key[0] for key in full])
        families_summary[family.name] = {
            "note": family.note,
            "settings": len(family.grid),
            "free_parameters": N_PARAMS[family.name],
            "best_full_dev": {"params": family.grid[best]}
            | recall(ranks[family.name][best])
            | paired(ranks[family.name][best]),
            "settings_within_0.01_of_best_R@5": int(np.sum(r5 >= r5[best] - 0.01)),
            "loocv_pooled_held_out": recall(pooled_held),
            "loocv_distinct_choices": len(distinct),
        }

    references = {
        "bm25": ("bm25", {"query": "raw"}),
        "dense (raw query)": ("dense", {"query": "raw"}),
        "rockbot (tau=0.5, raw query)": ("rockbot", {"query": "raw", "tau": 0.5}),
        "rrf equal k=60 (raw query)": ("rrf", {"query": "raw", "k": 60, "w": (1.0, 1.0), "dense_top": 0}),
    }
    reference_rows = {}
    for name, (fam, setting) in references.items():
        j = next(i for i, s in enumerate(next(f for f in FAMILIES if f.name == fam).grid) if s == setting)
        reference_rows[name] = recall(ranks[fam][j]) | paired(ranks[fam][j])

    # The recommendation rule, fixed before looking: the family with the best pooled held-out R@5; among families
    # within 0.005 of it, the one with the fewest free parameters; its setting is the one chosen by most folds
    # (ties: the better full-dev R@5).
    top = max(s["loocv_pooled_held_out"]["R@5"] for s in families_summary.values())
    near = [f for f in FAMILIES if families_summary[f.name]["loocv_pooled_held_out"]["R@5"] >= top - 0.005]
    family = min(near, key=lambda f: (N_PARAMS[f.name], -families_summary[f.name]["loocv_pooled_held_out"]["R@5"]))
    votes = [label(fold["chosen"]) for fold in loocv[family.name]["folds"]]
    j = max(
        range(len(family.grid)),
        key=lambda i: (votes.count(label(family.grid[i])), selection_key(ranks[family.name][i])),
    )
    chosen, chosen_ranks = family.grid[j], ranks[family.name][j]
    categories = np.concatenate([c.categories for c in conversations])
    neighbours = [
        {"params": setting} | recall(ranks[family.name][i])
        for i, setting in enumerate(family.grid)
        if sum(setting[key] != chosen[key] for key in chosen) == 1
    ]
    recommendation = {
        "rule": "best pooled LOOCV R@5; within 0.005 fewest free parameters; setting chosen by most folds",
        "family": family.name,
        "note": family.note,
        "params": chosen,
        "fold_votes": votes.count(label(chosen)),
        "full_dev": recall(chosen_ranks) | paired(chosen_ranks),
        "loocv_pooled_held_out": loocv[family.name]["pooled_held_out"],
        "per_conversation_R@5": {
            conv.name: {
                "fused": round(float(np.mean(chosen_ranks[bounds[i] : bounds[i + 1]] < 5)), 4),
                "bm25": round(float(np.mean(baseline[bounds[i] : bounds[i + 1]] < 5)), 4),
            }
            for i, conv in enumerate(conversations)
        },
        "per_category_R@5": {
            name: {
                "questions": int(np.sum(categories == cat)),
                "fused": round(float(np.mean(chosen_ranks[categories == cat] < 5)), 4),
                "bm25": round(float(np.mean(baseline[categories == cat] < 5)), 4),
            }
            for cat, name in CATEGORIES.items()
        },
        "one_parameter_neighbours": neighbours,
    }

    return {
        "data": str(data.name),
        "model": model_path.name,
        "conversations": [c.name for c in conversations],
        "questions": int(bounds[-1]),
        "protocol": "turn-level R@k pooled over questions; per conversation every turn is a document",
        "recommendation": recommendation,
        "references": reference_rows,
        "families": families_summary,
        "loocv": loocv,
        "variants": variants,
        "seconds": {
            "load_and_score": round(loaded - started, 2),
            "evaluate": round(evaluated - loaded, 2),
            "total": round(time.perf_counter() - started, 2),
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--model", type=Path, default=DEFAULT_MODEL)
    args = parser.parse_args()
    result = run(args.data, args.model)
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / "fusion-study.json"
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"{'family':8} {'best full-dev setting':58} {'R@1':>6} {'R@5':>6} {'R@10':>6} {'LOOCV R@5':>9} choices")
    for name, fam in result["families"].items():
        best = fam["best_full_dev"]
        print(
            f"{name:8} {label(best['params']):58} {best['R@1']:6.3f} {best['R@5']:6.3f} {best['R@10']:6.3f}"
            f" {fam['loocv_pooled_held_out']['R@5']:9.3f} {fam['loocv_distinct_choices']}"
        )
    for name, row in result["references"].items():
        print(f"ref {name:30} R@1 {row['R@1']:.3f} R@5 {row['R@5']:.3f} R@10 {row['R@10']:.3f}")
    rec = result["recommendation"]
    print(f"recommended: {rec['family']} {label(rec['params'])} full dev {rec['full_dev']}")
    print(f"seconds: {result['seconds']}  -> {out}")


if __name__ == "__main__":
    main()
