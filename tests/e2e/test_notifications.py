"""Notifications over stdio: log records for a client that set a level (server/client_logging.py), and a
dream's progress for a client that gave a progress token (server/tools.progress_of)"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore:The logging capability is deprecated")]


async def test_a_client_that_sets_a_level_gets_the_servers_log_records_from_it_up(home: Path, tmp_path: Path) -> None:
    send, received = anyio.create_memory_object_stream[Any](100)

    async def on_log(params: Any) -> None:
        await send.send(params)

    params = StdioServerParameters(
        command=sys.executable, args=["-m", "rockmem_mcp", "--home", str(home)],
        env={"ROCKMEM_EMBEDDING_MODEL": "off", "ROCKMEM_LOG_LEVEL": "INFO"}, cwd=str(tmp_path),
    )  # fmt: skip
    with (tmp_path / "server.stderr").open("w") as errlog:
        async with Client(stdio_client(params, errlog=errlog), mode="legacy", logging_callback=on_log) as client:
            assert client.server_capabilities.logging is not None
            await client.call_tool("save_memory", {"content": "Ada drinks tea"})

            await client.set_logging_level("error")  # the dream logs its summary at info: not sent
            assert not (await client.call_tool("dream", {"mode": "deterministic"})).is_error
            assert received.statistics().current_buffer_used == 0

            await client.set_logging_level("info")
            assert not (await client.call_tool("dream", {"mode": "deterministic"})).is_error
            with anyio.fail_after(30):
                record = await received.receive()
            assert record.level == "info" and record.logger == "rockmem_mcp.services.dream"
            assert record.data["message"].startswith("dream ")
            await client.call_tool("search_memory", {"query": "tea"})  # a round trip: anything in flight is here now
            assert received.statistics().current_buffer_used == 0  # one dream at info, one message: none at error


async def test_a_dream_reports_its_progress_to_a_client_that_asks(home: Path, tmp_path: Path) -> None:
    """notifications/progress for a client that gives a progress token (the SDK's progress_callback)."""
    steps: list[tuple[float, float | None, str | None]] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        steps.append((done, total, message))

    params = StdioServerParameters(
        command=sys.executable, args=["-m", "rockmem_mcp", "--home", str(home)],
        env={"ROCKMEM_EMBEDDING_MODEL": "off"}, cwd=str(tmp_path),
    )  # fmt: skip
    with (tmp_path / "server.stderr").open("w") as errlog:
        async with Client(stdio_client(params, errlog=errlog)) as client:
            for text in ("Ada drinks tea", "Ada drinks tea", "Bob likes maps"):
                await client.call_tool("save_memory", {"content": text})
            result = await client.call_tool("dream", {"mode": "deterministic"}, progress_callback=on_progress)
            assert not result.is_error
            assert "merge" in result.structured_content["report"]["summary"]
            plain = await client.call_tool("dream", {"mode": "deterministic", "dry_run": True})  # no token
            assert not plain.is_error
    assert [(done, total) for done, total, _ in steps] == [(i, 6) for i in range(1, 7)]
    assert steps[0][2] == "read 3 memories" and steps[1][2] == "found 1 group(s) of duplicates"
