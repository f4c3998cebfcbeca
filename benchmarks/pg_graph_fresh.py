"""A fresh replica opening a knowledge graph kept in PostgreSQL: from the rows, and after a restart from its own
snapshot (whether the graph needs a snapshot shared in the database, as the memory index has).

    python -m benchmarks.pg_graph_fresh --triples 50000 --database postgresql://postgres@127.0.0.1/postgres

Makes a new database (dropped at the end), writes N triples (person i --works_on--> project i % 5000) through one
replica, then times a second replica's first open (an empty home) and its restart. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import secrets
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--triples", type=int, default=50_000)
    parser.add_argument("--database", default="postgresql://postgres@127.0.0.1:5432/postgres")
    args = parser.parse_args()
    import psycopg

    from rockmem_mcp.config import Settings
    from rockmem_mcp.graph.service import GraphService

    admin = psycopg.connect(args.database, autocommit=True)
    name = "rockmem_bench_" + secrets.token_hex(4)
    admin.execute(f"CREATE DATABASE {name}")
    url = f"{args.database.rsplit('/', 1)[0]}/{name}"
    env = {"ROCKMEM_EMBEDDING_MODEL": "off", "ROCKMEM_AUDIT": "false"}
    result: dict[str, object] = {"triples": args.triples}
    try:
        with tempfile.TemporaryDirectory() as work:
            writer = GraphService(Settings.load({"home": Path(work) / "writer", "store": url}, env=env))
            started = time.perf_counter()
            for first in range(0, args.triples, 1000):
                writer.add_triples([
                    {"subject": f"person {i}", "predicate": "works_on", "object": f"project {i % 5000}"}
                    for i in range(first, min(first + 1000, args.triples))
                ])  # fmt: skip
            result["write_s"] = round(time.perf_counter() - started, 2)
            result["records"] = sum(writer.stats().values())
            writer.close()
            for label in ("fresh_open_s", "restart_open_s"):
                started = time.perf_counter()
                reader = GraphService(Settings.load({"home": Path(work) / "reader", "store": url}, env=env))
                result[label] = round(time.perf_counter() - started, 2)
                reader.close()
    finally:
        admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        admin.close()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
