"""`rockmem-mcp install CLIENT`: this server in an MCP client's configuration file, written the way the client reads it.

Each client keeps its servers in a JSON file under a key of its own (`mcpServers`, or `servers` for VS Code).
Installing merges one entry named `rockmem` into that file and leaves everything else in it as it was: the same
entry already there changes nothing (no write, no backup); a different one is replaced after the file is copied
to a timestamped backup beside it (readable by its owner only); a file that is not a JSON object (JSONC with
comments included) is refused untouched. A config that is a symbolic link is written where it points. Writes
are atomic."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rockmem_mcp.errors import InvalidInputError
from rockmem_mcp.storage.atomic import atomic_write

SERVER_NAME = "rockmem"


@dataclass(frozen=True)
class Client:
    label: str
    key: str  # where the servers are in the file
    stdio_type: bool  # the entry names its transport ("type": "stdio"), as VS Code's format asks


CLIENTS: dict[str, Client] = {
    "claude-desktop": Client("Claude Desktop", "mcpServers", False),
    "claude-code": Client("Claude Code", "mcpServers", False),
    "cursor": Client("Cursor", "mcpServers", False),
    "vscode": Client("VS Code", "servers", True),
}


def default_path(client: str, home: Path | None = None, cwd: Path | None = None) -> Path:
    """Where `client` reads its servers on this platform: the user's file (Claude Desktop, Claude Code, Cursor),
    or the workspace's `.vscode/mcp.json` for VS Code (run it from the workspace, or pass --path)."""
    home = home or Path.home()
    if client == "claude-desktop":
        if sys.platform == "darwin":
            return home / "Library" / "Application Support" / "Claude" / "claude_desktop_config.json"
        if sys.platform == "win32":
            return (
                Path(os.environ.get("APPDATA", home / "AppData" / "Roaming")) / "Claude" / "claude_desktop_config.json"
            )
        return home / ".config" / "Claude" / "claude_desktop_config.json"
    if client == "claude-code":
        return home / ".claude.json"  # user scope: every project sees it
    if client == "cursor":
        return home / ".cursor" / "mcp.json"
    return (cwd or Path.cwd()) / ".vscode" / "mcp.json"


def server_entry(client: str, command: str, data_home: str | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {"type": "stdio"} if CLIENTS[client].stdio_type else {}
    entry |= {"command": command, "args": []}
    entry["env"] = {"ROCKMEM_HOME": data_home} if data_home else {}
    return entry


def snippet(client: str, command: str = "rockmem-mcp", data_home: str | None = None) -> dict[str, Any]:
    """The whole file `install` writes for `client` into an empty configuration."""
    return {CLIENTS[client].key: {SERVER_NAME: server_entry(client, command, data_home)}}


@dataclass(frozen=True)
class Installed:
    client: str
    path: Path
    action: str  # "added", "replaced", "unchanged"
    backup: Path | None
    entry: dict[str, Any]

    def describe(self) -> str:
        label = CLIENTS[self.client].label
        if self.action == "unchanged":
            return f"{label}: {self.path} already has this rockmem entry; nothing changed"
        saved = f" (the previous file is kept as {self.backup})" if self.backup else ""
        restart = "restart the client" if self.client != "vscode" else "reload the window"
        return f"{label}: {self.action} the rockmem entry in {self.path}{saved}; {restart} to use it"


def install(client: str, path: Path, command: str, data_home: str | None = None, dry_run: bool = False) -> Installed:
    """Merge the rockmem entry into `path` (see the module docstring); `dry_run` reports without writing."""
    if client not in CLIENTS:
        raise InvalidInputError(f"unknown client {client!r}; use one of {', '.join(CLIENTS)}")
    spec = CLIENTS[client]
    entry = server_entry(client, command, data_home)
    path = path.resolve()  # a config kept as a link into a dotfiles folder is written where it lives
    raw = path.read_bytes() if path.exists() else b""
    config: Any = {}
    if raw.strip():
        try:
            config = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise InvalidInputError(
                f"{path} is not valid JSON ({exc}); fix it or pass --path; nothing was changed"
            ) from None
    if not isinstance(config, dict) or not isinstance(config.get(spec.key, {}), dict):
        raise InvalidInputError(f"{path} does not hold a JSON object with {spec.key!r} as one; nothing was changed")
    servers = config.setdefault(spec.key, {})
    before = servers.get(SERVER_NAME)
    if before == entry:
        return Installed(client, path, "unchanged", None, entry)
    servers[SERVER_NAME] = entry
    action = "added" if before is None else "replaced"
    backup = None
    if not dry_run:
        if raw:
            backup = path.with_name(f"{path.name}.bak-{datetime.now(UTC):%Y%m%dT%H%M%S%fZ}")
            _private_copy(backup, raw)
        atomic_write(path, (json.dumps(config, indent=2, ensure_ascii=False) + "\n").encode())
    return Installed(client, path, action, backup, entry)


def _private_copy(path: Path, data: bytes) -> None:
    """A new file readable by its owner only (a client's config often holds other servers' keys), durable."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
