"""Middleware that answers malformed requests with errors a model (or a person) can act on in one reading.

- A tool called with an argument it does not have (`categroy`, `tag`) is refused, naming the closest valid
  one and all of them. The SDK ignores unknown arguments, so a misspelt filter was silently dropped and the
  memory saved or searched without it.
- A tool argument the schema refuses (out of range, not one of the choices, the wrong type) is answered with
  one line per argument saying what to change, instead of pydantic's dump with its type codes and a URL.
- An unknown prompt is INVALID_PARAMS (-32602) naming the prompts; the SDK answered code 0.
- A resource that does not exist is -32002, the MCP specification's "Resource not found"; the SDK answered
  -32602 for an unknown address and -32603 for a memory id that is not there.
Each is an isError tool result or a JSON-RPC error as the SDK would send, so clients need nothing new.
"""

from __future__ import annotations

import difflib
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, CallToolResult, TextContent
from pydantic import ValidationError

RESOURCE_NOT_FOUND = -32002  # the MCP specification's code for a resource that does not exist
_SHOWN_INPUT = 60  # characters of a refused value repeated in the message


class CheckedRequests:
    """The middleware; `server` is set once the server exists."""

    def __init__(self) -> None:
        self.server: MCPServer[Any] | None = None

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        params = ctx.params
        if self.server is None or not isinstance(params, dict):
            return await call_next(ctx)
        if ctx.method == "tools/call":
            name = str(params.get("name"))
            refusal = self._refused_arguments(name, params.get("arguments"))
            if refusal is not None:  # worded as every other tool error is (the SDK's prefix), so models see one form
                text = f"Error executing tool {name}: {refusal}"
                return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)
        elif ctx.method == "prompts/get":
            names = [prompt.name for prompt in await self.server.list_prompts()]
            if params.get("name") not in names:
                listed = ", ".join(repr(n) for n in names)
                raise MCPError(INVALID_PARAMS, f"no prompt named {params.get('name')!r}; the prompts are {listed}")
        elif ctx.method == "resources/read":
            try:
                return await call_next(ctx)
            except MCPError as exc:
                # The SDK's "Unknown resource" (no resource or template matches the address) is INVALID_PARAMS.
                if exc.error.code == INVALID_PARAMS and exc.error.message.startswith("Unknown resource"):
                    raise MCPError(
                        RESOURCE_NOT_FOUND,
                        f"no resource at {params.get('uri')!r}; resources/list and resources/templates/list "
                        "give the addresses",
                        exc.error.data,
                    ) from exc
                raise
        return await call_next(ctx)

    def _refused_arguments(self, name: str, arguments: object) -> str | None:
        """Why the arguments cannot be taken (None: they can, or the tool is unknown, which the SDK answers)."""
        assert self.server is not None
        tool = self.server._tool_manager.get_tool(name)  # the SDK has no public accessor for a tool's model
        if tool is None or not isinstance(arguments, dict | None):
            return None
        given = arguments or {}
        valid = list(tool.parameters.get("properties", {}))
        unknown = [key for key in given if key not in valid]
        if unknown:
            return unknown_arguments(name, unknown, valid)
        try:
            tool.fn_metadata.validate_arguments(given)
        except ValidationError as exc:
            return invalid_arguments(name, exc)
        return None


def unknown_arguments(tool: str, unknown: list[str], valid: list[str]) -> str:
    parts = []
    for key in unknown:
        close = difflib.get_close_matches(key, valid, n=1, cutoff=0.6)
        parts.append(f"{key!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
    noun = "argument" if len(unknown) == 1 else "arguments"
    listed = ", ".join(valid) or "none"
    return f"{tool} has no {noun} {', '.join(parts)}; its arguments are: {listed}. Nothing was done."


def invalid_arguments(tool: str, exc: ValidationError) -> str:
    """One line for pydantic's errors: each argument, what it must be, and what was given."""
    problems = []
    for error in exc.errors(include_url=False):
        where = ".".join(str(part) for part in error["loc"]) or "arguments"
        message = str(error["msg"])
        message = message[:1].lower() + message[1:]
        if error["type"] == "missing":
            problems.append(f"{where!r} is required")
            continue
        shown = repr(error.get("input"))
        if len(shown) > _SHOWN_INPUT:
            shown = shown[: _SHOWN_INPUT - 3] + "..."
        problems.append(f"{where!r}: {message} (got {shown})")
    return f"invalid arguments for {tool}: {'; '.join(problems)}. Nothing was done."
