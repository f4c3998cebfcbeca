"""BM25Index against independent implementations, on a seeded random corpus.

1. A plain-Python reference of RockBot's ranker, written here from its definition (per-document token
   lists, no shared code with the package):
     idf(n)  = ln((N - n + 0.5) / (n + 0.5) + 1)
     norm(f) = f (k1 + 1) / (f + k1 (1 - b + b dl / avgdl)),  k1 = 1.5, b = 0.75
     score   = Σ distinct query words idf·norm(tf) + Σ distinct adjacent query pairs 2·idf·norm(pair tf),
   where a pair's tf counts its adjacent occurrences in the document and its n the documents having it.
   Scores must agree to 1e-9 relative and the ranking must agree (ties: most recently added first).

2. rank_bm25 (BM25Okapi), for single-word queries only, since it has no pair bonus. Its idf differs from
   RockBot's: ln((N - n + 0.5) / (n + 0.5)) with an epsilon floor for common words, so raw scores are not
   comparable. Two honest checks instead:
   - exact: recompute RockBot's score from rank_bm25's own term counts (doc_freqs), doc_len and avgdl
     with RockBot's idf, and compare to ours; this checks our tf/length normalisation against theirs;
   - order: for words in fewer than N/2 documents both idfs are positive, and for a one-word query the
     idf is a common factor, so the two rankings must coincide (and our/their score ratio be constant).
"""

from __future__ import annotations

import itertools
import math
import random
from collections import Counter

import pytest
from rank_bm25 import BM25Okapi

from rockmem_mcp.search.bm25 import BM25Index

K1, B, PAIR_WEIGHT = 0.6, 0.9, 1.0  # the product's constants, restated so a change is deliberate
REL = 1e-9

VOCAB = (
    "alpha beta gamma delta epsilon zeta theta iota kappa lambda sigma omega apple banana cherry grape "
    "lemon mango olive peach river stone cloud storm forest desert ocean island valley harbor python "
    "rust kotlin swift haskell scala julia elixir"
).split()


class Reference:
    """RockBot's ranker over plain token lists; documents in insertion (= slot) order."""

    def __init__(self) -> None:
        self.docs: dict[str, list[str]] = {}

    def add(self, key: str, tokens: list[str]) -> None:
        self.docs.pop(key, None)
        self.docs[key] = tokens

    def remove(self, key: str) -> None:
        del self.docs[key]

    def scores(self, query: list[str]) -> dict[str, float]:
        docs = self.docs
        n_docs = len(docs)
        if n_docs == 0:
            return {}
        avgdl = (sum(len(d) for d in docs.values()) / n_docs) or 1.0
        word_tf = {k: Counter(d) for k, d in docs.items()}
        pair_tf = {k: Counter(itertools.pairwise(d)) for k, d in docs.items()}

        def idf(n: int) -> float:
            return math.log((n_docs - n + 0.5) / (n + 0.5) + 1)

        def norm(f: int, dl: int) -> float:
            return f * (K1 + 1) / (f + K1 * (1 - B + B * dl / avgdl))

        scores = dict.fromkeys(docs, 0.0)
        for counts, features, weight in (
            (word_tf, dict.fromkeys(query), 1.0),
            (pair_tf, dict.fromkeys(itertools.pairwise(query)), PAIR_WEIGHT),
        ):
            for feature in features:
                having = {k: c[feature] for k, c in counts.items() if c[feature]}
                for key, f in having.items():
                    scores[key] += weight * idf(len(having)) * norm(f, len(docs[key]))
        return {k: s for k, s in scores.items() if s > 0}


def random_doc(rng: random.Random) -> list[str]:
    # Zipf-like word choice: a few common words, a long tail; lengths 0..30 (empty documents included).
    weights = [1 / (i + 1) for i in range(len(VOCAB))]
    return rng.choices(VOCAB, weights=weights, k=rng.randint(0, 30))


def random_queries(rng: random.Random, docs: list[list[str]], count: int) -> list[list[str]]:
    queries = []
    for i in range(count):
        if i % 2 and docs:  # a slice of a real document: its adjacent pairs exist
            doc = rng.choice([d for d in docs if len(d) >= 2] or [["alpha", "beta"]])
            start = rng.randrange(len(doc) - 1)
            queries.append(doc[start : start + rng.randint(2, 4)])
        else:
            queries.append(rng.choices(VOCAB, k=rng.randint(1, 5)) + ["unknownword"] * (i % 7 == 0))
    return queries


