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
    assert {
        "rockmem_mcp.cli.app",
        "rockmem_mcp.server.app",
        "rockmem_mcp.memory.service",
        "rockmem_mcp.models",
    } <= names


def test_the_checker_resolves_imports() -> None:
    server_app = next(m for m in MODULES if m.name == "rockmem_mcp.server.app")
    assert _imports_any(server_app, "mcp")
    assert "rockmem_mcp.home.stores" in server_app.imports()


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


# The rooms (ARCHITECTURE.md) and what each may import besides itself. A room is a top-level module or package.
ENGINE = {"errors", "text", "tokens", "models", "openai_http", "storage", "search", "config", "collector"}
SHARED = {"llm", "reinforcement", "vector_worker"}  # services every store may use, over the engine
STORES = {"memory", "conversation", "working", "episodes", "procedures", "graph", "core"}
CONCERNS = STORES | {"audit", "governance", "recall", "proposals", "consolidation", "home"}
LIBRARY = ENGINE | SHARED | CONCERNS
ROOMS: dict[str, set[str]] = {
    "errors": set(),
    "collector": set(),
    "text": set(),
    "tokens": set(),
    "models": {"errors", "text"},
    "openai_http": {"errors"},
    "storage": {"errors", "models", "text"},
    "search": {"errors", "models", "text", "tokens", "openai_http", "storage"},
    "config": {"errors", "models", "search"},
    "llm": ENGINE,
    "reinforcement": ENGINE,
    "vector_worker": ENGINE,
    "audit": ENGINE,
    "memory": ENGINE | SHARED | {"audit"},
    "conversation": ENGINE | SHARED | {"audit"},
    "working": ENGINE | SHARED | {"audit"},
    "episodes": ENGINE | SHARED | {"audit"},
    "procedures": ENGINE | SHARED | {"audit"},
    "graph": ENGINE | SHARED | {"audit", "memory"},
    "core": ENGINE | SHARED | {"audit", "memory", "conversation"},
    "governance": ENGINE | SHARED | {"audit"} | STORES,
    "recall": ENGINE | SHARED | {"audit", "governance"} | STORES,
    "proposals": ENGINE | SHARED | {"audit", "recall"} | STORES,
    "consolidation": ENGINE | SHARED | {"audit", "governance", "recall", "proposals"} | STORES,
    "home": LIBRARY - {"home"},
    "server": LIBRARY,
    "ui": LIBRARY | {"server"},
    "cli": LIBRARY | {"server", "ui"},
    "__main__": {"cli"},
    "": set(),  # rockmem_mcp/__init__.py: the version and the BLAS thread setting, nothing of its own rooms
}
# A concern's doors: the modules other rooms may import. Its files and database stores are its own; only `home`
# (repairing, exporting and moving a home reads every store as it lies) goes past the doors.
DOORS: dict[str, set[str]] = {
    "audit": {"service", "shapes", "log", "retention", "versions", "redaction", "line_index"},
    "memory": {"service"},
    "conversation": {"service", "sessions", "feedback"},
    "working": {"service", "shapes", "vectors"},
    "episodes": {"service"},
    "procedures": {"service", "shapes"},
    "graph": {"service", "shapes", "relations", "pages"},
    "core": {"service", "shapes", "learnings", "workspace"},
    "governance": {"shapes", "history", "trail", "integrity", "rollback", "forgetting", "erasure"},
    "recall": {"service", "shapes", "remembering", "triggers"},
    "proposals": {"service", "shapes"},
    "consolidation": {
        *("shapes", "dream", "dream_reports", "decay", "compaction", "enrichment", "templates"),
        *("reflection", "reflection_triggers"),
    },
    "home": {"stores", "transfer", "store_migration", "doctor"},
}
PAST_THE_DOORS = {"home"}


def room(module_name: str) -> str:
    """The room of a dotted module name: rockmem_mcp.memory.files -> memory; rockmem_mcp -> ''."""
    parts = module_name.split(".")
    return parts[1] if len(parts) > 1 else ""


def library_imports(module: Module) -> set[str]:
    """The package's modules this one imports (in functions and for type checking too): `from pkg import sub`
    names the module `pkg.sub`, `from pkg.mod import name` the module `pkg.mod`."""
    names = {m.name for m in MODULES}

    def existing(name: str) -> str:
        while name not in names and "." in name:
            name = name.rsplit(".", 1)[0]
        return name

    found: set[str] = set()
    for node in ast.walk(module.tree):
        if isinstance(node, ast.Import):
            found.update(existing(alias.name) for alias in node.names if alias.name.startswith(PACKAGE + "."))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the module's own package, `level` steps up
                parts = module.name.split(".")
                anchor = parts if module.path.name == "__init__.py" else parts[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            if not base.startswith(PACKAGE):
                continue
            for alias in node.names:
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in names else existing(base))
    return found - {PACKAGE}


