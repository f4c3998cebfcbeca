"""What a data home looks like on disk after a storm: temp files left behind, files that do not parse."""

from __future__ import annotations

import json
import os
from pathlib import Path


def home_files(home: Path) -> list[Path]:
    """Every file under home but the git history's own (`.git` changes while the history commits)."""
    found = []
    for folder, subfolders, names in os.walk(home):
        subfolders[:] = [name for name in subfolders if not (folder == str(home) and name == ".git")]
        found += [Path(folder, name) for name in names]
    return found


def temp_files(home: Path) -> list[Path]:
    return [p for p in home_files(home) if p.name.startswith(".") and p.name.endswith(".tmp")]


def unparsable(home: Path) -> list[str]:
    """Files under home that are not JSON (for .jsonl: lines that are not), as 'path: problem'."""
    problems = []
    for path in sorted(p for p in home_files(home) if p.is_file() and not p.name.startswith(".")):
        if path.suffix not in (".json", ".jsonl"):
            continue  # binary index snapshots and lock files
        data = path.read_bytes()
        try:
            json.loads(data)
            continue
        except ValueError as exc:
            if path.suffix == ".json":
                problems.append(f"{path.relative_to(home)}: {exc}")
                continue
        for number, line in enumerate(data.splitlines(), start=1):
            try:
                json.loads(line)
            except ValueError as exc:
                problems.append(f"{path.relative_to(home)} line {number}: {exc}")
    return problems