def assert_matches_reference(index: BM25Index, reference: Reference, query: list[str]) -> None:
    expected = reference.scores(query)
    hits = index.search(query, limit=10_000)
    got = {index.keys[s]: float(v) for s, v in zip(hits.slots.tolist(), hits.scores.tolist(), strict=True)}
    assert hits.total == len(expected), query
    assert set(got) == set(expected), query
    for key, score in got.items():
        assert score == pytest.approx(expected[key], rel=REL), (query, key)
    # Ranking: non-increasing reference score; equal scores newest (latest added) first.
    slot_of = {k: i for i, k in enumerate(reference.docs)}
    order = [index.keys[s] for s in hits.slots.tolist()]
    for first, second in itertools.pairwise(order):
        a, b = expected[first], expected[second]
        if math.isclose(a, b, rel_tol=REL):
            assert slot_of[first] > slot_of[second], (query, first, second)
        else:
            assert a > b, (query, first, second)
    # A limit keeps the best scores.
    top = index.search(query, limit=10)
    assert top.scores.tolist() == pytest.approx(sorted(expected.values(), reverse=True)[:10], rel=REL)


@pytest.fixture(scope="module")
def corpus() -> list[list[str]]:
    rng = random.Random(20240601)
    return [random_doc(rng) for _ in range(300)]


def test_scores_and_ranking_match_the_reference(corpus: list[list[str]]) -> None:
    index, reference = BM25Index(), Reference()
    for i, doc in enumerate(corpus):
        index.add(f"d{i}", doc)
        reference.add(f"d{i}", doc)
    for query in random_queries(random.Random(1), corpus, 300):
        assert_matches_reference(index, reference, query)


def test_reference_agreement_survives_rewrites_removals_and_snapshots(corpus: list[list[str]]) -> None:
    rng = random.Random(2)
    index, reference = BM25Index(), Reference()
    for i, doc in enumerate(corpus):
        index.add(f"d{i}", doc)
        reference.add(f"d{i}", doc)
    for i in rng.sample(range(len(corpus)), 60):
        index.remove(f"d{i}")
        reference.remove(f"d{i}")
    for i in rng.sample(range(len(corpus)), 40):
        doc = random_doc(rng)
        index.add(f"d{i}", doc)
        reference.add(f"d{i}", doc)
    live = index.live_slots()
    index = BM25Index.from_arrays(index.export_arrays(live), [index.keys[s] for s in live], list(index.terms))
    for i in range(300, 340):  # postings now in base and delta
        doc = random_doc(rng)
        index.add(f"d{i}", doc)
        reference.add(f"d{i}", doc)
    for query in random_queries(random.Random(3), list(reference.docs.values()), 200):
        assert_matches_reference(index, reference, query)


# ---------------------------------------------------------------------- rank_bm25, single words
def rank_bm25_fixture(corpus: list[list[str]]) -> tuple[BM25Index, BM25Okapi]:
    index = BM25Index()
    for i, doc in enumerate(corpus):
        index.add(f"d{i}", doc)
    return index, BM25Okapi(corpus, k1=K1, b=B)


def our_scores(index: BM25Index, word: str) -> dict[int, float]:
    hits = index.search([word], limit=10_000)
    return {int(index.keys[s][1:]): float(v) for s, v in zip(hits.slots.tolist(), hits.scores.tolist(), strict=True)}


def test_single_word_scores_from_rank_bm25_statistics(corpus: list[list[str]]) -> None:
    index, okapi = rank_bm25_fixture(corpus)
    n_docs = okapi.corpus_size
    for word in VOCAB:
        doc_freq = sum(1 for counts in okapi.doc_freqs if word in counts)
        idf = math.log((n_docs - doc_freq + 0.5) / (doc_freq + 0.5) + 1)  # RockBot's idf
        expected = {}
        for i, counts in enumerate(okapi.doc_freqs):
            f = counts.get(word, 0)
            if f:
                expected[i] = idf * f * (K1 + 1) / (f + K1 * (1 - B + B * okapi.doc_len[i] / okapi.avgdl))
        got = our_scores(index, word)
        assert got.keys() == expected.keys(), word
        for i, score in got.items():
            assert score == pytest.approx(expected[i], rel=REL), (word, i)


def test_single_word_ranking_matches_rank_bm25(corpus: list[list[str]]) -> None:
    index, okapi = rank_bm25_fixture(corpus)
    n_docs = len(corpus)
    rare = [w for w in VOCAB if 0 < sum(1 for d in corpus if w in d) < n_docs / 2]
    assert len(rare) >= 10  # the comparison covers a good part of the vocabulary
    for word in rare:
        theirs = okapi.get_scores([word])
        their_order = sorted((i for i in range(n_docs) if theirs[i] > 0), key=lambda i: (-theirs[i], -i))
        got = our_scores(index, word)
        hits = index.search([word], limit=10_000)
        assert [int(index.keys[s][1:]) for s in hits.slots.tolist()] == their_order, word
        ratios = {got[i] / theirs[i] for i in their_order}
        assert max(ratios) == pytest.approx(min(ratios), rel=REL), word  # idf is the only difference
