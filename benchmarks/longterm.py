"""Long-term memory targets at scale: search, save, cold start and memory, in-process and over stdio.

    python -m benchmarks.longterm --size 100000          # builds a seeded home once, then measures

Writes benchmarks/results/longterm-{size}.json. Figures are medians (p50) and p95 over many calls; the
machine is small and noisy, so compare runs by ratio, not by the last digit.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

from benchmarks.corpus import Corpus, write_jsonl
from rockmem_mcp.config import Settings
from rockmem_mcp.services.memory import MemoryService

RESULTS = Path(__file__).parent / "results"


def percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "p50_ms": round(statistics.median(ordered) * 1e3, 3),
        "p95_ms": round(ordered[int(len(ordered) * 0.95) - 1] * 1e3, 3),
        "n": len(ordered),
    }


def build_home(size: int, root: Path | None = None) -> Path:
    home = (root or Path(tempfile.gettempdir())) / f"rockmem-bench-{size}"
    if (home / "index" / "memory-index.npz").exists():
        return home
    source = write_jsonl(home.with_suffix(".jsonl"), size)
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "rockmem_mcp", "--home", str(home), "import", str(source)], check=True)
    print(f"import of {size} lines: {time.perf_counter() - started:.1f}s", file=sys.stderr)
    return home


def in_process(home: Path, queries: list[str]) -> dict[str, Any]:
    started = time.perf_counter()
    memory = MemoryService(Settings.load({"home": home}))
    opened = time.perf_counter() - started
    search = []
    for query in queries:
        t = time.perf_counter()
        memory.search(query)
        search.append(time.perf_counter() - t)
    saves = []
    for i in range(200):
        t = time.perf_counter()
        memory.save(f"benchmark note {i}: deploy review happens on thursday", "notes/benchmark")
        saves.append(time.perf_counter() - t)
    for entry in memory.search(category="notes/benchmark", limit=200).results:  # leave the corpus as it was
        memory.delete(entry.entry.id, permanent=True)
    memory.close()
    return {"open_s": round(opened, 3), "search": percentiles(search), "durable_save": percentiles(saves)}


def server_rss_mb(home: Path) -> float | None:
    """Resident memory of the server process serving `home` (Linux /proc)."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            if b"rockmem_mcp" in cmdline and str(home).encode() in cmdline and int(pid) != os.getpid():
                for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        return round(int(line.split()[1]) / 1024, 1)
        except OSError:
            continue
    return None


async def over_stdio(home: Path, queries: list[str], starts: int = 5) -> dict[str, Any]:
    params = StdioServerParameters(command=sys.executable, args=["-m", "rockmem_mcp", "--home", str(home)])
    cold = []
    for _ in range(starts):
        t = time.perf_counter()
        async with Client(params) as client:
            result = await client.call_tool("search_memory", {"query": queries[0], "limit": 5})
            cold.append(time.perf_counter() - t)
            assert not result.is_error
    calls = []
    async with Client(params) as client:
        for query in queries:
            t = time.perf_counter()
            await client.call_tool("search_memory", {"query": query})
            calls.append(time.perf_counter() - t)
        rss = server_rss_mb(home)
    return {
        "cold_start_to_first_search_s": {"p50": round(statistics.median(cold), 3), "runs": [round(c, 3) for c in cold]},
        "search_tool_call_python_sdk_client": percentiles(calls),
        "server_rss_mb": rss,
    }


def raw_stdio(home: Path, queries: list[str]) -> dict[str, Any]:
    """Tool-call latency as the pipe sees it: plain JSON-RPC lines, no client-side validation.

    The Python SDK's Client re-validates every structured result with the pure-Python jsonschema
    package (~2.6 ms for 20 entries here); clients in other languages do not pay that, so both are reported.
    """
    args = [sys.executable, "-m", "rockmem_mcp", "--home", str(home)]
    proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None

    def call(message: dict[str, Any]) -> dict[str, Any] | None:
        proc.stdin.write((json.dumps(message) + "\n").encode())  # type: ignore[union-attr]
        proc.stdin.flush()  # type: ignore[union-attr]
        return json.loads(proc.stdout.readline()) if "id" in message else None  # type: ignore[union-attr]

    try:
        call(
            {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "bench", "version": "0"},
                },
            }
        )
        call({"jsonrpc": "2.0", "method": "notifications/initialized"})
        samples = []
        for i, query in enumerate(queries, start=1):
            t = time.perf_counter()
            reply = call(
                {
                    "jsonrpc": "2.0",
                    "id": i,
                    "method": "tools/call",
                    "params": {"name": "search_memory", "arguments": {"query": query}},
                }
            )
            samples.append(time.perf_counter() - t)
            assert reply is not None and not reply["result"].get("isError"), reply
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
    return {"search_tool_call_raw_jsonrpc": percentiles(samples)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=300)
    args = parser.parse_args()
    home = build_home(args.size)
    queries = Corpus(seed=99).queries(args.queries)
    report = {
        "benchmark": "longterm",
        "size": args.size,
        "date": time.strftime("%Y-%m-%d"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        "in_process": in_process(home, queries),
        "stdio": {**anyio.run(over_stdio, home, queries), **raw_stdio(home, queries)},
    }
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"longterm-{args.size}.json"
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
