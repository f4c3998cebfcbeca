"""Core memory and the session-start context at scale: what reading core, editing it and a session's first
recall cost.

    python -m benchmarks.core                 # 100k memories → results/core-100k.json
    python -m benchmarks.core --size 10k      # quicker

A home of SIZE corpus memories (benchmarks/corpus.py) plus 200 anti-patterns, 2,000 tool failures and
corrections spread over 30 days, and a MEMORY.md filled to about 95% of each block's cap. Measured in one
process, on the library the server calls (the MCP layer adds the same per-call cost to every tool; see
speed.py's stdio figures):

- `core_read`: `core_memory(action="read")` on an unchanged file (a stat, then the parsed file reused);
- `core_read_after_hand_edit`: the same after the file changed (read and parsed again);
- `core_edit_durable`: an append to Active Context, alternating with removing it again (flock, re-read,
  atomic durable write);
- `critical_fact_edit_durable`: the same on Critical Facts, whose lines are mirrored as pinned memories (a
  durable memory save or archive on top);
- `first_recall`: a session's first recall (a new session id each time) of a corpus question, with core,
  learnings and anti-patterns heading it; `later_recall`: the same question again in that session; and
  `first_recall_without_session_start`: a first recall by a Recall without core or learnings, alternated
  with `first_recall` on the same questions so the ratio is read from one run.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from benchmarks import speed
from benchmarks.corpus import Corpus, write_jsonl
from benchmarks.salience import machine
from rockmem_mcp.config import Settings
from rockmem_mcp.conversation.feedback import FeedbackLog
from rockmem_mcp.core.files import BLOCKS
from rockmem_mcp.core.service import CoreMemory
from rockmem_mcp.memory.service import MemoryService
from rockmem_mcp.models import Feedback, new_entry_id, utc_now
from rockmem_mcp.recall.service import Recall
from rockmem_mcp.tokens import estimate_tokens
from rockmem_mcp.working.service import WorkingMemory

RESULTS = Path(__file__).parent / "results"
FEEDBACK_ITEMS = 2_000
ANTI_PATTERNS = 200


def fill_core(core: CoreMemory) -> None:
    """Each block to ~95% of its cap with plausible lines."""
    rng = random.Random(3)
    words = "prefers concise answers deploys staging Thursday reviews pull requests mornings Berlin".split()
    version = core.read().version
    for name in BLOCKS:
        cap, lines = core.caps[name], []
        while estimate_tokens("\n".join(lines)) < cap * 0.95 - 20:
            lines.append("- " + " ".join(rng.choice(words) for _ in range(8)) + f" #{len(lines)}")
        version = core.edit("replace_block", name, version, "\n".join(lines)).version


def fill_learnings(settings: Settings, memory: MemoryService) -> None:
    log = FeedbackLog(settings)
    now = utc_now()
    for i in range(FEEDBACK_ITEMS):
        at = now - timedelta(minutes=30 * 24 * 60 * i / FEEDBACK_ITEMS)
        kind = "ToolFailure" if i % 2 else "Correction"
        item = Feedback(
            id=new_entry_id(),
            type=kind,  # type: ignore[arg-type]
            content=f"{kind} number {i}: the deploy script failed on the staging cluster; use the runbook instead",
            session_id="session:bench",
            metadata={"tool": "deploy"},
            at=at,
        )
        log.log.append(item, at.date())
    domains = ("deploy", "email", "database", "calendar", "files")
    for i in range(ANTI_PATTERNS):
        domain = domains[i % len(domains)]
        memory.save(
            f"Don't run the {domain} step {i} by hand for releases — instead use the scripted path",
            category=f"anti-patterns/{domain}",
            tags=["anti-pattern"],
        )


def starters(settings: Settings, memory: MemoryService) -> list[Callable[[str], list[str]]]:
    """The learnings lines (when the learnings service exists)."""
    try:
        from rockmem_mcp.core.learnings import Learnings
    except ImportError:  # built before learnings: core alone
        return []
    return [Learnings(FeedbackLog(settings), memory, settings).session_lines]


def timed(fn: Callable[[int], object], runs: int) -> dict[str, float]:
    samples = []
    for i in range(runs):
        t = time.perf_counter()
        fn(i)
        samples.append(time.perf_counter() - t)
    return speed.percentiles(samples)


def run(size: int, root: Path, queries: int) -> dict[str, Any]:
    work = root / f"core-{speed.label(size)}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    corpus = write_jsonl(work / "corpus.jsonl", size)
    print(f"[{speed.label(size)}] building the home ...", file=sys.stderr, flush=True)
    built = speed.rockmem_build(corpus, work, [])
    home = work / "rockmem-home"
    settings = speed.home_settings(home)
    memory = MemoryService(settings)
    core = CoreMemory(settings, memory)
    fill_core(core)
    fill_learnings(settings, memory)
    questions = Corpus(seed=speed.QUERY_SEED).queries(queries)
    working = WorkingMemory(settings, "session/bench")
    extra = starters(settings, memory)
    full = Recall(memory, core=core, starters=extra)
    bare = Recall(memory)
    print(f"[{speed.label(size)}] measuring ...", file=sys.stderr, flush=True)

    result: dict[str, Any] = {"core_tokens": core.read().tokens, "learnings_measured": bool(extra)}
    result["core_read"] = timed(lambda i: core.read(), 500)

    def hand_edit(i: int) -> None:
        os.utime(settings.core_file, ns=(i, 1_000_000_000 + i))  # a new identity: read and parse again
        core.read()

    result["core_read_after_hand_edit"] = timed(hand_edit, 200)

    def edit(block: str) -> Callable[[int], object]:
        def one(i: int) -> object:
            view = core.read(block)
            if i % 2 == 0:
                return core.edit("append", block, view.version, f"- benchmark line {i}")
            return core.edit("remove_line", block, view.version, line=len(view.blocks[0].lines))

        return one

    for name in ("Active Context", "Critical Facts"):  # room for the benchmark's line
        view = core.read(name)
        core.edit("remove_line", name, view.version, line=len(view.blocks[0].lines))
    result["core_edit_durable"] = timed(edit("Active Context"), 200)
    result["critical_fact_edit_durable"] = timed(edit("Critical Facts"), 100)

    first, without, later = [], [], []
    for i, question in enumerate(questions):
        pair = [("full", full), ("bare", bare)] if i % 2 == 0 else [("bare", bare), ("full", full)]
        for side, recall in pair:
            t = time.perf_counter()
            block = recall.build(question, f"{side}-{i}", working)
            (first if side == "full" else without).append(time.perf_counter() - t)
            if side == "full":
                assert block.session_start, "the first recall must carry the session start"
                result.setdefault("first_recall_tokens", []).append(estimate_tokens(block.text))
        t = time.perf_counter()
        full.build(question, f"full-{i}", working)
        later.append(time.perf_counter() - t)
    tokens = result.pop("first_recall_tokens")
    result["first_recall"] = speed.percentiles(first)
    result["first_recall_without_session_start"] = speed.percentiles(without)
    result["later_recall"] = speed.percentiles(later)
    result["first_recall_text_tokens"] = {"max": max(tokens), "median": sorted(tokens)[len(tokens) // 2]}
    result["first_recall_over_without"] = round(
        result["first_recall"]["p50_ms"] / result["first_recall_without_session_start"]["p50_ms"], 2
    )
    memory.close()
    shutil.rmtree(work, ignore_errors=True)
    return {
        "benchmark": "core",
        "size": size,
        "date": time.strftime("%Y-%m-%d"),
        "machine": machine(),
        "import_s": built["import_s"],
        **result,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=speed.parse_size, default=100_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--work", type=Path, default=None, help="scratch folder (default: a temp dir)")
    args = parser.parse_args()
    root = args.work or Path(tempfile.mkdtemp(prefix="rockmem-core-"))
    report = run(args.size, root, args.queries)
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"core-{speed.label(args.size)}.json"
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
