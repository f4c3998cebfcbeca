"""Serving: `serve` (MCP over stdio or HTTP, optionally with the page), `ui`, `tenants`, `install`."""

from __future__ import annotations

import argparse
import contextlib
import errno
import json
import os
import sys
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

from rockmem_mcp.cli.common import start_summary
from rockmem_mcp.config import Settings
from rockmem_mcp.errors import RockmemError


def run(settings: Settings, args: argparse.Namespace) -> int:
    from rockmem_mcp.vector_worker import FOREGROUND

    if args.command != "ui":  # an MCP server: a vector backlog waits for its first answer (server/app.py, Answering)
        FOREGROUND.hold_start()
    # Open the stores first, in a thread, so loading the indexes overlaps importing the MCP SDK:
    # at 100k memories that is most of the cold start.
    open_stores = _open_in_background(settings)
    transport = "streamable-http" if args.command == "ui" else getattr(args, "transport", "stdio")
    if transport == "stdio" and getattr(args, "ui", False):
        print("rockmem-mcp: --ui serves the web page beside streamable HTTP; add --transport streamable-http, or run "
              "`rockmem-mcp ui` beside this server", file=sys.stderr)  # fmt: skip
        return 2
    if transport == "stdio" and sys.stdin.isatty():
        print(TERMINAL_HINT, file=sys.stderr)
    from rockmem_mcp.server.app import build_server  # the MCP SDK is only imported to serve

    if transport == "stdio":
        import anyio

        from rockmem_mcp.server.stdio import serve_stdio

        def announced() -> Any:
            stores = open_stores()
            print(f"rockmem-mcp: serving MCP over stdio; {start_summary(settings, stores.memory)}", file=sys.stderr)
            return stores

        with _reporting_start_errors():
            anyio.run(serve_stdio, build_server(settings, announced))
        return 0
    import uvicorn

    from rockmem_mcp.server.http import http_app, refuse_unguarded
    from rockmem_mcp.ui.app import WithPage, page_app, page_url, redact_access_log, standalone_app

    overrides = {"host": getattr(args, "host", None), "port": getattr(args, "port", None)}
    settings = settings.model_copy(update={k: v for k, v in overrides.items() if v is not None})
    page_only = args.command == "ui"
    try:
        # One rule for every listener (server/http.py), the page's own included.
        refuse_unguarded(settings, page=page_only or getattr(args, "ui", False))
        if page_only:
            app: Any = standalone_app(settings, open_stores)
        else:
            running: list[Any] = []
            app = http_app(build_server(settings, open_stores, running), settings, running)
            if args.ui:
                app = WithPage(app, page_app(settings, lambda: running[-1]))
        listening = _listening_socket(settings.host, settings.port)
    except RockmemError as exc:
        print(f"rockmem-mcp: {exc}", file=sys.stderr)
        return 2
    host, port = settings.host, listening.getsockname()[1]
    auth = "bearer token required" if settings.auth_token else "loopback only, no token"
    where = f"[{host}]" if ":" in host else host
    if page_only:
        print(f"rockmem-mcp: web page at {page_url(settings, host, port)} ({auth}); home {settings.home}",
              file=sys.stderr)  # fmt: skip
    else:
        print(f"rockmem-mcp: serving MCP over streamable HTTP at http://{where}:{port}/mcp ({auth}); home "
              f"{settings.home}" + (f"; web page at {page_url(settings, host, port)}" if args.ui else ""),
              file=sys.stderr)  # fmt: skip
    # No colour codes: stderr shows control characters as escapes (module docstring).
    config = uvicorn.Config(app, log_level=settings.log_level.lower(), use_colors=False)
    if page_only or args.ui:
        redact_access_log()  # the sign-in link carries the token (after uvicorn set up its loggers)
    uvicorn.Server(config).run(sockets=[listening])
    return 0


TERMINAL_HINT = (
    "rockmem-mcp: this is an MCP server: a client (Claude Desktop, Claude Code, an IDE) starts it and speaks "
    "JSON-RPC on its stdin and stdout, so typed lines are not commands. To connect a client: "
    "`rockmem-mcp install claude-desktop` (or claude-code, cursor, vscode). To look around by hand: "
    "`npx @modelcontextprotocol/inspector rockmem-mcp`, or the CLI (`rockmem-mcp search WORDS`, "
    "`rockmem-mcp --help`). Ctrl-D ends it."
)


