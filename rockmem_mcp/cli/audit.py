"""The audit trail from the command line: `log`, `history`, `revert`, `alerts`, `audit-prune`."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import sys
from collections.abc import Iterator
from typing import Any

from rockmem_mcp.cli.common import graph_service, memory_service
from rockmem_mcp.config import Settings


def _alerts(settings: Settings, args: argparse.Namespace) -> int:
    """List pending critical-file alerts, or acknowledge them (a person's act: logged as `manual`)."""
    from rockmem_mcp.audit.service import MANUAL, Audit, acting_as
    from rockmem_mcp.governance.integrity import CriticalFiles

    critical = CriticalFiles(settings, Audit(settings))
    if args.ack:
        with acting_as(MANUAL):
            done = critical.acknowledge("all" if "all" in args.ack else args.ack)
        print(f"acknowledged {len(done)} alert(s)", file=sys.stderr)
        return 0
    pending = critical.pending()
    if args.json:
        items = [{**dataclasses.asdict(a), "time": a.time.isoformat()} for a in pending]
        print(json.dumps(items, ensure_ascii=False, indent=2))
        return 0
    for alert in pending:
        change = f" ({alert.change})" if alert.change else ""
        print(f"{alert.id}  {alert.time:%Y-%m-%d %H:%M} UTC  {alert.file} was {alert.summary}{change}")
    print(
        f"{len(pending)} pending alert(s)" + (": acknowledge with --ack ID or --ack all" if pending else ""),
        file=sys.stderr,
    )
    return 0


def _audit_prune(settings: Settings, args: argparse.Namespace) -> int:
    """Fold audit lines older than ROCKMEM_AUDIT_RETENTION_DAYS into the monthly digests (the dream does it too)."""
    from rockmem_mcp.audit.retention import ARCHIVE_NAME, fold_old_lines
    from rockmem_mcp.audit.service import audit_log
    from rockmem_mcp.models import utc_now

    result = fold_old_lines(settings, audit_log(settings), utc_now())
    if args.json:
        print(json.dumps(dataclasses.asdict(result)))
    else:
        months = f" ({', '.join(result.months)})" if result.months else ""
        print(
            f"folded {result.dropped} audit line(s) older than {settings.audit_retention_days} days into "
            f"meta/{ARCHIVE_NAME}{months}",
            file=sys.stderr,
        )
    return 0


@contextlib.contextmanager
def _audit_trail(settings: Settings, git: bool) -> Iterator[tuple[Any, Any]]:
    """The audit trail, and with `git` the home's history brought up to date (commits what is pending)."""
    from rockmem_mcp.audit.service import Audit
    from rockmem_mcp.governance.history import GitHistory
    from rockmem_mcp.governance.trail import AuditTrail

    audit = Audit(settings)
    history = GitHistory(settings, audit) if git else None
    try:
        yield AuditTrail(audit, history), history
    finally:
        if history is not None:
            history.close()


def _print_entries(entries: list[Any]) -> None:
    for entry in entries:
        print(f"{entry.time:%Y-%m-%dT%H:%M:%S}Z | {entry.action} | {entry.file} | {entry.actor} | {entry.approval} | "
              f"{entry.summary}")  # fmt: skip


def _log(settings: Settings, args: argparse.Namespace) -> int:
    """Read-only: runs beside a server."""
    from rockmem_mcp.audit.shapes import AuditResult
    from rockmem_mcp.governance.trail import parse_moment
    from rockmem_mcp.models import utc_now

    now = utc_now()
    with _audit_trail(settings, git=False) as (trail, _):
        entries = trail.entries(
            file=args.item,
            action=args.action,
            actor=args.actor,
            since=parse_moment(args.since, now, "--since") if args.since else None,
            until=parse_moment(args.until, now, "--until") if args.until else None,
            limit=args.limit,
        )
    if args.json:
        print(AuditResult(entries=entries).model_dump_json(indent=2))
    else:
        _print_entries(entries)
    return 0


def _history(settings: Settings, args: argparse.Namespace) -> int:
    with _audit_trail(settings, git=True) as (trail, _):
        result = trail.item_history(args.item, args.limit)
    if args.json:
        print(result.model_dump_json(indent=2))
        return 0
    for version in result.versions:
        state = "removed" if version.deleted else (version.text or "").replace("\n", " ")[:160]
        print(f"{version.time:%Y-%m-%dT%H:%M:%S}Z {version.commit[:12]} {version.file}: {state}")
        for change in version.changes:
            print(f"    {change.action} by {change.actor} ({change.approval}): {change.summary}")
    if not result.versions:
        _print_entries(result.entries)
    if result.note:
        print(result.note, file=sys.stderr)
    return 0


def _revert(settings: Settings, args: argparse.Namespace) -> int:
    from rockmem_mcp.audit.service import MANUAL, acting_as
    from rockmem_mcp.governance.rollback import Rollback
    from rockmem_mcp.governance.trail import parse_moment
    from rockmem_mcp.models import utc_now

    if sum(map(bool, (args.item, args.run, args.home_as_of))) != 1:
        print("rockmem-mcp: name exactly one of ITEM, --run or --home-as-of", file=sys.stderr)
        return 2
    with (
        memory_service(settings) as memory,
        graph_service(settings) as graph,
        _audit_trail(settings, git=True) as (_, history),
        acting_as(MANUAL),
    ):
        rollback = Rollback(settings, memory.audit, history, memory, graph=lambda: graph)
        if args.item:
            result = rollback.revert_item(args.item, args.to)
        elif args.run:
            result = rollback.revert_run(args.run)
        else:
            result = rollback.restore_home(parse_moment(args.home_as_of, utc_now(), "--home-as-of"))
        history.flush()
    if args.json:
        print(result.model_dump_json(indent=2))
        return 0
    print(f"{result.revert_id}: {len(result.restored)} restored, {len(result.removed)} removed as of "
          f"{result.restored_to[:12]}; undo it with: rockmem-mcp revert --run {result.revert_id}")  # fmt: skip
    for skip in result.skipped:
        print(f"skipped {skip.file}: {skip.reason}", file=sys.stderr)
    return 0


COMMANDS = {
    "alerts": _alerts,
    "audit-prune": _audit_prune,
    "log": _log,
    "history": _history,
    "revert": _revert,
}
