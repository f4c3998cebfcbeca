"""The web page's HTTP side: the page and its assets (shipped in the package: no CDN, no network at run time), a
JSON API over ui/views.py, and the guards a page on a local port needs.

- Beyond loopback a token is required, as for MCP over HTTP: `Authorization: Bearer`, or a cookie the page sets
  once opened as /ui/?token=… (a browser cannot add a header to a link). On loopback without a token, only this
  server's own Host names are served, so a web page that rebinds its name to 127.0.0.1 reads nothing.
- Every write needs the `X-Rockmem-UI` header and, when the browser sends one, an Origin naming this server: a
  form or script on another site cannot send that header without a CORS preflight, which is never granted.
- Text from memory is only ever put on the page as text (app.js never assigns innerHTML), and the Content
  Security Policy allows this server's own script and nothing inline.
"""

from __future__ import annotations

import hmac
import json
import logging
import re
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from importlib.resources import files
from typing import Any
from urllib.parse import urlencode, urlsplit

import anyio.to_thread
from pydantic import BaseModel, ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

from rockmem_mcp.config import Settings
from rockmem_mcp.errors import (
    ChangedSinceReadError,
    InvalidInputError,
    NotFoundError,
    ReadOnlyHomeError,
    RockmemError,
    WritesGatedError,
)
from rockmem_mcp.server.context import Services
from rockmem_mcp.server.http import transport_security
from rockmem_mcp.ui import views

log = logging.getLogger(__name__)

PREFIX = "/ui"
COOKIE = "rockmem_ui_"  # + the port: two pages on one host keep their own
MAX_BODY_BYTES = 4_000_000  # a change the page sends: a memory or a core block is far smaller
WRITE_HEADER = "x-rockmem-ui"
STATIC = files("rockmem_mcp.ui") / "static"
SECURITY_HEADERS = {
    "content-security-policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
}
STATUS_OF: list[tuple[type[BaseException], int]] = [
    (NotFoundError, 404),
    (ChangedSinceReadError, 409),
    (ReadOnlyHomeError, 403),
    (WritesGatedError, 403),
    (RockmemError, 400),
]

View = Callable[..., Any]


def _json(data: Any, status: int = 200) -> JSONResponse:
    if isinstance(data, BaseModel):
        data = views.dump(data)
    elif isinstance(data, list):
        data = [views.dump(item) if isinstance(item, BaseModel) else item for item in data]
    return JSONResponse(data, status, headers={"cache-control": "no-store"})


def _api(
    view: View, *, body: type[views.Body] | None = None, path: str | None = None, services: bool = True
) -> Callable[..., Any]:
    """A route calling `view` in a worker thread (the services block) with the running services, the path
    parameter `path`, then the query string or the JSON body validated as `body`; a refusal is the answer's
    error, one line."""

    async def endpoint(request: Request) -> Response:
        app: PageApp = request.app.state.page
        arguments: list[Any] = [app.services()] if services else []
        if path is not None:
            arguments.append(request.path_params[path])
        try:
            if body is not None:
                arguments.append(body.model_validate(await _json_body(request)))
            elif view.__code__.co_argcount > len(arguments):
                arguments.append(dict(request.query_params))
            return _json(await anyio.to_thread.run_sync(lambda: view(*arguments)))
        except TooLarge as exc:
            return _json({"error": str(exc)}, 413)
        except ValidationError as exc:
            return _json({"error": _one_line(exc)}, 400)
        except (RockmemError, OSError, ValueError) as exc:
            status = next((code for kind, code in STATUS_OF if isinstance(exc, kind)), 500)
            if status == 500:
                log.warning("web page: %s failed: %s", request.url.path, exc)
            return _json({"error": str(exc)}, status)

    return endpoint


class TooLarge(Exception):
    pass


