"""Command line: `rockmem-mcp` serves MCP over stdio; subcommands search, import, export, stats, salience,
reindex, tools.

Stderr (logs too) and, for every command but `serve` (whose stdout is the MCP channel), stdout are written
through `text.visible`, so text read from memory (content, names, file names, reasons) cannot put control
characters on the terminal: an ESC becomes the six characters `\\u001b`. The escape is JSON's, so `--json`,
`stats` and `export -` stay valid JSON that decodes to the same strings. Only the progress lines (numbers the
CLI makes itself) go to the terminal directly, for their `\\r`.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import errno
import json
import logging
import os
import stat
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from pathlib import Path
from typing import Any, BinaryIO, TextIO

from rockmem_mcp import __version__, cli_browse
from rockmem_mcp.config import Settings
from rockmem_mcp.errors import EmbeddingError, ReadOnlyHomeError, RockmemError, reporting_io_errors
from rockmem_mcp.storage.no_follow import read_only_reason, refuse_linked_store_folders
from rockmem_mcp.text import visible

log = logging.getLogger("rockmem_mcp")


def _common() -> argparse.ArgumentParser:
    # Accepted before and after the subcommand; SUPPRESS keeps a subcommand from resetting a global flag.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--home",
        metavar="DIR",
        default=argparse.SUPPRESS,
        help="data home (default: $ROCKMEM_HOME or the platform's user data dir)",
    )
    common.add_argument(
        "-v", "--verbose", action="count", default=argparse.SUPPRESS, help="more logging on stderr (-v info, -vv debug)"
    )
    return common


def _toolsets_flag() -> argparse.ArgumentParser:
    # For serving (with or without `serve`) and `tools`.
    flag = argparse.ArgumentParser(add_help=False)
    flag.add_argument(
        "--toolsets",
        metavar="NAMES",
        default=argparse.SUPPRESS,
        help="tools to expose, by named set, comma-separated, e.g. default,graph or all "
        "(default: $ROCKMEM_TOOLSETS or 'default'; `rockmem-mcp tools` lists the sets)",
    )
    return flag


def build_parser() -> argparse.ArgumentParser:
    common = _common()
    toolsets = _toolsets_flag()
    parser = argparse.ArgumentParser(
        prog="rockmem-mcp",
        parents=[common, toolsets],
        description="Durable memory for AI agents over MCP. With no command, serves MCP over stdio.",
    )
    parser.add_argument("--version", action="version", version=f"rockmem-mcp {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    serve = sub.add_parser("serve", parents=[common, toolsets], help="serve MCP (stdio by default)")
    serve.add_argument("--transport", choices=["stdio", "streamable-http"], default="stdio")
    serve.add_argument("--host", default=None, help="HTTP bind address (default 127.0.0.1)")
    serve.add_argument("--port", type=_port, default=None, help="HTTP port (default 8765; 0: any free one, announced)")
    serve.add_argument(
        "--ui", action="store_true", help="streamable-http: serve the web page beside MCP, at /ui/ (same token)"
    )
    serve.add_argument(
        "--namespace",
        default=None,
        help="working-memory namespace of this process, e.g. subagent/t1b2c3 (default: session/<id> per session)",
    )

    migrate = sub.add_parser(
        "migrate-store", parents=[common], help="copy long-term memories between a home and a PostgreSQL store"
    )
    migrate.add_argument(
        "--from", dest="source", required=True, metavar="HOME|URL", help="a home folder, or postgresql://…"
    )
    migrate.add_argument(
        "--to", dest="target", required=True, metavar="HOME|URL", help="a home folder, or postgresql://…"
    )
    migrate.add_argument("--json", action="store_true")

    tenants = sub.add_parser("tenants", parents=[common], help="tenants of a server: a token each, their own memory")
    tenants.add_argument("action", choices=["add", "revoke", "list"])
    tenants.add_argument("name", nargs="?", default=None)
    tenants.add_argument("--json", action="store_true")

    ui = sub.add_parser("ui", parents=[common], help="a web page on loopback to see and steer memory")
    ui.add_argument("--host", default=None, help="bind address (default 127.0.0.1; elsewhere a token is required)")
    ui.add_argument("--port", type=_port, default=UI_PORT, help=f"port (default {UI_PORT}; 0: any free one, announced)")

    search = sub.add_parser("search", parents=[common], help="search long-term memory")
    search.add_argument("query", nargs="?", default=None, help="words to look for (omit: newest entries)")
    search.add_argument("--category", default=None)
    search.add_argument("--tag", action="append", dest="tags", default=None, help="repeat for several")
    search.add_argument("--limit", type=int, default=10)
    search.add_argument("--include-archived", action="store_true")
    search.add_argument("--include-dormant", action="store_true", help="also dormant (long unused) memories")
    search.add_argument("--mode", choices=["hybrid", "bm25", "vector", "rockbot"], default=None)
    search.add_argument("--json", action="store_true", help="one JSON result per line")

    cli_browse.add_parsers(sub, common)
    install = sub.add_parser(
        "install", parents=[common], help="add this server to an MCP client's configuration (with a backup)"
    )
    install.add_argument("client", choices=["claude-desktop", "claude-code", "cursor", "vscode"])
    install.add_argument("--path", type=Path, default=None, help="the client's configuration file (default: its own)")
    install.add_argument("--command", dest="server_command", default=None, help="the command the client runs "
                         "(default: this rockmem-mcp's full path)")  # fmt: skip
    install.add_argument("--scope", choices=["user", "workspace"], default=None,
                         help="vscode: the workspace's .vscode/mcp.json (default) or the profile's")  # fmt: skip
    install.add_argument("--dry-run", action="store_true", help="say what would change; write nothing")
    install.add_argument("--json", action="store_true")
    imp = sub.add_parser("import", parents=[common], help="import memories from JSON Lines ('-' for stdin)")
    imp.add_argument("file", help="a JSON Lines file, one memory per line ('-' reads stdin)")
    imp.add_argument(
        "--no-embeddings", action="store_true", help="leave the vectors to the next server (by default: embedded now)"
    )
    graph_import = sub.add_parser(
        "import-graph",
        parents=[common],
        help="import the knowledge graph of @modelcontextprotocol/server-memory (its memory.jsonl; '-' for stdin)",
    )
    graph_import.add_argument("file")
    exp = sub.add_parser("export", parents=[common], help="export all memories as JSON Lines ('-' for stdout)")
    exp.add_argument("file")
    dream = sub.add_parser(
        "dream", parents=[common], help="consolidate memory: the deterministic pass, or apply a plan with --plan"
    )
    dream.add_argument("--pass", dest="dream_pass", default=None, help="with --plan: the pass the plan answers")
    dream.add_argument("--plan", default=None, help="a JSON plan file to apply (as the apply_dream tool)")
    dream.add_argument("--dry-run", action="store_true", help="show what would change; change nothing")
    dream.add_argument("--every", type=_interval, default=None, help="run as a sidecar, e.g. 4h or 30m")
    dream.add_argument("--force", action="store_true", help="run even if the last dream was under 6 h ago")
    doctor = sub.add_parser("doctor", parents=[common], help="check the data home; --fix repairs (quarantines)")
    doctor.add_argument("--fix", action="store_true", help="quarantine bad files, rebuild indexes, sweep")
    doctor.add_argument("--json", action="store_true", help="the report as JSON")
    sub.add_parser("stats", parents=[common], help="counts and sizes for the data home")
    sub.add_parser(
        "tools", parents=[common, toolsets], help="the toolsets, their tools and what they cost a model's context"
    )
    salience = sub.add_parser("salience", parents=[common], help="the least (or most) salient memories")
    order = salience.add_mutually_exclusive_group()
    order.add_argument("--least", dest="order", action="store_const", const="least", help="fading first (default)")
    order.add_argument("--most", dest="order", action="store_const", const="most", help="most salient first")
    salience.add_argument("--limit", type=int, default=20)
    salience.add_argument("--json", action="store_true", help="the listing as JSON")
    core = sub.add_parser("core", parents=[common], help="core memory (MEMORY.md): blocks, sizes against caps")
    core.add_argument("--block", help="one block: Identity, Active Context, Persona or Critical Facts")
    core.add_argument("--json", action="store_true", help="as JSON (the core_memory tool's read)")
    alerts = sub.add_parser(
        "alerts", parents=[common], help="critical files changed outside the server (pending alerts); --ack clears"
    )
    alerts.add_argument(
        "--ack", action="append", metavar="ID", help="acknowledge an alert by id (repeat for several), or 'all'"
    )
    alerts.add_argument("--json", action="store_true", help="the pending alerts as JSON")
    prune = sub.add_parser(
        "audit-prune", parents=[common], help="fold audit lines past retention into meta/audit-archive.md"
    )
    prune.add_argument("--json", action="store_true", help="the result as JSON")
    reindex = sub.add_parser(
        "reindex", parents=[common], help="rebuild the search index (and the graph's) from the files"
    )
    reindex.add_argument(
        "--embeddings", action="store_true", help="also give every memory its embedding now, with progress"
    )
    log_cmd = sub.add_parser("log", parents=[common], help="the audit trail: who changed what, when and why")
    log_cmd.add_argument("--item", help="a memory id, entity id, procedure or file (part of its path)")
    log_cmd.add_argument("--action", help="e.g. ARCHIVE,DELETE")
    log_cmd.add_argument("--actor", help="e.g. dream, subagent:x, manual")
    log_cmd.add_argument("--since", help="ISO time, day or age (2h, 3d)")
    log_cmd.add_argument("--until", help="ISO time, day or age")
    log_cmd.add_argument("--limit", type=int, default=50)
    log_cmd.add_argument("--json", action="store_true", help="as JSON")
    history = sub.add_parser("history", parents=[common], help="every version of one memory or file, with who and why")
    history.add_argument("item", help="a memory id, entity id, procedure or file path")
    history.add_argument("--limit", type=int, default=20)
    history.add_argument("--json", action="store_true", help="as JSON")
    revert = sub.add_parser("revert", parents=[common], help="put back one item, undo a run, or restore the home")
    revert.add_argument("item", nargs="?", help="a memory id, entity id, procedure or file path")
    revert.add_argument("--to", help="with item: a commit from its history or a time (default: before its last change)")
    revert.add_argument("--run", help="undo a whole run: dream:ID, reflection:ID or rv-… (a revert)")
    revert.add_argument("--home-as-of", help="restore every store as of this time (ISO time, day or age)")
    revert.add_argument("--json", action="store_true", help="as JSON")
    reflect = sub.add_parser(
        "reflect", parents=[common], help="reflection: run one, list and resolve pending ones, or run as a sidecar"
    )
    reflect.add_argument("id", nargs="?", help="a reflection to show or resolve, e.g. r-003")
    reflect.add_argument("--run", action="store_true", help="run a reflection now (manual)")
    reflect.add_argument("--list", action="store_true", help="the pending reflections (default with no id)")
    reflect.add_argument("--approve", action="store_true", help="apply every action (or --actions)")
    reflect.add_argument("--actions", help="with --approve: only these, e.g. a1,a3 (a partial approval)")
    reflect.add_argument("--edits", help='with --approve: JSON changes, e.g. {"a2": {"content": "…"}}')
    reflect.add_argument("--reject", metavar="REASON", help="reject it, saying why")
    reflect.add_argument(
        "--every", type=_interval, default=None, help="sidecar: check the schedule and threshold this often, e.g. 10m"
    )
    reflect.add_argument("--json", action="store_true", help="as JSON")
    proposals = sub.add_parser("proposals", parents=[common], help="sub-agents' memory proposals: list and review")
    proposals.add_argument("action", nargs="?", choices=("list", "commit", "reject", "defer"), default="list")
    proposals.add_argument("id", nargs="?", help="the proposal id (commit, reject, defer)")
    proposals.add_argument("--store", choices=("episodic", "semantic", "procedural", "vault"), help="commit elsewhere")
    proposals.add_argument("--reason", default="", help="why (required to reject)")
    proposals.add_argument("--all", action="store_true", help="list committed and rejected ones too")
    proposals.add_argument("--json", action="store_true", help="as JSON")
    for name in ("import", "import-graph", "dream", "stats", "tools", "reindex"):  # every command that reports
        sub.choices[name].add_argument("--json", action="store_true", help="the report as JSON on stdout")
    return parser


def _interval(text: str) -> float:
    """'4h', '30m', '90s' or a number of seconds."""
    units = {"h": 3600, "m": 60, "s": 1}
    try:
        seconds = float(text[:-1]) * units[text[-1]] if text and text[-1] in units else float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"an interval like 4h, 30m or 90s, not {text!r}") from None
    if seconds <= 0:
        raise argparse.ArgumentTypeError("the interval must be positive")
    return seconds


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a port number from 0 to 65535, not {text!r}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"a port number from 0 to 65535, not {port}")
    return port


UI_PORT = 8766  # beside MCP's 8765
LEAVES_HOME_ALONE = frozenset({"tools", "install", "doctor", "tenants"})  # no home needed, or (doctor) it reports one
READS_ONLY = frozenset({"log", "alerts", "history", "core", "salience", "search", "get", "list", "categories"})


def _home_problem(home: Path, create: bool = True) -> str | None:
    """Why `home` cannot be the data home (made here when missing and `create`), or None. A read-only home is
    usable: reads work and writes are refused one by one (README "A read-only home")."""
    advice = "pass --home DIR or set ROCKMEM_HOME to a folder"
    if home.exists() and not home.is_dir():
        return f"the data home {home} is not a folder; {advice}"
    if not create:
        return None
    try:
        home.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return f"cannot create the data home {home} ({exc.strerror or exc}); {advice}"
    return None


def _configure_logging(verbosity: int, settings_level: str) -> None:
    level = {0: settings_level, 1: "INFO"}.get(verbosity, "DEBUG")
    logging.basicConfig(stream=sys.stderr, level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    with _visible_output(stdout=(args.command or "serve") != "serve"):  # serve: stdout is the protocol's
        return _main(args)


class _Visible:
    """A text stream writing through `text.visible`; everything else is the wrapped stream's."""

    def __init__(self, stream: TextIO) -> None:
        self.raw = stream

    def write(self, text: str) -> int:
        self.raw.write(visible(text))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.raw, name)


