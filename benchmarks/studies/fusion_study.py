"""Offline study: which BM25 + embedding fusion beats BM25 alone on LoCoMo turn retrieval, and generalises?

    python -m benchmarks fusion_study                             # from the repo root
    python -m benchmarks fusion_study --data PATH --model PATH    # another LoCoMo file or model2vec model

Defaults: ../shared/bench/locomo/locomo-dev.json and ../shared/models/m2v-minilm-l6-256.

Per conversation every turn is a document and every question a query; a hit at k when an evidence turn is in the
top k (turn-level R@1/5/10, pooled over questions). Signals: the product's BM25 (`BM25Index` + `tokenize`, k1=1.5)
and cosine similarity of model2vec embeddings (m2v-minilm-l6-256). Each fusion variant is a small numpy function of
(bm25, cosine) over the documents (last axis), so the winner ports directly.

Axes studied:
- BM25 length normalisation b in BS (0.2, 0.3, 0.4, 0.5, 0.75): one BM25 score matrix per b; the embedding side
  (three query forms) is computed once. 0.3 is the product default (`bm25.B`), 0.75 the textbook/RockBot value
  the first version of this study used.
- fusion family and its parameters (FAMILIES, including the embedding query form): every family's full grid is run
  at b = 0.3 and b = 0.75 (FULL_GRID_BS);
- the b sweep: at every b, BM25 alone and the linear family (raw query, w in SWEEP_WS, w = 0 being BM25/max).

Families and selections are judged by leave-one-conversation-out (LOOCV): parameters picked by R@5 (then R@10,
then R@1; exact ties to the first setting listed) on four conversations, scored on the fifth, held-out hits pooled.
Selections reported: BM25 at b = 0.75 fixed; BM25 tuning b; linear at b = 0.75 tuning w; linear at b = 0.3 tuning
w; linear tuning (b, w) jointly. The recommendation section describes the product default (b = 0.3, hybrid
bm25/max + 3.0 * cos, docs BM25 does not match only at cos >= 0.3), with its full-dev and LOOCV figures.

Writes benchmarks/results/fusion-study.json (every variant at both full-grid b values, the b sweep, per-conversation
and per-category R@5, the LOOCV folds) and prints the summary tables. Takes about a minute. The data set is CC BY-NC
4.0 and is read from ../shared, never copied here.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from model2vec import StaticModel

from benchmarks.locomo import CATEGORIES, DEFAULT_DATA, questions_of, turns_of
from rockmem_mcp.search.bm25 import K1, B, BM25Index
from rockmem_mcp.search.rank import HYBRID_MIN_SIMILARITY, HYBRID_VECTOR_WEIGHT
from rockmem_mcp.search.tokenizer import _WORD, STOPWORDS, tokenize

RESULTS = Path(__file__).parents[1] / "results"
DEFAULT_MODEL = Path(__file__).resolve().parents[3] / "shared" / "models" / "m2v-minilm-l6-256"
KS = (1, 5, 10)
MISS = 1 << 30  # rank given to a question none of whose evidence turns is a candidate

PRODUCT_B = B  # the product's BM25 length normalisation (0.3)
TEXTBOOK_B = 0.75  # Okapi's usual value and RockBot's; the first version of this study ran at it
BS: tuple[float, ...] = (0.2, 0.3, 0.4, 0.5, 0.75)  # the b sweep
FULL_GRID_BS: tuple[float, ...] = (PRODUCT_B, TEXTBOOK_B)  # every family's full grid runs at these
SWEEP_WS: tuple[float, ...] = (0.0, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0)  # linear weights of the b sweep (raw query)

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


def fuse_hybrid(bm25: Array, cos: Array, w: float = 3.0, min_similarity: float = 0.3) -> Array:
    """The product's hybrid: linear, but a document BM25 does not match is returned only at cos >= min_similarity."""
    return np.where((bm25 > 0) | (cos >= min_similarity), fuse_linear(bm25, cos, w), -np.inf)


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