async def _json_body(request: Request) -> Any:
    """The request's JSON, read up to MAX_BODY_BYTES (a bigger one is refused before it is all in memory)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise TooLarge(f"the request body is over {MAX_BODY_BYTES:,} bytes")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise TooLarge(f"the request body is over {MAX_BODY_BYTES:,} bytes")
        chunks.append(chunk)
    try:
        given = json.loads(b"".join(chunks) or b"{}")
    except ValueError:
        raise InvalidInputError("the request body is not JSON") from None
    if not isinstance(given, dict):
        raise InvalidInputError("the request body must be a JSON object")
    return given


def _one_line(error: ValidationError) -> str:
    """What to change, per field: 'pinned: Input should be a valid boolean; store: Input should be …'."""
    parts = []
    for problem in error.errors(include_url=False):
        where = ".".join(str(p) for p in problem["loc"]) or "body"
        parts.append(f"{where}: {problem['msg']}")
    return "; ".join(parts)


async def _index(_: Request) -> Response:
    return FileResponse(str(STATIC / "index.html"), headers={"cache-control": "no-store"})


async def _to_page(_: Request) -> Response:
    return RedirectResponse(PREFIX + "/")


ROUTES = [
    Route("/", _index),
    Route("/api/status", _api(views.status)),
    Route("/api/memories", _api(views.memories)),
    Route("/api/memories", _api(views.create_memory, body=views.NewMemory), methods=["POST"]),
    Route("/api/memories/{id}", _api(views.memory, path="id")),
    Route("/api/memories/{id}/erase", _api(views.erase_memory, path="id", body=views.Erase), methods=["POST"]),
    Route("/api/memories/{id}", _api(views.edit_memory, path="id", body=views.MemoryEdit), methods=["POST"]),
    Route("/api/memories/{id}/archive", _api(views.archive_memory, path="id", body=views.Archive), methods=["POST"]),
    Route("/api/categories", _api(views.categories)),
    Route("/api/graph", _api(views.graph)),
    Route("/api/core", _api(views.core)),
    Route("/api/core", _api(views.edit_core, body=views.CoreEdit), methods=["POST"]),
    Route("/api/tokens", _api(views.tokens, body=views.Tokens, services=False), methods=["POST"]),
    Route("/api/working", _api(views.working)),
    Route("/api/review", _api(views.review)),
    Route(
        "/api/reflections/{id}",
        _api(views.resolve_reflection, path="id", body=views.ReflectionDecision),
        methods=["POST"],
    ),
    Route("/api/proposals/{id}", _api(views.decide_proposal, path="id", body=views.ProposalDecision), methods=["POST"]),
    Route("/api/audit", _api(views.audit)),
    Route("/api/revert", _api(views.revert_preview)),
    Route("/api/revert", _api(views.revert, body=views.Revert), methods=["POST"]),
    Route("/api/salience", _api(views.salience)),
    Mount("/static", StaticFiles(directory=str(STATIC))),
]


class PageApp:
    """The page's ASGI app behind its guard (module docstring); `services` gives the running server's."""

    def __init__(self, settings: Settings, services: Callable[[], Services], lifespan: Any = None) -> None:
        self.settings = settings
        self.services = services
        security = transport_security(settings)
        self._hosts = security.allowed_hosts if security.enable_dns_rebinding_protection else None
        self._token = settings.auth_token.encode() if settings.auth_token else None
        # The cookie holds a value derived from the token, not the token: a cookie that leaks (cookies are not
        # kept apart by port) does not give away what MCP clients send.
        self._session = (
            hmac.new(self._token, b"rockmem web page session", "sha256").hexdigest().encode() if self._token else b""
        )
        self.app = Starlette(routes=[Route("/", _to_page), Mount(PREFIX, routes=ROUTES)], lifespan=lifespan)
        self.app.state.page = self

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        refusal = self._refusal(request)
        if (
            refusal is None
            and self._token is not None
            and (not self._signed_in(request) or "token" in request.query_params)
        ):
            refusal = self._sign_in(request)  # a token in the address is taken out of it, signed in or not
        if refusal is not None:
            await refusal(scope, receive, send)
            return

        async def with_headers(message: Any) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []),
                                      *((k.encode(), v.encode()) for k, v in SECURITY_HEADERS.items())]  # fmt: skip
            await send(message)

        await self.app(scope, receive, with_headers)

    def _refusal(self, request: Request) -> Response | None:
        host = request.headers.get("host", "")
        if self._hosts is not None and not any(_host_matches(host, pattern) for pattern in self._hosts):
            return PlainTextResponse(f"this page is not served as {host!r}", 421)
        if request.method not in ("GET", "HEAD"):
            if request.headers.get(WRITE_HEADER) != "1":
                return _json({"error": f"a change needs the {WRITE_HEADER} header (sent by the page itself)"}, 403)
            origin = request.headers.get("origin")
            if origin and urlsplit(origin).netloc != host:
                return _json({"error": f"a change from another site ({origin}) is refused"}, 403)
        return None

    def _signed_in(self, request: Request) -> bool:
        assert self._token is not None
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), self._token):
            return True
        return hmac.compare_digest(request.cookies.get(_cookie_name(request), "").encode(), self._session)

    def _sign_in(self, request: Request) -> Response:
        """A link with ?token=… sets the cookie and comes back without it (out of the history and the address
        bar); anything else is told how to sign in."""
        assert self._token is not None
        given = request.query_params.get("token", "")
        if request.method == "GET" and given and hmac.compare_digest(given.encode(), self._token):
            rest = urlencode([(k, v) for k, v in request.query_params.multi_items() if k != "token"])
            back = RedirectResponse(request.url.path + (f"?{rest}" if rest else ""), 303)
            back.set_cookie(_cookie_name(request), self._session.decode(), httponly=True, samesite="strict",
                            secure=request.url.scheme == "https", path=PREFIX)  # fmt: skip
            return back
        return PlainTextResponse(
            "unauthorized: open /ui/?token=<ROCKMEM_AUTH_TOKEN> once, or send Authorization: Bearer <token>",
            401,
            headers={"www-authenticate": 'Bearer realm="rockmem"'},
        )


def _cookie_name(request: Request) -> str:
    server = request.scope.get("server") or ("", 0)
    return f"{COOKIE}{server[1]}"


class RedactTokens(logging.Filter):
    """Access log lines show `token=…` in a query string as `token=REDACTED` (the sign-in link carries it)."""

    PATTERN = re.compile(r"([?&]token=)[^&\s]*")

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(self.PATTERN.sub(r"\1REDACTED", a) if isinstance(a, str) else a for a in record.args)
        return True


def _host_matches(host: str, pattern: str) -> bool:
    if pattern.endswith(":*"):
        name = pattern[:-2]
        return host == name or (host.startswith(name + ":") and host[len(name) + 1 :].isdigit())
    return host == pattern


def page_app(settings: Settings, services: Callable[[], Services]) -> PageApp:
    """The page over a server's running services (mounted beside streamable HTTP at /ui)."""
    return PageApp(settings, services)


