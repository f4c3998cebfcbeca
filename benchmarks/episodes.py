"""The episodic store at scale: appends, a day's markdown, the index, save_memory's extra log line, routed recall.

    python -m benchmarks.episodes                 # 100k memories + 100k episodes → results/episodes-100k.json
    python -m benchmarks.episodes --size 10k      # quicker

A home of SIZE corpus memories (benchmarks/corpus.py) plus SIZE episodes over the last 365 days (corpus facts
with episode types, confidences and tags), and one day of 10,000 episodes. Measured in one process on the
library the server calls:

- `episode_append_durable`: Episodes.record (one O_APPEND write + fsync under the day's lock);
- `day_markdown_10k`: rockmem://episodes/{day} for the 10,000-episode day;
- `index_build_s`: the first episode search on a fresh process (every day file read and indexed);
- `episode_search`: a keyword search over the episodes, warm;
- `save` vs `save_and_log`: MemoryService.save alone against save + Episodes.log_save (what save_memory does
  now), alternated on the same home, so the ratio is read from one run;
- `routed_recall` vs `recall_without_episodes`: a recall of questions of every route (when, latest, how,
  about, general) by a Recall with the episodic store against one without, alternated.
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
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from benchmarks import speed
from benchmarks.core import timed
from benchmarks.corpus import Corpus, write_jsonl
from benchmarks.salience import machine
from rockmem_mcp.episodes.service import Episodes
from rockmem_mcp.memory.service import MemoryService
from rockmem_mcp.models import CONFIDENCES, EPISODE_TYPES, Episode, new_entry_id
from rockmem_mcp.recall.service import Recall
from rockmem_mcp.working.service import WorkingMemory

RESULTS = Path(__file__).parent / "results"
BIG_DAY = 10_000
DAYS = 365


def write_episodes(settings: Any, contents: list[str], count: int, now: datetime, big_day: int = BIG_DAY) -> None:
    """`count` episodes spread over the last DAYS days, written as day logs directly (as appends would)."""
    rng = random.Random(11)
    by_day: dict[str, list[bytes]] = {}
    for i in range(count):
        at = now - timedelta(seconds=rng.randint(86_400, DAYS * 86_400))
        episode = Episode(
            id=new_entry_id(),
            at=at,
            type=rng.choice(EPISODE_TYPES),  # type: ignore[arg-type]
            confidence=rng.choice(CONFIDENCES),  # type: ignore[arg-type]
            tags=[rng.choice(["deploy", "billing", "review", "meeting"])],
            content=contents[i % len(contents)],
        )
        by_day.setdefault(at.date().isoformat(), []).append((episode.model_dump_json() + "\n").encode())
    settings.episodes_dir.mkdir(parents=True, exist_ok=True)
    for day, lines in by_day.items():
        with open(settings.episodes_dir / f"{day}.jsonl", "ab") as f:
            f.write(b"".join(lines))
    big = now - timedelta(days=DAYS + 10)
    lines = []
    for i in range(big_day):
        episode = Episode(id=new_entry_id(), at=big + timedelta(seconds=i), content=contents[i % len(contents)])
        lines.append((episode.model_dump_json() + "\n").encode())
    (settings.episodes_dir / f"{big.date().isoformat()}.jsonl").write_bytes(b"".join(lines))


def questions(corpus: Corpus, count: int) -> list[str]:
    """Corpus questions dressed as every route's phrasing, in turn."""
    forms = [
        "When did we {q}?",
        "What happened last week with {q}?",
        "How do I {q}?",
        "What do you know about {q}?",
        "{q}",
        "What's the latest on {q}?",
    ]
    return [forms[i % len(forms)].format(q=q.rstrip("?")) for i, q in enumerate(corpus.queries(count))]


def run(size: int, root: Path, queries: int, big_day: int = BIG_DAY, saves: int = 400) -> dict[str, Any]:
    work = root / f"episodes-{speed.label(size)}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    corpus = write_jsonl(work / "corpus.jsonl", size)
    print(f"[{speed.label(size)}] building the home ...", file=sys.stderr, flush=True)
    built = speed.rockmem_build(corpus, work, [])
    settings = speed.home_settings(work / "rockmem-home")
    now = datetime.now(UTC)
    write_episodes(settings, speed.read_contents(corpus), size, now, big_day)
    memory = MemoryService(settings)
    episodes = Episodes(settings, reinforcer=memory.reinforcer)
    asked = questions(Corpus(seed=speed.QUERY_SEED), queries)
    print(f"[{speed.label(size)}] measuring ...", file=sys.stderr, flush=True)

    result: dict[str, Any] = {"episodes": size + big_day}
    started = time.perf_counter()
    episodes.search("deploy")
    result["index_build_s"] = round(time.perf_counter() - started, 2)
    result["episode_search"] = timed(lambda i: episodes.search(asked[i % len(asked)], limit=5), 300)
    big_day = (now - timedelta(days=DAYS + 10)).date()
    result["day_markdown_10k"] = timed(lambda i: episodes.markdown(big_day), 20)
    result["episode_append_durable"] = timed(lambda i: episodes.record(f"benchmark episode {i}", type="task"), 500)

    save, save_and_log = [], []
    for i in range(saves):
        for side in ("plain", "logged") if i % 2 == 0 else ("logged", "plain"):
            t = time.perf_counter()
            entry = memory.save(f"benchmark fact {side} {i} about {asked[i % len(asked)]}", "notes/bench")
            if side == "logged":
                episodes.log_save(entry)
            (save_and_log if side == "logged" else save).append(time.perf_counter() - t)
    result["save"] = speed.percentiles(save)
    result["save_and_log"] = speed.percentiles(save_and_log)
    result["save_and_log_over_save"] = round(result["save_and_log"]["p50_ms"] / result["save"]["p50_ms"], 2)

    working = WorkingMemory(settings, "session/bench")
    routed, bare = Recall(memory, episodes=episodes), Recall(memory)
    with_episodes, without = [], []
    routes: dict[str, int] = {}
    for i, question in enumerate(asked):
        for side in ("routed", "bare") if i % 2 == 0 else ("bare", "routed"):
            recall = routed if side == "routed" else bare
            t = time.perf_counter()
            block = recall.build(question, f"{side}-{i}", working)
            (with_episodes if side == "routed" else without).append(time.perf_counter() - t)
            if side == "routed":
                kind = block.route.split(" ")[0]
                routes[kind] = routes.get(kind, 0) + 1
    result["routed_recall"] = speed.percentiles(with_episodes)
    result["recall_without_episodes"] = speed.percentiles(without)
    result["routed_over_without"] = round(
        result["routed_recall"]["p50_ms"] / result["recall_without_episodes"]["p50_ms"], 2
    )
    result["routes_taken"] = routes
    result["peak_rss_mb"] = speed.peak_rss_mb()
    memory.close()
    shutil.rmtree(work, ignore_errors=True)
    return {
        "benchmark": "episodes",
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
    root = args.work or Path(tempfile.mkdtemp(prefix="rockmem-episodes-"))
    report = run(args.size, root, args.queries)
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"episodes-{speed.label(args.size)}.json"
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    os.environ.setdefault("ROCKMEM_LOG_LEVEL", "WARNING")
    main()
