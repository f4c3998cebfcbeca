"""The bundled model's numpy runtime against model2vec's own StaticModel.encode on the same vectors."""

from __future__ import annotations

import json
import random
import subprocess
import sys

import numpy as np
import pytest

from rockmem_mcp.search.static_model import StaticEmbeddings, bundled_path

model2vec = pytest.importorskip("model2vec")  # the test extra
tokenizers = pytest.importorskip("tokenizers")

HAND_PICKED = [
    "",
    "   \t\n ",
    "Hello, world!",
    "Café naïve résumé — déjà vu",
    "東京で会いましょう、明日の午後",
    "ΣΊΣΥΦΟΣ Straße İstanbul ǅ ﬁ",
    "Привет, мир! مرحبا بالعالم",
    "emoji 😀👍🏽 and zero\u200bwidth, nbsp\u00a0ideographic\u3000space",
    "controls\x00\x07\x0b\x1f\x7f\ufffd removed",
    "[UNK] then [PAD]x and a[UNK]b, [unk] lower",
    "don't stop-believing... $100 @home #tag a_b+c=d^e`f|g~h",
    "Whiskerino, the tabby, naps on the windowsill every afternoon",
    "supercalifragilisticexpialidocious " + "x" * 150,
    "Caroline went to the LGBTQ support group on 7 May 2023.",
]
ALPHABET = (
    "abcdefghijklmnopqrstuvwxyz ABCXYZ0123456789.,;:!?'\"()[]{}-_/\\@#$%^&*+=<>|~`"
    "éèüößñçøåæœ中文日本語한국어Ωπσςабв😀\t\n\u00a0\u2028\u0301\u0308"
)


def varied_texts() -> list[str]:
    rng = random.Random(24)
    vocab = (bundled_path() / "vocab.txt").read_text(encoding="utf-8").split("\n")[:-1]
    texts = list(HAND_PICKED)
    texts += ["".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 160))) for _ in range(200)]
    texts += [" ".join(rng.choice(vocab) for _ in range(rng.randint(1, 40))) for _ in range(80)]
    # Past the 512-token cut and past model2vec's character pre-cut (512 × the median token length).
    texts += [" ".join(rng.choice(vocab) for _ in range(rng.randint(400, 1500))) for _ in range(20)]
    return texts


def reference_model() -> object:
    """model2vec's StaticModel over the same vectors, with the tokenizer the build recorded, built by the
    `tokenizers` library: the distilled tokenizer is BertNormalizer + BertPreTokenizer + WordPiece."""
    from tokenizers import AddedToken, Tokenizer, models, normalizers, pre_tokenizers

    folder = bundled_path()
    config = json.loads((folder / "config.json").read_text())
    settings = config["tokenizer"]
    vocab = (folder / "vocab.txt").read_text(encoding="utf-8").split("\n")[:-1]
    tokenizer = Tokenizer(
        models.WordPiece(
            {t: i for i, t in enumerate(vocab)},
            unk_token=settings["unk_token"],
            continuing_subword_prefix=settings["continuing_subword_prefix"],
            max_input_chars_per_word=settings["max_input_chars_per_word"],
        )
    )
    tokenizer.normalizer = normalizers.BertNormalizer(
        clean_text=settings["clean_text"],
        handle_chinese_chars=settings["handle_chinese_chars"],
        strip_accents=settings["strip_accents"],
        lowercase=settings["lowercase"],
    )
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.add_special_tokens([AddedToken("[PAD]", normalized=False), AddedToken("[UNK]", normalized=False)])
    vectors = np.load(folder / "embeddings.npy")
    return model2vec.StaticModel(vectors=vectors, tokenizer=tokenizer, normalize=config["normalize"])


