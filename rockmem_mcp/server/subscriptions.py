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
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ResourceUpdated
from mcp_types import (
    EmptyResult,
    SubscribeRequestParams,
    SubscriptionsListenRequestParams,
    SubscriptionsListenResult,
    UnsubscribeRequestParams,
)

from rockmem_mcp.server.tenancy import scope

log = logging.getLogger(__name__)

GONE = "gone"  # the digest of a resource that can no longer be read


Watched = tuple[str, str]  # (the caller's tenant, as `_scope` tells it; the address)


def _scope() -> str:
    """Which tenant's stores a request reaches: addresses are watched per tenant, so one tenant's change is never
    compared with, or told to, another's subscribers."""
    return scope()


class ResourceSubscriptions:
    """The subscriptions of every session of one server, and the middleware that notifies them."""

    def __init__(self) -> None:
        self.server: MCPServer[Any] | None = None
        self._sessions: dict[Watched, dict[int, Any]] = {}  # -> {id(connection): its session}
        self._listening: dict[Watched, int] = {}  # -> open listen streams naming it (2026-07-28)
        self._digests: dict[Watched, str] = {}  # -> digest of what was last read there
        self._streams: dict[str, tuple[InMemorySubscriptionBus, ListenHandler]] = {}  # a bus per tenant

    def register(self, server: MCPServer[Any]) -> None:
        self.server = server
        lowlevel = server._lowlevel_server  # the SDK has no public way to add these two handlers
        lowlevel.add_request_handler("resources/subscribe", SubscribeRequestParams, self._subscribe)
        lowlevel.add_request_handler("resources/unsubscribe", UnsubscribeRequestParams, self._unsubscribe)
        # The SDK's own listen handler, over a bus per tenant, wrapped to learn which resources streams watch.
        lowlevel.add_request_handler("subscriptions/listen", SubscriptionsListenRequestParams, self._listen_stream)
        server.middleware.append(self)

    def _bus(self, scope: str) -> tuple[InMemorySubscriptionBus, ListenHandler]:
        found = self._streams.get(scope)
        if found is None:
            bus = InMemorySubscriptionBus()
            found = self._streams[scope] = (bus, ListenHandler(bus))
        return found

    async def _listen_stream(
        self, ctx: ServerRequestContext[Any, Any], params: SubscriptionsListenRequestParams
    ) -> SubscriptionsListenResult:
        """One 2026-07-28 listen stream: its resources are watched (read now, so a later change is seen) for as
        long as it is open."""
        scope = _scope()
        watched = [(scope, str(uri)) for uri in params.notifications.resource_subscriptions or ()]
        for key in watched:
            if key not in self._digests:
                self._digests[key] = await self._digest(ctx, key[1])
            self._listening[key] = self._listening.get(key, 0) + 1
        try:
            return await self._bus(scope)[1](ctx, params)
        finally:
            for key in watched:
                self._listening[key] -= 1
                if not self._listening[key]:
                    del self._listening[key]
                    if key not in self._sessions:
                        self._digests.pop(key, None)

    async def _subscribe(self, ctx: ServerRequestContext[Any, Any], params: SubscribeRequestParams) -> EmptyResult:
        key = (_scope(), str(params.uri))
        # An address with nothing there yet may be subscribed to: the client is told when something appears.
        digest = await self._digest(ctx, key[1])
        self._sessions.setdefault(key, {})[_connection_of(ctx)] = ctx.session
        self._digests[key] = digest
        return EmptyResult()

    async def _unsubscribe(self, ctx: ServerRequestContext[Any, Any], params: UnsubscribeRequestParams) -> EmptyResult:
        key = (_scope(), str(params.uri))
        sessions = self._sessions.get(key, {})
        sessions.pop(_connection_of(ctx), None)
        if not sessions:
            self._sessions.pop(key, None)
            if key not in self._listening:
                self._digests.pop(key, None)
        return EmptyResult()

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        result = await call_next(ctx)
        if (self._sessions or self._listening) and ctx.method == "tools/call":
            await self._notify_changed(ctx)
        return result

    async def _notify_changed(self, ctx: ServerRequestContext[Any, Any]) -> None:
        scope = _scope()  # the caller's tenant: only its own addresses can have changed through this call
        watched = [k for k in dict.fromkeys([*self._sessions, *self._listening]) if k[0] == scope]
        for key in watched:
            uri = key[1]
            digest = await self._digest(ctx, uri)
            if digest == self._digests.get(key):
                continue
            self._digests[key] = digest
            if key in self._listening:
                await self._bus(scope)[0].publish(ResourceUpdated(uri=uri))  # the SDK routes it to the streams
            sessions = self._sessions.get(key, {})
            for connection, session in list(sessions.items()):
                try:
                    await session.send_resource_updated(uri)
                except Exception as exc:  # a closed session: it hears nothing more
                    log.info("resource update for %s not sent (%s); the session's subscription ends", uri, exc)
                    sessions.pop(connection, None)

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