@contextlib.contextmanager
def _visible_output(stdout: bool) -> Iterator[None]:
    saved = sys.stdout, sys.stderr
    sys.stderr = _Visible(sys.stderr)
    if stdout:
        sys.stdout = _Visible(sys.stdout)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved


def say(text: object = "") -> None:
    """A command's output line on stdout (through the visible filter `main` puts there): the one place the CLI's
    other modules (cli_browse) write, so only this module prints (over stdio, stdout is the protocol's)."""
    print(text)


def _main(args: argparse.Namespace) -> int:
    command = args.command or "serve"
    try:
        settings = Settings.load(
            {
                "home": getattr(args, "home", None),
                "namespace": getattr(args, "namespace", None),
                "toolsets": getattr(args, "toolsets", None),
            }
        )
        if command in ("serve", "tools"):
            from rockmem_mcp.server.toolsets import selected  # no MCP SDK: checked before the stores open

            selected(settings.toolsets)
    except RockmemError as exc:
        print(f"rockmem-mcp: {exc}", file=sys.stderr)
        return 2
    _configure_logging(getattr(args, "verbose", 0), settings.log_level)
    problem = None if command in LEAVES_HOME_ALONE else _home_problem(settings.home, create=command not in READS_ONLY)
    if problem is not None:
        print(f"rockmem-mcp: {problem}", file=sys.stderr)
        return 2
    try:
        if command != "doctor":  # which reports such a home; every other command would work through the link
            refuse_linked_store_folders(settings.store_dirs)
        if command in ("serve", "ui"):
            return _serve(settings, args)
        from rockmem_mcp.audit.service import MANUAL, acting_as

        # A person at the command line: what a command changes is audited as `manual` (a dream run or the
        # doctor's repairs say their own actor inside); `serve` acts for its clients instead.
        with reporting_io_errors(f"running {command}"), acting_as(MANUAL):
            return _until_output_closes(COMMANDS[command], settings, args)
    except RockmemError as exc:
        print(f"rockmem-mcp: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:  # a write the home refused (read-only) is said as one line; anything else is a bug
        reason = read_only_reason(exc)
        if reason is None or not Path(exc.filename or "/").is_relative_to(settings.home):
            raise
        print(f"rockmem-mcp: {ReadOnlyHomeError(exc.filename, reason)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


def _until_output_closes(command: Callable[[Settings, argparse.Namespace], int], *arguments: Any) -> int:
    """Run `command`; a reader that stops reading (`export - | head`) ends it quietly, with the status a command
    killed by SIGPIPE has (141), and without Python's "Exception ignored" line when stdout is flushed at exit."""
    try:
        return command(*arguments)
    except BrokenPipeError:
        with contextlib.suppress(OSError, ValueError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        return 141


def _serve(settings: Settings, args: argparse.Namespace) -> int:
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
            memory, graph = open_stores()
            print(f"rockmem-mcp: serving MCP over stdio; {_start_summary(settings, memory)}", file=sys.stderr)
            return memory, graph

        with _reporting_start_errors():
            anyio.run(serve_stdio, build_server(settings, announced))
        return 0
    import uvicorn

    from rockmem_mcp.errors import ConfigError
    from rockmem_mcp.server.http import http_app, refuse_unguarded
    from rockmem_mcp.ui.app import WithPage, page_app, page_url, redact_access_log, standalone_app

    overrides = {"host": getattr(args, "host", None), "port": getattr(args, "port", None)}
    settings = settings.model_copy(update={k: v for k, v in overrides.items() if v is not None})
    page_only = args.command == "ui"
    try:
        if page_only:
            refuse_unguarded(settings)
            app: Any = standalone_app(settings, open_stores)
        else:
            running: list[Any] = []
            app = http_app(build_server(settings, open_stores, running), settings, running)
            if args.ui:
                if settings.tenants_file and not settings.auth_token:
                    raise ConfigError(
                        "--ui shows the server's own memory: with tenants, set ROCKMEM_AUTH_TOKEN for the page too"
                    )
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
    "JSON-RPC on its stdin and stdout, so typed lines are not commands. To look around by hand: "
    "`npx @modelcontextprotocol/inspector rockmem-mcp`, or the CLI (`rockmem-mcp search WORDS`, "
    "`rockmem-mcp --help`). Ctrl-D ends it."
)


def _start_summary(settings: Settings, memory: Any) -> str:
    """Home, ranking and size, for the start line."""
    ranking = settings.search_mode if memory.embedder.configured else "bm25 (embeddings off)"
    state = "; read-only: writes are refused" if memory.read_only is not None else ""
    count = len(memory.index)
    return f"home {settings.home}; {count:,} {'memory' if count == 1 else 'memories'}; ranking {ranking}{state}"


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


@contextlib.contextmanager
def _memory(settings: Settings) -> Iterator[Any]:
    from rockmem_mcp.memory.service import MemoryService

    service = MemoryService(settings, embed_in_background=False)
    try:
        yield service
    finally:
        service.close()


@contextlib.contextmanager
def _graph(settings: Settings) -> Iterator[Any]:
    from rockmem_mcp.graph.service import GraphService

    graph = GraphService(settings)
    try:
        yield graph
    finally:
        graph.close()


def _install(settings: Settings, args: argparse.Namespace) -> int:
    """The client's configuration gets a rockmem entry; the home is written into it only when one was named
    (--home or ROCKMEM_HOME), so the server otherwise uses its own default, as from a shell."""
    import shutil

    from rockmem_mcp.client_config import default_path, install

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
                          "backup": str(done.backup) if done.backup else None, "entry": done.entry}))  # fmt: skip
    else:
        print(("(dry run) " if args.dry_run else "") + done.describe())
    return 0


