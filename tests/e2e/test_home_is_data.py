"""A home copied from someone else is data, not code: whatever its `.git/config`, included config files,
`.gitattributes` or hooks name, the server's history runs none of it, and the history still works."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = [pytest.mark.anyio]


def plain_git(home: Path, *args: str) -> str:
    """git on the home with no configuration but the repository's own (how the attacker set it up)."""
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(home.parent),
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_DIR": str(home / ".git"),
        "GIT_WORK_TREE": str(home),
    }
    quiet = ["-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null", "-c", "log.showSignature=false"]
    done = subprocess.run(["git", *quiet, *args], env=env, cwd=home, check=True, capture_output=True, text=True)
    return done.stdout


def hostile_home(home: Path, markers: Path) -> None:
    """A git home whose configuration names a command for everything git can be told to run; each command
    leaves a marker file in `markers`."""
    markers.mkdir()
    home.mkdir()
    (home / "notes.md").write_text("a note that came with the home\n")
    (home / ".gitattributes").write_text("* filter=evil diff=evil merge=evil\n")
    plain_git(home, "init", "-q", "--initial-branch=main")
    plain_git(home, "add", "-A")
    plain_git(home, "-c", "user.name=x", "-c", "user.email=x@x", "commit", "-q", "-m", "someone else's home")

    def run(name: str) -> str:
        """A config value: a command that leaves a marker, then passes its input on (a working filter)."""
        command = f"sh -c {shlex.quote(f'touch {markers / name}; cat')}"
        return '"' + command.replace("\\", "\\\\").replace('"', '\\"') + '"'

    hooks = home / ".git" / "evil-hooks"
    hooks.mkdir()
    names = ["reference-transaction", "post-index-change", "pre-auto-gc", "post-checkout", "pre-commit"]
    for hook in names:
        (hooks / hook).write_text(f"#!/bin/sh\ntouch {markers / ('hook-' + hook)}\n")
        (hooks / hook).chmod(0o755)
    # An included file sets commands too (config includes are read like the file itself).
    (home / ".git" / "evil-include.config").write_text(
        f'[filter "inc"]\n\tprocess = {run("include-process")}\n\tclean = {run("include-clean")}\n'
        f'[diff "inc"]\n\ttextconv = {run("include-textconv")}\n'
        f"[core]\n\tpager = {run('include-pager')}\n"
    )
    with (home / ".git" / "config").open("a") as config:
        config.write(
            f'[filter "evil"]\n\tprocess = {run("process")}\n\tclean = {run("clean")}\n'
            f"\tsmudge = {run('smudge')}\n\trequired = true\n"
            f'[diff "evil"]\n\ttextconv = {run("textconv")}\n\tcommand = {run("diff-command")}\n'
            f"[diff]\n\texternal = {run('external-diff')}\n"
            f'[merge "evil"]\n\tdriver = {run("merge-driver")}\n'
            f"[core]\n\tfsmonitor = {run('fsmonitor')}\n\tpager = {run('pager')}\n"
            f"\thooksPath = {hooks}\n\tsshCommand = {run('ssh')}\n\taskPass = {run('askpass')}\n"
            f"\teditor = {run('editor')}\n\talternateRefsCommand = {run('alternate-refs')}\n"
            f"[credential]\n\thelper = !{run('credential')}\n"
            f'[gpg]\n\tprogram = {run("gpg")}\n[gpg "ssh"]\n\tprogram = {run("gpg-ssh")}\n'
            f"[log]\n\tshowSignature = true\n[commit]\n\tgpgSign = true\n"
            f"[gc]\n\tauto = 1\n\tautoDetach = false\n"
            f"[uploadpack]\n\tpackObjectsHook = {run('pack-objects-hook')}\n"
            f"[include]\n\tpath = evil-include.config\n"
        )
    # A sub-folder's attributes pick the included file's drivers.
    (home / "memory").mkdir()
    (home / "memory" / ".gitattributes").write_text("* filter=inc diff=inc\n")


async def test_a_hostile_home_runs_none_of_its_commands(stdio_server, tmp_path, call) -> None:
    home, markers = tmp_path / "home", tmp_path / "markers"
    hostile_home(tmp_path / "theirs", markers)
    shutil.copytree(tmp_path / "theirs", home, symlinks=True)  # copied: git must read the files again
    async with stdio_server(home) as client:
        saved = await call(client, "save_memory", content="The deploy window is Thursday", category="work")
        entry_id = saved["id"]
        await call(client, "update_memory", id=entry_id, content="The deploy window is Friday")
        await call(client, "update_memory", id=entry_id, content="The deploy window is Saturday")
        history = await call(client, "audit", item=entry_id, history=True)
        texts = [v["text"] for v in history["versions"]]
        assert texts[:3] == [f"The deploy window is {day}" for day in ("Saturday", "Friday", "Thursday")]
        reverted = await call(client, "revert", item=entry_id)
        assert reverted["restored"] == [f"memory/work/{entry_id}.json"]
        assert (await call(client, "get_memory", id=entry_id))["content"] == "The deploy window is Friday"
        await call(client, "audit", item=entry_id, history=True)  # flushes the revert
    assert "Traceback" not in stdio_server.logs[0].read_text()

    assert sorted(os.listdir(markers)) == []
    # The history is the home's own, grown on top of what came with it, and holds every version.
    log = plain_git(home, "log", "--format=%s")
    assert log.splitlines()[-1] == "someone else's home"
    assert f"[EDIT] memory/work/{entry_id}.json" in log and "REVERT" in plain_git(home, "log", "--format=%B")
    shown = plain_git(home, "cat-file", "blob", f"HEAD:memory/work/{entry_id}.json")
    assert "The deploy window is Friday" in shown
