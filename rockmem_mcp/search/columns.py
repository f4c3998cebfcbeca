"""Growable numpy arrays: amortised O(1) appends, zero-copy views for vectorised search."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt


class Column:
    """A 1-D (or fixed-width 2-D) array that grows by doubling. `view` is valid until the next append."""

    __slots__ = ("_data", "_growth", "_n")

    def __init__(
        self,
        dtype: npt.DTypeLike,
        width: int = 0,
        capacity: int = 4,
        data: np.ndarray | None = None,
        growth: float = 2.0,  # below 2 for big rows (vectors): less slack memory, a few more copies
        take: bool = False,  # the caller hands `data` over (a snapshot's freshly loaded arrays): kept uncopied
    ):
        self._growth = growth
        if data is not None:
            self._data = _taken(data, np.dtype(dtype)) if take else np.array(data, dtype=dtype)
            self._n = len(self._data)
            return
        shape: tuple[int, ...] = (capacity, width) if width else (capacity,)
        self._data = np.zeros(shape, dtype=dtype)
        self._n = 0

    def __len__(self) -> int:
        return self._n

    @property
    def view(self) -> np.ndarray:
        return self._data[: self._n]

    def _reserve(self, extra: int) -> None:
        needed = self._n + extra
        if needed > len(self._data):
            capacity = max(needed, int(self._growth * len(self._data)), 4)
            grown = np.zeros((capacity, *self._data.shape[1:]), dtype=self._data.dtype)
            grown[: self._n] = self._data[: self._n]
            self._data = grown

    def append(self, value: Any) -> int:
        self._reserve(1)
        self._data[self._n] = value
        self._n += 1
        return self._n - 1

    def extend(self, values: np.ndarray) -> None:
        self._reserve(len(values))
        self._data[self._n : self._n + len(values)] = values
        self._n += len(values)

    def __setitem__(self, index: int, value: Any) -> None:
        if not 0 <= index < self._n:
            raise IndexError(index)
        self._data[index] = value


def _taken(data: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """A handed-over array itself when it can serve as the column's storage (writable, contiguous, of the
    column's type: a snapshot's arrays once loaded, which then need no second copy at start); otherwise a
    writable copy (a read-only or memory-mapped array, another type)."""
    if data.dtype == dtype and data.flags.writeable and data.flags.c_contiguous:
        return data
    return np.array(data, dtype=dtype)


def concat_segments(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Indices of the ranges [start, start+length) laid end to end, without a Python loop."""
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    ends = np.cumsum(lengths)
    offsets = np.repeat(starts.astype(np.int64) - (ends - lengths), lengths)
    return offsets + np.arange(total, dtype=np.int64)
