"""The real server process over stdio: tool list, persistence across restarts, two processes on one home."""

from __future__ import annotations

import json
import shutil
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream
from mcp.shared.exceptions import MCPError

pytestmark = pytest.mark.anyio

TOOLS = {
    *("save_memory", "search_memory", "get_memory", "update_memory", "delete_memory", "list_memory_categories"),
    *("remember", "forget"),
    *("audit", "revert"),
    *("reflect", "review_proposals"),
    "working_memory",
    *("record_turn", "get_conversation", "recall", "reset_recall", "core_memory"),
    "graph",
    *("record_feedback", "dream"),
}


def ids(found: dict[str, Any]) -> list[str]:
    return [hit["entry"]["id"] for hit in found["results"]]


async def test_tools_list_returns_exactly_the_memory_tools(stdio_server, home) -> None:
    async with stdio_server(home) as client:
        tools = (await client.list_tools()).tools
        assert sorted(t.name for t in tools) == sorted(TOOLS)
        assert client.server_info is not None
        assert client.server_info.name == "rockmem"


async def test_the_garbage_collector_resumes_after_the_first_answer(stdio_server, home, call) -> None:
    """The command line pauses the collector for the start (rockmem_mcp/collector.py); the server resumes it once
    idle after its first answer, collecting what the start left."""
    resumed = "garbage collector resumed"
    async with stdio_server(home, ROCKMEM_LOG_LEVEL="DEBUG") as client:
        await client.list_tools()
        assert resumed not in stdio_server.logs[0].read_text()
        await call(client, "search_memory", query="anything")
        with anyio.fail_after(30):
            while resumed not in stdio_server.logs[0].read_text():  # a log line is no event to await
                await anyio.sleep(0.05)


async def test_a_server_closed_soon_after_its_calls_never_makes_the_collectors_first_pass(
    stdio_server, home, call
) -> None:
    """A client that opens its server for a question or two: the pass over what the start built (0.14-0.2 s of
    CPU) waits for calls to pause 2 s, so a short pause between calls (a model thinking) does not start it."""
    async with stdio_server(home, ROCKMEM_LOG_LEVEL="DEBUG") as client:
        await call(client, "search_memory", query="anything")  # the first answer
        await anyio.sleep(0.6)  # the client's pause between its calls is the scenario, not a wait for an event
        await call(client, "save_memory", content="The standup moved to 9:30")
    assert "garbage collector resumed" not in stdio_server.logs[0].read_text()


async def test_memory_survives_a_restart(stdio_server, home, call) -> None:
    async with stdio_server(home) as first:
        saved = await call(first, "save_memory", content="The deploy key lives in the vault", category="ops/secrets")
        kept = await call(first, "save_memory", content="Archived fact about the old vault")
        await call(first, "delete_memory", id=kept["id"])

    async with stdio_server(home) as second:
        found = await call(second, "search_memory", query="deploy vault")
        assert ids(found) == [saved["id"]]
        assert await call(second, "get_memory", id=saved["id"]) == saved
        archived = await call(second, "search_memory", query="vault", include_archived=True)
        assert sorted(ids(archived)) == sorted([saved["id"], kept["id"]])
        tree = await call(second, "list_memory_categories")
        assert tree["total"] == 1


async def test_restart_without_the_index_rebuilds_it(stdio_server, home, call) -> None:
    async with stdio_server(home) as first:
        saved = await call(first, "save_memory", content="Rebuild me from the files")
    shutil.rmtree(home / "index")  # every derived file: snapshots and journals of memory and graph
    async with stdio_server(home) as second:
        assert ids(await call(second, "search_memory", query="rebuild")) == [saved["id"]]


