"""The stdio server at 100k (issue 25, parts 2-3): cold start with and without a big graph, per-call search cost.

    python -m benchmarks.stdio_start --build /tmp/stdio-start-100k --size 100k   # make the homes once
    python -m benchmarks.stdio_start --work /tmp/stdio-start-100k --checkout /tmp/old --checkout .

`--build` makes two homes of the same corpus: `plain` (memories, the episodes save_memory would have logged,
the bundled model's vectors, git history begun) and `graph` (the same plus a 100,000-triple knowledge graph).
Measuring starts each checkout's server (`CHECKOUT/.venv/bin/python -m rockmem_mcp`, or this interpreter for a
checkout without a `.venv`, run from CHECKOUT so its own package is imported, compiled to bytecode first as an
installed package is), alternating checkouts within every round, each on its own copy of the homes when
several are compared (`homes_of` says why), and reports medians over the rounds:
  - cold start: spawn → initialize → first `search_memory` answered (raw JSON-RPC lines), per home (`--homes
    empty` adds a home with nothing in it: the start's fixed cost) and embedding setting (the default, the
    bundled model; and `off`), with the server's VmRSS just after that answer and once the graph has loaded (a
    `graph` find answered);
  - per-call: 300 corpus queries as raw `search_memory` calls (p50/p95), on the plain home with each setting;
  - the size of a typical search reply's text (characters, and tokens as the tool-budget test counts them).
Writes benchmarks/results/stdio-start-{size}.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from benchmarks import search_stdio, speed
from benchmarks.checkouts import checkout_python
from benchmarks.corpus import Corpus

RESULTS = Path(__file__).parent / "results"
SETTINGS = {"default": None, "off": "off"}  # ROCKMEM_EMBEDDING_MODEL: unset (the bundled model) or off
# What --build makes, by the name results use; `empty` is a home with nothing saved in it (made when first
# measured): the start's fixed cost (Python, the SDK, the server's own imports and tools), beside the homes'.
HOMES = {"plain": "rockmem-home", "graph": "graph-home", "empty": "empty-home"}


def build(work: Path, size: int) -> None:
    """The plain home (memories, episodes, bundled vectors, git history), then a copy of it given a graph."""
    from rockmem_mcp.audit.service import Audit
    from rockmem_mcp.governance.history import GitHistory
    from rockmem_mcp.graph.service import GraphService
    from rockmem_mcp.memory.service import MemoryService

    search_stdio.build(work, size)
    plain = work / "rockmem-home"
    settings = speed.home_settings(plain, embedding_model="bundled")
    memory = MemoryService(settings, embed_in_background=False)
    memory.vector_worker.drain()
    memory.close()  # the snapshot carries the vectors
    history = GitHistory(settings, Audit(settings))
    history.flush()  # the first commit of 100k files is made here, not during a measured start
    graph_home = work / "graph-home"
    shutil.copytree(plain, graph_home, symlinks=True)
    settings = speed.home_settings(graph_home, embedding_model="bundled")
    graph = GraphService(settings)
    triples = speed.graph_triples(speed.GRAPH_TRIPLES)
    for i in range(0, len(triples), 1000):
        graph.add_triples(triples[i : i + 1000])
    graph.close()
    GitHistory(settings, Audit(settings)).flush()


@contextmanager
def server(checkout: Path, home: Path, model: str | None) -> Iterator[tuple[subprocess.Popen[bytes], Callable]]:
    """`checkout`'s server on `home`, initialized; yields it and `call` (speed.jsonrpc_server's, from CHECKOUT)."""
    env = {k: v for k, v in os.environ.items() if k != "ROCKMEM_EMBEDDING_MODEL"}
    if model is not None:
        env["ROCKMEM_EMBEDDING_MODEL"] = model
    # A server closing a 100k home writes its snapshot: on a busy machine that took over a minute.
    python = checkout_python(checkout)
    with speed.jsonrpc_server(home, env, python=python, cwd=checkout, close_timeout=900) as running:
        yield running


def tool(call: Callable, name: str, arguments: dict[str, Any], ident: int = 1) -> dict[str, Any]:
    params = {"name": name, "arguments": arguments}
    reply = call({"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": params})
    assert reply is not None and "result" in reply and not reply["result"].get("isError"), reply
    return reply["result"]


def cold_start(checkout: Path, home: Path, model: str | None, query: str) -> dict[str, Any]:
    started = time.perf_counter()
    with server(checkout, home, model) as (proc, call):
        first = tool(call, "search_memory", {"query": query, "limit": 5})
        answered = time.perf_counter() - started
        rss_first = speed.server_rss_mb(proc.pid)
        tool(call, "graph", {"action": "find", "query": "Quinn"}, ident=2)  # waits for the whole graph
        graph_ready = time.perf_counter() - started
        rss_graph = speed.server_rss_mb(proc.pid)
    return {
        "first_search_s": answered,
        "graph_ready_s": graph_ready,
        "rss_after_first_mb": rss_first,
        "rss_graph_loaded_mb": rss_graph,
        "first_mode": (first.get("structuredContent") or {}).get("mode"),
    }


def per_call(checkout: Path, home: Path, model: str | None, queries: list[str]) -> dict[str, Any]:
    with server(checkout, home, model) as (proc, call):
        tool(call, "search_memory", {"query": "warm", "stores": ["episodes"]})  # waits for the episode index
        tool(call, "graph", {"action": "find", "query": "Quinn"}, ident=2)  # and for the graph
        time.sleep(3)  # the start's background work (vault sync, integrity check, git start-up) settles
        samples = []
        for i, query in enumerate(queries, start=10):
            t = time.perf_counter()
            result = tool(call, "search_memory", {"query": query}, ident=i)
            samples.append(time.perf_counter() - t)
        rss = speed.server_rss_mb(proc.pid)
    text = result["content"][0]["text"] if result.get("content") else ""
    return {**speed.percentiles(samples), "rss_mb": rss, "last_reply_text_chars": len(text)}


def median_of(runs: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in runs[0]:
        values = [r[key] for r in runs if isinstance(r[key], int | float)]
        out[key] = round(statistics.median(values), 3) if values else runs[0][key]
    out["runs"] = len(runs)
    return out


def homes_of(work: Path, checkouts: list[Path], names: list[str]) -> dict[Path, dict[str, Path]]:
    """The homes each checkout runs on (`own_copies`)."""
    built = {name: work / HOMES[name] for name in names}
    if "empty" in built and not built["empty"].exists():
        built["empty"].mkdir()
        settle(checkouts[0], built["empty"])  # a new home's first start makes its first commit: not measured
    return own_copies(work, checkouts, built)


def own_copies(work: Path, checkouts: list[Path], built: dict[str, Path]) -> dict[Path, dict[str, Path]]:
    """Each checkout's own copy of the homes when several are compared: a server leaves derived state for the
    next start (its index snapshot, with the folder stamps that spare a start the listing of unchanged folders),
    and another version's server would overwrite it. Each copy gets one session first (`settle`)."""
    if len(checkouts) == 1:
        return {checkouts[0]: built}
    homes: dict[Path, dict[str, Path]] = {}
    for number, checkout in enumerate(checkouts):
        homes[checkout] = {}
        for name, home in built.items():
            copy = work / f"checkout-{number}" / home.name
            if not copy.exists():
                shutil.copytree(home, copy, symlinks=True)
            homes[checkout][name] = copy
            settle(checkout, copy)
    return homes


