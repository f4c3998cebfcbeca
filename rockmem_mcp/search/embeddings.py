"""Embedding providers: one interface, vectors as L2-normalised float32 rows.

- `OpenAIEmbeddings`: any OpenAI-compatible `/v1/embeddings` endpoint (Ollama, OpenAI, LM Studio,
  llama.cpp, vLLM) over httpx.
- `Model2VecEmbeddings`: a local static model through the optional `model2vec` library (numpy, no torch).
- `OnnxEmbeddings` (onnx_embeddings.py): a local transformer through onnxruntime: the bundled one, the default,
  and the optional `[onnx]` extra's, named `onnx:minilm-int8`.
- `StaticEmbeddings` (search/static_model.py): the bundled static model, numpy alone (`static`).

Which one a home uses is chosen from the settings by `vector_worker.open_provider`, so this module knows no
settings.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import numpy as np

from rockmem_mcp.errors import EmbeddingError, EmbeddingRefused
from rockmem_mcp.openai_http import EndpointFailed, EndpointRefused, endpoint_url, http_client, post_json

log = logging.getLogger(__name__)

MAX_INPUT_CHARS = 30_000  # RockBot's MaxInputChars: longer inputs are cut, not refused


class EmbeddingProvider(Protocol):
    model_id: str  # names the model that made a vector, so a cache can tell when to rebuild

    def embed(self, texts: Sequence[str], *, interactive: bool = False) -> np.ndarray:
        """One unit-length float32 row per text; `interactive` (a query) fails fast instead of retrying."""
        ...


def embeddings_url(endpoint: str) -> str:
    """Accept a base URL ('http://host:11434', '.../v1') or the full '/v1/embeddings' URL."""
    return endpoint_url(endpoint, "embeddings")


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
        query_timeout_s: float = 5.0,
    ) -> None:
        self.url = embeddings_url(endpoint)
        self.model = model
        self.model_id = f"openai-compatible:{self.url}:{model}"
        self.batch_size = batch_size
        self.retries = retries
        self.backoff_s = backoff_s
        self.max_input_chars = max_input_chars
        self.query_timeout_s = query_timeout_s
        self._client = http_client(timeout_s, api_key)

    def close(self) -> None:
        self._client.close()

    def embed(self, texts: Sequence[str], *, interactive: bool = False) -> np.ndarray:
        rows = [
            self._embed_batch([t[: self.max_input_chars] for t in texts[i : i + self.batch_size]], interactive)
            for i in range(0, len(texts), self.batch_size)
        ]
        if not rows:
            return np.zeros((0, 0), dtype=np.float32)
        if len({r.shape[1] for r in rows}) != 1:
            raise EmbeddingError(f"{self.url} returned vectors of different sizes across batches")
        return normalise(np.concatenate(rows))

    def _embed_batch(self, batch: list[str], interactive: bool) -> np.ndarray:
        reply = self._post({"model": self.model, "input": batch}, interactive)
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

    def _post(self, payload: dict[str, object], interactive: bool) -> dict:
        """An interactive call (a search's query) makes one attempt with the short query timeout: a search
        would rather answer on BM25 now than wait for a struggling endpoint."""
        attempts = 1 if interactive else self.retries + 1
        timeout = self.query_timeout_s if interactive else self._client.timeout.read
        try:
            return post_json(
                self._client, self.url, payload, attempts=attempts, timeout=timeout, backoff_s=self.backoff_s
            )
        except EndpointRefused as exc:
            raise EmbeddingRefused(
                f"embedding endpoint {self.url} refused the request: {exc} "
                "(check ROCKMEM_EMBEDDING_MODEL and ROCKMEM_EMBEDDING_API_KEY)"
            ) from None
        except EndpointFailed as exc:
            raise EmbeddingError(f"embedding endpoint {self.url} {exc}") from None


class Model2VecEmbeddings:
    """A static model2vec model: a token-vector lookup and a mean, ~40k sentences/s on two cores."""

    def __init__(self, model: str, batch_size: int = 1024, max_input_chars: int = MAX_INPUT_CHARS) -> None:
        try:
            from model2vec import StaticModel
        except ImportError:
            raise EmbeddingError(
                f"ROCKMEM_EMBEDDING_MODEL={model!r} names a local model, but the model2vec library is not "
                "installed: pip install 'rockmem-mcp[local]' (or set ROCKMEM_EMBEDDING_ENDPOINT)"
            ) from None
        source = Path(model).expanduser()
        name = str(source.resolve()) if source.exists() else model
        try:
            self._model = StaticModel.from_pretrained(name)
        except Exception as exc:  # a missing folder, no network for a published name, a broken file...
            raise EmbeddingError(f"cannot load the embedding model {model!r}: {type(exc).__name__}: {exc}") from None
        self.model_id = f"model2vec:{name}"
        self.batch_size = batch_size
        self.max_input_chars = max_input_chars

    def embed(self, texts: Sequence[str], *, interactive: bool = False) -> np.ndarray:
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        clipped = [t[: self.max_input_chars] for t in texts]
        try:
            vectors = self._model.encode(clipped, batch_size=self.batch_size, show_progress_bar=False)
        except Exception as exc:  # e.g. text with lone surrogates: the model is fine, this input is not
            raise EmbeddingRefused(f"the local model cannot embed this text: {type(exc).__name__}: {exc}") from None
        return normalise(np.asarray(vectors, dtype=np.float32))