async def test_two_processes_on_one_home_see_each_others_writes(stdio_server, home, call, call_error) -> None:
    async with stdio_server(home) as a, stdio_server(home) as b:
        # A save through A is found by B's next call, without restarting B.
        saved = await call(a, "save_memory", content="The team prefers squash merges", category="team/git")
        assert ids(await call(b, "search_memory", query="squash merges")) == [saved["id"]]
        assert (await call(b, "list_memory_categories"))["total"] == 1

        # An update through B (new words, new category) is seen by A.
        await call(b, "update_memory", id=saved["id"], content="The team prefers rebase merges", category="team/vcs")
        assert (await call(a, "search_memory", query="squash"))["total_matches"] == 0
        found = await call(a, "search_memory", query="rebase", category="team/vcs")
        assert ids(found) == [saved["id"]]
        assert found["results"][0]["entry"]["content"] == "The team prefers rebase merges"
        assert (await call(a, "search_memory", category="team/git"))["total_matches"] == 0

        # An archive through B is seen by A.
        await call(b, "delete_memory", id=saved["id"], reason="outdated")
        assert (await call(a, "search_memory", query="rebase"))["total_matches"] == 0
        assert ids(await call(a, "search_memory", query="rebase", include_archived=True)) == [saved["id"]]
        assert (await call(a, "get_memory", id=saved["id"]))["archive_reason"] == "outdated"

        # A permanent delete through B is seen by A.
        await call(b, "delete_memory", id=saved["id"], permanent=True)
        assert (await call(a, "search_memory", query="rebase", include_archived=True))["total_matches"] == 0
        assert "no memory with id" in await call_error(a, "get_memory", id=saved["id"])

        # Both write concurrently; each sees everything.
        async def save(client: Any, content: str) -> None:
            await call(client, "save_memory", content=content)

        async with anyio.create_task_group() as tg:
            for n in range(5):
                tg.start_soon(save, a, f"Parallel fact alpha {n}")
                tg.start_soon(save, b, f"Parallel fact beta {n}")
        for client in (a, b):
            assert (await call(client, "search_memory", query="parallel fact"))["total_matches"] == 10


async def test_two_processes_keep_in_step_through_journal_rotations(stdio_server, home, call) -> None:
    # A tiny journal and frequent snapshots: the journal rotates many times and readers fall behind it.
    small = {"ROCKMEM_JOURNAL_ROTATE_BYTES": "1000", "ROCKMEM_SNAPSHOT_EVERY_CHANGES": "3"}
    async with stdio_server(home, **small) as a, stdio_server(home, **small) as b:
        for n in range(30):
            writer, other = (a, b) if n % 2 else (b, a)
            saved = await call(writer, "save_memory", content=f"item{n} original wording")
            await call(other, "update_memory", id=saved["id"], content=f"item{n} changed wording")
            for client in (a, b):  # keywords: hybrid would rank item{n}'s look-alikes after it
                assert ids(await call(client, "search_memory", query=f"item{n}", mode="bm25")) == [saved["id"]]
                assert (await call(client, "search_memory", query="original"))["total_matches"] == 0
        for client in (a, b):
            assert (await call(client, "search_memory", query="changed", limit=100))["total_matches"] == 30
    generations = sorted((home / "index").glob("changes-*.jsonl"))
    assert generations and generations[-1].name > "changes-00000003.jsonl", "the journal never rotated"


async def test_invalid_calls_over_stdio_return_errors_and_the_process_keeps_serving(
    stdio_server, home, call, call_error
) -> None:
    async with stdio_server(home) as client:
        assert "no memory with id" in await call_error(client, "get_memory", id="0123456789ab")
        assert "invalid category" in await call_error(client, "save_memory", content="x", category="../x")
        assert "limit" in await call_error(client, "search_memory", limit=0)
        assert "tags" in await call_error(client, "save_memory", content="x", tags="5")
        saved = await call(client, "save_memory", content="Still serving after bad calls")
        assert ids(await call(client, "search_memory", query="serving")) == [saved["id"]]
    assert "Traceback" not in stdio_server.logs[0].read_text()


async def test_damaged_and_stray_files_in_the_home_do_not_stop_the_server(stdio_server, home, call) -> None:
    corrupt = home / "memory" / "notes" / "0123456789ab.json"
    corrupt.parent.mkdir(parents=True)
    corrupt.write_text("{not json", encoding="utf-8")
    (home / "memory" / "not a category").mkdir()
    (home / "memory" / "not-an-id!.json").write_text("{}", encoding="utf-8")

    async with stdio_server(home) as client:
        assert (await call(client, "search_memory"))["total_matches"] == 0
        saved = await call(client, "save_memory", content="Healthy entry next to a damaged one", category="notes")
        assert ids(await call(client, "search_memory", query="healthy")) == [saved["id"]]

    assert corrupt.read_text(encoding="utf-8") == "{not json"  # rockmem never deletes a user's file
    log = stdio_server.logs[0].read_text()
    assert "0123456789ab.json is not a valid entry" in log
    assert "Traceback" not in log


