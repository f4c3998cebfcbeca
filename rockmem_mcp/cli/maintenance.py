"""Looking after a home: `search`, `dream`, `doctor`, `stats`, `tools`, `salience`, `core`, `reindex`."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rockmem_mcp.cli.common import embed_missing, memory_service
from rockmem_mcp.config import Settings
from rockmem_mcp.errors import RockmemError


def _search(settings: Settings, args: argparse.Namespace) -> int:
    from rockmem_mcp.core.workspace import SEARCH_HITS, Workspace

    with memory_service(settings) as memory:
        found = memory.search(
            args.query,
            args.category,
            args.tags,
            args.limit,
            include_archived=args.include_archived,
            mode=args.mode,
            include_dormant=args.include_dormant,
        )
    # As search_memory: the workspace files' sections too, for a query that no filter narrows (text output only).
    if args.query and not (args.json or args.category or args.tags or args.include_archived):
        found.workspace = Workspace(settings).search(args.query, min(args.limit, SEARCH_HITS))
    for hit in found.results:
        if args.json:
            print(hit.model_dump_json())
            continue
        entry = hit.entry
        score = "      " if hit.score is None else f"{hit.score:6.3f}"
        flag = " [archived]" if entry.archived else ""
        print(f"{score}  [{entry.id}] ({entry.category or '-'}){flag} {entry.content[:200]}")
    for section in found.workspace:
        where = f"{section.file}:{section.line}"
        print(f"{section.score:6.3f}  [{where}] ({section.heading or '-'}) {' '.join(section.text.split())[:200]}")
    if not args.json:
        waiting = f"; {found.unembedded} not embedded yet (reindex --embeddings)" if found.unembedded else ""
        sections = f"; {len(found.workspace)} workspace sections" if found.workspace else ""
        summary = f"{len(found.results)} of {found.total_matches} matches, ranked by {found.mode}{waiting}{sections}"
        print(summary, file=sys.stderr)
    return 0


def _dream(settings: Settings, args: argparse.Namespace) -> int:
    from rockmem_mcp.consolidation.dream import Dreamer
    from rockmem_mcp.consolidation.shapes import DreamPlan
    from rockmem_mcp.consolidation.templates import Templates
    from rockmem_mcp.graph.service import GraphService

    plan = None
    if args.plan:
        try:
            plan = DreamPlan.model_validate_json(Path(args.plan).read_bytes())
        except OSError as exc:
            raise RockmemError(f"cannot read {args.plan}: {exc.strerror}") from None
        except ValueError as exc:
            raise RockmemError(f"{args.plan} is not a dream plan: {str(exc).splitlines()[0]}") from None
    from rockmem_mcp.governance.history import GitHistory

    graph = GraphService(settings)
    try:
        with memory_service(settings) as memory:
            history = GitHistory(settings, memory.audit)  # commits what is pending as a run starts, and its changes
            try:
                dreamer = Dreamer(memory, graph, settings, Templates(settings.prompts_dir), before_run=history.flush)
                while True:
                    if args.force or args.dry_run or plan is not None or dreamer.due():
                        print("dreaming ...", file=sys.stderr, flush=True)
                        for report in _dream_once(dreamer, settings, plan, args):
                            if args.json:  # one report per line: a sidecar (--every) streams them
                                print(report.model_dump_json())
                            else:
                                _print_report(report)
                    else:
                        last = dreamer.last_run()
                        print(
                            f"skipped: the last dream finished at {last:%Y-%m-%d %H:%M} UTC, under 6 h ago "
                            "(--force runs anyway)",
                            file=sys.stderr,
                        )
                    if args.every is None:
                        return 0
                    time.sleep(args.every)
            finally:
                history.close()  # commits the run's changes
    finally:
        graph.close()


def _dream_once(dreamer: Any, settings: Settings, plan: Any, args: argparse.Namespace) -> Iterator[Any]:
    """A plan file: apply it. Otherwise the deterministic pass, then, with a language model configured, the
    model's passes (or just --pass NAME)."""
    from rockmem_mcp.consolidation.dream import PASSES
    from rockmem_mcp.llm import ChatLLM

    if plan is not None:
        yield dreamer.apply(plan, args.dream_pass or "consolidation", "plan", args.dry_run)
        return
    if args.dream_pass in (None, "deterministic"):
        from rockmem_mcp.cli.progress import Meter

        with Meter("dreaming", "steps") as meter:
            report = dreamer.run_deterministic(args.dry_run, meter.update)
        yield report
    if args.dream_pass == "deterministic" or not (settings.llm_endpoint and settings.llm_model):
        if args.dream_pass not in (None, "deterministic"):
            raise RockmemError(
                f"the {args.dream_pass} pass needs a language model: set ROCKMEM_LLM_ENDPOINT and "
                "ROCKMEM_LLM_MODEL (or give --plan)"
            )
        return
    llm = ChatLLM(settings)
    try:
        from rockmem_mcp.cli.progress import Meter

        for name in [args.dream_pass] if args.dream_pass else PASSES:
            print(f"dreaming: {name} ...", file=sys.stderr, flush=True)
            with Meter(f"dreaming: {name}", "items") as meter:
                report = dreamer.run_llm(name, llm, args.dry_run, meter.update)
            yield report
    finally:
        llm.close()
        print(f"language model: {llm.tokens_used} tokens", file=sys.stderr)


