"""Searches during a vector backfill, and a backfill across short-lived servers (issue 46, item 2).

    python -m benchmarks.backfill --build /tmp/backfill --size 10k            # a home imported without vectors
    python -m benchmarks.backfill --work /tmp/backfill --checkout /tmp/old --checkout .

Each round, for each checkout (alternating which goes first), on the home with its vectors removed (cache and
index snapshot) and with the default embedding setting (the bundled model):
  - during: `search_memory` calls back to back over raw JSON-RPC while the reply still counts memories without
    vectors (at most `--queries`), then, once a poll every second says the backfill is done, the same number of
    calls on the idle server; p50/p95 of both and their ratio;
  - restarts: servers that each answer a search, idle `--life` seconds, answer another and are killed (SIGKILL,
    as a client that goes away), `--restarts` times in a row; the memories still without vectors at the end of
    each life. A backfill that keeps what it embedded converges; one that keeps nothing starts over each time.
Writes benchmarks/results/backfill-{size}.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks import search_stdio, speed
from benchmarks.corpus import Corpus

RESULTS = Path(__file__).parent / "results"


def default_env() -> dict[str, str]:
    """The environment a user's client gives the server: no embedding setting, so the bundled model."""
    return {k: v for k, v in os.environ.items() if not k.startswith("ROCKMEM_")}


def search(call: Callable, query: str, ident: int) -> tuple[float, int]:
    """One search's seconds and how many memories its reply says are without vectors."""
    params = {"name": "search_memory", "arguments": {"query": query}}
    started = time.perf_counter()
    reply = call({"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": params})
    took = time.perf_counter() - started
    assert reply is not None and not reply["result"].get("isError"), reply
    return took, int((reply["result"].get("structuredContent") or {}).get("unembedded", 0))


def during_and_idle(checkout: Path, home: Path, queries: list[str], limit_s: float) -> dict[str, Any]:
    during: list[float] = []
    idle: list[float] = []
    with speed.jsonrpc_server(home, default_env(), cwd=checkout, close_timeout=300) as (_, call):
        ident = 1
        search(call, "warm", ident)  # the start's own loads (index, model) are not the backfill's cost
        for query in queries:
            ident += 1
            took, left = search(call, query, ident)
            if not left:
                break
            during.append(took)
        waited = time.perf_counter()
        while time.perf_counter() - waited < limit_s:
            ident += 1
            if not search(call, "poll", ident)[1]:
                break
            time.sleep(1.0)  # a client that asks now and then: the backfill runs in between
        else:
            raise RuntimeError(f"the backfill did not finish in {limit_s} s")
        backfill_s = time.perf_counter() - waited
        for query in queries:
            ident += 1
            idle.append(search(call, query, ident)[0])
    report = {"during": speed.percentiles(during), "idle": speed.percentiles(idle), "backfill_rest_s": backfill_s}
    if during:
        report["p50_ratio"] = round(report["during"]["p50_ms"] / report["idle"]["p50_ms"], 3)
    return report


def restarts(checkout: Path, home: Path, times: int, life_s: float) -> list[int]:
    """Memories still without vectors at the end of each life of a server killed after `life_s`."""
    left: list[int] = []
    for i in range(times):
        with speed.jsonrpc_server(home, default_env(), cwd=checkout) as (proc, call):
            search(call, "start", 1)
            time.sleep(life_s)  # the client stays this long, idle...
            left.append(search(call, "leaving", 2)[1])
            proc.kill()  # ...then goes away without closing
            proc.wait()
        print(f"  life {i}: {left[-1]} without vectors at its end", file=sys.stderr, flush=True)
    return left


def build(work: Path, size: int) -> None:
    """A home as `import --no-embeddings` leaves it after a first session without embeddings: its history begun
    and its episode index kept (a start's own costs, not the backfill's)."""
    from rockmem_mcp.audit.service import Audit
    from rockmem_mcp.governance.history import GitHistory

    search_stdio.build(work, size)
    settings = speed.home_settings(work / "rockmem-home")
    GitHistory(settings, Audit(settings)).flush()
    with speed.jsonrpc_server(work / "rockmem-home", os.environ | {"ROCKMEM_EMBEDDING_MODEL": "off"}) as (_, call):
        search(call, "a first session: the episode index is kept", 1)


def without_vectors(home: Path) -> Path:
    """The home as right after `import --no-embeddings`: no vector cache, no index snapshot holding vectors. The
    rest stays (the git history and the episode index a first session made), so a start's own catching up is not
    counted as the backfill's."""
    shutil.rmtree(home / ".embeddings", ignore_errors=True)
    (home / "index" / "memory-index.npz").unlink(missing_ok=True)
    return home


def measure(work: Path, checkouts: list[Path], rounds: int, queries: int, times: int, life_s: float) -> dict:
    asked = Corpus(seed=speed.QUERY_SEED).queries(queries)
    home = work / "rockmem-home"
    runs: dict[str, list[dict[str, Any]]] = {}
    for r in range(rounds):
        for checkout in checkouts if r % 2 == 0 else checkouts[::-1]:
            result = during_and_idle(checkout, without_vectors(home), asked, limit_s=900)
            result["restarts_left"] = restarts(checkout, without_vectors(home), times, life_s)
            runs.setdefault(str(checkout), []).append(result)
            print(checkout, json.dumps(result), file=sys.stderr, flush=True)
    summary = {}
    for checkout, results in runs.items():
        ratios = [r["p50_ratio"] for r in results if "p50_ratio" in r]
        summary[checkout] = {
            "during_p50_ms": statistics.median(r["during"]["p50_ms"] for r in results if r["during"]["n"]),
            "idle_p50_ms": statistics.median(r["idle"]["p50_ms"] for r in results),
            "p50_ratio_median": statistics.median(ratios) if ratios else None,
            "restarts_left": [r["restarts_left"] for r in results],
        }
    return {"benchmark": "backfill", "date": time.strftime("%Y-%m-%d"), "rounds": rounds, "summary": summary,
            "runs": runs}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", type=Path, help="make a home without vectors in this folder")
    parser.add_argument("--size", type=speed.parse_size, default=10_000)
    parser.add_argument("--work", type=Path, help="measure the home made by --build here")
    parser.add_argument("--checkout", type=Path, action="append", help="a checkout to run (repeatable)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--queries", type=int, default=150)
    parser.add_argument("--restarts", type=int, default=4)
    parser.add_argument("--life", type=float, default=3.0, help="seconds each restarted server lives")
    parser.add_argument("--out", type=Path, default=None, help="result file (default results/backfill-SIZE.json)")
    args = parser.parse_args()
    if args.build:
        build(args.build, args.size)
    if args.work:
        checkouts = [c.resolve() for c in args.checkout or [Path(__file__).resolve().parents[1]]]
        report = measure(args.work, checkouts, args.rounds, args.queries, args.restarts, args.life)
        out = args.out or RESULTS / f"backfill-{speed.label(args.size)}.json"
        out.write_text(json.dumps(report, indent=2) + "\n")
        print(json.dumps(report["summary"], indent=2))


if __name__ == "__main__":
    main()