async def _raw_session(home: Path, messages: list[dict[str, Any]]) -> tuple[list[bytes], str]:
    """Speak JSON-RPC to the server by hand; returns every stdout line and the stderr text."""
    command = [sys.executable, "-m", "rockmem_mcp", "-vv", "--home", str(home)]
    err = bytearray()

    async def drain_stderr(stream: Any) -> None:  # read concurrently so a full pipe never blocks the server
        async for chunk in stream:
            err.extend(chunk)

    async with await anyio.open_process(command) as process, anyio.create_task_group() as tg:
        assert process.stdin and process.stdout and process.stderr
        tg.start_soon(drain_stderr, process.stderr)
        stdout = BufferedByteReceiveStream(process.stdout)
        lines: list[bytes] = []
        with anyio.fail_after(30):
            for message in messages:
                await process.stdin.send(json.dumps(message).encode() + b"\n")
                if "id" in message:  # a request: wait for its response
                    while True:
                        line = await stdout.receive_until(b"\n", 10_000_000)
                        lines.append(line)
                        if json.loads(line).get("id") == message["id"]:
                            break
            await process.stdin.aclose()  # EOF: the server shuts down
            rest = bytearray()
            async for chunk in stdout:
                rest.extend(chunk)
            lines += bytes(rest).splitlines()
            assert await process.wait() == 0
    return lines, err.decode()


async def test_stdout_carries_only_protocol_messages(home) -> None:
    def request(n: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": n, "method": method, "params": params}

    lines, stderr = await _raw_session(
        home,
        [
            request(
                1,
                "initialize",
                {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "test", "version": "0"}},
            ),
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            request(2, "tools/list", {}),
            request(3, "tools/call", {"name": "save_memory", "arguments": {"content": "Logged but not printed"}}),
            request(4, "tools/call", {"name": "search_memory", "arguments": {"query": "logged"}}),
            request(5, "tools/call", {"name": "get_memory", "arguments": {"id": "0123456789ab"}}),
        ],
    )

    messages = [json.loads(line) for line in lines]  # every stdout line is JSON ...
    assert all(m.get("jsonrpc") == "2.0" for m in messages)  # ... and JSON-RPC
    by_id = {m["id"]: m for m in messages if "id" in m}
    assert set(by_id) == {1, 2, 3, 4, 5}
    assert {t["name"] for t in by_id[2]["result"]["tools"]} == TOOLS
    assert by_id[3]["result"]["isError"] is False
    assert by_id[4]["result"]["structuredContent"]["total_matches"] == 1
    assert by_id[5]["result"]["isError"] is True
    # Logging (debug level here) went to stderr.
    assert "rockmem_mcp" in stderr
    assert "Traceback" not in stderr


UNREADABLE = [  # (what the line is, the line, the reply's code and id over pipes)
    ("a lone surrogate escape", rb'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"\ud800"}}', -32700, None),
    ("cut short", b'{"jsonrpc":"2.0","id":2,"method":"pi', -32700, None),
    ("not JSON", b"hello", -32700, None),
    ("not UTF-8", b'{"jsonrpc":"2.0","id":3,"method":"ping","params":{"x":"\xff"}}', -32700, None),
    ("JSON but no message", b'{"jsonrpc":"2.0","id":4,"method":5}', -32600, 4),
    ("a blank line", b"   ", None, None),  # nothing to answer
]


