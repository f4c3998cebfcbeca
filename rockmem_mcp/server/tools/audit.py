"""The audit tools (seed 004 §12.7–12.8): what changed, who did it and why, and putting it back."""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations
from pydantic import Field

from rockmem_mcp.audit.service import process_actor
from rockmem_mcp.audit.shapes import AuditResult
from rockmem_mcp.errors import InvalidInputError
from rockmem_mcp.governance.shapes import RevertResult
from rockmem_mcp.governance.trail import parse_moment
from rockmem_mcp.models import utc_now
from rockmem_mcp.server.context import services
from rockmem_mcp.server.tools import reports_errors


def register(server: MCPServer) -> None:
    @server.tool(
        title="Read the audit trail",
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True),
    )
    @reports_errors
    def audit(
        ctx: Context,
        item: Annotated[str, Field(description="Id or file: filters lines, or with history its versions")] = "",
        history: Annotated[bool, Field(description="Every version of item")] = False,
        action: Annotated[str, Field(description="E.g. ARCHIVE,DELETE")] = "",
        actor: Annotated[str, Field(description="E.g. dream, subagent:x, manual")] = "",
        since: Annotated[str, Field(description="ISO time, day or age (2h, 3d)")] = "",
        until: Annotated[str, Field(description="As since")] = "",
        limit: Annotated[int, Field(ge=1, le=500, description="Most lines or versions")] = 20,
        acknowledge: Annotated[list[str], Field(description="Alert ids the user saw, or ['all']")] = [],  # noqa: B006
    ) -> AuditResult:
        """Who changed what, when and why (newest first), or every version of one item; acknowledge alerts."""
        svc = services(ctx)
        trail = svc.audit_trail
        assert trail is not None  # the lifespan builds it
        if acknowledge:
            alerts = svc.critical_files
            if alerts is None:
                raise InvalidInputError("there are no critical-file alerts in this home")
            # The user's answer to "was this intentional?": never a sub-agent's to give.
            if process_actor(svc.settings.namespace) != "main":
                raise InvalidInputError("only the main agent acknowledges critical-file alerts, on the user's answer")
            done = alerts.acknowledge("all" if acknowledge == ["all"] else acknowledge)
            return AuditResult(note=f"acknowledged {len(done)} alert(s): {', '.join(a.id for a in done) or 'none'}")
        if history:
            if not item:
                raise InvalidInputError("history needs item: a memory id, entity id, procedure or file path")
            return trail.item_history(item, limit)
        now = utc_now()
        return AuditResult(
            entries=trail.entries(
                file=item or None,
                action=action or None,
                actor=actor or None,
                since=parse_moment(since, now, "since") if since else None,
                until=parse_moment(until, now, "until") if until else None,
                limit=limit,
            )
        )

    @server.tool(
        title="Revert a change",
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False),
    )
    @reports_errors
    def revert(
        ctx: Context,
        item: Annotated[str, Field(description="Id or file to put back")] = "",
        to: Annotated[str, Field(description="Commit or time; default: before its last change")] = "",
        run: Annotated[str, Field(description="Undo a whole run: dream:ID, reflection:ID or rv-… (a revert)")] = "",
        home_as_of: Annotated[str, Field(description="Restore every store as of this time")] = "",
    ) -> RevertResult:
        """Undo changes after the user agreed: one item, a whole run, or the whole home; itself revertable."""
        if sum(map(bool, (item, run, home_as_of))) != 1:
            raise InvalidInputError("pass exactly one of item, run or home_as_of")
        svc = services(ctx)
        rollback = svc.rollback
        assert rollback is not None  # the lifespan builds it
        if process_actor(svc.settings.namespace) != "main":  # sub-agents and patrols read; the main agent undoes
            raise InvalidInputError("only the main agent reverts, after the user agreed; ask it to")
        if item:
            return rollback.revert_item(item, to or None)
        if to:
            raise InvalidInputError("to goes with item; a run is undone whole, and home_as_of is its own time")
        if run:
            return rollback.revert_run(run)
        return rollback.restore_home(parse_moment(home_as_of, utc_now(), "home_as_of"))