# ---------------------------------------------------------------- data and evaluation


@dataclass
class Conversation:
    name: str
    bm25: dict[float, Array]  # BM25 b -> questions x turns
    cos: dict[str, Array]  # query form -> questions x turns
    ev_q: Array  # (question, evidence turn) pairs
    ev_d: Array
    n_questions: int
    categories: Array


def encoder(model_path: Path | str) -> Callable[[list[str]], Array]:
    """Texts -> unit vectors: a model2vec folder, or "bundled" (the product's own model, numpy-only)."""
    if str(model_path) == "bundled":
        from rockmem_mcp.search.static_model import StaticEmbeddings

        return StaticEmbeddings().embed
    return StaticModel.from_pretrained(str(model_path)).encode


def load(data: Path, model_path: Path, bs: Sequence[float] = BS) -> list[Conversation]:
    """Every conversation's BM25 matrix at each b (k1 = the product's) and its cosine matrix per query form;
    `model_path` as `encoder` takes it."""
    encode = encoder(model_path)
    conversations = []
    for sample in json.loads(data.read_text()):
        turns, questions = turns_of(sample), questions_of(sample)
        docs_tokens = [(turn.dia_id, tokenize(turn.content), False) for turn in turns]
        query_tokens = [tokenize(question.text) for question in questions]
        bm25: dict[float, Array] = {}
        for b in bs:
            index = BM25Index(k1=K1, b=b)
            index.add_many(docs_tokens)
            scores = np.zeros((len(questions), len(turns)))
            for i, tokens in enumerate(query_tokens):
                hits = index.search(tokens, limit=len(turns))
                scores[i, hits.slots] = hits.scores
            bm25[b] = scores
        docs = encode([turn.content for turn in turns]).astype(np.float32)
        cos = {
            form: encode([to_query(q.text) for q in questions]).astype(np.float32) @ docs.T
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


def evaluate(fuse: Fusion, setting: dict[str, Any], b: float, conversations: list[Conversation]) -> Array:
    """Best evidence rank per question for one setting at one b, pooled over the conversations in order."""
    kwargs = {key: value for key, value in setting.items() if key != "query"}
    if isinstance(kwargs.get("w"), tuple):
        kwargs["w_b"], kwargs["w_d"] = kwargs.pop("w")
    return np.concatenate(
        [best_ranks(fuse(c.bm25[b], c.cos[setting.get("query", "raw")], **kwargs), c) for c in conversations]
    )


def recall(ranks: Array) -> dict[str, float]:
    return {f"R@{k}": round(float(np.mean(ranks < k)), 4) for k in KS}


def sign_test(wins: int, losses: int) -> float:
    """Two-sided exact binomial p-value for wins vs losses (McNemar on paired hits)."""
    n = wins + losses
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(wins, losses) + 1)) / 2**n
    return round(min(1.0, 2 * tail), 4)


def paired(ranks: Array, baseline: Array, name: str) -> dict[str, Any]:
    """R@5 questions won and lost against a baseline, with the sign test."""
    wins, losses = int(np.sum((ranks < 5) & (baseline >= 5))), int(np.sum((ranks >= 5) & (baseline < 5)))
    return {f"R@5_wins_vs_{name}": wins, f"R@5_losses_vs_{name}": losses, "sign_test_p": sign_test(wins, losses)}


def label(setting: dict[str, Any]) -> str:
    return ", ".join(f"{key}={value}" for key, value in setting.items())


def b_key(b: float) -> str:
    return f"b={b}"


def selection_key(ranks: Array) -> tuple[float, float, float]:
    return float(np.mean(ranks < 5)), float(np.mean(ranks < 10)), float(np.mean(ranks < 1))


