"""Tenants: each bearer token maps to a tenant with memories of its own; one server serves them all.

The tokens live in a file (`ROCKMEM_TENANTS_FILE`), read again whenever it changes, so tenants and tokens are
added or revoked without a restart. The file keeps each token's SHA-256, never the token:

    {"tenants": {"design-team": ["sha256:9f86d0…"], "ops": ["sha256:…", "sha256:…"]}}

(`rockmem-mcp tenants add NAME` makes a token, adds its hash and prints the token once.)

A tenant's stores are its own: its home is `<home>/tenants/<name>` (index, access log, audit trail, and every
store a home keeps), and with a database store its rows are in the schema `tenant_<name>`. A request is served by
the tenant its token names: a middleware opens that tenant's services (once, in a task of their own) and makes
them the request's, so every tool, resource, prompt and completion reaches that tenant's stores and no other's.
`ROCKMEM_AUTH_TOKEN`, when set, stays the server's own tenant (the home itself).

A tenant's home keeps its own history and audit trail; `<home>/tenants/.gitignore` (`*`) keeps the tenants' files out
of the server's own, whose start-up check would otherwise report each tenant's home as a file made outside the server.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import logging
import os
import re
import secrets
import time
from collections.abc import AsyncIterator, Callable
from contextvars import ContextVar
from pathlib import Path
from typing import Any

import anyio
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext

from rockmem_mcp.config import Settings
from rockmem_mcp.errors import ConfigError, InvalidInputError, StorageError

log = logging.getLogger(__name__)

# No '_': a schema name is the tenant's with '-' as '_', which must name one tenant only ('a-b' and 'a_b' would not).
TENANT_NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,39}")
current_services: ContextVar[Any] = ContextVar("rockmem_tenant_services", default=None)
current_tenant: ContextVar[str] = ContextVar("rockmem_tenant", default="")


def token_hash(token: str) -> str:
    return "sha256:" + hashlib.sha256(token.encode()).hexdigest()


def bearer_of(authorizations: list[str]) -> str | None:
    """The bearer token of a request's Authorization headers: exactly one header of exactly two words, the first
    `Bearer` (any case, RFC 6750), else None. The HTTP check and the tenant routing both read it so, and only so:
    a request the two read differently (a tab, two headers) could otherwise pass as one and be served as another."""
    if len(authorizations) != 1:
        return None
    words = authorizations[0].split()
    return words[1] if len(words) == 2 and words[0].lower() == "bearer" else None


def scope() -> str:
    """Which tenant a request (or a log record made while serving it) belongs to: its name, "" for the server's
    own. A name, not the services' identity: a tenant's stores close when idle and reopen, and what it subscribed
    to stays its own across that."""
    return current_tenant.get()


class TenantTokens:
    """The tenants file, read again when its size or modification time changes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._seen: tuple[int, int] | None = None
        self._by_hash: dict[str, str] = {}
        self._loaded = False  # once read, a later broken file keeps what was read (it never stops the server)
        self.reload()

    def reload(self) -> None:
        try:
            stat = os.stat(self.path)
        except FileNotFoundError:
            self._seen, self._by_hash = None, {}
            return
        seen = (stat.st_mtime_ns, stat.st_size)
        if seen == self._seen:
            return
        try:
            tenants = json.loads(self.path.read_text(encoding="utf-8"))["tenants"]
            by_hash = {}
            for name, hashes in tenants.items():
                if not TENANT_NAME.fullmatch(name):
                    raise ValueError(f"tenant name {name!r}: use lower-case letters, digits and '-'")
                for entry in hashes:
                    if not (isinstance(entry, str) and entry.startswith("sha256:") and len(entry) == 71):
                        raise ValueError(f"tenant {name!r}: each token is kept as 'sha256:<64 hex digits>'")
                    by_hash[entry] = name
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            if not self._loaded:
                raise ConfigError(f"the tenants file {self.path} is not usable: {exc}") from None
            log.warning("the tenants file %s is not usable (%s); keeping the tenants read before", self.path, exc)
            return
        self._seen, self._by_hash, self._loaded = seen, by_hash, True

    def names(self) -> list[str]:
        self.reload()
        return sorted(set(self._by_hash.values()))

    def tenant_of(self, token: str | None) -> str | None:
        if not token:
            return None
        self.reload()
        wanted = token_hash(token)
        found = None
        for known, name in self._by_hash.items():  # constant time per entry: no guessing by timing
            if hmac.compare_digest(known, wanted):
                found = name
        return found


