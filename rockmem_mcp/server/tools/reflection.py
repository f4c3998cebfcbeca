"""The reflect tool (seed 004 §10): run a reflection, show the pending ones, resolve one as the user decides."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations
from pydantic import Field

from rockmem_mcp.audit.service import process_actor
from rockmem_mcp.consolidation.shapes import ReflectResult
from rockmem_mcp.errors import InvalidInputError
from rockmem_mcp.server.context import services
from rockmem_mcp.server.tools import progress_of, reports_errors

ReflectAction = Literal["show", "run", "session_end", "approve", "approve_with_changes", "partial", "reject"]
ASK = "Show reflections[0].summary to the user and resolve it as they decide; never approve on your own."
CONFLICTS = "show reflections[0].contradictions and ask which is right; nothing was merged for them."


def register(server: MCPServer) -> None:
    @server.tool(
        title="Reflect (with approval)",
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False),
    )
    @reports_errors
    def reflect(
        ctx: Context,
        action: Annotated[
            ReflectAction, Field(description="show pending; run (session_end: a talk ended); resolve id")
        ] = "show",
        id: Annotated[str, Field(description="e.g. r-003")] = "",
        action_ids: Annotated[list[str], Field(description="partial: actions to apply")] = [],  # noqa: B006
        edits: Annotated[dict[str, dict[str, Any]], Field(description="{action id: {field: value}}")] = {},  # noqa: B006
        reason: Annotated[str, Field(description="reject: why")] = "",
    ) -> ReflectResult:
        """Consolidate memory into a proposal that changes nothing until the user resolves it."""
        svc = services(ctx)
        reflector = svc.reflector()
        if action == "show":
            shown = [reflector.get(id)] if id else reflector.pending() or reflector.recent(1)
            return ReflectResult(reflections=shown, next_step=ASK if any(r.status == "pending" for r in shown) else "")
        if process_actor(svc.settings.namespace) != "main":  # sub-agents and patrols read; the user decides
            raise InvalidInputError("only the main agent runs and resolves reflections; ask it to")
        if action in ("run", "session_end"):
            reflection = svc.reflect("session-end" if action == "session_end" else "manual", progress_of(ctx))
            pending = reflection.status == "pending"
            done = ASK if pending else "Applied: nothing to approve."
            if reflection.conflicts and not pending:  # a contradiction is the user's to decide, approval or not
                done += f" {len(reflection.conflicts)} contradictions wait for the user: {CONFLICTS}"
            return ReflectResult(reflections=[reflection], next_step=done)
        if not id:
            raise InvalidInputError(f"{action} needs id: the reflection to resolve (reflect shows the pending ones)")
        resolved = reflector.resolve(id, action, action_ids or None, edits or None, reason)
        return ReflectResult(reflections=[resolved], next_step="Tell the user what was applied.")
