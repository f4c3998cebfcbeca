"""Deterministic synthetic memories and queries (seeded), shaped like agent memory.

Words follow a Zipf distribution over a generated vocabulary plus common English function words, so
posting lists range from a handful of documents to most of the corpus, as in real text.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path

FUNCTION_WORDS = (
    "the and for that with this from have has was were are not but about into over after before when "
    "user prefers likes wants uses works project team meeting deploy review email calendar note remember"
).split()
_SYLLABLES = "ka lo mi ra te zu vo ne si pa do fe gu hi ja ku le mo nu ri sa ti vu we xa yo ze".split()


def vocabulary(size: int, rng: random.Random) -> list[str]:
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 4))))
    return sorted(words)


class Corpus:
    def __init__(self, seed: int = 7, vocab_size: int = 30_000) -> None:
        self.rng = random.Random(seed)
        self.words = FUNCTION_WORDS + vocabulary(vocab_size, self.rng)
        weights = [1.0 / (rank + 1) ** 1.05 for rank in range(len(self.words))]
        total = sum(weights)
        self.cum_weights = []
        acc = 0.0
        for w in weights:
            acc += w / total
            self.cum_weights.append(acc)
        tops = ["user-preferences", "project-context", "anti-patterns", "people", "events", "tools", "notes"]
        self.categories = [f"{t}/{self.words[100 + i]}" for t in tops for i in range(30)] + tops
        self.tags = self.words[50:550]

    def sentence(self, n: int) -> str:
        return " ".join(self.rng.choices(self.words, cum_weights=self.cum_weights, k=n))

    def record(self, i: int) -> dict[str, object]:
        rng = self.rng
        return {
            "content": self.sentence(rng.randint(8, 40)).capitalize() + ".",
            "category": rng.choice(self.categories) if rng.random() < 0.9 else None,
            "tags": rng.sample(self.tags, rng.randint(0, 3)),
            "importance": round(rng.random(), 2),
            "created_at": f"2026-{1 + i % 10:02d}-{1 + i % 28:02d}T{i % 24:02d}:{i % 60:02d}:00Z",
        }

    def records(self, count: int) -> Iterator[dict[str, object]]:
        for i in range(count):
            yield self.record(i)

    def queries(self, count: int) -> list[str]:
        # 2-6 words; mid-frequency words dominate, with the odd very common one, as in real questions.
        return [self.sentence(self.rng.randint(2, 6)) for _ in range(count)]


def write_jsonl(path: Path, count: int, seed: int = 7) -> Path:
    corpus = Corpus(seed)
    with path.open("w", encoding="utf-8") as f:
        for record in corpus.records(count):
            f.write(json.dumps(record) + "\n")
    return path