def edit_tenants(path: Path, name: str, action: str) -> str | None:
    """`add`: a new token for tenant `name` (its hash written to the file, the token returned, shown once);
    `revoke`: every token of `name` removed. The file is written atomically, readable by its owner only."""
    from rockmem_mcp.storage.atomic import atomic_write

    if not TENANT_NAME.fullmatch(name):
        raise InvalidInputError(f"invalid tenant name {name!r}: lower-case letters, digits and '-'")
    try:
        data = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {"tenants": {}}
        tenants = data["tenants"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InvalidInputError(f"the tenants file {path} is not usable ({exc}); nothing was changed") from None
    token = None
    if action == "add":
        token = secrets.token_urlsafe(32)
        tenants.setdefault(name, []).append(token_hash(token))
    elif tenants.pop(name, None) is None:
        raise InvalidInputError(f"no tenant {name!r} in {path}")
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, (json.dumps(data, indent=2) + "\n").encode())
    os.chmod(path, 0o600)
    return token


def tenant_settings(settings: Settings, name: str) -> Settings:
    """A tenant's settings: its own home under the server's, its own schema in a database store."""
    if not TENANT_NAME.fullmatch(name):
        raise InvalidInputError(f"invalid tenant name {name!r}")
    return settings.model_copy(
        update={"home": settings.home / "tenants" / name, "store_schema": f"tenant_{name.replace('-', '_')}",
                "tenants_file": None, "auth_token": None}
    )  # fmt: skip


TENANTS_GITIGNORE = "# rockmem: each tenant's home keeps its own history; none of it is the server's home's.\n*\n"


def keep_tenants_apart(home: Path) -> None:
    """`<home>/tenants/.gitignore`, written once (one of the user's own is kept): the server's home's history and
    its start-up check for changes made outside the server leave the tenants' homes to themselves."""
    from rockmem_mcp.storage.atomic import atomic_write

    ignore = home / "tenants" / ".gitignore"
    try:
        if not os.path.lexists(ignore):
            atomic_write(ignore, TENANTS_GITIGNORE.encode())
    except OSError as exc:  # a read-only home: nothing is written there, by the history either
        log.warning("could not write %s (%s): the home's history may list the tenants' files", ignore, exc)


def idle_limit_minutes(settings: Settings) -> float:
    """How long a tenant stays open without a request: the setting, but past the idle reflection when the server
    runs reflections (its trigger — a conversation quiet that long — lives in the open services; closed sooner, it
    would never fire)."""
    minutes = settings.tenant_idle_minutes
    if minutes > 0 and settings.reflection_in_server:
        minutes = max(minutes, settings.reflection_idle_minutes + settings.reflection_check_seconds / 60 + 1)
    return minutes


