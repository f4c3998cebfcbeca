"""Issue 24: a stdio server on one home with embeddings off and with the bundled model, side by side.

    python -m benchmarks.studies.stdio_embedding_probe HOME      # a home already embedded by the bundled model

For each setting: time to the `initialize` reply (the start), the first search (it loads the model lazily),
search_memory p50 over 60 raw JSON-RPC calls, the server's VmRSS after them, and the mode the reply names.
Writes benchmarks/results/stdio-embedding-probe.json.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.speed import RESULTS, jsonrpc_server, server_rss_mb


def probe(home: Path, model: str, searches: int = 60) -> dict[str, Any]:
    started = time.perf_counter()
    env = os.environ | {"ROCKMEM_EMBEDDING_MODEL": model}
    with jsonrpc_server(home, env) as (proc, call):
        start_s = time.perf_counter() - started
        samples, reply = [], None
        for i in range(searches):
            params = {"name": "search_memory", "arguments": {"query": f"deploy project {i} notes"}}
            t = time.perf_counter()
            reply = call({"jsonrpc": "2.0", "id": i + 1, "method": "tools/call", "params": params})
            samples.append(time.perf_counter() - t)
        rss = server_rss_mb(proc.pid)
    found = (reply or {}).get("result", {}).get("structuredContent", {})
    return {
        "start_to_initialize_reply_s": round(start_s, 3),
        "first_search_ms": round(samples[0] * 1e3, 1),
        "search_p50_ms": round(statistics.median(samples[1:]) * 1e3, 2),
        "server_rss_mb": rss,
        "mode": found.get("mode"),
        "unembedded": found.get("unembedded"),
    }


def main() -> None:
    home = Path(sys.argv[1])
    report = {"benchmark": "stdio-embedding-probe", "date": time.strftime("%Y-%m-%d"), "home": str(home)}
    report |= {model: probe(home, model) for model in ("off", "bundled")}
    (RESULTS / "stdio-embedding-probe.json").write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
