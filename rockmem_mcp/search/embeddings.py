"""Embedding providers: one interface, vectors as L2-normalised float32 rows.

Only the OpenAI-compatible HTTP provider lives here so far (Ollama, OpenAI, LM Studio, llama.cpp and vLLM
all serve `/v1/embeddings`). Wiring into search, the vector cache and the local model2vec provider are
the rest of the hybrid-ranking issue.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Protocol

import httpx
import numpy as np

from rockmem_mcp.errors import EmbeddingError

MAX_INPUT_CHARS = 30_000  # RockBot's MaxInputChars: longer inputs are cut, not refused
RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})


class EmbeddingProvider(Protocol):
    model_id: str  # names the model that made a vector, so a cache can tell when to rebuild

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """One unit-length float32 row per text."""
        ...


def embeddings_url(endpoint: str) -> str:
    """Accept a base URL ('http://host:11434', '.../v1') or the full '/v1/embeddings' URL."""
    url = endpoint.rstrip("/")
    if url.endswith("/embeddings"):
        return url
    return f"{url}/embeddings" if url.endswith("/v1") else f"{url}/v1/embeddings"


def normalise(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return (vectors / np.where(norms == 0, 1.0, norms)).astype(np.float32)


class OpenAIEmbeddings:
    def __init__(
        self,
        endpoint: str,
        model: str,
        api_key: str | None = None,
        *,
        batch_size: int = 64,
        timeout_s: float = 30.0,
        retries: int = 3,
        backoff_s: float = 0.5,
        max_input_chars: int = MAX_INPUT_CHARS,
    ) -> None:
        self.url = embeddings_url(endpoint)
        self.model = model
        self.model_id = f"openai-compatible:{self.url}:{model}"
        self.batch_size = batch_size
        self.retries = retries
        self.backoff_s = backoff_s
        self.max_input_chars = max_input_chars
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(timeout=timeout_s, headers=headers)

    def close(self) -> None:
        self._client.close()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        rows = [
            self._embed_batch([t[: self.max_input_chars] for t in texts[i : i + self.batch_size]])
            for i in range(0, len(texts), self.batch_size)
        ]
        if not rows:
            return np.zeros((0, 0), dtype=np.float32)
        if len({r.shape[1] for r in rows}) != 1:
            raise EmbeddingError(f"{self.url} returned vectors of different sizes across batches")
        return normalise(np.concatenate(rows))

    def _embed_batch(self, batch: list[str]) -> np.ndarray:
        reply = self._post({"model": self.model, "input": batch})
        try:
            data = sorted(reply["data"], key=lambda item: item["index"])
            vectors = np.array([item["embedding"] for item in data], dtype=np.float64)
        except (KeyError, TypeError, ValueError) as exc:
            raise EmbeddingError(f"{self.url} answered without a usable 'data' list of embeddings ({exc})") from None
        if vectors.ndim != 2 or len(vectors) != len(batch) or vectors.shape[1] == 0:
            raise EmbeddingError(
                f"{self.url} returned {len(vectors)} vectors of shape {vectors.shape[1:]} for {len(batch)} inputs"
            )
        return vectors

    def _post(self, payload: dict[str, object]) -> dict:
        """POST with retries (backoff doubling) on connection errors, timeouts and 408/409/429/5xx."""
        problem = ""
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(self.backoff_s * 2 ** (attempt - 1))
            try:
                response = self._client.post(self.url, json=payload)
            except httpx.TimeoutException:
                problem = f"timed out after {self._client.timeout.read}s"
                continue
            except httpx.TransportError as exc:
                problem = f"unreachable ({exc.__class__.__name__}: {exc})"
                continue
            if response.status_code in RETRY_STATUS:
                problem = f"HTTP {response.status_code}: {response.text[:200]}"
                continue
            if response.status_code >= 400:
                raise EmbeddingError(
                    f"embedding endpoint {self.url} refused the request: HTTP {response.status_code}: "
                    f"{response.text[:200]} (check ROCKMEM_EMBEDDING_MODEL and ROCKMEM_EMBEDDING_API_KEY)"
                )
            try:
                return response.json()
            except ValueError:
                raise EmbeddingError(f"embedding endpoint {self.url} did not answer JSON") from None
        raise EmbeddingError(f"embedding endpoint {self.url} failed {self.retries + 1} times; last: {problem}")