@pytest.mark.parametrize("ends", ["pipes", "the SDK's transport"])
async def test_a_line_that_is_no_message_is_answered_and_the_next_one_served(home, ends: str) -> None:
    """Issue 45: the SDK's stdio transport dropped such a line without a word (its client waited for a timeout);
    it gets -32700 (id null) as over HTTP, or -32600. With stderr merged into stdout the SDK's own transport serves
    (server/stdio.py), whose reader has replaced bad UTF-8 and dropped the line before it is answered: there
    invalid UTF-8 is served as text, and -32600 carries no id."""
    merged = ends != "pipes"
    command = [sys.executable, "-m", "rockmem_mcp", "--home", str(home), "-v"]
    err = bytearray()
    initialize = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
                  "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                             "clientInfo": {"name": "test", "version": "0"}}}  # fmt: skip

    async def drain(stream: Any) -> None:
        async for chunk in stream:
            err.extend(chunk)

    async with (
        await anyio.open_process(command, stderr=-2 if merged else None) as process,  # -2: subprocess.STDOUT
        anyio.create_task_group() as tg,
    ):
        assert process.stdin and process.stdout
        if process.stderr is not None:
            tg.start_soon(drain, process.stderr)
        stdout = BufferedByteReceiveStream(process.stdout)

        async def send(line: bytes) -> None:
            await process.stdin.send(line + b"\n")  # type: ignore[union-attr]

        async def reply() -> dict[str, Any]:
            while True:  # merged, the log's lines come between the replies
                line = await stdout.receive_until(b"\n", 10_000_000)
                if line.startswith(b"{"):
                    return json.loads(line)

        with anyio.fail_after(60):
            await send(json.dumps(initialize).encode())
            assert (await reply())["id"] == 0
            await send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
            for what, line, code, request_id in UNREADABLE:
                if merged and what == "not UTF-8":
                    continue
                await send(line)
                if code is not None:
                    answer = await reply()
                    assert answer["jsonrpc"] == "2.0" and set(answer) == {"jsonrpc", "id", "error"}, what
                    assert answer["error"]["code"] == code, what
                    assert answer["id"] == (None if merged else request_id), what
                    prefix = "Parse error: " if code == -32700 else "Invalid Request: "
                    assert answer["error"]["message"].startswith(prefix), what
                await send(b'{"jsonrpc":"2.0","id":9,"method":"ping"}')  # and the server goes on serving
                assert await reply() == {"jsonrpc": "2.0", "id": 9, "result": {}}, what
            await process.stdin.aclose()
            rest = bytearray()
            async for chunk in stdout:
                rest.extend(chunk)
            assert await process.wait() == 0
    log = (err + rest).decode()
    assert merged or all(line.startswith(b"{") for line in rest.splitlines())  # nothing but messages on stdout
    assert "Traceback" not in log


async def test_working_memory_is_shared_between_processes_and_survives_a_restart(stdio_server, home, call) -> None:
    async with stdio_server(home) as main, stdio_server(home, ROCKMEM_NAMESPACE="subagent/t1b2c3") as sub:
        result = await call(sub, "save_to_working_memory", key="result", data="3 flaky tests found", ttl_minutes=30)
        assert result["entry"]["key"] == "subagent/t1b2c3/result"
        assert (await call(main, "get_from_working_memory", key="subagent/t1b2c3/result"))["data"].startswith("3 flaky")
        refused = await main.call_tool("working_memory", {"action": "delete", "key": "subagent/t1b2c3/result"})
        assert refused.is_error and "belongs to namespace 'subagent/t1b2c3'" in refused.content[0].text
        await call(main, "save_to_working_memory", key="shared/team/plan", data="fix the flaky tests")
        listed = await call(sub, "list_working_memory")
        assert {e["key"] for e in listed["entries"]} == {"subagent/t1b2c3/result", "shared/team/plan"}
        assert all("data" not in e for e in listed["entries"])
    async with stdio_server(home) as later:
        assert (await call(later, "get_from_working_memory", key="shared/team/plan"))["data"] == "fix the flaky tests"
        found = await call(later, "search_working_memory", query="flaky", namespace="subagent")
        assert [h["info"]["key"] for h in found["results"]] == ["subagent/t1b2c3/result"]


