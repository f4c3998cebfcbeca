"""Snapshot files: numpy's own .npz, read one member at a time in a read or two (array_files module docstring)."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rockmem_mcp.search.array_files import read_arrays, write_arrays


def sample() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    return {
        "vectors": rng.integers(-128, 127, size=(3000, 384), dtype=np.int8),
        "keys": np.frombuffer(b"abc\ndef\nghi", dtype=np.uint8),
        "signature": rng.integers(0, 2**63, size=(50, 4), dtype=np.uint64),
        "created": rng.random(1000),
        "pinned": rng.random(1000) > 0.5,
        "empty": np.zeros(0, dtype=np.int32),
        "no_rows": np.zeros((0, 384), dtype=np.int8),
        "header": np.array([8, 3, 1, 0, 1000], dtype=np.int64),
    }


class CountingFile(io.FileIO):
    """A file that counts the reads made of it (read, readinto)."""

    reads = 0

    def read(self, *args: Any) -> bytes:
        type(self).reads += 1
        return super().read(*args)

    def readinto(self, buffer: Any) -> int:
        type(self).reads += 1
        return super().readinto(buffer)


def test_every_array_comes_back_as_numpy_wrote_it(tmp_path: Path) -> None:
    path = tmp_path / "index.npz"
    arrays = sample()
    write_arrays(path, arrays)
    with path.open("rb") as file:
        read = read_arrays(file)
    assert read.keys() == arrays.keys()
    for name, array in arrays.items():
        assert read[name].dtype == array.dtype and read[name].shape == array.shape, name
        assert np.array_equal(read[name], array), name
        assert read[name].flags.writeable and read[name].flags.owndata, name  # its own memory, as np.load's


def test_each_member_is_one_read_straight_into_its_array(tmp_path: Path) -> None:
    """np.load reads a member in 256 KB chunks, each a trip through the GIL: behind a busy thread that made a
    start's 0.08 s read take a second. Here a member costs two reads (its headers, its data), however big."""
    path = tmp_path / "index.npz"
    write_arrays(path, {"big": np.ones((4000, 384), dtype=np.int8), "small": np.arange(5)})
    CountingFile.reads = 0
    with CountingFile(path, "rb") as raw, io.BufferedReader(raw) as file:
        read = read_arrays(file)
    directory_reads = CountingFile.reads - 2 * len(read)
    assert directory_reads <= 4, CountingFile.reads
    assert int(read["big"].sum()) == 4000 * 384


def test_skipped_members_are_not_read(tmp_path: Path) -> None:
    path = tmp_path / "index.npz"
    write_arrays(path, sample())
    with path.open("rb") as file:
        read = read_arrays(file, skip={"vectors", "signature"})
    assert set(read) == set(sample()) - {"vectors", "signature"}


@pytest.mark.parametrize("where", ["data", "npy header"])
def test_a_damaged_byte_is_found(tmp_path: Path, where: str) -> None:
    path = tmp_path / "index.npz"
    write_arrays(path, {"vectors": np.zeros((100, 16), dtype=np.int8)})
    with zipfile.ZipFile(path) as archive:
        info = archive.infolist()[0]
    data = bytearray(path.read_bytes())
    start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)
    offset = start + (info.file_size - 5 if where == "data" else 20)  # the header's dict text
    data[offset] ^= 0x01
    path.write_bytes(bytes(data))
    with path.open("rb") as file, pytest.raises((ValueError, zipfile.BadZipFile)):
        read_arrays(file)


def test_a_truncated_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "index.npz"
    write_arrays(path, sample())
    path.write_bytes(path.read_bytes()[:-2000])
    with path.open("rb") as file, pytest.raises((zipfile.BadZipFile, EOFError, ValueError)):
        read_arrays(file)


def test_what_numpy_wrote_otherwise_is_read_by_numpy(tmp_path: Path) -> None:
    """A compressed file, or an array in Fortran order: not ours, but still read (np.load's reader)."""
    path = tmp_path / "other.npz"
    fortran = np.asfortranarray(np.arange(12, dtype=np.float32).reshape(3, 4))
    np.savez_compressed(path, fortran=fortran, plain=np.arange(6))
    with path.open("rb") as file:
        read = read_arrays(file)
    assert np.array_equal(read["fortran"], fortran) and np.array_equal(read["plain"], np.arange(6))
