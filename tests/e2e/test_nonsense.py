"""Nonsense never matches (issue 41): with the product's default model, a message of words the model does not
know gets no vector score, so search finds nothing and recall's first-turn fallback fires."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from rockmem_mcp.search.rank import HYBRID_MIN_SIMILARITY

pytestmark = pytest.mark.anyio

MEMORIES = (
    "Wow, that is great!",
    "I adopted a tabby cat named Whiskerino",
    "We moved the billing service to PostgreSQL 15",
    "Melanie painted a lake sunrise last year",
)


async def saved_and_embedded(client: Any, call: Any) -> None:
    for text in MEMORIES:
        await call(client, "save_memory", content=text)
    with anyio.fail_after(30):  # vectors follow in the server's background: poll its count (another process)
        while (await call(client, "search_memory", query="anything", mode="bm25"))["unembedded"]:
            await anyio.sleep(0.05)


async def test_a_message_of_unknown_words_matches_nothing_and_recall_falls_back(stdio_server, home, call) -> None:
    async with stdio_server(home, ROCKMEM_EMBEDDING_MODEL=None) as client:  # the default: the bundled model
        await saved_and_embedded(client, call)
        nonsense = (("qwxz nothing matches this", "hybrid"), ("qwxz blorft vrrp", "hybrid"),
                    ("qwxz blorft vrrp", "vector"), ("qwxz?", "hybrid"), ("zzkq, vrrp; xqj!", "vector"))  # fmt: skip
        for query, mode in nonsense:
            found = await call(client, "search_memory", query=query, mode=mode, stores=["memories"])
            assert found["mode"] == mode and found["results"] == [], (query, mode, found["results"])
        # Its known words ("nothing matches this") alone are no confident likeness: below the hybrid's threshold.
        loose = await call(client, "search_memory", query="qwxz nothing matches this", mode="vector")
        assert all(hit["score"] < HYBRID_MIN_SIMILARITY for hit in loose["results"]), loose["results"]
        recalled = await call(client, "recall", message="qwxz nothing matches this", session_id="nonsense-1")
        assert recalled["first_turn_fallback"] is True
        # The fallback's salient memories are what the block shows, not a "match" on meaning.
        assert {m["content"] for m in recalled["memories"]} <= set(MEMORIES)
        # Meaning still works: a paraphrase sharing no word with its memory is found.
        cat = await call(client, "search_memory", query="my kitty", mode="vector", limit=1)
        assert cat["results"][0]["entry"]["content"] == MEMORIES[1]