def r5_slices(ranks: Array, bounds: Array) -> list[float]:
    """R@5 within each conversation."""
    return [round(float(np.mean(ranks[bounds[i] : bounds[i + 1]] < 5)), 4) for i in range(len(bounds) - 1)]


def loocv(
    candidates: list[tuple[dict[str, Any], Array]], conversations: list[Conversation], bounds: Array
) -> dict[str, Any]:
    """Leave one conversation out: each fold picks the candidate best on the other four, scored on the fifth."""
    folds, held = [], []
    for i, conv in enumerate(conversations):
        train = np.ones(bounds[-1], dtype=bool)
        train[bounds[i] : bounds[i + 1]] = False
        chosen = max(range(len(candidates)), key=lambda j: selection_key(candidates[j][1][train]))
        setting, ranks = candidates[chosen]
        held.append(ranks[~train])
        folds.append(
            {"held_out": conv.name, "chosen": setting, "train_R@5": round(selection_key(ranks[train])[0], 4)}
            | {f"held_out_{key}": value for key, value in recall(ranks[~train]).items()}
        )
    return {
        "candidates": len(candidates),
        "pooled_held_out": recall(np.concatenate(held)),
        "distinct_choices": len({label(fold["chosen"]) for fold in folds}),
        "folds": folds,
    }


def study_families(b: float, conversations: list[Conversation], bounds: Array) -> dict[str, Any]:
    """Every family's full grid at one b: variants, per-family summary and LOOCV, references, the study's rule pick."""
    ranks = {f.name: [evaluate(f.fuse, setting, b, conversations) for setting in f.grid] for f in FAMILIES}
    baseline = ranks["bm25"][0]
    variants = [
        {"b": b, "family": f.name, "params": setting} | recall(r)
        for f in FAMILIES
        for setting, r in zip(f.grid, ranks[f.name], strict=True)
    ]
    folds = {f.name: loocv(list(zip(f.grid, ranks[f.name], strict=True)), conversations, bounds) for f in FAMILIES}
    summary: dict[str, Any] = {}
    for f in FAMILIES:
        full = [selection_key(r) for r in ranks[f.name]]
        best = max(range(len(full)), key=lambda j: full[j])
        r5 = np.array([key[0] for key in full])
        summary[f.name] = {
            "note": f.note,
            "settings": len(f.grid),
            "free_parameters": N_PARAMS[f.name],
            "best_full_dev": {"params": f.grid[best]}
            | recall(ranks[f.name][best])
            | paired(ranks[f.name][best], baseline, "bm25"),
            "settings_within_0.01_of_best_R@5": int(np.sum(r5 >= r5[best] - 0.01)),
            "loocv_pooled_held_out": folds[f.name]["pooled_held_out"],
            "loocv_distinct_choices": folds[f.name]["distinct_choices"],
        }

    references = {
        "bm25": ("bm25", {"query": "raw"}),
        "dense (raw query)": ("dense", {"query": "raw"}),
        "rockbot (tau=0.5, raw query)": ("rockbot", {"query": "raw", "tau": 0.5}),
        "rrf equal k=60 (raw query)": ("rrf", {"query": "raw", "k": 60, "w": (1.0, 1.0), "dense_top": 0}),
        f"linear w={HYBRID_VECTOR_WEIGHT} (raw query)": ("linear", {"query": "raw", "w": HYBRID_VECTOR_WEIGHT}),
    }
    reference_rows = {}
    for name, (fam, setting) in references.items():
        j = next(f for f in FAMILIES if f.name == fam).grid.index(setting)
        reference_rows[name] = recall(ranks[fam][j]) | paired(ranks[fam][j], baseline, "bm25")

    # The first study's recommendation rule, fixed before looking: the family with the best pooled held-out R@5;
    # among families within 0.005 of it, the one with the fewest free parameters; its setting is the one chosen by
    # most folds (ties: the better full-dev R@5).
    top = max(s["loocv_pooled_held_out"]["R@5"] for s in summary.values())
    near = [f for f in FAMILIES if summary[f.name]["loocv_pooled_held_out"]["R@5"] >= top - 0.005]
    family = min(near, key=lambda f: (N_PARAMS[f.name], -summary[f.name]["loocv_pooled_held_out"]["R@5"]))
    votes = [label(fold["chosen"]) for fold in folds[family.name]["folds"]]
    j = max(
        range(len(family.grid)),
        key=lambda i: (votes.count(label(family.grid[i])), selection_key(ranks[family.name][i])),
    )
    rule_pick = {
        "rule": "best pooled LOOCV R@5; within 0.005 fewest free parameters; setting chosen by most folds",
        "family": family.name,
        "params": family.grid[j],
        "fold_votes": votes.count(label(family.grid[j])),
        "full_dev": recall(ranks[family.name][j]) | paired(ranks[family.name][j], baseline, "bm25"),
        "loocv_pooled_held_out": folds[family.name]["pooled_held_out"],
    }
    return {
        "rule_pick": rule_pick,
        "references": reference_rows,
        "families": summary,
        "loocv": folds,
        "variants": variants,
    }


