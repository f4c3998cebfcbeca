"""`run`: open the settings and the home, run one parsed command with the CLI's output rules (`cli.main` parses
the arguments first, without this module)."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TextIO

from rockmem_mcp import collector
from rockmem_mcp.cli import audit, browse, maintenance, review, serve, transfer
from rockmem_mcp.config import Settings
from rockmem_mcp.errors import ReadOnlyHomeError, RockmemError, reporting_io_errors
from rockmem_mcp.storage.no_follow import read_only_reason, refuse_linked_store_folders
from rockmem_mcp.text import visible


def run(args: argparse.Namespace) -> int:
    """Run the command `args` names (parsed by `parser.build_parser`)."""
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
    configure_logging(getattr(args, "verbose", 0), settings.log_level)
    problem = None if command in LEAVES_HOME_ALONE else _home_problem(settings.home, create=command not in READS_ONLY)
    if problem is not None:
        print(f"rockmem-mcp: {problem}", file=sys.stderr)
        return 2
    try:
        if command != "doctor":  # which reports such a home; every other command would work through the link
            refuse_linked_store_folders(settings.store_dirs)
        if command == "serve":  # resumes the garbage collector after its first answer (server/app.py)
            return serve.run(settings, args)
        collector.resume()
        if command == "ui":
            return serve.run(settings, args)
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


def configure_logging(verbosity: int, settings_level: str) -> None:
    level = {0: settings_level, 1: "INFO"}.get(verbosity, "DEBUG")
    logging.basicConfig(stream=sys.stderr, level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def _home_problem(home: Path, create: bool = True) -> str | None:
    """Why `home` cannot be the data home (made here when missing and `create`), or None. A read-only home is
    usable: reads work and writes are refused one by one (docs/on-disk.md, "A read-only home")."""
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


LEAVES_HOME_ALONE = frozenset({"tools", "install", "doctor", "tenants"})  # no home needed, or (doctor) it reports one


READS_ONLY = frozenset({"log", "alerts", "history", "core", "salience", "search", "get", "list", "categories"})


COMMANDS = {
    **maintenance.COMMANDS,
    **serve.COMMANDS,
    **transfer.COMMANDS,
    **audit.COMMANDS,
    **review.COMMANDS,
    **browse.COMMANDS,
}
