"""Offline study (issue 24, levers 1, 4 and 5): neighbour context, query-side changes and a feature reranker on
LoCoMo turn retrieval, each judged by leave-one-conversation-out (LOOCV) as benchmarks/studies/fusion_study.py judges
the fusion.

    python -m benchmarks neighbour_study          # ~1 min → benchmarks/results/neighbour-study.json

Per conversation: the product's BM25 (b = 0.3) and the shared model's cosine of every turn, loaded by
fusion_study.load; the product's hybrid (bm25/top + 3 cos, floor 0.3) and bm25 alone are the base scores.
Levers, each a small numpy function over (questions x turns), with a grid that LOOCV searches per fold:
- neighbours: a turn's score plus alpha x the sum (or max) of the base scores of the turns within `window`
  of it in the same session (import order = turn order); base scores of non-candidates count as 0, and a
  turn becomes a candidate when it borrows something. The shipped form is `rank.borrow_from_neighbours`.
- prf: RM3-style expansion: the top `docs` turns' stemmed terms weighted by their normalised score, the
  `terms` heaviest not in the query added to the BM25 query with weight `gamma` (one BM25 pass per term).
- speaker: turns whose speaker (metadata `speaker`) is named in the question get + delta x the top score.
- dates: a month (and year) named in the question; turns whose `date` is in that month get + delta x top
  (both by the product's rules, search/facets.py, shipped as rank.LIFT_WEIGHTS).
- fusion: the hybrid's vector weight w re-tuned together with the neighbour weight.
- rerank: a logistic regression over cheap features of each question's top 20 (base score, BM25/top, cosine,
  neighbour score, rank, speaker named, length), trained on four conversations, scored on the fifth.
The data set is CC BY-NC 4.0 and is read from ../shared, never copied here.
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.locomo import questions_of, turns_of
from benchmarks.studies.fusion_study import (
    CATEGORIES,
    DEFAULT_DATA,
    DEFAULT_MODEL,
    Conversation,
    best_ranks,
    load,
    loocv,
    paired,
    recall,
)
from rockmem_mcp.search import facets
from rockmem_mcp.search.bm25 import K1, B, BM25Index
from rockmem_mcp.search.rank import HYBRID_MIN_SIMILARITY, HYBRID_VECTOR_WEIGHT, NEIGHBOUR_WEIGHTS, NEIGHBOUR_WINDOW
from rockmem_mcp.search.tokenizer import tokenize

RESULTS = Path(__file__).parents[1] / "results"
Array = np.ndarray
# What the product ships (rank.NEIGHBOUR_WEIGHTS, rank.NEIGHBOUR_WINDOW); the query-side levers and the
# reranker are measured on top of it.
SHIPPED = NEIGHBOUR_WEIGHTS
ALPHAS = (0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.6, 0.8)
WINDOWS = (1, 2, 3)


@dataclass
class Extra:
    """What a lever needs beyond fusion_study's matrices: sessions, speakers, dates, terms."""

    session: Array  # per turn
    speaker_named: Array  # questions x turns: the turn's speaker is named in the question
    month_match: Array  # questions x turns: the question names the month (and year) of the turn's session
    index: BM25Index
    turn_tokens: list[list[str]]
    query_tokens: list[list[str]]
    length: Array  # per turn, tokens


def extras(data: Path) -> list[Extra]:
    """Speakers and months are matched by the product's rules (search/facets.py) on the import's metadata."""
    out = []
    for sample in json.loads(data.read_text()):
        turns, questions = turns_of(sample), questions_of(sample)
        session = np.array([t.session for t in turns])
        speakers = [facets.speaker_key(t.speaker) for t in turns]
        month = np.array([facets.month_code(t.date) for t in turns])
        named = np.zeros((len(questions), len(turns)), dtype=bool)
        dated = np.zeros_like(named)
        for i, q in enumerate(questions):
            words = set(facets.words(q.text))
            named[i] = [s is not None and facets.names_speaker(words, s) for s in speakers]
            months, years = facets.named_months(q.text)
            if months:
                dated[i] = facets.in_months(month, months, years)
        tokens = [tokenize(t.content) for t in turns]
        index = BM25Index(k1=K1, b=B)
        index.add_many([(t.dia_id, tok, False) for t, tok in zip(turns, tokens, strict=True)])
        out.append(
            Extra(
                session, named, dated, index, tokens, [tokenize(q.text) for q in questions],
                np.array([len(t) for t in tokens], dtype=np.float64),
            )
        )  # fmt: skip
    return out


# ---------------------------------------------------------------- base scores and levers