def _search(settings: Settings, args: argparse.Namespace) -> int:
    from rockmem_mcp.core.workspace import SEARCH_HITS, Workspace

    with _memory(settings) as memory:
        found = memory.search(
            args.query,
            args.category,
            args.tags,
            args.limit,
            include_archived=args.include_archived,
            mode=args.mode,
            include_dormant=args.include_dormant,
        )
    # As search_memory: the workspace files' sections too, for a query that no filter narrows (text output only).
    if args.query and not (args.json or args.category or args.tags or args.include_archived):
        found.workspace = Workspace(settings).search(args.query, min(args.limit, SEARCH_HITS))
    for hit in found.results:
        if args.json:
            print(hit.model_dump_json())
            continue
        entry = hit.entry
        score = "      " if hit.score is None else f"{hit.score:6.3f}"
        flag = " [archived]" if entry.archived else ""
        print(f"{score}  [{entry.id}] ({entry.category or '-'}){flag} {entry.content[:200]}")
    for section in found.workspace:
        where = f"{section.file}:{section.line}"
        print(f"{section.score:6.3f}  [{where}] ({section.heading or '-'}) {' '.join(section.text.split())[:200]}")
    if not args.json:
        waiting = f"; {found.unembedded} not embedded yet (reindex --embeddings)" if found.unembedded else ""
        sections = f"; {len(found.workspace)} workspace sections" if found.workspace else ""
        summary = f"{len(found.results)} of {found.total_matches} matches, ranked by {found.mode}{waiting}{sections}"
        print(summary, file=sys.stderr)
    return 0


