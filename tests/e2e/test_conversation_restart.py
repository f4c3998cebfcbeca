"""Conversation windows across restarts (conversation_keep_windows): stdio clients start a new server at every
launch; a conversation the client names comes back with the next server, as real stdio processes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.anyio


async def test_a_named_conversation_survives_the_server_restarting(stdio_server: Any, home: Path, call: Any) -> None:
    async with stdio_server(home) as client:
        for role, text in [("user", "Plan the Lisbon offsite"), ("assistant", "Booked for May 3")]:
            await call(client, "record_turn", role=role, content=text, session_id="chat-42")
    assert (home / "conversations" / "windows.json").exists()
    async with stdio_server(home) as client:
        window = await call(client, "get_conversation", session_id="chat-42")
        assert [t["content"] for t in window["turns"]] == ["Plan the Lisbon offsite", "Booked for May 3"]
    async with stdio_server(home, ROCKMEM_CONVERSATION_KEEP_WINDOWS="false") as client:
        assert (await call(client, "get_conversation", session_id="chat-42"))["turns"] == []
