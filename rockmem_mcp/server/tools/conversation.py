"""Conversation tools: record a turn (compacting the window when due), read the recent window."""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import Context, MCPServer, Resolve
from mcp.types import CreateMessageResult, ToolAnnotations
from pydantic import Field

from rockmem_mcp.models import Conversation, Role, TurnRecorded
from rockmem_mcp.server.context import default_session_id, services
from rockmem_mcp.server.tools import reports_errors
from rockmem_mcp.server.tools.sampling import compaction_sample, sampled_text, turn_route

SessionId = Annotated[str | None, Field(description="e.g. 'chat-42'; default this session's")]


def register(server: MCPServer) -> None:
    @server.tool(
        title="Record a conversation turn",
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False),
    )
    @reports_errors
    def record_turn(
        role: Annotated[Role, Field(description="Who spoke; summary: yours of the older turns")],
        content: Annotated[str, Field(description="What was said")],
        ctx: Context,
        session_id: SessionId = None,
        routed: Annotated[CreateMessageResult | None, Resolve(turn_route)] = None,
        tokens_used: Annotated[
            int, Field(description="Your context's tokens (60% of token_limit: flush; 70%: compact)")
        ] = 0,
        token_limit: Annotated[int, Field(description="Your context's size")] = 0,
        sampled: Annotated[CreateMessageResult | None, Resolve(compaction_sample)] = None,
    ) -> TurnRecorded:
        """Add a turn to the conversation window; a full window (50 turns) is saved to memory and summarised,
        keeping the last 4."""
        svc = services(ctx)
        session = session_id or default_session_id(ctx)
        if svc.compactor is None:
            turn, compaction = svc.conversation.record(session, role, content), None
        else:
            answer = sampled_text(sampled)
            turn, compaction = svc.compactor.record(session, role, content, tokens_used, token_limit, answer)
        found = None
        if svc.triggers is not None and role == "user":
            found = svc.triggers.respond(content, sampled=sampled_text(routed))
        return TurnRecorded(**turn.model_dump(), trigger=found, compaction=compaction)

    @server.tool(title="Read the conversation window", annotations=ToolAnnotations(read_only_hint=True))
    @reports_errors
    def get_conversation(
        ctx: Context,
        session_id: SessionId = None,
        last_n: Annotated[int, Field(ge=1, le=200, description="How many of the latest turns")] = 20,
    ) -> Conversation:
        """The latest turns of a conversation session, oldest first."""
        return services(ctx).conversation.recent(session_id or default_session_id(ctx), last_n)
