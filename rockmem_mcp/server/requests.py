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
            name, arguments = str(params.get("name")), params.get("arguments")
            refusal = self._unknown_arguments(name, arguments)
            if refusal is None:
                result = await call_next(ctx)
                # Validated once, by the SDK, on every call; only a refused call is validated again, for the words.
                if not _failed(result) or (refusal := self._invalid_arguments(name, arguments)) is None:
                    return result
            # Worded as every other tool error is (the SDK's prefix), so a model sees one form.
            text = f"Error executing tool {name}: {refusal}"
            return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)
        elif ctx.method == "prompts/get":
            prompts = {prompt.name: prompt for prompt in await self.server.list_prompts()}
            prompt = prompts.get(str(params.get("name")))
            if prompt is None:
                listed = ", ".join(repr(n) for n in prompts)
                wanted = _shown(params.get("name"))
                raise MCPError(INVALID_PARAMS, f"no prompt named {wanted}; the prompts are {listed}")
            given = params.get("arguments") or {}
            valid = [argument.name for argument in prompt.arguments or []]
            unknown = [key for key in given if key not in valid] if isinstance(given, dict) else []
            if unknown:  # the SDK answers "Internal server error" and logs a traceback
                raise MCPError(INVALID_PARAMS, unknown_arguments(f"the prompt {prompt.name!r}", unknown, valid))
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

    def _tool(self, name: str, arguments: object) -> Any:
        """The tool called, or None (unknown, which the SDK answers; arguments that are not an object)."""
        assert self.server is not None
        if not isinstance(arguments, dict | None):
            return None
        return self.server._tool_manager.get_tool(name)  # the SDK has no public accessor for a tool's model

    def _unknown_arguments(self, name: str, arguments: object) -> str | None:
        tool = self._tool(name, arguments)
        if tool is None:
            return None
        valid = list(tool.parameters.get("properties", {}))
        unknown = [key for key in arguments or {} if key not in valid]  # type: ignore[union-attr]
        return unknown_arguments(name, unknown, valid) if unknown else None

    def _invalid_arguments(self, name: str, arguments: object) -> str | None:
        """What the schema refuses in `arguments`, in one line (None: they are valid; the tool failed itself)."""
        tool = self._tool(name, arguments)
        if tool is None:
            return None
        try:
            tool.fn_metadata.validate_arguments(arguments or {})
        except ValidationError as exc:
            return invalid_arguments(name, exc)
        return None


def _failed(result: object) -> bool:
    if isinstance(result, CallToolResult):
        return bool(result.is_error)
    return isinstance(result, dict) and bool(result.get("isError") or result.get("is_error"))


def unknown_arguments(tool: str, unknown: list[str], valid: list[str]) -> str:
    parts = []
    for key in unknown[:5]:
        close = difflib.get_close_matches(key, valid, n=1, cutoff=0.6)
        parts.append(_shown(key) + (f" (did you mean {close[0]!r}?)" if close else ""))
    if len(unknown) > 5:
        parts.append(f"and {len(unknown) - 5} more")
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
            problems.append(f"{_shown(where)} is required")
            continue
        problems.append(f"{_shown(where)}: {message} (got {_shown(error.get('input'))})")
    return f"invalid arguments for {tool}: {'; '.join(problems)}. Nothing was done."


def _shown(value: object) -> str:
    """`value` as repr, cut to _SHOWN_INPUT characters: a message repeats what was given, not all of it."""
    shown = repr(value)
    return shown if len(shown) <= _SHOWN_INPUT else shown[: _SHOWN_INPUT - 3] + "..."