def _open_output(path: str) -> TextIO:
    if path == "-":
        return sys.stdout
    return open(path, "w", encoding="utf-8")


def _file_size(source: BinaryIO) -> int | None:
    """A regular file's size in bytes; None for a pipe or a terminal (or an empty file)."""
    try:
        info = os.fstat(source.fileno())
    except (OSError, ValueError):
        return None
    return info.st_size if stat.S_ISREG(info.st_mode) and info.st_size else None


def _open_input(path: str) -> BinaryIO:
    # Bytes, decoded line by line by the importer, so one bad line is reported instead of ending the import.
    if path == "-":
        return sys.stdin.buffer
    return open(path, "rb")


def _import(settings: Settings, args: argparse.Namespace) -> int:
    from rockmem_mcp.cli_progress import Meter
    from rockmem_mcp.home.transfer import HomeStores, bounded_lines, import_jsonl

    started = time.monotonic()
    try:
        source = _open_input(args.file)
    except OSError as exc:
        raise RockmemError(f"cannot read {args.file}: {exc.strerror}") from None
    size = _file_size(source)  # a file's bytes: the bar's whole (a pipe has no size: lines are counted)

    def progress(line: int) -> None:
        meter.update(source.tell() if size else line, size, f"line {line:,}")

    with (
        source,
        Meter("importing", "bytes" if size else "lines", size) as meter,
        _memory(settings) as memory,
        _graph(settings) as graph,
    ):
        report = import_jsonl(memory, bounded_lines(source), progress, others=HomeStores(settings, graph))
        vectors = _embed_after_import(memory) if memory.embedder.configured and not args.no_embeddings else {}
    _report_bad_lines(report.errors)
    for reason in report.skipped[:50]:
        print(f"skipped {reason}", file=sys.stderr)
    if args.json:
        totals = {"seconds": round(time.monotonic() - started, 3)} | vectors
        print(json.dumps(dataclasses.asdict(report) | totals, default=str))
    others = ", ".join(f"{n} {store}" for store, n in report.other_stores.items() if n)
    print(
        f"imported {report.imported} memories ({report.replaced} replaced existing ids)"
        f"{f', and {others}' if others else ''}; {len(report.errors)} bad lines, "
        f"{len(report.skipped)} records skipped, in {time.monotonic() - started:.1f}s",
        file=sys.stderr,
    )
    return 1 if report.errors else 0


def _embed_missing(memory: Any) -> dict[str, int]:
    """Give every memory without a vector its vector now, with a progress bar; the counts, for --json."""
    from rockmem_mcp.cli_progress import Meter

    started = time.monotonic()
    worker = memory.vector_worker
    with Meter("embedding", "memories") as meter:
        done = worker.drain(meter.update)
    print(
        f"vectors for {done} memories ({worker.embedded} embedded with {memory.embedder.model_id}, "
        f"{worker.reused} from the cache) in {time.monotonic() - started:.1f}s",
        file=sys.stderr,
    )
    return {"vectors": done, "embedded": worker.embedded, "from_cache": worker.reused}


def _embed_after_import(memory: Any) -> dict[str, int]:
    # Embedding here, once, spares every server started afterwards a backfill while it serves. The memories are
    # already saved: a provider that is down only defers their vectors to the next server or `reindex --embeddings`.
    try:
        return _embed_missing(memory)
    except EmbeddingError as exc:
        print(f"vectors later: {exc} (a server or `reindex --embeddings` will embed them)", file=sys.stderr)
        return {"vectors": 0}


def _import_graph(settings: Settings, args: argparse.Namespace) -> int:
    from rockmem_mcp.graph.service import GraphService
    from rockmem_mcp.home.transfer import bounded_lines, import_reference_graph

    started = time.monotonic()
    try:
        source = _open_input(args.file)
    except OSError as exc:
        raise RockmemError(f"cannot read {args.file}: {exc.strerror}") from None
    graph = GraphService(settings)
    try:
        with source, _memory(settings) as memory:
            report = import_reference_graph(graph, memory, bounded_lines(source))
    finally:
        graph.close()
    _report_bad_lines(report.errors)
    if args.json:
        print(json.dumps(dataclasses.asdict(report) | {"seconds": round(time.monotonic() - started, 3)}, default=str))
    print(
        f"imported {report.entities} entities ({report.entities_created} new), {report.triples} relations "
        f"({report.triples_created} new) and {report.observations} observations as memories; "
        f"{len(report.errors)} bad lines, in {time.monotonic() - started:.1f}s",
        file=sys.stderr,
    )
    return 1 if report.errors else 0


