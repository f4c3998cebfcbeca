"""Hybrid search in the real server process: an OpenAI-compatible endpoint on loopback or the local model,
paraphrases found, and every way the endpoint can fail leaving search working on BM25 (logged once)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from rockmem_mcp.search.vectors import STAMP_BYTES
from tests.embedding_server import (
    SHARED_MODEL,
    SHARED_MODEL_MISSING,
    EmbeddingServer,
    concept_vectors,
    local_embedder,
    model_reply,
)

pytestmark = pytest.mark.anyio

FAILED = "search ranks by BM25 alone"
CAT = "Whiskerino, the tabby, naps on the windowsill every afternoon"
OTHERS = ("The staging deploy needs the VPN turned on first", "Quarterly taxes are due on the fifteenth")


@pytest.fixture(scope="module")
def embed() -> Any:
    return local_embedder()  # the shared model when present, else bag-of-words vectors


@pytest.fixture
def endpoint(embed: Any) -> Iterator[EmbeddingServer]:
    server = EmbeddingServer()
    server.replies = [model_reply(embed)]
    yield server
    server.close()


def endpoint_env(server: EmbeddingServer, **extra: str) -> dict[str, str]:
    return {"ROCKMEM_EMBEDDING_ENDPOINT": server.url, "ROCKMEM_EMBEDDING_MODEL": "m2v-test", **extra}


async def wait_until_embedded(client: Any, call: Any) -> None:
    """Saves return at once; vectors follow in the server's background. Poll its count (another process)."""
    with anyio.fail_after(30):
        while (await call(client, "search_memory", query="anything", mode="bm25"))["unembedded"]:
            await anyio.sleep(0.05)


async def save_the_cat_and_others(client: Any, call: Any) -> dict[str, Any]:
    """CAT and OTHERS saved and embedded; "my cat" shares no word with any of them. Returns CAT's memory."""
    cat = await call(client, "save_memory", content=CAT)
    for text in OTHERS:
        await call(client, "save_memory", content=text)
    await wait_until_embedded(client, call)
    assert (await call(client, "search_memory", query="my cat", mode="bm25"))["results"] == []
    return cat


def ids(found: dict[str, Any]) -> list[str]:
    return [hit["entry"]["id"] for hit in found["results"]]


@pytest.mark.skipif(not SHARED_MODEL.exists(), reason=SHARED_MODEL_MISSING)
@pytest.mark.parametrize("provider", ["endpoint", "local"])
async def test_hybrid_finds_a_paraphrase_bm25_misses(stdio_server, home, call, endpoint, provider) -> None:
    env = endpoint_env(endpoint) if provider == "endpoint" else {"ROCKMEM_EMBEDDING_MODEL": str(SHARED_MODEL)}
    async with stdio_server(home, **env) as client:
        cat = await save_the_cat_and_others(client, call)
        hybrid = await call(client, "search_memory", query="my cat")
        assert hybrid["mode"] == "hybrid" and ids(hybrid) == [cat["id"]]
        vector = await call(client, "search_memory", query="my cat", mode="vector", limit=1)
        assert ids(vector) == [cat["id"]]
    if provider == "endpoint":
        assert endpoint.requests and all(body["model"] == "m2v-test" for body, _ in endpoint.requests)
    assert (home / ".embeddings" / f"{cat['id']}.bin").stat().st_size == STAMP_BYTES + 4 * 256