class Tenants:
    """Every tenant's services, each opened once in a task of its own (their background work lives there), and
    closed when the server stops, when the tenant has had no request for `tenant_idle_minutes` or when its tokens
    are revoked (never while a request of its is being served): connections to a database store scale with the
    tenants in use, not with every tenant there is. A closed tenant's next request opens its services again."""

    def __init__(
        self,
        settings: Settings,
        tokens: TenantTokens,
        open_services: Callable[[Settings], Any],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings, self.tokens = settings, tokens
        self._open_services = open_services
        self._clock = clock
        self._opened: dict[str, Any] = {}
        self._ready: dict[str, anyio.Event] = {}
        self._failed: dict[str, BaseException] = {}
        self._closing: dict[str, anyio.Event] = {}  # set: that tenant's task closes its services
        self._closed: dict[str, anyio.Event] = {}  # set when a tenant's latest opening has closed
        self._users: dict[str, int] = {}  # requests being served, per tenant
        self._last_used: dict[str, float] = {}
        self._group: Any = None
        self._stopping = anyio.Event()

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[Tenants]:
        keep_tenants_apart(self.settings.home)  # before a tenant's home exists, and for homes made before this
        async with anyio.create_task_group() as group:
            self._group = group
            if (minutes := idle_limit_minutes(self.settings)) > 0:
                group.start_soon(self._close_idle_every, min(60.0, minutes * 15))
            try:
                yield self
            finally:
                self._stopping.set()  # each tenant's task closes its services
                for closing in self._closing.values():
                    closing.set()

    @contextlib.asynccontextmanager
    async def using(self, name: str) -> AsyncIterator[Any]:
        """The tenant's services for one request: not closed while it is being served."""
        self._users[name] = self._users.get(name, 0) + 1
        try:
            yield await self.services(name)
        finally:
            self._users[name] -= 1
            self._last_used[name] = self._clock()

    async def services(self, name: str) -> Any:
        ready = self._ready.get(name)
        if ready is None:
            ready = self._ready[name] = anyio.Event()
            self._failed.pop(name, None)
            self._closing[name] = closing = anyio.Event()
            previous = self._closed.get(name)  # an earlier opening still closing: its connections go first
            self._closed[name] = closed = anyio.Event()
            self._group.start_soon(self._hold, name, ready, closing, previous, closed)
        await ready.wait()
        if name in self._opened:
            return self._opened[name]
        raise self._failed.get(name) or StorageError(f"tenant {name}: its stores did not open")

    def close_idle(self) -> list[str]:
        """Close the services of tenants with no request being served that are idle past the limit or revoked;
        the tenants closed."""
        limit_s = idle_limit_minutes(self.settings) * 60
        known = set(self.tokens.names())
        now = self._clock()
        closed = []
        for name in list(self._opened):
            idle = now - self._last_used.get(name, now) >= limit_s > 0
            if self._users.get(name, 0) == 0 and (idle or name not in known):
                del self._ready[name]  # a request from now on opens them anew
                self._closing.pop(name).set()
                del self._opened[name]
                closed.append(name)
        return closed

    async def _close_idle_every(self, seconds: float) -> None:
        while not self._stopping.is_set():
            with anyio.move_on_after(seconds):
                await self._stopping.wait()
            for name in self.close_idle():
                log.info("tenant %s: its stores closed (idle or revoked); its next request opens them", name)

    async def _hold(
        self, name: str, ready: anyio.Event, closing: anyio.Event, previous: anyio.Event | None, closed: anyio.Event
    ) -> None:
        opened: Any = None
        try:
            if previous is not None:
                await previous.wait()  # its close releases the tenant's shared connections, which this one reopens
            async with self._open_services(tenant_settings(self.settings, name)) as opened:
                self._opened[name] = opened
                self._last_used.setdefault(name, self._clock())
                ready.set()
                await closing.wait()
                if self._opened.get(name) is opened:
                    del self._opened[name]
        except Exception as exc:
            if opened is not None:  # they opened and served: a failure while closing is only logged
                log.warning("tenant %s: closing its stores failed (%s)", name, exc)
                return
            log.warning("tenant %s: its stores did not open (%s)", name, exc)  # told to the requests waiting
            self._failed[name] = exc
            if self._ready.get(name) is ready:  # not a newer opening's (tried again at the next request)
                del self._ready[name]
            ready.set()
        finally:
            if self._closing.get(name) is closing:
                del self._closing[name]
            closed.set()


class TenantRouting:
    """Middleware: a request made with a tenant's token is served by that tenant's services."""

    def __init__(self, tenants: Tenants, own_token: str | None) -> None:
        self.tenants, self.own_token = tenants, own_token

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        headers = getattr(ctx.request, "headers", None)
        if headers is None:
            return await call_next(ctx)  # stdio: no tokens, the server's own tenant
        token = bearer_of(headers.getlist("authorization"))
        if token is not None and self.own_token and hmac.compare_digest(token.encode(), self.own_token.encode()):
            return await call_next(ctx)  # the server's own token
        name = self.tenants.tokens.tenant_of(token)
        if name is None:  # never the server's own memory by default: revoked since the HTTP check, or malformed
            raise InvalidInputError("this request's token names no tenant")
        async with self.tenants.using(name) as opened:
            reset, named = current_services.set(opened), current_tenant.set(name)
            try:
                return await call_next(ctx)
            finally:
                current_tenant.reset(named)
                current_services.reset(reset)
