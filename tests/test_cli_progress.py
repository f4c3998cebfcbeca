"""Progress of long commands (issue 26, part 2): a bar with rate and time left on a terminal, plain lines (and no
escape codes) otherwise; the bar's own text never carries stored text's control characters or markup."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from rockmem_mcp.cli import progress as cli_progress
from rockmem_mcp.cli.progress import Meter
from tests.test_cli import clean_env, ok, on_a_terminal


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_on_a_terminal_a_bar_with_rate_and_time_left() -> None:
    screen = Terminal()
    with Meter("importing", "lines", 1_000, stream=screen) as meter:
        meter.update(250)
        meter.update(1_000, note="line 1,000")
    shown = screen.getvalue()
    assert "importing: line 1,000" in shown and "1,000/1,000 lines" in shown and "lines/s" in shown
    assert "━" in shown  # the bar
    assert "-:--:--" in shown or "0:00:00" in shown  # rich's time-left column


def test_a_note_cannot_move_the_cursor_or_style_the_bar() -> None:
    screen = Terminal()
    with Meter("dreaming", "steps", 2, stream=screen) as meter:
        meter.update(1, note="[bold red]merged[/] \x1b[2Jcleared")
    shown = screen.getvalue()
    assert "[bold red]merged[/] [2Jcleared" in shown  # brackets as text; the escape's ESC dropped
    assert "\x1b[2J" not in shown


def test_elsewhere_a_plain_line_now_and_then_without_escapes(monkeypatch: pytest.MonkeyPatch) -> None:
    log = io.StringIO()
    with Meter("exporting", "memories", 400, stream=log) as meter:
        meter.update(100)  # under PLAIN_EVERY_S since the start: nothing yet
        assert log.getvalue() == ""
        monkeypatch.setattr(cli_progress, "PLAIN_EVERY_S", 0.0)
        meter.update(200)
    line = log.getvalue()
    assert line.startswith("exporting: 200/400 memories (") and "memories/s, about " in line and "s left)" in line
    assert "\x1b" not in line and line.count("\n") == 1


def _jsonl(path: Path, count: int) -> Path:
    lines = [json.dumps({"content": f"Progress test memory number {i} about ferns"}) for i in range(count)]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_import_on_a_terminal_shows_the_bar_and_only_there(tmp_path: Path) -> None:
    source = _jsonl(tmp_path / "in.jsonl", 300)
    bundled = clean_env(ROCKMEM_EMBEDDING_MODEL=None)  # the product's default: the import embeds what it wrote
    returncode, text = on_a_terminal(
        ["--home", str(tmp_path / "h"), "import", str(source)],
        bundled | {"COLUMNS": "120"},
    )
    assert returncode == 0, text
    assert "importing: line 300" in text and "MB/s" in text and "━" in text
    assert "imported 300 memories" in text

    piped = ok("--home", tmp_path / "h2", "import", source, env=bundled)  # stderr a pipe: the summary, plain
    assert "\x1b" not in piped.stderr and "━" not in piped.stderr
    assert piped.stderr.strip().splitlines()[-1].startswith("imported 300 memories")
    assert piped.stderr.startswith("vectors for 300 memories")  # embedded after the import, reported plainly
