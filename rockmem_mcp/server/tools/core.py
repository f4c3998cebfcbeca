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
        block: Annotated[str | None, Field(description="Its name; read: omit for all")] = None,
        text: Annotated[str | None, Field(description="The line(s) to write")] = None,
        line: Annotated[int | None, Field(description="replace_line/remove_line: its number")] = None,
        version: Annotated[str | None, Field(description="Edits: your read's version")] = None,
    ) -> CoreMemoryView:
        """Core memory (MEMORY.md), loaded at every session start: four capped blocks, Identity (who the user
        is), Active Context (what is happening now), Persona (how to work with them), Critical Facts (pinned).
        Read it, then edit one block with the version you read, when something clearly important changes;
        other facts go to save_memory. Over a cap: summarise or prune first."""
        core = services(ctx).core
        if action == "read":
            return core.read(block)
        return core.edit(action, block or "", version or "", text, line)
