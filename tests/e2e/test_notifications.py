"""Notifications over stdio: log records for a client that set a level (server/client_logging.py), and a
dream's progress for a client that gave a progress token (server/tools.progress_of)"""

from __future__ import annotations

import json
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
            assert record.level == "info" and record.logger == "rockmem_mcp.consolidation.dream"
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


async def test_a_dream_through_a_language_model_reports_each_batch(home: Path, tmp_path: Path) -> None:
    """The model's passes take seconds per batch: a client with a progress token hears of each batch answered
    (a step per item), then of the plan applied; the count only grows."""
    from tests.embedding_server import EmbeddingServer

    def answer(body: dict) -> tuple[int, object]:
        message = {"role": "assistant", "content": json.dumps({})}  # nothing to change: a plain plan
        return 200, {"choices": [{"index": 0, "message": message}], "usage": {"total_tokens": 50}}

    model = EmbeddingServer()
    model.replies = [answer]
    steps: list[tuple[float, float | None, str | None]] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        steps.append((done, total, message))

    plain = {"ROCKMEM_EMBEDDING_MODEL": "off"}
    with_model = plain | {"ROCKMEM_LLM_ENDPOINT": model.url, "ROCKMEM_LLM_MODEL": "dreamer-1",
                          "ROCKMEM_DREAM_BATCH_SIZE": "2", "ROCKMEM_LLM_RETRIES": "0"}  # fmt: skip
    try:
        with (tmp_path / "server.stderr").open("w") as errlog:
            # Saved first without a model: with one, each save is also sent to it to be enriched.
            params = StdioServerParameters(command=sys.executable, args=["-m", "rockmem_mcp", "--home", str(home)],
                                           env=plain, cwd=str(tmp_path))  # fmt: skip
            async with Client(stdio_client(params, errlog=errlog)) as client:
                for text in ("Ada drinks tea", "Bob likes maps", "Cy rides a bike", "Di owns a boat", "Ed sings"):
                    await client.call_tool("save_memory", {"content": text})
            params = StdioServerParameters(command=sys.executable, args=["-m", "rockmem_mcp", "--home", str(home)],
                                           env=with_model, cwd=str(tmp_path))  # fmt: skip
            async with Client(stdio_client(params, errlog=errlog)) as client:
                result = await client.call_tool(
                    "dream", {"mode": "auto", "dream_pass": "consolidation"}, progress_callback=on_progress
                )
                assert not result.is_error and result.structured_content["mode"] == "llm"
    finally:
        model.close()
    dream_requests = len(model.requests)
    assert dream_requests == 3  # 5 memories in batches of 2
    assert [(done, total) for done, total, _ in steps] == [(2, 6), (4, 6), (5, 6), (6, 6)], steps
    assert steps[0][2] == "consolidation: the model answered 2 items"
    assert steps[-1][2] == "applied: 0 changes, 0 refused"


async def test_a_reflection_reports_its_phases_to_a_client_that_asks(home: Path, tmp_path: Path) -> None:
    steps: list[tuple[float, float | None, str | None]] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        steps.append((done, total, message))

    params = StdioServerParameters(
        command=sys.executable, args=["-m", "rockmem_mcp", "--home", str(home)],
        env={"ROCKMEM_EMBEDDING_MODEL": "off", "ROCKMEM_TOOLSETS": "all"}, cwd=str(tmp_path),
    )  # fmt: skip
    with (tmp_path / "server.stderr").open("w") as errlog:
        async with Client(stdio_client(params, errlog=errlog)) as client:
            for text in ("Ada drinks tea", "Ada drinks tea"):
                await client.call_tool("save_memory", {"content": text})
            result = await client.call_tool("reflect", {"action": "run"}, progress_callback=on_progress)
            assert not result.is_error, result.content
    assert [(done, total) for done, total, _ in steps] == [(1, 3), (2, 3), (3, 3)]
    assert steps[0][2].startswith("surveyed: ") and steps[1][2] == "consolidation planned"
    assert steps[2][2] == "1 actions proposed"
