"""The deterministic dream pass at scale, and whether it holds up searches and saves running beside it.

    python -m benchmarks.dream --size 10k        # → benchmarks/results/dream-10k.json
    python -m benchmarks.dream --large 5         # 5 near-duplicates of ~100 KB each → dream-large-5.json

A home of seeded corpus facts (benchmarks/corpus.py), 5% of them saved again as exact or near duplicates
(a word changed in case or a trailing period), with import dates months back so decay has work, and 2% archived
long ago so purge does too. Then, in one process:
- searches and durable saves alone (the baseline), 200 each;
- the deterministic pass (`Dreamer.run_deterministic`) timed alone, on a copy of the home;
- the pass again on the original, while a second thread runs the same searches and saves; their latencies
  during the dream are compared with the baseline (p50 ratio).
Writes benchmarks/results/dream-{size}.json. No timing is asserted by tests: a tiny run is in the test suite.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks.corpus import Corpus
from benchmarks.speed import label, parse_size, peak_rss_mb, percentiles
from rockmem_mcp.config import Settings
from rockmem_mcp.consolidation.dream import Dreamer
from rockmem_mcp.consolidation.templates import Templates
from rockmem_mcp.graph.service import GraphService
from rockmem_mcp.memory.service import MemoryService

RESULTS = Path(__file__).parent / "results"


def build_home(home: Path, size: int, seed: int = 7) -> dict[str, int]:
    corpus = Corpus(seed)
    rng = random.Random(seed)
    memory = MemoryService(Settings.load({"home": home}, env={}), embed_in_background=False)
    records = list(corpus.records(size))
    duplicates = 0
    for i in rng.sample(range(size), size // 20):
        copy = dict(records[i])
        text = str(copy["content"])
        copy["content"] = text.rstrip(".") if rng.random() < 0.5 else text.upper()[:1] + text[1:] + " "
        records.append(copy)
        duplicates += 1
    archived = 0
    for record in rng.sample(records, size // 50):
        record["archived_at"] = "2025-01-01T00:00:00Z"
        archived += 1
    entries = [memory.prepare_entry(r) for r in records]
    for start in range(0, len(entries), 2000):
        memory.save_many(entries[start : start + 2000])
    memory.close()
    return {"memories": len(entries), "duplicates_added": duplicates, "archived_long_ago": archived}


def timed_load(memory: MemoryService, queries: list[str], stop: threading.Event | None = None) -> dict[str, Any]:
    """Searches and durable saves, alternating; until `stop` (then at least once round) or for the queries."""
    searches, saves = [], []
    i = 0
    while True:
        query = queries[i % len(queries)]
        t = time.perf_counter()
        memory.search(query, limit=20)
        searches.append(time.perf_counter() - t)
        t = time.perf_counter()
        memory.save(f"benchmark note {i}: review on Thursday", "notes/dream-benchmark")
        saves.append(time.perf_counter() - t)
        i += 1
        if (stop is None and i >= len(queries)) or (stop is not None and stop.is_set()):
            return {"search_20": percentiles(searches), "durable_save": percentiles(saves)}


def run(size: int, root: Path, queries: int = 200) -> dict[str, Any]:
    work = root / f"dream-{label(size)}"
    shutil.rmtree(work, ignore_errors=True)
    home = work / "home"
    built = build_home(home, size)
    # The pass alone first, on a copy of the home: nothing else running.
    alone_home = work / "alone"
    shutil.copytree(home, alone_home)
    alone_settings = Settings.load({"home": alone_home}, env={})
    alone_memory, alone_graph = MemoryService(alone_settings), GraphService(alone_settings)
    started = time.perf_counter()
    Dreamer(alone_memory, alone_graph, alone_settings, Templates(alone_settings.prompts_dir)).run_deterministic()
    alone_s = time.perf_counter() - started
    alone_memory.close()
    alone_graph.close()
    settings = Settings.load({"home": home}, env={})
    memory, graph = MemoryService(settings), GraphService(settings)
    asked = Corpus(seed=99).queries(queries)
    baseline = timed_load(memory, asked)
    dreamer = Dreamer(memory, graph, settings, Templates(settings.prompts_dir))
    stop, beside = threading.Event(), {}
    worker = threading.Thread(target=lambda: beside.update(timed_load(memory, asked, stop)))
    worker.start()
    started = time.perf_counter()
    report = dreamer.run_deterministic()
    dream_s = time.perf_counter() - started
    stop.set()
    worker.join()
    kinds: dict[str, int] = {}
    for action in report.applied:
        kinds[action.action] = kinds.get(action.action, 0) + 1
    memory.close()
    graph.close()
    shutil.rmtree(work, ignore_errors=True)
    return {
        "benchmark": "dream",
        "size": size,
        "date": time.strftime("%Y-%m-%d"),
        "machine": {"python": platform.python_version(), "platform": platform.platform()},
        "home": built,
        "deterministic_pass_alone_s": round(alone_s, 2),
        "deterministic_pass_beside_load_s": round(dream_s, 2),
        "applied": kinds,
        "rejected": len(report.rejected),
        "baseline": baseline,
        "beside_the_dream": beside,
        "ratios": {
            "search_p50_during_over_before": round(beside["search_20"]["p50_ms"] / baseline["search_20"]["p50_ms"], 2),
            "save_p50_during_over_before": round(
                beside["durable_save"]["p50_ms"] / baseline["durable_save"]["p50_ms"], 2
            ),
        },
        "peak_rss_mb": peak_rss_mb(),
    }


def large_text(seed: int, size_bytes: int = 95_000) -> str:
    """Prose of ~`size_bytes` with names, numbers and dates in it, as a long pasted note would have."""
    rng = random.Random(seed)
    words = ["meeting", "report", "deploy", "budget", "review", "server", "customer", "invoice", "plan", "draft"]
    names = ["Alice", "Bob", "Zürich", "Postgres", "Kubernetes", "March", "Friday", "Acme", "Nginx", "Redis"]
    parts: list[str] = []
    size = 0
    while size < size_bytes:
        sentence = " ".join(rng.choice(words) for _ in range(4))
        sentence += f" with {rng.choice(names)}{rng.randrange(10_000)}"
        sentence += f" on 2026-{rng.randrange(1, 13)}-{rng.randrange(1, 29)}"
        sentence += f" at {rng.randrange(100_000)}."
        parts.append(sentence.capitalize() if rng.random() < 0.5 else sentence)
        size += len(sentence) + 1
    return " ".join(parts)


def run_large(count: int, root: Path) -> dict[str, Any]:
    """`count` near-duplicates of ~100 KB each (one text full of names, numbers and dates, each copy with a
    word more in its last sentence): the deterministic pass timed alone. Before the fact checks worked on word
    sets (a regular-expression search of the merged text per name or number), 5 such entries took 2.4 s."""
    work = root / f"dream-large-{count}"
    shutil.rmtree(work, ignore_errors=True)
    settings = Settings.load({"home": work}, env={})
    memory, graph = MemoryService(settings, embed_in_background=False), GraphService(settings)
    text = large_text(1)
    for i in range(count):
        memory.save(f"{text} This copy was reviewed {'again ' * i}carefully.", "notes/large")
    started = time.perf_counter()
    report = Dreamer(memory, graph, settings, Templates(settings.prompts_dir)).run_deterministic()
    took = time.perf_counter() - started
    memory.close()
    graph.close()
    shutil.rmtree(work, ignore_errors=True)
    return {
        "benchmark": "dream-large",
        "entries": count,
        "entry_bytes": len(text.encode()),
        "date": time.strftime("%Y-%m-%d"),
        "machine": {"python": platform.python_version(), "platform": platform.platform()},
        "deterministic_pass_s": round(took, 3),
        "applied": [a.action for a in report.applied],
        "rejected": [a.reason[:120] for a in report.rejected],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=parse_size, default=10_000)
    parser.add_argument("--large", type=int, default=0, help="instead: this many ~100 KB near-duplicates")
    parser.add_argument("--root", type=Path, default=Path(tempfile.gettempdir()))
    args = parser.parse_args()
    report = run_large(args.large, args.root) if args.large else run(args.size, args.root)
    RESULTS.mkdir(exist_ok=True)
    name = f"dream-large-{args.large}" if args.large else f"dream-{label(args.size)}"
    (RESULTS / f"{name}.json").write_text(json.dumps(report, indent=2) + "\n")
    json.dump(report, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
