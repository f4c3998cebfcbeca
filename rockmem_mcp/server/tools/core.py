"""The core-memory tool: read MEMORY.md or edit one of its blocks."""

from __future__ import annotations

from typing import Annotated, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations
from pydantic import Field

from rockmem_mcp.core.shapes import CoreMemoryView
from rockmem_mcp.server.context import services
from rockmem_mcp.server.tools import reports_errors


def register(server: MCPServer) -> None:
    @server.tool(
        title="Read or edit core memory",
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False),
    )
    @reports_errors
    def core_memory(
        ctx: Context,
        action: Annotated[
            Literal["read", "append", "replace_line", "remove_line", "replace_block"],
            Field(description="read, or an edit of one block"),
        ] = "read",
        block: Annotated[
            str | None, Field(description="Identity, Active Context, Persona or Critical Facts; read: omit for all")
        ] = None,
        text: Annotated[str | None, Field(description="The line(s) to write")] = None,
        line: Annotated[
            int | None, Field(description="replace_line/remove_line: the line's number in the block")
        ] = None,
        version: Annotated[str | None, Field(description="Edits: the version your read gave")] = None,
    ) -> CoreMemoryView:
        """Core memory (MEMORY.md): the few facts always loaded at session start, in four capped blocks —
        Identity (who the user is), Active Context (what is happening now), Persona (how to work with them),
        Critical Facts (never to forget; pinned).

        Read it (with its version), then edit one block: append, replace_line, remove_line, replace_block.
        Edit when you learn something clearly important about the user, when the active context shifts, or
        when a critical fact needs correcting; everything else belongs in save_memory. An edit over a cap is
        refused: summarise or prune first. An edit of a version changed since you read it is refused: read
        again.
        """
        core = services(ctx).core
        if action == "read":
            return core.read(block)
        return core.edit(action, block or "", version or "", text, line)
