"""Layering rules, checked on the source: the core knows nothing of MCP, and stdout belongs to the protocol."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pytest

import rockmem_mcp

PACKAGE_DIR = Path(rockmem_mcp.__file__).parent
PACKAGE = "rockmem_mcp"
MCP_PACKAGES = ("mcp", "mcp_types")  # the SDK and its protocol types


@dataclass(frozen=True)
class Module:
    name: str  # dotted, e.g. rockmem_mcp.memory.service
    path: Path
    tree: ast.Module

    @property
    def relpath(self) -> str:
        return self.path.relative_to(PACKAGE_DIR.parent).as_posix()

    def imports(self) -> set[str]:
        """Every module this one imports, anywhere in the file (function-local imports too), made absolute."""
        return self._imports(ast.walk(self.tree))

    def top_level_imports(self) -> set[str]:
        """Imports run when the module is imported: the module body, not inside functions or classes."""
        definitions = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
        return self._imports(
            node for stmt in self.tree.body if not isinstance(stmt, definitions) for node in ast.walk(stmt)
        )

    def _imports(self, nodes: Iterable[ast.AST]) -> set[str]:
        found: set[str] = set()
        is_package = self.path.name == "__init__.py"
        for node in nodes:
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = self.name.split(".")
                    anchor = parts if is_package else parts[:-1]
                    anchor = anchor[: len(anchor) - (node.level - 1)]
                    base = ".".join([*anchor, base] if base else anchor)
                found.add(base)
                found.update(f"{base}.{alias.name}" for alias in node.names if alias.name != "*")
        return found

    def calls_print(self) -> list[int]:
        return [
            node.lineno
            for node in ast.walk(self.tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print"
        ]

    def uses_stdout(self) -> list[int]:
        """Lines mentioning sys.stdout or sys.__stdout__."""
        return [
            node.lineno
            for node in ast.walk(self.tree)
            if isinstance(node, ast.Attribute)
            and node.attr in ("stdout", "__stdout__")
            and isinstance(node.value, ast.Name)
            and node.value.id == "sys"
        ]


def _load_modules() -> list[Module]:
    modules = []
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules.append(Module(".".join(parts), path, ast.parse(path.read_text(encoding="utf-8"), str(path))))
    return modules


MODULES = _load_modules()


def _in(module: Module, *prefixes: str) -> bool:
    return any(module.name == p or module.name.startswith(p + ".") for p in prefixes)


def _imports_any(module: Module, *targets: str) -> set[str]:
    return {name for name in module.imports() if any(name == t or name.startswith(t + ".") for t in targets)}


def test_the_package_was_found() -> None:
    names = {m.name for m in MODULES}
    assert {"rockmem_mcp.cli", "rockmem_mcp.server.app", "rockmem_mcp.memory.service", "rockmem_mcp.models"} <= names


def test_the_checker_resolves_imports() -> None:
    server_app = next(m for m in MODULES if m.name == "rockmem_mcp.server.app")
    assert _imports_any(server_app, "mcp")
    assert "rockmem_mcp.memory.service" in server_app.imports()


def test_the_checker_sees_relative_local_and_print_violations() -> None:
    source = "from ..server import app\ndef f():\n    import mcp.types\n    print('x')\n    sys.stdout.write('y')\n"
    fake = Module("rockmem_mcp.search.fake", PACKAGE_DIR / "search" / "fake.py", ast.parse(source))
    assert {"rockmem_mcp.server", "rockmem_mcp.server.app", "mcp.types"} <= fake.imports()
    assert fake.top_level_imports() == {"rockmem_mcp.server", "rockmem_mcp.server.app"}
    assert fake.calls_print() == [4]
    assert fake.uses_stdout() == [5]


MCP_ALLOWED = (f"{PACKAGE}.server", f"{PACKAGE}.cli")


@pytest.mark.parametrize("module", [m for m in MODULES if not _in(m, *MCP_ALLOWED)], ids=lambda m: m.relpath)
def test_only_the_server_and_cli_import_mcp(module: Module) -> None:
    assert _imports_any(module, *MCP_PACKAGES) == set(), f"{module.relpath} imports the MCP SDK; the core is MCP-free"


CORE = [f"{PACKAGE}.{name}" for name in ("services", "search", "storage", "models", "config", "errors", "text")]


@pytest.mark.parametrize("module", [m for m in MODULES if _in(m, *CORE)], ids=lambda m: m.relpath)
def test_the_core_never_imports_the_server_cli_or_page(module: Module) -> None:
    assert _imports_any(module, f"{PACKAGE}.server", f"{PACKAGE}.cli", f"{PACKAGE}.ui") == set()


@pytest.mark.parametrize(
    "module", [m for m in MODULES if _in(m, f"{PACKAGE}.search", f"{PACKAGE}.storage")], ids=lambda m: m.relpath
)
def test_search_and_storage_never_import_services(module: Module) -> None:
    assert _imports_any(module, f"{PACKAGE}.services") == set()


@pytest.mark.parametrize("module", [m for m in MODULES if m.name != f"{PACKAGE}.cli"], ids=lambda m: m.relpath)
def test_only_the_cli_prints(module: Module) -> None:
    """Over stdio, stdout is the protocol channel: a stray print corrupts it."""
    assert module.calls_print() == [], f"{module.relpath} calls print() at lines {module.calls_print()}"
    assert module.uses_stdout() == [], f"{module.relpath} touches sys.stdout at lines {module.uses_stdout()}"


def test_the_cli_imports_the_server_only_to_serve() -> None:
    """`search`, `import` and friends must not pay for (or depend on) the MCP SDK."""
    cli = next(m for m in MODULES if m.name == f"{PACKAGE}.cli")
    eager = {
        name
        for name in cli.top_level_imports()
        if any(name == t or name.startswith(t + ".") for t in (*MCP_PACKAGES, f"{PACKAGE}.server"))
    }
    assert eager == set()


def test_starting_the_server_imports_no_http_client() -> None:
    """httpx (with its command-line module's pygments) is imported when an endpoint is first called, not by every
    start of a stdio server that never calls one."""
    imports = f"import sys, {PACKAGE}.cli, {PACKAGE}.server.app"
    probe = f"{imports}; print(sorted({{'httpx', 'pygments'}} & set(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_the_server_process_runs_blas_single_threaded_unless_told_otherwise() -> None:
    """OpenBLAS threads fighting over 2 busy cores made a hybrid search 3-4x slower (BENCHMARKS.md, issue 24)."""
    probe = "import os, rockmem_mcp, numpy; print(os.environ['OPENBLAS_NUM_THREADS'])"
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, check=True)
    assert done.stdout.strip() == "1"
    env["OPENBLAS_NUM_THREADS"] = "2"  # the user's choice wins
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, check=True)
    assert done.stdout.strip() == "2"
