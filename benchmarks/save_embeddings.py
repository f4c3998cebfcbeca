"""Issue 25, part 1: what a save costs with embeddings on, over stdio, against a save without them.

    python -m benchmarks.save_embeddings                         # off vs bundled → results/save-embeddings.json
    python -m benchmarks.save_embeddings --settings off bundled m2v onnx
    python -m benchmarks.save_embeddings --baseline /tmp/old-src # also each setting on another source tree

Each round starts one real stdio server per setting on a fresh home (raw JSON-RPC lines, as
`benchmarks/speed.py` speaks them) and makes SAVES `save_memory` calls one after another; the settings are
rotated round by round, so every ratio compares figures from the same minutes of this noisy machine.
Reported per setting: the median over rounds of each round's save p50 and p95, and the ratio of each
setting's p50 to the `off` p50 of the same round (median over rounds).

With embeddings on, after the last save of the burst the harness polls `search_memory` (mode bm25, so
the poll embeds nothing) until its reply says no entry is `unembedded`: the time from the last save's
reply to that answer is "vectors in the index". Then the server is closed (stdin closed, as a client
quits) and the embedding cache on disk is counted: every saved memory must have its cached vector.

The server's CPU time (user + system, all threads, from /proc) is read before the first save, after the
last one and once the vectors are in: "CPU per save" is robust to a machine whose other tenants make the
wall-clock figures swing, and its difference between settings is what embedding costs the process.

`--mechanism` also counts, in a library process per setting (the same 600 saves, 2 ms apart as a client's
calls come), what the vector worker did: its steps (each takes the store's lock), index snapshots written,
cache files written, and the worker thread's CPU time. These counts do not depend on how busy the machine is.

Settings: `off` (ROCKMEM_EMBEDDING_MODEL=off), `bundled` (unset: the bundled transformer), `static` (the bundled
static model), `m2v` (the evaluation copy in ../shared/models/m2v-minilm-l6-256 through model2vec), `onnx`
(onnx:minilm-int8).
`--baseline DIR` adds `NAME@base` for every embedding setting, run with DIR first on PYTHONPATH (a plain
copy of another revision's tree, e.g. `git archive main | tar -x -C DIR`).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.speed import MODEL, RESULTS, jsonrpc_server, percentiles

SAVES = 600
ROUNDS = 5
POLL_S = 0.005
ARRIVAL_LIMIT_S = 120.0
NOTE = "save {i}: the deploy review for project {p} moved to Thursday 10:30, room {r}; bring the {t} notes"
TOPICS = ("billing", "search", "onboarding", "storage", "mobile", "release")
SETTINGS: dict[str, str | None] = {
    "off": "off",
    "bundled": None,  # unset: the product's default
    "static": "static",
    "m2v": str(MODEL),
    "onnx": "onnx:minilm-int8",
}


def environment(setting: str, baseline: Path | None) -> dict[str, str]:
    name, _, variant = setting.partition("@")
    env = {k: v for k, v in os.environ.items() if k not in ("ROCKMEM_EMBEDDING_MODEL", "PYTHONPATH")}
    model = SETTINGS[name]
    if model is not None:
        env["ROCKMEM_EMBEDDING_MODEL"] = model
    if variant == "base":
        assert baseline is not None
        env["PYTHONPATH"] = str(baseline)
    env["PYTHONSAFEPATH"] = "1"  # `python -m`/`-c` would put the working directory's rockmem_mcp first
    return env


def cached_vectors(home: Path) -> int:
    """How many entries the embedding cache on disk holds a vector for."""
    directory = home / ".embeddings"
    if not directory.is_dir():
        return 0
    return sum(1 for name in os.listdir(directory) if name.endswith(".bin"))


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process, all its threads (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def one_server(home: Path, setting: str, baseline: Path | None, saves: int) -> dict[str, Any]:
    embeds = not setting.startswith("off")
    samples: list[float] = []
    arrival_s: float | None = None
    polls = 0
    with jsonrpc_server(home, environment(setting, baseline)) as (proc, call):
        cpu_start = cpu_seconds(proc.pid)
        for i in range(1, saves + 1):
            content = NOTE.format(i=i, p=i % 37, r=100 + i % 53, t=TOPICS[i % len(TOPICS)])
            params = {"name": "save_memory", "arguments": {"content": content, "category": "notes"}}
            t = time.perf_counter()
            reply = call({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": params})
            samples.append(time.perf_counter() - t)
            assert reply is not None and not reply["result"].get("isError"), reply
        last_save = time.perf_counter()
        cpu_saves = cpu_seconds(proc.pid) - cpu_start
        if embeds:
            while time.perf_counter() - last_save < ARRIVAL_LIMIT_S:
                polls += 1
                params = {"name": "search_memory", "arguments": {"query": "deploy review", "mode": "bm25", "limit": 1}}
                reply = call({"jsonrpc": "2.0", "id": saves + polls, "method": "tools/call", "params": params})
                assert reply is not None and not reply["result"].get("isError"), reply
                if reply["result"]["structuredContent"].get("unembedded", 0) == 0:
                    arrival_s = time.perf_counter() - last_save
                    break
                time.sleep(POLL_S)
        cpu_all = cpu_seconds(proc.pid) - cpu_start
    report: dict[str, Any] = {
        "save": percentiles(samples),
        "cpu_ms_per_save": round(cpu_saves * 1e3 / saves, 3),
        "cpu_ms_per_save_with_vectors": round(cpu_all * 1e3 / saves, 3),
    }
    if embeds:
        report |= {
            "vectors_in_index_after_last_save_s": arrival_s,
            "polls": polls,
            "cached_on_disk": cached_vectors(home),
        }
    return report


MECHANISM = """
import json, sys, tempfile, threading, time
from pathlib import Path
from rockmem_mcp.config import Settings
from rockmem_mcp.search import vectors
from rockmem_mcp.search.memory_index import MemoryIndex
try:
    from rockmem_mcp import vector_worker as embedding
    from rockmem_mcp.memory.service import MemoryService