def run(data: Path, model_path: Path) -> dict[str, Any]:
    if PRODUCT_B not in BS or TEXTBOOK_B not in BS or HYBRID_VECTOR_WEIGHT not in SWEEP_WS:
        raise ValueError("the b sweep must hold the product's b and 0.75, and the linear weights the product's w")
    started = time.perf_counter()
    conversations = load(data, model_path)
    loaded = time.perf_counter()
    bounds = np.cumsum([0, *(c.n_questions for c in conversations)])
    names = [c.name for c in conversations]

    by_b = {b_key(b): study_families(b, conversations, bounds) for b in FULL_GRID_BS}
    families_done = time.perf_counter()

    # the b sweep: BM25 alone and linear (raw query) at every b
    bm25_at = {b: evaluate(fuse_bm25, {}, b, conversations) for b in BS}
    linear_at = {(b, w): evaluate(fuse_linear, {"w": w}, b, conversations) for b in BS for w in SWEEP_WS}
    sweep_rows = {
        b_key(b): {"bm25": recall(bm25_at[b])} | {f"linear w={w}": recall(linear_at[b, w]) for w in SWEEP_WS}
        for b in BS
    }

    def linear_candidates(bs: Sequence[float]) -> list[tuple[dict[str, Any], Array]]:
        return [({"b": b, "w": w}, linear_at[b, w]) for b in bs for w in SWEEP_WS]

    selections = {
        f"bm25, b={TEXTBOOK_B} fixed": loocv([({"b": TEXTBOOK_B}, bm25_at[TEXTBOOK_B])], conversations, bounds),
        f"bm25, b={PRODUCT_B} fixed": loocv([({"b": PRODUCT_B}, bm25_at[PRODUCT_B])], conversations, bounds),
        "bm25, tuning b": loocv([({"b": b}, bm25_at[b]) for b in BS], conversations, bounds),
        f"linear, b={TEXTBOOK_B}, tuning w": loocv(linear_candidates([TEXTBOOK_B]), conversations, bounds),
        f"linear, b={PRODUCT_B}, tuning w": loocv(linear_candidates([PRODUCT_B]), conversations, bounds),
        "linear, tuning (b, w)": loocv(linear_candidates(BS), conversations, bounds),
    }

    old, new = bm25_at[TEXTBOOK_B], bm25_at[PRODUCT_B]
    per_conversation_bm25 = {
        "R@5": {
            name: dict(zip(map(b_key, BS), values, strict=True))
            for name, *values in zip(names, *(r5_slices(bm25_at[b], bounds) for b in BS), strict=True)
        },
        f"b={PRODUCT_B}_vs_b={TEXTBOOK_B}": paired(new, old, f"b={TEXTBOOK_B}"),
    }

    # the product default
    product = {
        "b": PRODUCT_B,
        "k1": K1,
        "query": "raw",
        "w": HYBRID_VECTOR_WEIGHT,
        "min_similarity": HYBRID_MIN_SIMILARITY,
    }
    hybrid = evaluate(
        fuse_hybrid, {"w": HYBRID_VECTOR_WEIGHT, "min_similarity": HYBRID_MIN_SIMILARITY}, PRODUCT_B, conversations
    )
    linear = linear_at[PRODUCT_B, HYBRID_VECTOR_WEIGHT]
    categories = np.concatenate([c.categories for c in conversations])
    product_setting = {"b": PRODUCT_B, "w": HYBRID_VECTOR_WEIGHT}

    def fold_picks(selection: str) -> dict[str, Any]:
        s = selections[selection]
        return {
            "pooled_held_out": s["pooled_held_out"],
            "fold_choices": {fold["held_out"]: fold["chosen"] for fold in s["folds"]},
            "folds_choosing_the_product_setting": sum(
                all(fold["chosen"][key] == value for key, value in product_setting.items() if key in fold["chosen"])
                for fold in s["folds"]
            ),
        }

    at_product = by_b[b_key(PRODUCT_B)]
    best_family = max(
        at_product["families"], key=lambda name: at_product["families"][name]["loocv_pooled_held_out"]["R@5"]
    )
    recommendation = {
        "what": (
            f"the product default: BM25 k1={K1}, b={PRODUCT_B}; hybrid score = bm25/max(bm25) + "
            f"{HYBRID_VECTOR_WEIGHT} * cos over all turns (raw question embedded); a turn BM25 does not match is "
            f"returned only at cos >= {HYBRID_MIN_SIMILARITY}"
        ),
        "family": "linear",
        "params": product,
        "min_similarity_floor": {
            "changes_a_top_10_hit": bool(not np.array_equal(np.minimum(hybrid, max(KS)), np.minimum(linear, max(KS)))),
            "questions_whose_best_evidence_rank_moves": int(np.sum(hybrid != linear)),
            "best_rank_without_floor_of_those": int(linear[hybrid != linear].min(initial=MISS)) + 1,
        },
        "full_dev": recall(hybrid) | paired(hybrid, new, f"bm25_b={PRODUCT_B}"),
        f"full_dev_vs_bm25_b={TEXTBOOK_B}": paired(hybrid, old, f"bm25_b={TEXTBOOK_B}"),
        "loocv": {
            "note": (
                "a fixed setting's held-out R@k is its full-dev R@k; these are the selections that could have "
                "chosen it, with what each fold picked"
            ),
            f"linear, b={PRODUCT_B}, tuning w": fold_picks(f"linear, b={PRODUCT_B}, tuning w"),
            "linear, tuning (b, w)": fold_picks("linear, tuning (b, w)"),
            f"linear family full grid at b={PRODUCT_B} (query form and w)": at_product["loocv"]["linear"][
                "pooled_held_out"
            ],
            f"best family by LOOCV at b={PRODUCT_B}": {"family": best_family}
            | at_product["families"][best_family]["loocv_pooled_held_out"],
            f"study rule pick at b={PRODUCT_B}": at_product["rule_pick"],
        },
        "per_conversation_R@5": {
            name: {"hybrid": h, f"bm25_b={PRODUCT_B}": p, f"bm25_b={TEXTBOOK_B}": t}
            for name, h, p, t in zip(
                names, r5_slices(hybrid, bounds), r5_slices(new, bounds), r5_slices(old, bounds), strict=True
            )
        },
        "per_category_R@5": {
            name: {
                "questions": int(np.sum(categories == cat)),
                "hybrid": round(float(np.mean(hybrid[categories == cat] < 5)), 4),
                f"bm25_b={PRODUCT_B}": round(float(np.mean(new[categories == cat] < 5)), 4),
                f"bm25_b={TEXTBOOK_B}": round(float(np.mean(old[categories == cat] < 5)), 4),
            }
            for cat, name in CATEGORIES.items()
        },
        "neighbours_w": {f"w={w}": recall(linear_at[PRODUCT_B, w]) for w in SWEEP_WS},
        "neighbours_b": {b_key(b): recall(linear_at[b, HYBRID_VECTOR_WEIGHT]) for b in BS},
    }

    return {
        "data": str(data.name),
        "model": model_path.name,
        "conversations": names,
        "questions": int(bounds[-1]),
        "protocol": "turn-level R@k pooled over questions; per conversation every turn is a document",
        "axes": {
            "bm25_k1": K1,
            "bm25_b_sweep": list(BS),
            "full_family_grids_at_b": list(FULL_GRID_BS),
            "sweep_linear_w": list(SWEEP_WS),
            "sweep_query_form": "raw",
            "selection": "R@5 on the four training conversations, then R@10, then R@1; exact ties to the first listed",
        },
        "recommendation": recommendation,
        "selections": selections,
        "per_conversation_bm25": per_conversation_bm25,
        "b_sweep": sweep_rows,
        "by_b": {key: {k: v for k, v in study.items() if k != "variants"} for key, study in by_b.items()},
        "variants": [row for study in by_b.values() for row in study["variants"]],
        "seconds": {
            "load_and_score": round(loaded - started, 2),
            "family_grids": round(families_done - loaded, 2),
            "b_sweep_and_selections": round(time.perf_counter() - families_done, 2),
            "total": round(time.perf_counter() - started, 2),
        },
    }


