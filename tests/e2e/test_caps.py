"""Every string that reaches disk is capped, as a client sees it over stdio: a delete reason, a dream plan
(its item counts and reasons), a working-memory key that names only a namespace."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.anyio


async def test_over_the_caps_a_call_is_refused_with_the_limit_and_nothing_is_written(
    stdio_server, home: Path, call, call_error
) -> None:
    async with stdio_server(home) as client:
        kept = await call(client, "save_memory", content="Alice prefers tea", category="people")
        error = await call_error(client, "delete_memory", id=kept["id"], reason="because " * 1_000)
        assert "reason is 8000 bytes; the limit is 4000" in error
        assert (await call(client, "get_memory", id=kept["id"]))["archived_at"] is None

        too_many = {"archives": [{"id": kept["id"], "reason": "noise"}] * 1_001}
        assert "at most 1000 items" in await call_error(client, "apply_dream", plan=too_many)
        long_reason = {"archives": [{"id": kept["id"], "reason": "r" * 501}]}
        assert "at most 500 characters" in await call_error(client, "apply_dream", plan=long_reason)
        assert (await call(client, "get_memory", id=kept["id"]))["archived_at"] is None

        for key in ("shared/topic", "shared", "session/abc"):
            error = await call_error(client, "save_to_working_memory", key=key, data="d")
            assert "names a namespace, not an entry" in error, error
        assert (await call(client, "list_working_memory", namespace="shared"))["entries"] == []
        on_disk = home / "working-memory" / "shared.json"
        assert not on_disk.exists() or json.loads(on_disk.read_text())["entries"] == {}
