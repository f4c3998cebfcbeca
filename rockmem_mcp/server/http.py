"""Serving MCP over streamable HTTP safely: loopback by default, a bearer token required anywhere else
(compared in constant time), DNS-rebinding protection wherever no token guards the server."""

from __future__ import annotations

import hmac
import ipaddress
import json
import logging
from collections.abc import Callable
from typing import Any

import anyio.to_thread
from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import ASGIApp, Receive, Scope, Send

from rockmem_mcp.config import Settings
from rockmem_mcp.errors import ConfigError, RockmemError
from rockmem_mcp.server.tenancy import TenantTokens, bearer_of

log = logging.getLogger(__name__)

LOOPBACK_NAMES = ("localhost",)


def is_loopback(host: str) -> bool:
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def transport_security(settings: Settings) -> TransportSecuritySettings:
    """Which `Host` (and browser `Origin`) values are served.

    On loopback, only this server's own names and `allowed_hosts`: a web page that resolves its own name to
    127.0.0.1 (DNS rebinding) is refused, since a loopback server may run without a token. Beyond loopback a
    token is required, and the token is the protection (a rebound page cannot send it), so any Host is served:
    clients reach the server by its address, its hostname or a name in front of it. Listing `allowed_hosts`
    there narrows it to those (and the bind address)."""
    if is_loopback(settings.host):
        names = ["127.0.0.1", "localhost", "[::1]"]
    elif (settings.auth_token or settings.tenants_file) and not settings.allowed_hosts:
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    else:
        bound = f"[{settings.host}]" if ":" in settings.host and not settings.host.startswith("[") else settings.host
        names = [] if _is_wildcard(settings.host) else [bound]  # an IPv6 address is bracketed in Host
    hosts = [f"{name}:*" for name in names] + list(settings.allowed_hosts)
    origins = [f"{scheme}://{host}" for host in hosts for scheme in ("http", "https")]
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins)


def _is_wildcard(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")).is_unspecified
    except ValueError:
        return False


class BearerToken:
    """ASGI middleware: every HTTP request needs `Authorization: Bearer <token>` (the scheme in any case,
    RFC 6750): the server's own token, or a tenant's (server/tenancy.py); others get 401."""

    def __init__(self, app: ASGIApp, token: str | None, tenants: TenantTokens | None = None) -> None:
        self.app = app
        self._expected = token.encode() if token else None
        self._tenants = tenants

    def _accepts(self, given: bytes) -> bool:
        # constant time: no guessing by timing (the scheme is public, the token is not)
        if self._expected is not None and hmac.compare_digest(given, self._expected):
            return True
        try:
            return self._tenants is not None and self._tenants.tenant_of(given.decode(errors="replace")) is not None
        except ConfigError:  # an unusable tenants file names nobody
            return False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            values = [v.decode("latin-1") for k, v in scope["headers"] if k == b"authorization"]
            given = bearer_of(values)  # read as the tenant routing reads it (server/tenancy.py)
            if given is None or not self._accepts(given.encode()):
                await _refuse(send)
                return
        await self.app(scope, receive, send)


async def _refuse(send: Send) -> None:
    body = json.dumps({"error": "unauthorized", "detail": "send Authorization: Bearer <ROCKMEM_AUTH_TOKEN>"}).encode()
    headers = [(b"content-type", b"application/json"), (b"www-authenticate", b'Bearer realm="rockmem"')]
    await send({"type": "http.response.start", "status": 401, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def refuse_unguarded(settings: Settings, page: bool = False) -> None:
    """One rule for every listener: nothing is served on a non-loopback address without a token, and the web page
    (`page`), which shows the server's own home, needs ROCKMEM_AUTH_TOKEN itself wherever tenants are configured or
    the address is not loopback: tenants' tokens reach their own homes, never the server's."""
    if not is_loopback(settings.host) and not settings.auth_token and not settings.tenants_file:
        raise ConfigError(
            f"refusing to serve on {settings.host} without a token: anyone who can reach it could read and write "
            "this memory. Set ROCKMEM_AUTH_TOKEN (clients send Authorization: Bearer <token>), or bind 127.0.0.1"
        )
    if page and not settings.auth_token and (settings.tenants_file or not is_loopback(settings.host)):
        where = "with tenants" if settings.tenants_file else f"on {settings.host}"
        raise ConfigError(
            f"refusing to serve the web page {where} without ROCKMEM_AUTH_TOKEN: it shows and changes the server's "
            "own memory, which tenants' tokens do not guard. Set ROCKMEM_AUTH_TOKEN (the page's sign-in), or serve "
            "it on 127.0.0.1 without a tenants file"
        )


class HealthChecks:
    """ASGI, in front of the token check (a load balancer probes without one): `GET /healthz` answers 200 while the
    process serves; `GET /readyz` answers 200 once the stores are open and answer (a database store: a query), else
    503 with the reason. Neither says anything about the memory itself."""

    PATHS = ("/healthz", "/readyz")

    def __init__(self, app: ASGIApp, not_ready: Callable[[], str | None]) -> None:
        self.app, self.not_ready = app, not_ready

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("path") not in self.PATHS:
            await self.app(scope, receive, send)
            return
        reason = None if scope["path"] == "/healthz" else await anyio.to_thread.run_sync(self.not_ready)
        status, body = (200, {"status": "ok"}) if reason is None else (503, {"status": "not ready", "reason": reason})
        raw = json.dumps(body).encode()
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"), (b"cache-control", b"no-store")]})  # fmt: skip
        await send({"type": "http.response.body", "body": raw})


def readiness(running: list[Any]) -> Callable[[], str | None]:
    """Why the server is not ready (its services not open yet, or the store not answering), or None."""

    def not_ready() -> str | None:
        if not running:
            return "starting: the stores are not open yet"
        try:
            running[-1].memory.check_store()
        except (RockmemError, OSError) as exc:  # the why goes to the log: this answer needs no token
            log.warning("not ready: the store does not answer (%s)", exc)
            return "the store does not answer (the server's log says why)"
        return None

    return not_ready


def http_app(server: MCPServer[Any], settings: Settings, running: list[Any] | None = None) -> ASGIApp:
    """The ASGI app to serve: refuses to exist on a non-loopback address without a token. With `running` (the
    server's services while it runs), /healthz and /readyz answer a load balancer."""
    refuse_unguarded(settings)
    token = settings.auth_token
    tenants = TenantTokens(settings.tenants_file) if settings.tenants_file else None
    app: ASGIApp = server.streamable_http_app(host=settings.host, transport_security=transport_security(settings))
    app = BearerToken(app, token, tenants) if token or tenants else app
    return HealthChecks(app, readiness(running)) if running is not None else app