except ImportError:  # a checkout from before issue 42's layout
    from rockmem_mcp.services import embedding
    from rockmem_mcp.services.memory import MemoryService

saves, note, model = int(sys.argv[1]), sys.argv[2], sys.argv[3]
counts = {"worker_steps": 0, "snapshots_written": 0, "cache_files_written": 0, "worker_cpu_s": 0.0}
def counted(name, original):
    def wrapper(*args, **kwargs):
        counts[name] += 1
        return original(*args, **kwargs)
    return wrapper
MemoryIndex.write_snapshot = staticmethod(counted("snapshots_written", MemoryIndex.write_snapshot))
vectors.VectorFiles.write = counted("cache_files_written", vectors.VectorFiles.write)
embedding.VectorWorker.step = counted("worker_steps", embedding.VectorWorker.step)
run = embedding.VectorWorker._run
def timed_run(self):
    try:
        run(self)
    finally:
        counts["worker_cpu_s"] = time.thread_time()
embedding.VectorWorker._run = timed_run
with tempfile.TemporaryDirectory() as home:
    settings = Settings.load({"home": home} | ({"embedding_model": model} if model else {}), env={})
    memory = MemoryService(settings)
    assert memory.vector_worker.idle.wait(60)
    counts["worker_steps"] = counts["snapshots_written"] = 0  # the start's own
    samples = []
    for i in range(saves):
        t = time.perf_counter()
        memory.save(note.format(i=i, p=i % 37, r=i % 53, t="billing"), "notes")
        samples.append(time.perf_counter() - t)
        time.sleep(0.002)
    assert memory.vector_worker.idle.wait(60)
    memory.vector_worker.stop()
    memory.close()
