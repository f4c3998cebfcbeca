"""`rockmem-mcp proposals`: the user reviews sub-agents' proposals at a shell (actor manual; a commit is theirs)."""

from __future__ import annotations

import json
from pathlib import Path

from rockmem_mcp.audit.log import AuditLog
from rockmem_mcp.audit.service import Audit
from rockmem_mcp.config import Settings
from rockmem_mcp.proposals.service import Proposals
from tests.test_cli import rockmem


def test_list_commit_reject_and_defer_from_the_shell(tmp_path: Path) -> None:
    home = tmp_path / "home"
    sub = Settings(
        home=home, namespace="subagent/researcher", gated_writes=True, audit_git=False, embedding_model="off"
    )
    proposer = Proposals(sub, Audit(sub))
    keep = proposer.propose("The user's shell is fish", trigger="save_memory", category="user-preferences/shell")
    drop = proposer.propose("A stale fact", trigger="save_memory")
    later = proposer.propose("Maybe the user likes jazz", trigger="save_memory", confidence="low")

    listed = rockmem("proposals", "--home", home)
    assert listed.returncode == 0, listed.stderr
    assert [line.split()[1] for line in listed.stdout.splitlines()] == [f"#{keep.id}", f"#{drop.id}", f"#{later.id}"]

    # Manual review mode: the user at the shell is the confirmation.
    manual = {"ROCKMEM_PROPOSAL_REVIEW": "manual", "PATH": "/usr/bin:/bin"}
    committed = rockmem("proposals", "commit", keep.id, "--home", home, "--json", env=manual)
    assert committed.returncode == 0, committed.stderr
    memory_id = json.loads(committed.stdout)["committed_as"][0].removeprefix("memory:")
    assert rockmem("proposals", "reject", drop.id, "--home", home).returncode == 1  # no reason
    assert rockmem("proposals", "reject", drop.id, "--home", home, "--reason", "stale").returncode == 0
    assert rockmem("proposals", "defer", later.id, "--home", home).returncode == 0

    found = rockmem("search", "fish shell", "--home", home, "--json")
    assert memory_id in found.stdout
    remaining = rockmem("proposals", "--home", home, "--json")
    assert [(p["id"], p["status"]) for p in json.loads(remaining.stdout)["proposals"]] == [(later.id, "deferred")]
    lines = [(line.action, line.actor) for line in AuditLog(home / "meta" / "audit.log").lines()]
    assert ("COMMIT", "bot:commit-from:researcher") in lines and ("REJECT", "manual") in lines
    history = rockmem("proposals", "--all", "--home", home)
    assert "[committed]" in history.stdout and "[rejected]" in history.stdout
