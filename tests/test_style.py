"""The tree stays ruff-clean (lint rules in pyproject.toml), so style problems fail CI like any bug; and the tests
themselves keep a rule that once made one flaky (every Settings a test builds names its embedding model)."""

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_check_is_clean() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "rockmem_mcp", "tests", "benchmarks"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


# `Settings(...)` reads no environment, so the suite's embeddings-off (tests/conftest.py) does not reach it: a test
# that builds one without naming the model gets the bundled one and a background vector worker, whose finishing
# between two searches once changed what a reinforcement test counted. Marked lines test the default on purpose.
DEFAULT_MODEL_MARK = "# embeddings: the default"


def test_settings_built_in_tests_name_their_embedding_model() -> None:
    unnamed = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        lines = source.splitlines()
        for node in ast.walk(ast.parse(source)):
            if not isinstance(node, ast.Call):
                continue
            name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)
            keywords = {k.arg for k in node.keywords}
            marked = any(DEFAULT_MODEL_MARK in line for line in lines[node.lineno - 1 : node.end_lineno])
            if name == "Settings" and "home" in keywords and "embedding_model" not in keywords and not marked:
                unnamed.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not unnamed, f"Settings(home=...) without embedding_model= (or {DEFAULT_MODEL_MARK!r}): {unnamed}"
