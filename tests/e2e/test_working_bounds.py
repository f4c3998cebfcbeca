"""Working memory's byte bound per namespace, as clients see it over stdio (issue 45): two sessions on one home,
one filling its namespace with large values, the other's entries untouched."""

from __future__ import annotations

import contextlib

import pytest

pytestmark = pytest.mark.anyio

ENV = {"ROCKMEM_WORKING_MAX_NAMESPACE_BYTES": "3000"}


async def test_a_full_namespace_evicts_its_own_entries_and_refuses_a_value_over_the_bound(
    stdio_server, home, call, call_error
) -> None:
    async with contextlib.AsyncExitStack() as stack:
        a = await stack.enter_async_context(stdio_server(home, **ENV))
        b = await stack.enter_async_context(stdio_server(home, **ENV))
        note = await call(b, "save_to_working_memory", key="note", data="b's note", ttl_minutes=1)
        b_key = note["entry"]["key"]
        saved = [
            await call(a, "save_to_working_memory", key=f"chunk-{n}", data=str(n) * 1_000, ttl_minutes=10 + n)
            for n in range(5)
        ]
        namespace = saved[0]["entry"]["key"].rsplit("/", 1)[0]
        assert namespace != b_key.rsplit("/", 1)[0]  # two sessions, two namespaces under one session.json
        assert [s["evicted"] for s in saved] == [None, None, None, f"{namespace}/chunk-0", f"{namespace}/chunk-1"]
        assert saved[4]["evicted_keys"] == [f"{namespace}/chunk-1"]
        listed = (await call(a, "list_working_memory"))["entries"]
        assert [e["key"] for e in listed] == [f"{namespace}/chunk-{n}" for n in (2, 3, 4)]
        assert sum(e["size"] for e in listed) == 3_000

        error = await call_error(a, "save_to_working_memory", key="huge", data="h" * 3_001)
        assert "ROCKMEM_WORKING_MAX_NAMESPACE_BYTES" in error and "limit is 3000" in error
        assert len((await call(a, "list_working_memory"))["entries"]) == 3  # the refusal evicted nothing

        # The other session's entry, closer to expiry than any of a's, was never a candidate.
        assert (await call(b, "get_from_working_memory", key="note"))["data"] == "b's note"
        assert [e["key"] for e in (await call(b, "list_working_memory"))["entries"]] == [b_key]
        assert (await call(a, "get_from_working_memory", key=b_key))["data"] == "b's note"