def _print_report(report: Any) -> None:
    for action in report.applied:
        ids = ", ".join(action.ids) + (f" -> {action.result_id}" if action.result_id else "")
        print(f"  {action.action:<12} {ids}  {action.reason}".rstrip())
    for action in report.rejected:
        print(f"  rejected {action.action:<8} {', '.join(action.ids)}  {action.reason}".rstrip())
    for action in report.contradictions:
        print(f"  contradiction {', '.join(action.ids)}  {action.reason} (both kept: resolve them)")
    for change in report.tier_changes:
        print(f"  tier         {change.id}  {change.from_tier} -> {change.to_tier} (salience {change.salience:.3f})")
    for found in report.archive_candidates:
        print(f"  review       {found.id}  salience {found.salience:.3f}, {found.uses} uses: {found.preview}")
    where = "" if report.dry_run else f" (report {report.id} in dream-reports/)"
    print(f"{report.summary}{where}", file=sys.stderr)


def _doctor(settings: Settings, args: argparse.Namespace) -> int:
    from rockmem_mcp.home.doctor import Doctor

    report = Doctor(settings).run(fix=args.fix)
    if args.json:
        print(report.as_json())
    else:
        for finding in report.findings:
            done = f"  -> {finding.fixed}" if finding.fixed else ""
            print(f"{finding.kind:<16} {finding.path}: {finding.detail}{done}")
        checked = ", ".join(f"{n} {what}" for what, n in report.checked.items())
        verdict = "healthy" if report.healthy else f"{len(report.findings)} finding(s)"
        print(f"{report.home}: {verdict} (checked {checked or 'nothing: no home yet'})", file=sys.stderr)
        if report.quarantine:
            print(f"bad files moved to {report.quarantine}/ (nothing deleted)", file=sys.stderr)
        if report.in_use_by:
            print(f"in use by {', '.join(report.in_use_by)}: a write in flight may show here", file=sys.stderr)
        if report.findings and not args.fix:
            print("run with --fix to repair (stop servers on this home first)", file=sys.stderr)
    unfixed = [f for f in report.findings if not f.fixed]
    return 1 if unfixed else 0


def _stats(settings: Settings, args: argparse.Namespace) -> int:
    from rockmem_mcp.graph.service import GraphService

    with memory_service(settings) as memory:
        stats = memory.stats()
        tree = memory.categories()
        embeddings_on = memory.embedder.configured
    graph = GraphService(settings)
    try:
        graph_stats = graph.stats()
    finally:
        graph.close()
    report = {
        **stats.__dict__,
        "graph_entities": graph_stats["entities"],
        "graph_triples": graph_stats["triples"],
        "top_categories": {c.category: c.total for c in tree.categories if "/" not in c.category},
    }
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(stats_text(report, embeddings_on))
    return 0


def stats_text(report: dict[str, Any], embeddings_on: bool = True) -> str:
    """`stats` for a person: one aligned line per subject (the JSON's fields, grouped)."""
    tiers = report["tiers"]
    everything = report["active"] + report["archived"]
    if report["embedding_model"]:
        vectors = f"{report['embedded']:,} of {everything:,} embedded with {report['embedding_model']}"
        if report["embedded"] < everything:
            vectors += " (the rest: `rockmem-mcp reindex --embeddings`)"
    elif not embeddings_on:
        vectors = "none: embeddings are off (ROCKMEM_EMBEDDING_MODEL=off), search ranks by BM25"
    else:
        vectors = "none yet (`rockmem-mcp reindex --embeddings` makes them)" if everything else "none yet"
    top = sorted(report["top_categories"].items(), key=lambda item: (-item[1], item[0]))
    shown = ", ".join(f"{name} {count:,}" for name, count in top[:TOP_CATEGORIES])
    if len(top) > TOP_CATEGORIES:
        shown += f", and {len(top) - TOP_CATEGORIES} more"
    rows = [
        ("home", report["home"]),
        ("memories", f"{report['active']:,} active, {report['archived']:,} archived, {report['pinned']:,} pinned"),
        ("salience", ", ".join(f"{count:,} {TIER_NAMES.get(tier, tier)}" for tier, count in tiers.items())),
        ("categories", f"{report['categories']:,}" + (f": {shown}" if shown else "")),
        ("vectors", vectors),
        ("graph", f"{report['graph_entities']:,} entities, {report['graph_triples']:,} triples"),
        ("on disk", f"journal {_size(report['journal_bytes'])}, index snapshot {_size(report['snapshot_bytes'])}"),
    ]
    width = max(len(name) for name, _ in rows)
    return "\n".join(f"{name:<{width}}  {value}" for name, value in rows)


