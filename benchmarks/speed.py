"""Speed and scale, side by side: rockmem vs rank-bm25 (BM25Okapi) vs SQLite FTS5, on one seeded corpus.

    python -m benchmarks.speed --size 100k                 # all three systems, plus stdio and cold start
    python -m benchmarks.speed --size 10k --size 1m        # several sizes in one run
    python -m benchmarks.speed --size 100k --systems rockmem,rockmem-hybrid   # with embeddings

Every system runs in its own fresh worker process, so peak resident memory (ru_maxrss) is its own:
  - rockmem: `import` of the corpus into a new home (durable files, index, snapshot), then, in a second
    process, open the home and search through MemoryService (20 results read back from their files, as
    the tool answers) and through the index alone; durable single saves. A third process adds a full
    working-memory namespace (50 entries of ~2 KB) plus patrol findings and sub-agent outlines, and times
    per-turn recall (BM25) against a plain 8-result search, and working-memory get/save/list/search. A
    fourth builds a 100,000-triple knowledge graph there and times its cold load, 2-hop traversal, and
    recall with the graph against recall without it.
  - rank-bm25: BM25Okapi over lowercase `\\w+` tokens (how it is commonly used), in memory; a query is
    get_scores plus a top-10 selection. Its queries are capped by time at large sizes (n says how many).
  - rockmem-hybrid (needs ../shared/models/m2v-minilm-l6-256 and the rockmem home built above): backfill
    every memory's embedding with the local model as `reindex --embeddings` does, then, in a new process,
    search in hybrid, vector and rockbot modes (query embedding included).
  - rockmem-three-tier: search with three-tier retrieval (issue 20, `ROCKMEM_SEARCH_TIERS`) against the
    flat search on the same home (its ~217 categories), alternating: flat, tiered, flat, tiered, each in a
    freshly opened MemoryService, 20 results; bm25, and hybrid when rockmem-hybrid embedded the home.
  - rockmem-neighbours (issue 24): context from session neighbours on against off (`ROCKMEM_SEARCH_NEIGHBOURS`),
    alternating as the three tiers do, on the plain home (no memory has a session: the lever must cost
    nothing) and on a second home of the same corpus imported as conversations (every memory carries a
    `session` of 20 turns, a `dia_id`, a `speaker` its questions may name and a `date`: the worst case),
    embedded when the model is there; "on" is both issue-24 levers (neighbours and the named lifts).
  - FTS5: a file database, `porter unicode61` tokenizer, one transaction for the build; a query ORs its
    words and orders by bm25(); a durable save is INSERT + COMMIT with synchronous=FULL.
At the stdio size (100k by default) the real server is also spawned: cold start to the first answered
search, and search as a raw JSON-RPC tool call and through the Python SDK client.
Writes benchmarks/results/speed-{size}.json. Figures are p50/p95 over ≥ 200 queries; compare ratios.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import random
import re
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import numpy as np
from mcp import Client, StdioServerParameters

from benchmarks.corpus import CITIES, FIRST, LAST, TOOLS, Corpus, write_jsonl
from rockmem_mcp.config import Settings
from rockmem_mcp.graph.service import GraphService
from rockmem_mcp.home.transfer import import_jsonl
from rockmem_mcp.memory.service import MemoryService
from rockmem_mcp.recall.service import Recall
from rockmem_mcp.search.memory_index import SearchFilter
from rockmem_mcp.working.service import WorkingMemory

RESULTS = Path(__file__).parent / "results"
SYSTEMS = ("rockmem", "rank-bm25", "fts5", "rockmem-hybrid", "rockmem-three-tier", "rockmem-neighbours")
MODEL = Path(__file__).resolve().parents[2] / "shared" / "models" / "m2v-minilm-l6-256"  # or `--model bundled`
STDIO_ENV: dict[str, str] = {}  # the stdio servers' embedding setting: the hybrid system's model, else off
QUERY_SEED = 99
OVERRIDES: dict[str, Any] = {}  # settings every rockmem worker uses beside its home (`--no-salience`)


def home_settings(home: Path, **more: Any) -> Settings:
    # Embeddings off unless asked: the bundled model would otherwise embed every home in the background.
    return Settings.load({"home": home, "embedding_model": "off", **OVERRIDES, **more}, env={})


def model_ready() -> bool:
    return str(MODEL) == "bundled" or MODEL.exists()


def percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "p50_ms": round(statistics.median(ordered) * 1e3, 3),
        "p95_ms": round(ordered[max(0, int(len(ordered) * 0.95) - 1)] * 1e3, 3),
        "n": len(ordered),
    }


def timed(fn: Callable[[str], object], queries: list[str], budget_s: float = float("inf")) -> dict[str, float]:
    """Run `fn` per query; stop early once `budget_s` is spent (at least 10 queries always run)."""
    samples = []
    deadline = time.perf_counter() + budget_s
    for query in queries:
        t = time.perf_counter()
        fn(query)
        samples.append(time.perf_counter() - t)
        if len(samples) >= 10 and time.perf_counter() > deadline:
            break
    return percentiles(samples)


def peak_rss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)  # kB on Linux


def read_contents(corpus: Path) -> list[str]:
    with corpus.open(encoding="utf-8") as f:
        return [json.loads(line)["content"] for line in f]


# ------------------------------------------------------------------------------------------------ workers
def rockmem_build(corpus: Path, work: Path, queries: list[str]) -> dict[str, Any]:
    home = work / "rockmem-home"
    started = time.perf_counter()
    memory = MemoryService(home_settings(home))
    with corpus.open("rb") as f:
        report = import_jsonl(memory, f)
    memory.close()  # writes the index snapshot the next start loads
    assert not report.errors, report.errors[:3]
    return {"import_s": round(time.perf_counter() - started, 2), "peak_rss_mb": peak_rss_mb()}


def rockmem_search(corpus: Path, work: Path, queries: list[str]) -> dict[str, Any]:
    home = work / "rockmem-home"
    started = time.perf_counter()
    memory = MemoryService(home_settings(home))
    opened = time.perf_counter() - started
    everything = SearchFilter()
    result = {
        "open_s": round(opened, 3),
        "search_20_results": timed(lambda q: memory.search(q, limit=20), queries),
        # As the search tool calls it: the results are a use (counted in memory; written in the background).
        "search_20_reinforced": timed(lambda q: memory.search(q, limit=20, reinforce=True), queries),
        "index_top10": timed(lambda q: memory.index.search(q, everything, 10), queries),
    }
    saves = []
    for i in range(200):
        t = time.perf_counter()
        memory.save(f"benchmark note {i}: deploy review happens on Thursday at 10:30", "notes/benchmark")
        saves.append(time.perf_counter() - t)
    result["durable_save"] = percentiles(saves)
    for hit in memory.search(category="notes/benchmark", limit=200).results:  # leave the corpus as it was
        memory.delete(hit.entry.id, permanent=True)
    memory.close()
    return result | {"peak_rss_mb": peak_rss_mb()}


WORKING_ENTRIES = 50  # a full namespace (the default cap)
WORKING_VALUE = "pytest output: " + "test_case PASSED " * 120  # ~2 KB, a parked tool result


def rockmem_tiers(corpus: Path, work: Path, queries: list[str]) -> dict[str, Any]:
    """Per-turn recall over the long-term home with a full working-memory namespace (BM25: no embeddings),
    against plain search for the same 8 results; working-memory get/save/list/search on that namespace."""
    settings = home_settings(work / "rockmem-home")
    memory = MemoryService(settings)
    session = WorkingMemory(settings, "session/bench")
    for i in range(WORKING_ENTRIES):
        session.save(f"result-{i}", WORKING_VALUE, ttl_minutes=30, category="tool-results", tags=["pytest"])
    for i in range(5):
        WorkingMemory(settings, f"patrol/check-{i}").save("finding", f"disk {i} at 9{i}% on build host", 30)
        WorkingMemory(settings, f"subagent/task-{i}").save("result-index", f"- module {i}: 3 flaky tests", 30)
    recall = Recall(memory)
    turns = iter(range(10**9))
    result = {
        "working_entries": WORKING_ENTRIES,
        "search_8_results": timed(lambda q: memory.search(q, limit=8), queries),
        "recall_no_delta": timed(lambda q: recall.build(q, "bench", session, delta=False), queries),
        # A realistic session: 20 turns each, so the seen set grows as in use.
        "recall_per_turn": timed(lambda q: recall.build(q, f"s{next(turns) // 20}", session), queries),
        "working_get": timed(lambda q: session.get(f"result-{len(q) % WORKING_ENTRIES}"), queries),
        "working_save": timed(
            lambda q: session.save(f"result-{len(q) % WORKING_ENTRIES}", WORKING_VALUE, 30), queries[:200]
        ),
        "working_list": timed(lambda q: session.list(), queries),
        "working_search": timed(lambda q: session.search(q), queries),
    }
    memory.close()
    return result | {"peak_rss_mb": peak_rss_mb()}


GRAPH_TRIPLES = 100_000
PREDICATES = ("works_on", "leads", "knows", "uses", "depends_on", "lives_in", "reviews", "prefers")


def graph_triples(count: int, seed: int = 5) -> list[dict[str, object]]:
    """A seeded graph over the corpus's people, projects (Zipf-weighted: hubs and a long tail), tools and
    cities, so questions name its entities as users would."""
    rng = random.Random(seed)
    corpus = Corpus()
    people = [f"{a} {b}" for a in FIRST for b in LAST]
    kinds = [people, corpus.projects, TOOLS, CITIES]
    pick = [
        lambda: rng.choice(people),
        lambda: rng.choices(corpus.projects, cum_weights=corpus.project_weights)[0],
        lambda: rng.choice(TOOLS),
        lambda: rng.choice(CITIES),
    ]
    triples = []
    while len(triples) < count:
        a, b = rng.choices(range(len(kinds)), weights=[4, 4, 1, 1], k=2)
        subject, obj = pick[a](), pick[b]()
        if subject != obj:
            triples.append(
                {"subject": subject, "predicate": rng.choice(PREDICATES), "object": obj, "confidence": rng.random()}
            )
    return triples


def rockmem_graph(corpus: Path, work: Path, queries: list[str]) -> dict[str, Any]:
    """A 100k-triple knowledge graph beside the long-term home: build, cold load, 2-hop traversal, and
    per-turn recall with the graph over 100k memories (against recall without it, in the same process)."""
    settings = home_settings(work / "rockmem-home")
    with corpus.open("rb") as f:
        size = sum(1 for _ in f)
    triples = graph_triples(min(GRAPH_TRIPLES, size))  # as many triples as memories, up to 100k
    started = time.perf_counter()
    graph = GraphService(settings)
    for i in range(0, len(triples), 1000):
        graph.add_triples(triples[i : i + 1000])
    built = time.perf_counter() - started
    graph.close()
    started = time.perf_counter()
    graph = GraphService(settings)
    loaded = time.perf_counter() - started
    stats = graph.stats()
    rng = random.Random(11)
    names = [e.name for e in rng.sample(sorted(graph.entities.values(), key=lambda e: e.id), len(queries))]
    memory = MemoryService(settings)
    session = WorkingMemory(settings, "session/bench")
    plain, with_graph = Recall(memory), Recall(memory, graph)
    named = sum(bool(graph.mentioned(q)) for q in queries)
    result = {
        **stats,
        "build_s": round(built, 2),
        "open_s": round(loaded, 2),
        "queries_naming_an_entity": named,
        "traverse_2_hops_limit_15": timed(lambda q: graph.traverse(names.pop()), queries),
        "recall_without_graph": timed(lambda q: plain.build(q, "bench", session, delta=False), queries),
        "recall_with_graph": timed(lambda q: with_graph.build(q, "bench", session, delta=False), queries),
    }
    memory.close()
    graph.close()
    return result | {"peak_rss_mb": peak_rss_mb()}


def hybrid_settings(work: Path) -> Settings:
    return home_settings(work / "rockmem-home", embedding_model=str(MODEL))


def rockmem_embed(corpus: Path, work: Path, queries: list[str]) -> dict[str, Any]:
    started = time.perf_counter()
    memory = MemoryService(hybrid_settings(work), embed_in_background=False)
    opened = time.perf_counter()
    made = memory.vector_worker.drain()
    embedded = time.perf_counter()
    memory.close()  # the snapshot now carries the vectors
    return {
        "open_s": round(opened - started, 2),
        "embedded": made,
        "backfill_s": round(embedded - opened, 2),
        "per_second": round(made / (embedded - opened)),
        "snapshot_s": round(time.perf_counter() - embedded, 2),
        "peak_rss_mb": peak_rss_mb(),
    }


def rockmem_hybrid(corpus: Path, work: Path, queries: list[str]) -> dict[str, Any]:
    started = time.perf_counter()
    memory = MemoryService(hybrid_settings(work))
    opened = time.perf_counter() - started
    assert memory.vector_worker.idle.wait(600) and memory.missing_vector_count() == 0
    embedder = memory.embedder
    result: dict[str, Any] = {"open_s": round(opened, 3), "vectors": len(memory.index.vectors)}
    result["query_embedding"] = timed(embedder.embed_query, queries)
    for mode in ("hybrid", "vector", "rockbot", "bm25"):
        result[f"search_20_results_{mode}"] = timed(lambda q, m=mode: memory.search(q, limit=20, mode=m), queries)
    memory.close()
    return result | {"peak_rss_mb": peak_rss_mb()}


THREE_TIER_ROUNDS = 2


def rockmem_three_tier(corpus: Path, work: Path, queries: list[str]) -> dict[str, Any]:
    """Search p50 with the three tiers on and off, alternating sides over fresh opens of the home."""
    home = work / "rockmem-home"
    vectors = home_settings(home).embeddings_dir
    embedded = model_ready() and vectors.is_dir() and next(vectors.glob("*.bin"), None) is not None
    modes = ("bm25", "hybrid") if embedded else ("bm25",)
    p50s: dict[str, dict[str, list[float]]] = {mode: {"flat": [], "tiered": []} for mode in modes}
    for _ in range(THREE_TIER_ROUNDS):
        for side in ("flat", "tiered"):
            more = {"embedding_model": str(MODEL)} if embedded else {}
            memory = MemoryService(
                home_settings(home, search_tiers=side == "tiered", **more), embed_in_background=False
            )
            assert not embedded or memory.missing_vector_count() == 0
            for mode in modes:
                timing = timed(lambda q, m=mode, s=memory: s.search(q, limit=20, mode=m), queries)
                p50s[mode][side].append(timing["p50_ms"])
            memory.close()
    result: dict[str, Any] = {"rounds": THREE_TIER_ROUNDS, "categories": len(Corpus().categories)}
    for mode, sides in p50s.items():
        median = {side: round(statistics.median(values), 3) for side, values in sides.items()}
        result[f"search_20_results_{mode}"] = {
            "p50_ms_per_run": sides,
            "p50_ms": median,
            "tiered_over_flat": ratio(median["tiered"], median["flat"]),
        }
    return result | {"peak_rss_mb": peak_rss_mb()}


SESSION_TURNS = 20  # turns per session when the corpus is imported as conversations
SPEAKERS = FIRST  # the corpus's first names: its questions name them, so the speaker lift runs


def rockmem_neighbours(corpus: Path, work: Path, queries: list[str]) -> dict[str, Any]:
    """Search p50 with session neighbours lending and without, alternating over fresh opens, on the plain home
    and on the corpus imported as conversations (every memory in a session)."""
    sessions_home = work / "rockmem-sessions-home"
    embedded = MODEL.exists()
    more = {"embedding_model": str(MODEL)} if embedded else {}
    started = time.perf_counter()
    memory = MemoryService(home_settings(sessions_home, **more), embed_in_background=False)
    with corpus.open(encoding="utf-8") as f:
        lines = []
        for n, line in enumerate(f):
            record = json.loads(line)
            session, turn = divmod(n, SESSION_TURNS)
            speaker = SPEAKERS[(2 * session + turn % 2) % len(SPEAKERS)]  # two people per session
            date = f"{2020 + session % 6}-{1 + session % 12:02d}-{1 + session % 28:02d}"
            conversation = {"session": f"s{session}", "dia_id": f"D{session}:{turn}", "speaker": speaker, "date": date}
            record["metadata"] = record.get("metadata", {}) | conversation
            lines.append(json.dumps(record))
    report = import_jsonl(memory, lines)
    if embedded:
        memory.vector_worker.drain()
    memory.close()
    assert not report.errors, report.errors[:3]
    result: dict[str, Any] = {"sessions_home_built_s": round(time.perf_counter() - started, 2)}
    plain_vectors = home_settings(work / "rockmem-home").embeddings_dir
    plain_embedded = embedded and plain_vectors.is_dir() and next(plain_vectors.glob("*.bin"), None) is not None
    for name, home, with_model in (
        ("no_sessions", work / "rockmem-home", plain_embedded), ("all_in_sessions", sessions_home, embedded),
    ):  # fmt: skip
        modes = ("bm25", "hybrid") if with_model else ("bm25",)
        p50s: dict[str, dict[str, list[float]]] = {mode: {"off": [], "on": []} for mode in modes}
        for _ in range(THREE_TIER_ROUNDS):
            for side in ("off", "on"):
                on = side == "on"
                settings = home_settings(home, search_neighbours=on, search_lifts=on, **(more if with_model else {}))
                memory = MemoryService(settings, embed_in_background=False)
                for mode in modes:
                    timing = timed(lambda q, m=mode, s=memory: s.search(q, limit=20, mode=m), queries)
                    p50s[mode][side].append(timing["p50_ms"])
                memory.close()
        for mode, sides in p50s.items():
            median = {side: round(statistics.median(values), 3) for side, values in sides.items()}
            result[f"{name}_search_20_results_{mode}"] = {
                "p50_ms_per_run": sides, "p50_ms": median, "on_over_off": ratio(median["on"], median["off"]),
            }  # fmt: skip
    return result | {"peak_rss_mb": peak_rss_mb()}


def plain_tokens(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


def rank_bm25(corpus: Path, work: Path, queries: list[str]) -> dict[str, Any]:
    from rank_bm25 import BM25Okapi  # test extra; only this baseline needs it

    contents = read_contents(corpus)
    started = time.perf_counter()
    bm25 = BM25Okapi([plain_tokens(c) for c in contents])
    built = time.perf_counter() - started
    del contents

    def search(query: str) -> np.ndarray:
        scores = bm25.get_scores(plain_tokens(query))
        best = np.argpartition(-scores, 10)[:10]
        return best[np.argsort(-scores[best])]

    return {
        "build_s": round(built, 2),
        "query_top10": timed(search, queries, budget_s=60),
        "peak_rss_mb": peak_rss_mb(),
    }


def fts5(corpus: Path, work: Path, queries: list[str]) -> dict[str, Any]:
    path = work / "fts5.db"
    path.unlink(missing_ok=True)
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA synchronous=FULL")
    db.execute("CREATE VIRTUAL TABLE docs USING fts5(content, tokenize='porter unicode61')")
    started = time.perf_counter()
    db.execute("BEGIN")
    with corpus.open(encoding="utf-8") as f:
        db.executemany("INSERT INTO docs(content) VALUES (?)", ((json.loads(line)["content"],) for line in f))
    db.execute("COMMIT")
    built = time.perf_counter() - started

    def search(query: str) -> list[tuple[int, float]]:
        words = " OR ".join(f'"{w}"' for w in plain_tokens(query))
        sql = "SELECT rowid, bm25(docs) FROM docs WHERE docs MATCH ? ORDER BY bm25(docs) LIMIT 10"
        return db.execute(sql, (words,)).fetchall() if words else []

    result = {"build_s": round(built, 2), "query_top10": timed(search, queries)}
    saves = []
    for i in range(200):
        t = time.perf_counter()
        db.execute("BEGIN")
        db.execute("INSERT INTO docs(content) VALUES (?)", (f"benchmark note {i}: deploy review on Thursday",))
        db.execute("COMMIT")
        saves.append(time.perf_counter() - t)
    db.close()
    return result | {"durable_save": percentiles(saves), "peak_rss_mb": peak_rss_mb()}


WORKERS: dict[str, Callable[[Path, Path, list[str]], dict[str, Any]]] = {
    "rockmem-build": rockmem_build,
    "rockmem-search": rockmem_search,
    "rockmem-tiers": rockmem_tiers,
    "rockmem-graph": rockmem_graph,
    "rank-bm25": rank_bm25,
    "fts5": fts5,
    "rockmem-embed": rockmem_embed,
    "rockmem-hybrid": rockmem_hybrid,
    "rockmem-three-tier": rockmem_three_tier,
    "rockmem-neighbours": rockmem_neighbours,
}


def run_worker(name: str, corpus: Path, work: Path, queries: int, extra: list[str] | None = None) -> dict[str, Any]:
    """Run one worker in a fresh interpreter; its JSON answer is the last line of stdout."""
    args = [sys.executable, "-m", "benchmarks.speed", "--worker", name, "--corpus", str(corpus), "--work", str(work)]
    if OVERRIDES.get("salience") is False:
        args.append("--no-salience")
    args += ["--model", str(MODEL), *(extra or [])]
    done = subprocess.run([*args, "--queries", str(queries)], check=True, stdout=subprocess.PIPE, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


# ------------------------------------------------------------------------------------------------ stdio
def server_params(home: Path) -> StdioServerParameters:
    env = {"ROCKMEM_EMBEDDING_MODEL": "off"} | STDIO_ENV  # merged over the SDK's minimal default environment
    return StdioServerParameters(command=sys.executable, args=["-m", "rockmem_mcp", "--home", str(home)], env=env)


def server_rss_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return None


async def sdk_client(home: Path, queries: list[str], starts: int = 5) -> dict[str, Any]:
    """Cold start (spawn → first search answered) and tool calls through the Python SDK's Client."""
    cold = []
    for _ in range(starts):
        t = time.perf_counter()
        async with Client(server_params(home)) as client:
            result = await client.call_tool("search_memory", {"query": queries[0], "limit": 5})
            cold.append(time.perf_counter() - t)
            assert not result.is_error
    calls = []
    async with Client(server_params(home)) as client:
        for query in queries:
            t = time.perf_counter()
            await client.call_tool("search_memory", {"query": query})
            calls.append(time.perf_counter() - t)
    return {
        "cold_start_to_first_search_s": {"p50": round(statistics.median(cold), 3), "runs": [round(c, 3) for c in cold]},
        "search_tool_call_python_sdk_client": percentiles(calls),
    }


