"""Lists of strings as one uint8 array, for the index snapshots (npz holds arrays, not lists)."""

from __future__ import annotations

import numpy as np


def pack_strings(strings: list[str]) -> np.ndarray:
    # Ids, words, categories and tags never contain a newline (validated or tokenized), so it separates.
    return np.frombuffer("\n".join(strings).encode(), dtype=np.uint8)


def unpack_strings(blob: np.ndarray) -> list[str]:
    text = blob.tobytes().decode()
    return text.split("\n") if text else []
