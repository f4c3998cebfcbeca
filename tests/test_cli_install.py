"""`rockmem-mcp install CLIENT` (cli/clients.py), through test_cli's `rockmem`: the entry merged into the client's file,
idempotent, a backup before a change, a broken file refused untouched; the README's snippets are what it writes."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from rockmem_mcp.cli import clients as client_config
from tests.test_cli import clean_env, ok, rockmem

ROOT = Path(__file__).resolve().parents[1]


def install(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> str:
    return ok("install", *args, env=env or clean_env(), stdin="").stdout


def test_install_merges_keeps_the_rest_is_idempotent_and_backs_up_before_a_change(tmp_path: Path) -> None:
    config = tmp_path / "claude_desktop_config.json"
    config.write_text(json.dumps({"mcpServers": {"other": {"command": "x"}}, "theme": "dark"}))
    said = install(tmp_path, "claude-desktop", "--path", str(config), "--command", "/opt/bin/rockmem-mcp")
    assert said.strip().startswith(
        f"Claude Desktop: added the rockmem entry in {config} (the previous file is kept as "
    )
    written = json.loads(config.read_text())
    assert written == {
        "mcpServers": {
            "other": {"command": "x"},
            "rockmem": {"command": "/opt/bin/rockmem-mcp", "args": [], "env": {}},
        },
        "theme": "dark",
    }
    backups = sorted(tmp_path.glob("claude_desktop_config.json.bak-*"))
    assert len(backups) == 1 and json.loads(backups[0].read_text())["mcpServers"] == {"other": {"command": "x"}}

    again = install(tmp_path, "claude-desktop", "--path", str(config), "--command", "/opt/bin/rockmem-mcp")
    assert "already has this rockmem entry; nothing changed" in again
    assert len(list(tmp_path.glob("*.bak-*"))) == 1  # nothing written, no backup

    home = tmp_path / "memory"
    moved = install(tmp_path, "claude-desktop", "--path", str(config), "--command", "/opt/bin/rockmem-mcp",
                    "--home", str(home))  # fmt: skip
    assert "replaced the rockmem entry" in moved
    assert json.loads(config.read_text())["mcpServers"]["rockmem"]["env"] == {"ROCKMEM_HOME": str(home)}
    assert len(list(tmp_path.glob("*.bak-*"))) == 2


def test_a_broken_file_is_refused_untouched_and_dry_run_writes_nothing(tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    config.write_text("{not json")
    refused = rockmem("install", "cursor", "--path", str(config), env=clean_env())
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    assert (
        refused.stderr.startswith(f"rockmem-mcp: {config} is not valid JSON (")
        and "nothing was changed" in refused.stderr
    )
    assert config.read_text() == "{not json" and list(tmp_path.iterdir()) == [config]

    fresh = tmp_path / "new" / "mcp.json"
    said = install(tmp_path, "cursor", "--path", str(fresh), "--dry-run")
    assert said.startswith("(dry run) Cursor: would add the rockmem entry") and not fresh.exists()
    assert "added" not in said
    planned = json.loads(install(tmp_path, "cursor", "--path", str(fresh), "--dry-run", "--json"))
    assert (planned["action"], planned["dry_run"]) == ("added", True) and not fresh.exists()
    reported = json.loads(install(tmp_path, "vscode", "--path", str(fresh), "--json", "--command", "rockmem-mcp"))
    assert reported["action"] == "added" and reported["backup"] is None and reported["dry_run"] is False
    assert json.loads(fresh.read_text()) == client_config.snippet("vscode")


def test_the_command_written_is_the_full_path_of_the_rockmem_mcp_that_ran(tmp_path: Path) -> None:
    import shutil
    import subprocess
    import sys

    script = shutil.which("rockmem-mcp", path=str(Path(sys.executable).parent))
    assert script is not None
    config = tmp_path / "c.json"
    subprocess.run([script, "install", "claude-code", "--path", str(config)], check=True, capture_output=True,
                   env=clean_env(), timeout=60)  # fmt: skip
    assert json.loads(config.read_text())["mcpServers"]["rockmem"]["command"] == str(Path(script).resolve())


@pytest.mark.parametrize("client", ["claude-desktop", "claude-code", "cursor", "vscode"])
def test_default_paths_are_the_clients_own(client: str, tmp_path: Path) -> None:
    path = client_config.default_path(client, home=tmp_path, cwd=tmp_path / "project")
    expected = {
        "claude-code": tmp_path / ".claude.json",
        "cursor": tmp_path / ".cursor" / "mcp.json",
        "vscode": tmp_path / "project" / ".vscode" / "mcp.json",
    }
    if client == "claude-desktop":
        assert path.name == "claude_desktop_config.json" and path.parent.name == "Claude"
    else:
        assert path == expected[client]


def test_the_readme_snippets_are_exactly_what_install_writes() -> None:
    readme = (ROOT / "docs" / "clients.md").read_text()
    section = readme[readme.index("## Use it from an MCP client") : readme.index("Check the server as a client sees")]
    blocks = [json.loads(block) for block in re.findall(r"```json\n(.*?)```", section, re.S)]
    assert blocks == [client_config.snippet("claude-desktop"), client_config.snippet("vscode")]
    assert client_config.snippet("claude-code") == client_config.snippet("cursor") == blocks[0]  # "and Cursor"


def test_backups_are_private_and_a_linked_config_is_written_where_it_points(tmp_path: Path) -> None:
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    real = dotfiles / "mcp.json"
    real.write_text(json.dumps({"mcpServers": {"other": {"command": "x", "env": {"KEY": "secret"}}}}))
    real.chmod(0o600)
    link = tmp_path / "mcp.json"
    link.symlink_to(real)
    install(tmp_path, "cursor", "--path", str(link), "--command", "rockmem-mcp")
    assert link.is_symlink() and json.loads(real.read_text())["mcpServers"]["rockmem"]["command"] == "rockmem-mcp"
    (backup,) = dotfiles.glob("mcp.json.bak-*")
    assert backup.stat().st_mode & 0o777 == 0o600  # it holds the other servers' keys too
    assert real.stat().st_mode & 0o777 == 0o600


def test_claude_code_follows_claude_config_dir_and_vscode_has_a_user_scope(tmp_path: Path) -> None:
    env = {"CLAUDE_CONFIG_DIR": str(tmp_path / "claude-here"), "XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    assert client_config.default_path("claude-code", home=tmp_path, environ=env) == (
        tmp_path / "claude-here" / ".claude.json"
    )
    assert client_config.default_path("claude-code", home=tmp_path, environ={}) == tmp_path / ".claude.json"
    user = client_config.default_path("vscode", home=tmp_path, scope="user", platform="linux", environ=env)
    assert user == tmp_path / "xdg" / "Code" / "User" / "mcp.json"
    mac = client_config.default_path("vscode", home=tmp_path, scope="user", platform="darwin", environ={})
    assert mac == tmp_path / "Library" / "Application Support" / "Code" / "User" / "mcp.json"
    win = client_config.default_path("vscode", scope="user", platform="win32", environ={"APPDATA": str(tmp_path)})
    assert win == tmp_path / "Code" / "User" / "mcp.json"
    with pytest.raises(client_config.InvalidInputError, match="no workspace file"):
        client_config.default_path("cursor", scope="workspace")

    # Through the command: the user scope's file, made with its folders.
    shown = install(tmp_path, "vscode", "--scope", "user", "--json",
                    env=clean_env(HOME=str(tmp_path), XDG_CONFIG_HOME=str(tmp_path / "xdg")))  # fmt: skip
    assert json.loads(shown)["path"] == str(user)
    assert json.loads(user.read_text())["servers"]["rockmem"]["type"] == "stdio"
    done = install(tmp_path, "claude-code", "--json", env=clean_env(HOME=str(tmp_path), **env))
    assert json.loads(done)["path"] == str(tmp_path / "claude-here" / ".claude.json")


def test_claude_desktop_from_the_windows_store_reads_its_package_folder(tmp_path: Path) -> None:
    local, roaming = tmp_path / "Local", tmp_path / "Roaming"
    environ = {"LOCALAPPDATA": str(local), "APPDATA": str(roaming)}
    plain = client_config.default_path("claude-desktop", platform="win32", environ=environ)
    assert plain == roaming / "Claude" / "claude_desktop_config.json"
    (local / "Packages" / "Claude_pzs8sxrjxfjjc").mkdir(parents=True)
    packaged = client_config.default_path("claude-desktop", platform="win32", environ=environ)
    expected = local / "Packages" / "Claude_pzs8sxrjxfjjc" / "LocalCache" / "Roaming" / "Claude"
    assert packaged == expected / "claude_desktop_config.json"


JSONC = """// my servers
{
  "servers": {
    // the GitHub one: keep this note
    "github": {"type": "http", "url": "https://example.test/mcp", "headers": {"x": "a//b"}},
  },
  /* input variables */
  "inputs": [],
}
"""


def test_a_vscode_file_with_comments_keeps_them(tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    config.write_text(JSONC)
    install(tmp_path, "vscode", "--path", str(config))
    text = config.read_text()
    for kept in ("// my servers", "// the GitHub one: keep this note", "/* input variables */", '"inputs": [],'):
        assert kept in text
    parsed = json.loads(client_config.strip_jsonc(text))
    assert parsed["servers"]["rockmem"] == client_config.server_entry("vscode", parsed["servers"]["rockmem"]["command"])
    assert parsed["servers"]["github"]["headers"] == {"x": "a//b"}  # a "//" inside a string is not a comment
    assert [p.name for p in tmp_path.glob("mcp.json.bak-*")] != []
    assert "nothing changed" in install(tmp_path, "vscode", "--path", str(config))  # idempotent on JSONC too

    # A different rockmem entry in a commented file is not rewritten (that would drop comments): refused, told.
    changed = text.replace('"args": []', '"args": ["--old"]')
    config.write_text(changed)
    refused = rockmem("install", "vscode", "--path", str(config), env=clean_env(), stdin="")
    assert refused.returncode == 1 and "has comments" in refused.stderr and '"rockmem": {' in refused.stderr
    assert config.read_text() == changed

    # No servers object yet, and an empty object: both get one, comments kept.
    for text, kept in (
        ('{\n  // nothing yet\n  "inputs": []\n}\n', "// nothing yet"),
        ("{ /* empty */ }", "/* empty */"),
    ):
        config.write_text(text)
        install(tmp_path, "vscode", "--path", str(config))
        written = config.read_text()
        assert kept in written and "rockmem" in json.loads(client_config.strip_jsonc(written))["servers"]
