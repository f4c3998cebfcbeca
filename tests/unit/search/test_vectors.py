"""VectorTable (rows aligned to index slots, snapshots) and VectorFiles (the on-disk cache)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from rockmem_mcp.search.vectors import MODEL_RECORD, SCAN_BLOCK, VectorFiles, VectorTable, quantize

E0 = np.array([1.0, 0.0, 0.0], dtype=np.float32)
E1 = np.array([0.0, 1.0, 0.0], dtype=np.float32)
DIAG = np.array([0.6, 0.8, 0.0], dtype=np.float32)  # a unit vector: cos with E0 is 0.6, with E1 0.8
QUANT = 0.005  # rows are held as int8: a cosine moves by a few thousandths


def table_with(rows: int, vectors: dict[int, np.ndarray], model: str = "m1") -> VectorTable:
    table = VectorTable(rows=rows)
    table.adopt(model, 3)
    for slot, vector in vectors.items():
        table.put(np.array([slot]), vector[None, :])
    return table


# ---------------------------------------------------------------------- VectorTable rows


def test_a_new_table_has_an_absent_row_per_slot() -> None:
    table = VectorTable(rows=3)
    assert len(table) == 3
    assert table.present.view.tolist() == [False, False, False]


def test_match_slots_adds_absent_rows_and_keeps_existing_vectors() -> None:
    table = table_with(2, {0: E0, 1: E1})
    table.match_slots(40)  # well past the initial capacity, so the matrix is reallocated
    assert len(table) == 40
    assert table.present.view.tolist() == [True, True] + [False] * 38
    assert table.similarities(DIAG)[:3].tolist() == pytest.approx([0.6, 0.8, 0.0], abs=QUANT)
    table.match_slots(40)
    assert len(table) == 40


def test_grow_adds_rows_after_the_existing_ones() -> None:
    table = table_with(1, {0: E1})
    table.grow(2)
    table.put(np.array([2]), E0[None, :])
    assert table.present.view.tolist() == [True, False, True]
    assert table.similarities(E1).tolist() == pytest.approx([1.0, 0.0, 0.0], abs=QUANT)


def test_adopt_a_first_model_sets_model_and_dim_and_keeps_rows() -> None:
    table = VectorTable(rows=2)
    assert table.adopt("m1", 3) is True
    assert (table.model_id, table.dim, len(table)) == ("m1", 3, 2)
    assert table.matrix.view.shape == (2, 3)


def test_adopt_the_same_model_keeps_vectors() -> None:
    table = table_with(2, {0: E0})
    assert table.adopt("m1", 3) is False
    assert table.present.view.tolist() == [True, False]
    assert table.similarities(E0).tolist() == pytest.approx([1.0, 0.0], abs=QUANT)


@pytest.mark.parametrize(("model", "dim"), [("m2", 3), ("m1", 4)])
def test_adopt_another_model_or_size_drops_every_vector(model: str, dim: int) -> None:
    table = table_with(3, {0: E0, 2: E1})
    assert table.adopt(model, dim) is True
    assert (table.model_id, table.dim, len(table)) == (model, dim, 3)
    assert table.present.view.tolist() == [False, False, False]
    query = np.zeros(dim, dtype=np.float32)
    query[0] = 1.0
    assert table.similarities(query).tolist() == [0.0, 0.0, 0.0]


def test_put_sets_several_rows_and_similarities_are_dot_products() -> None:
    table = table_with(4, {})
    table.put(np.array([3, 1]), np.stack([E0, DIAG]))
    assert table.present.view.tolist() == [False, True, False, True]
    assert table.matrix.view.dtype == np.int8  # a quarter of float32's memory; the scale restores the size
    assert table.similarities(E0).tolist() == pytest.approx([0.0, 0.6, 0.0, 1.0], abs=QUANT)
    assert table.similarities(E1).tolist() == pytest.approx([0.0, 0.8, 0.0, 0.0], abs=QUANT)


def test_put_replaces_a_row() -> None:
    table = table_with(1, {0: E0})
    table.put(np.array([0]), E1[None, :])
    assert table.similarities(E1).tolist() == pytest.approx([1.0], abs=QUANT)


def test_export_keeps_live_rows_only() -> None:
    table = table_with(4, {0: E0, 1: E1, 3: DIAG})
    arrays = table.export(np.array([True, False, True, True]))
    assert arrays["vectors"].shape == (3, 3)
    assert arrays["vector_present"].tolist() == [True, False, True]
    assert arrays["vector_model"].tobytes().decode() == "m1"


def test_export_from_arrays_round_trip() -> None:
    table = table_with(4, {0: E0, 1: E1, 3: DIAG}, model="minilm-ü")  # a non-ASCII name survives too
    live = np.array([True, False, True, True])
    restored = VectorTable.from_arrays(table.export(live), rows=3)
    assert (restored.model_id, restored.dim, len(restored)) == ("minilm-ü", 3, 3)
    assert restored.present.view.tolist() == [True, False, True]
    assert restored.similarities(E0).tolist() == pytest.approx([1.0, 0.0, 0.6], abs=QUANT)
    assert restored.adopt("minilm-ü", 3) is False  # the reloaded vectors are kept


def test_a_restored_table_accepts_writes_and_growth_from_read_only_arrays() -> None:
    arrays = table_with(2, {0: E0}).export(np.array([True, True]))
    for array in arrays.values():
        array.flags.writeable = False  # as a memory-mapped snapshot would be
    restored = VectorTable.from_arrays(arrays, rows=2)
    restored.put(np.array([1]), E1[None, :])
    restored.match_slots(10)
    restored.put(np.array([9]), DIAG[None, :])
    assert restored.present.view.tolist() == [True, True] + [False] * 7 + [True]
    assert restored.similarities(E1)[[0, 1, 9]].tolist() == pytest.approx([0.0, 1.0, 0.8], abs=QUANT)


def test_a_table_without_vectors_round_trips_as_empty_rows() -> None:
    table = VectorTable(rows=3)
    assert table.export(np.array([True, True, False])) == {}
    restored = VectorTable.from_arrays({}, rows=2)
    assert (restored.model_id, restored.dim, len(restored)) == ("", 0, 2)
    assert restored.present.view.tolist() == [False, False]
    assert restored.adopt("m1", 3) is True
    assert restored.similarities(E0).tolist() == [0.0, 0.0]


def test_a_model_without_vectors_yet_survives_a_round_trip_as_usable_rows() -> None:
    table = table_with(2, {})
    restored = VectorTable.from_arrays(table.export(np.array([True, True])), rows=2)
    assert restored.model_id == "m1"
    assert len(restored) == 2
    assert not restored.present.view.any()
    restored.adopt("m1", 3)
    restored.put(np.array([1]), E1[None, :])
    assert restored.similarities(E1).tolist() == pytest.approx([0.0, 1.0], abs=QUANT)


@pytest.mark.parametrize("rows", [2, 4])
def test_from_arrays_rejects_a_row_count_other_than_the_index(rows: int) -> None:
    arrays = table_with(3, {0: E0}).export(np.ones(3, dtype=bool))
    with pytest.raises(ValueError, match="disagree"):
        VectorTable.from_arrays(arrays, rows=rows)


def test_from_arrays_rejects_a_present_column_of_another_length() -> None:
    arrays = table_with(3, {0: E0}).export(np.ones(3, dtype=bool))
    arrays["vector_present"] = arrays["vector_present"][:2]
    with pytest.raises(ValueError, match="disagree"):
        VectorTable.from_arrays(arrays, rows=3)


def _unit_rows(count: int, dim: int, seed: int = 3) -> np.ndarray:
    rng = np.random.default_rng(seed)
    rows = rng.standard_normal((count, dim)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_quantized_rows_score_within_a_few_thousandths_of_float32_across_scan_blocks() -> None:
    """Rows are kept as int8 with a scale each; the scan widens them a block at a time. Over more rows than
    one block (so the block edges are crossed, the last one partial) every cosine stays within 0.005 of the
    float32 product, and the best rows come out in the same order."""
    count = SCAN_BLOCK * 2 + 37
    rows = _unit_rows(count, 64)
    table = VectorTable(rows=count)
    table.adopt("m1", 64)
    table.put(np.arange(count), rows)
    query = _unit_rows(1, 64, seed=9)[0]
    exact = rows @ query
    got = table.similarities(query)
    assert got.dtype == np.float32 and got.shape == (count,)
    assert np.abs(got - exact).max() < 0.005
    assert np.argsort(-got)[:5].tolist() == np.argsort(-exact)[:5].tolist()
    assert table.matrix.view.nbytes == count * 64  # one byte a component
    assert np.abs(table.rows([0, count - 1]) - rows[[0, count - 1]]).max() <= np.abs(rows).max() / 254 + 1e-7


def test_quantize_keeps_each_rows_largest_component_and_zero_rows() -> None:
    rows, scale = quantize(np.array([[0.6, -0.8, 0.0], [0.0, 0.0, 0.0]], dtype=np.float32))
    assert rows.dtype == np.int8 and rows[0].tolist() == [95, -127, 0] and rows[1].tolist() == [0, 0, 0]
    assert scale[0] * -127 == pytest.approx(-0.8) and scale[1] == 0.0


def test_a_format_6_snapshot_of_float32_rows_is_quantized_when_loaded() -> None:
    """Snapshots written before int8 rows hold the float32 matrix and no scales: they load (no rebuild of
    100k entries after an upgrade) and score as before."""
    arrays = table_with(3, {0: E0, 2: DIAG}).export(np.ones(3, dtype=bool))
    arrays["vectors"] = table_with(3, {0: E0, 2: DIAG}).rows(np.arange(3))
    del arrays["vector_scale"]
    restored = VectorTable.from_arrays(arrays, rows=3)
    assert restored.matrix.view.dtype == np.int8
    assert restored.similarities(E1).tolist() == pytest.approx([0.0, 0.0, 0.8], abs=0.005)


def test_from_arrays_rejects_a_scale_column_of_another_length() -> None:
    arrays = table_with(3, {0: E0}).export(np.ones(3, dtype=bool))
    arrays["vector_scale"] = arrays["vector_scale"][:2]
    with pytest.raises(ValueError, match="disagree"):
        VectorTable.from_arrays(arrays, rows=3)


# ---------------------------------------------------------------------- VectorFiles


@pytest.fixture
def files(tmp_path: Path) -> VectorFiles:
    return VectorFiles(tmp_path / "embeddings")


def test_write_read_round_trip_as_float32(files: VectorFiles) -> None:
    vector = np.array([0.25, -1.5, 3.0], dtype=np.float64)
    files.write("abc", "some text", vector)
    assert os.path.getsize(files.path("abc")) == 8 + 12  # the stamp, then raw float32
    read = files.read("abc", "some text", 3)
    assert read is not None
    assert read.dtype == np.float32
    assert read.tolist() == [0.25, -1.5, 3.0]


def test_path_is_the_id_dot_bin_in_the_directory(files: VectorFiles) -> None:
    assert Path(files.path("abc")) == files.directory / "abc.bin"


def test_a_cached_vector_is_only_read_back_for_the_text_it_was_made_from(files: VectorFiles) -> None:
    files.write("abc", "the office is in lisbon", E0)
    assert files.read("abc", "the office moved to porto", 3) is None
    assert files.read("abc", "the office is in lisbon ", 3) is None


def test_the_age_of_a_cache_file_does_not_matter(files: VectorFiles) -> None:
    files.write("abc", "text", E0)
    os.utime(files.path("abc"), (1, 1))  # older than any entry: the stamp, not the clock, says what it is of
    fresh = files.read("abc", "text", 3)
    assert fresh is not None
    assert fresh.tolist() == E0.tolist()


@pytest.mark.parametrize("dim", [2, 4, 0])
def test_read_returns_none_when_the_size_is_not_dim_floats(files: VectorFiles, dim: int) -> None:
    files.write("abc", "text", E0)
    assert files.read("abc", "text", dim) is None


@pytest.mark.parametrize("keep", [0, 5, 8, 10, 19])
def test_a_torn_cache_file_is_never_read_as_a_vector(files: VectorFiles, keep: int) -> None:
    files.write("abc", "text", E0)
    with open(files.path("abc"), "r+b") as f:
        f.truncate(keep)
    assert files.read("abc", "text", 3) is None


def test_a_cache_file_of_the_right_size_with_damaged_bytes_is_not_read(files: VectorFiles) -> None:
    files.write("abc", "text", E0)
    data = bytearray(Path(files.path("abc")).read_bytes())
    data[-1] ^= 0x40  # e.g. a block of another file after a crash
    Path(files.path("abc")).write_bytes(bytes(data))
    assert files.read("abc", "text", 3) is None


def test_an_old_unstamped_cache_file_is_not_read(files: VectorFiles) -> None:
    files.directory.mkdir()
    np.asarray(E0, dtype=np.float32).tofile(files.path("abc"))  # the raw float32 files of earlier versions
    assert files.read("abc", "text", 3) is None
    assert files.read("abc", "text", 1) is None  # 12 bytes: not 8 + 4 of a 1-float vector either


def test_read_returns_none_when_absent(files: VectorFiles) -> None:
    assert files.read("missing", "text", 3) is None  # not even a directory yet
    files.write("other", "text", E0)
    assert files.read("missing", "text", 3) is None


def test_remove_deletes_the_file_and_tolerates_absence(files: VectorFiles) -> None:
    files.write("abc", "text", E0)
    files.remove("abc")
    assert not os.path.exists(files.path("abc"))
    assert files.read("abc", "text", 3) is None
    files.remove("abc")  # already gone: no error


def test_write_failure_is_swallowed(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    files = VectorFiles(blocker)  # the cache directory cannot be created
    files.write("abc", "text", E0)
    assert files.read("abc", "text", 3) is None


def test_no_record_before_adopt(files: VectorFiles) -> None:
    assert files.record() is None


def test_adopt_writes_the_model_record(files: VectorFiles) -> None:
    files.adopt("minilm", 256)
    assert files.record() == ("minilm", 256)
    assert json.loads((files.directory / MODEL_RECORD).read_text()) == {"model": "minilm", "dim": 256}


def test_adopt_a_new_model_removes_cached_vectors(files: VectorFiles) -> None:
    files.adopt("m1", 3)
    files.write("a", "text", E0)
    files.write("b", "text", E1)
    files.adopt("m2", 3)
    assert files.record() == ("m2", 3)
    assert sorted(os.listdir(files.directory)) == [MODEL_RECORD]
    assert files.read("a", "text", 3) is None


def test_adopt_the_same_model_with_another_dim_removes_cached_vectors(files: VectorFiles) -> None:
    files.adopt("m1", 3)
    files.write("a", "text", E0)
    files.adopt("m1", 4)
    assert files.record() == ("m1", 4)
    assert not os.path.exists(files.path("a"))


def test_adopt_the_same_model_keeps_cached_vectors(files: VectorFiles) -> None:
    files.adopt("m1", 3)
    files.write("a", "text", E0)
    files.adopt("m1", 3)
    read = files.read("a", "text", 3)
    assert read is not None
    assert read.tolist() == E0.tolist()


def test_adopt_without_a_record_treats_existing_files_as_another_models(files: VectorFiles) -> None:
    files.write("stray", "text", E0)  # a cache from before records, or a lost record: origin unknown
    files.adopt("m1", 3)
    assert not os.path.exists(files.path("stray"))
    assert files.record() == ("m1", 3)


@pytest.mark.parametrize(
    "text",
    [
        "{not json",
        "",
        "[]",
        "null",
        '{"model": "m1"}',
        '{"dim": 3}',
        '{"model": "m1", "dim": "three"}',
    ],
)
def test_a_corrupt_model_record_reads_as_none(files: VectorFiles, text: str) -> None:
    files.directory.mkdir(parents=True)
    (files.directory / MODEL_RECORD).write_text(text)
    assert files.record() is None


def test_adopt_over_a_corrupt_record_empties_the_cache_and_rewrites_it(files: VectorFiles) -> None:
    files.adopt("m1", 3)
    files.write("a", "text", E0)
    (files.directory / MODEL_RECORD).write_text("{broken")
    files.adopt("m1", 3)
    assert files.record() == ("m1", 3)
    assert not os.path.exists(files.path("a"))


def test_a_broken_vector_with_nan_or_inf_is_stored_as_zeros_without_harming_other_rows() -> None:
    table = table_with(2, {0: E0})
    with np.errstate(all="raise"):  # no invalid-cast warning either
        table.put(np.array([1]), np.array([[np.nan, np.inf, -np.inf]], dtype=np.float32))
    assert table.similarities(E0).tolist() == pytest.approx([1.0, 0.0], abs=QUANT)
