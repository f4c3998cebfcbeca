"""The audit trail over real stdio: every change has its line, an item's versions come from git, and revert puts
back one memory, a whole dream run or the whole home — each logged, indexed at once, and itself revertable."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.anyio


def days_ago(days: float) -> datetime:
    return datetime.now(UTC) - timedelta(days=days)


def ids(result: dict[str, Any]) -> list[str]:
    return [hit["entry"]["id"] for hit in result["results"]]


def git_log(home: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", f"--git-dir={home / '.git'}", f"--work-tree={home}", "log", *args],
        check=True,
        capture_output=True,
        text=True,
    )
    return done.stdout


async def test_a_memory_s_history_and_revert_over_stdio(stdio_server, home, call, call_error) -> None:
    async with stdio_server(home) as client:
        saved = await call(client, "save_memory", content="The deploy window is Thursday", category="work")
        entry_id = saved["id"]
        await call(client, "update_memory", id=entry_id, content="The deploy window is Friday")
        await call(client, "update_memory", id=entry_id, content="The deploy window is Saturday")

        lines = (await call(client, "audit", item=entry_id))["entries"]
        assert [line["action"] for line in lines] == ["EDIT", "EDIT", "CREATE"]  # newest first
        assert {line["actor"] for line in lines} == {"main"} and {line["approval"] for line in lines} == {"auto"}
        assert {line["file"] for line in lines} == {f"memory/work/{entry_id}.json"}

        history = await call(client, "audit", item=entry_id, history=True)
        texts = [v["text"] for v in history["versions"]]
        assert texts[:3] == [f"The deploy window is {day}" for day in ("Saturday", "Friday", "Thursday")]
        assert history["versions"][0]["changes"][0]["action"] == "EDIT"

        # Back to before the last change (the default), found by search at once.
        reverted = await call(client, "revert", item=entry_id)
        assert reverted["restored"] == [f"memory/work/{entry_id}.json"] and reverted["revert_id"].startswith("rv-")
        assert (await call(client, "get_memory", id=entry_id))["content"] == "The deploy window is Friday"
        assert ids(await call(client, "search_memory", query="deploy Friday")) == [entry_id]
        assert ids(await call(client, "search_memory", query="Saturday")) == []
        reverts = (await call(client, "audit", item=entry_id, action="REVERT"))["entries"]
        assert len(reverts) == 1 and reverts[0]["summary"].startswith(reverted["revert_id"] + ":")

        # To a chosen version, by its commit.
        first = history["versions"][2]["commit"]
        again = await call(client, "revert", item=entry_id, to=first[:12])
        assert (await call(client, "get_memory", id=entry_id))["content"] == "The deploy window is Thursday"

        # A revert is itself revertable; an earlier one whose file changed since is left alone, and says why.
        await call(client, "revert", run=again["revert_id"])
        assert (await call(client, "get_memory", id=entry_id))["content"] == "The deploy window is Friday"
        stale = await call(client, "revert", run=reverted["revert_id"])
        assert stale["restored"] == [] and "changed since by main (REVERT" in stale["skipped"][0]["reason"]

        assert "exactly one" in await call_error(client, "revert", item=entry_id, run="dream:x")
        assert "not a commit" in await call_error(client, "revert", item=entry_id, to="deadbeefdeadbeef")
        assert "no changes by" in await call_error(client, "revert", run="dream:d-nothing")
        assert "unknown action" in await call_error(client, "audit", action="ERASE")

        text = (await client.read_resource("rockmem://audit")).contents[0].text
        assert f"REVERT | memory/work/{entry_id}.json | main | auto | rv-" in text
    assert "Traceback" not in stdio_server.logs[0].read_text()
    # Committed in the background, in the seed's message format; the last commit at close at the latest.
    log = git_log(home, "--format=%B")
    assert f"[EDIT] memory/work/{entry_id}.json — changed content\nActor: main\nApproval: auto" in log


async def test_undo_a_whole_dream_run(stdio_server, home, seed, call) -> None:
    dark1, dark2, other = seed(
        [
            {"content": "The user prefers dark mode in every editor", "created_at": days_ago(3)},
            {"content": "the user prefers dark mode in every  editor.", "created_at": days_ago(2)},
            {"content": "Build artifacts are uploaded to the Hetzner bucket nightly", "created_at": days_ago(5)},
        ]
    )
    async with stdio_server(home) as client:
        report = (await call(client, "dream", mode="deterministic"))["report"]
        merged = next(a["result_id"] for a in report["applied"] if a["action"] == "merge")
        dream_lines = (await call(client, "audit", actor="dream"))["entries"]
        run = dream_lines[0]["actor"]
        assert run.startswith("dream:") and {line["actor"] for line in dream_lines} == {run}
        assert {"CREATE", "ARCHIVE"} <= {line["action"] for line in dream_lines}

        undone = await call(client, "revert", run=run)
        assert undone["skipped"] == []
        assert any(merged in file for file in undone["removed"])
        for entry_id in (dark1, dark2):
            assert (await call(client, "get_memory", id=entry_id))["archived_at"] is None
        assert sorted(ids(await call(client, "search_memory", query="dark mode editor"))) == sorted([dark1, dark2])
        assert ids(await call(client, "search_memory", query="Hetzner bucket")) == [other]


async def test_restore_the_whole_home_to_a_point_in_time(stdio_server, home, call) -> None:
    async with stdio_server(home) as client:
        kept = (await call(client, "save_memory", content="Alice owns the billing service"))["id"]
        # The history holds what was there at a moment once it is committed: the audit tool's history flushes.
        await call(client, "audit", item=kept, history=True)
        moment = datetime.now(UTC)
        later = (await call(client, "save_memory", content="Bob joined the billing team"))["id"]
        await call(client, "update_memory", id=kept, content="Carol owns the billing service")
        await call(client, "save_to_working_memory", key="scratch", data="kept as it is")

        restored = await call(client, "revert", home_as_of=moment.isoformat())
        assert restored["removed"] and restored["restored"]
        assert (await call(client, "get_memory", id=kept))["content"] == "Alice owns the billing service"
        assert ids(await call(client, "search_memory", query="Bob joined")) == []
        assert (await call(client, "get_from_working_memory", key="scratch"))["data"] == "kept as it is"

        # And back again: the restore was one revert.
        await call(client, "revert", run=restored["revert_id"])
        assert (await call(client, "get_memory", id=kept))["content"] == "Carol owns the billing service"
        assert ids(await call(client, "search_memory", query="Bob joined")) == [later]


async def test_a_sub_agent_reads_the_trail_but_neither_reverts_nor_acknowledges(settings_for, call, call_error) -> None:
    from mcp import Client

    from rockmem_mcp.server.app import build_server

    # A sub-agent allowed to write directly (RockBot's way, gated_writes off): still no revert, no acknowledge
    async with Client(build_server(settings_for(namespace="subagent/t1", gated_writes=False))) as client:
        saved = await call(client, "save_memory", content="The build runs on Fridays")
        await call(client, "update_memory", id=saved["id"], content="The build runs on Mondays")
        lines = (await call(client, "audit", item=saved["id"]))["entries"]
        assert {line["actor"] for line in lines} == {"subagent:t1"}
        assert "only the main agent reverts" in await call_error(client, "revert", item=saved["id"])
        assert "only the main agent acknowledges" in await call_error(client, "audit", acknowledge=["all"])
        assert (await call(client, "get_memory", id=saved["id"]))["content"] == "The build runs on Mondays"


async def test_a_memory_deleted_for_good_is_not_brought_back_by_a_revert(stdio_server, home, call, call_error) -> None:
    """Issue 45: `revert(item=ID)` brought permanently deleted memories back. A permanent delete is final."""
    async with stdio_server(home) as client:
        saved = await call(client, "save_memory", content="The locker code is 4471", category="private")
        await call(client, "update_memory", id=saved["id"], content="The locker code is 4472")
        versions = (await call(client, "audit", item=saved["id"], history=True))["versions"]  # committed by now
        before_the_delete = versions[0]["time"]
        await call(client, "delete_memory", id=saved["id"], permanent=True)
        # Nor does a whole-home revert to before the delete (nor a run's): the history no longer holds the file at
        # all (forgotten means gone: it was rewritten without it)
        whole = await call(client, "revert", home_as_of=before_the_delete)
        assert not [file for file in whole["restored"] if saved["id"] in file]
        assert "no memory with id" in await call_error(client, "get_memory", id=saved["id"])
        refused = await call_error(client, "revert", item=saved["id"])
        assert "deleted for good" in refused and "not reverted" in refused
        assert "no memory with id" in await call_error(client, "get_memory", id=saved["id"])
        kept = await call(client, "save_memory", content="The gym opens at six", category="private")
        await call(client, "delete_memory", id=kept["id"])  # archived, not for good: a revert still brings it back
        await call(client, "revert", item=kept["id"])
        assert (await call(client, "get_memory", id=kept["id"]))["archived_at"] is None
