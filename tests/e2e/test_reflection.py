"""Reflection as a client of the real server process meets it (seed 004 §10): a cycle planned by a language
model (a scripted OpenAI-compatible server on loopback) waits for the user; it survives a SIGKILL of the
server, heads the next session's first recall, and applies on approval as reflection:r-NNN, which revert undoes;
a kill while applying leaves it interrupted, and what it applied can be undone."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from rockmem_mcp.consolidation.dream import MERGE_BATCH
from tests.embedding_server import EmbeddingServer

pytestmark = pytest.mark.anyio

TEA = ["The user drinks green tea every morning", "Every morning the user drinks green tea"]


def chat_model(merge_ids: list[list[str]]) -> Any:
    """A model that merges the given groups when asked to consolidate, and says little otherwise."""

    def reply(body: dict) -> tuple[int, object]:
        system = body["messages"][0]["content"]
        if "meta-reflection phase" in system:
            answer: dict[str, Any] = {"evolution": ["the user keeps morning routines"], "guidance": "routines"}
        elif "consolidating" in system:
            answer = {"merges": [{"ids": ids, "content": TEA[0], "reason": "one habit"} for ids in merge_ids]}
        else:
            answer = {}
        message = {"role": "assistant", "content": json.dumps(answer)}
        usage = {"total_tokens": 300, "completion_tokens": 80}
        return 200, {"choices": [{"index": 0, "message": message}], "usage": usage}

    return reply


@pytest.fixture
def model() -> Iterator[EmbeddingServer]:
    server = EmbeddingServer()
    yield server
    server.close()


def model_env(model: EmbeddingServer) -> dict[str, str]:
    return {"ROCKMEM_LLM_ENDPOINT": model.url, "ROCKMEM_LLM_MODEL": "reflector-1", "ROCKMEM_LLM_RETRIES": "0"}


def active_ids(result: dict[str, Any]) -> set[str]:
    return {hit["entry"]["id"] for hit in result["results"]}


async def test_a_model_reflection_waits_survives_a_kill_and_applies_on_approval(
    stdio_server, home: Path, call, call_error, model: EmbeddingServer
) -> None:
    env = model_env(model)
    async with stdio_server(home, **env) as client:
        ids = [(await call(client, "save_memory", content=text, category="habits"))["id"] for text in TEA]
        model.replies = [chat_model([ids])]
        ran = await call(client, "reflect", action="run")
        reflection = ran["reflections"][0]
        assert reflection["status"] == "pending" and reflection["id"] == "r-001"
        assert [a["kind"] for a in reflection["actions"]] == ["merge"] and "never approve" in ran["next_step"]
        assert "[a1] merge" in reflection["summary"] and "keeps morning routines" in reflection["summary"]
        assert active_ids(await call(client, "search_memory", query="green tea")) == set(ids)  # nothing applied
        process = _server_pid(home)
        os.kill(process, signal.SIGKILL)  # the pending reflection is on disk before the tool answered
    async with stdio_server(home, **env) as client:
        first = await call(client, "recall", message="good morning", session_id="user-1")
        assert "Reflections waiting for the user's approval (1)" in first["text"] and "r-001" in first["text"]
        shown = await call(client, "reflect")
        assert [r["id"] for r in shown["reflections"]] == ["r-001"]
        message = await call_error(client, "reflect", action="reject", id="r-001")
        assert "reason" in message
        done = (await call(client, "reflect", action="approve", id="r-001"))["reflections"][0]
        assert done["status"] == "approved" and done["resolution"]["applied"] == {"merge": 1}
        merged = active_ids(await call(client, "search_memory", query="green tea"))
        assert len(merged) == 1 and not merged & set(ids)
        lines = (await call(client, "audit", actor="reflection:r-001"))["entries"]
        assert lines and {line["approval"] for line in lines} == {"approved"}
        await call(client, "revert", run="reflection:r-001")
        assert active_ids(await call(client, "search_memory", query="green tea")) == set(ids)
    log = (home / "meta" / "reflection-log.md").read_text("utf-8")
    assert "## Reflection #1" in log and "decision: approve" in log
    assert "keeps morning routines" in (home / "meta" / "evolution.md").read_text("utf-8")


async def test_a_sub_agent_reads_reflections_but_never_resolves_them(
    stdio_server, home: Path, call, call_error
) -> None:
    async with stdio_server(home, ROCKMEM_REFLECTION_APPROVAL="always") as client:
        ended = (await call(client, "reflect", action="session_end"))["reflections"][0]
        assert ended["trigger"] == "session-end" and ended["status"] == "pending"
    async with stdio_server(home, ROCKMEM_NAMESPACE="subagent/researcher") as client:
        assert [r["id"] for r in (await call(client, "reflect"))["reflections"]] == ["r-001"]
        shown = (await client.read_resource("rockmem://reflections")).contents[0].text
        assert shown.startswith("# Reflection Summary") and "(r-001)" in shown
        assert "only the main agent" in await call_error(client, "reflect", action="approve", id="r-001")
        assert "only the main agent" in await call_error(client, "reflect", action="run")
        recalled = await call(client, "recall", message="hello", session_id="sub-1")
        assert "Reflections waiting" not in recalled["text"]  # the user's session only


async def test_a_kill_while_applying_leaves_it_interrupted_and_undoable(stdio_server, home: Path, call, seed) -> None:
    pairs = 2 * MERGE_BATCH + 100  # three batches: the kill lands after the first
    records = [{"content": f"Fact number {n} about the falcon project", "category": "facts"} for n in range(pairs)]
    ids = seed(records + records)  # each fact twice: the reflection merges every pair
    cli = [sys.executable, "-m", "rockmem_mcp", "--home", str(home), "reflect"]
    env = {**os.environ, "ROCKMEM_REFLECTION_APPROVAL": "always"}
    ran = subprocess.run([*cli, "--run", "--json"], capture_output=True, text=True, env=env, timeout=120, check=True)
    assert len(json.loads(ran.stdout)[0]["actions"]) == pairs
    audit = home / "meta" / "audit.log"
    applying = subprocess.Popen([*cli, "r-001", "--approve"], env=env, stderr=subprocess.DEVNULL)
    with anyio.fail_after(60):
        while _count(audit, "| reflection:r-001 |") < MERGE_BATCH:
            assert applying.poll() is None, "the apply finished before it could be cut off"
            await anyio.sleep(0.005)
    applying.send_signal(signal.SIGKILL)
    applying.wait()
    async with stdio_server(home) as client:
        shown = (await call(client, "reflect", id="r-001"))["reflections"][0]
        assert shown["status"] == "interrupted"
        await call(client, "revert", run="reflection:r-001")
        assert (await call(client, "list_memory_categories"))["total"] == len(ids)  # sources back, merged gone
        listed = await call(client, "search_memory", query="fact number 7 falcon project", limit=200)
        assert active_ids(listed) <= set(ids)


def _count(path: Path, needle: str) -> int:
    try:
        return path.read_text("utf-8").count(needle)
    except FileNotFoundError:
        return 0


def _server_pid(home: Path) -> int:
    """The stdio server's process id."""
    for proc in Path("/proc").iterdir():
        try:
            args = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"rockmem_mcp" in args and str(home).encode() in args and b"reflect" not in args:
            return int(proc.name)
    raise AssertionError("the server process was not found")


