"""Reflection at scale (issue 23): a cycle over 10,000 memories with a scripted model keeps to its output budget
and writes its proposal within the target; approving a 1,000-action proposal applies it within the target.

    python -m benchmarks.reflection                   # 10,000 memories, 3 runs → results/reflection.json
    python -m benchmarks.reflection --size 2000 --runs 1

Each run builds a fresh home (benchmarks/dream.py's: corpus facts, 5% saved again as near duplicates, 2%
archived long ago) and:
1. cycle: `Reflector.run` with a language model that is a scripted OpenAI-compatible server on loopback (it
   answers each consolidation batch by merging the duplicates it sees there, and reports completion tokens
   as len(answer) / 4), under the default budget of 8,000 output tokens. Timed from the call to the stored
   proposal (meta/pending-reflection.md); the tokens used and what was left uncovered are reported.
2. apply: a home with ACTIONS exact-duplicate pairs, a deterministic reflection with approval required (its
   plan: ACTIONS merges), then `resolve(approve)` timed — every merge durable, audited and indexed.
Targets: the cycle ≤ 30 s and ≤ 8,000 output tokens; the apply ≤ 5 s.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from benchmarks.dream import build_home
from benchmarks.salience import machine
from rockmem_mcp.config import Settings
from rockmem_mcp.consolidation.dream import Dreamer
from rockmem_mcp.consolidation.reflection import Reflector
from rockmem_mcp.consolidation.templates import Templates
from rockmem_mcp.core.service import CoreMemory
from rockmem_mcp.graph.service import GraphService
from rockmem_mcp.llm import ChatLLM
from rockmem_mcp.memory.service import MemoryService

RESULTS = Path(__file__).parent / "results"
ITEM = re.compile(r"^\d+\. \[([0-9a-z]+)\] \([^)]*\)[^:]*: (.*)$", re.MULTILINE)


def answer(body: dict[str, Any]) -> dict[str, Any]:
    """The scripted model: merges near duplicates within a consolidation batch; short answers elsewhere."""
    system, user = body["messages"][0]["content"], body["messages"][-1]["content"]
    if "meta-reflection phase" in system:
        return {"patterns": ["project facts dominate"], "guidance": "merge duplicates first"}
    if "rewriting core memory" in system:
        return {"blocks": [{"block": "Active Context", "text": "Consolidating project facts", "reason": "focus"}]}
    if "consolidating" not in system:
        return {}
    seen: dict[str, str] = {}
    merges = []
    for entry_id, text in ITEM.findall(user):
        key = " ".join(text.casefold().split()).rstrip(".")
        if key in seen:
            merges.append({"ids": [seen.pop(key), entry_id], "content": text.strip(), "reason": "duplicate"})
        else:
            seen[key] = entry_id
    return {"merges": merges}


class ScriptedModel:
    def __init__(self) -> None:
        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                text = json.dumps(answer(body))
                out = len(text) // 4
                reply = {
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": text}}],
                    "usage": {"completion_tokens": out, "total_tokens": out + 1000},
                }
                raw = json.dumps(reply).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def open_reflector(settings: Settings) -> tuple[Reflector, MemoryService, GraphService]:
    memory, graph = MemoryService(settings), GraphService(settings)
    dreamer = Dreamer(memory, graph, settings, Templates(settings.prompts_dir))
    return Reflector(settings, dreamer, CoreMemory(settings, memory)), memory, graph


def cycle(size: int, root: Path, model: ScriptedModel) -> dict[str, Any]:
    home = root / "cycle"
    built = build_home(home, size)
    settings = Settings.load(
        {"home": home, "llm_endpoint": model.url, "llm_model": "scripted", "audit_git": False}, env={}
    )
    reflector, memory, graph = open_reflector(settings)
    llm = ChatLLM(settings, backoff_s=0.0)
    try:
        started = time.perf_counter()
        reflection = reflector.run("manual", llm)
        seconds = time.perf_counter() - started
    finally:
        llm.close()
        memory.close()
        graph.close()
    kinds: dict[str, int] = {}
    for action in reflection.actions:
        kinds[action.kind] = kinds.get(action.kind, 0) + 1
    return {
        "home": built,
        "seconds": round(seconds, 2),
        "output_tokens": reflection.output_tokens,
        "budget": reflection.token_budget,
        "actions": kinds,
        "not_covered": reflection.not_covered,
        "proposal_written": (settings.meta_dir / "pending-reflection.md").exists(),
        "status": reflection.status,
    }


def apply(actions: int, root: Path) -> dict[str, Any]:
    home = root / "apply"
    settings = Settings.load({"home": home, "audit_git": False, "reflection_approval": "always"}, env={})
    memory = MemoryService(settings)
    facts = [f"Fact {n}: the falcon review moved to room {n}" for n in range(actions)]
    records = [{"content": fact, "category": "facts"} for fact in facts]
    entries = [memory.prepare_entry(r) for r in records + records]
    memory.save_many(entries)
    memory.close()
    reflector, memory, graph = open_reflector(settings)
    try:
        reflection = reflector.run("manual")
        assert len(reflection.actions) == actions, len(reflection.actions)
        started = time.perf_counter()
        done = reflector.resolve(reflection.id, "approve")
        seconds = time.perf_counter() - started
    finally:
        memory.close()
        graph.close()
    assert done.resolution is not None
    return {"actions": actions, "seconds": round(seconds, 2), "applied": done.resolution.applied}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--actions", type=int, default=1_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", default=str(RESULTS / "reflection.json"))
    args = parser.parse_args(argv)
    model = ScriptedModel()
    runs = []
    try:
        for n in range(args.runs):
            root = Path(tempfile.mkdtemp(prefix="rockmem-reflection-"))
            try:
                runs.append({"cycle": cycle(args.size, root, model), "apply": apply(args.actions, root)})
            finally:
                shutil.rmtree(root, ignore_errors=True)
            print(f"run {n + 1}: {json.dumps(runs[-1])}", file=sys.stderr)
    finally:
        model.close()
    report = {
        "benchmark": "reflection",
        "date": time.strftime("%Y-%m-%d"),
        "machine": machine(),
        "size": args.size,
        "cycle_seconds_median": statistics.median(r["cycle"]["seconds"] for r in runs),
        "cycle_output_tokens_max": max(r["cycle"]["output_tokens"] for r in runs),
        "apply_seconds_median": statistics.median(r["apply"]["seconds"] for r in runs),
        "runs": runs,
    }
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps({k: v for k, v in report.items() if k != "runs"}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
