"""LoCoMo retrieval quality: recall@1/5/10 at turn and session level, per question category.

    python -m benchmarks.locomo                         # reads ../shared/bench/locomo/locomo-dev.json
    python -m benchmarks.locomo --no-salience --out benchmarks/results/locomo-salience-off.json
    python -m benchmarks.locomo --categories session --tiers --tier-categories 3   # issue 20's three tiers
    python -m benchmarks.locomo --onnx --out benchmarks/results/locomo-onnx.json   # the [onnx] extra's model

Each dialogue turn becomes one memory, imported through `rockmem-mcp import`'s code path into a fresh home
per conversation and embedded with the local model2vec model (../shared/models/m2v-minilm-l6-256) as
`reindex --embeddings` does; each question is asked through the `search_memory` MCP tool (in-memory
client) once per ranking mode (hybrid, bm25, vector, rockbot). A hit at k: an evidence turn (turn level)
or a turn from an evidence session (session level) is in the top k. Without the model only bm25 runs.
The tool reinforces the memories it returns, as in use; `--no-salience` runs the same with salience off
(`ROCKMEM_SALIENCE=false`). The tiers of every returned hit are counted.
LoCoMo has no categories: by default every turn is uncategorized. `--categories session` files each turn
under its session (`locomo/s03`), `--categories topic` under a k-means cluster of the turns' embeddings
(`locomo/t07`, about one cluster per 20 turns: the size of a session), the two ways an agent's memories
would be filed that the data allows. `--tiers` switches on three-tier retrieval (`ROCKMEM_SEARCH_TIERS`).
Every turn carries metadata `session` ("conv-26/s03"), `turn`, `date` (its session's) and `speaker`, the
contract for conversation memories (and `dia_id`, this harness's key for scoring), so a hit borrows from its
session neighbours (`--no-neighbours`: off)
and a question naming a speaker or a month lifts their turns (`--no-lifts`: off).
The plain BM25 baseline (rank-bm25 BM25Okapi over lowercase `\\w+` tokens of the same turns) runs in the
same process on the same data. Writes benchmarks/results/locomo.json. The data set is CC BY-NC 4.0 and
is read from ../shared, never copied here.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import numpy as np
from mcp import Client

from rockmem_mcp.config import Settings
from rockmem_mcp.episodes.service import Episodes
from rockmem_mcp.home.transfer import import_jsonl
from rockmem_mcp.memory.service import MemoryService
from rockmem_mcp.search.tiers import RULE_NAMES
from rockmem_mcp.server.app import build_server

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "bench" / "locomo" / "locomo-dev.json"
DEFAULT_MODEL = ROOT.parent / "shared" / "models" / "m2v-minilm-l6-256"
MODES = ("hybrid", "bm25", "vector", "rockbot")
RESULTS = Path(__file__).parent / "results"
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
KS = (1, 5, 10)


CATEGORIZATIONS = ("none", "session", "topic")
TURNS_PER_TOPIC = 20  # about a session's length, so topic and session categories have like sizes


@dataclass(frozen=True)
class Turn:
    dia_id: str
    session: int
    content: str
    category: str | None = None
    conversation: str = ""
    date: str = ""  # the session's date as the data gives it ("1:56 pm on 8 May, 2023")
    speaker: str = ""


@dataclass(frozen=True)
class Question:
    text: str
    evidence: frozenset[str]
    category: int

    @property
    def sessions(self) -> frozenset[int]:
        return frozenset(session_of(e) for e in self.evidence)


def session_of(dia_id: str) -> int:
    return int(dia_id.split(":")[0].lstrip("D"))


def turns_of(sample: dict[str, Any]) -> list[Turn]:
    conversation = sample["conversation"]
    name = sample.get("sample_id", "")
    turns = []
    for key, value in conversation.items():
        if not re.fullmatch(r"session_\d+", key):
            continue
        for turn in value:
            text = f"{turn['speaker']}: {turn['text']}"
            if turn.get("blip_caption"):
                text += f" [shares a photo: {turn['blip_caption']}]"
            date = str(conversation.get(f"{key}_date_time", ""))
            turns.append(Turn(turn["dia_id"], session_of(turn["dia_id"]), text, None, name, date, turn["speaker"]))
    return turns


def questions_of(sample: dict[str, Any]) -> list[Question]:
    questions = []
    for qa in sample["qa"]:
        if qa.get("category") not in CATEGORIES:
            continue  # category 5 is adversarial: no evidence to find
        # Ids are "D3:5"; the data also holds "D8:6; D9:17", "D:11:26" (read as D11:26) and a bare "D".
        evidence = frozenset(
            f"D{s}:{t}" for raw in qa.get("evidence", []) for s, t in re.findall(r"D:?(\d+):(\d+)", raw)
        )
        if evidence:
            questions.append(Question(qa["question"], evidence, qa["category"]))
    return questions


def categorized(turns: list[Turn], how: str, model: Path | str | None) -> list[Turn]:
    """The turns filed under categories: none, their session, or a topic cluster (needs the model)."""
    if how == "none":
        return turns
    if how == "session":
        return [replace(t, category=f"locomo/s{t.session:02d}") for t in turns]
    if how != "topic" or model is None:
        raise ValueError(f"categories {how!r} need one of {CATEGORIZATIONS} (topic needs the embedding model)")
    from model2vec import StaticModel  # the local extra; only topic categories need it here

    vectors = StaticModel.from_pretrained(str(model)).encode([t.content for t in turns])
    clusters = kmeans(vectors, max(1, round(len(turns) / TURNS_PER_TOPIC)))
    return [replace(t, category=f"locomo/t{c:02d}") for t, c in zip(turns, clusters.tolist(), strict=True)]


def kmeans(vectors: np.ndarray, k: int, rounds: int = 30, seed: int = 0) -> np.ndarray:
    """Spherical k-means (cosine), deterministic: the cluster of every row."""
    unit = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    centres = unit[np.random.default_rng(seed).choice(len(unit), size=k, replace=False)]
    assigned = np.zeros(len(unit), dtype=np.int64)
    for _ in range(rounds):
        assigned = (unit @ centres.T).argmax(axis=1)
        for c in range(k):
            members = unit[assigned == c]
            if len(members):
                centre = members.sum(axis=0)
                centres[c] = centre / max(float(np.linalg.norm(centre)), 1e-12)
    return assigned


class PlainBM25:
    """The baseline: rank-bm25's BM25Okapi over lowercase word tokens, no other processing."""

    def __init__(self, turns: list[Turn]) -> None:
        from rank_bm25 import BM25Okapi  # test extra; only this baseline needs it

        self.turns = turns
        self.bm25 = BM25Okapi([self.tokens(t.content) for t in turns])

    @staticmethod
    def tokens(text: str) -> list[str]:
        return re.findall(r"\w+", text.lower())

    def search(self, query: str, k: int) -> list[str]:
        scores = self.bm25.get_scores(self.tokens(query))
        best = sorted(range(len(scores)), key=lambda i: -scores[i])[:k]
        return [self.turns[i].dia_id for i in best if scores[i] > 0]