def settle(checkout: Path, home: Path) -> None:
    """One session that lets the start's work finish, as a user's first session would: a copy's new inodes make
    the index re-list every folder and the episode index re-read every day file, and a short session would end
    before what they rebuilt is kept (its episodes load in the background, which a search of episodes awaits)."""
    with server(checkout, home, None) as (_, call):
        tool(call, "search_memory", {"query": "warm", "stores": ["episodes"]})
        tool(call, "graph", {"action": "find", "query": "Quinn"}, ident=2)


def compile_package(checkout: Path) -> None:
    """`checkout`'s package compiled to bytecode, as a user's install has it (pip compiles what it installs; an
    editable install writes it on first import): without it, with PYTHONDONTWRITEBYTECODE set (as on CI), every
    measured start would compile the package's sources again, which no user's start does."""
    compiling = [checkout_python(checkout), "-m", "compileall", "-q", "rockmem_mcp"]
    subprocess.run(compiling, cwd=checkout, check=True, stdout=subprocess.DEVNULL)


def measure(
    work: Path, checkouts: list[Path], rounds: int, queries: int, parts: set[str], home_names: list[str]
) -> dict[str, Any]:
    asked = Corpus(seed=speed.QUERY_SEED).queries(queries)
    for checkout in checkouts:
        compile_package(checkout)
    homes_by_checkout = homes_of(work, checkouts, home_names)
    cold: dict[str, list[dict[str, Any]]] = {}
    calls: dict[str, list[dict[str, Any]]] = {}
    for r in range(rounds):
        for checkout in checkouts if r % 2 == 0 else checkouts[::-1]:  # alternate who goes first
            homes = homes_by_checkout[checkout]
            for setting, model in SETTINGS.items():
                if "cold" in parts:
                    for home_name, home in homes.items():
                        key = f"{checkout}|{home_name}|{setting}"
                        cold.setdefault(key, []).append(cold_start(checkout, home, model, asked[r]))
                        print(key, cold[key][-1], file=sys.stderr, flush=True)
                if "calls" in parts:
                    key = f"{checkout}|plain|{setting}"
                    calls.setdefault(key, []).append(per_call(checkout, homes["plain"], model, asked))
                    print(key, calls[key][-1], file=sys.stderr, flush=True)
    return {
        "benchmark": "stdio_start",
        "date": time.strftime("%Y-%m-%d"),
        "rounds": rounds,
        "cold_start": {key: median_of(runs) for key, runs in cold.items()},
        "search_raw_jsonrpc": {key: median_of(runs) for key, runs in calls.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", type=Path, help="make the two homes in this folder")
    parser.add_argument("--size", type=speed.parse_size, default=100_000)
    parser.add_argument("--work", type=Path, help="measure the homes made by --build here")
    parser.add_argument(
        "--checkout", type=Path, action="append", help="a checkout, run on its .venv's Python if any (repeatable)"
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--parts", default="cold,calls", help="cold, calls or both")
    parser.add_argument(
        "--homes", default="plain,graph", help="any of plain, graph and empty, comma-separated (calls: plain alone)"
    )
    parser.add_argument("--out", type=Path, default=None, help="result file (default results/stdio-start-SIZE.json)")
    args = parser.parse_args()
    if args.build:
        build(args.build, args.size)
    if args.work:
        checkouts = [c.resolve() for c in args.checkout or [Path(__file__).resolve().parents[1]]]
        parts, homes = set(args.parts.split(",")), args.homes.split(",")
        report = measure(args.work, checkouts, args.rounds, args.queries, parts, homes)
        out = args.out or RESULTS / f"stdio-start-{speed.label(args.size)}.json"
        out.write_text(json.dumps(report, indent=2) + "\n")
        print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