def _report_bad_lines(errors: list[Any]) -> None:
    for err in errors[:50]:
        print(f"line {err.line}: {err.error}", file=sys.stderr)
    if len(errors) > 50:
        print(f"... and {len(errors) - 50} more bad lines", file=sys.stderr)


def _export(settings: Settings, args: argparse.Namespace) -> int:
    from rockmem_mcp.home.transfer import HomeStores, export_jsonl

    try:
        target = _open_output(args.file)
    except OSError as exc:
        raise RockmemError(f"cannot write {args.file}: {exc.strerror}") from None
    from rockmem_mcp.cli_progress import Meter

    with _memory(settings) as memory, _graph(settings) as graph:
        others = HomeStores(settings, graph)
        with Meter("exporting", "memories", len(memory.index)) as meter:
            count = export_jsonl(memory, target, others, meter.update)
    if target is not sys.stdout:
        target.close()
    extra = (
        f" and {others.exported} other records (graph, working memory, feedback, episodes, procedures, files)"
        if others.exported
        else ""
    )
    print(f"exported {count} memories{extra}", file=sys.stderr)
    return 0


def _dream(settings: Settings, args: argparse.Namespace) -> int:
    from rockmem_mcp.consolidation.dream import Dreamer
    from rockmem_mcp.consolidation.templates import Templates
    from rockmem_mcp.graph.service import GraphService
    from rockmem_mcp.models import DreamPlan

    plan = None
    if args.plan:
        try:
            plan = DreamPlan.model_validate_json(Path(args.plan).read_bytes())
        except OSError as exc:
            raise RockmemError(f"cannot read {args.plan}: {exc.strerror}") from None
        except ValueError as exc:
            raise RockmemError(f"{args.plan} is not a dream plan: {str(exc).splitlines()[0]}") from None
    from rockmem_mcp.governance.history import GitHistory

    graph = GraphService(settings)
    try:
        with _memory(settings) as memory:
            history = GitHistory(settings, memory.audit)  # commits what is pending as a run starts, and its changes
            try:
                dreamer = Dreamer(memory, graph, settings, Templates(settings.prompts_dir), before_run=history.flush)
                while True:
                    if args.force or args.dry_run or plan is not None or dreamer.due():
                        print("dreaming ...", file=sys.stderr, flush=True)
                        for report in _dream_once(dreamer, settings, plan, args):
                            if args.json:  # one report per line: a sidecar (--every) streams them
                                print(report.model_dump_json())
                            else:
                                _print_report(report)
                    else:
                        last = dreamer.last_run()
                        print(
                            f"skipped: the last dream finished at {last:%Y-%m-%d %H:%M} UTC, under 6 h ago "
                            "(--force runs anyway)",
                            file=sys.stderr,
                        )
                    if args.every is None:
                        return 0
                    time.sleep(args.every)
            finally:
                history.close()  # commits the run's changes
    finally:
        graph.close()


def _dream_once(dreamer: Any, settings: Settings, plan: Any, args: argparse.Namespace) -> Iterator[Any]:
    """A plan file: apply it. Otherwise the deterministic pass, then, with a language model configured, the
    model's passes (or just --pass NAME)."""
    from rockmem_mcp.consolidation.dream import PASSES
    from rockmem_mcp.llm import ChatLLM

    if plan is not None:
        yield dreamer.apply(plan, args.dream_pass or "consolidation", "plan", args.dry_run)
        return
    if args.dream_pass in (None, "deterministic"):
        from rockmem_mcp.cli_progress import Meter

        with Meter("dreaming", "steps") as meter:
            report = dreamer.run_deterministic(args.dry_run, meter.update)
        yield report
    if args.dream_pass == "deterministic" or not (settings.llm_endpoint and settings.llm_model):
        if args.dream_pass not in (None, "deterministic"):
            raise RockmemError(
                f"the {args.dream_pass} pass needs a language model: set ROCKMEM_LLM_ENDPOINT and "
                "ROCKMEM_LLM_MODEL (or give --plan)"
            )
        return
    llm = ChatLLM(settings)
    try:
        from rockmem_mcp.cli_progress import Meter

        for name in [args.dream_pass] if args.dream_pass else PASSES:
            print(f"dreaming: {name} ...", file=sys.stderr, flush=True)
            with Meter(f"dreaming: {name}", "items") as meter:
                report = dreamer.run_llm(name, llm, args.dry_run, meter.update)
            yield report
    finally:
        llm.close()
        print(f"language model: {llm.tokens_used} tokens", file=sys.stderr)


def _print_report(report: Any) -> None:
    for action in report.applied:
        ids = ", ".join(action.ids) + (f" -> {action.result_id}" if action.result_id else "")
        print(f"  {action.action:<12} {ids}  {action.reason}".rstrip())
    for action in report.rejected:
        print(f"  rejected {action.action:<8} {', '.join(action.ids)}  {action.reason}".rstrip())
    for action in report.contradictions:
        print(f"  contradiction {', '.join(action.ids)}  {action.reason} (both kept: resolve them)")
    for change in report.tier_changes:
        print(f"  tier         {change.id}  {change.from_tier} -> {change.to_tier} (salience {change.salience:.3f})")
    for found in report.archive_candidates:
        print(f"  review       {found.id}  salience {found.salience:.3f}, {found.uses} uses: {found.preview}")
    where = "" if report.dry_run else f" (report {report.id} in dream-reports/)"
    print(f"{report.summary}{where}", file=sys.stderr)


def _doctor(settings: Settings, args: argparse.Namespace) -> int:
    from rockmem_mcp.home.doctor import Doctor

    report = Doctor(settings).run(fix=args.fix)
    if args.json:
        print(report.as_json())
    else:
        for finding in report.findings:
            done = f"  -> {finding.fixed}" if finding.fixed else ""
            print(f"{finding.kind:<16} {finding.path}: {finding.detail}{done}")
        checked = ", ".join(f"{n} {what}" for what, n in report.checked.items())
        verdict = "healthy" if report.healthy else f"{len(report.findings)} finding(s)"
        print(f"{report.home}: {verdict} (checked {checked or 'nothing: no home yet'})", file=sys.stderr)
        if report.quarantine:
            print(f"bad files moved to {report.quarantine}/ (nothing deleted)", file=sys.stderr)
        if report.in_use_by:
            print(f"in use by {', '.join(report.in_use_by)}: a write in flight may show here", file=sys.stderr)
        if report.findings and not args.fix:
            print("run with --fix to repair (stop servers on this home first)", file=sys.stderr)
    unfixed = [f for f in report.findings if not f.fixed]
    return 1 if unfixed else 0


