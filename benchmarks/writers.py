"""Durable saves while other processes write to the same home.

    python -m benchmarks.writers --size 10k     # → benchmarks/results/writers-10k.json

A home of seeded corpus facts (benchmarks/corpus.py). Then writer processes, each opening the home as a
server does (MemoryService in-process: its own index, sharing the others' writes through the change journal),
save `--saves` memories each, one at a time, every save durable (file fsync'd, folder fsync'd, journal record
appended) before the next:
- 1 writer alone: the baseline;
- 3 writers at once (released together at one moment). A save of a new memory does not catch up on the
  others' writes first (the next read does); the three share the CPU and the disk's flushes.
Timed at the service, not over MCP (a stdio tool call adds ~2 ms of protocol; see benchmarks/speed.py).
Reported: p50/p95 per scenario over all saves, the slowest writer's p50, and the 3-writer p50 over the
baseline p50. Afterwards every saved id is checked on disk and found by a fresh process (nothing lost).
No timing is asserted by tests: a tiny run is in the test suite.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.corpus import Corpus
from benchmarks.speed import label, parse_size, percentiles
from rockmem_mcp.config import Settings
from rockmem_mcp.errors import NotFoundError
from rockmem_mcp.memory.service import MemoryService

RESULTS = Path(__file__).parent / "results"
START_DELAY_S = 3.0  # time for every writer to open the home before the common start


def build_home(home: Path, size: int) -> None:
    memory = MemoryService(Settings.load({"home": home}, env={}), embed_in_background=False)
    records = list(Corpus(7).records(size))
    for start in range(0, len(records), 2000):
        memory.save_many([memory.prepare_entry(r) for r in records[start : start + 2000]])
    memory.close()


def writer(home: Path, name: str, saves: int, start_at: float) -> dict[str, Any]:
    """Open the home, wait for the common start, then save one memory at a time; latencies in seconds."""
    memory = MemoryService(Settings.load({"home": home}, env={}), embed_in_background=False)
    time.sleep(max(0.0, start_at - time.time()))  # a benchmark: the writers must start together
    latencies, ids = [], []
    for i in range(saves):
        started = time.perf_counter()
        entry = memory.save(f"{name} note {i}: the deploy review moved to Thursday 10:30 in room 4", f"bench/{name}")
        latencies.append(time.perf_counter() - started)
        ids.append(entry.id)
    memory.close()
    return {"latencies": latencies, "ids": ids}


def run_writers(home: Path, count: int, saves: int, scenario: str, delay_s: float) -> list[dict[str, Any]]:
    start_at = time.time() + delay_s
    processes = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "benchmarks.writers",
                "--worker",
                f"{scenario}-{n}",
                "--home",
                str(home),
                "--saves",
                str(saves),
                "--start-at",
                str(start_at),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        for n in range(count)
    ]
    answers = []
    for process in processes:
        out, _ = process.communicate()
        if process.returncode != 0:
            raise SystemExit(f"a writer failed with exit code {process.returncode}")
        answers.append(json.loads(out.strip().splitlines()[-1]))
    return answers


def summary(answers: list[dict[str, Any]]) -> dict[str, Any]:
    every = [latency for answer in answers for latency in answer["latencies"]]
    per_writer = [percentiles(answer["latencies"])["p50_ms"] for answer in answers]
    slowest = max(per_writer)
    return {"writers": len(answers), "saves": len(every), **percentiles(every), "slowest_writer_p50_ms": slowest}


def check_nothing_lost(home: Path, answers: list[dict[str, Any]]) -> int:
    """Every acknowledged save is found by a process that opens the home afterwards; returns how many."""
    memory = MemoryService(Settings.load({"home": home}, env={}), embed_in_background=False)
    ids = [entry_id for answer in answers for entry_id in answer["ids"]]
    missing = []
    for entry_id in ids:
        try:
            memory.get(entry_id)
        except NotFoundError:
            missing.append(entry_id)
    memory.close()
    if missing:
        raise SystemExit(f"{len(missing)} acknowledged saves are missing, e.g. {missing[:3]}")
    return len(ids)


def run(size: int, saves: int, root: Path, delay_s: float = START_DELAY_S) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(dir=root) as work:
        home = Path(work) / "home"
        started = time.perf_counter()
        build_home(home, size)
        built_s = time.perf_counter() - started
        alone = run_writers(home, 1, saves, "alone", delay_s)
        together = run_writers(home, 3, saves, "together", delay_s)
        checked = check_nothing_lost(home, alone + together)
    one, three = summary(alone), summary(together)
    return {
        "benchmark": "writers",
        "size": size,
        "date": time.strftime("%Y-%m-%d"),
        "machine": {"python": platform.python_version(), "platform": platform.platform()},
        "build_s": round(built_s, 1),
        "saves_per_writer": saves,
        "one_writer": one,
        "three_writers": three,
        "ratios": {"three_writers_p50_over_one": round(three["p50_ms"] / one["p50_ms"], 2)},
        "acknowledged_saves_found_afterwards": checked,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=parse_size, default=10_000, help="memories in the home: 10k, 100k")
    parser.add_argument("--saves", type=int, default=300, help="saves per writer")
    parser.add_argument("--root", type=Path, default=Path(tempfile.gettempdir()), help="where the home goes")
    parser.add_argument("--out", type=Path, help="result file (default benchmarks/results/writers-{size}.json)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--home", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--start-at", type=float, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(writer(args.home, args.worker, args.saves, args.start_at)))
        return
    report = run(args.size, args.saves, args.root)
    out = args.out or RESULTS / f"writers-{label(args.size)}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