async def test_a_deferred_proposal_is_committed_by_the_approved_reflection(stdio_server, home: Path, call) -> None:
    gated = {"ROCKMEM_NAMESPACE": "subagent/researcher", "ROCKMEM_GATED_WRITES": "1"}
    async with stdio_server(home, **gated) as researcher:
        filed = await call(researcher, "save_memory", content="The user prefers academic sources")
    async with stdio_server(home, ROCKMEM_REFLECTION_APPROVAL="always") as main:
        await call(main, "review_proposals", action="defer", id=filed["id"], reason="for the reflection")
        reflection = (await call(main, "reflect", action="run"))["reflections"][0]
        held = [a for a in reflection["actions"] if a["kind"] == "proposal"]
        assert [a["item"]["proposal"] for a in held] == [filed["id"]]
        done = (await call(main, "reflect", action="approve", id=reflection["id"]))["reflections"][0]
        assert done["resolution"]["applied"] == {"proposal": 1}
        hits = await call(main, "search_memory", query="academic sources")
        assert [hit["entry"]["content"] for hit in hits["results"]] == ["The user prefers academic sources"]
        assert (await call(main, "review_proposals", action="list"))["proposals"] == []


async def test_a_serving_process_that_opts_in_reflects_on_the_threshold_and_a_sub_agent_never_does(
    stdio_server, home: Path, call
) -> None:
    opted = {
        "ROCKMEM_REFLECTION_IN_SERVER": "true",
        "ROCKMEM_REFLECTION_THRESHOLD": "3",
        "ROCKMEM_REFLECTION_CHECK_SECONDS": "0.1",
        "ROCKMEM_REFLECTION_APPROVAL": "always",
    }
    async with stdio_server(home, ROCKMEM_NAMESPACE="subagent/researcher", **opted) as sub:
        for n in range(4):
            await call(sub, "save_to_working_memory", key=f"note{n}", data="scratch")  # working memory only
    async with stdio_server(home) as main:
        for n in range(4):
            await call(main, "save_memory", content=f"Fact {n} about the heron project")
    async with stdio_server(home, ROCKMEM_NAMESPACE="subagent/researcher", **opted) as sub:
        await call(sub, "search_memory", query="heron")
        with anyio.move_on_after(1.0):  # ten checks' worth: a sub-agent's process must not reflect
            while not (home / "meta" / "reflections" / "r-001.json").exists():
                await anyio.sleep(0.05)
        assert not (home / "meta" / "reflections" / "r-001.json").exists()
    async with stdio_server(home, **opted) as main:
        with anyio.fail_after(30):
            while not (shown := (await call(main, "reflect"))["reflections"]):
                await anyio.sleep(0.05)
        assert shown[0]["trigger"] == "threshold" and shown[0]["status"] == "pending"


def test_the_cli_sidecar_reflects_when_due_and_keeps_going(home: Path, seed) -> None:
    seed([{"content": f"Fact {n} about the kestrel project"} for n in range(3)])
    env = {**os.environ, "ROCKMEM_REFLECTION_THRESHOLD": "3", "ROCKMEM_REFLECTION_APPROVAL": "always"}
    sidecar = subprocess.Popen(
        [sys.executable, "-m", "rockmem_mcp", "--home", str(home), "reflect", "--every", "0.1"],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        record = home / "meta" / "reflections" / "r-001.json"
        deadline = 60.0
        while not record.exists() and deadline > 0:
            assert sidecar.poll() is None, sidecar.stderr.read() if sidecar.stderr else ""
            time.sleep(0.05)  # another process's file: polled, there is no event to await
            deadline -= 0.05
        assert json.loads(record.read_text())["trigger"] == "threshold"
        assert sidecar.poll() is None  # still watching
    finally:
        sidecar.kill()
        sidecar.wait()
    assert not (home / "meta" / "reflections" / "r-002.json").exists()  # one waits: no second while it does