def base_scores(conv: Conversation, mode: str, w: float = HYBRID_VECTOR_WEIGHT) -> Array:
    """The product's score per (question, turn); -inf: not a candidate."""
    bm25 = conv.bm25[B]
    top = bm25.max(axis=1, keepdims=True)
    norm = bm25 / np.where(top > 0, top, 1.0)
    if mode == "bm25":
        return np.where(bm25 > 0, norm, -np.inf)
    cos = conv.cos["raw"]
    return np.where((bm25 > 0) | (cos >= HYBRID_MIN_SIMILARITY), norm + w * cos, -np.inf)


def borrow(score: Array, session: Array, alpha: float, window: int, how: str = "sum") -> Array:
    """score + alpha x the neighbours' scores (sum or max over the same session's turns within `window`)."""
    if alpha == 0:
        return score
    base = np.where(np.isfinite(score), score, 0.0)
    n = score.shape[1]
    total = np.zeros_like(base)
    for d in itertools.chain(range(-window, 0), range(1, window + 1)):
        lo, hi = max(0, -d), min(n, n - d)  # turn i borrows from turn i + d
        same = np.zeros(n, dtype=bool)
        same[lo:hi] = session[lo:hi] == session[lo + d : hi + d]
        shifted = np.zeros_like(base)
        shifted[:, lo:hi] = base[:, lo + d : hi + d]
        shifted[:, ~same] = 0.0
        total = total + shifted if how == "sum" else np.maximum(total, shifted)
    lent = alpha * total
    return np.where(np.isfinite(score), score + lent, np.where(lent > 0, lent, -np.inf))


def prf(conv: Conversation, extra: Extra, score: Array, docs: int, terms: int, gamma: float) -> Array:
    """RM3-style: add the top docs' heaviest new terms to the BM25 part (normalised by the query's top)."""
    if gamma == 0:
        return score
    out = score.copy()
    top_bm25 = conv.bm25[B].max(axis=1)
    for i in range(score.shape[0]):
        finite = np.where(np.isfinite(score[i]), score[i], -np.inf)
        best = np.argsort(-finite, kind="stable")[:docs]
        weights: Counter[str] = Counter()
        top = finite[best[0]] if len(best) and np.isfinite(finite[best[0]]) else 0.0
        for d in best:
            if not np.isfinite(finite[d]) or top <= 0:
                continue
            for term, count in Counter(extra.turn_tokens[d]).items():
                weights[term] += finite[d] / top * count / max(1, len(extra.turn_tokens[d]))
        query = set(extra.query_tokens[i])
        chosen = [t for t, _ in weights.most_common() if t not in query][:terms]
        if not chosen:
            continue
        added = sum(weights[t] * extra.index.scores([t]) for t in chosen) / max(sum(weights[t] for t in chosen), 1e-9)
        added = added / (top_bm25[i] if top_bm25[i] > 0 else 1.0)
        out[i] = np.where(np.isfinite(out[i]), out[i] + gamma * added, np.where(added > 0, gamma * added, -np.inf))
    return out


def boost(score: Array, where: Array, delta: float) -> Array:
    """+ delta x the query's top score for the marked candidates."""
    if delta == 0:
        return score
    top = np.where(np.isfinite(score), score, -np.inf).max(axis=1, keepdims=True)
    return np.where(np.isfinite(score) & where, score + delta * np.maximum(top, 0), score)


def lent(conv: Conversation, extra: Extra, mode: str) -> Array:
    """What the best neighbour would lend at weight 1 (0 for turns with nothing to borrow)."""
    base = base_scores(conv, mode)
    return np.nan_to_num(borrow(base, extra.session, 1.0, NEIGHBOUR_WINDOW, "max") - base, neginf=0.0, posinf=0.0)


def lift_named(score: Array, extra: Extra, speaker: float, month: float) -> Array:
    """Both query-side boosts, each + delta x the query's top score (the top before either is added)."""
    top = np.maximum(np.where(np.isfinite(score), score, -np.inf).max(axis=1, keepdims=True), 0)
    added = speaker * top * extra.speaker_named + month * top * extra.month_match
    return np.where(np.isfinite(score), score + added, score)


# ---------------------------------------------------------------- the feature reranker

RERANK_DEPTH = 20


