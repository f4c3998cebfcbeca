"""Resource subscriptions: a client subscribed to a resource (`rockmem://recall`, `rockmem://core`,
`rockmem://memory/{id}`, any other) is told (`notifications/resources/updated`) when what it reads there changes.
Clients before 2026-07-28 subscribe with `resources/subscribe` and `resources/unsubscribe`; from 2026-07-28 a
`subscriptions/listen` stream names its resources (`resource_subscriptions`) for as long as it is open, and the
SDK's listen handler delivers what is published on the server's subscription bus to the streams that asked.

How a change is found: after every tool call while anything is subscribed, each subscribed resource is read
again and its digest compared with the last one sent; a resource that changed, or stopped existing, is
notified to every session subscribed to it (an address that holds nothing yet may be subscribed to: its
appearing is a change). Reading is what a client would do, so whatever changes a
resource (a save, a dream, core memory edited through a tool) is caught, with no hook in the services; a
change made by another process on the same home is seen at this server's next tool call.
"""

from __future__ import annotations

import hashlib
import logging
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.subscriptions import ListenHandler, ResourceUpdated
from mcp_types import (
    EmptyResult,
    SubscribeRequestParams,
    SubscriptionsListenRequestParams,
    SubscriptionsListenResult,
    UnsubscribeRequestParams,
)

log = logging.getLogger(__name__)

GONE = "gone"  # the digest of a resource that can no longer be read


class ResourceSubscriptions:
    """The subscriptions of every session of one server, and the middleware that notifies them."""

    def __init__(self) -> None:
        self.server: MCPServer[Any] | None = None
        self._sessions: dict[str, dict[int, Any]] = {}  # uri -> {id(connection): its session}
        self._listening: dict[str, int] = {}  # uri -> open listen streams naming it (2026-07-28)
        self._digests: dict[str, str] = {}  # uri -> digest of what was last read there
        self._listen: ListenHandler | None = None

    def register(self, server: MCPServer[Any]) -> None:
        self.server = server
        lowlevel = server._lowlevel_server  # the SDK has no public way to add these two handlers
        lowlevel.add_request_handler("resources/subscribe", SubscribeRequestParams, self._subscribe)
        lowlevel.add_request_handler("resources/unsubscribe", UnsubscribeRequestParams, self._unsubscribe)
        # The SDK's own listen handler, over the server's bus, wrapped to learn which resources streams watch.
        self._listen = ListenHandler(server._subscriptions)
        lowlevel.add_request_handler("subscriptions/listen", SubscriptionsListenRequestParams, self._listen_stream)
        server.middleware.append(self)

    async def _listen_stream(
        self, ctx: ServerRequestContext[Any, Any], params: SubscriptionsListenRequestParams
    ) -> SubscriptionsListenResult:
        """One 2026-07-28 listen stream: its resources are watched (read now, so a later change is seen) for as
        long as it is open."""
        assert self._listen is not None
        uris = [str(uri) for uri in params.notifications.resource_subscriptions or ()]
        for uri in uris:
            if uri not in self._digests:
                self._digests[uri] = await self._digest(ctx, uri)
            self._listening[uri] = self._listening.get(uri, 0) + 1
        try:
            return await self._listen(ctx, params)
        finally:
            for uri in uris:
                self._listening[uri] -= 1
                if not self._listening[uri]:
                    del self._listening[uri]
                    if uri not in self._sessions:
                        self._digests.pop(uri, None)

    async def _subscribe(self, ctx: ServerRequestContext[Any, Any], params: SubscribeRequestParams) -> EmptyResult:
        uri = str(params.uri)
        # An address with nothing there yet may be subscribed to: the client is told when something appears.
        digest = await self._digest(ctx, uri)
        self._sessions.setdefault(uri, {})[_connection_of(ctx)] = ctx.session
        self._digests[uri] = digest
        return EmptyResult()

    async def _unsubscribe(self, ctx: ServerRequestContext[Any, Any], params: UnsubscribeRequestParams) -> EmptyResult:
        uri = str(params.uri)
        sessions = self._sessions.get(uri, {})
        sessions.pop(_connection_of(ctx), None)
        if not sessions:
            self._sessions.pop(uri, None)
            if uri not in self._listening:
                self._digests.pop(uri, None)
        return EmptyResult()

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        result = await call_next(ctx)
        if (self._sessions or self._listening) and ctx.method == "tools/call":
            await self._notify_changed(ctx)
        return result

    async def _notify_changed(self, ctx: ServerRequestContext[Any, Any]) -> None:
        for uri in [*self._sessions, *(u for u in self._listening if u not in self._sessions)]:
            digest = await self._digest(ctx, uri)
            if digest == self._digests.get(uri):
                continue
            self._digests[uri] = digest
            if uri in self._listening:
                assert self.server is not None
                await self.server._subscriptions.publish(ResourceUpdated(uri=uri))  # the SDK routes it to streams
            sessions = self._sessions.get(uri, {})
            for key, session in list(sessions.items()):
                try:
                    await session.send_resource_updated(uri)
                except Exception as exc:  # a closed session: it hears nothing more
                    log.info("resource update for %s not sent (%s); the session's subscription ends", uri, exc)
                    sessions.pop(key, None)

    async def _read(self, ctx: ServerRequestContext[Any, Any], uri: str) -> list[Any]:
        assert self.server is not None
        return list(await self.server.read_resource(uri, Context(request_context=ctx, mcp_server=self.server)))

    async def _digest(self, ctx: ServerRequestContext[Any, Any], uri: str) -> str:
        try:
            return _digest_of(await self._read(ctx, uri))
        except Exception:  # not there any more, or unreadable now (MCPError included): either way it changed
            return GONE


def _connection_of(ctx: ServerRequestContext[Any, Any]) -> int:
    """Which client connection a request came on: the SDK makes a session object per request, around the one
    connection object it keeps per client (not public: a private attribute, falling back to the session)."""
    return id(getattr(ctx.session, "_connection", ctx.session))


def _digest_of(contents: list[Any]) -> str:
    digest = hashlib.sha256()
    for item in contents:
        data = item.content
        digest.update(data if isinstance(data, bytes) else str(data).encode())
    return digest.hexdigest()