def redact_access_log() -> None:
    """Keep sign-in tokens out of uvicorn's access log (idempotent)."""
    access = logging.getLogger("uvicorn.access")
    if not any(isinstance(f, RedactTokens) for f in access.filters):
        access.addFilter(RedactTokens())


def standalone_app(settings: Settings, opener: Callable[[], Any] | None = None) -> PageApp:
    """The page on its own (`rockmem-mcp ui`): it opens the home's services itself, as a server would."""
    from rockmem_mcp.server.app import open_services

    running: list[Services] = []

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        async with open_services(settings, opener) as opened:
            running.append(opened)
            try:
                yield
            finally:
                running.clear()

    return PageApp(settings, lambda: running[-1], lifespan)


class WithPage:
    """Streamable HTTP with the page beside it: /ui/… goes to the page (its own guard and token check), all else
    (and the lifespan) to the MCP app."""

    def __init__(self, mcp: ASGIApp, page: PageApp) -> None:
        self.mcp, self.page = mcp, page

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] == "http" and (path == PREFIX or path.startswith(PREFIX + "/")):
            await self.page(scope, receive, send)
        else:
            await self.mcp(scope, receive, send)


def page_url(settings: Settings, host: str, port: int) -> str:
    where = f"[{host}]" if ":" in host else host
    token = "?token=<ROCKMEM_AUTH_TOKEN>" if settings.auth_token else ""  # open it once so, then it is kept
    return f"http://{where}:{port}{PREFIX}/{token}"
