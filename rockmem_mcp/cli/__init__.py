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

from collections.abc import Sequence


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