def report(result: dict[str, Any]) -> None:
    """The summary tables on stdout."""
    sweep = result["b_sweep"]
    first = next(iter(sweep.values()))
    print("full-dev R@5, b sweep (k1=1.5, raw query)")
    print(f"{'':8}" + "".join(f"{column.replace('linear ', ''):>8}" for column in first))
    for b, row in sweep.items():
        print(f"{b:8}" + "".join(f"{cell['R@5']:8.4f}" for cell in row.values()))
    print("\nLOOCV (pooled held-out R@5; fold choices in conversation order)")
    for name, s in result["selections"].items():
        choices = " | ".join(label(fold["chosen"]) for fold in s["folds"])
        print(f"{name:28} {s['pooled_held_out']['R@5']:.4f}  {choices}")
    print("\nper-conversation bm25 R@5")
    for conv, row in result["per_conversation_bm25"]["R@5"].items():
        print(f"{conv:8} " + "  ".join(f"{b} {value:.4f}" for b, value in row.items()))
    for b, study in result["by_b"].items():
        print(f"\n{b}: {'family':8} {'best full-dev setting':52} {'R@1':>6} {'R@5':>6} {'R@10':>6} {'LOOCV R@5':>9}")
        for name, fam in study["families"].items():
            best = fam["best_full_dev"]
            print(
                f"{'':{len(b) + 2}}{name:8} {label(best['params']):52} {best['R@1']:6.4f} {best['R@5']:6.4f}"
                f" {best['R@10']:6.4f} {fam['loocv_pooled_held_out']['R@5']:9.4f}"
            )
        for name, row in study["references"].items():
            print(f"{'':{len(b) + 2}}ref {name:30} R@1 {row['R@1']:.4f} R@5 {row['R@5']:.4f} R@10 {row['R@10']:.4f}")
    rec = result["recommendation"]
    print(f"\nproduct default {label(rec['params'])}: full dev {rec['full_dev']}")
    print(f"cos floor: {rec['min_similarity_floor']}; seconds: {result['seconds']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--model", type=Path, default=DEFAULT_MODEL)
    args = parser.parse_args()
    result = run(args.data, args.model)
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / "fusion-study.json"
    out.write_text(json.dumps(result, indent=1) + "\n")
    report(result)
    print(f"-> {out}")


if __name__ == "__main__":
    main()
