"""The CLI's surface for a person (issue 44, part 5): every flag says what it does, `--help` and `--version` answer
without loading the stores or the server, `stats` reads as text (JSON with --json)."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from rockmem_mcp.cli import clients
from rockmem_mcp.cli.parser import INSTALL_CLIENTS, build_parser
from tests.test_cli import clean_env, ok

ENV = clean_env(ROCKMEM_EMBEDDING_MODEL="off")


def every_action(parser: argparse.ArgumentParser, path: str = "rockmem-mcp") -> Iterator[tuple[str, argparse.Action]]:
    """(where, action) for every argument of the parser and of each command's parser."""
    for action in parser._actions:
        yield path, action
        if isinstance(action, argparse._SubParsersAction):
            for name, command in action.choices.items():
                yield from every_action(command, f"{path} {name}")


def test_every_flag_and_positional_has_help() -> None:
    actions = list(every_action(build_parser()))
    assert len(actions) > 200  # the walk reached every command's arguments
    missing = [
        f"{where}: {'/'.join(action.option_strings) or action.dest}"
        for where, action in actions
        if not isinstance(action, argparse._HelpAction) and not (action.help or "").strip()
    ]
    assert missing == []


def test_the_install_choices_are_the_clients_install_knows() -> None:
    assert list(clients.CLIENTS) == INSTALL_CLIENTS


HEAVY = ("numpy", "pydantic", "mcp", "onnxruntime", "rich", "rockmem_mcp.server", "rockmem_mcp.config")


@pytest.mark.parametrize("argv", [["--help"], ["--version"], ["install", "--help"], ["stats", "--bogus"]])
def test_help_version_and_usage_errors_load_neither_the_server_nor_numpy(argv: list[str]) -> None:
    probe = (
        "import sys\nfrom rockmem_mcp.cli import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r} or m.startswith({HEAVY!r})),"
        " file=sys.stderr)"
    )
    done = subprocess.run([sys.executable, "-c", probe, *argv], capture_output=True, text=True, env=ENV, timeout=60)
    assert done.stderr.strip().splitlines()[-1] == "[]", done.stderr
    assert "rockmem-mcp" in done.stdout + done.stderr  # it did answer


def test_stats_reads_as_text_by_default_and_as_json_with_the_flag(tmp_path: Path) -> None:
    home = tmp_path / "home"
    for content, category in (("Ada likes tea", "people/ada"), ("Bob likes coffee", "people/bob"), ("Ship it", None)):
        ok("--home", home, "add", content, *(["--category", category] if category else []), "--pin", env=ENV)
    text = ok("--home", home, "stats", env=ENV).stdout
    lines = text.splitlines()
    assert [line.split()[0] for line in lines] == ["home", "memories", "salience", "categories", "vectors", "graph",
                                                   "on"]  # fmt: skip
    assert lines[0].split(maxsplit=1)[1] == str(home)
    assert lines[1] == "memories    3 active, 0 archived, 3 pinned"
    assert lines[3] == "categories  2: people 2"
    assert lines[4].startswith("vectors     none: embeddings are off")
    assert all(line[10:12] == "  " and line[12] != " " for line in lines)  # the values in one column
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)
    report = json.loads(ok("--home", home, "stats", "--json", env=ENV).stdout)
    assert (report["active"], report["pinned"], report["top_categories"]) == (3, 3, {"people": 2})


def test_install_dry_run_says_what_it_would_do(tmp_path: Path) -> None:
    config = tmp_path / "claude.json"
    config.write_text(json.dumps({"mcpServers": {"rockmem": {"command": "old"}}}))
    said = ok("install", "claude-code", "--path", config, "--dry-run", env=ENV).stdout
    assert said.startswith(f"(dry run) Claude Code: would replace the rockmem entry in {config}")
    assert json.loads(config.read_text()) == {"mcpServers": {"rockmem": {"command": "old"}}}
    assert list(tmp_path.iterdir()) == [config]  # no backup either
