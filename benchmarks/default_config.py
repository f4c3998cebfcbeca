"""What a user runs (issue 46, item 3): the default configuration over the SDK client and over raw JSON-RPC.

    python -m benchmarks.default_config --build /tmp/default-10k --size 10k      # `rockmem-mcp import` fills it
    python -m benchmarks.default_config --work /tmp/default-10k --checkout /tmp/old --checkout .

The home is filled the way users fill it: `rockmem-mcp import FILE` (which embeds what it imported with the
bundled model), then one server start and close so its indexes are kept, as after a user's first session. Every
server runs with no ROCKMEM_ setting: the bundled model on, `search_memory` over every store (memories,
episodes, procedures, workspace files). Each round, for each checkout (alternating which goes first):
  - cold start: spawn → initialize → first `search_memory` answered, over the SDK's `Client` (what a Python
    agent runs) and over raw JSON-RPC lines (what the pipe costs without the SDK client's validation);
  - per call: `--queries` corpus queries as `search_memory`, and `get_memory` of one id (the SDK's per-call
    floor: a round trip that does almost no work), p50/p95, over both;
  - the index's own cost, in this process: `MemoryService.search` (what the tool calls) and the bare index.
Medians over the rounds; each checkout runs on its own settled copy of the home when several are compared
(stdio_start.own_copies says why). Writes benchmarks/results/default-config-{size}.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio

from benchmarks import speed
from benchmarks.corpus import Corpus, write_jsonl
from benchmarks.stdio_start import own_copies

RESULTS = Path(__file__).parent / "results"


def user_env(checkout: Path) -> dict[str, str]:
    """The environment a client gives the server: no ROCKMEM_ setting; the checkout's package first."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ROCKMEM_")}
    env["PYTHONPATH"] = str(checkout)
    return env


def build(work: Path, size: int) -> None:
    work.mkdir(parents=True, exist_ok=True)
    corpus = write_jsonl(work / "corpus.jsonl", size)
    home = work / "rockmem-home"
    started = time.perf_counter()
    command = [sys.executable, "-m", "rockmem_mcp", "import", str(corpus), "--home", str(home), "--json"]
    done = subprocess.run(command, env=user_env(Path.cwd()), capture_output=True, text=True, check=True)
    print(f"imported in {time.perf_counter() - started:.1f} s: {done.stdout.strip()[:300]}", file=sys.stderr)
    first_session(home)


def first_session(home: Path) -> None:
    """One start and close: what a user's first session leaves (the episode index kept, the history begun)."""
    with speed.jsonrpc_server(home, user_env(Path.cwd()), close_timeout=900) as (_, call):
        tool(call, "search_memory", {"query": "first session"}, 1)


def tool(call: Any, name: str, arguments: dict[str, Any], ident: int) -> dict[str, Any]:
    params = {"name": name, "arguments": arguments}
    reply = call({"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": params})
    assert reply is not None and "result" in reply and not reply["result"].get("isError"), reply
    return reply["result"]


def raw_run(checkout: Path, home: Path, queries: list[str]) -> dict[str, Any]:
    started = time.perf_counter()
    with speed.jsonrpc_server(home, user_env(checkout), cwd=checkout, close_timeout=900) as (_, call):
        first = tool(call, "search_memory", {"query": queries[0]}, 1)
        cold = time.perf_counter() - started
        some_id = first["structuredContent"]["results"][0]["entry"]["id"]
        searches, gets = [], []
        for i, query in enumerate(queries, start=10):
            t = time.perf_counter()
            tool(call, "search_memory", {"query": query}, i)
            searches.append(time.perf_counter() - t)
            t = time.perf_counter()
            tool(call, "get_memory", {"id": some_id}, i + len(queries) + 10)
            gets.append(time.perf_counter() - t)
    return {"cold_start_s": cold, "search": speed.percentiles(searches), "get": speed.percentiles(gets),
            "first_mode": first["structuredContent"].get("mode")}  # fmt: skip


