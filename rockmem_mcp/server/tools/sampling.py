"""Asking the calling client's model (MCP sampling) to route a remember or compact a conversation, when no model
of the server's own does.

Resolvers run before a tool, possibly more than once: they read and change nothing. Each returns None when no
sample is wanted (a server model, another encode driver, no remember in the message, a client without
sampling); the tool then routes by its own driver.
"""

from __future__ import annotations

from mcp.server.mcpserver import Context, Sample
from mcp.types import CreateMessageResult, SamplingMessage, TextContent

from rockmem_mcp.server.context import default_session_id, services

ROUTE_MAX_TOKENS = 1024
COMPACTION_MAX_TOKENS = 4096


def _route_sample(text: str, ctx: Context) -> Sample | None:
    svc = services(ctx)
    capabilities = ctx.client_capabilities
    if svc.remembering is None or not svc.remembering.wants_sample() or not text.strip():
        return None
    if capabilities is None or capabilities.sampling is None:
        return None
    system, user = svc.remembering.prompt(text)
    message = SamplingMessage(role="user", content=TextContent(type="text", text=user))
    return Sample([message], max_tokens=ROUTE_MAX_TOKENS, system_prompt=system, temperature=0.0)


def remember_route(content: str, ctx: Context, route: dict | None = None) -> Sample | None:
    """remember: the client's model routes `content` unless the agent passed a route."""
    return None if route is not None else _route_sample(content, ctx)


def message_route(message: str, ctx: Context) -> Sample | None:
    """recall: a remember in the user's message, acted on (ROCKMEM_TRIGGER_MODE=act)."""
    triggers = services(ctx).triggers
    span = triggers.wants_sample(message) if triggers is not None else None
    return _route_sample(span, ctx) if span else None


def turn_route(role: str, content: str, ctx: Context) -> Sample | None:
    """record_turn: as recall, for a user's turn."""
    return message_route(content, ctx) if role == "user" else None


def compaction_sample(
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
    return Sample([message], max_tokens=COMPACTION_MAX_TOKENS, system_prompt=system, temperature=0.0)


def sampled_text(result: CreateMessageResult | None) -> str | None:
    if result is None:
        return None
    return result.content.text if isinstance(result.content, TextContent) else ""