def features(conv: Conversation, extra: Extra, score: Array, neighbour: Array) -> tuple[Array, Array]:
    """Per (question, top-20 turn): features and the turn index; rows in question order."""
    bm25 = conv.bm25[B]
    norm = bm25 / np.where(bm25.max(axis=1, keepdims=True) > 0, bm25.max(axis=1, keepdims=True), 1.0)
    finite = np.where(np.isfinite(score), score, -np.inf)
    order = np.argsort(-finite, axis=1, kind="stable")[:, :RERANK_DEPTH]
    rows = np.arange(score.shape[0])[:, None]
    top = finite[rows, order[:, :1]]
    f = np.stack(
        [
            finite[rows, order] / np.where(top > 0, top, 1.0),
            norm[rows, order],
            conv.cos["raw"][rows, order],
            np.where(np.isfinite(neighbour), neighbour, 0)[rows, order] / np.where(top > 0, top, 1.0),
            np.log1p(np.broadcast_to(np.arange(RERANK_DEPTH), order.shape)),
            extra.speaker_named[rows, order],
            np.log1p(extra.length[order]),
        ],
        axis=-1,
    ).astype(np.float64)
    f[~np.isfinite(f)] = 0.0
    return f, order


def logistic(x: Array, y: Array, l2: float = 1.0, steps: int = 300) -> Array:
    """Plain L2 logistic regression by Newton steps (features standardised by the caller); weights with bias."""
    x = np.hstack([x, np.ones((len(x), 1))])
    w = np.zeros(x.shape[1])
    for _ in range(min(steps, 50)):
        p = 1 / (1 + np.exp(-x @ w))
        grad = x.T @ (p - y) + l2 * w
        hess = (x * (p * (1 - p))[:, None]).T @ x + l2 * np.eye(len(w))
        w -= np.linalg.solve(hess, grad)
    return w


def rerank_loocv(convs: list[Conversation], exs: list[Extra], scores: list[Array], neighbours: list[Array]) -> Array:
    """Held-out best ranks of the reranked top 20 (ranks past 20 kept as they were)."""
    feats = [features(c, e, s, n) for c, e, s, n in zip(convs, exs, scores, neighbours, strict=True)]
    labels = []
    for conv, (_, order) in zip(convs, feats, strict=True):
        relevant = np.zeros((conv.n_questions, conv.bm25[B].shape[1]), dtype=bool)
        relevant[conv.ev_q, conv.ev_d] = True
        labels.append(relevant[np.arange(conv.n_questions)[:, None], order])
    held = []
    for i, conv in enumerate(convs):
        x = np.concatenate([feats[j][0].reshape(-1, feats[j][0].shape[-1]) for j in range(len(convs)) if j != i])
        y = np.concatenate([labels[j].reshape(-1) for j in range(len(convs)) if j != i]).astype(np.float64)
        mu, sd = x.mean(axis=0), np.where(x.std(axis=0) > 0, x.std(axis=0), 1.0)
        w = logistic((x - mu) / sd, y)
        f, order = feats[i]
        z = np.concatenate([(f - mu) / sd, np.ones((*f.shape[:2], 1))], axis=-1) @ w
        new = scores[i].copy()
        rows = np.arange(conv.n_questions)[:, None]
        valid = np.isfinite(scores[i][rows, order])
        new[rows, order] = np.where(valid, 1e6 + z, -np.inf)  # the top 20 stay above the rest, reordered
        held.append(best_ranks(new, conv))
    return np.concatenate(held)


# ---------------------------------------------------------------- the study


def per_category(ranks: Array, convs: list[Conversation]) -> dict[str, float]:
    cats = np.concatenate([c.categories for c in convs])
    return {CATEGORIES[c]: round(float(np.mean(ranks[cats == c] < 5)), 4) for c in sorted(CATEGORIES)}


