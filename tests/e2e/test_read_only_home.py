"""A data home the process cannot write: reads work, writes are refused with one clear message, no traceback.

The tests run as root, which file permissions do not stop, so each process runs in its own mount namespace
where the home is bind-mounted read-only (`unshare --mount`): the filesystem itself answers EROFS, as on a
read-only disk or snapshot, and the mount disappears with the process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.e2e.classic import general, unwrapped

pytestmark = pytest.mark.anyio

PROCESS_TIMEOUT_S = 60
# Run "$@" with the folder $0 mounted read-only, in a mount namespace of its own.
READ_ONLY = 'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" && exec "$@"'


def read_only(home: Path, *command: str) -> list[str]:
    return ["unshare", "--mount", "--", "sh", "-c", READ_ONLY, str(home), *command]


def rockmem(home: Path, *args: str, writable: bool = False, stdin: str | None = None):
    command = [sys.executable, "-m", "rockmem_mcp", "--home", str(home), *args]
    return subprocess.run(
        command if writable else read_only(home, *command),
        input=stdin,
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if not k.startswith("ROCKMEM_")},
        timeout=PROCESS_TIMEOUT_S,
        check=False,
    )


@pytest.fixture
async def filled_home(home: Path, stdio_server, call) -> Path:
    """A home written by a normal server: memories, a triple, working memory."""
    async with stdio_server(home) as client:
        await call(client, "save_memory", content="The ferry to Vlieland leaves at nine", category="travel")
        await call(client, "save_memory", content="Bob drinks green tea")
        await call(client, "add_triples", triples=[{"subject": "Bob", "predicate": "drinks", "object": "Tea"}])
        await call(client, "save_to_working_memory", key="shared/plan/steps", data="pack the bikes", ttl_minutes=60)
    return home


def stderr_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


async def test_cli_reads_work_on_a_read_only_home_with_one_line_about_it(filled_home: Path) -> None:
    before = {p: p.stat().st_mtime_ns for p in filled_home.rglob("*")}
    searched = rockmem(filled_home, "search", "ferry")
    stats = rockmem(filled_home, "stats", "--json")
    exported = rockmem(filled_home, "export", "-")
    for result in (searched, stats, exported):
        assert result.returncode == 0, result.stderr
        assert "Traceback" not in result.stderr
        notices = [line for line in stderr_lines(result.stderr) if "read-only" in line]
        assert len(notices) == 1, result.stderr
        assert "saving, updating and deleting memories" in notices[0] and "search" in notices[0]
    assert "the ferry to vlieland leaves at nine" in searched.stdout.lower()
    assert json.loads(stats.stdout)["active"] == 2
    records = [json.loads(line) for line in exported.stdout.splitlines()]
    assert {r["content"] for r in records if "content" in r} == {
        "The ferry to Vlieland leaves at nine",
        "Bob drinks green tea",
    }
    assert len(records) > 2  # the graph and the working memory came along
    assert {p: p.stat().st_mtime_ns for p in filled_home.rglob("*")} == before  # nothing was touched

    for refused in (
        rockmem(filled_home, "import", "-", stdin=json.dumps({"content": "x"}) + "\n"),
        rockmem(filled_home, "dream"),
        rockmem(filled_home, "reindex"),
    ):
        assert refused.returncode == 1 and "Traceback" not in refused.stderr, refused.stderr
        assert "rockmem-mcp: the home is read-only: cannot write" in refused.stderr


async def test_a_server_on_a_read_only_home_answers_searches_and_refuses_writes(filled_home: Path, tmp_path) -> None:
    log_path = tmp_path / "read-only-server.stderr"
    params = StdioServerParameters(
        command="unshare",
        args=read_only(filled_home, sys.executable, "-m", "rockmem_mcp", "--home", str(filled_home))[1:],
        env={"ROCKMEM_LOG_LEVEL": "INFO"},
        cwd=str(tmp_path),
    )
    with log_path.open("w") as log, anyio.fail_after(PROCESS_TIMEOUT_S):
        async with Client(stdio_client(params, errlog=log)) as client:

            async def ok(tool: str, **arguments: object) -> dict:
                result = await client.call_tool(*general(tool, arguments))
                assert not result.is_error, result.content[0].text
                return unwrapped(tool, result.structured_content)

            async def refused(tool: str, **arguments: object) -> str:
                result = await client.call_tool(*general(tool, arguments))
                assert result.is_error, f"{tool} succeeded on a read-only home"
                return result.content[0].text

            found = await ok("search_memory", query="ferry")
            assert [r["entry"]["content"] for r in found["results"]] == ["The ferry to Vlieland leaves at nine"]
            entry_id = found["results"][0]["entry"]["id"]
            assert "ferry" in (await ok("recall", message="when does the ferry leave?"))["text"]
            assert (await ok("get_from_working_memory", key="shared/plan/steps"))["data"] == "pack the bikes"
            assert (await ok("get_entity", name_or_id="Bob"))["entity"]["name"] == "Bob"

            for tool, arguments in (
                ("save_memory", {"content": "a new fact"}),
                ("update_memory", {"id": entry_id, "content": "The ferry leaves at ten"}),
                ("delete_memory", {"id": entry_id}),
                ("save_to_working_memory", {"key": "shared/plan/x", "data": "y"}),
                ("add_triples", {"triples": [{"subject": "Ann", "predicate": "knows", "object": "Bob"}]}),
                ("record_feedback", {"type": "Correction", "content": "the ferry is at ten"}),
                ("delete_from_working_memory", {"key": "shared/plan/steps"}),
            ):
                message = await refused(tool, **arguments)
                assert ": the home is read-only: cannot write" in message, (tool, message)
            # Still serving, still unchanged.
            assert (await ok("get_memory", id=entry_id))["content"] == "The ferry to Vlieland leaves at nine"
    log = log_path.read_text()
    assert "Traceback" not in log, log
    assert len([line for line in log.splitlines() if "is read-only for this process" in line]) == 1, log
    assert [line for line in log.splitlines() if "WARNING" in line and "read-only" not in line] == [], log
