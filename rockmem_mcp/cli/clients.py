"""`rockmem-mcp install CLIENT`: this server in an MCP client's configuration file, written the way the client reads it.

Each client keeps its servers in a JSON file under a key of its own (`mcpServers`, or `servers` for VS Code).
Installing merges one entry named `rockmem` into that file and leaves everything else in it as it was: the same
entry already there changes nothing (no write, no backup); a different one is replaced after the file is copied
to a timestamped backup beside it (readable by its owner only); a file that is not a JSON object is refused
untouched. VS Code's files are JSONC: with comments (or trailing commas) in it, the entry is inserted as text at
the top of the servers object, so every comment stays; replacing an entry there is refused (it would drop its
comments), naming what to paste. A config that is a symbolic link is written where it points. Writes are
atomic."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
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


SCOPES = ("user", "workspace")


def default_path(
    client: str,
    home: Path | None = None,
    cwd: Path | None = None,
    scope: str | None = None,
    platform: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> Path:
    """Where `client` reads its servers on this platform. Claude Desktop, Claude Code and Cursor: the user's file
    (Claude Code's in `$CLAUDE_CONFIG_DIR` when set; Claude Desktop's Windows Store install in its package's own
    folder). VS Code: the workspace's `.vscode/mcp.json` (run it from the workspace, or pass --path), or with
    scope "user" the profile's `mcp.json`, seen by every workspace."""
    home = home or Path.home()
    platform = platform or sys.platform
    environ = os.environ if environ is None else environ
    roaming = Path(environ.get("APPDATA") or home / "AppData" / "Roaming")
    if scope not in (None, *SCOPES):
        raise InvalidInputError(f"scope must be one of {', '.join(SCOPES)}; got {scope!r}")
    if scope == "workspace" and client != "vscode":
        raise InvalidInputError(f"{CLIENTS[client].label} has no workspace file here: use --path for one")
    if client == "claude-desktop":
        if platform == "darwin":
            return home / "Library" / "Application Support" / "Claude" / "claude_desktop_config.json"
        if platform == "win32":
            local = Path(environ.get("LOCALAPPDATA") or home / "AppData" / "Local")
            # The Windows Store (MSIX) install reads a virtualised copy of Roaming inside its package folder.
            packaged = sorted((local / "Packages").glob("Claude_*")) if (local / "Packages").is_dir() else []
            base = packaged[0] / "LocalCache" / "Roaming" if packaged else roaming
            return base / "Claude" / "claude_desktop_config.json"
        return home / ".config" / "Claude" / "claude_desktop_config.json"
    if client == "claude-code":
        configured = environ.get("CLAUDE_CONFIG_DIR")
        return Path(configured).expanduser() / ".claude.json" if configured else home / ".claude.json"
    if client == "cursor":
        return home / ".cursor" / "mcp.json"
    if scope == "user":
        if platform == "darwin":
            return home / "Library" / "Application Support" / "Code" / "User" / "mcp.json"
        if platform == "win32":
            return roaming / "Code" / "User" / "mcp.json"
        return Path(environ.get("XDG_CONFIG_HOME") or home / ".config") / "Code" / "User" / "mcp.json"
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
    action: str  # "added", "replaced", "unchanged" (with dry_run: what a real run would do)
    backup: Path | None
    entry: dict[str, Any]
    dry_run: bool = False

    def describe(self) -> str:
        label = CLIENTS[self.client].label
        if self.action == "unchanged":
            return f"{label}: {self.path} already has this rockmem entry; nothing changed"
        if self.dry_run:
            verb = {"added": "add", "replaced": "replace"}[self.action]
            return f"{label}: would {verb} the rockmem entry in {self.path} (run without --dry-run to write it)"
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
    text = ""
    commented = False
    if raw.strip():
        try:
            text = raw.decode("utf-8")
            plain = strip_jsonc(text) if client == "vscode" else text
            config = json.loads(plain)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise InvalidInputError(
                f"{path} is not valid JSON ({exc}); fix it or pass --path; nothing was changed"
            ) from None
        commented = plain != text
    if not isinstance(config, dict) or not isinstance(config.get(spec.key, {}), dict):
        raise InvalidInputError(f"{path} does not hold a JSON object with {spec.key!r} as one; nothing was changed")
    servers = config.setdefault(spec.key, {})
    before = servers.get(SERVER_NAME)
    if before == entry:
        return Installed(client, path, "unchanged", None, entry)
    servers[SERVER_NAME] = entry
    action = "added" if before is None else "replaced"
    if commented:  # comments kept: the entry goes in as text, or the user pastes it
        if before is not None:
            raise InvalidInputError(
                f"{path} has comments and a different {SERVER_NAME!r} entry; replacing it would drop its comments, "
                f"so nothing was changed: make the entry under {spec.key!r} read "
                f"{json.dumps({SERVER_NAME: entry})[1:-1]}"
            )
        new = insert_entry(text, spec.key, SERVER_NAME, entry)
    else:
        new = json.dumps(config, indent=2, ensure_ascii=False) + "\n"
    backup = None
    if not dry_run:
        if raw:
            backup = path.with_name(f"{path.name}.bak-{datetime.now(UTC):%Y%m%dT%H%M%S%fZ}")
            _private_copy(backup, raw)
        atomic_write(path, new.encode())
    return Installed(client, path, action, backup, entry, dry_run)


def _scan(text: str) -> list[tuple[int, str]]:
    """The JSONC text's significant characters with their offsets: strings whole (as one token each), comments
    and whitespace left out."""
    tokens: list[tuple[int, str]] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            tokens.append((i, text[i : j + 1]))
            i = j + 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:
                raise json.JSONDecodeError("unterminated comment", text, i)
            i = end + 2
        elif ch.isspace():
            i += 1
        else:
            tokens.append((i, ch))
            i += 1
    return tokens


def strip_jsonc(text: str) -> str:
    """JSONC (VS Code's settings format) as JSON: comments and trailing commas removed, strings untouched."""
    tokens = _scan(text)
    kept = [
        tok
        for k, (_, tok) in enumerate(tokens)
        if not (tok == "," and k + 1 < len(tokens) and tokens[k + 1][1] in "]}")
    ]
    return " ".join(kept)


def insert_entry(text: str, key: str, name: str, entry: dict[str, Any]) -> str:
    """`text` (JSONC) with `"name": entry` added first in the top-level `key` object (made if missing), and every
    other character, comments included, where it was."""
    tokens = _scan(text)
    rendered = json.dumps(entry, ensure_ascii=False)
    depth = 0
    for k, (_, token) in enumerate(tokens):
        if token in ("{", "["):
            depth += 1
        elif token in ("}", "]"):
            depth -= 1
        elif depth == 1 and token == json.dumps(key) and tokens[k + 1][1] == ":" and tokens[k + 2][1] == "{":
            opening = tokens[k + 2][0]
            empty = tokens[k + 3][1] == "}"
            addition = f"\n    {json.dumps(name)}: {rendered}" + ("\n  " if empty else ",")
            return text[: opening + 1] + addition + text[opening + 1 :]
    first = next(offset for offset, token in tokens if token == "{")  # the file is an object (checked)
    empty = tokens[1][1] == "}"
    addition = f"\n  {json.dumps(key)}: {{\n    {json.dumps(name)}: {rendered}\n  }}" + ("\n" if empty else ",")
    return text[: first + 1] + addition + text[first + 1 :]


def _private_copy(path: Path, data: bytes) -> None:
    """A new file readable by its owner only (a client's config often holds other servers' keys), durable."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
