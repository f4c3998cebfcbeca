"""Running code of another checkout beside this one, for same-run A/B measurements."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any


def checkout_python(checkout: Path) -> str:
    """The interpreter of `checkout`'s own venv (run from the checkout, it imports that checkout's package), or
    this one when the checkout has none."""
    python = checkout / ".venv" / "bin" / "python"
    return str(python if python.exists() else sys.executable)


def run_in_checkout(checkout: Path, script: str, *args: str) -> dict[str, Any]:
    """`python -c SCRIPT ARGS` in a process of its own from `checkout`; the JSON object its last line printed. A
    failure ends the harness with the worker's error."""
    run = subprocess.run(
        [checkout_python(checkout), "-c", script, *args], cwd=checkout, capture_output=True, text=True, check=False
    )
    if run.returncode != 0:
        raise SystemExit(f"{checkout}: the worker failed:\n{run.stderr[-3000:]}")
    return json.loads(run.stdout.strip().splitlines()[-1])