def sdk_run(checkout: Path, home: Path, queries: list[str]) -> dict[str, Any]:
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    async def run() -> dict[str, Any]:
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "rockmem_mcp", "--home", str(home)], env=user_env(checkout),
            cwd=str(checkout),
        )  # fmt: skip
        started = time.perf_counter()
        with open(os.devnull, "w") as quiet:
            async with Client(stdio_client(params, errlog=quiet)) as client:
                first = await client.call_tool("search_memory", {"query": queries[0]})
                cold = time.perf_counter() - started
                some_id = first.structured_content["results"][0]["entry"]["id"]
                searches, gets = [], []
                for query in queries:
                    t = time.perf_counter()
                    await client.call_tool("search_memory", {"query": query})
                    searches.append(time.perf_counter() - t)
                    t = time.perf_counter()
                    await client.call_tool("get_memory", {"id": some_id})
                    gets.append(time.perf_counter() - t)
        return {"cold_start_s": cold, "search": speed.percentiles(searches), "get": speed.percentiles(gets)}

    return anyio.run(run)


def index_cost(home: Path, queries: list[str]) -> dict[str, Any]:
    """In this process, the default settings: the search the tool makes, and the bare index."""
    from rockmem_mcp.config import Settings
    from rockmem_mcp.memory.service import MemoryService
    from rockmem_mcp.search.memory_index import SearchFilter

    memory = MemoryService(Settings(home=home))
    try:
        memory.vector_worker.idle.wait(600)
        return {
            "memory_search": speed.timed(lambda q: memory.search(q, limit=20, reinforce=True), queries),
            "bare_index_bm25": speed.timed(lambda q: memory.index.search(q, SearchFilter(), 20), queries),
        }
    finally:
        memory.close()


def median_of(runs: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in runs[0].items():
        if isinstance(value, dict):
            out[key] = median_of([r[key] for r in runs])
        elif isinstance(value, int | float):
            out[key] = round(statistics.median(r[key] for r in runs), 3)
        else:
            out[key] = value
    return out


def measure(work: Path, checkouts: list[Path], rounds: int, queries: int) -> dict[str, Any]:
    asked = Corpus(seed=speed.QUERY_SEED).queries(queries)
    home = work / "rockmem-home"
    homes = {checkout: copies["home"] for checkout, copies in own_copies(work, checkouts, {"home": home}).items()}
    raw: dict[str, list[dict[str, Any]]] = {}
    sdk: dict[str, list[dict[str, Any]]] = {}
    for r in range(rounds):
        for checkout in checkouts if r % 2 == 0 else checkouts[::-1]:
            home = homes[checkout]
            raw.setdefault(str(checkout), []).append(raw_run(checkout, home, asked))
            sdk.setdefault(str(checkout), []).append(sdk_run(checkout, home, asked))
            print(checkout, json.dumps({"raw": raw[str(checkout)][-1], "sdk": sdk[str(checkout)][-1]}),
                  file=sys.stderr, flush=True)  # fmt: skip
    return {
        "benchmark": "default_config",
        "date": time.strftime("%Y-%m-%d"),
        "memories": sum(1 for _ in (work / "corpus.jsonl").open()),
        "rounds": rounds,
        "raw_jsonrpc": {c: median_of(runs) for c, runs in raw.items()},
        "sdk_client": {c: median_of(runs) for c, runs in sdk.items()},
        "index_in_process": index_cost(work / "rockmem-home", asked),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", type=Path, help="make a home by `rockmem-mcp import` in this folder")
    parser.add_argument("--size", type=speed.parse_size, default=10_000)
    parser.add_argument("--work", type=Path, help="measure the home made by --build here")
    parser.add_argument("--checkout", type=Path, action="append", help="a checkout to run (repeatable)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--out", type=Path, default=None, help="result file (default results/default-config-SIZE.json)")
    args = parser.parse_args()
    if args.build:
        build(args.build, args.size)
    if args.work:
        checkouts = [c.resolve() for c in args.checkout or [Path(__file__).resolve().parents[1]]]
        report = measure(args.work, checkouts, args.rounds, args.queries)
        out = args.out or RESULTS / f"default-config-{speed.label(args.size)}.json"
        out.write_text(json.dumps(report, indent=2) + "\n")
        print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
