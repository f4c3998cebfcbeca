"""MCP prompts: `recall`, `remember` and `memory-rules`, rendered from the markdown templates."""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.prompts.base import UserMessage
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS
from pydantic import Field

from rockmem_mcp.server.context import default_session_id, services, working_memory
from rockmem_mcp.server.tools import translating

# Prompts: a JSON-RPC error carrying the message (anything else reaches the client as "Error rendering prompt").
reports_prompt_errors = translating(lambda exc: MCPError(INVALID_PARAMS, str(exc)))


class RequiredPromptArguments:
    """Middleware: a prompt asked for without a required argument is refused with INVALID_PARAMS naming it.
    The SDK checks this before our code runs and answers a bare "Internal server error" (with a traceback in
    the log), which tells a client nothing. `server` is set once the server exists."""

    def __init__(self) -> None:
        self.server: MCPServer[Any] | None = None

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        params = ctx.params
        if ctx.method == "prompts/get" and self.server is not None and isinstance(params, dict):
            given = params.get("arguments") or {}
            for prompt in await self.server.list_prompts():
                if prompt.name == params.get("name") and isinstance(given, dict):
                    missing = [a for a in prompt.arguments or [] if a.required and a.name not in given]
                    if missing:
                        needed = ", ".join(f"{a.name!r} ({a.description})" for a in missing)
                        raise MCPError(INVALID_PARAMS, f"the prompt {prompt.name!r} needs the argument {needed}")
        return await call_next(ctx)


def register(server: MCPServer) -> None:
    @server.prompt("recall", title="Recall for this message")
    @reports_prompt_errors
    def recall(
        message: Annotated[str, Field(description="The user's message this turn")], ctx: Context
    ) -> list[UserMessage]:
        """The message to put before your model this turn: what memory recalls for the user's message (each
        memory once per session, as the recall tool), framed as data, followed by the message itself."""
        svc = services(ctx)
        block = svc.recall.build(message, default_session_id(ctx), working_memory(ctx))
        text = block.text or "(nothing recalled for this message)"
        return [UserMessage(svc.templates.render("recall", recall=text, message=message))]

    @server.prompt("remember", title="How to save memories well")
    @reports_prompt_errors
    def remember(
        ctx: Context,
        category: Annotated[
            str | None, Field(description="Only this category's branch of the list, e.g. 'project-context'")
        ] = None,
    ) -> list[UserMessage]:
        """How to save a memory that is found again: one fact per entry, category paths (with this memory's
        own categories, or one branch of them), tags, importance, and anti-patterns as "Don't X for Y — instead
        Z"."""
        svc = services(ctx)
        tree = svc.memory.categories()
        branch = (category or "").strip().strip("/")
        shown = [
            c for c in tree.categories if not branch or c.category == branch or c.category.startswith(branch + "/")
        ]
        listed = "\n".join(f"- {c.category} ({c.total})" for c in shown) or (
            f"- (nothing under {branch} yet)" if branch else "- (none yet)"
        )
        return [UserMessage(svc.templates.render("remember", categories=listed))]

    @server.prompt("memory-rules", title="When to recall, search, save and use working memory")
    @reports_prompt_errors
    def memory_rules(ctx: Context) -> list[UserMessage]:
        """The rules for using memory each turn: when to recall, search, save, correct, and use working memory."""
        return [UserMessage(services(ctx).templates.text("memory-rules"))]
