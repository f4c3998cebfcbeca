"""LoCoMo with the ONNX model (issue 24, lever 2): recall per mode, the hybrid's vector weight by
leave-one-conversation-out, and the backfill's documents/s through the real vector worker.

    python -m benchmarks.studies.onnx_study                      # ../shared/bench/locomo/locomo-dev.json
    python -m benchmarks.studies.onnx_study --data PATH --out benchmarks/results/onnx-study.json

Per conversation the turns are imported into one fresh home and embedded once by `reindex --embeddings`'s
code path (VectorWorker.drain, timed: the backfill rate); each ranking then runs on a copy of that home, so
salience reinforcement (on, as in use) never leaks from one setting into another. Modes: bm25, vector, and
hybrid at every weight of WEIGHTS. The weight is chosen by leave-one-conversation-out: the best pooled turn
R@5 (then R@10, then R@1, ties to the smaller weight) on four conversations, scored on the fifth.
Needs the [onnx] extra. The data set is CC BY-NC 4.0 and is read from ../shared, never copied here.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from mcp import Client

from benchmarks.locomo import DEFAULT_DATA, KS, Question, Turn, memory_record, questions_of, score, turns_of
from rockmem_mcp.config import Settings
from rockmem_mcp.home.transfer import import_jsonl
from rockmem_mcp.memory.service import MemoryService
from rockmem_mcp.server.app import build_server

RESULTS = Path(__file__).parents[1] / "results"
MODEL = "onnx:minilm-int8"
WEIGHTS = (0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0)


def prepared(home: Path, turns: list[Turn]) -> tuple[dict[str, str], float, int]:
    """Import and embed one conversation's turns into `home`: (memory id -> dia_id, seconds embedding, count)."""
    settings = Settings.load({"home": str(home), "embedding_model": MODEL}, env={})
    memory = MemoryService(settings, embed_in_background=False)
    try:
        report = import_jsonl(memory, [json.dumps(memory_record(t)) for t in turns])
        assert not report.errors, report.errors
        started = time.perf_counter()
        embedded = memory.vector_worker.drain()
        seconds = time.perf_counter() - started
        return {e.id: e.metadata["dia_id"] for e in memory.iter_entries()}, seconds, embedded
    finally:
        memory.close()


async def rankings(home: Path, questions: list[Question], mode: str, weight: float) -> list[list[str]]:
    """Every question through search_memory on a copy of `home`, as dia_ids."""
    with tempfile.TemporaryDirectory(prefix="rockmem-onnx-run-") as scratch:
        copy = Path(scratch) / "home"
        shutil.copytree(home, copy)
        overrides = {"home": str(copy), "embedding_model": MODEL, "hybrid_vector_weight": weight}
        settings = Settings.load(overrides, env={})
        found: list[list[str]] = []
        async with Client(build_server(settings)) as client:
            for question in questions:
                arguments = {"query": question.text, "limit": max(KS), "mode": mode}
                result = await client.call_tool("search_memory", arguments)
                assert not result.is_error and result.structured_content["mode"] == mode, result.content
                found.append([hit["entry"]["metadata"]["dia_id"] for hit in result.structured_content["results"]])
        return found


def selection_key(groups: dict[str, Any]) -> tuple[float, float, float]:
    overall = groups["overall"]
    return overall["turn_R@5"], overall["turn_R@10"], overall["turn_R@1"]


def loocv(questions: list[list[Question]], ranked: dict[float, list[list[list[str]]]]) -> dict[str, Any]:
    """Per held-out conversation: the weight the other four choose, and the held-out rankings it gives."""
    folds: list[dict[str, Any]] = []
    held_q: list[Question] = []
    held_r: list[list[str]] = []
    for out in range(len(questions)):

        def pooled(weight: float, out: int = out) -> dict[str, Any]:
            qs = [q for c, conv in enumerate(questions) if c != out for q in conv]
            rs = [r for c, conv in enumerate(ranked[weight]) if c != out for r in conv]
            return score(qs, rs)

        best = max(WEIGHTS, key=lambda w: (*selection_key(pooled(w)), -w))
        held = score(questions[out], ranked[best][out])["overall"]["turn_R@5"]
        folds.append({"held_out": out, "weight": best, "held_out_turn_R@5": held})
        held_q += questions[out]
        held_r += ranked[best][out]
    return {"folds": folds, "pooled": score(held_q, held_r)}


def run(
    data: Path, conversations: int | None = None, questions_per: int | None = None, turns_per: int | None = None
) -> dict[str, Any]:
    """`questions_per` and `turns_per` cut each conversation short (a smoke run)."""
    samples = json.loads(data.read_text())[:conversations]
    questions = [questions_of(s)[:questions_per] for s in samples]
    per_mode: dict[str, list[list[list[str]]]] = {"bm25": [], "vector": []}
    hybrid: dict[float, list[list[list[str]]]] = {w: [] for w in WEIGHTS}
    embed_seconds, embedded = 0.0, 0
    with tempfile.TemporaryDirectory(prefix="rockmem-onnx-study-") as root:
        for n, sample in enumerate(samples):
            home = Path(root) / f"c{n}"
            _, seconds, count = prepared(home, turns_of(sample)[:turns_per])
            embed_seconds += seconds
            embedded += count
            print(f"{sample['sample_id']}: {count} turns embedded in {seconds:.1f}s", file=sys.stderr)
            for mode in per_mode:
                per_mode[mode].append(anyio.run(rankings, home, questions[n], mode, 0.0))
            for weight in WEIGHTS:
                hybrid[weight].append(anyio.run(rankings, home, questions[n], "hybrid", weight))
    every = [q for conv in questions for q in conv]

    def flat(ranked: list[list[list[str]]]) -> list[list[str]]:
        return [r for conv in ranked for r in conv]

    return {
        "benchmark": "locomo-onnx",
        "data": str(data),
        "model": MODEL,
        "date": time.strftime("%Y-%m-%d"),
        "conversations": [s["sample_id"] for s in samples],
        "questions": len(every),
        "backfill": {"documents": embedded, "seconds": round(embed_seconds, 2),
                     "documents_per_s": round(embedded / embed_seconds, 1) if embed_seconds else None},
        "methods": {f"rockmem_{mode}": score(every, flat(r)) for mode, r in per_mode.items()}
        | {f"rockmem_hybrid_w{w:g}": score(every, flat(r)) for w, r in hybrid.items()},
        "loocv_hybrid_weight": loocv(questions, hybrid) if len(samples) > 1 else None,
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--conversations", type=int, default=None, help="only the first N conversations")
    parser.add_argument("--out", type=Path, default=RESULTS / "onnx-study.json")
    args = parser.parse_args()
    if not args.data.exists():
        sys.exit(f"LoCoMo data not found at {args.data} (it lives in ../shared/bench/locomo beside the checkout)")
    report = run(args.data, args.conversations)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    for name, groups in report["methods"].items():
        print(f"{name:22s} " + "  ".join(f"{m} {groups['overall'][m]:.3f}" for m in ("turn_R@1", "turn_R@5")))
    if loo := report["loocv_hybrid_weight"]:
        print(
            f"LOOCV weights {[f['weight'] for f in loo['folds']]}: turn R@5 {loo['pooled']['overall']['turn_R@5']:.3f}"
        )
    print(f"backfill {report['backfill']}")


if __name__ == "__main__":
    main()
