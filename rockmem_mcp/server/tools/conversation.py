"""Conversation tools: record a turn, read the recent window."""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import Context, MCPServer, Resolve
from mcp.types import CreateMessageResult, ToolAnnotations
from pydantic import Field

from rockmem_mcp.models import Conversation, Role, TurnRecorded
from rockmem_mcp.server.context import default_session_id, services
from rockmem_mcp.server.tools import reports_errors
from rockmem_mcp.server.tools.sampling import sampled_text, turn_route

SessionId = Annotated[
    str | None, Field(description="Conversation to use, e.g. 'chat-42'; default: this MCP session's own")
]


def register(server: MCPServer) -> None:
    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False))
    @reports_errors
    def record_turn(
        role: Annotated[Role, Field(description="Who spoke: user, assistant, system or tool")],
        content: Annotated[str, Field(description="What was said")],
        ctx: Context,
        session_id: SessionId = None,
        sampled: Annotated[CreateMessageResult | None, Resolve(turn_route)] = None,
    ) -> TurnRecorded:
        """Add a turn to the conversation window (the latest 50 turns of a session are kept; a session idle
        for an hour is forgotten). With the conversation log on, the dream pass learns from it later."""
        svc = services(ctx)
        turn = svc.conversation.record(session_id or default_session_id(ctx), role, content)
        found = None
        if svc.triggers is not None and role == "user":
            found = svc.triggers.respond(content, sampled=sampled_text(sampled))
        return TurnRecorded(**turn.model_dump(), trigger=found)

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    @reports_errors
    def get_conversation(
        ctx: Context,
        session_id: SessionId = None,
        last_n: Annotated[int, Field(ge=1, le=200, description="How many of the latest turns")] = 20,
    ) -> Conversation:
        """The latest turns of a conversation session, oldest first."""
        return services(ctx).conversation.recent(session_id or default_session_id(ctx), last_n)
