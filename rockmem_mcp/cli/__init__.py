"""Command line: `rockmem-mcp` serves MCP over stdio; subcommands search, import, export, stats, salience,
reindex, tools.

Stderr (logs too) and, for every command but `serve` (whose stdout is the MCP channel), stdout are written
through `text.visible`, so text read from memory (content, names, file names, reasons) cannot put control
characters on the terminal: an ESC becomes the six characters `\\u001b`. The escape is JSON's, so `--json`,
`stats --json` and `export -` stay valid JSON that decodes to the same strings. Only the progress lines (numbers the
CLI makes itself) go to the terminal directly, for their `\\r`.

Owns: `app` (the output rules, the home check, running one command), `parser` (every command and flag; loaded
alone first, so `--help` and `--version` load nothing else), one module per command group (`serve`, `transfer`,
`maintenance`, `audit`, `review`, `browse`), `common` (what they share), `progress` (the progress bar) and
`clients` (MCP clients' configuration files, for `install`).
Imports: any room of the library; the server (and so the MCP SDK) only inside the functions that serve or list
the tools, never when a command module is imported.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
from collections.abc import Sequence
from typing import NoReturn


def main(argv: Sequence[str] | None = None) -> int:
    """The `rockmem-mcp` command. The arguments are parsed before anything else loads, so `--help`, `--version`
    and a usage error answer at once; the command's modules (and numpy, pydantic, the stores) load after. The
    garbage collector waits while they load (`collector`): a command resumes it before it runs, a server after its
    first answer."""
    from rockmem_mcp import collector

    collector.pause()
    try:
        from rockmem_mcp.cli.parser import build_parser

        args = build_parser().parse_args(argv)
        from rockmem_mcp.cli.app import run

        return run(args)
    finally:
        collector.resume()  # a server that never answered, a caller in this process (tests)


def program() -> NoReturn:
    """`rockmem-mcp` as a process of its own (the console script, `python -m rockmem_mcp`): `main`, then an exit
    that skips Python's teardown of every module it imported. With the MCP SDK loaded that teardown took 0.3-0.5 s
    of CPU at every exit (a client closing its server, every command) and does nothing a file needs: `main` returns
    once every store is closed and every write durable. What Python's exit does first still runs: other threads are
    joined, then every exit handler registered after this one (logging's flush among them); the standard streams
    are flushed here, a failure said as Python's exit would (status 120; 141, quietly, for a reader gone away)."""
    status: list[int | None] = [1]  # an exception out of main: Python prints it, and the exit status is 1
    # Registered first, it runs after every other exit handler. One registered before (coverage's, a
    # sitecustomize's) would run after it, so never: then Python exits as it always does.
    if getattr(atexit, "_ncallbacks", lambda: 1)() == 0:
        atexit.register(_end, status)
    try:
        status[0] = _status(main())
    except SystemExit as exc:  # a usage error (2), --help (0): the status Python would give it
        status[0] = _status(exc.code)
        raise
    except KeyboardInterrupt:  # Python's own exit: the process dies by SIGINT, as a shell expects
        status[0] = None
        raise
    sys.exit(status[0])


def _status(code: object) -> int:
    """The exit status Python gives `sys.exit(code)`."""
    return code if isinstance(code, int) else 0 if code is None else 1


def _end(status: list[int | None]) -> None:
    code = status[0]
    if code is None:
        return
    try:
        if sys.stdout is not None:
            sys.stdout.flush()
    except BrokenPipeError:  # `export - | head`: as a command killed by SIGPIPE (cli/app.py)
        code = 141
    except (OSError, ValueError) as exc:  # a full disk: the output is not all there, and the status says so
        with contextlib.suppress(Exception):
            print(f"rockmem-mcp: the output could not be written: {exc}", file=sys.stderr)
        code = 120
    try:
        if sys.stderr is not None:
            sys.stderr.flush()
    except (OSError, ValueError):
        code = 120
    os._exit(code)