def test_every_room_is_in_the_table() -> None:
    assert {room(m.name) for m in MODULES} == set(ROOMS)
    assert set(DOORS) == CONCERNS


def test_the_table_itself_points_one_way() -> None:
    assert _circles({name: allowed - {name} for name, allowed in ROOMS.items()}) == []


def test_the_map_names_every_room() -> None:
    """ARCHITECTURE.md's table is this one: a room added here and not there fails."""
    page = (PACKAGE_DIR.parent / "ARCHITECTURE.md").read_text(encoding="utf-8")
    missing = [name for name in ROOMS if name and name != "__main__" and f"`{name}" not in page]
    assert missing == [], f"ARCHITECTURE.md does not name {missing}"


def test_the_checker_sees_relative_package_and_local_imports() -> None:
    source = (
        "from ..server import app\nimport rockmem_mcp.memory\nfrom rockmem_mcp import episodes\n"
        "def f():\n    from rockmem_mcp.working.files import WorkingFiles\n"
    )
    fake = Module(f"{PACKAGE}.graph.fake", PACKAGE_DIR / "graph" / "fake.py", ast.parse(source))
    found = library_imports(fake)
    assert {f"{PACKAGE}.server.app", f"{PACKAGE}.memory", f"{PACKAGE}.episodes", f"{PACKAGE}.working.files"} <= found
    assert {room(name) for name in found} - ROOMS["graph"] == {"server", "episodes", "working"}


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.relpath)
def test_dependencies_point_down_the_table(module: Module) -> None:
    here = room(module.name)
    wrong = {name for name in library_imports(module) if room(name) not in ROOMS[here] | {here}}
    assert wrong == set(), f"{module.relpath} ({here}) may not import {sorted(wrong)} (ARCHITECTURE.md)"


@pytest.mark.parametrize("module", [m for m in MODULES if room(m.name)], ids=lambda m: m.relpath)
def test_other_rooms_are_entered_by_their_doors(module: Module) -> None:
    here = room(module.name)
    if here in PAST_THE_DOORS:
        return
    past = set()
    for name in library_imports(module):
        other, inside = room(name), name.split(".")[2:3]
        # A room's package itself exports nothing (its __init__ is its description): importing it is no door.
        if other in DOORS and other != here and (not inside or inside[0] not in DOORS[other]):
            past.add(name)
    assert past == set(), f"{module.relpath} reaches past another room's doors: {sorted(past)}"


def test_no_import_circles() -> None:
    """Between modules, counting imports inside functions and for type checking only."""
    graph = {m.name: library_imports(m) - {m.name} for m in MODULES}
    circles = _circles(graph)
    assert circles == [], f"import circles: {circles}"


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_circle_checker_finds_a_circle() -> None:
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _circles({"a": {"b"}, "b": set()}) == []


@pytest.mark.parametrize(
    "package", sorted(p for p in PACKAGE_DIR.iterdir() if (p / "__init__.py").exists()), ids=lambda p: p.name
)
def test_each_room_says_what_it_owns_and_may_import(package: Path) -> None:
    doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text(encoding="utf-8"))) or ""
    assert "Owns:" in doc and "Imports:" in doc, f"{package.name}/__init__.py: say what it owns and may import"


@pytest.mark.parametrize("module", [m for m in MODULES if not _in(m, f"{PACKAGE}.cli")], ids=lambda m: m.relpath)
def test_only_the_cli_prints(module: Module) -> None:
    """Over stdio, stdout is the protocol channel: a stray print corrupts it."""
    assert module.calls_print() == [], f"{module.relpath} calls print() at lines {module.calls_print()}"
    assert module.uses_stdout() == [], f"{module.relpath} touches sys.stdout at lines {module.uses_stdout()}"


@pytest.mark.parametrize("module", [m for m in MODULES if _in(m, f"{PACKAGE}.cli")], ids=lambda m: m.relpath)
def test_the_cli_imports_the_server_only_to_serve(module: Module) -> None:
    """`search`, `import` and friends must not pay for (or depend on) the MCP SDK."""
    eager = {
        name
        for name in module.top_level_imports()
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
