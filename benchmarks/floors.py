"""Floors under two of issue 25's targets, measured on this machine: what no change to rockmem can go below.

    python -m benchmarks.floors                  # 7 interpreter starts per import, 5 rounds of 20,000 files

- **Importing the MCP SDK** (part 2, first search <= 0.5 s): the median wall time of a fresh interpreter that
  only starts (`-c pass`), that imports the SDK's server package (`mcp.server.mcpserver`, which the server
  needs before it can answer `initialize`), and that imports our whole server (`rockmem_mcp.server.app`).
- **Creating files** (part 4, 1M memories imported in <= 60 s as durable files): microseconds per file to
  create a temp file exclusively, write a typical entry's bytes (450), close it and rename it into place (what
  `atomic_write_many` does per file), in a fresh folder each round, with 1 and with 2 threads (the renames and
  writes release the GIL), alternating; plus the one `os.sync()` that ends a batch. Projected to 1M files.

Writes benchmarks/results/floors.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).parent / "results"
IMPORTS = {
    "interpreter": "pass",
    "mcp_sdk_server": "import mcp.server.mcpserver",
    "rockmem_server": "import rockmem_mcp.server.app",
}
ENTRY_BYTES = b"x" * 450  # a typical entry file of the benchmark corpus is 420-480 bytes


def import_seconds(statement: str, runs: int) -> float:
    """Median wall seconds of `python -c statement` in a fresh interpreter (bytecode already cached)."""
    samples = []
    for _ in range(runs + 1):  # the first run only warms the bytecode cache
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", statement], check=True)
        samples.append(time.perf_counter() - started)
    return statistics.median(samples[1:])


def _create(folder: str, first: int, last: int) -> None:
    for i in range(first, last):
        path = f"{folder}/{i:012x}.json"
        temp = f"{folder}/.{i:012x}.json.tmp"
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            os.write(fd, ENTRY_BYTES)
        finally:
            os.close(fd)
        os.replace(temp, path)


def file_round(root: Path, files: int, threads: int) -> dict[str, float]:
    """One round in a fresh folder: microseconds per file (create, write, close, rename) and the sync after."""
    folder = tempfile.mkdtemp(dir=root)
    started = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        bounds = [(k * files // threads, (k + 1) * files // threads) for k in range(threads)]
        list(pool.map(lambda b: _create(folder, *b), bounds))
    created = time.perf_counter()
    os.sync()
    return {"us_per_file": (created - started) / files * 1e6, "sync_s": time.perf_counter() - created}


def measure(root: Path, files: int, rounds: int, runs: int) -> dict[str, Any]:
    imports = {name: round(import_seconds(statement, runs), 3) for name, statement in IMPORTS.items()}
    per_round: dict[int, list[dict[str, float]]] = {1: [], 2: []}
    for r in range(rounds):
        for threads in (1, 2) if r % 2 == 0 else (2, 1):  # alternate who goes first
            per_round[threads].append(file_round(root, files, threads))
    creation = {}
    for threads, results in per_round.items():
        us = statistics.median(x["us_per_file"] for x in results)
        creation[f"{threads}_thread{'s' if threads > 1 else ''}"] = {
            "us_per_file_p50": round(us, 1),
            "us_per_file_rounds": [round(x["us_per_file"], 1) for x in results],
            "sync_s_p50": round(statistics.median(x["sync_s"] for x in results), 3),
            "projected_1m_files_s": round(us, 1),  # µs a file x 1M files = seconds
        }
    return {
        "benchmark": "floors",
        "date": time.strftime("%Y-%m-%d"),
        "import_s_p50": imports,
        "import_runs": runs,
        "files_per_round": files,
        "rounds": rounds,
        "file_creation": creation,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--runs", type=int, default=7, help="interpreter starts per import statement")
    parser.add_argument("--root", type=Path, default=None, help="folder for the file rounds (default: a temp dir)")
    parser.add_argument("--out", type=Path, default=RESULTS / "floors.json")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.root) as work:
        report = measure(Path(work), args.files, args.rounds, args.runs)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
