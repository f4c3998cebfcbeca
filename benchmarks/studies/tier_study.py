"""Three-tier retrieval (issue 20) on LoCoMo dev: every tier-1 rule and number of categories against the flat
search, judged by leave-one-conversation-out.

    python -m benchmarks.studies.tier_study            # ~5 minutes → benchmarks/results/tier-study.json

LoCoMo's turns carry no category, so each conversation is imported twice, as `benchmarks.locomo` does with
`--categories session` (each turn under its session) and `--categories topic` (under a k-means cluster of the
turns' embeddings), and embedded with the shared model. Every question is then asked through
`MemoryService.search` (the search tool's path, without the reinforcement) in modes bm25 and hybrid, flat and
with `search_tiers` on for every rule in `search.tiers.RULES` and K in GRID_K. A hit at k: an evidence turn
in the top k (turn level, as in BENCHMARKS.md).

Leave-one-conversation-out (LOOCV), per categorization and mode: the (rule, K) with the best R@5 (then R@10,
then R@1; exact ties to the first listed) on four conversations is scored on the fifth; the held-out hits are
pooled over the five folds and set beside the flat search's. The questions the chosen settings win and lose
at R@5 against flat are counted (a two-sided sign test). The data set is CC BY-NC 4.0 and is read from
../shared, never copied here.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.locomo import DEFAULT_DATA, DEFAULT_MODEL, KS, Question, categorized, memory_record, questions_of
from benchmarks.locomo import turns_of as locomo_turns
from benchmarks.studies.fusion_study import sign_test
from rockmem_mcp.config import Settings
from rockmem_mcp.home.transfer import import_jsonl
from rockmem_mcp.memory.service import MemoryService
from rockmem_mcp.search.tiers import RULE_NAMES
from rockmem_mcp.vector_worker import Embedder

RESULTS = Path(__file__).parents[1] / "results"
GRID_K = (1, 2, 3, 5, 8)
MODES = ("bm25", "hybrid")
CATEGORIZATIONS = ("session", "topic")
FLAT = "flat"
MISS = 1 << 30  # the rank of a question none of whose evidence turns is in the top max(KS)


def setting_name(rule: str, k: int) -> str:
    return f"{rule}@{k}"


SETTINGS = [setting_name(rule, k) for rule in RULE_NAMES for k in GRID_K]


def first_hit(question: Question, ranked: list[str]) -> int:
    """The 1-based rank of the first evidence turn, or MISS."""
    return next((i + 1 for i, dia_id in enumerate(ranked) if dia_id in question.evidence), MISS)


def conversation_ranks(
    sample: dict[str, Any], categorization: str, model: Path, questions_per: int | None = None
) -> dict[str, dict[str, list[int]]]:
    """mode -> setting (flat or rule@K) -> first-hit rank per question, for one conversation."""
    turns = categorized(locomo_turns(sample), categorization, model)
    questions = questions_of(sample)[:questions_per]
    ranks: dict[str, dict[str, list[int]]] = {mode: {} for mode in MODES}
    with tempfile.TemporaryDirectory(prefix="rockmem-tier-study-") as home:
        base = {"home": home, "embedding_model": str(model)}
        settings = Settings.load(base, env={})
        embedder = Embedder(settings)  # one model load for every service below
        memory = MemoryService(settings, embedder=embedder, embed_in_background=False)
        try:
            report = import_jsonl(memory, [json.dumps(memory_record(t)) for t in turns])
            memory.vector_worker.drain()
        finally:
            memory.close()
        assert not report.errors, report.errors
        for name in [FLAT, *SETTINGS]:
            extra: dict[str, Any] = {}
            if name != FLAT:
                rule, k = name.split("@")
                extra = {"search_tiers": True, "search_tier_rule": rule, "search_tier_categories": int(k)}
            memory = MemoryService(Settings.load(base | extra, env={}), embedder=embedder, embed_in_background=False)
            try:
                for mode in MODES:
                    ranks[mode][name] = [
                        first_hit(
                            q,
                            [
                                h.entry.metadata["dia_id"]
                                for h in memory.search(q.text, limit=max(KS), mode=mode).results
                            ],
                        )
                        for q in questions
                    ]
            finally:
                memory.close()
    return ranks


def recalls(ranks: list[int]) -> dict[str, float]:
    return {f"R@{k}": round(sum(r <= k for r in ranks) / len(ranks), 4) for k in KS}


def selection_key(ranks: list[int]) -> tuple[int, int, int]:
    """R@5, then R@10, then R@1, as hit counts."""
    return (sum(r <= 5 for r in ranks), sum(r <= 10 for r in ranks), sum(r <= 1 for r in ranks))


def loocv(per_conversation: dict[str, dict[str, list[int]]], conversations: list[str]) -> dict[str, Any]:
    """Pick the best tier setting on all conversations but one, score it on that one; pool the held-out."""
    held_out: list[int] = []
    flat: list[int] = []
    folds = []
    for left_out in conversations:
        train = [c for c in conversations if c != left_out]

        def pooled(name: str, among: list[str] = train) -> list[int]:
            return [r for c in among for r in per_conversation[c][name]]

        chosen = max(SETTINGS, key=lambda name: selection_key(pooled(name)))  # max keeps the first of ties
        held_out += per_conversation[left_out][chosen]
        flat += per_conversation[left_out][FLAT]
        folds.append({"left_out": left_out, "chosen": chosen, "held_out": recalls(per_conversation[left_out][chosen]),
                      "flat": recalls(per_conversation[left_out][FLAT])})  # fmt: skip
    wins = sum(t <= 5 < f for t, f in zip(held_out, flat, strict=True))
    losses = sum(f <= 5 < t for t, f in zip(held_out, flat, strict=True))
    return {
        "held_out": recalls(held_out),
        "flat": recalls(flat),
        "r5_won": wins,
        "r5_lost": losses,
        "sign_test_p": sign_test(wins, losses),
        "folds": folds,
    }


def run(data: Path, model: Path, conversations: int | None = None, questions_per: int | None = None) -> dict[str, Any]:
    samples = json.loads(data.read_text())[:conversations]
    names = [s["sample_id"] for s in samples]
    started = time.perf_counter()
    report: dict[str, Any] = {
        "benchmark": "tier-study",
        "data": str(data),
        "model": str(model),
        "date": time.strftime("%Y-%m-%d"),
        "grid": {"rules": list(RULE_NAMES), "categories": list(GRID_K)},
        "conversations": names,
        "results": {},
    }
    for categorization in CATEGORIZATIONS:
        by_mode: dict[str, dict[str, dict[str, list[int]]]] = {mode: {} for mode in MODES}  # mode, conv, setting
        for sample in samples:
            for mode, ranks in conversation_ranks(sample, categorization, model, questions_per).items():
                by_mode[mode][sample["sample_id"]] = ranks
        for mode, per_conversation in by_mode.items():
            full_dev = {
                name: recalls([r for c in names for r in per_conversation[c][name]]) for name in [FLAT, *SETTINGS]
            }
            per_conv_r5 = {
                name: {c: recalls(per_conversation[c][name])["R@5"] for c in names} for name in [FLAT, *SETTINGS]
            }
            report["results"][f"{categorization}/{mode}"] = {
                "questions": sum(len(per_conversation[c][FLAT]) for c in names),
                "full_dev": full_dev,
                "per_conversation_R@5": per_conv_r5,
                "loocv": loocv(per_conversation, names) if len(names) > 1 else None,
            }
    report["seconds"] = round(time.perf_counter() - started, 1)
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--model", type=Path, default=DEFAULT_MODEL)
    parser.add_argument("--conversations", type=int, default=None, help="only the first N conversations")
    parser.add_argument("--questions", type=int, default=None, help="only the first N questions of each")
    parser.add_argument("--out", type=Path, default=RESULTS / "tier-study.json")
    args = parser.parse_args()
    if not (args.data.exists() and args.model.exists()):
        raise SystemExit(f"needs the LoCoMo data ({args.data}) and the shared model ({args.model})")
    report = run(args.data, args.model, args.conversations, args.questions)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    for key, result in report["results"].items():
        flat = result["full_dev"][FLAT]
        best = max(SETTINGS, key=lambda n: (result["full_dev"][n]["R@5"], result["full_dev"][n]["R@10"]))
        line = f"{key:16s} flat R@1/5/10 {flat['R@1']:.3f}/{flat['R@5']:.3f}/{flat['R@10']:.3f}"
        line += f"  best {best} {result['full_dev'][best]['R@5']:.3f}"
        if cv := result["loocv"]:
            line += f"  LOOCV held-out R@5 {cv['held_out']['R@5']:.3f} vs flat {cv['flat']['R@5']:.3f}"
            line += f" (won {cv['r5_won']}, lost {cv['r5_lost']}, p {cv['sign_test_p']})"
        print(line)


if __name__ == "__main__":
    main()
