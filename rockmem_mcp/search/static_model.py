"""The bundled static embedding model, with numpy alone: a BERT uncased WordPiece tokenizer and a mean.

The model (rockmem_mcp/data/minilm-static, built by benchmarks/build_static_model.py) is all-MiniLM-L6-v2
distilled with model2vec: one float16 vector per WordPiece token. A text's vector is the mean of its
tokens' vectors, as model2vec's `StaticModel.encode` computes it, step for step:

1. the text is cut to `max_length × median_token_length` characters (model2vec's cheap pre-cut);
2. the literal special tokens `[PAD]` and `[UNK]` are split out first, as the tokenizer's added tokens;
3. BERT's normaliser: control characters dropped, whitespace to a space, CJK ideographs set apart as
   words, accents stripped (NFD, non-spacing marks dropped), then lowercase, one character at a time;
4. BERT's pre-tokenizer: words split on whitespace, each punctuation character a word of its own;
5. WordPiece: greedy longest match first, `##` continuations; a word that cannot be matched whole, or
   longer than 100 characters, is one `[UNK]`;
6. the first `max_length` tokens kept, the `[UNK]`s then dropped, the mean of the rest's vectors taken
   (no tokens: a zero vector), and the mean scaled to unit length.

Two departures from model2vec, on by default (`StaticEmbeddings(model2vec_exact=True)` gives its encode back):
- **the whole text**: no 512-token or character cut below `WHOLE_TEXT_CHARS`, so a long memory is embedded whole
  (a mean: every part of it counts, not its opening alone);
- **unknown words add nothing**: an ASCII word the vocabulary can only spell out in pieces of under
  `GIBBERISH_PIECE_CHARS` characters on average ("qwxz" -> q ##w ##x ##z), a word it cannot spell at all, and
  punctuation standing alone are left out of the mean (other scripts keep their pieces, as model2vec reads
  them). Such pieces carry no meaning but pull every text toward the same direction: "qwxz blorft" had a
  cosine of 0.42 with an unrelated memory; without them it has no vector (zero) and matches nothing.
Both are kept for what they guarantee; neither moved a development corpus beyond +-0.01 R@5 (BENCHMARKS.md).

Words and characters are cached, so the Python work per text is a translate, a split and dict look-ups;
the arithmetic is one gather and one `np.add.reduceat` per batch.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

STATIC = "static"  # ROCKMEM_EMBEDDING_MODEL value that names this model
DATA = "minilm-static"
WORD_CACHE_LIMIT = 200_000  # distinct words kept (~40 MB at the worst); the cache starts over past it
UNK = -1  # stands for [UNK] until it is dropped, after the length cut
WHOLE_TEXT_CHARS = 200_000  # a text is embedded whole up to this (tokenizing it costs ~50 ms)
GIBBERISH_PIECE_CHARS = 2.5  # a word spelt in pieces shorter than this on average is not a word the model knows


def bundled_path() -> Path:
    """The folder of the bundled model inside the installed package (a real folder in a wheel install)."""
    return Path(str(resources.files("rockmem_mcp") / "data" / DATA))


def is_cjk(code: int) -> bool:
    return (
        0x4E00 <= code <= 0x9FFF
        or 0x3400 <= code <= 0x4DBF
        or 0x20000 <= code <= 0x2A6DF
        or 0x2A700 <= code <= 0x2B73F
        or 0x2B740 <= code <= 0x2B81F
        or 0x2B920 <= code <= 0x2CEAF
        or 0xF900 <= code <= 0xFAFF
        or 0x2F800 <= code <= 0x2FA1F
    )


def is_punctuation(char: str) -> bool:
    """BERT's punctuation: any ASCII punctuation ($, +, ^ ... too) or a Unicode P* character."""
    code = ord(char)
    if 33 <= code <= 47 or 58 <= code <= 64 or 91 <= code <= 96 or 123 <= code <= 126:
        return True
    return unicodedata.category(char).startswith("P")


def is_whitespace(char: str) -> bool:
    return char in "\t\n\r " or unicodedata.category(char) == "Zs" or char in "\u2028\u2029"


def is_control(char: str) -> bool:
    return char not in "\t\n\r" and unicodedata.category(char).startswith("C")


class CharMap(dict[int, str]):
    """str.translate's table, filled on first sight of each character: the normaliser's output for it,
    with punctuation set between spaces so that a plain split is the pre-tokenizer."""

    def __init__(self, lowercase: bool, strip_accents: bool, clean_text: bool, cjk: bool) -> None:
        super().__init__()
        self.lowercase, self.strip_accents, self.clean_text, self.cjk = lowercase, strip_accents, clean_text, cjk

    def __missing__(self, code: int) -> str:
        self[code] = out = self.normalised(chr(code))
        return out

    def normalised(self, char: str) -> str:
        if self.clean_text:
            if char in "\x00\ufffd" or is_control(char):
                return ""
            if is_whitespace(char):
                return " "
        spaced = self.cjk and is_cjk(ord(char))
        chars = unicodedata.normalize("NFD", char) if self.strip_accents else char
        if self.strip_accents:
            chars = "".join(c for c in chars if unicodedata.category(c) != "Mn")
        if self.lowercase:
            chars = "".join(c.lower() for c in chars)  # one character at a time: no final-sigma rule
        out = "".join(f" {c} " if is_punctuation(c) else " " if is_whitespace(c) else c for c in chars)
        return f" {out} " if spaced else out