async def test_with_no_settings_the_server_searches_hybrid_with_the_bundled_model(stdio_server, home, call) -> None:
    """Issues 24 and 41: no embedding setting and no network, yet a paraphrase is found: the bundled transformer
    embeds in the background; ROCKMEM_EMBEDDING_MODEL=off gives keywords alone on the same home."""
    question = "When do I have to pay the IRS?"
    async with stdio_server(home, ROCKMEM_EMBEDDING_MODEL=None) as client:  # the product's default: unset
        taxes = await call(client, "save_memory", content="Quarterly taxes are due on the fifteenth")
        await call(client, "save_memory", content="The staging deploy needs the VPN turned on first")
        await wait_until_embedded(client, call)
        assert (await call(client, "search_memory", query=question, mode="bm25"))["results"] == []
        hybrid = await call(client, "search_memory", query=question)
        assert hybrid["mode"] == "hybrid" and ids(hybrid)[:1] == [taxes["id"]]
    assert (home / ".embeddings" / f"{taxes['id']}.bin").stat().st_size == STAMP_BYTES + 4 * 384
    async with stdio_server(home, ROCKMEM_EMBEDDING_MODEL="off") as keywords_only:
        found = await call(keywords_only, "search_memory", query=question)
        assert found["mode"] == "bm25" and found["results"] == []


@pytest.mark.parametrize("failure", ["down", "http-500", "timeout", "wrong-dimension"])
async def test_endpoint_failures_leave_search_on_bm25_and_are_logged_once(
    stdio_server, home, call, endpoint, embed, failure
) -> None:
    env = endpoint_env(endpoint, ROCKMEM_EMBEDDING_QUERY_TIMEOUT_S="0.5")
    async with stdio_server(home, **env) as client:
        saved = await call(client, "save_memory", content="The staging deploy needs the VPN turned on first")
        await wait_until_embedded(client, call)
        assert (await call(client, "search_memory", query="staging deploy"))["mode"] == "hybrid"
        if failure == "down":
            endpoint.close()
        elif failure == "http-500":
            endpoint.replies = [lambda body: (500, "model crashed")]
        elif failure == "timeout":
            endpoint.replies = [lambda body: (0, "")]  # never answers
        else:
            endpoint.replies = [model_reply(embed, dim=8)]
        for _ in range(3):
            found = await call(client, "search_memory", query="staging deploy")
            assert found["mode"] == "bm25" and ids(found) == [saved["id"]]
        error = await client.call_tool("search_memory", {"query": "staging deploy", "mode": "vector"})
        assert error.is_error and "mode 'vector' needs embeddings" in error.content[0].text
        # Saves keep working too.
        await call(client, "save_memory", content="Saved while the endpoint is failing")
    log = Path(stdio_server.logs[-1]).read_text()
    assert log.count(FAILED) == 1, log
    expected = {"down": "unreachable", "http-500": "HTTP 500", "timeout": "timed out", "wrong-dimension": "8-dim"}
    assert expected[failure] in log


async def test_working_memory_search_ranks_hybrid_and_saves_never_wait_for_the_endpoint(
    stdio_server, home, call, endpoint
) -> None:
    """Seed 000: with embeddings, working memory ranks like long-term memory (here a paraphrase); its values
    are embedded at query time, so a hanging endpoint slows no save and costs a search only its vectors."""
    endpoint.replies = [model_reply(concept_vectors)]
    async with stdio_server(home, **endpoint_env(endpoint, ROCKMEM_EMBEDDING_QUERY_TIMEOUT_S="0.5")) as client:
        await call(client, "save_to_working_memory", key="shared/pets/notes", data=CAT, ttl_minutes=30)
        for i, text in enumerate(OTHERS):
            await call(client, "save_to_working_memory", key=f"shared/notes/note-{i}", data=text, ttl_minutes=30)
        found = await call(client, "search_working_memory", query="my cat")
        assert [hit["info"]["key"] for hit in found["results"]] == ["shared/pets/notes"]
        endpoint.replies = [lambda body: (0, "")]  # the endpoint now never answers
        with anyio.fail_after(2):
            await call(client, "save_to_working_memory", key="shared/pets/late", data="a tabby seen later")
        with anyio.fail_after(5):
            found = await call(client, "search_working_memory", query="tabby")
        assert {hit["info"]["key"] for hit in found["results"]} == {"shared/pets/notes", "shared/pets/late"}
    async with stdio_server(home, ROCKMEM_EMBEDDING_MODEL="off") as keywords_only:
        assert (await call(keywords_only, "search_working_memory", query="my cat"))["results"] == []