def run(data: Path, model: Path) -> dict[str, Any]:
    convs = load(data, model, bs=(B,))
    exs = extras(data)
    bounds = np.cumsum([0] + [c.n_questions for c in convs])
    out: dict[str, Any] = {"questions": int(bounds[-1]), "levers": {}}

    def ranks_of(score_of: Any) -> Array:
        return np.concatenate([best_ranks(score_of(c, e), c) for c, e in zip(convs, exs, strict=True)])

    def study(name: str, settings: list[dict[str, Any]], score_of: Any, baseline: Array) -> None:
        candidates = [(s, ranks_of(lambda c, e, s=s: score_of(c, e, **s))) for s in settings]
        best_full = max(candidates, key=lambda cand: (np.mean(cand[1] < 5), np.mean(cand[1] < 10)))
        folds = loocv(candidates, convs, bounds)
        held = np.concatenate(
            [
                next(r for s, r in candidates if s == f["chosen"])[bounds[i] : bounds[i + 1]]
                for i, f in enumerate(folds["folds"])
            ]
        )
        out["levers"][name] = {
            "best_full_dev": best_full[0] | recall(best_full[1]),
            "best_full_dev_per_category_R@5": per_category(best_full[1], convs),
            "loocv_R@5": folds["pooled_held_out"]["R@5"],
            "loocv_per_category_R@5": per_category(held, convs),
            "folds_chose": [f["chosen"] for f in folds["folds"]],
        } | paired(held, baseline, "base")
        print(
            f"{name:34s} full {np.mean(best_full[1] < 5):.3f} {best_full[0]}  LOO {folds['pooled_held_out']['R@5']:.3f}"
            f"  folds {[f['chosen'] for f in folds['folds']]}"
        )

    for mode in ("hybrid", "bm25"):
        base = ranks_of(lambda c, e, mode=mode: base_scores(c, mode))
        out["levers"][f"{mode}: today"] = recall(base) | {"per_category_R@5": per_category(base, convs)}
        print(f"{mode}: today {recall(base)}")
        nb = [{"alpha": a, "window": w, "how": h} for a in ALPHAS for w in WINDOWS for h in ("sum", "max")]
        study(
            f"{mode}: neighbours",
            nb,
            lambda c, e, alpha, window, how, mode=mode: borrow(base_scores(c, mode), e.session, alpha, window, how),
            base,
        )
        study(
            f"{mode}: neighbours, max (the shipped form)",
            [{"alpha": a, "window": w} for a in ALPHAS for w in WINDOWS],
            lambda c, e, alpha, window, mode=mode: borrow(base_scores(c, mode), e.session, alpha, window, "max"),
            base,
        )
        for window in WINDOWS:
            study(
                f"{mode}: neighbours, window {window}, sum",
                [{"alpha": a} for a in ALPHAS],
                lambda c, e, alpha, window=window, mode=mode: borrow(base_scores(c, mode), e.session, alpha, window),
                base,
            )

        def with_nb(c: Conversation, e: Extra, mode: str = mode) -> Array:
            return borrow(base_scores(c, mode), e.session, SHIPPED[mode], NEIGHBOUR_WINDOW, "max")

        nbr = ranks_of(with_nb)
        deltas = [{"delta": d} for d in (0.0, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5)]
        study(
            f"{mode}+nb: speaker named",
            deltas,
            lambda c, e, delta, f=with_nb: boost(f(c, e), e.speaker_named, delta),
            nbr,
        )
        study(
            f"{mode}+nb: month named", deltas, lambda c, e, delta, f=with_nb: boost(f(c, e), e.month_match, delta), nbr
        )
        study(
            f"{mode}+nb: speaker and month named",
            [{"speaker": a, "month": b} for a in (0.0, 0.1, 0.2, 0.3, 0.4) for b in (0.0, 0.1, 0.2, 0.3, 0.4, 0.5)],
            lambda c, e, speaker, month, f=with_nb: lift_named(f(c, e), e, speaker, month),
            nbr,
        )
        study(
            f"{mode}+nb: prf (rm3)",
            [{"docs": d, "terms": t, "gamma": g} for d in (3, 5) for t in (5, 10) for g in (0.0, 0.1, 0.2, 0.4)],
            lambda c, e, docs, terms, gamma, f=with_nb: prf(c, e, f(c, e), docs, terms, gamma),
            nbr,
        )
        if mode == "hybrid":
            study(
                "hybrid: w and neighbours jointly",
                [{"w": w, "alpha": a} for w in (2.0, 2.5, 3.0, 3.5, 4.0) for a in ALPHAS],
                lambda c, e, w, alpha: borrow(base_scores(c, "hybrid", w), e.session, alpha, NEIGHBOUR_WINDOW, "max"),
                base,
            )
        started = time.perf_counter()
        pairs = list(zip(convs, exs, strict=True))
        reranked = rerank_loocv(convs, exs, [with_nb(c, e) for c, e in pairs], [lent(c, e, mode) for c, e in pairs])
        out["levers"][f"{mode}+nb: feature rerank of the top 20"] = {
            "loocv_R@5": recall(reranked)["R@5"],
            "loocv": recall(reranked),
            "loocv_per_category_R@5": per_category(reranked, convs),
            "seconds": round(time.perf_counter() - started, 2),
        } | paired(reranked, nbr, "base")
        print(f"{mode}+nb: rerank LOO {recall(reranked)}  (vs {recall(nbr)})")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--model", type=Path, default=DEFAULT_MODEL)
    parser.add_argument("--out", type=Path, default=RESULTS / "neighbour-study.json")
    args = parser.parse_args()
    result = run(args.data, args.model)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2, default=str) + "\n")


if __name__ == "__main__":
    main()
