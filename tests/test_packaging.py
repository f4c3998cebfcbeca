"""Ready to publish: the wheel and sdist build from a clean copy of the tree (offline, with the build backend the
test extras install), pass `twine check` (what PyPI checks), and carry every module and data file."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LEFT_OUT = shutil.ignore_patterns(
    ".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", "node_modules", ".ruff_cache"
)


def test_the_wheel_and_sdist_build_pass_twine_check_and_hold_every_module(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    shutil.copytree(ROOT, tree, ignore=LEFT_OUT, symlinks=True)
    dist = tmp_path / "dist"
    built = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(dist), str(tree)],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    wheels, sdists = sorted(dist.glob("*.whl")), sorted(dist.glob("*.tar.gz"))
    assert len(wheels) == 1 and len(sdists) == 1
    checked = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", *map(str, (*wheels, *sdists))],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert checked.returncode == 0, checked.stdout + checked.stderr

    with zipfile.ZipFile(wheels[0]) as wheel:
        in_wheel = set(wheel.namelist())
        entry_points = next(name for name in in_wheel if name.endswith(".dist-info/entry_points.txt"))
        scripts = wheel.read(entry_points).decode()
    modules = {str(p.relative_to(ROOT)) for p in (ROOT / "rockmem_mcp").rglob("*.py") if "__pycache__" not in p.parts}
    assert modules - in_wheel == set(), "modules missing from the wheel (a package not listed in pyproject.toml?)"
    prompts = {f"rockmem_mcp/prompts/{p.name}" for p in (ROOT / "prompts").glob("*.md")}
    data = {  # every file of the package that is not code: models, the tokenizer, its notice, py.typed
        str(p.relative_to(ROOT)) for p in (ROOT / "rockmem_mcp").rglob("*")
        if p.is_file() and p.suffix not in (".py", ".pyc") and "__pycache__" not in p.parts
    }  # fmt: skip
    assert prompts and "rockmem_mcp/search/onnx_minilm/tokenizer.json" in data and "rockmem_mcp/py.typed" in data
    assert (prompts | data) - in_wheel == set(), "data files missing from the wheel (package-data in pyproject.toml)"
    assert "rockmem-mcp = rockmem_mcp.cli:program" in scripts  # main, then an exit without the teardown

    with tarfile.open(sdists[0]) as sdist:
        in_sdist = {name.split("/", 1)[1] for name in sdist.getnames() if "/" in name}
    assert {"README.md", "pyproject.toml", "rockmem_mcp/cli/__init__.py", "prompts/recall.md"} <= in_sdist
