"""The indexes' snapshot files: named numpy arrays in one `.npz` (a zip of `.npy` members, stored uncompressed).

Written with numpy's own `savez`; read here rather than with `np.load`, for the start. A start reads the memory
snapshot in a thread while the main thread imports the MCP SDK, and `np.load` reads a member through zipfile in
256 KB chunks, each read and each CRC update releasing the GIL and then waiting for it: the main thread holds it
for up to the switch interval (5 ms) each time. At 100k memories (102 MB) that made a 0.08 s read take ~1 s
behind the imports (4.8 s behind a busy loop). Here each member costs one read straight into its array and one
CRC over it that keeps the GIL (binascii): 0.47 s behind the busy loop. Members are still checked against the
zip's CRCs, so a damaged file is found as before; anything unusual falls back to `np.load`.
"""

from __future__ import annotations

import binascii
import io
import struct
import zipfile
from collections.abc import Collection
from pathlib import Path
from typing import BinaryIO

import numpy as np

from rockmem_mcp.storage.atomic import atomic_write

_LOCAL_HEADER = struct.Struct("<4sHHHHHIIIHH")  # a zip member's local file header (30 bytes)
_LOCAL_SIGNATURE = b"PK\x03\x04"
_HEAD_READ = 4096  # a local header, its name and extra field, and the .npy header fit (else: np.load)
_NPY_HEADERS = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}


def write_arrays(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """Write a snapshot (derived data: atomic but not fsynced; a torn one is just rebuilt)."""
    atomic_write(path, lambda f: np.savez(f, **arrays), durable=False)


def read_arrays(file: BinaryIO, skip: Collection[str] = ()) -> dict[str, np.ndarray]:
    """Every array in the snapshot open in `file` but those named in `skip` (not read at all). Raises what a
    damaged file raises (ValueError on a CRC mismatch, zipfile.BadZipFile, EOFError, ...)."""
    with zipfile.ZipFile(file) as archive:
        members = [info for info in archive.infolist() if info.filename.removesuffix(".npy") not in skip]
        arrays: dict[str, np.ndarray] = {}
        for info in members:
            name = info.filename.removesuffix(".npy")
            array = _read_member(file, info)
            arrays[name] = array if array is not None else _with_numpy(archive, info)
    return arrays


def _read_member(file: BinaryIO, info: zipfile.ZipInfo) -> np.ndarray | None:
    """The member's array, read with one read for its headers and one straight into the array; None when it is
    not a plain stored .npy (compressed, Fortran order, objects, headers past the first read): numpy reads those."""
    if info.compress_type != zipfile.ZIP_STORED or not info.filename.endswith(".npy"):
        return None
    file.seek(info.header_offset)
    head = file.read(_HEAD_READ)
    if len(head) < _LOCAL_HEADER.size:
        raise EOFError(f"{info.filename}: truncated")
    fields = _LOCAL_HEADER.unpack_from(head)
    if fields[0] != _LOCAL_SIGNATURE:
        raise zipfile.BadZipFile(f"{info.filename}: bad local header")
    start = _LOCAL_HEADER.size + fields[9] + fields[10]  # name and extra field lengths
    npy = io.BytesIO(head[start:])
    try:
        reader = _NPY_HEADERS.get(np.lib.format.read_magic(npy))
        if reader is None:
            return None
        shape, fortran_order, dtype = reader(npy)
    except ValueError:  # a header longer than the first read (or damaged): numpy's reader says which
        return None
    if fortran_order or dtype.hasobject:
        return None
    header_len = npy.tell()
    array = np.empty(shape, dtype=dtype)
    if array.nbytes != info.file_size - header_len:
        raise ValueError(f"{info.filename}: {info.file_size - header_len} bytes for {array.nbytes} of data")
    crc = binascii.crc32(head[start : start + header_len])
    if array.nbytes:  # (a view of no bytes cannot be cast: an empty array has nothing to read)
        with memoryview(array).cast("B") as into:
            file.seek(info.header_offset + start + header_len)
            done = 0
            while done < len(into):  # one read but for the largest arrays (a read returns at most ~2 GB)
                read = file.readinto(into[done:])
                if not read:
                    raise EOFError(f"{info.filename}: truncated")
                done += read
            crc = binascii.crc32(into, crc)
    if crc != info.CRC:
        raise ValueError(f"{info.filename}: CRC mismatch")
    return array


def _with_numpy(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> np.ndarray:
    with archive.open(info) as member:
        return np.lib.format.read_array(member, allow_pickle=False)
