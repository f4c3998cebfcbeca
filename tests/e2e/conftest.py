"""Shared fixtures for the end-to-end tests: a data home, in-memory and stdio clients, call helpers."""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import IO, Any

import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from rockmem_mcp.config import Settings
from rockmem_mcp.memory.service import MemoryService
from rockmem_mcp.server.app import build_server
from tests.e2e.classic import general, unwrapped
from tests.e2e.disk_checks import temp_files as disk_temp_files

Call = Callable[..., Awaitable[dict[str, Any]]]
CallError = Callable[..., Awaitable[str]]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """An empty data home (created on first use by the server)."""
    return tmp_path / "home"


@pytest.fixture
def settings_for(home: Path) -> Callable[..., Settings]:
    """Settings for `home` with overrides; the environment is ignored so tests are hermetic."""

    def make(**overrides: Any) -> Settings:
        # In-process servers keep no git history unless a test asks (audit_git=True): each would start git and
        # commit in the background, about 0.1 s of CPU per test; the stdio servers run with the defaults.
        # Nor embeddings (tests/conftest.py says why) unless a test names a model or passes embedding_model=None.
        return Settings.load({"home": home, "audit_git": False, "embedding_model": "off", **overrides}, env={})

    return make


@pytest.fixture
async def client(settings_for: Callable[..., Settings]) -> Any:
    """An in-memory MCP client connected to a fresh server on `home`."""
    async with Client(build_server(settings_for())) as connected:
        yield connected


@pytest.fixture
def seed(settings_for: Callable[..., Settings]) -> Callable[[list[dict[str, Any]]], list[str]]:
    """Write entries with chosen fields (e.g. created_at) into `home` before a server starts; returns ids."""

    def write(records: list[dict[str, Any]]) -> list[str]:
        service = MemoryService(settings_for())
        try:
            entries = [service.prepare_entry(record) for record in records]
            service.save_many(entries)
        finally:
            service.close()
        return [entry.id for entry in entries]

    return write


@pytest.fixture
def call() -> Call:
    """Call a tool that must succeed; returns its structured content."""

    async def call_tool(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
        name, arguments = general(tool, arguments)
        result = await client.call_tool(name, _jsonable(arguments))
        assert not result.is_error, f"{tool} failed: {result.content[0].text}"
        assert result.structured_content is not None
        return unwrapped(tool, result.structured_content)

    return call_tool


@pytest.fixture
def call_error() -> CallError:
    """Call a tool that must fail with an error result; returns the error text."""

    async def call_tool(client: Client, tool: str, **arguments: Any) -> str:
        name, arguments = general(tool, arguments)
        result = await client.call_tool(name, _jsonable(arguments))
        assert result.is_error, f"{tool} unexpectedly succeeded: {result.structured_content}"
        return result.content[0].text

    return call_tool


def _jsonable(arguments: dict[str, Any]) -> dict[str, Any]:
    return {k: v.isoformat() if isinstance(v, datetime) else v for k, v in arguments.items()}


class StdioServers:
    """Factory: a Client that spawns `python -m rockmem_mcp --home HOME` and talks MCP over its stdio.

    Each server's stderr goes to its own file under `directory`; `logs` lists them in start order.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.logs: list[Path] = []
        self._handles: list[IO[str]] = []

    def __call__(self, home: Path, sampling_callback: Any = None, **env: str | None) -> Client:
        """`env` adds variables (e.g. ROCKMEM_JOURNAL_ROTATE_BYTES) to the server's environment;
        `sampling_callback` gives the client a model (MCP sampling)."""
        log_path = self.directory / f"server-{len(self.logs)}.stderr"
        self.logs.append(log_path)
        handle = log_path.open("w")
        self._handles.append(handle)
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "rockmem_mcp", "--home", str(home)],
            # Merged over the SDK's minimal default environment; embeddings off unless the test names a model, or
            # passes ROCKMEM_EMBEDDING_MODEL=None for the product's default (tests/conftest.py says why).
            env={k: v for k, v in {"ROCKMEM_LOG_LEVEL": "INFO", "ROCKMEM_EMBEDDING_MODEL": "off", **env}.items() if v},
            cwd=str(self.directory),
        )
        return Client(stdio_client(params, errlog=handle), sampling_callback=sampling_callback)

    def close(self) -> None:
        for handle in self._handles:
            handle.close()


@pytest.fixture
def stdio_server(tmp_path: Path) -> Iterator[StdioServers]:
    servers = StdioServers(tmp_path)
    yield servers
    servers.close()


class HomeFiles:
    """What is on disk under a data home."""

    def __init__(self, home: Path) -> None:
        self.home = home

    def entries(self) -> dict[Path, bytes]:
        """Every file under home/memory (relative path -> bytes)."""
        root = self.home / "memory"
        return {p.relative_to(self.home): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}

    def temp_files(self) -> list[Path]:
        """Leftover atomic-write temp files ('.name.xxxx.tmp') anywhere under home but in `.git`, whose own
        temporary folders come and go while the history commits in the background."""
        return disk_temp_files(self.home)

    def entry_path(self, entry_id: str, category: str | None) -> Path:
        root = self.home / "memory"
        return (root / category / f"{entry_id}.json") if category else root / f"{entry_id}.json"


@pytest.fixture
def disk(home: Path) -> HomeFiles:
    return HomeFiles(home)
