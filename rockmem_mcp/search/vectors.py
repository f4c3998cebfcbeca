"""Embedding vectors for an index: one contiguous int8 matrix in memory, one `.bin` file per entry on disk.

`VectorTable` keeps a row per index slot (rows of slots without a vector yet are zero and flagged absent),
so a query is one matrix-vector product. Rows are held as int8 with a float32 scale each (a quarter of the
float32 matrix: 100k x 256 is 26 MB, not 102 MB; a cosine typically moves by a few thousandths, see
`quantize`) and
are widened to float32 a block at a time while a query is scored, so the scan costs what the float32 scan
cost. `VectorFiles` is the cache on disk (full float32): `{dir}/{id}.bin` holds an
8-byte stamp and the raw float32 vector, plus `model.json` naming the model and dimension that made them;
a different model empties the cache. The stamp is a digest of the embedded text and the vector's bytes, so
a cached vector is used only for the very text it was made from and a torn or foreign file is never taken
for a vector (either is embedded again). Both are derived data: atomic but not fsynced, rebuilt when lost.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
from pathlib import Path

import numpy as np

from rockmem_mcp.search.columns import Column
from rockmem_mcp.storage.atomic import atomic_write
from rockmem_mcp.storage.no_follow import read_bytes

log = logging.getLogger(__name__)

MODEL_RECORD = "model.json"
MATRIX_GROWTH = 1.25  # 100k x 256 floats is 100 MB: grow by a quarter, not double
STAMP_BYTES = 8
SCAN_BLOCK = 2048  # rows widened to float32 at a time: 2 MB at 256 dims, in cache while it is multiplied
INT8_MAX = 127


def quantize(vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows as int8 and a float32 scale each (row = int8 x scale): symmetric, per row, so a row's largest
    component is exact and every other is off by at most half a step (max/254). Over the bundled models'
    vectors a cosine moved by at most 0.004 (static) and 0.002 (transformer); a vector dominated by one
    component loses more of the rest (up to ~0.05). A NaN or infinite component (a broken model) is stored as 0."""
    vectors = np.nan_to_num(np.asarray(vectors, dtype=np.float32), nan=0.0, posinf=0.0, neginf=0.0)
    if vectors.ndim == 1:
        vectors = vectors[None, :]
    peak = np.abs(vectors).max(axis=1) if vectors.shape[1] else np.zeros(len(vectors), dtype=np.float32)
    scale = (peak / INT8_MAX).astype(np.float32)
    safe = np.where(scale > 0, scale, 1.0).astype(np.float32)
    rows = np.clip(np.rint(vectors / safe[:, None]), -INT8_MAX, INT8_MAX).astype(np.int8)
    return rows, scale


def vector_stamp(text: str, vector_bytes: bytes) -> bytes:
    """Names the text a cached vector was made from and checks its bytes (a torn file fails it)."""
    digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=STAMP_BYTES)
    digest.update(vector_bytes)
    return digest.digest()


