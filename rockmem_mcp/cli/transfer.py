"""Moving memory in and out: `import`, `import-graph`, `export`, `migrate-store`."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import sys
import time
from pathlib import Path
from typing import Any

from rockmem_mcp.cli.common import (
    embed_written,
    file_size,
    graph_service,
    memory_service,
    open_input,
    open_output,
    report_bad_lines,
)
from rockmem_mcp.config import Settings
from rockmem_mcp.errors import RockmemError


def _import(settings: Settings, args: argparse.Namespace) -> int:
    from rockmem_mcp.cli.progress import Meter
    from rockmem_mcp.home.transfer import HomeStores, bounded_lines, import_jsonl

    started = time.monotonic()
    try:
        source = open_input(args.file)
    except OSError as exc:
        raise RockmemError(f"cannot read {args.file}: {exc.strerror}") from None
    size = file_size(source)  # a file's bytes: the bar's whole (a pipe has no size: lines are counted)

    def progress(line: int) -> None:
        meter.update(source.tell() if size else line, size, f"line {line:,}")

    with (
        source,
        Meter("importing", "bytes" if size else "lines", size) as meter,
        memory_service(settings) as memory,
        graph_service(settings) as graph,
    ):
        report = import_jsonl(memory, bounded_lines(source), progress, others=HomeStores(settings, graph))
        vectors = {} if args.no_embeddings else embed_written(memory)
    report_bad_lines(report.errors)
    for reason in report.skipped[:50]:
        print(f"skipped {reason}", file=sys.stderr)
    if args.json:
        totals = {"seconds": round(time.monotonic() - started, 3)} | vectors
        print(json.dumps(dataclasses.asdict(report) | totals, default=str))
    others = ", ".join(f"{n} {store}" for store, n in report.other_stores.items() if n)
    print(
        f"imported {report.imported} memories ({report.replaced} replaced existing ids)"
        f"{f', and {others}' if others else ''}; {len(report.errors)} bad lines, "
        f"{len(report.skipped)} records skipped, in {time.monotonic() - started:.1f}s",
        file=sys.stderr,
    )
    return 1 if report.errors else 0


def _import_graph(settings: Settings, args: argparse.Namespace) -> int:
    from rockmem_mcp.graph.service import GraphService
    from rockmem_mcp.home.transfer import bounded_lines, import_reference_graph

    started = time.monotonic()
    try:
        source = open_input(args.file)
    except OSError as exc:
        raise RockmemError(f"cannot read {args.file}: {exc.strerror}") from None
    graph = GraphService(settings)
    try:
        with source, memory_service(settings) as memory:
            report = import_reference_graph(graph, memory, bounded_lines(source))
    finally:
        graph.close()
    report_bad_lines(report.errors)
    if args.json:
        print(json.dumps(dataclasses.asdict(report) | {"seconds": round(time.monotonic() - started, 3)}, default=str))
    print(
        f"imported {report.entities} entities ({report.entities_created} new), {report.triples} relations "
        f"({report.triples_created} new) and {report.observations} observations as memories; "
        f"{len(report.errors)} bad lines, in {time.monotonic() - started:.1f}s",
        file=sys.stderr,
    )
    return 1 if report.errors else 0


def _export(settings: Settings, args: argparse.Namespace) -> int:
    from rockmem_mcp.home.transfer import HomeStores, export_jsonl

    try:
        target = open_output(args.file)
    except OSError as exc:
        raise RockmemError(f"cannot write {args.file}: {exc.strerror}") from None
    from rockmem_mcp.cli.progress import Meter

    with memory_service(settings) as memory, graph_service(settings) as graph:
        others = HomeStores(settings, graph)
        with Meter("exporting", "memories", len(memory.index)) as meter:
            count = export_jsonl(memory, target, others, meter.update)
    if target is not sys.stdout:
        target.close()
    extra = (
        f" and {others.exported} other records (graph, working memory, feedback, episodes, procedures, files)"
        if others.exported
        else ""
    )
    print(f"exported {count} memories{extra}", file=sys.stderr)
    return 0


def _migrate_store(settings: Settings, args: argparse.Namespace) -> int:
    """Every store from one home or database to another (long-term memories, then what a backup carries besides),
    checked afterwards. A database side keeps its replica's index and audit trail in this command's home (--home),
    or in a temporary folder when that is the other side."""
    import tempfile

    from rockmem_mcp.cli.progress import Meter
    from rockmem_mcp.graph.service import GraphService
    from rockmem_mcp.home.store_migration import migrate_records
    from rockmem_mcp.home.transfer import HomeStores, migrate_memories, migrate_other_stores
    from rockmem_mcp.memory.service import MemoryService
    from rockmem_mcp.storage.pg import is_database_url, redacted

    if args.source == args.target:
        print("rockmem-mcp: --from and --to are the same store", file=sys.stderr)
        return 2
    with contextlib.ExitStack() as stack:

        def side(where: str) -> Any:
            if is_database_url(where):
                files_side = args.target if where == args.source else args.source
                home = settings.home
                if not is_database_url(files_side) and Path(files_side).expanduser().resolve() == home:
                    home = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="rockmem-migrate-")))
                chosen = settings.model_copy(update={"home": home, "store": where})
            else:
                chosen = settings.model_copy(update={"home": Path(where).expanduser().resolve(), "store": None})
            memory = MemoryService(chosen, embed_in_background=False)
            stack.callback(memory.close)
            graph = GraphService(chosen, reinforcer=memory.reinforcer)
            stack.callback(graph.close)
            return memory, HomeStores(chosen, graph)

        (source, source_others), (target, target_others) = side(args.source), side(args.target)
        # First what a backup does not carry (the audit trail among them: the source's lines then come before
        # the lines this migration writes), then the memories, then what a backup carries.
        rest = migrate_records(source.settings, target.settings, source.reinforcer, target.reinforcer)
        with Meter("migrating", "memories", len(source.index)) as meter:
            report = migrate_memories(source, target, meter.update)
        migrate_other_stores(source_others, target_others, report)
        report.other_stores.update(rest.moved)
        report.differing += rest.differing
        report.skipped += rest.kept
        vectors = {} if args.no_embeddings else embed_written(target)  # the target's server need not backfill
    named = tuple(redacted(where) if is_database_url(where) else where for where in (args.source, args.target))
    if args.json:
        print(json.dumps(dataclasses.asdict(report) | {"from": named[0], "to": named[1]} | vectors))
    else:
        others = ", ".join(f"{n} {store}" for store, n in report.other_stores.items() if n) or "nothing else"
        print(f"migrated {report.moved} memories from {named[0]} to {named[1]} ({report.replaced} replaced ids "
              f"the target had), and {others}; {report.checked} memories read back, every other store exported "
              f"again and compared: {len(report.differing)} differing", file=sys.stderr)  # fmt: skip
        for reason in report.skipped:
            print(f"  kept the target's own: {reason}", file=sys.stderr)
        for what in report.differing[:20]:
            print(f"  differs: {what}", file=sys.stderr)
    return 1 if report.differing else 0


COMMANDS = {
    "import": _import,
    "import-graph": _import_graph,
    "export": _export,
    "migrate-store": _migrate_store,
}
