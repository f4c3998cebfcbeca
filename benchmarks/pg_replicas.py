"""Long-term memories on PostgreSQL (ROCKMEM_STORE) against the file home, in one run, on the same corpus.

    python -m benchmarks.pg_replicas --size 100k --database postgresql://postgres@127.0.0.1/postgres
    python -m benchmarks.pg_replicas --size 1m --fresh-only   # a new replica's start: from the kept snapshot, rows

Makes a new database (dropped at the end) and a file home, imports the same N-memory corpus into both, then:
- opening: a fresh replica (empty home) building its index from the rows, against a file home opening from its
  snapshot;
- search p50/p95, 300 corpus queries, 20 results, on a database replica and on the file home, alternating;
- durable save p50/p95: 200 saves on each, then 3 replica processes saving 200 each at once;
- visibility: replica A saves, then replica B (its own home, index and connection) is asked for the words at
  once: the time until B's answer has it (each of 200 rounds), i.e. how long after an acknowledgement another
  replica serves the write.
Prints one JSON line.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import secrets
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks import speed
from benchmarks.corpus import Corpus, write_jsonl

SAVES = 200


def settings(home: Path, store: str | None = None) -> Any:
    from rockmem_mcp.config import Settings

    return Settings.load({"home": home, "store": store}, env={"ROCKMEM_EMBEDDING_MODEL": "off"})


def open_memory(home: Path, store: str | None = None) -> Any:
    from rockmem_mcp.memory.service import MemoryService

    return MemoryService(settings(home, store), embed_in_background=False)


def _saves(memory: Any, tag: str) -> list[float]:
    taken = []
    for i in range(SAVES):
        started = time.perf_counter()
        memory.save(f"benchmark note {tag} {i}: the review happens on Thursday at 10:30", "notes/benchmark")
        taken.append(time.perf_counter() - started)
    return taken


def _replica_saves(home: str, store: str, tag: str, out: Any) -> None:
    memory = open_memory(Path(home), store)
    try:
        out.put(_saves(memory, tag))
    finally:
        memory.close()


@contextlib.contextmanager
def scratch_database(admin_url: str) -> Iterator[str]:
    """A new database on the server `admin_url` reaches, dropped afterwards; yields its address."""
    import psycopg

    name = "rockmem_bench_" + secrets.token_hex(4)
    admin = psycopg.connect(admin_url, autocommit=True)
    admin.execute(f"CREATE DATABASE {name}")
    try:
        yield f"{admin_url.rsplit('/', 1)[0]}/{name}"
    finally:
        admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        admin.close()


def run(size: int, admin_url: str, work: Path) -> dict[str, Any]:
    from rockmem_mcp.home.transfer import import_jsonl

    report: dict[str, Any] = {"memories": size}
    with scratch_database(admin_url) as store:
        corpus = write_jsonl(work / "corpus.jsonl", size)
        for label, target in (("file_home", None), ("database", store)):
            memory = open_memory(work / f"{label}-import", target)
            started = time.perf_counter()
            with corpus.open("rb") as f:
                import_jsonl(memory, f)
            report[f"import_{label}_s"] = round(time.perf_counter() - started, 2)
            memory.close()

        started = time.perf_counter()
        replica = open_memory(work / "replica-a", store)  # an empty home: the index is built from the rows
        report["fresh_replica_open_s"] = round(time.perf_counter() - started, 2)
        started = time.perf_counter()
        home = open_memory(work / "file_home-import")
        report["file_home_open_s"] = round(time.perf_counter() - started, 2)

        queries = Corpus(seed=speed.QUERY_SEED).queries(300)
        on_db: list[float] = []
        on_files: list[float] = []
        for query in queries:  # alternating: the machine's noise falls on both
            for memory, samples in ((replica, on_db), (home, on_files)):
                started = time.perf_counter()
                memory.search(query, limit=20)
                samples.append(time.perf_counter() - started)
        report["search_database"] = speed.percentiles(on_db)
        report["search_file_home"] = speed.percentiles(on_files)
        report["search_ratio"] = round(statistics.median(on_db) / statistics.median(on_files), 2)

        report["save_database"] = speed.percentiles(_saves(replica, "a"))
        report["save_file_home"] = speed.percentiles(_saves(home, "f"))

        other = open_memory(work / "replica-b", store)
        seen = []
        for i in range(SAVES):
            words = f"visibility probe {i} {secrets.token_hex(3)}"
            replica.save(words)
            started = time.perf_counter()
            while not other.search(words, limit=1).results:
                pass
            seen.append(time.perf_counter() - started)
        ordered = sorted(seen)
        report["visible_on_another_replica"] = speed.percentiles(seen) | {
            "p99_ms": round(ordered[int(len(ordered) * 0.99) - 1] * 1e3, 3)
        }
        other.close()
        replica.close()
        home.close()

        queue: Any = multiprocessing.get_context("spawn").Queue()
        workers = [
            multiprocessing.get_context("spawn").Process(
                target=_replica_saves, args=(str(work / f"replica-{n}"), store, f"r{n}", queue)
            )
            for n in range(3)
        ]
        for worker in workers:
            worker.start()
        together = [t for _ in workers for t in queue.get(timeout=600)]
        for worker in workers:
            worker.join()
        report["save_database_3_replicas"] = speed.percentiles(together)
    return report


def fresh_replicas(size: int, admin_url: str, work: Path) -> dict[str, Any]:
    """Only the database side, for large N: import, close (the snapshot is kept in the database), then a new
    replica opening from that snapshot, and another building from the rows (the snapshot removed)."""
    import psycopg

    from rockmem_mcp.home.transfer import import_jsonl

    report: dict[str, Any] = {"memories": size}
    with scratch_database(admin_url) as store:
        corpus = write_jsonl(work / "corpus.jsonl", size)
        memory = open_memory(work / "importer", store)
        started = time.perf_counter()
        with corpus.open("rb") as f:
            import_jsonl(memory, f)
        report["import_database_s"] = round(time.perf_counter() - started, 2)
        started = time.perf_counter()
        memory.close()
        report["close_with_snapshot_s"] = round(time.perf_counter() - started, 2)
        started = time.perf_counter()
        from_snapshot = open_memory(work / "replica-snapshot", store)
        report["fresh_replica_open_from_snapshot_s"] = round(time.perf_counter() - started, 2)
        assert len(from_snapshot.index) == size
        from_snapshot.close()
        with psycopg.connect(store, autocommit=True) as conn:
            (size_bytes,) = conn.execute("SELECT sum(length(data)) FROM snapshots").fetchone()
            report["snapshot_mb"] = round(size_bytes / 1e6, 1)
            conn.execute("DELETE FROM snapshots")
        started = time.perf_counter()
        from_rows = open_memory(work / "replica-rows", store)
        report["fresh_replica_open_from_rows_s"] = round(time.perf_counter() - started, 2)
        from_rows.close()
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=speed.parse_size, default=100_000)
    parser.add_argument("--database", default="postgresql://postgres@127.0.0.1:5432/postgres",
                        help="a server's admin address: a database is made there and dropped")  # fmt: skip
    parser.add_argument("--work", type=Path, default=None)
    parser.add_argument("--fresh-only", action="store_true", help="only the database side: a new replica's start")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.work) as work:
        measure = fresh_replicas if args.fresh_only else run
        print(json.dumps(measure(args.size, args.database, Path(work))))


if __name__ == "__main__":
    main()
