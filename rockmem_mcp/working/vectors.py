"""Vectors for working-memory search, so it ranks with the same hybrid ranker as long-term memory.

RockBot embeds a working-memory entry in the background when it is saved; here a save never touches the
embedding provider. A search with a query embeds the query and the candidates not cached yet, in one call
of at most `embedding_batch_size` texts (the newest first; the others keep their BM25 part until a later
search), with one attempt and the short query timeout, as a long-term search embeds its query. A failing
provider costs that search its vectors, never a save. Vectors are kept in process memory under the
entry's key and save time (a re-save is a new version), at most `CACHE_ENTRIES` of them, least recently
used out first; entries the provider refuses are remembered as having no vector and ranked by keywords.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

from rockmem_mcp.vector_worker import Embedder
from rockmem_mcp.working.shapes import WorkingEntry

CACHE_ENTRIES = 2048  # 2 MB at 256 dimensions, 12.6 MB at 1536

VersionKey = tuple[str, str, str]  # model, entry key, saved at


class WorkingVectors:
    """One per process, shared by every caller's working memory."""

    def __init__(self, embedder: Embedder, capacity: int = CACHE_ENTRIES) -> None:
        self.embedder = embedder
        self.capacity = capacity
        self._lock = threading.Lock()
        self._cache: OrderedDict[VersionKey, np.ndarray | None] = OrderedDict()

    def __len__(self) -> int:
        return len(self._cache)

    def similarities(self, query: str, entries: Sequence[WorkingEntry]) -> tuple[np.ndarray, np.ndarray] | None:
        """The cosine of each entry to `query` and which entries have a vector (the ranker's inputs), or
        None when embeddings are off or not answering (the search then ranks by BM25 alone)."""
        if not self.embedder.configured or not entries:
            return None
        query_vector = self.embedder.embed_query(query)
        if query_vector is None:
            return None
        keys = [(self.embedder.model_id, e.key, e.created_at.isoformat()) for e in entries]
        known = self._cached(keys)
        missing = [i for i, key in enumerate(keys) if key not in known]
        batch = sorted(missing, key=lambda i: entries[i].created_at, reverse=True)
        batch = batch[: self.embedder.settings.embedding_batch_size]
        if batch:
            made = self.embedder.embed_now([entries[i].document_text() for i in batch])
            if made is not None or self.embedder.ready:  # None while still ready: the provider refused them
                rows = [None if made is None else made[n] for n in range(len(batch))]
                known.update(self._store([keys[i] for i in batch], rows))
        similarity = np.zeros(len(entries), dtype=np.float32)
        with_vector = np.zeros(len(entries), dtype=bool)
        for i, key in enumerate(keys):
            vector = known.get(key)
            if vector is not None and vector.shape == query_vector.shape:
                similarity[i] = float(vector @ query_vector)
                with_vector[i] = True
        return similarity, with_vector

    def _cached(self, keys: list[VersionKey]) -> dict[VersionKey, np.ndarray | None]:
        with self._lock:
            found = {}
            for key in keys:
                if key in self._cache:
                    self._cache.move_to_end(key)
                    found[key] = self._cache[key]
            return found

    def _store(self, keys: list[VersionKey], rows: list[np.ndarray | None]) -> dict[VersionKey, np.ndarray | None]:
        with self._lock:
            for key, row in zip(keys, rows, strict=True):
                self._cache[key] = row
                self._cache.move_to_end(key)
            while len(self._cache) > self.capacity:
                self._cache.popitem(last=False)
        return dict(zip(keys, rows, strict=True))
