"""resources/subscribe over stdio (server/subscriptions.py): a client subscribed to a memory or core memory is
told when what it reads there changes, and not otherwise; unsubscribing ends it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp_types import ResourceUpdatedNotification

# The SDK marks resources/subscribe deprecated: 2026-07-28 replaced it; clients of earlier versions still use it.
pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore:resources/(un)?subscribe is removed")]


async def test_subscribed_clients_hear_of_changes_and_only_of_changes(home: Path, tmp_path: Path) -> None:
    send, updates = anyio.create_memory_object_stream[str](100)

    async def on_message(message: Any) -> None:
        note = getattr(message, "root", message)
        if isinstance(note, ResourceUpdatedNotification):
            await send.send(str(note.params.uri))

    async def next_update() -> str:
        with anyio.fail_after(30):
            return await updates.receive()

    def nothing_pending() -> bool:
        return updates.statistics().current_buffer_used == 0

    params = StdioServerParameters(
        command=sys.executable, args=["-m", "rockmem_mcp", "--home", str(home)],
        env={"ROCKMEM_EMBEDDING_MODEL": "off"}, cwd=str(tmp_path),
    )  # fmt: skip
    with (tmp_path / "server.stderr").open("w") as errlog:
        # The handshake-era protocol (resources/subscribe); 2026-07-28 clients use subscriptions/listen.
        async with Client(stdio_client(params, errlog=errlog), mode="legacy", message_handler=on_message) as client:
            assert client.server_capabilities.resources.subscribe is True
            kept = (await client.call_tool("save_memory", {"content": "Ada drinks tea"})).structured_content["id"]
            other = (await client.call_tool("save_memory", {"content": "Bob drinks coffee"})).structured_content["id"]

            async def append_to_core(text: str) -> None:
                version = (await client.call_tool("core_memory", {"action": "read"})).structured_content["version"]
                edit = {"action": "append", "block": "Persona", "text": text, "version": version}
                result = await client.call_tool("core_memory", edit)
                assert not result.is_error, result.content[0].text

            await client.subscribe_resource(f"rockmem://memory/{kept}")
            await client.subscribe_resource("rockmem://core")

            # A change elsewhere says nothing about these (the notification would come before the call's answer).
            await client.call_tool("update_memory", {"id": other, "content": "Bob drinks green tea"})
            await client.call_tool("search_memory", {"query": "tea"})
            assert nothing_pending()

            await client.call_tool("update_memory", {"id": kept, "content": "Ada drinks tea with lemon"})
            assert await next_update() == f"rockmem://memory/{kept}"
            await append_to_core("Speaks briefly.")
            assert await next_update() == "rockmem://core"

            await client.unsubscribe_resource("rockmem://core")
            await append_to_core("Likes lists.")
            await client.call_tool("delete_memory", {"id": kept, "permanent": True})
            assert await next_update() == f"rockmem://memory/{kept}"  # deleted: that is a change too
            assert nothing_pending()  # and nothing for core memory after unsubscribing

            # An address that holds nothing yet can be followed: its appearing is a change.
            await client.subscribe_resource("rockmem://workspace/SOUL.md")
            await client.call_tool("search_memory", {"query": "tea"})
            assert nothing_pending()
            (home / "SOUL.md").write_text("# Soul\nCalm.\n")
            await client.call_tool("search_memory", {"query": "tea"})  # a call: subscriptions are checked after it
            assert await next_update() == "rockmem://workspace/SOUL.md"


async def test_a_2026_07_28_listen_stream_hears_of_its_resources_changes(home: Path, tmp_path: Path) -> None:
    """subscriptions/listen (2026-07-28): the stream names its resources; a change to one is an event on the
    stream, a change elsewhere is not, and closing the stream stops the watching."""
    from mcp.client.subscriptions import ResourceUpdated

    params = StdioServerParameters(
        command=sys.executable, args=["-m", "rockmem_mcp", "--home", str(home)],
        env={"ROCKMEM_EMBEDDING_MODEL": "off"}, cwd=str(tmp_path),
    )  # fmt: skip
    with (tmp_path / "server.stderr").open("w") as errlog:
        async with Client(stdio_client(params, errlog=errlog)) as client:
            kept = (await client.call_tool("save_memory", {"content": "Ada drinks tea"})).structured_content["id"]
            other = (await client.call_tool("save_memory", {"content": "Bob drinks coffee"})).structured_content["id"]
            watched = [f"rockmem://memory/{kept}", "rockmem://core"]
            async with client.listen(resource_subscriptions=watched) as stream:
                assert stream.honored.resource_subscriptions == watched
                events = stream.__aiter__()
                await client.call_tool("update_memory", {"id": other, "content": "Bob drinks green tea"})
                await client.call_tool("update_memory", {"id": kept, "content": "Ada drinks tea with lemon"})
                with anyio.fail_after(30):
                    event = await events.__anext__()
                assert event == ResourceUpdated(uri=f"rockmem://memory/{kept}")  # not Bob's: his is not watched

                version = (await client.call_tool("core_memory", {"action": "read"})).structured_content["version"]
                edit = {"action": "append", "block": "Persona", "text": "Likes brevity", "version": version}
                assert not (await client.call_tool("core_memory", edit)).is_error
                with anyio.fail_after(30):
                    assert await events.__anext__() == ResourceUpdated(uri="rockmem://core")