def _stats(settings: Settings, args: argparse.Namespace) -> int:
    from rockmem_mcp.graph.service import GraphService

    with _memory(settings) as memory:
        stats = memory.stats()
        tree = memory.categories()
    graph = GraphService(settings)
    try:
        graph_stats = graph.stats()
    finally:
        graph.close()
    print(
        json.dumps(
            {
                **stats.__dict__,
                "graph_entities": graph_stats["entities"],
                "graph_triples": graph_stats["triples"],
                "top_categories": {c.category: c.total for c in tree.categories if "/" not in c.category},
            },
            indent=2,
        )
    )
    return 0


def _tools(settings: Settings, args: argparse.Namespace) -> int:
    """Print the toolset table (as in the README), then what this configuration selects."""
    import anyio

    from rockmem_mcp.server import toolsets
    from rockmem_mcp.server.app import build_server

    everything = anyio.run(build_server(settings.model_copy(update={"toolsets": ["all"]})).list_tools)
    enabled = toolsets.selected(settings.toolsets)
    names = set(toolsets.tools_of(enabled))
    cost = toolsets.tokens(tool for tool in everything if tool.name in names)
    if args.json:
        by_name = {tool.name: tool for tool in everything}
        sets = {
            name: {"default": name in toolsets.DEFAULT, "tools": list(tools), "tokens":
                   toolsets.tokens(by_name[t] for t in tools), "when": toolsets.WHEN[name]}
            for name, tools in toolsets.TOOLSETS.items()
        }  # fmt: skip
        print(json.dumps({"toolsets": sets, "selected": list(enabled), "selected_tokens": cost,
                          "budget": toolsets.TOKEN_BUDGET}))  # fmt: skip
        return 0
    print(toolsets.table(everything))
    print(
        f"selected ({','.join(settings.toolsets)}): {', '.join(enabled)}; {len(names)} tools, ≈ {cost:,} tokens "
        f"(the default must stay within {toolsets.TOKEN_BUDGET:,})"
    )


def _salience(settings: Settings, args: argparse.Namespace) -> int:
    from rockmem_mcp.consolidation.decay import salience_listing

    with _memory(settings) as memory:
        listing = salience_listing(memory, args.order or "least", args.limit)
    if args.json:
        print(listing.model_dump_json(indent=2))
        return 0
    for found in listing.memories:
        pin = " pinned" if found.pinned else ""
        print(
            f"{found.salience:6.3f}  {found.tier:<17} [{found.id}] {found.uses:>4} uses, last {found.last_use:%Y-%m-%d}"
            f"{pin}  {found.preview}"
        )
    tiers = ", ".join(f"{n} {name}" for name, n in listing.tiers.items())
    print(f"{listing.order} salient {len(listing.memories)} of {sum(listing.tiers.values())}: {tiers}; "
          f"{listing.pinned} pinned", file=sys.stderr)  # fmt: skip
    return 0


def _core(settings: Settings, args: argparse.Namespace) -> int:
    """Read-only: no store is opened, so it runs beside a server. Exit 1 for a malformed or over-cap file."""
    from rockmem_mcp.core.service import CoreMemory

    view = CoreMemory(settings).read(args.block)
    if args.json:
        print(view.model_dump_json(indent=2, exclude={"text", "changed"}))
    else:
        print(view.text)  # made visible by _visible_output, as every command's output
        print(f"version {view.version}; {view.tokens:,} of {view.cap:,} tokens", file=sys.stderr)
    for problem in view.over_cap:
        print(f"over its cap: {problem}", file=sys.stderr)
    return 1 if view.over_cap else 0


def _reindex(settings: Settings, args: argparse.Namespace) -> int:
    from rockmem_mcp.graph import service as graph
    from rockmem_mcp.memory.service import SNAPSHOT_NAME

    (settings.index_dir / SNAPSHOT_NAME).unlink(missing_ok=True)
    (settings.index_dir / graph.SNAPSHOT_NAME).unlink(missing_ok=True)  # the graph re-reads its files next start
    summary: dict[str, Any] = {}
    with _memory(settings) as memory:
        print(f"indexed {len(memory.index)} memories", file=sys.stderr)
        summary["memories"] = len(memory.index)
        if getattr(args, "embeddings", False):
            summary |= _embed_missing(memory)
    if getattr(args, "json", False):
        print(json.dumps(summary))
    return 0


def _alerts(settings: Settings, args: argparse.Namespace) -> int:
    """List pending critical-file alerts, or acknowledge them (a person's act: logged as `manual`)."""
    from rockmem_mcp.audit.service import MANUAL, Audit, acting_as
    from rockmem_mcp.governance.integrity import CriticalFiles

    critical = CriticalFiles(settings, Audit(settings))
    if args.ack:
        with acting_as(MANUAL):
            done = critical.acknowledge("all" if "all" in args.ack else args.ack)
        print(f"acknowledged {len(done)} alert(s)", file=sys.stderr)
        return 0
    pending = critical.pending()
    if args.json:
        items = [{**dataclasses.asdict(a), "time": a.time.isoformat()} for a in pending]
        print(json.dumps(items, ensure_ascii=False, indent=2))
        return 0
    for alert in pending:
        change = f" ({alert.change})" if alert.change else ""
        print(f"{alert.id}  {alert.time:%Y-%m-%d %H:%M} UTC  {alert.file} was {alert.summary}{change}")
    print(
        f"{len(pending)} pending alert(s)" + (": acknowledge with --ack ID or --ack all" if pending else ""),
        file=sys.stderr,
    )
    return 0


def _audit_prune(settings: Settings, args: argparse.Namespace) -> int:
    """Fold audit lines older than ROCKMEM_AUDIT_RETENTION_DAYS into the monthly digests (the dream does it too)."""
    from rockmem_mcp.audit.retention import ARCHIVE_NAME, fold_old_lines
    from rockmem_mcp.audit.service import audit_log
    from rockmem_mcp.models import utc_now

    result = fold_old_lines(settings, audit_log(settings), utc_now())
    if args.json:
        print(json.dumps(dataclasses.asdict(result)))
    else:
        months = f" ({', '.join(result.months)})" if result.months else ""
        print(
            f"folded {result.dropped} audit line(s) older than {settings.audit_retention_days} days into "
            f"meta/{ARCHIVE_NAME}{months}",
            file=sys.stderr,
        )
    return 0


