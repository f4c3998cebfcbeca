"""Review: `reflect` (run, approve, reject a reflection) and `proposals` (sub-agents')."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from collections.abc import Iterator
from typing import Any

from rockmem_mcp.cli.common import audit_service, graph_service, json_argument, memory_service
from rockmem_mcp.config import Settings
from rockmem_mcp.errors import RockmemError


@contextlib.contextmanager
def _reflector(settings: Settings) -> Iterator[Any]:
    """A reflection engine on the home, with the sub-agents' proposals (the deferred ones become actions); the
    git history commits what is pending before a run and after."""
    from rockmem_mcp.consolidation.dream import Dreamer
    from rockmem_mcp.consolidation.reflection import Reflector
    from rockmem_mcp.consolidation.templates import Templates
    from rockmem_mcp.governance.history import GitHistory
    from rockmem_mcp.proposals.service import committing

    with _remembering(settings) as remembering:
        memory = remembering.memory
        history = GitHistory(settings, memory.audit)
        try:
            dreamer = Dreamer(memory, remembering.graph, settings, Templates(settings.prompts_dir),
                              episodes=remembering.episodes, procedures=remembering.procedures,
                              before_run=history.flush)  # fmt: skip
            yield Reflector(settings, dreamer, remembering.core, proposals=committing(settings, remembering))
        finally:
            history.close()


def _reflect(settings: Settings, args: argparse.Namespace) -> int:
    from rockmem_mcp.consolidation.reflection_triggers import ReflectionTriggers
    from rockmem_mcp.llm import language_model

    resolving = args.approve or args.reject is not None
    if resolving and not args.id:
        print("rockmem-mcp: --approve and --reject need the reflection's id, e.g. r-003", file=sys.stderr)
        return 2
    with _reflector(settings) as reflector:
        if args.every is not None:
            triggers = ReflectionTriggers(settings, lambda: reflector, llm=lambda: language_model(settings))
            print(f"reflection sidecar: schedule {settings.reflection_at} local, threshold "
                  f"{settings.reflection_threshold}; checking every {args.every:g} s", file=sys.stderr)  # fmt: skip
            while True:
                try:
                    done = triggers.tick()
                except (RockmemError, OSError) as exc:  # said, and tried again at the next check
                    print(f"rockmem-mcp: reflection: {exc}", file=sys.stderr, flush=True)
                    done = None
                if done is not None:
                    print(f"{done.id} ({done.trigger}): {done.status}, {len(done.actions)} actions", file=sys.stderr,
                          flush=True)  # fmt: skip
                time.sleep(args.every)
        if args.run:
            llm = language_model(settings)
            try:
                shown = [reflector.run("manual", llm)]
            finally:
                if llm is not None:
                    llm.close()
        elif args.reject is not None:
            shown = [reflector.resolve(args.id, "reject", reason=args.reject)]
        elif args.approve:
            chosen = [a.strip() for a in args.actions.split(",") if a.strip()] if args.actions else None
            edits = json_argument(args.edits, "--edits") if args.edits else None
            decision = "approve_with_changes" if edits else "partial" if chosen else "approve"
            shown = [reflector.resolve(args.id, decision, chosen, edits)]
        elif args.id:
            shown = [reflector.get(args.id)]
        else:
            shown = reflector.pending()
    if args.json:
        print(json.dumps([r.model_dump(mode="json") for r in shown], indent=2))
        return 0
    if not shown:
        print("no reflection is waiting for approval", file=sys.stderr)
    for reflection in shown:
        if reflection.status == "pending" or (args.id and not resolving):
            print(reflection.summary)
        else:
            resolution = reflection.resolution
            applied = ", ".join(f"{n} {k}" for k, n in (resolution.applied if resolution else {}).items())
            print(f"{reflection.id}: {reflection.status}; applied {applied or 'nothing'}")
    return 0


def _proposals(settings: Settings, args: argparse.Namespace) -> int:
    """The user reviewing at the command line: a commit is theirs (manual review mode needs no more)."""
    from rockmem_mcp.proposals.service import Proposals, committing, line
    from rockmem_mcp.proposals.shapes import ProposalResult

    if args.action == "list":
        proposals = Proposals(settings, audit_service(settings))
        found = proposals.history() if args.all else [*proposals.pending(), *proposals.deferred()]
        if args.json:
            print(ProposalResult(proposals=found).model_dump_json(indent=2, by_alias=True))
        for proposal in [] if args.json else found:
            print(line(proposal) + ("" if proposal.status == "pending" else f" [{proposal.status}]"))
        return 0
    if not args.id:
        print(f"rockmem-mcp: proposals {args.action} needs the proposal's id", file=sys.stderr)
        return 2
    if args.action != "commit":
        proposals = Proposals(settings, audit_service(settings))
        done = (
            proposals.reject(args.id, args.reason) if args.action == "reject" else proposals.defer(args.id, args.reason)
        )
    else:
        with _remembering(settings) as remembering:
            done = committing(settings, remembering).commit(args.id, args.store, user_confirmed=True)
    if args.json:
        print(done.model_dump_json(indent=2, by_alias=True))
    else:
        print(line(done) + f" [{done.status}" + (f": {', '.join(done.committed_as)}]" if done.committed_as else "]"))
    return 0


@contextlib.contextmanager
def _remembering(settings: Settings) -> Iterator[Any]:
    """Every store a remember (or a committed proposal) may write, opened for one command."""
    from rockmem_mcp.core.service import CoreMemory
    from rockmem_mcp.episodes.service import Episodes
    from rockmem_mcp.procedures.service import Procedures
    from rockmem_mcp.recall.remembering import Remembering

    with memory_service(settings) as memory, graph_service(settings) as graph:
        episodes = Episodes(settings, reinforcer=memory.reinforcer)
        procedures = Procedures(settings, memory.reinforcer)
        yield Remembering(settings, memory, episodes, procedures, CoreMemory(settings, memory), lambda: graph)


COMMANDS = {
    "reflect": _reflect,
    "proposals": _proposals,
}
