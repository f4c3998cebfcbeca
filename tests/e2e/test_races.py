"""Two real server processes racing on the same memories (issue 17, item 5).

For each memory one process deletes (or archives) it while the other updates it at the same moment; or both
move it to different categories at once. Whatever order the calls land in, an acknowledged delete stays
deleted, an acknowledged archive stays archived, and a memory moved twice at once has exactly one file.
"""

from __future__ import annotations

from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.e2e.disk_checks import temp_files

pytestmark = pytest.mark.anyio

ROUNDS = 60  # memories raced per scenario; each is one race


async def _both(first: Any, second: Any) -> tuple[Any, Any]:
    """Start both calls at the same moment; their results (an error result counts as a result)."""
    results: list[Any] = [None, None]

    async def run(i: int, call: Any) -> None:
        results[i] = await call()

    async with anyio.create_task_group() as tg:
        tg.start_soon(run, 0, first)
        tg.start_soon(run, 1, second)
    return results[0], results[1]


def _files_of(home: Path, entry_id: str) -> list[Path]:
    return sorted(p.relative_to(home) for p in (home / "memory").rglob(f"{entry_id}.json"))


async def _save_all(client: Any, call: Any, count: int, category: str) -> list[str]:
    return [
        (await call(client, "save_memory", content=f"race subject {k} zq{k}x", category=category))["id"]
        for k in range(count)
    ]


async def test_deletes_and_archives_racing_updates_from_another_process_stay(stdio_server, home, call) -> None:
    async with AsyncExitStack() as stack:
        a = await stack.enter_async_context(stdio_server(home))
        b = await stack.enter_async_context(stdio_server(home))
        ids = await _save_all(a, call, ROUNDS, "race")
        await b.call_tool("search_memory", {"query": "race subject", "limit": 100})  # B has read them all
        for k, entry_id in enumerate(ids):
            permanent = k % 2 == 0
            deleted, _ = await _both(
                lambda i=entry_id, p=permanent: a.call_tool("delete_memory", {"id": i, "permanent": p}),
                lambda i=entry_id, k=k: b.call_tool("update_memory", {"id": i, "content": f"race updated zq{k}x"}),
            )
            assert not deleted.is_error, deleted.content[0].text
        for k, entry_id in enumerate(ids):
            if k % 2 == 0:
                assert _files_of(home, entry_id) == [], f"memory {k} came back after its delete"
            for client in (a, b):
                got = await client.call_tool("get_memory", {"id": entry_id})
                if k % 2 == 0:
                    assert got.is_error, f"memory {k} came back after its delete"
                else:
                    assert got.structured_content["archived_at"] is not None, f"memory {k} lost its archive"
        for client in (a, b):
            hits = (await call(client, "search_memory", query="race subject updated", limit=100))["results"]
            assert hits == []
    assert temp_files(home) == []


async def test_two_processes_moving_one_memory_at_once_leave_exactly_one_file(stdio_server, home, call) -> None:
    async with AsyncExitStack() as stack:
        a = await stack.enter_async_context(stdio_server(home))
        b = await stack.enter_async_context(stdio_server(home))
        ids = await _save_all(a, call, ROUNDS, "start")
        await b.call_tool("search_memory", {"query": "race subject", "limit": 100})
        for entry_id in ids:
            moved_a, moved_b = await _both(
                lambda i=entry_id: a.call_tool("update_memory", {"id": i, "category": "left"}),
                lambda i=entry_id: b.call_tool("update_memory", {"id": i, "category": "right"}),
            )
            assert not moved_a.is_error and not moved_b.is_error
        for k, entry_id in enumerate(ids):
            files = _files_of(home, entry_id)
            assert len(files) == 1, f"memory {k} has {len(files)} files: {files}"
            category = files[0].parent.name
            for client in (a, b):
                assert (await call(client, "get_memory", id=entry_id))["category"] == category
    assert temp_files(home) == []