@contextlib.contextmanager
def _audit_trail(settings: Settings, git: bool) -> Iterator[tuple[Any, Any]]:
    """The audit trail, and with `git` the home's history brought up to date (commits what is pending)."""
    from rockmem_mcp.audit.service import Audit
    from rockmem_mcp.governance.history import GitHistory
    from rockmem_mcp.governance.trail import AuditTrail

    audit = Audit(settings)
    history = GitHistory(settings, audit) if git else None
    try:
        yield AuditTrail(audit, history), history
    finally:
        if history is not None:
            history.close()


def _print_entries(entries: list[Any]) -> None:
    for entry in entries:
        print(f"{entry.time:%Y-%m-%dT%H:%M:%S}Z | {entry.action} | {entry.file} | {entry.actor} | {entry.approval} | "
              f"{entry.summary}")  # fmt: skip


def _log(settings: Settings, args: argparse.Namespace) -> int:
    """Read-only: runs beside a server."""
    from rockmem_mcp.governance.trail import parse_moment
    from rockmem_mcp.models import AuditResult, utc_now

    now = utc_now()
    with _audit_trail(settings, git=False) as (trail, _):
        entries = trail.entries(
            file=args.item,
            action=args.action,
            actor=args.actor,
            since=parse_moment(args.since, now, "--since") if args.since else None,
            until=parse_moment(args.until, now, "--until") if args.until else None,
            limit=args.limit,
        )
    if args.json:
        print(AuditResult(entries=entries).model_dump_json(indent=2))
    else:
        _print_entries(entries)
    return 0


def _history(settings: Settings, args: argparse.Namespace) -> int:
    with _audit_trail(settings, git=True) as (trail, _):
        result = trail.item_history(args.item, args.limit)
    if args.json:
        print(result.model_dump_json(indent=2))
        return 0
    for version in result.versions:
        state = "removed" if version.deleted else (version.text or "").replace("\n", " ")[:160]
        print(f"{version.time:%Y-%m-%dT%H:%M:%S}Z {version.commit[:12]} {version.file}: {state}")
        for change in version.changes:
            print(f"    {change.action} by {change.actor} ({change.approval}): {change.summary}")
    if not result.versions:
        _print_entries(result.entries)
    if result.note:
        print(result.note, file=sys.stderr)
    return 0


def _revert(settings: Settings, args: argparse.Namespace) -> int:
    from rockmem_mcp.audit.service import MANUAL, acting_as
    from rockmem_mcp.governance.rollback import Rollback
    from rockmem_mcp.governance.trail import parse_moment
    from rockmem_mcp.models import utc_now

    if sum(map(bool, (args.item, args.run, args.home_as_of))) != 1:
        print("rockmem-mcp: name exactly one of ITEM, --run or --home-as-of", file=sys.stderr)
        return 2
    with (
        _memory(settings) as memory,
        _graph(settings) as graph,
        _audit_trail(settings, git=True) as (_, history),
        acting_as(MANUAL),
    ):
        rollback = Rollback(settings, memory.audit, history, memory, graph=lambda: graph)
        if args.item:
            result = rollback.revert_item(args.item, args.to)
        elif args.run:
            result = rollback.revert_run(args.run)
        else:
            result = rollback.restore_home(parse_moment(args.home_as_of, utc_now(), "--home-as-of"))
        history.flush()
    if args.json:
        print(result.model_dump_json(indent=2))
        return 0
    print(f"{result.revert_id}: {len(result.restored)} restored, {len(result.removed)} removed as of "
          f"{result.restored_to[:12]}; undo it with: rockmem-mcp revert --run {result.revert_id}")  # fmt: skip
    for skip in result.skipped:
        print(f"skipped {skip.file}: {skip.reason}", file=sys.stderr)
    return 0


@contextlib.contextmanager
def _reflector(settings: Settings) -> Iterator[Any]:
    """A reflection engine on the home, with the sub-agents' proposals (the deferred ones become actions); the
    git history commits what is pending before a run and after."""
    from rockmem_mcp.consolidation.dream import Dreamer
    from rockmem_mcp.consolidation.reflection import Reflector
    from rockmem_mcp.consolidation.templates import Templates
    from rockmem_mcp.governance.history import GitHistory
    from rockmem_mcp.proposals.service import committing

    with _remembering(settings) as remembering:
        memory = remembering.memory
        history = GitHistory(settings, memory.audit)
        try:
            dreamer = Dreamer(memory, remembering.graph, settings, Templates(settings.prompts_dir),
                              episodes=remembering.episodes, procedures=remembering.procedures,
                              before_run=history.flush)  # fmt: skip
            yield Reflector(settings, dreamer, remembering.core, proposals=committing(settings, remembering))
        finally:
            history.close()


def _reflect(settings: Settings, args: argparse.Namespace) -> int:
    from rockmem_mcp.consolidation.reflection_triggers import ReflectionTriggers
    from rockmem_mcp.llm import language_model

    resolving = args.approve or args.reject is not None
    if resolving and not args.id:
        print("rockmem-mcp: --approve and --reject need the reflection's id, e.g. r-003", file=sys.stderr)
        return 2
    with _reflector(settings) as reflector:
        if args.every is not None:
            triggers = ReflectionTriggers(settings, lambda: reflector, llm=lambda: language_model(settings))
            print(f"reflection sidecar: schedule {settings.reflection_at} local, threshold "
                  f"{settings.reflection_threshold}; checking every {args.every:g} s", file=sys.stderr)  # fmt: skip
            while True:
                try:
                    done = triggers.tick()
                except (RockmemError, OSError) as exc:  # said, and tried again at the next check
                    print(f"rockmem-mcp: reflection: {exc}", file=sys.stderr, flush=True)
                    done = None
                if done is not None:
                    print(f"{done.id} ({done.trigger}): {done.status}, {len(done.actions)} actions", file=sys.stderr,
                          flush=True)  # fmt: skip
                time.sleep(args.every)
        if args.run:
            llm = language_model(settings)
            try:
                shown = [reflector.run("manual", llm)]
            finally:
                if llm is not None:
                    llm.close()
        elif args.reject is not None:
            shown = [reflector.resolve(args.id, "reject", reason=args.reject)]
        elif args.approve:
            chosen = [a.strip() for a in args.actions.split(",") if a.strip()] if args.actions else None
            edits = _json_argument(args.edits, "--edits") if args.edits else None
            decision = "approve_with_changes" if edits else "partial" if chosen else "approve"
            shown = [reflector.resolve(args.id, decision, chosen, edits)]
        elif args.id:
            shown = [reflector.get(args.id)]
        else:
            shown = reflector.pending()
    if args.json:
        print(json.dumps([r.model_dump(mode="json") for r in shown], indent=2))
        return 0
    if not shown:
        print("no reflection is waiting for approval", file=sys.stderr)
    for reflection in shown:
        if reflection.status == "pending" or (args.id and not resolving):
            print(reflection.summary)
        else:
            resolution = reflection.resolution
            applied = ", ".join(f"{n} {k}" for k, n in (resolution.applied if resolution else {}).items())
            print(f"{reflection.id}: {reflection.status}; applied {applied or 'nothing'}")
    return 0


