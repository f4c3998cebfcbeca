"""Procedure tools: save a learned workflow, archive, restore or delete one (toolset `procedures`, off by default).
Reading is by resource: rockmem://procedures and rockmem://procedures/{name}."""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations
from pydantic import Field

from rockmem_mcp.errors import InvalidInputError
from rockmem_mcp.models import ProcedureInfo
from rockmem_mcp.procedures.shapes import MAX_STEPS, MAX_TRIGGERS
from rockmem_mcp.server.context import services
from rockmem_mcp.server.tools import reports_errors

TRIGGER = "Short phrases a request for it contains, e.g. ['deploy', 'push to production']"
Name = Annotated[str, Field(description="The procedure's name, e.g. 'how-to-deploy' (any case)")]


def register(server: MCPServer) -> None:
    @server.tool(
        title="Save a procedure",
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False),
    )
    @reports_errors
    def save_procedure(
        name: Name,
        trigger: Annotated[list[str], Field(description=TRIGGER, min_length=1, max_length=MAX_TRIGGERS)],
        steps: Annotated[list[str], Field(description="What to do, in order", min_length=1, max_length=MAX_STEPS)],
        ctx: Context,
        notes: Annotated[list[str] | None, Field(description="Caveats and preferences")] = None,
        learned_from: Annotated[list[str] | None, Field(description="Episode or memory ids, or free text")] = None,
        reason: Annotated[str | None, Field(description="Why this version (kept in its history)")] = None,
        version: Annotated[
            int | None, Field(description="The version you read (0: create only); refused if it changed", ge=0)
        ] = None,
    ) -> ProcedureInfo:
        """Save a workflow you learned (how the user wants something done), or update it by name.

        An update replaces trigger, steps, notes and learned_from, and keeps the previous version in the
        procedure's history. recall offers it when a message contains every word of a trigger phrase.
        """
        procedures = services(ctx).procedures
        saved = procedures.save(name, trigger, steps, notes, learned_from, reason, version)
        return procedures.info(saved, "created" if saved.version == 1 else "updated")

    @server.tool(
        title="Delete a procedure",
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True),
    )
    @reports_errors
    def delete_procedure(
        name: Name,
        ctx: Context,
        permanent: Annotated[bool, Field(description="Erase it and its history instead of archiving it")] = False,
        restore: Annotated[bool, Field(description="Bring an archived procedure back instead")] = False,
        reason: Annotated[str | None, Field(description="Why it is retired (kept with the archive)")] = None,
    ) -> ProcedureInfo:
        """Retire a procedure that is wrong or no longer used: archived (kept, no longer offered or found) unless
        permanent; restore=true brings an archived one back."""
        if permanent and restore:
            raise InvalidInputError("permanent and restore exclude each other: pick one")
        procedures = services(ctx).procedures
        if restore:
            return procedures.info(procedures.restore(name), "restored")
        if permanent:
            return procedures.info(procedures.delete(name), "deleted")
        return procedures.info(procedures.archive(name, reason), "archived")