def _listening_socket(host: str, port: int) -> Any:
    """A socket listening on host:port (port 0: a free one), as uvicorn would bind it; a host or port that cannot
    be had is one line (ConfigError) instead of uvicorn's traceback or its exit after the server started."""
    import socket

    from rockmem_mcp.errors import ConfigError

    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        listening = socket.socket(family, kind, proto)
    except OSError as exc:
        raise ConfigError(f"cannot listen on {host!r}: {exc.strerror or exc}; check --host") from None
    try:
        listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listening.bind(address)
        listening.listen(2048)
    except OSError as exc:
        listening.close()
        if exc.errno == errno.EADDRNOTAVAIL:  # no interface of this machine has that address
            raise ConfigError(f"cannot listen on {host}:{port} ({exc.strerror}); check --host") from None
        raise ConfigError(
            f"cannot listen on {host}:{port} ({exc.strerror or exc}); choose another --port (0 takes a free one)"
        ) from None
    return listening


@contextlib.contextmanager
def _reporting_start_errors() -> Iterator[None]:
    """A home that cannot be opened (e.g. a store folder that is a symbolic link) fails inside the SDK's task
    group: re-raise our error alone, so main prints its one-line message instead of a traceback."""
    try:
        yield
    except BaseExceptionGroup as group:
        ours, _ = group.split(RockmemError)
        while isinstance(ours, BaseExceptionGroup):
            ours = ours.exceptions[0]
        if ours is None:
            raise
        raise ours from None


def _open_in_background(settings: Settings) -> Callable[[], Any]:
    """Start opening the stores now; the returned opener hands them over (later calls open anew)."""
    from rockmem_mcp.home.stores import in_background, open_stores

    pending = [in_background(partial(open_stores, settings), "rockmem-open")]
    return lambda: pending.pop().result() if pending else open_stores(settings)


def _tenants(settings: Settings, args: argparse.Namespace) -> int:
    """Edit the tenants file (ROCKMEM_TENANTS_FILE); a running server reads it again by itself."""
    from rockmem_mcp.server.tenancy import TenantTokens, edit_tenants

    path = settings.tenants_file
    if path is None:
        print("rockmem-mcp: set ROCKMEM_TENANTS_FILE to the tenants file (it is made if missing)", file=sys.stderr)
        return 2
    if args.action == "list":
        names = TenantTokens(path).names()
        print(json.dumps(names) if args.json else "\n".join(names))
        return 0
    if not args.name:
        print(f"rockmem-mcp: tenants {args.action} needs the tenant's name", file=sys.stderr)
        return 2
    token = edit_tenants(path, args.name, args.action)
    if args.json:
        print(json.dumps({"tenant": args.name, "action": args.action, "token": token}))
    elif token:
        print(token)
        print(f"tenant {args.name}: a new token (shown once; {path} keeps its hash)", file=sys.stderr)
    else:
        print(f"tenant {args.name}: every token revoked", file=sys.stderr)
    return 0


def _install(settings: Settings, args: argparse.Namespace) -> int:
    """The client's configuration gets a rockmem entry; the home is written into it only when one was named
    (--home or ROCKMEM_HOME), so the server otherwise uses its own default, as from a shell."""
    import shutil

    from rockmem_mcp.cli.clients import default_path, install

    running = Path(sys.argv[0])  # the console script itself when run as `rockmem-mcp install …`
    found = str(running.resolve()) if running.name == "rockmem-mcp" else shutil.which("rockmem-mcp")
    command = args.server_command or found or "rockmem-mcp"
    named = getattr(args, "home", None) or os.environ.get("ROCKMEM_HOME")
    done = install(
        args.client, args.path or default_path(args.client, scope=args.scope), command,
        str(settings.home) if named else None,
        dry_run=args.dry_run,
    )  # fmt: skip
    if args.json:
        print(json.dumps({"client": done.client, "path": str(done.path), "action": done.action,
                          "backup": str(done.backup) if done.backup else None, "entry": done.entry,
                          "dry_run": done.dry_run}))  # fmt: skip
    else:
        print(("(dry run) " if args.dry_run else "") + done.describe())
    return 0


COMMANDS = {
    "tenants": _tenants,
    "install": _install,
}