async def rockmem_rankings(
    turns: list[Turn],
    questions: list[Question],
    k: int,
    modes: tuple[str, ...],
    model: Path | str | None,
    salience: bool = True,
    tiers: Counter[str] | None = None,
    search: dict[str, Any] | None = None,
    episodes: bool = False,
) -> dict[str, list[list[str]]]:
    """Import (and embed) the turns into a fresh home, then ask every question through search_memory; the
    tier of every hit returned is counted into `tiers`. `search`: further settings (the three tiers').
    `episodes`: each turn is also logged as the episode save_memory would write (in import order, a minute
    apart), and two more rankings come back: `episodes` (the episode search alone) and `recall` (the recall
    tool's routed, merged block: its episodes and memories in the order the block shows them)."""
    with tempfile.TemporaryDirectory(prefix="rockmem-locomo-") as home:
        overrides = {"home": home, "embedding_model": str(model) if model else "off", "salience": salience}
        settings = Settings.load(overrides | (search or {}), env={})
        lines = [json.dumps(memory_record(t)) for t in turns]
        memory = MemoryService(settings, embed_in_background=False)
        try:
            report = import_jsonl(memory, lines)
            if model:
                memory.vector_worker.drain()
            dia_of = {e.id: e.metadata["dia_id"] for e in memory.iter_entries()}
            if episodes:
                log_turns_as_episodes(settings, memory, turns)
        finally:
            memory.close()
        assert not report.errors, report.errors
        rankings: dict[str, list[list[str]]] = {mode: [] for mode in modes}
        if episodes:
            rankings |= await episode_rankings(settings, questions, k, dia_of)
        async with Client(build_server(settings)) as client:
            for mode in modes:
                for question in questions:
                    arguments = {"query": question.text, "limit": k, "mode": mode}
                    result = await client.call_tool("search_memory", arguments)
                    assert not result.is_error, result.content
                    assert result.structured_content["mode"] == mode, result.structured_content["mode"]
                    hits = result.structured_content["results"]
                    if tiers is not None:
                        tiers.update(hit["tier"] for hit in hits)
                    rankings[mode].append([hit["entry"]["metadata"]["dia_id"] for hit in hits])
        return rankings


