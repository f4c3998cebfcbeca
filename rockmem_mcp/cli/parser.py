"""The argument parser: every command, flag and its help text (the CLI reference is generated from it).

Imported before anything else the CLI needs, so `--help` and `--version` answer without loading the stores, numpy,
pydantic or the server: keep this module's imports to the standard library and the package's version."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rockmem_mcp import __version__


def common_options() -> argparse.ArgumentParser:
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


def toolsets_option() -> argparse.ArgumentParser:
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
    common = common_options()
    toolsets = toolsets_option()
    parser = argparse.ArgumentParser(
        prog="rockmem-mcp",
        parents=[common, toolsets],
        description="Durable memory for AI agents over MCP. With no command, serves MCP over stdio.",
    )
    parser.add_argument("--version", action="version", version=f"rockmem-mcp {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", help="what to do (default: serve)")

    serve = sub.add_parser("serve", parents=[common, toolsets], help="serve MCP (stdio by default)")
    serve.add_argument("--transport", choices=["stdio", "streamable-http"], default="stdio",
                       help="stdio (a client starts this process) or streamable-http (a server clients connect "
                       "to; default stdio)")  # fmt: skip
    serve.add_argument("--host", default=None, help="HTTP bind address (default 127.0.0.1)")
    serve.add_argument("--port", type=port, default=None, help="HTTP port (default 8765; 0: any free one, announced)")
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
    migrate.add_argument("--json", action="store_true", help="the report as JSON on stdout")
    migrate.add_argument(
        "--no-embeddings", action="store_true", help="leave the vectors to the next server (by default: embedded now)"
    )

    tenants = sub.add_parser("tenants", parents=[common], help="tenants of a server: a token each, their own memory")
    tenants.add_argument(
        "action", choices=["add", "revoke", "list"], help="add (prints a new token), revoke (every token) or list"
    )
    tenants.add_argument("name", nargs="?", default=None, help="the tenant (add, revoke)")
    tenants.add_argument("--json", action="store_true", help="the result as JSON on stdout")

    ui = sub.add_parser("ui", parents=[common], help="a web page on loopback to see and steer memory")
    ui.add_argument("--host", default=None, help="bind address (default 127.0.0.1; elsewhere a token is required)")
    ui.add_argument("--port", type=port, default=UI_PORT, help=f"port (default {UI_PORT}; 0: any free one, announced)")

    search = sub.add_parser("search", parents=[common], help="search long-term memory")
    search.add_argument("query", nargs="?", default=None, help="words to look for (omit: newest entries)")
    search.add_argument("--category", default=None, help="only this category and those under it, e.g. people")
    search.add_argument("--tag", action="append", dest="tags", default=None, help="only memories with this tag "
                        "(repeat for several)")  # fmt: skip
    search.add_argument("--limit", type=int, default=10, help="at most this many results (default 10)")
    search.add_argument("--include-archived", action="store_true", help="also archived (deleted) memories")
    search.add_argument("--include-dormant", action="store_true", help="also dormant (long unused) memories")
    search.add_argument(
        "--mode",
        choices=["hybrid", "bm25", "vector", "rockbot"],
        default=None,
        help="how to rank (default: $ROCKMEM_SEARCH_MODE or hybrid; bm25 with embeddings off)",
    )
    search.add_argument("--json", action="store_true", help="one JSON result per line")

    browse_parsers(sub, common)
    install = sub.add_parser(
        "install", parents=[common], help="add this server to an MCP client's configuration (with a backup)"
    )
    install.add_argument(
        "client", choices=INSTALL_CLIENTS, help=f"the MCP client to connect: {', '.join(INSTALL_CLIENTS)}"
    )
    install.add_argument("--path", type=Path, default=None, help="the client's configuration file (default: its own)")
    install.add_argument("--command", dest="server_command", default=None, help="the command the client runs "
                         "(default: this rockmem-mcp's full path)")  # fmt: skip
    install.add_argument("--scope", choices=["user", "workspace"], default=None,
                         help="vscode: the workspace's .vscode/mcp.json (default) or the profile's")  # fmt: skip
    install.add_argument("--dry-run", action="store_true", help="say what would change; write nothing")
    install.add_argument("--json", action="store_true", help="the result as JSON on stdout")
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
    graph_import.add_argument("file", help="the server-memory's memory.jsonl ('-' reads stdin)")
    exp = sub.add_parser("export", parents=[common], help="export all memories as JSON Lines ('-' for stdout)")
    exp.add_argument("file", help="where to write the JSON Lines ('-' writes stdout)")
    dream = sub.add_parser(
        "dream", parents=[common], help="consolidate memory: the deterministic pass, or apply a plan with --plan"
    )
    dream.add_argument("--pass", dest="dream_pass", default=None, help="with --plan: the pass the plan answers")
    dream.add_argument("--plan", default=None, help="a JSON plan file to apply (as the dream tool's apply action)")
    dream.add_argument("--dry-run", action="store_true", help="show what would change; change nothing")
    dream.add_argument("--every", type=interval, default=None, help="run as a sidecar, e.g. 4h or 30m")
    dream.add_argument("--force", action="store_true", help="run even if the last dream was under 6 h ago")
    doctor = sub.add_parser("doctor", parents=[common], help="check the data home; --fix repairs (quarantines)")
    doctor.add_argument("--fix", action="store_true", help="quarantine bad files, rebuild indexes, sweep")
    doctor.add_argument("--json", action="store_true", help="the report as JSON")
    sub.add_parser("stats", parents=[common], help="counts and sizes for the data home (--json for programs)")
    sub.add_parser(
        "tools", parents=[common, toolsets], help="the toolsets, their tools and what they cost a model's context"
    )
    salience = sub.add_parser("salience", parents=[common], help="the least (or most) salient memories")
    order = salience.add_mutually_exclusive_group()
    order.add_argument("--least", dest="order", action="store_const", const="least", help="fading first (default)")
    order.add_argument("--most", dest="order", action="store_const", const="most", help="most salient first")
    salience.add_argument("--limit", type=int, default=20, help="at most this many memories (default 20)")
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
    log_cmd.add_argument("--limit", type=int, default=50, help="the newest this many lines (default 50)")
    log_cmd.add_argument("--json", action="store_true", help="as JSON")
    history = sub.add_parser("history", parents=[common], help="every version of one memory or file, with who and why")
    history.add_argument("item", help="a memory id, entity id, procedure or file path")
    history.add_argument("--limit", type=int, default=20, help="the newest this many versions (default 20)")
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
        "--every", type=interval, default=None, help="sidecar: check the schedule and threshold this often, e.g. 10m"
    )
    reflect.add_argument("--json", action="store_true", help="as JSON")
    proposals = sub.add_parser("proposals", parents=[common], help="sub-agents' memory proposals: list and review")
    proposals.add_argument("action", nargs="?", choices=("list", "commit", "reject", "defer"), default="list",
                           help="list (default), or commit, reject or defer one proposal")  # fmt: skip
    proposals.add_argument("id", nargs="?", help="the proposal id (commit, reject, defer)")
    proposals.add_argument("--store", choices=("episodic", "semantic", "procedural", "vault"), help="commit elsewhere")
    proposals.add_argument("--reason", default="", help="why (required to reject)")
    proposals.add_argument("--all", action="store_true", help="list committed and rejected ones too")
    proposals.add_argument("--json", action="store_true", help="as JSON")
    for name in ("import", "import-graph", "dream", "tools", "reindex"):  # every command that reports
        sub.choices[name].add_argument("--json", action="store_true", help="the report as JSON on stdout")
    sub.choices["stats"].add_argument("--json", action="store_true", help="as JSON, for programs (default: text)")
    return parser


def browse_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    """The browse commands (cli/browse.py): look at and fix memory from a shell."""
    as_json = argparse.ArgumentParser(add_help=False)
    as_json.add_argument("--json", action="store_true", help="JSON for scripts instead of the human rendering")
    parents = [common, as_json]

    get = sub.add_parser("get", parents=parents, help="one memory, whole")
    get.add_argument("id", help="the memory's id, as search and list show it")

    listing = sub.add_parser("list", parents=parents, help="the newest memories, optionally of a category or tag")
    listing.add_argument("--category", default=None, help="only this category and those under it")
    listing.add_argument("--tag", dest="tags", action="append", default=None, help="only with this tag (repeatable)")
    listing.add_argument("--limit", type=int, default=20, help="at most this many (default 20)")
    listing.add_argument("--include-archived", action="store_true", help="also archived (deleted) memories")

    add = sub.add_parser("add", parents=parents, help="save a memory (as save_memory does), and embed it")
    add.add_argument("content", help="the memory's text")
    add.add_argument("--category", default=None, help="e.g. people/ada (default: none)")
    add.add_argument("--tag", dest="tags", action="append", default=None, help="a tag (repeat for several)")
    add.add_argument("--importance", type=float, default=None, help="0 to 1 (default 0.7, as save_memory)")
    add.add_argument("--pin", action="store_true", help="pin it (never fades; a dream leaves it alone)")
    add.add_argument(
        "--no-embeddings", action="store_true", help="leave the vector to the next server (by default: embedded now)"
    )

    delete = sub.add_parser("delete", parents=parents, help="archive a memory (--permanent removes its file)")
    delete.add_argument("id", help="the memory's id")
    delete.add_argument("--permanent", action="store_true", help="remove its file instead of archiving it")
    delete.add_argument("--reason", default=None, help="why, kept with the archived memory and in the audit trail")
    delete.add_argument("--confirm-pinned", action="store_true", help="needed to delete a pinned memory")

    sub.add_parser("categories", parents=parents, help="the category tree with counts")

    graph = sub.add_parser("graph", parents=parents, help="graph counts, or an entity and its facts")
    graph.add_argument("entity", nargs="?", default=None, help="an entity's name or alias (omit: the counts)")

    working = sub.add_parser("working", parents=parents, help="working memory: every live entry, or one KEY")
    working.add_argument("key", nargs="?", default=None, help="one entry's key, e.g. shared/plan (omit: every entry)")
    # Not --namespace: that is the serving process's own namespace setting.
    working.add_argument("--in", dest="scope", metavar="NS", default=None, help="only NS, e.g. session/abc or shared")

    sub.add_parser("status", parents=parents, help="the home at a glance: counts, ranking, what waits for you")


def interval(text: str) -> float:
    """'4h', '30m', '90s' or a number of seconds."""
    units = {"h": 3600, "m": 60, "s": 1}
    try:
        seconds = float(text[:-1]) * units[text[-1]] if text and text[-1] in units else float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"an interval like 4h, 30m or 90s, not {text!r}") from None
    if seconds <= 0:
        raise argparse.ArgumentTypeError("the interval must be positive")
    return seconds


def port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a port number from 0 to 65535, not {text!r}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"a port number from 0 to 65535, not {port}")
    return port


UI_PORT = 8766  # beside MCP's 8765

INSTALL_CLIENTS = ["claude-desktop", "claude-code", "cursor", "vscode"]  # clients.CLIENTS' keys (a test keeps them so)