samples.sort()
counts["save_p50_ms"] = round(samples[len(samples) // 2] * 1e3, 3)
counts["worker_cpu_s"] = round(counts["worker_cpu_s"], 3)
print(json.dumps(counts))
"""


def mechanism(setting: str, baseline: Path | None, saves: int) -> dict[str, Any]:
    """What the vector worker did for `saves` library saves (see the module's docstring)."""
    env = environment(setting, baseline)
    model = env.get("ROCKMEM_EMBEDDING_MODEL", "")
    if "PYTHONPATH" not in env:  # this tree, not an installed copy, whatever the working directory
        env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1])
    done = subprocess.run(
        [sys.executable, "-c", MECHANISM, str(saves), NOTE, model], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def run(settings: list[str], rounds: int, saves: int, baseline: Path | None, root: Path) -> dict[str, Any]:
    per_round: dict[str, list[dict[str, Any]]] = {s: [] for s in settings}
    order = list(settings)
    for round_ in range(rounds):
        for setting in order:
            home = root / f"{setting.replace('@', '-')}-{round_}"
            shutil.rmtree(home, ignore_errors=True)
            result = one_server(home, setting, baseline, saves)
            per_round[setting].append(result)
            print(f"round {round_} {setting}: {json.dumps(result)}", flush=True)
            shutil.rmtree(home, ignore_errors=True)
        order = order[1:] + order[:1]
    summary: dict[str, Any] = {}
    for setting, results in per_round.items():
        p50s = [r["save"]["p50_ms"] for r in results]
        entry: dict[str, Any] = {
            "save_p50_ms": round(statistics.median(p50s), 3),
            "save_p95_ms": round(statistics.median(r["save"]["p95_ms"] for r in results), 3),
            "round_p50s_ms": p50s,
            "cpu_ms_per_save": round(statistics.median(r["cpu_ms_per_save"] for r in results), 3),
            "cpu_ms_per_save_with_vectors": round(
                statistics.median(r["cpu_ms_per_save_with_vectors"] for r in results), 3
            ),
        }
        if "off" in per_round and setting != "off":
            ratios = [r["save"]["p50_ms"] / o["save"]["p50_ms"] for r, o in zip(results, per_round["off"], strict=True)]
            entry["p50_ratio_to_off"] = round(statistics.median(ratios), 3)
            entry["round_ratios"] = [round(x, 3) for x in ratios]
        arrivals = [r["vectors_in_index_after_last_save_s"] for r in results if "polls" in r]
        if arrivals:
            entry["vectors_in_index_after_last_save_s"] = {
                "median": None if None in arrivals else round(statistics.median(arrivals), 3),
                "max": None if None in arrivals else round(max(arrivals), 3),
            }
            entry["cached_on_disk_after_close"] = [r["cached_on_disk"] for r in results]
        summary[setting] = entry
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--settings", nargs="+", default=["off", "bundled"], choices=list(SETTINGS))
    parser.add_argument(
        "--baseline", type=Path, help="a source tree to compare with (its embedding settings as NAME@base)"
    )
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--saves", type=int, default=SAVES)
    parser.add_argument("--mechanism", action="store_true", help="also count the vector worker's work per setting")
    parser.add_argument("--root", type=Path, help="where the fresh homes go (default: a temporary folder)")
    parser.add_argument("--out", type=Path, default=RESULTS / "save-embeddings.json")
    args = parser.parse_args()
    settings = list(args.settings)
    if args.baseline is not None:
        settings += [f"{s}@base" for s in args.settings if s != "off"]
    with tempfile.TemporaryDirectory(prefix="save-embeddings-", dir=args.root) as root:
        summary = run(settings, args.rounds, args.saves, args.baseline, Path(root))
    if args.mechanism:
        for setting in settings:
            if not setting.startswith("off"):
                summary[setting]["vector_worker_for_library_saves"] = found = mechanism(
                    setting, args.baseline, args.saves
                )
                print(f"mechanism {setting}: {json.dumps(found)}", flush=True)
    report = {
        "benchmark": "save-embeddings",
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "machine": f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs",
        "python": platform.python_version(),
        "saves_per_server": args.saves,
        "rounds": args.rounds,
        "baseline": str(args.baseline) if args.baseline else None,
        "settings": summary,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
