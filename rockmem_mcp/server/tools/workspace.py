"""Workspace tool: write one of the user's workspace files (toolset `workspace`, off by default)."""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations
from pydantic import Field

from rockmem_mcp.core.shapes import WorkspaceFileInfo
from rockmem_mcp.server.context import services
from rockmem_mcp.server.tools import reports_errors


def register(server: MCPServer) -> None:
    @server.tool(
        title="Write a workspace file",
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True),
    )
    @reports_errors
    def write_workspace_file(
        name: Annotated[str, Field(description="AGENTS.md, SOUL.md, USER.md or HEARTBEAT.md")],
        content: Annotated[str, Field(description="The whole new markdown text of the file")],
        ctx: Context,
        version: Annotated[
            str | None, Field(description="The version you read (rockmem://workspace); refused if it changed since")
        ] = None,
    ) -> WorkspaceFileInfo:
        """Replace one of the user's workspace files in the data home, only when the user asks you to.

        Read it first (rockmem://workspace/NAME) and pass its version from rockmem://workspace, so an edit
        made meanwhile is not lost: the write is then refused. Returns the file's new version and size.
        """
        return services(ctx).workspace.write(name, content, version)
