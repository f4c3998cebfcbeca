"""What waits for the server's first answer: the knowledge graph's load (a tool that needs it waits for all of it), the
garbage collector paused for the start."""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable
from functools import partial
from typing import Any

import anyio
import anyio.to_thread
import pytest
from mcp import Client

from rockmem_mcp import collector
from rockmem_mcp.config import Settings
from rockmem_mcp.graph.service import GraphService
from rockmem_mcp.home.stores import Deferred, Stores, open_stores
from rockmem_mcp.server.app import build_server

pytestmark = pytest.mark.anyio
ENTITIES = 30


async def test_first_answer_before_the_graph_loads_and_graph_tools_see_all_of_it(
    settings_for: Callable[..., Settings],
) -> None:
    settings = settings_for()
    graph = GraphService(settings)
    graph.add_triples([{"subject": f"person {i}", "predicate": "knows", "object": "Ada"} for i in range(ENTITIES - 1)])
    graph.close()
    loading, release = threading.Event(), threading.Event()

    def slow_graph() -> GraphService:  # a graph big enough to take a while: it loads once released
        loading.set()
        release.wait()
        return GraphService(settings)

    wanted = threading.Event()

    class Watched(Deferred[GraphService]):
        def result(self) -> GraphService:
            wanted.set()
            return super().result()

    deferred: list[Deferred[GraphService]] = []

    def opener() -> Stores:
        deferred.append(Watched(slow_graph, "test-graph"))
        return open_stores(settings)._replace(graph=deferred[0])  # its own graph is never started

    async with Client(build_server(settings, opener)) as client:
        assert not deferred[0].started  # initialized, and the graph has not started loading
        first = await client.call_tool("search_memory", {"query": "anything"})
        assert not first.is_error
        assert await anyio.to_thread.run_sync(partial(loading.wait, 10))  # the first answer started it
        found: list[Any] = []
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: _call(client, found))
            assert await anyio.to_thread.run_sync(partial(wanted.wait, 10))  # the tool asked for the graph...
            assert not found  # ...and waits: no answer from a graph still loading
            release.set()
        assert not found[0].is_error
        assert found[0].structured_content["result"]["total_matches"] == ENTITIES


async def _call(client: Client, found: list[Any]) -> None:
    found.append(await client.call_tool("graph", {"action": "find", "limit": 200}))


async def test_the_collector_paused_for_the_start_resumes_once_idle_after_the_first_answer(
    settings_for: Callable[..., Settings],
) -> None:
    """The command line pauses the garbage collector for the start (rockmem_mcp/collector.py); the server resumes it
    once idle after its first answer, having collected what the start left."""
    settings = settings_for()
    timer = collector.pause()
    assert timer is not None
    try:
        async with Client(build_server(settings)) as client:
            assert await client.list_tools()
            assert collector.is_paused()  # listing is no call: the start goes on
            assert not (await client.call_tool("search_memory", {"query": "anything"})).is_error
            settling = [thread for thread in threading.enumerate() if thread.name == "rockmem-collector"]
            for thread in settling:
                await anyio.to_thread.run_sync(partial(thread.join, 30))
            assert gc.isenabled() and not collector.is_paused()
    finally:
        collector.resume()
