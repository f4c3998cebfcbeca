"""Column: growable arrays; a snapshot's arrays are taken over at start, not copied a second time."""

from __future__ import annotations

import numpy as np

from rockmem_mcp.search.columns import Column


def test_data_is_copied_unless_handed_over() -> None:
    data = np.arange(5, dtype=np.int32)
    copied = Column(np.int32, data=data)
    copied[0] = 99
    assert data[0] == 0  # the caller's array is untouched

    taken = Column(np.int32, data=data, take=True)
    assert np.shares_memory(taken.view, data)  # no second copy of a loaded snapshot array
    taken.extend(np.array([5, 6], dtype=np.int32))  # growth moves it to its own storage
    assert taken.view.tolist() == [0, 1, 2, 3, 4, 5, 6]


def test_a_handed_over_array_that_cannot_serve_as_storage_is_copied() -> None:
    read_only = np.arange(4, dtype=np.int64)
    read_only.flags.writeable = False  # as a memory-mapped snapshot would be
    wrong_type = np.arange(4, dtype=np.int64)
    strided = np.arange(8, dtype=np.int32)[::2]
    for data, dtype in ((read_only, np.int64), (wrong_type, np.int32), (strided, np.int32)):
        column = Column(dtype, data=data, take=True)
        assert not np.shares_memory(column.view, data)
        assert column.view.dtype == dtype and column.view.flags.writeable
        column[1] = 7
        assert column.view.tolist() == [int(data[0]), 7, *(int(x) for x in data[2:])]
