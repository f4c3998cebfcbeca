"""Commands to look at and fix memory from a shell: get, list, add, delete, categories, graph, working, status.

Each goes through the same services and safeguards as the tools (audited as `manual`, like every command a
person runs), prints a short human rendering, and with `--json` one JSON document (or one per line for
lists) for scripts. Stored text is printed through the CLI's visible filter, so it never carries terminal
control codes.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import BaseModel

from rockmem_mcp.cli.common import audit_service, embed_written, graph_service, memory_service, say, start_summary
from rockmem_mcp.config import Settings
from rockmem_mcp.models import ROOTS
from rockmem_mcp.working.service import WorkingMemory

PREVIEW = 160  # characters of content in a listing line
CLI_NAMESPACE = "session/cli"  # whose working memory the CLI is; it lists and reads every namespace by name


def _emit(args: argparse.Namespace, value: BaseModel | dict[str, Any] | list[Any], human: Callable[[], None]) -> int:
    if args.json:
        if isinstance(value, BaseModel):
            say(value.model_dump_json())
        else:
            say(json.dumps(value, default=str, ensure_ascii=False))
    else:
        human()
    return 0


def _emit_lines(args: argparse.Namespace, items: Sequence[BaseModel], human: Callable[[], None]) -> int:
    """A listing: one JSON document per line with --json (for `jq` and streaming), else the human rendering."""
    if not args.json:
        human()
    for item in items if args.json else ():
        say(item.model_dump_json())
    return 0


def _line(entry: Any) -> str:
    content = " ".join(entry.content.split())
    if len(content) > PREVIEW:
        content = content[: PREVIEW - 1] + "…"
    return f"{_heading(entry)} {content}"


def _heading(entry: Any) -> str:
    """Id, day, category and flags: a listing line without its content."""
    flags = "".join(f" [{flag}]" for flag, on in (("pinned", entry.pinned), ("archived", entry.archived)) if on)
    return f"[{entry.id}] {entry.created_at:%Y-%m-%d} ({entry.category or '-'}){flags}"


def get(settings: Settings, args: argparse.Namespace) -> int:
    with memory_service(settings) as memory:
        entry = memory.get(args.id)

    def human() -> None:
        say(_heading(entry))  # the content once, whole, below
        if entry.tags:
            say(f"tags: {', '.join(entry.tags)}")
        for key, value in entry.metadata.items():
            say(f"{key}: {value}")
        uses = f"used {entry.reinforcement_count} time(s), last {entry.last_seen_at:%Y-%m-%d}"
        say(f"importance {entry.importance}; {uses}")
        say()
        say(entry.content)

    return _emit(args, entry, human)


def list_(settings: Settings, args: argparse.Namespace) -> int:
    with memory_service(settings) as memory:
        found = memory.search(None, args.category, args.tags, args.limit, include_archived=args.include_archived)
    entries = [hit.entry for hit in found.results]

    def human() -> None:
        for entry in entries:
            say(_line(entry))
        say(f"{len(entries)} of {found.total_matches}, newest first")

    return _emit_lines(args, entries, human)


def add(settings: Settings, args: argparse.Namespace) -> int:
    from rockmem_mcp.episodes.service import Episodes

    with memory_service(settings) as memory:
        entry = memory.save(args.content, args.category, args.tags, None, args.importance, args.pin)
        Episodes(settings, reinforcer=memory.reinforcer).log_save(entry)  # as save_memory: the day's log has it
        _emit(args, entry, lambda: say(f"saved {_line(entry)}"))  # said before embedding: the save is done
        if not args.no_embeddings:
            embed_written(memory)
    return 0


def delete(settings: Settings, args: argparse.Namespace) -> int:
    with memory_service(settings) as memory:
        if args.permanent:
            result = _delete_for_good(settings, memory, args)
        else:
            result = memory.delete(args.id, False, args.reason, confirm_pinned=args.confirm_pinned)
    what = "removed permanently" if result.permanent else "archived (search_memory --include-archived finds it)"
    return _emit(args, result, lambda: say(f"{result.id} {what}"))


def _delete_for_good(settings: Settings, memory: Any, args: argparse.Namespace) -> Any:
    """As delete_memory permanent: the memory, the episode that logged it, and the record's copies of its text
    (audit trail, git history, index snapshots; governance/erasure.py). What could not be erased is said on stderr."""
    from rockmem_mcp.episodes.service import Episodes
    from rockmem_mcp.governance.erasure import Erasure
    from rockmem_mcp.governance.history import GitHistory

    episodes = Episodes(settings, reinforcer=memory.reinforcer)
    history = GitHistory(settings, memory.audit)
    try:
        erasure = Erasure(settings, memory.audit, memory, episodes, history)
        result, left = erasure.delete_memory(args.id, args.reason, confirm_pinned=args.confirm_pinned)
    finally:
        history.close()
        episodes.close()
    for problem in left:
        print(f"warning: deleted, but {problem}", file=sys.stderr)
    return result


def categories(settings: Settings, args: argparse.Namespace) -> int:
    with memory_service(settings) as memory:
        tree = memory.categories()

    def human() -> None:
        for node in tree.categories:
            depth = node.category.count("/")
            say(f"{'  ' * depth}{node.category.rsplit('/', 1)[-1]}  {node.total}")
        say(f"{tree.total} memories")

    return _emit(args, tree, human)


def graph(settings: Settings, args: argparse.Namespace) -> int:
    with graph_service(settings) as opened:
        if args.entity is None:
            counts = opened.stats()
            return _emit(args, counts, lambda: say(f"{counts['entities']} entities, {counts['triples']} triples"))
        detail = opened.get_entity(args.entity)

    def human() -> None:
        entity = detail.entity
        aliases = f" (also {', '.join(entity.aliases)})" if entity.aliases else ""
        say(f"{entity.name} [{entity.type}]{aliases}, salience {detail.salience:.2f} ({detail.tier})")
        for fact in detail.facts:
            say(f"  {fact.subject} —{fact.predicate}→ {fact.object}  ({fact.confidence:.2f})")

    return _emit(args, detail, human)


def working(settings: Settings, args: argparse.Namespace) -> int:
    memory = WorkingMemory(settings, CLI_NAMESPACE)
    if args.key is not None:
        entry = memory.get(args.key)
        return _emit(
            args, entry, lambda: say(f"{entry.key} (expires {entry.expires_at:%Y-%m-%d %H:%M}Z)\n{entry.data}")
        )
    scopes = [args.scope] if args.scope else list(ROOTS)
    found = [info for scope in scopes for info in memory.list(scope)]

    def human() -> None:
        for info in found:
            say(f"{info.key}  {info.size} B, {info.expires_in} left")
        say(f"{len(found)} live entries")

    return _emit_lines(args, found, human)


def status(settings: Settings, args: argparse.Namespace) -> int:
    from rockmem_mcp.consolidation.reflection import reflection_store
    from rockmem_mcp.proposals.service import Proposals

    with memory_service(settings) as memory:
        summary = start_summary(settings, memory)
        stats = memory.stats()
    with graph_service(settings) as opened:
        counts = opened.stats()
    working_entries = sum(len(WorkingMemory(settings, CLI_NAMESPACE).list(root)) for root in ROOTS)
    report = {
        "home": str(settings.home),
        "memories": stats.active,
        "archived": stats.archived,
        "graph_entities": counts["entities"],
        "graph_triples": counts["triples"],
        "working_entries": working_entries,
        "pending_reflections": len(list(reflection_store(settings).with_status("pending"))),
        "open_proposals": len(Proposals(settings, audit_service(settings)).pending()),
    }

    def human() -> None:
        say(summary)
        say(f"graph: {counts['entities']} entities, {counts['triples']} triples; working memory: {working_entries}")
        waiting = []
        if report["pending_reflections"]:
            waiting.append(f"{report['pending_reflections']} reflection(s) to approve (rockmem-mcp reflect)")
        if report["open_proposals"]:
            waiting.append(f"{report['open_proposals']} proposal(s) to review (rockmem-mcp proposals)")
        say("waiting for you: " + ("; ".join(waiting) if waiting else "nothing"))

    return _emit(args, report, human)


COMMANDS: dict[str, Callable[[Settings, argparse.Namespace], int]] = {
    "get": get,
    "list": list_,
    "add": add,
    "delete": delete,
    "categories": categories,
    "graph": graph,
    "working": working,
    "status": status,
}