def test_vectors_match_model2vec_encode() -> None:
    texts = varied_texts()
    assert len(texts) >= 300
    ours = StaticEmbeddings(model2vec_exact=True).embed(texts)
    theirs = np.asarray(reference_model().encode(texts), dtype=np.float32)
    assert ours.dtype == np.float32 and ours.shape == theirs.shape == (len(texts), 256)
    ours_norm, theirs_norm = np.linalg.norm(ours, axis=1), np.linalg.norm(theirs, axis=1)
    assert np.array_equal(ours_norm == 0, theirs_norm < 1e-6)  # the same texts have no tokens at all
    filled = ours_norm > 0
    assert filled.sum() > 0.9 * len(texts)
    cosines = (ours[filled] * theirs[filled]).sum(axis=1) / theirs_norm[filled]
    worst = int(np.argmin(cosines))
    assert cosines.min() >= 0.9999, np.asarray(texts, dtype=object)[filled][worst]
    assert np.allclose(ours_norm[filled], 1.0, atol=1e-5)


def test_token_ids_match_the_tokenizers_library() -> None:
    reference = reference_model()
    ours = StaticEmbeddings(model2vec_exact=True)
    for text in varied_texts():
        assert ours.token_ids(text) == reference.tokenize([text[: ours.max_chars]])[0], text


def test_a_long_text_is_embedded_whole_not_just_its_opening() -> None:
    model = StaticEmbeddings()
    opening = " ".join(["the quarterly budget spreadsheet for accounting"] * 120)  # 960 tokens
    text = opening + " " + " ".join(["my tabby cat Whiskerino sleeps on the windowsill"] * 20)
    whole, cut = model.embed([text])[0], StaticEmbeddings(model2vec_exact=True).embed([text])[0]
    cat = model.embed(["tabby cat sleeping on a windowsill"])[0]
    assert float(whole @ cat) > float(cut @ cat) + 0.1  # the 512-token cut never saw the ending (0.31 vs 0.16)
    assert model.model_id != StaticEmbeddings(model2vec_exact=True).model_id  # stored vectors are rebuilt


def test_words_the_model_does_not_know_add_nothing() -> None:
    model = StaticEmbeddings()
    nonsense = model.embed(["qwxz blorft", "zzkq vrrp xqj"])
    assert not nonsense.any()  # no known word: no vector, so no similarity to anything
    memories = model.embed(["I adopted a tabby cat named Whiskerino", "We moved the billing service to PostgreSQL"])
    noisy = model.embed(["qwxz nothing matches this"])[0]
    assert float((memories @ noisy).max()) < 0.2  # model2vec's mean gave 0.42 with the billing memory
    # A real word spelt in a few long pieces still counts.
    assert model.embed(["lgbtq"]).any() and model.embed(["Whiskerino"]).any()
    # Punctuation alone is no word: "qwxz?" had the vector of "?" (0.50 with "Wow, that is great!").
    assert not model.embed(["qwxz?", "zzkq, vrrp; xqj.", "qwxz blorft!!!"]).any()


def test_other_scripts_keep_their_vectors() -> None:
    # The vocabulary spells Cyrillic, Hangul and kana one character a piece: the unknown-word test is for ASCII.
    model, exact = StaticEmbeddings(), StaticEmbeddings(model2vec_exact=True)
    for text in ("привет мир как дела", "안녕하세요 친구", "ありがとうございます", "東京で会いましょう"):
        assert model.token_ids(text) == exact.token_ids(text), text
        assert model.embed([text]).any()


def test_a_repeated_text_gives_the_same_vector_from_the_word_cache() -> None:
    model = StaticEmbeddings()
    first = model.embed(["the tabby naps", "naps"])
    assert model.tokenize.words  # filled
    assert np.array_equal(model.embed(["the tabby naps", "naps"]), first)
    assert model.embed([]).shape == (0, 256)


def test_the_runtime_imports_numpy_alone() -> None:
    code = (
        "import sys\n"
        "from rockmem_mcp.search.static_model import StaticEmbeddings\n"
        "StaticEmbeddings().embed(['numpy alone'])\n"
        "print(sorted({'model2vec', 'tokenizers', 'torch', 'transformers'} & set(sys.modules)))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_the_bundled_folder_carries_its_licence_and_build_record() -> None:
    folder = bundled_path()
    assert "Apache License" in (folder / "LICENSE").read_text()
    assert "all-MiniLM-L6-v2" in (folder / "NOTICE").read_text()
    config = json.loads((folder / "config.json").read_text())
    assert config["licence"] == "Apache-2.0" and config["build_versions"]["model2vec"]
    assert np.load(folder / "embeddings.npy", mmap_mode="r").dtype == np.float16