class VectorTable:
    def __init__(self, model_id: str = "", dim: int = 0, rows: int = 0) -> None:
        self._empty(model_id, dim, rows)

    def _empty(self, model_id: str, dim: int, rows: int) -> None:
        self.model_id = model_id
        self.dim = dim
        self.matrix = Column(np.int8, width=dim or 1, capacity=max(rows, 4), growth=MATRIX_GROWTH)
        self.scale = Column(np.float32, capacity=max(rows, 4), growth=MATRIX_GROWTH)
        self.present = Column(np.bool_, capacity=max(rows, 4))
        self.grow(rows)

    def __len__(self) -> int:
        return len(self.present)

    def grow(self, rows: int) -> None:
        """Add absent rows for new slots."""
        if rows:
            self.matrix.extend(np.zeros((rows, self.matrix.view.shape[1]), dtype=np.int8))
            self.scale.extend(np.zeros(rows, dtype=np.float32))
            self.present.extend(np.zeros(rows, dtype=np.bool_))

    def match_slots(self, slot_count: int) -> None:
        """Follow the index: rows for every slot it has."""
        self.grow(slot_count - len(self))

    def adopt(self, model_id: str, dim: int) -> bool:
        """Take on a model; vectors of another model or size are dropped. True if they were."""
        if model_id == self.model_id and dim == self.dim:
            return False
        self._empty(model_id, dim, len(self))
        return True

    def put(self, slots: np.ndarray, vectors: np.ndarray) -> None:
        rows, scale = quantize(vectors)
        self.matrix.view[slots] = rows
        self.scale.view[slots] = scale
        self.present.view[slots] = True

    def rows(self, slots: np.ndarray | list[int]) -> np.ndarray:
        """The vectors of `slots` as float32 (as stored: within half an int8 step of what was put)."""
        return self.matrix.view[slots].astype(np.float32) * self.scale.view[slots, None]

    def similarities(self, query: np.ndarray) -> np.ndarray:
        """Cosine of every row with a unit query (0 for absent rows, which are zero)."""
        matrix = self.matrix.view
        query = np.asarray(query, dtype=np.float32)
        out = np.empty(len(matrix), dtype=np.float32)
        block = np.empty((min(SCAN_BLOCK, len(matrix)), matrix.shape[1]), dtype=np.float32)
        for start in range(0, len(matrix), SCAN_BLOCK):
            stop = min(start + SCAN_BLOCK, len(matrix))
            widened = block[: stop - start]
            widened[...] = matrix[start:stop]
            np.matmul(widened, query, out=out[start:stop])
        out *= self.scale.view
        return out

    # ------------------------------------------------------------------ snapshots
    def export(self, live: np.ndarray) -> dict[str, np.ndarray]:
        if not self.dim:
            return {}
        return {
            "vectors": self.matrix.view[live],
            "vector_scale": self.scale.view[live],
            "vector_present": self.present.view[live],
            "vector_model": np.frombuffer(self.model_id.encode(), dtype=np.uint8),
        }

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], rows: int) -> VectorTable:
        if "vectors" not in arrays:
            return cls(rows=rows)
        matrix, present = arrays["vectors"], arrays["vector_present"]
        if len(matrix) != rows or len(present) != rows:
            raise ValueError("vector rows disagree with the index")
        table = cls(arrays["vector_model"].tobytes().decode(), int(matrix.shape[1]) if present.any() else 0)
        if table.dim:
            if matrix.dtype == np.int8:
                scale = arrays["vector_scale"]
                if len(scale) != rows:
                    raise ValueError("vector rows disagree with the index")
            else:  # a snapshot of format 6 held float32 rows: quantized a block at a time (no 3x peak at 1M)
                matrix, scale = _quantized_by_blocks(matrix)
            table.matrix = Column(np.int8, data=matrix, growth=MATRIX_GROWTH, take=True)
            table.scale = Column(np.float32, data=scale, growth=MATRIX_GROWTH, take=True)
            table.present = Column(np.bool_, data=present, take=True)
        else:
            table.grow(rows)
        return table


def _quantized_by_blocks(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    rows = np.empty(matrix.shape, dtype=np.int8)
    scale = np.empty(len(matrix), dtype=np.float32)
    for start in range(0, len(matrix), SCAN_BLOCK):
        stop = min(start + SCAN_BLOCK, len(matrix))
        rows[start:stop], scale[start:stop] = quantize(matrix[start:stop])
    return rows, scale


class VectorFiles:
    """The on-disk cache: raw float32 per id, and the model record."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._text = str(directory)

    def path(self, entry_id: str) -> str:
        return f"{self._text}/{entry_id}.bin"

    def read(self, entry_id: str, text: str, dim: int) -> np.ndarray | None:
        """The cached vector of `text` if the file holds one of `dim` floats made from exactly that text."""
        try:
            data = read_bytes(self.path(entry_id))
        except OSError:
            return None
        if len(data) != STAMP_BYTES + 4 * dim or data[:STAMP_BYTES] != vector_stamp(text, data[STAMP_BYTES:]):
            return None
        return np.frombuffer(data, dtype=np.float32, offset=STAMP_BYTES)

    def write(self, entry_id: str, text: str, vector: np.ndarray) -> None:
        """Cache the vector made from `text`; needs no lock: the stamp, not the file's age, says what it is of."""
        try:
            data = np.ascontiguousarray(vector, dtype=np.float32).tobytes()
            atomic_write(Path(self.path(entry_id)), vector_stamp(text, data) + data, durable=False)
        except OSError as exc:  # a cache: failing to keep a vector costs a re-embedding later, nothing else
            log.debug("could not cache the vector of %s: %s", entry_id, exc)

    def remove(self, entry_id: str) -> None:
        with contextlib.suppress(OSError):
            os.unlink(self.path(entry_id))

    def record(self) -> tuple[str, int] | None:
        try:
            data = json.loads(read_bytes(self.directory / MODEL_RECORD))
            return str(data["model"]), int(data["dim"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def adopt(self, model_id: str, dim: int) -> None:
        """Make the cache hold vectors of this model: another model's files are removed first. A home this
        process may not write keeps its cache as it is (vectors are then made in memory; the start said why)."""
        if self.record() == (model_id, dim) or not os.access(self.directory.parent, os.W_OK):
            return
        try:
            self._replace(model_id, dim)
        except OSError as exc:  # a cache: without it vectors are made again after a restart, nothing else
            log.warning("cannot prepare the embedding cache in %s: %s", self.directory, exc)

    def _replace(self, model_id: str, dim: int) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        removed = 0
        for name in os.listdir(self.directory):
            if name.endswith(".bin"):
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(self.directory, name))
                    removed += 1
        if removed:
            log.warning("embedding model changed to %s (%d dims): dropped %d cached vectors", model_id, dim, removed)
        atomic_write(self.directory / MODEL_RECORD, json.dumps({"model": model_id, "dim": dim}).encode(), durable=False)