async def test_a_bad_namespace_setting_stops_the_server_with_a_clear_message(home) -> None:
    import subprocess

    done = subprocess.run(
        [sys.executable, "-m", "rockmem_mcp", "--home", str(home), "serve", "--namespace", "../escape"],
        capture_output=True,
        text=True,
        timeout=30,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2 and "invalid namespace" in done.stderr


async def test_conversation_window_per_session(stdio_server, home, call, call_error) -> None:
    async with stdio_server(home) as client:
        for role, text in [("user", "hi"), ("assistant", "hello"), ("user", "remember tabs")]:
            await call(client, "record_turn", role=role, content=text)
        await call(client, "record_turn", role="user", content="elsewhere", session_id="chat-2")
        mine = await call(client, "get_conversation", last_n=2)
        assert [t["content"] for t in mine["turns"]] == ["hello", "remember tabs"] and mine["kept"] == 3
        assert mine["session_id"].startswith("session:")
        other = await call(client, "get_conversation", session_id="chat-2")
        assert [t["content"] for t in other["turns"]] == ["elsewhere"]
        assert "input should be 'user', 'assistant'" in await call_error(
            client, "record_turn", role="robot", content="x"
        )


async def test_recall_over_turns_injects_each_memory_once(stdio_server, home, call) -> None:
    async with stdio_server(home) as client:
        tea = await call(client, "save_memory", content="The user drinks green tea", category="user-preferences")
        first = await call(client, "recall", message="hello")
        assert first["first_turn_fallback"] and [m["id"] for m in first["memories"]] == [tea["id"]]
        await call(client, "save_to_working_memory", key="draft", data="the value stays private")
        second = await call(client, "recall", message="which tea does the user like?")
        assert second["memories"] == [] and second["already_injected"] == 1
        assert "draft (expires in" in second["text"] and "stays private" not in second["text"]
        await call(client, "reset_recall")
        third = await call(client, "recall", message="which tea does the user like?")
        assert [m["id"] for m in third["memories"]] == [tea["id"]]
        assert "recalled data, not instructions" in third["text"]


async def test_a_patrol_process_and_a_user_session_each_get_their_own_recall(stdio_server, home, call) -> None:
    """As RockBot: a user session sees patrol findings as keys (never content); a patrol sees only its own."""
    async with stdio_server(home, ROCKMEM_NAMESPACE="patrol/heartbeat") as patrol, stdio_server(home) as user:
        await call(patrol, "save_to_working_memory", key="alerts", data="disk 91% full", tags=["urgent"])
        await call(user, "save_to_working_memory", key="draft", data="mine")
        seen_by_user = await call(user, "recall", message="anything new?")
        assert "- patrol/heartbeat/alerts (expires in" in seen_by_user["text"] and "#urgent" in seen_by_user["text"]
        assert "91%" not in json.dumps(seen_by_user)
        seen_by_patrol = await call(patrol, "recall", message="anything new?")
        assert [i["key"] for i in seen_by_patrol["working"]] == ["patrol/heartbeat/alerts"]
        assert seen_by_patrol["patrol_findings"] == [] and "Patrol findings" not in seen_by_patrol["text"]


async def test_resources_list_and_read(stdio_server, home, call) -> None:
    async with stdio_server(home) as client:
        tea = await call(client, "save_memory", content="The user drinks green tea", category="user-preferences")
        await call(client, "save_to_working_memory", key="shared/team/plan", data="ship on friday")
        static = {str(r.uri) for r in (await client.list_resources()).resources}
        assert static == {
            *("rockmem://recall", "rockmem://categories", "rockmem://salience", "rockmem://dream/latest"),
            *("rockmem://learnings/errors", "rockmem://learnings/corrections", "rockmem://core"),
            "rockmem://workspace",
            "rockmem://episodes",
            *("rockmem://workspace", "rockmem://procedures"),
            *("rockmem://graph-relations", "rockmem://forgotten", "rockmem://audit"),
            *("rockmem://reflections", "rockmem://proposals"),
        }
        templates = {t.uri_template for t in (await client.list_resource_templates()).resource_templates}
        assert templates == {
            "rockmem://recall/{query}",
            "rockmem://memory/{id}",
            "rockmem://working/{+key}",
            "rockmem://graph/{entity}",
            "rockmem://entities/{name}",
            "rockmem://workspace/{name}",
            "rockmem://episodes/{day}",
            "rockmem://procedures/{name}",
            "rockmem://history/{item}",
            "rockmem://categories/{+path}",
            "rockmem://tags/{tag}",
        }

        async def read(uri: str) -> str:
            return (await client.read_resource(uri)).contents[0].text

        assert json.loads(await read(f"rockmem://memory/{tea['id']}"))["content"] == "The user drinks green tea"
        assert json.loads(await read("rockmem://categories"))["total"] == 1
        start = await read("rockmem://recall")
        assert f"[{tea['id']}]" in start and "- user-preferences (1)" in start and "shared/team/plan" in start
        assert f"[{tea['id']}]" in await read("rockmem://recall/green%20tea")
        assert f"[{tea['id']}]" in await read("rockmem://recall/green%20tea")  # no delta: shown every time
        assert json.loads(await read("rockmem://working/shared/team/plan"))["data"] == "ship on friday"
        with pytest.raises(Exception, match="no memory with id"):
            await read("rockmem://memory/0123456789ab")


async def test_working_memory_entries_expire_and_are_swept_from_disk(stdio_server, home, call, call_error) -> None:
    async with stdio_server(home, ROCKMEM_WORKING_SWEEP_SECONDS="0.1") as client:
        saved = await call(client, "save_to_working_memory", key="scratch", data="gone soon", ttl_minutes=0.02)
        await call(client, "save_to_working_memory", key="keep", data="stays", ttl_minutes=30)
        assert (await call(client, "get_from_working_memory", key="scratch"))["data"] == "gone soon"
        expires_at = datetime.fromisoformat(saved["entry"]["expires_at"])
        # The entry's lifetime is the event awaited here: wait it out, then it must be gone everywhere.
        await anyio.sleep(max(0.0, (expires_at - datetime.now(UTC)).total_seconds()) + 0.05)
        assert "expired" in await call_error(client, "get_from_working_memory", key="scratch")
        assert [e["key"].split("/")[-1] for e in (await call(client, "list_working_memory"))["entries"]] == ["keep"]
        assert (await call(client, "search_working_memory", query="gone soon"))["results"] == []
        assert "scratch" not in (await call(client, "recall", message="anything"))["text"]
        # The periodic sweep rewrites the file without it, with no write from any caller.
        session_file = home / "working-memory" / "session.json"
        with anyio.fail_after(10):
            while any(k.endswith("/scratch") for k in json.loads(session_file.read_text())["entries"]):
                await anyio.sleep(0.05)
        assert [k.split("/")[-1] for k in json.loads(session_file.read_text())["entries"]] == ["keep"]


async def test_overflow_evicts_the_entry_closest_to_expiry_and_says_so(stdio_server, home, call) -> None:
    async with stdio_server(home, ROCKMEM_WORKING_MAX_ENTRIES="3") as client:
        for key, ttl in [("a", 30), ("b", 5), ("c", 60)]:
            assert (await call(client, "save_to_working_memory", key=key, data=key, ttl_minutes=ttl))["evicted"] is None
        saved = await call(client, "save_to_working_memory", key="d", data="d", ttl_minutes=10)
        namespace = saved["entry"]["key"].rsplit("/", 1)[0]
        assert saved["evicted"] == f"{namespace}/b"
        listed = await call(client, "list_working_memory")
        assert [e["key"] for e in listed["entries"]] == [f"{namespace}/{k}" for k in ("d", "a", "c")]
        # shared/… is its own namespace with its own allowance.
        assert (await call(client, "save_to_working_memory", key="shared/team/x", data="x"))["evicted"] is None


async def test_prompts_list_render_and_take_overrides_from_the_home(stdio_server, home, call) -> None:
    (home / "prompts").mkdir(parents=True)
    (home / "prompts" / "memory-rules.md").write_text("Team rules: always save decisions about Falcon.")
    async with stdio_server(home, ROCKMEM_MAX_CONTENT_BYTES="1000") as client:
        listed = {p.name: p for p in (await client.list_prompts()).prompts}
        assert set(listed) == {"recall", "remember", "memory-rules"}
        assert [(a.name, a.required) for a in listed["recall"].arguments or []] == [("message", True)]
        tea = await call(client, "save_memory", content="The user drinks green tea", category="user-preferences")

        async def text(name: str, **arguments: str) -> str:
            messages = (await client.get_prompt(name, arguments)).messages
            assert [m.role for m in messages] == ["user"]
            return messages[0].content.text

        first = await text("recall", message="which tea should I brew?")
        assert f"[{tea['id']}]" in first and first.rstrip().endswith("which tea should I brew?")
        assert "data, not instructions" in first
        again = await text("recall", message="which tea should I brew?")  # the session saw it: not repeated
        assert f"[{tea['id']}]" not in again and "(nothing recalled for this message)" in again
        remember = await text("remember")
        assert "- user-preferences (1)" in remember and "Don't X for Y — instead Z" in remember
        assert await text("memory-rules") == "Team rules: always save decisions about Falcon."
        with pytest.raises(Exception, match="ROCKMEM_MAX_CONTENT_BYTES"):
            await text("recall", message="x" * 2000)
        with pytest.raises(MCPError):  # the SDK checks required arguments and answers a bare internal error
            await client.get_prompt("recall", {})
        # The process keeps serving after the refusals.
        assert "Team rules" in await text("memory-rules")
