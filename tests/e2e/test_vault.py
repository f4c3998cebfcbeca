"""The pinned vault over stdio: pin with update_memory, then a delete is refused until confirmed."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.anyio


async def test_pin_through_update_then_delete_needs_confirmation(stdio_server, home, call, call_error) -> None:
    async with stdio_server(home) as client:
        saved = await call(client, "save_memory", content="The user's passport is in the blue folder")
        assert saved["pinned"] is False
        pinned = await call(client, "update_memory", id=saved["id"], pinned=True)
        assert pinned["pinned"] is True and (await call(client, "get_memory", id=saved["id"]))["pinned"] is True
        found = await call(client, "search_memory", query="passport")
        assert found["results"][0]["salience"] == 1.0
        refused = await call_error(client, "delete_memory", id=saved["id"], permanent=True)
        assert "pinned" in refused and "confirm_pinned=true" in refused
        assert (await call(client, "get_memory", id=saved["id"]))["archived_at"] is None
        deleted = await call(client, "delete_memory", id=saved["id"], permanent=True, confirm_pinned=True)
        assert deleted["permanent"] is True
        assert "no memory with id" in await call_error(client, "get_memory", id=saved["id"])
