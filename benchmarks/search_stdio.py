"""search_memory over raw JSON-RPC on a home of N memories, each with the episode save_memory would have logged.

    python -m benchmarks.search_stdio --build /tmp/stdio-100k --size 100k   # make the home once
    python -m benchmarks.search_stdio --home /tmp/stdio-100k/rockmem-home   # measure (run it from each checkout
                                                                             # being compared, alternating)

The server is started with this interpreter (`python -m rockmem_mcp`); one call asking for episodes waits for
the episode index first (a checkout without episodes refuses the argument; that call is not counted), then 300
corpus queries are timed. Prints one JSON line: the wait, p50/p95 and the server's RSS.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from benchmarks import speed
from benchmarks.corpus import Corpus, write_jsonl


def build(work: Path, size: int) -> None:
    from rockmem_mcp.memory.service import MemoryService
    from rockmem_mcp.models import Episode

    work.mkdir(parents=True, exist_ok=True)
    speed.rockmem_build(write_jsonl(work / "corpus.jsonl", size), work, [])
    settings = speed.home_settings(work / "rockmem-home")
    memory = MemoryService(settings)
    by_day: dict[str, list[str]] = {}
    for entry in memory.iter_entries():
        episode = Episode(
            id=entry.id[::-1], at=entry.created_at, content=entry.content, tags=entry.tags, memory_id=entry.id
        )
        by_day.setdefault(episode.at.date().isoformat(), []).append(episode.model_dump_json() + "\n")
    memory.close()
    settings.episodes_dir.mkdir(parents=True, exist_ok=True)
    for day, lines in by_day.items():
        (settings.episodes_dir / f"{day}.jsonl").write_text("".join(lines))


def measure(home: Path, queries: list[str]) -> dict[str, Any]:
    """speed.raw_stdio after one call that asks for episodes (it waits for the episode index)."""
    report = speed.raw_stdio(home, queries, warm_up={"query": "warm", "stores": ["episodes"]})
    return {
        "waited_for_episodes_s": report["warm_up_s"],
        **report["search_tool_call_raw_jsonrpc"],
        "server_rss_mb": report["server_rss_mb_after_queries"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", type=Path, help="make a home in this folder")
    parser.add_argument("--size", type=speed.parse_size, default=100_000)
    parser.add_argument("--home", type=Path, help="measure this home")
    args = parser.parse_args()
    if args.build:
        build(args.build, args.size)
    if args.home:
        print(json.dumps(measure(args.home, Corpus(seed=speed.QUERY_SEED).queries(300))))


if __name__ == "__main__":
    main()
