"""One module per tool group; each tool validates, calls a service and shapes the reply.

Owns: the tool groups (memory, working, recall, graph, episodes, procedures, core, workspace, conversation,
dream, reflection, review, forget, audit, sampling) and the error translation every tool shares.
Imports: the MCP SDK and the library's doors, as the rest of the server.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import ParamSpec, TypeVar

import anyio.from_thread
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError

from rockmem_mcp.errors import RockmemError, reporting_io_errors

P = ParamSpec("P")
R = TypeVar("R")


def translating(error: Callable[[RockmemError], Exception]) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """The one place domain errors become MCP errors (`error(exc)`: its message is what the model reads)."""

    def decorate(fn: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(fn)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            try:
                with reporting_io_errors(f"running {fn.__name__}"):  # never a bare "Error executing tool"
                    return fn(*args, **kwargs)
            except RockmemError as exc:
                raise error(exc) from exc

        # The docstring is the description clients show: without the source's indentation.
        wrapper.__doc__ = inspect.cleandoc(fn.__doc__) if fn.__doc__ else None
        return wrapper

    return decorate


reports_errors = translating(lambda exc: ToolError(str(exc)))  # tools: an isError result with the message


def progress_of(ctx: Context) -> Callable[[int, int, str], None]:
    """A service's progress callback (done, total, what) that sends `notifications/progress` to a client that
    asked (a progress token), from the worker thread a tool runs in; for any other client it does nothing."""

    def report(done: int, total: int, what: str) -> None:
        anyio.from_thread.run(ctx.report_progress, done, total, what)

    return report