@contextlib.contextmanager
def jsonrpc_server(
    home: Path,
    env: dict[str, str] | None = None,
    python: str = sys.executable,
    cwd: Path | None = None,
    close_timeout: float = 60,
) -> Iterator[tuple[subprocess.Popen[bytes], Callable[[dict[str, Any]], dict[str, Any] | None]]]:
    """A server on `home` spoken to in plain JSON-RPC lines, initialized; yields it and `call` (a message with an
    id waits for its reply). The server is asked to stop (stdin closed) and waited for at the end. `python` and
    `cwd` start another checkout's server (run from its folder, `-m` imports that checkout's package)."""
    proc = subprocess.Popen(
        [python, "-m", "rockmem_mcp", "--home", str(home)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
        cwd=cwd,
    )
    assert proc.stdin is not None and proc.stdout is not None
    stdin, stdout = proc.stdin, proc.stdout

    def call(message: dict[str, Any]) -> dict[str, Any] | None:
        stdin.write((json.dumps(message) + "\n").encode())
        stdin.flush()
        return json.loads(stdout.readline()) if "id" in message else None

    try:
        hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}
        call({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": hello})
        call({"jsonrpc": "2.0", "method": "notifications/initialized"})
        yield proc, call
    finally:
        stdin.close()
        proc.wait(timeout=close_timeout)


def raw_stdio(home: Path, queries: list[str], warm_up: dict[str, Any] | None = None) -> dict[str, Any]:
    """Tool-call latency as the pipe sees it: plain JSON-RPC lines, no client-side validation.

    The Python SDK's Client re-validates every structured result with the pure-Python jsonschema
    package (~2.6 ms for 20 entries here); clients in other languages do not pay that, so both are reported.
    `warm_up`: search_memory arguments of one untimed call first (its wait is reported; an error is ignored).
    """
    with jsonrpc_server(home, os.environ | {"ROCKMEM_EMBEDDING_MODEL": "off"} | STDIO_ENV) as (proc, call):
        waited = time.perf_counter()
        if warm_up is not None:
            call({"jsonrpc": "2.0", "id": 10**6, "method": "tools/call",
                  "params": {"name": "search_memory", "arguments": warm_up}})  # fmt: skip
        waited = time.perf_counter() - waited
        samples = []
        for i, query in enumerate(queries, start=1):
            params = {"name": "search_memory", "arguments": {"query": query}}
            t = time.perf_counter()
            reply = call({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": params})
            samples.append(time.perf_counter() - t)
            assert reply is not None and not reply["result"].get("isError"), reply
        rss = server_rss_mb(proc.pid)
    report = {"search_tool_call_raw_jsonrpc": percentiles(samples), "server_rss_mb_after_queries": rss}
    return report | ({"warm_up_s": round(waited, 2)} if warm_up is not None else {})


# ------------------------------------------------------------------------------------------------ driver
def parse_size(text: str) -> int:
    match = re.fullmatch(r"(\d+)([km]?)", text.strip().lower())
    if not match:
        raise argparse.ArgumentTypeError(f"size like 10000, 100k or 1m, not {text!r}")
    return int(match[1]) * {"": 1, "k": 1_000, "m": 1_000_000}[match[2]]


def label(size: int) -> str:
    return f"{size // 1_000_000}m" if size % 1_000_000 == 0 else f"{size // 1_000}k" if size % 1_000 == 0 else str(size)


def ratio(slow: float | None, fast: float | None) -> float | None:
    return round(slow / fast, 1) if slow and fast else None


def run_size(
    size: int, root: Path, queries: int, systems: tuple[str, ...], stdio: bool, starts: int = 5
) -> dict[str, Any]:
    work = root / f"speed-{label(size)}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    corpus = write_jsonl(work / "corpus.jsonl", size)
    report: dict[str, Any] = {
        "benchmark": "speed",
        "size": size,
        "date": time.strftime("%Y-%m-%d"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        "queries": queries,
        "systems": {},
    }
    results = report["systems"]
    for system in systems:
        print(f"[{label(size)}] {system} ...", file=sys.stderr, flush=True)
        if system == "rockmem":
            built = run_worker("rockmem-build", corpus, work, queries)
            results["rockmem"] = {"build": built, "serve": run_worker("rockmem-search", corpus, work, queries)}
            results["rockmem"]["tiers"] = run_worker("rockmem-tiers", corpus, work, queries)
            results["rockmem"]["graph"] = run_worker("rockmem-graph", corpus, work, queries)
        elif system == "rockmem-hybrid":
            if "rockmem" not in systems or not model_ready():
                print(f"skipping rockmem-hybrid: needs the rockmem system and {MODEL}", file=sys.stderr)
                continue
            embedded = run_worker("rockmem-embed", corpus, work, queries)
            results[system] = {"backfill": embedded, "serve": run_worker("rockmem-hybrid", corpus, work, queries)}
            STDIO_ENV["ROCKMEM_EMBEDDING_MODEL"] = str(MODEL)  # the home's vectors are this model's
        elif system in ("rockmem-three-tier", "rockmem-neighbours"):
            if "rockmem" not in systems:
                print("skipping rockmem-three-tier: needs the rockmem system", file=sys.stderr)
                continue
            results[system] = run_worker(system, corpus, work, queries)
        else:
            results[system] = run_worker(system, corpus, work, queries)
    if stdio and "rockmem" in systems:
        print(f"[{label(size)}] rockmem over stdio ...", file=sys.stderr, flush=True)
        asked = Corpus(seed=QUERY_SEED).queries(queries)
        home = work / "rockmem-home"
        results["rockmem"]["stdio"] = {**anyio.run(sdk_client, home, asked, starts), **raw_stdio(home, asked)}
    ours = results.get("rockmem", {}).get("serve", {})
    report["ratios"] = {
        f"{system}_query_p50_over_rockmem_{mode}": ratio(results[system]["query_top10"]["p50_ms"], ours[mode]["p50_ms"])
        for system in ("rank-bm25", "fts5")
        if system in results and ours
        for mode in ("index_top10", "search_20_results")
    }
    if tiers := results.get("rockmem", {}).get("tiers"):
        report["ratios"]["recall_per_turn_p50_over_search_8"] = ratio(
            tiers["recall_per_turn"]["p50_ms"], tiers["search_8_results"]["p50_ms"]
        )
    if graph := results.get("rockmem", {}).get("graph"):
        report["ratios"]["recall_with_graph_p50_over_without"] = ratio(
            graph["recall_with_graph"]["p50_ms"], graph["recall_without_graph"]["p50_ms"]
        )
    shutil.rmtree(work, ignore_errors=True)
    return report


def main() -> None:
    global MODEL  # `--model`, read by the helpers in this process and handed to every worker
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=parse_size, action="append", help="corpus size: 10k, 100k, 1m (repeatable)")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--systems", default=",".join(SYSTEMS), help=f"comma-separated subset of {SYSTEMS}")
    parser.add_argument("--stdio-size", type=parse_size, default=100_000, help="size that also measures stdio")
    parser.add_argument("--root", type=Path, default=Path(tempfile.gettempdir()), help="where work files go")
    parser.add_argument("--no-salience", action="store_true", help="rockmem with salience off (ROCKMEM_SALIENCE=false)")
    parser.add_argument(
        "--model", type=Path, default=MODEL, help="rockmem-hybrid's model: a model2vec folder or 'bundled'"
    )
    parser.add_argument("--worker", choices=WORKERS, help=argparse.SUPPRESS)
    parser.add_argument("--corpus", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    MODEL = args.model or MODEL
    if args.no_salience:
        OVERRIDES["salience"] = False
    if args.worker:
        answer = WORKERS[args.worker](args.corpus, args.work, Corpus(seed=QUERY_SEED).queries(args.queries))
        print(json.dumps(answer))
        return
    systems = tuple(s.strip() for s in args.systems.split(",") if s.strip())
    if unknown := set(systems) - set(SYSTEMS):
        parser.error(f"unknown systems {sorted(unknown)}; choose from {SYSTEMS}")
    RESULTS.mkdir(exist_ok=True)
    for size in args.size or [100_000]:
        report = run_size(size, args.root, args.queries, systems, stdio=size == args.stdio_size)
        out = RESULTS / f"speed-{label(size)}.json"
        out.write_text(json.dumps(report, indent=2) + "\n")
        print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