def log_turns_as_episodes(settings: Settings, memory: MemoryService, turns: list[Turn]) -> None:
    """Each imported turn's episode, as save_memory logs one, a minute apart in import (turn) order."""
    start = datetime(2026, 1, 1, tzinfo=UTC)
    log = Episodes(settings)
    by_dia = {e.metadata["dia_id"]: e for e in memory.iter_entries()}
    for n, turn in enumerate(turns):
        entry = by_dia[turn.dia_id]
        log.record(entry.content, "fact", memory_id=entry.id, at=start + timedelta(minutes=n))


async def episode_rankings(
    settings: Settings, questions: list[Question], k: int, dia_of: dict[str, str]
) -> dict[str, list[list[str]]]:
    """The episode search alone (in process), and the recall tool's block (episodes and memories in the order
    it shows them, each question in a session of its own), as turn ids."""
    log = Episodes(settings)
    found: dict[str, list[list[str]]] = {"episodes": [], "recall": []}
    for question in questions:
        hits = log.search(question.text, limit=k).hits
        found["episodes"].append([dia_of[h.episode.memory_id] for h in hits if h.episode.memory_id in dia_of])
    async with Client(build_server(settings)) as client:
        for n, question in enumerate(questions):
            result = await client.call_tool("recall", {"message": question.text, "session_id": f"q{n}"})
            assert not result.is_error, result.content
            block = result.structured_content
            memories = [dia_of[m["id"]] for m in block["memories"] if m["id"] in dia_of]
            episodes = [dia_of[e["memory_id"]] for e in block["episodes"] if e["memory_id"] in dia_of]
            # As the block shows them: a period's episodes lead, otherwise the memories.
            first, then = (episodes, memories) if block["period"] is not None else (memories, episodes)
            found["recall"].append(list(dict.fromkeys([*first, *then]))[:k])
    return found


def memory_record(turn: Turn) -> dict[str, Any]:
    """The import line of one turn, in the conversation-memory contract (search/conversation_metadata.py):
    `session`, `turn` (its number in the session), `speaker`, `date`; `dia_id` is this harness's own key for
    scoring (the product reads nothing of it)."""
    metadata = {
        "dia_id": turn.dia_id,
        "session": f"{turn.conversation}/s{turn.session:02d}",
        "turn": turn.dia_id.rsplit(":", 1)[-1],
        "speaker": turn.speaker,
    }
    if turn.date:
        metadata["date"] = turn.date
    record: dict[str, Any] = {"content": turn.content, "metadata": metadata}
    if turn.category:
        record["category"] = turn.category
    return record


def score(questions: list[Question], rankings: list[list[str]]) -> dict[str, Any]:
    """Recall@k at turn and session level, overall and per category."""
    hits: dict[str, dict[str, list[bool]]] = defaultdict(lambda: defaultdict(list))
    for question, ranked in zip(questions, rankings, strict=True):
        for k in KS:
            top = ranked[:k]
            turn_hit = any(d in question.evidence for d in top)
            session_hit = any(session_of(d) in question.sessions for d in top)
            for group in ("overall", CATEGORIES[question.category]):
                hits[group][f"turn_R@{k}"].append(turn_hit)
                hits[group][f"session_R@{k}"].append(session_hit)
    return {
        group: {"questions": len(next(iter(m.values())))} | {name: round(sum(v) / len(v), 4) for name, v in m.items()}
        for group, m in hits.items()
    }


