"""`logging/setLevel` (protocol versions before 2026-07-28): a client that sets a level is sent the server's own
log records at or above it as `notifications/message`, beside what goes to stderr.

Only records that exist are sent: the server logs at ROCKMEM_LOG_LEVEL (WARNING by default), so a client asking
for `debug` gets debug lines only from a server started with ROCKMEM_LOG_LEVEL=DEBUG (or -vv). Records come
from any thread (the tools run in worker threads); each is handed to the event loop, which sends it. A session
that can no longer be sent to is dropped.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp_types import EmptyResult, SetLevelRequestParams

from rockmem_mcp.server.tenancy import scope

PACKAGE_LOGGER = "rockmem_mcp"
# MCP's syslog levels as Python's, and back.
LEVELS = {
    **{"debug": 10, "info": 20, "notice": 25, "warning": 30, "error": 40},
    **{"critical": 50, "alert": 50, "emergency": 50},
}


def mcp_level(levelno: int) -> str:
    for name in ("critical", "error", "warning", "notice", "info"):
        if levelno >= LEVELS[name]:
            return name
    return "debug"


class ClientLogging(logging.Handler):
    """The sessions that asked for log messages, as a handler on the package's logger."""

    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self._lock = threading.Lock()
        # connection -> (its session, the level it asked for, the loop that sends, its tenant)
        self._sessions: dict[int, tuple[Any, int, asyncio.AbstractEventLoop, str]] = {}

    def register(self, server: MCPServer[Any]) -> None:
        lowlevel = server._lowlevel_server  # the SDK has no public way to add this handler
        lowlevel.add_request_handler("logging/setLevel", SetLevelRequestParams, self._set_level)

    def close(self) -> None:
        """At the server's end: nothing more is sent, and the handler leaves the logger."""
        with self._lock:
            self._sessions.clear()
        logging.getLogger(PACKAGE_LOGGER).removeHandler(self)
        super().close()

    async def _set_level(self, ctx: ServerRequestContext[Any, Any], params: SetLevelRequestParams) -> EmptyResult:
        connection = id(getattr(ctx.session, "_connection", ctx.session))  # see server/subscriptions.py
        with self._lock:
            self._sessions[connection] = (ctx.session, LEVELS[params.level], asyncio.get_running_loop(), scope())
        logger = logging.getLogger(PACKAGE_LOGGER)
        if self not in logger.handlers:
            logger.addHandler(self)
        return EmptyResult()

    def emit(self, record: logging.LogRecord) -> None:
        # A record is sent to sessions of the tenant it was logged for (server/tenancy.py): one made while serving
        # a tenant, or by no request (the server's own work), reaches only that tenant's sessions, or the server's.
        mine = scope()
        with self._lock:
            wanted = [
                (key, s, loop) for key, (s, level, loop, whose) in self._sessions.items()
                if record.levelno >= level and whose == mine
            ]  # fmt: skip
        if not wanted:
            return
        message = {"message": self.format(record)}
        for key, session, loop in wanted:
            try:
                loop.call_soon_threadsafe(self._send, key, session, mcp_level(record.levelno), message, record.name)
            except RuntimeError:  # the loop is closed: the server has ended
                self._drop(key)

    def _send(self, key: int, session: Any, level: str, message: dict[str, str], name: str) -> None:
        task = asyncio.get_running_loop().create_task(session.send_log_message(level, message, logger=name))
        task.add_done_callback(lambda done: self._drop(key) if not done.cancelled() and done.exception() else None)

    def _drop(self, key: int) -> None:
        with self._lock:
            self._sessions.pop(key, None)
