"""Episode tools: record what happened, and a user's explicit delete (toolset `episodes`, off by default).

Reading needs no tool: search_memory finds episodes (store `episodes`), recall routes "when did …" to them, and
rockmem://episodes/{date} is a day's log.
"""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations
from pydantic import Field

from rockmem_mcp.models import Confidence, Episode, EpisodeSource, EpisodeType
from rockmem_mcp.server.context import services
from rockmem_mcp.server.tools import reports_errors


def register(server: MCPServer) -> None:
    @server.tool(
        title="Record an episode",
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False),
    )
    @reports_errors
    def record_episode(
        content: Annotated[str, Field(description="What happened, in a sentence or a few")],
        ctx: Context,
        type: EpisodeType = "event",
        confidence: Confidence = "medium",
        tags: Annotated[list[str] | None, Field(description="Topical tags, e.g. ['deploy']")] = None,
        source: EpisodeSource = "conversation",
    ) -> Episode:
        """Log an event in today's episode log (append-only; it is never edited).

        For what happened and when (a decision taken, a task done); lasting facts go to save_memory, which
        logs an episode itself.
        """
        return services(ctx).episodes.record(content, type, confidence, tags, source)

    @server.tool(
        title="Delete an episode",
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True),
    )
    @reports_errors
    def delete_episode(
        id: Annotated[str, Field(description="The episode's id")],
        ctx: Context,
    ) -> Episode:
        """Erase one episode, only when the user explicitly asks; returns what was erased."""
        return services(ctx).episodes.remove(id)