TOP_CATEGORIES = 8  # named on the categories line; `rockmem-mcp categories` shows the whole tree
TIER_NAMES = {"archive_candidate": "archive candidates"}


def _size(count: int) -> str:
    if count < 1000:
        return f"{count:,} B"
    return f"{count / 1e3:,.1f} kB" if count < 1_000_000 else f"{count / 1e6:,.1f} MB"


def _tools(settings: Settings, args: argparse.Namespace) -> int:
    """Print the toolset table (as in docs/toolsets.md), then what this configuration selects."""
    import anyio

    from rockmem_mcp.server import toolsets
    from rockmem_mcp.server.app import build_server

    everything = anyio.run(build_server(settings.model_copy(update={"toolsets": ["all"]})).list_tools)
    enabled = toolsets.selected(settings.toolsets)
    names = set(toolsets.tools_of(enabled))
    cost = toolsets.tokens(tool for tool in everything if tool.name in names)
    if args.json:
        by_name = {tool.name: tool for tool in everything}
        sets = {
            name: {"default": name in toolsets.DEFAULT, "tools": list(tools), "tokens":
                   toolsets.tokens(by_name[t] for t in tools), "when": toolsets.WHEN[name]}
            for name, tools in toolsets.TOOLSETS.items()
        }  # fmt: skip
        print(json.dumps({"toolsets": sets, "selected": list(enabled), "selected_tokens": cost,
                          "budget": toolsets.TOKEN_BUDGET}))  # fmt: skip
        return 0
    print(toolsets.table(everything))
    counted = f"{len(names)} tool{'s' * (len(names) != 1)}"
    print(
        f"selected ({','.join(settings.toolsets)}): {', '.join(enabled)}; {counted}, ≈ {cost:,} tokens "
        f"(the default must stay within {toolsets.TOKEN_BUDGET:,})"
    )
    return 0


def _salience(settings: Settings, args: argparse.Namespace) -> int:
    from rockmem_mcp.consolidation.decay import salience_listing

    with memory_service(settings) as memory:
        listing = salience_listing(memory, args.order or "least", args.limit)
    if args.json:
        print(listing.model_dump_json(indent=2))
        return 0
    for found in listing.memories:
        pin = " pinned" if found.pinned else ""
        print(
            f"{found.salience:6.3f}  {found.tier:<17} [{found.id}] {found.uses:>4} uses, last {found.last_use:%Y-%m-%d}"
            f"{pin}  {found.preview}"
        )
    tiers = ", ".join(f"{n} {name}" for name, n in listing.tiers.items())
    print(f"{listing.order} salient {len(listing.memories)} of {sum(listing.tiers.values())}: {tiers}; "
          f"{listing.pinned} pinned", file=sys.stderr)  # fmt: skip
    return 0


def _core(settings: Settings, args: argparse.Namespace) -> int:
    """Read-only: no store is opened, so it runs beside a server. Exit 1 for a malformed or over-cap file."""
    from rockmem_mcp.core.service import CoreMemory

    view = CoreMemory(settings).read(args.block)
    if args.json:
        print(view.model_dump_json(indent=2, exclude={"text", "changed"}))
    else:
        print(view.text)  # made visible by _visible_output, as every command's output
        print(f"version {view.version}; {view.tokens:,} of {view.cap:,} tokens", file=sys.stderr)
    for problem in view.over_cap:
        print(f"over its cap: {problem}", file=sys.stderr)
    return 1 if view.over_cap else 0


def _reindex(settings: Settings, args: argparse.Namespace) -> int:
    from rockmem_mcp.cli.progress import Pulse
    from rockmem_mcp.graph import service as graph
    from rockmem_mcp.memory.service import SNAPSHOT_NAME

    started = time.monotonic()
    (settings.index_dir / SNAPSHOT_NAME).unlink(missing_ok=True)
    (settings.index_dir / graph.SNAPSHOT_NAME).unlink(missing_ok=True)  # the graph re-reads its files next start
    summary: dict[str, Any] = {}
    with contextlib.ExitStack() as stack:
        # Opening the store without its snapshot reads every file (a minute at 50k): said from the first moment.
        with Pulse("reindexing", "reading every memory file"):
            memory = stack.enter_context(memory_service(settings))
        count = len(memory.index)
        print(f"indexed {count:,} {'memory' if count == 1 else 'memories'} in {time.monotonic() - started:.1f}s",
              file=sys.stderr)  # fmt: skip
        summary["memories"] = count
        if getattr(args, "embeddings", False):
            summary |= embed_missing(memory)
    if getattr(args, "json", False):
        print(json.dumps(summary))
    return 0


COMMANDS = {
    "search": _search,
    "dream": _dream,
    "doctor": _doctor,
    "stats": _stats,
    "tools": _tools,
    "salience": _salience,
    "core": _core,
    "reindex": _reindex,
}
