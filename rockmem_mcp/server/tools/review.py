"""Gated writes (seed 004 §13): the main agent's review tool, a gated sub-agent's save_memory, and the gate.

The decisions are the Proposals service's (proposals/service.py); this module only wires them: which tools a
gated sub-agent may call is toolsets.UNGATED plus the read-only ones, and every other call is answered with the
service's refusal before the tool runs.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from typing import Annotated, Any, Literal

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

from rockmem_mcp.config import Settings
from rockmem_mcp.errors import InvalidInputError
from rockmem_mcp.proposals.service import refusal
from rockmem_mcp.proposals.shapes import Proposal, ProposalResult, ProposalStore
from rockmem_mcp.server import toolsets
from rockmem_mcp.server.context import services
from rockmem_mcp.server.tools import reports_errors
from rockmem_mcp.server.tools.memory import Category, Content, Importance, Metadata, Pinned, Tags


def register(server: MCPServer) -> None:
    @server.tool(
        title="Review sub-agents' proposals",
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False),
    )
    @reports_errors
    def review_proposals(
        ctx: Context,
        action: Annotated[Literal["list", "commit", "reject", "defer"], Field(description="What to do")] = "list",
        id: Annotated[str, Field(description="Proposal id (#…)")] = "",
        store: Annotated[ProposalStore | None, Field(description="commit: another store")] = None,
        reason: Annotated[str, Field(description="reject (required) or defer: why")] = "",
        user_confirmed: Annotated[bool, Field(description="manual review mode: the user agreed")] = False,
    ) -> ProposalResult:
        """Sub-agents' memory proposals: list, or commit, reject or defer one. Of two marked conflict, keep one."""
        proposals = services(ctx).proposals
        assert proposals is not None  # the lifespan builds it
        if action == "list":
            return ProposalResult(proposals=[*proposals.pending(), *proposals.deferred()])
        if not id:
            raise InvalidInputError(f"{action} needs id: a proposal id review_proposals listed")
        if action == "commit":
            done = proposals.commit(id, store, user_confirmed=user_confirmed)
            note = f"committed as {', '.join(done.committed_as) or 'nothing new'}"
        elif action == "reject":
            done, note = proposals.reject(id, reason), "rejected"
        else:
            done, note = proposals.defer(id, reason), "deferred for reflection"
        return ProposalResult(proposals=[done], note=note)


def register_gated(server: MCPServer) -> None:
    """A gated sub-agent's save_memory: the same parameters, and a proposal comes back (its description says
    so, so the sub-agent's model knows). Replaces the one tools/memory.py registered (none when the memory
    toolset is off: the server left it out)."""
    with contextlib.suppress(ToolError):
        server.remove_tool("save_memory")

    @server.tool(
        name="save_memory",
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False),
    )
    @reports_errors
    def save_memory(
        content: Content,
        ctx: Context,
        category: Category = None,
        tags: Tags = None,
        metadata: Metadata = None,
        importance: Importance = None,
        pinned: Pinned = None,
    ) -> Proposal:
        """Propose something worth remembering across sessions: you are a sub-agent with gated writes, so it
        is filed as a proposal (its id comes back) that the main agent reviews and commits to memory."""
        proposals = services(ctx).proposals
        assert proposals is not None
        return proposals.propose_save(content, category, tags, importance, bool(pinned))


def gated_tools(settings: Settings, tools: Iterable[Any]) -> frozenset[str]:
    """The names among `tools` (the server's) that a gated sub-agent may not call: all but toolsets.UNGATED
    and those annotated read-only."""
    return frozenset(
        tool.name
        for tool in tools
        if tool.name not in toolsets.UNGATED and not (tool.annotations and tool.annotations.read_only_hint)
    )


# Tools that only read with these arguments (name -> (argument, its read values, its default)): a gated
# sub-agent may read core memory, the graph and dream reports as it may call the read-only tools.
READ_CALLS: dict[str, tuple[str, frozenset[str], str]] = {
    "core_memory": ("action", frozenset({"read"}), "read"),
    "graph": ("action", frozenset({"find", "get", "traverse"}), ""),
    "dream": ("action", frozenset({"report"}), "start"),
}


def _reads(name: str, arguments: object) -> bool:
    argument, values, default = READ_CALLS.get(name, ("", frozenset(), ""))
    if not argument or not isinstance(arguments, dict):
        return False
    value = arguments.get(argument, default)
    return isinstance(value, str) and value in values  # anything else is refused, never looked up


class GatedWrites:
    """Middleware: a call of a gated tool is answered with the service's refusal (an isError result naming
    what to do instead); the tool never runs."""

    def __init__(self, settings: Settings, refused: frozenset[str]) -> None:
        self.settings = settings
        self.refused = refused

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        params = ctx.params
        if (
            ctx.method == "tools/call"
            and isinstance(params, dict)
            and params.get("name") in self.refused
            and not _reads(str(params["name"]), params.get("arguments") or {})
        ):
            message = str(refusal(self.settings, str(params["name"])))
            return CallToolResult(content=[TextContent(type="text", text=message)], is_error=True)
        return await call_next(ctx)
