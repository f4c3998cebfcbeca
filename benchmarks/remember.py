"""Remembering at scale (issue 21, part 2): the rule-based routing step and the whole all-or-nothing write.

    python -m benchmarks.remember                 # 100k memories, a 10k-entity graph → results/remember-100k.json
    python -m benchmarks.remember --size 10k      # quicker

A home of SIZE corpus memories (benchmarks/corpus.py) and a knowledge graph of 10,000 entities, measured in one
process on the library the tools call:

- `route_rules`: Remembering.rules — the graph's names the text mentions, then the phrase rules — on the remember
  spans of the independent labelled trigger set (benchmarks/data/trigger_messages.jsonl), each with two of the
  graph's names added;
- `remember_rules` vs `save_and_log`: the whole remember step with the rules driver (route, memory or episode or
  procedure or core line, episode, graph) against what save_memory does (MemoryService.save + the episode line),
  alternated on the same home so the ratio is read from one run.
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
from pathlib import Path
from typing import Any

from benchmarks import speed
from benchmarks.corpus import write_jsonl
from benchmarks.salience import machine
from benchmarks.triggers import independent
from rockmem_mcp.core.service import CoreMemory
from rockmem_mcp.episodes.service import Episodes
from rockmem_mcp.graph.service import GraphService
from rockmem_mcp.memory.service import MemoryService
from rockmem_mcp.procedures.service import Procedures
from rockmem_mcp.recall.remembering import Remembering
from rockmem_mcp.recall.triggers import TriggerDetector

RESULTS = Path(__file__).parent / "results"
ENTITIES = 10_000


def spans() -> list[str]:
    detector = TriggerDetector()
    found = [detector.detect(message) for _, message in independent()]
    return [trigger.span for trigger in found if trigger.intent == "remember" and trigger.span]


def run(size: int, root: Path, writes: int) -> dict[str, Any]:
    work = root / f"remember-{speed.label(size)}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    corpus = write_jsonl(work / "corpus.jsonl", size)
    print(f"[{speed.label(size)}] building the home ...", file=sys.stderr, flush=True)
    built = speed.rockmem_build(corpus, work, [])
    settings = speed.home_settings(work / "rockmem-home").model_copy(update={"encode_driver": "rules"})
    memory = MemoryService(settings)
    graph = GraphService(settings)
    names = [f"Project{n:05d}" for n in range(ENTITIES)]
    for start in range(0, ENTITIES, 1000):
        graph.add_entities([{"name": name, "type": "project"} for name in names[start : start + 1000]])
    episodes, procedures = Episodes(settings, reinforcer=memory.reinforcer), Procedures(settings, memory.reinforcer)
    remembering = Remembering(settings, memory, episodes, procedures, CoreMemory(settings, memory), lambda: graph)
    rng = random.Random(7)
    texts = [f"{span} ({rng.choice(names)} with {rng.choice(names)})" for span in spans()]
    print(f"[{speed.label(size)}] measuring {len(texts)} spans ...", file=sys.stderr, flush=True)

    samples = []
    for _ in range(5):
        for text in texts:
            started = time.perf_counter()
            remembering.rules(text)
            samples.append(time.perf_counter() - started)
    stores: dict[str, int] = {}
    for text in texts:
        store = remembering.rules(text).store
        stores[store] = stores.get(store, 0) + 1

    remember, plain = [], []
    for i in range(writes):
        text = texts[i % len(texts)]
        for side in ("remember", "plain") if i % 2 == 0 else ("plain", "remember"):
            started = time.perf_counter()
            if side == "remember":
                # the core line of a core route grows the block: keep it under its cap between writes
                done = remembering.remember(text if "my name" not in text.lower() else f"fact {i}: {text}")
                if done.core_line:
                    remembering._remove_core_line(*done.core_line.split(": ", 1))
            else:
                episodes.log_save(memory.save(f"{text} #{i}", None, ["bench", "plain"]))
            (remember if side == "remember" else plain).append(time.perf_counter() - started)
    result = {
        "route_rules": speed.percentiles(samples),
        "routed_to": stores,
        "remember_rules": speed.percentiles(remember),
        "save_and_log": speed.percentiles(plain),
    }
    result["remember_over_save_and_log"] = round(
        result["remember_rules"]["p50_ms"] / result["save_and_log"]["p50_ms"], 2
    )
    result["peak_rss_mb"] = speed.peak_rss_mb()
    procedures.close()
    graph.close()
    memory.close()
    shutil.rmtree(work, ignore_errors=True)
    return {
        "benchmark": "remember",
        "size": size,
        "entities": ENTITIES,
        "spans": len(texts),
        "date": time.strftime("%Y-%m-%d"),
        "machine": machine(),
        "import_s": built["import_s"],
        **result,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=speed.parse_size, default=100_000)
    parser.add_argument("--writes", type=int, default=300)
    parser.add_argument("--work", type=Path, default=None, help="scratch folder (default: a temp dir)")
    args = parser.parse_args()
    root = args.work or Path(tempfile.mkdtemp(prefix="rockmem-remember-"))
    report = run(args.size, root, args.writes)
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"remember-{speed.label(args.size)}.json"
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    os.environ.setdefault("ROCKMEM_LOG_LEVEL", "WARNING")
    main()