class WordPiece:
    """BERT's uncased tokenizer as token ids (`UNK` for [UNK]), with a cache of words already seen."""

    def __init__(self, vocab: list[str], settings: dict[str, Any]) -> None:
        self.ids = {token: i for i, token in enumerate(vocab)}
        self.prefix = settings["continuing_subword_prefix"]
        self.max_chars = settings["max_input_chars_per_word"]
        self.unk = settings["unk_token"]
        self.chars = CharMap(settings["lowercase"], settings["strip_accents"], settings["clean_text"], True)
        if not settings["handle_chinese_chars"]:
            self.chars.cjk = False
        specials = [t for t in ("[PAD]", self.unk) if t in self.ids]  # the tokenizer's added tokens
        self.specials = re.compile("(" + "|".join(map(re.escape, specials)) + ")") if specials else None
        self.words: dict[str, tuple[int, ...]] = {}

    def __call__(self, text: str) -> list[int]:
        if self.specials is None or "[" not in text:
            return self._ids(text)
        ids: list[int] = []
        for i, part in enumerate(self.specials.split(text)):
            if i % 2:
                ids.append(UNK if part == self.unk else self.ids[part])
            elif part:
                ids += self._ids(part)
        return ids

    def _ids(self, text: str) -> list[int]:
        return [i for _, pieces in self.word_pieces(text) for i in pieces]

    def known_ids(self, text: str) -> list[int]:
        """The ids of the words the vocabulary knows (see the module docstring): [UNK]s dropped, and
        punctuation alone ("?", "!!!") is no word; the spelt-in-pieces test applies to ASCII words only (the
        vocabulary holds few whole words of other scripts: Cyrillic or Hangul is always spelt in pieces)."""
        known: list[int] = []
        for word, pieces in self.word_pieces(text):
            if UNK in pieces or not any(c.isalnum() for c in word):
                continue
            if len(pieces) > 1 and word.isascii() and len(word) < GIBBERISH_PIECE_CHARS * len(pieces):
                continue
            known += pieces
        return known

    def word_pieces(self, text: str) -> list[tuple[str, tuple[int, ...]]]:
        """Each word of `text` (BERT's normaliser and pre-tokenizer) with its WordPiece ids."""
        words = self.words
        if len(words) > WORD_CACHE_LIMIT:
            words.clear()
        out: list[tuple[str, tuple[int, ...]]] = []
        for word in text.translate(self.chars).split(" "):
            if not word:
                continue
            pieces = words.get(word)
            if pieces is None:
                pieces = words[word] = self._pieces(word)
            out.append((word, pieces))
        return out

    def _pieces(self, word: str) -> tuple[int, ...]:
        if len(word) > self.max_chars:
            return (UNK,)
        pieces: list[int] = []
        start = 0
        while start < len(word):
            end = len(word)
            while end > start:
                piece = word[start:end] if start == 0 else self.prefix + word[start:end]
                found = self.ids.get(piece)
                if found is not None:
                    pieces.append(found)
                    break
                end -= 1
            else:
                return (UNK,)
            start = end
        return tuple(pieces)


class StaticEmbeddings:
    """The bundled model as an embedding provider (see search/embeddings.py): `embed` gives unit rows."""

    def __init__(self, folder: Path | None = None, model2vec_exact: bool = False) -> None:
        folder = folder or bundled_path()
        self.model2vec_exact = model2vec_exact
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        vocab = (folder / "vocab.txt").read_text(encoding="utf-8").split("\n")[:-1]
        # Memory-mapped: the pages of tokens never used are never read.
        self.vectors = np.load(folder / "embeddings.npy", mmap_mode="r", allow_pickle=False)
        if self.vectors.shape != (len(vocab), config["dim"]):
            raise ValueError(f"{folder}: {self.vectors.shape} vectors for {len(vocab)} tokens of {config['dim']}")
        # The vectors differ from model2vec's (whole text, known words): another id, so stored ones are rebuilt.
        self.model_id = f"static:{config['model_id']}" + ("" if model2vec_exact else "+whole-known")
        self.dim = int(config["dim"])
        self.max_length: int | None = config["max_length"]
        self.normalize = bool(config["normalize"])
        self.max_chars = None if self.max_length is None else self.max_length * config["median_token_length"]
        self.tokenize = WordPiece(vocab, config["tokenizer"])

    def token_ids(self, text: str) -> list[int]:
        """The ids whose vectors are averaged for `text`: its known words, whole; with `model2vec_exact`,
        model2vec's `tokenize` of the pre-cut text."""
        if not self.model2vec_exact:
            return self.tokenize.known_ids(text[:WHOLE_TEXT_CHARS])
        ids = self.tokenize(text if self.max_chars is None else text[: self.max_chars])
        if self.max_length is not None:
            ids = ids[: self.max_length]
        return [i for i in ids if i != UNK]

    def embed(self, texts: Sequence[str], *, interactive: bool = False) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        rows = [self.token_ids(t) for t in texts]
        filled = [i for i, ids in enumerate(rows) if ids]
        if filled:
            counts = np.array([len(rows[i]) for i in filled])
            flat = np.fromiter((t for i in filled for t in rows[i]), dtype=np.intp, count=int(counts.sum()))
            starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
            sums = np.add.reduceat(self.vectors[flat].astype(np.float32), starts, axis=0)
            # Rounded to the matrix's float16 as model2vec's mean is: the same vectors as its encode gives.
            out[filled] = (sums / counts[:, None]).astype(self.vectors.dtype)
        if self.normalize:
            norms = np.linalg.norm(out, axis=1, keepdims=True)
            out /= np.where(norms == 0, 1.0, norms)
        return out