def run(
    data: Path,
    model: Path | str | None,
    conversations: int | None = None,
    questions_per: int | None = None,
    salience: bool = True,
    categories: str = "none",
    search: dict[str, Any] | None = None,
    episodes: bool = False,
) -> dict[str, Any]:
    """`search`: further settings for every search (the three tiers': search_tiers, search_tier_categories,
    search_tier_rule)."""
    samples = json.loads(data.read_text())[:conversations]
    modes = MODES if model else ("bm25",)
    all_questions: list[Question] = []
    ranked: dict[str, list[list[str]]] = {f"rockmem_{mode}": [] for mode in modes} | {"plain_bm25": []}
    if episodes:
        ranked |= {"rockmem_episodes": [], "rockmem_recall": []}
    misses: list[dict[str, Any]] = []
    timings: dict[str, float] = defaultdict(float)
    tiers: Counter[str] = Counter()
    for sample in samples:
        turns = categorized(turns_of(sample), categories, model)
        questions = questions_of(sample)[:questions_per]
        by_id = {t.dia_id: t.content for t in turns}
        started = time.perf_counter()
        ours = anyio.run(rockmem_rankings, turns, questions, max(KS), modes, model, salience, tiers, search, episodes)
        timings["rockmem_s"] += time.perf_counter() - started
        started = time.perf_counter()
        plain = PlainBM25(turns)
        baseline = [plain.search(q.text, max(KS)) for q in questions]
        timings["plain_bm25_s"] += time.perf_counter() - started
        for mode, rankings in ours.items():
            ranked[f"rockmem_{mode}"] += rankings
        ranked["plain_bm25"] += baseline
        all_questions += questions
        for question, top in zip(questions, ours[modes[0]], strict=True):
            if not any(d in question.evidence for d in top[:5]):
                misses.append(
                    {
                        "conversation": sample["sample_id"],
                        "category": CATEGORIES[question.category],
                        "question": question.text,
                        "evidence": [by_id.get(e, e) for e in sorted(question.evidence)],
                        "top1": by_id.get(top[0]) if top else None,
                    }
                )
    return {
        "benchmark": "locomo",
        "data": str(data),
        "model": str(model) if model else None,
        "date": time.strftime("%Y-%m-%d"),
        "salience": salience,
        "categories": categories,
        "search_settings": search or {},
        "tiers_of_returned_hits": dict(tiers),
        "conversations": [s["sample_id"] for s in samples],
        "questions": len(all_questions),
        "methods": {name: score(all_questions, r) for name, r in ranked.items()},
        "seconds": {k: round(v, 2) for k, v in timings.items()},
        f"misses_at_5_{modes[0]}": misses,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument(
        "--model",
        type=Path,
        default=DEFAULT_MODEL,
        help="model2vec model folder for the vector modes, or 'bundled' (the packaged model)",
    )
    parser.add_argument("--conversations", type=int, default=None, help="only the first N conversations")
    parser.add_argument("--questions", type=int, default=None, help="only the first N questions of each")
    parser.add_argument("--no-salience", action="store_true", help="salience off (ROCKMEM_SALIENCE=false)")
    parser.add_argument("--categories", choices=CATEGORIZATIONS, default="none", help="how turns are filed")
    parser.add_argument("--tiers", action="store_true", help="three-tier retrieval (ROCKMEM_SEARCH_TIERS=true)")
    parser.add_argument("--tier-categories", type=int, default=None, help="categories tier 2 searches")
    parser.add_argument("--tier-rule", choices=RULE_NAMES, default=None, help="how tier 1 ranks categories")
    parser.add_argument("--episodes", action="store_true", help="each turn also an episode; report both (issue 20)")
    parser.add_argument("--no-neighbours", action="store_true", help="session neighbours lend nothing (issue 24)")
    parser.add_argument("--no-lifts", action="store_true", help="no lift for a named speaker or month (issue 24)")
    parser.add_argument("--onnx", action="store_true", help="the [onnx] extra's model (onnx:minilm-int8), not --model")
    parser.add_argument("--out", type=Path, default=RESULTS / "locomo.json")
    args = parser.parse_args()
    if not args.data.exists():
        sys.exit(f"LoCoMo data not found at {args.data} (it lives in ../shared/bench/locomo beside the checkout)")
    model: Path | str | None = args.model if args.model.exists() or str(args.model) == "bundled" else None
    if args.onnx:
        model = "onnx:minilm-int8"
    elif model is None:
        print(f"no embedding model at {args.model}: only bm25 runs", file=sys.stderr)
    search = {
        "search_tiers": args.tiers or None,
        "search_tier_categories": args.tier_categories,
        "search_tier_rule": args.tier_rule,
        "search_neighbours": False if args.no_neighbours else None,
        "search_lifts": False if args.no_lifts else None,
    }
    search = {name: value for name, value in search.items() if value is not None}
    report = run(
        args.data, model, args.conversations, args.questions, not args.no_salience, args.categories, search,
        args.episodes,
    )  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    for name, groups in report["methods"].items():
        overall = groups["overall"]
        print(f"{name:14s} " + "  ".join(f"{m} {overall[m]:.3f}" for m in overall if m != "questions"))
    print(f"{report['questions']} questions; misses at 5 listed in {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
