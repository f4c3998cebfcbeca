"""The OpenAI-compatible embedding provider against a real HTTP server on loopback."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from rockmem_mcp.errors import EmbeddingError
from rockmem_mcp.search.embeddings import MAX_INPUT_CHARS, OpenAIEmbeddings, embeddings_url
from tests.embedding_server import EmbeddingServer as Server
from tests.embedding_server import Reply, vectors_for


@pytest.fixture
def server() -> Iterator[Server]:
    s = Server()
    yield s
    s.close()


def provider(server: Server, **kwargs) -> OpenAIEmbeddings:
    return OpenAIEmbeddings(server.url, "test-model", **{"backoff_s": 0.0, **kwargs})


def test_urls_accept_a_base_or_the_full_path() -> None:
    assert embeddings_url("http://h:11434") == "http://h:11434/v1/embeddings"
    assert embeddings_url("http://h:11434/v1/") == "http://h:11434/v1/embeddings"
    assert embeddings_url("https://api.example/v1/embeddings") == "https://api.example/v1/embeddings"


def test_batches_order_by_index_normalise_and_send_the_key(server: Server) -> None:
    server.replies = [vectors_for]
    texts = ["a", "bb", "ccc", "dddd", "eeeee"]
    vectors = provider(server, batch_size=2, api_key="sekret").embed(texts)
    assert [len(body["input"]) for body, _ in server.requests] == [2, 2, 1]
    assert all(headers["Authorization"] == "Bearer sekret" for _, headers in server.requests)
    assert server.requests[0][0]["model"] == "test-model"
    assert vectors.dtype == np.float32 and vectors.shape == (5, 3)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0)
    expected = np.array([[1, 0, 1], [2, 1, 1], [3, 0, 1], [4, 1, 1], [5, 0, 1]], dtype=np.float64)
    assert np.allclose(vectors, expected / np.linalg.norm(expected, axis=1, keepdims=True))


def test_long_inputs_are_cut_at_the_limit(server: Server) -> None:
    server.replies = [vectors_for]
    provider(server).embed(["x" * (MAX_INPUT_CHARS + 500)])
    assert len(server.requests[0][0]["input"][0]) == MAX_INPUT_CHARS


def test_server_errors_are_retried_then_succeed(server: Server) -> None:
    server.replies = [lambda body: (500, "boom"), lambda body: (503, "busy"), vectors_for]
    assert provider(server, retries=2).embed(["hello"]).shape == (1, 3)
    assert len(server.requests) == 3


def test_persistent_server_errors_raise_a_clear_error(server: Server) -> None:
    server.replies = [lambda body: (500, "boom")]
    with pytest.raises(EmbeddingError, match=r"failed 3 time\(s\); last: HTTP 500: boom"):
        provider(server, retries=2).embed(["hello"])
    assert len(server.requests) == 3


def test_a_refusal_is_not_retried(server: Server) -> None:
    server.replies = [lambda body: (401, "bad key")]
    with pytest.raises(EmbeddingError, match=r"HTTP 401: bad key .*API_KEY"):
        provider(server).embed(["hello"])
    assert len(server.requests) == 1


def test_a_timeout_is_reported(server: Server) -> None:
    server.replies = [lambda body: (0, "")]
    with pytest.raises(EmbeddingError, match="timed out"):
        provider(server, retries=0, timeout_s=0.2).embed(["hello"])


def test_an_unreachable_endpoint_is_reported() -> None:
    probe = Server()
    url = probe.url
    probe.close()  # nothing listens there now
    with pytest.raises(EmbeddingError, match="unreachable"):
        OpenAIEmbeddings(url, "m", retries=1, backoff_s=0.0).embed(["hello"])


@pytest.mark.parametrize(
    "reply",
    [
        lambda body: (200, {"data": [{"index": 0, "embedding": [1.0, 2.0]}, {"index": 1, "embedding": [1.0]}]}),
        lambda body: (200, {"data": [{"index": 0, "embedding": [1.0, 2.0]}]}),
        lambda body: (200, {"error": "no data"}),
        lambda body: (200, "not json"),
    ],
    ids=["ragged", "too-few", "no-data", "not-json"],
)
def test_wrong_answers_raise_a_clear_error(server: Server, reply: Reply) -> None:
    server.replies = [reply]
    with pytest.raises(EmbeddingError, match=r"127\.0\.0\.1"):
        provider(server).embed(["one", "two"])


def test_dimension_change_between_batches_is_an_error(server: Server) -> None:
    server.replies = [vectors_for, lambda body: vectors_for(body, dim=4)]
    with pytest.raises(EmbeddingError, match="different sizes"):
        provider(server, batch_size=1).embed(["one", "two"])
