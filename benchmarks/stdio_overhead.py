"""What a stdio tool call costs beyond the tool (issue 25, part 3): the transport and the SDK's per-call work.

    python -m benchmarks.stdio_overhead --checkout /tmp/old --checkout .     # alternating, 4 rounds

Each checkout's server (`CHECKOUT/.venv/bin/python -m rockmem_mcp`, run from CHECKOUT) starts on a fresh empty
home with embeddings off and answers `list_memory_categories` (a tool that does almost nothing) as raw
JSON-RPC lines: 200 untimed, then `--calls` timed, one after another. The median per round and the median of
the rounds per checkout are reported, so the difference between checkouts is the per-call overhead they
differ by. Writes benchmarks/results/stdio-overhead.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import speed

RESULTS = Path(__file__).parent / "results"
WARM_UP = 200


def one_round(checkout: Path, calls: int, python: str | None = None) -> float:
    """Median milliseconds of `calls` raw `list_memory_categories` calls on a fresh home (`python`: the
    interpreter to run the server with, by default the checkout's .venv)."""
    env = {**os.environ, "ROCKMEM_EMBEDDING_MODEL": "off"}
    python = python or str(checkout / ".venv" / "bin" / "python")
    with (
        tempfile.TemporaryDirectory() as work,
        speed.jsonrpc_server(Path(work) / "home", env, python=python, cwd=checkout) as (_, call),
    ):
        samples = []
        for i in range(WARM_UP + calls):
            params = {"name": "list_memory_categories", "arguments": {}}
            started = time.perf_counter()
            reply = call({"jsonrpc": "2.0", "id": i + 1, "method": "tools/call", "params": params})
            if i >= WARM_UP:
                samples.append(time.perf_counter() - started)
            assert reply is not None and "result" in reply, reply
    return statistics.median(samples) * 1000


def measure(checkouts: list[Path], rounds: int, calls: int, python: str | None = None) -> dict[str, Any]:
    per_round: dict[str, list[float]] = {str(c): [] for c in checkouts}
    for r in range(rounds):
        for checkout in checkouts if r % 2 == 0 else checkouts[::-1]:  # alternate who goes first
            per_round[str(checkout)].append(round(one_round(checkout, calls, python), 4))
    return {
        "benchmark": "stdio_overhead",
        "date": time.strftime("%Y-%m-%d"),
        "calls_per_round": calls,
        "p50_ms_per_round": per_round,
        "p50_ms": {name: round(statistics.median(values), 4) for name, values in per_round.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkout", type=Path, action="append", help="a checkout with its .venv (repeatable)")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--out", type=Path, default=RESULTS / "stdio-overhead.json")
    args = parser.parse_args()
    checkouts = [c.resolve() for c in args.checkout or [Path(__file__).resolve().parents[1]]]
    report = measure(checkouts, args.rounds, args.calls)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
