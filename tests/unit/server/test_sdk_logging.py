"""MCPServer sets up logging as it is built (a rich handler through `logging.basicConfig`). Where logging is set up
already, as the command line does before any server is built, that changed nothing but cost every start 14 ms of
importing rich; it is skipped there, and left to the SDK elsewhere."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BUILD = """
import logging, sys
{setup}
from rockmem_mcp.config import Settings
from rockmem_mcp.server.app import build_server
build_server(Settings.load({{"home": {home!r}}}, env={{}}))
print("rich" in sys.modules, [type(h).__name__ for h in logging.getLogger().handlers])
"""


def built(home: Path, setup: str) -> str:
    script = BUILD.format(setup=setup, home=str(home))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    return done.stdout.strip()


def test_a_server_built_after_logging_is_set_up_leaves_it_and_rich_alone(tmp_path: Path) -> None:
    assert built(tmp_path / "home", "logging.basicConfig(stream=sys.stderr)") == "False ['StreamHandler']"


def test_a_server_built_before_logging_is_set_up_gets_the_sdks_handler(tmp_path: Path) -> None:
    assert built(tmp_path / "home", "") == "True ['RichHandler']"
