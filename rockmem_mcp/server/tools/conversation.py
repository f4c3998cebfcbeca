"""Conversation tools: record a turn (compacting the window when due), read the recent window."""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import Context, MCPServer, Resolve, Sample
from mcp.types import CreateMessageResult, SamplingMessage, TextContent, ToolAnnotations
from pydantic import Field

from rockmem_mcp.models import Conversation, Role, TurnRecorded
from rockmem_mcp.server.context import default_session_id, services
from rockmem_mcp.server.tools import reports_errors

SAMPLING_MAX_TOKENS = 4096
SessionId = Annotated[
    str | None, Field(description="Conversation to use, e.g. 'chat-42'; default: this MCP session's own")
]


def client_model_compaction(
    role: str, ctx: Context, session_id: str | None = None, tokens_used: int = 0, token_limit: int = 0
) -> Sample | None:
    """In auto with no model of the server's own, ask the calling client's model (MCP sampling) for the facts
    and summary when this call will compact the session and the client offers sampling; otherwise None. Runs
    before the tool, possibly more than once: it reads and changes nothing."""
    svc = services(ctx)
    compactor, capabilities = svc.compactor, ctx.client_capabilities
    if compactor is None or role == "summary" or svc.settings.encode_driver != "auto" or compactor.driver() != "rules":
        return None
    if capabilities is None or capabilities.sampling is None:
        return None
    session = session_id or default_session_id(ctx)
    prompt = compactor.sample_prompt(session) if compactor.will_compact(session, tokens_used, token_limit) else None
    if prompt is None:
        return None
    system, user = prompt
    message = SamplingMessage(role="user", content=TextContent(type="text", text=user))
    return Sample([message], max_tokens=SAMPLING_MAX_TOKENS, system_prompt=system, temperature=0.0)


def register(server: MCPServer) -> None:
    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False))
    @reports_errors
    def record_turn(
        role: Annotated[Role, Field(description="Who spoke; summary: yours of the older turns")],
        content: Annotated[str, Field(description="What was said")],
        ctx: Context,
        session_id: SessionId = None,
        tokens_used: Annotated[
            int, Field(description="Your context's tokens: 60% of token_limit: flush, 70%: compact")
        ] = 0,
        token_limit: Annotated[int, Field(description="Your context's size")] = 0,
        sampled: Annotated[CreateMessageResult | None, Resolve(client_model_compaction)] = None,
    ) -> TurnRecorded:
        """Add a turn to the conversation window (50 turns: then all but the last 4 are saved to memory and
        replaced by a summary turn; a session idle for an hour is forgotten)."""
        svc = services(ctx)
        session = session_id or default_session_id(ctx)
        if svc.compactor is None:
            turn, compaction = svc.conversation.record(session, role, content), None
        else:
            answer = None if sampled is None else getattr(sampled.content, "text", "")  # no text: invalid
            turn, compaction = svc.compactor.record(session, role, content, tokens_used, token_limit, answer)
        found = svc.triggers.respond(content) if svc.triggers is not None and role == "user" else None
        return TurnRecorded(**turn.model_dump(), trigger=found, compaction=compaction)

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    @reports_errors
    def get_conversation(
        ctx: Context,
        session_id: SessionId = None,
        last_n: Annotated[int, Field(ge=1, le=200, description="How many of the latest turns")] = 20,
    ) -> Conversation:
        """The latest turns of a conversation session, oldest first."""
        return services(ctx).conversation.recent(session_id or default_session_id(ctx), last_n)