def _json_argument(text: str, name: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise RockmemError(f"{name} is not JSON: {exc}") from None


def _proposals(settings: Settings, args: argparse.Namespace) -> int:
    """The user reviewing at the command line: a commit is theirs (manual review mode needs no more)."""
    from rockmem_mcp.models import ProposalResult
    from rockmem_mcp.proposals.service import Proposals, committing, line

    if args.action == "list":
        proposals = Proposals(settings, _audit(settings))
        found = proposals.history() if args.all else [*proposals.pending(), *proposals.deferred()]
        if args.json:
            print(ProposalResult(proposals=found).model_dump_json(indent=2, by_alias=True))
        for proposal in [] if args.json else found:
            print(line(proposal) + ("" if proposal.status == "pending" else f" [{proposal.status}]"))
        return 0
    if not args.id:
        print(f"rockmem-mcp: proposals {args.action} needs the proposal's id", file=sys.stderr)
        return 2
    if args.action != "commit":
        proposals = Proposals(settings, _audit(settings))
        done = (
            proposals.reject(args.id, args.reason) if args.action == "reject" else proposals.defer(args.id, args.reason)
        )
    else:
        with _remembering(settings) as remembering:
            done = committing(settings, remembering).commit(args.id, args.store, user_confirmed=True)
    if args.json:
        print(done.model_dump_json(indent=2, by_alias=True))
    else:
        print(line(done) + f" [{done.status}" + (f": {', '.join(done.committed_as)}]" if done.committed_as else "]"))
    return 0


def _audit(settings: Settings) -> Any:
    from rockmem_mcp.audit.service import Audit

    return Audit(settings)


@contextlib.contextmanager
def _remembering(settings: Settings) -> Iterator[Any]:
    """Every store a remember (or a committed proposal) may write, opened for one command."""
    from rockmem_mcp.core.service import CoreMemory
    from rockmem_mcp.episodes.service import Episodes
    from rockmem_mcp.procedures.service import Procedures
    from rockmem_mcp.recall.remembering import Remembering

    with _memory(settings) as memory, _graph(settings) as graph:
        episodes = Episodes(settings, reinforcer=memory.reinforcer)
        procedures = Procedures(settings, memory.reinforcer)
        yield Remembering(settings, memory, episodes, procedures, CoreMemory(settings, memory), lambda: graph)


def _migrate_store(settings: Settings, args: argparse.Namespace) -> int:
    """Every store from one home or database to another (long-term memories, then what a backup carries besides),
    checked afterwards. A database side keeps its replica's index and audit trail in this command's home (--home),
    or in a temporary folder when that is the other side."""
    import tempfile

    from rockmem_mcp.cli_progress import Meter
    from rockmem_mcp.graph.service import GraphService
    from rockmem_mcp.home.store_migration import migrate_records
    from rockmem_mcp.home.transfer import HomeStores, migrate_memories, migrate_other_stores
    from rockmem_mcp.memory.service import MemoryService
    from rockmem_mcp.storage.pg import is_database_url, redacted

    if args.source == args.target:
        print("rockmem-mcp: --from and --to are the same store", file=sys.stderr)
        return 2
    with contextlib.ExitStack() as stack:

        def side(where: str) -> Any:
            if is_database_url(where):
                files_side = args.target if where == args.source else args.source
                home = settings.home
                if not is_database_url(files_side) and Path(files_side).expanduser().resolve() == home:
                    home = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="rockmem-migrate-")))
                chosen = settings.model_copy(update={"home": home, "store": where})
            else:
                chosen = settings.model_copy(update={"home": Path(where).expanduser().resolve(), "store": None})
            memory = MemoryService(chosen, embed_in_background=False)
            stack.callback(memory.close)
            graph = GraphService(chosen, reinforcer=memory.reinforcer)
            stack.callback(graph.close)
            return memory, HomeStores(chosen, graph)

        (source, source_others), (target, target_others) = side(args.source), side(args.target)
        # First what a backup does not carry (the audit trail among them: the source's lines then come before
        # the lines this migration writes), then the memories, then what a backup carries.
        rest = migrate_records(source.settings, target.settings, source.reinforcer, target.reinforcer)
        with Meter("migrating", "memories", len(source.index)) as meter:
            report = migrate_memories(source, target, meter.update)
        migrate_other_stores(source_others, target_others, report)
        report.other_stores.update(rest.moved)
        report.differing += rest.differing
        report.skipped += rest.kept
    named = tuple(redacted(where) if is_database_url(where) else where for where in (args.source, args.target))
    if args.json:
        print(json.dumps(dataclasses.asdict(report) | {"from": named[0], "to": named[1]}))
    else:
        others = ", ".join(f"{n} {store}" for store, n in report.other_stores.items() if n) or "nothing else"
        print(f"migrated {report.moved} memories from {named[0]} to {named[1]} ({report.replaced} replaced ids "
              f"the target had), and {others}; {report.checked} memories read back, every other store exported "
              f"again and compared: {len(report.differing)} differing", file=sys.stderr)  # fmt: skip
        for reason in report.skipped:
            print(f"  kept the target's own: {reason}", file=sys.stderr)
        for what in report.differing[:20]:
            print(f"  differs: {what}", file=sys.stderr)
    return 1 if report.differing else 0


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


COMMANDS = {
    "search": _search,
    "tenants": _tenants,
    "migrate-store": _migrate_store,
    "import": _import,
    "import-graph": _import_graph,
    "dream": _dream,
    "doctor": _doctor,
    "export": _export,
    "stats": _stats,
    "tools": _tools,
    "salience": _salience,
    "core": _core,
    "reindex": _reindex,
    "log": _log,
    "history": _history,
    "revert": _revert,
    "alerts": _alerts,
    "audit-prune": _audit_prune,
    "reflect": _reflect,
    "proposals": _proposals,
    **cli_browse.COMMANDS,
    "install": _install,
}
