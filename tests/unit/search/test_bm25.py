"""BM25Index: scores against hand-derived values, the write operations, and snapshot arrays."""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Sequence

import numpy as np
import pytest

from rockmem_mcp.search import bm25
from rockmem_mcp.search.bm25 import K1 as PRODUCT_K1
from rockmem_mcp.search.bm25 import PAIR_WEIGHT, B, BM25Index

# The hand-computed corpus. N = 3, total length 9, avgdl = 3.
DOCS = {
    "d0": ["red", "apple", "pie"],  # dl 3; "red apple" adjacent
    "d1": ["green", "apple"],  # dl 2; no "red"
    "d2": ["red", "car", "fast", "apple"],  # dl 4; "red" and "apple" present but not adjacent
}

# idf(n) = ln((N - n + 0.5) / (n + 0.5) + 1) with N = 3:
IDF_RED = math.log(1.6)  # n=2: ln(1.5/2.5 + 1) = ln 1.6 = 0.470003629...
IDF_APPLE = math.log(8 / 7)  # n=3: ln(0.5/3.5 + 1) = ln(8/7) = 0.133531392...
IDF_PAIR = math.log(8 / 3)  # "red apple" adjacent in d0 only, n=1: ln(2.5/1.5 + 1) = ln(8/3) = 0.980829253...
# norm(f=1, dl) = 2.5 / (1 + 1.5 (0.25 + 0.75 dl/3)):
NORM_DL3 = 1.0  # 2.5 / (1 + 1.5 * 1.0)  = 2.5/2.5
NORM_DL2 = 20 / 17  # 2.5 / (1 + 1.5 * 0.75) = 2.5/2.125 = 1.176470588...
NORM_DL4 = 20 / 23  # 2.5 / (1 + 1.5 * 1.25) = 2.5/2.875 = 0.869565217...
# Query "red apple":
#   d0 = IDF_RED*1 + IDF_APPLE*1 + 2*IDF_PAIR*1          = 0.470004 + 0.133531 + 1.961659 = 2.565194
#   d2 = (IDF_RED + IDF_APPLE) * 20/23 (no pair bonus)  = 0.603535 * 0.869565           = 0.524813
#   d1 = IDF_APPLE * 20/17                               = 0.133531 * 1.176471           = 0.157096
EXPECTED_RED_APPLE = {"d0": 2.565193527893711, "d2": 0.5248130624958768, "d1": 0.15709575602885006}


# The hand-computed scores here use RockBot's k1, b and pair weight; the defaults are checked separately.
K1, HAND_B, HAND_PAIR = 1.5, 0.75, 2.0


def build(docs: dict[str, Sequence[str]], archived: Sequence[str] = ()) -> BM25Index:
    index = BM25Index(k1=K1, b=HAND_B, pair_weight=HAND_PAIR)
    for key, tokens in docs.items():
        index.add(key, tokens, archived=key in archived)
    return index


def ranked(index: BM25Index, tokens: Sequence[str], **kwargs) -> list[tuple[str, float]]:
    hits = index.search(tokens, **kwargs)
    return [(index.keys[s], float(score)) for s, score in zip(hits.slots.tolist(), hits.scores.tolist(), strict=True)]


def reference_scores(docs: dict[str, Sequence[str]], query: Sequence[str]) -> dict[str, float]:
    """The docstring's formula, directly (used where hand numbers would only repeat the arithmetic above)."""
    n_docs = len(docs)
    avgdl = sum(map(len, docs.values())) / n_docs

    def idf(n: int) -> float:
        return math.log((n_docs - n + 0.5) / (n + 0.5) + 1)

    def norm(f: int, dl: int) -> float:
        return f * (K1 + 1) / (f + K1 * (1 - HAND_B + HAND_B * dl / avgdl))

    scores = dict.fromkeys(docs, 0.0)
    for word in dict.fromkeys(query):
        tf = {k: d.count(word) for k, d in docs.items()}
        n = sum(1 for f in tf.values() if f)
        for k, f in tf.items():
            if f:
                scores[k] += idf(n) * norm(f, len(docs[k]))
    for pair in dict.fromkeys(itertools.pairwise(query)):
        tf = {k: list(itertools.pairwise(d)).count(pair) for k, d in docs.items()}
        n = sum(1 for f in tf.values() if f)
        for k, f in tf.items():
            if f:
                scores[k] += HAND_PAIR * idf(n) * norm(f, len(docs[k]))
    return {k: s for k, s in scores.items() if s > 0}


# ---------------------------------------------------------------------- hand-computed scores
def test_constants_are_the_ones_chosen_across_corpora() -> None:
    # RockBot uses 1.5, 0.75, 2.0; these won leave-one-corpus-out over seven corpora (BENCHMARKS.md).
    assert (PRODUCT_K1, B, PAIR_WEIGHT) == (0.6, 0.9, 1.0)
    assert (BM25Index().k1, BM25Index().b, BM25Index().pair_weight) == (0.6, 0.9, 1.0)


def test_hand_computed_scores_with_and_without_pair_bonus() -> None:
    result = ranked(build(DOCS), ["red", "apple"])
    assert [k for k, _ in result] == ["d0", "d2", "d1"]
    for key, score in result:
        assert score == pytest.approx(EXPECTED_RED_APPLE[key], rel=1e-12)
    # The literals agree with the derivation written out above.
    assert EXPECTED_RED_APPLE["d0"] == pytest.approx(
        IDF_RED * NORM_DL3 + IDF_APPLE * NORM_DL3 + 2 * IDF_PAIR * NORM_DL3
    )
    assert EXPECTED_RED_APPLE["d2"] == pytest.approx((IDF_RED + IDF_APPLE) * NORM_DL4)
    assert EXPECTED_RED_APPLE["d1"] == pytest.approx(IDF_APPLE * NORM_DL2)


def test_pair_bonus_needs_the_query_order() -> None:
    # "apple red" never occurs in that order, so d0 gets only the word scores: 0.470004 + 0.133531.
    scores = dict(ranked(build(DOCS), ["apple", "red"]))
    assert scores["d0"] == pytest.approx(0.6035350218702582, rel=1e-12)
    assert scores["d2"] == pytest.approx(EXPECTED_RED_APPLE["d2"], rel=1e-12)


def test_single_word_query_hand_computed() -> None:
    # "green": n=1 -> idf ln(8/3); only d1 (dl 2) has it -> ln(8/3) * 20/17 = 1.153917...
    assert ranked(build(DOCS), ["green"]) == [("d1", pytest.approx(1.1539167682490897, rel=1e-12))]


def test_pair_term_frequency_counts_every_adjacent_occurrence() -> None:
    docs = {
        "a": ["new", "york", "new", "york"],
        "b": ["new", "york", "city", "lights"],
        "c": ["old", "town", "road", "map"],
    }
    got = dict(ranked(build(docs), ["new", "york"]))
    assert got == pytest.approx(reference_scores(docs, ["new", "york"]), rel=1e-12)
    assert got["a"] > got["b"]


# ---------------------------------------------------------------------- result set semantics
def test_documents_without_query_words_are_not_returned() -> None:
    hits = build(DOCS).search(["green"])
    assert hits.total == 1
    assert [build(DOCS).keys[s] for s in hits.slots] == ["d1"]
    assert build(DOCS).search(["unknown"]).total == 0


def test_repeated_and_unknown_query_words_count_once() -> None:
    index = build(DOCS)
    assert ranked(index, ["red", "red", "red"]) == ranked(index, ["red"])
    # "zzz" is in no document: it scores nothing and breaks the "red apple" pair apart.
    assert ranked(index, ["red", "zzz", "apple"]) == ranked(index, ["apple", "red"])
    assert ranked(index, ["red", "zzz"]) == ranked(index, ["red"])


def test_empty_index_and_empty_query() -> None:
    assert BM25Index().search(["anything"]).total == 0
    hits = build(DOCS).search([])
    assert (hits.total, len(hits.slots)) == (0, 0)


def test_limit_keeps_the_best_and_total_counts_all_matches() -> None:
    index = BM25Index()
    for i in range(12):
        index.add(f"k{i}", ["word"] * (i % 4 + 1) + ["pad"] * 3)
    full = ranked(index, ["word"], limit=100)
    top = ranked(index, ["word"], limit=5)
    hits = index.search(["word"], limit=5)
    assert hits.total == 12 and len(hits.slots) == 5
    assert [s for _, s in top] == [s for _, s in full[:5]]
    assert all(a >= b for (_, a), (_, b) in itertools.pairwise(full))


def test_ties_are_ordered_newest_slot_first() -> None:
    index = BM25Index()
    for i in range(6):
        index.add(f"k{i}", ["same", "words"])
    assert [k for k, _ in ranked(index, ["same"], limit=10)] == [f"k{i}" for i in reversed(range(6))]


def test_limit_cut_respects_the_tie_order() -> None:
    """With tied scores, limit=k must return the first k of the full ranking (newest first)."""
    index = BM25Index()
    for i in range(10):
        index.add(f"k{i}", ["same", "words"])
    full = [k for k, _ in ranked(index, ["same"], limit=10)]
    assert [k for k, _ in ranked(index, ["same"], limit=3)] == full[:3]


# ---------------------------------------------------------------------- writes
def test_remove_drops_the_document_and_updates_statistics() -> None:
    index = build(DOCS)
    assert index.remove("d1") is True
    assert index.remove("d1") is False
    assert "d1" not in index and len(index) == 2
    remaining = {k: v for k, v in DOCS.items() if k != "d1"}  # N=2, avgdl=3.5, df(apple)=2
    got = dict(ranked(index, ["red", "apple"]))
    assert set(got) == {"d0", "d2"}
    assert got == pytest.approx(reference_scores(remaining, ["red", "apple"]), rel=1e-12)
    assert got["d0"] != pytest.approx(EXPECTED_RED_APPLE["d0"])  # statistics really changed


def test_re_adding_a_key_replaces_the_document() -> None:
    index = build(DOCS)
    index.add("d1", ["blue", "sky"])
    assert len(index) == 3
    assert "d1" not in dict(ranked(index, ["green"]))
    assert [k for k, _ in ranked(index, ["blue"])] == ["d1"]
    new_docs = {**DOCS, "d1": ["blue", "sky"]}
    assert dict(ranked(index, ["red", "apple"])) == pytest.approx(reference_scores(new_docs, ["red", "apple"]))


def test_archived_documents_leave_default_search_and_statistics() -> None:
    index = build(DOCS)
    index.set_archived("d1", True)
    active = {k: v for k, v in DOCS.items() if k != "d1"}
    got = dict(ranked(index, ["red", "apple"]))
    assert got == pytest.approx(reference_scores(active, ["red", "apple"]), rel=1e-12)
    assert ranked(index, ["green"]) == []
    # include_archived: the full corpus and its statistics.
    with_archived = dict(ranked(index, ["red", "apple"], include_archived=True))
    assert with_archived == pytest.approx(EXPECTED_RED_APPLE, rel=1e-12)
    index.set_archived("d1", False)
    assert dict(ranked(index, ["red", "apple"])) == pytest.approx(EXPECTED_RED_APPLE, rel=1e-12)


def test_adding_archived_and_archiving_twice() -> None:
    index = build(DOCS, archived=["d1"])
    index.set_archived("d1", True)  # no-op, must not double count
    index.set_archived("d0", True)
    index.set_archived("d0", False)
    active = {k: v for k, v in DOCS.items() if k != "d1"}
    assert dict(ranked(index, ["red", "apple"])) == pytest.approx(reference_scores(active, ["red", "apple"]))
    assert len(index) == 3


def test_allowed_mask_restricts_results_not_statistics() -> None:
    index = build(DOCS)
    allowed = np.array([False, False, True])  # only d2's slot
    assert ranked(index, ["red", "apple"], allowed=allowed) == [("d2", pytest.approx(EXPECTED_RED_APPLE["d2"]))]
    assert index.search(["red", "apple"], allowed=allowed).total == 1
    allowed_d0 = np.array([True, False, False])
    assert dict(ranked(index, ["red", "apple"], allowed=allowed_d0)) == pytest.approx({"d0": EXPECTED_RED_APPLE["d0"]})


# ---------------------------------------------------------------------- snapshot arrays
def round_trip(index: BM25Index) -> BM25Index:
    live = index.live_slots()
    arrays = index.export_arrays(live)
    return BM25Index.from_arrays(arrays, [index.keys[s] for s in live], list(index.terms))


def random_tokens(rng: random.Random, vocab: list[str]) -> list[str]:
    return [rng.choice(vocab) for _ in range(rng.randint(0, 12))]


def assert_same_results(a: BM25Index, b: BM25Index, queries: list[list[str]]) -> None:
    for query in queries:
        for include_archived in (False, True):
            ra = ranked(a, query, include_archived=include_archived, limit=1000)
            rb = ranked(b, query, include_archived=include_archived, limit=1000)
            assert [k for k, _ in ra] == [k for k, _ in rb], query
            assert [s for _, s in ra] == pytest.approx([s for _, s in rb], rel=1e-12), query


@pytest.mark.parametrize(
    ("hot_pair_docs", "long_word_docs"),
    [(None, None), (3, None), (None, 8)],
    ids=["default", "many-hot-pairs", "long-words"],
)
def test_snapshot_arrays_round_trip_through_removals_base_and_delta(
    hot_pair_docs: int | None, long_word_docs: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    if hot_pair_docs is not None:  # make common pairs "hot" (own postings) so that path is exercised too
        monkeypatch.setattr(bm25, "HOT_PAIR_DOCS", hot_pair_docs)
    if long_word_docs is not None:  # most words long: their pairs' table must stay complete through writes
        monkeypatch.setattr(bm25, "LONG_WORD_DOCS", long_word_docs)
    rng = random.Random(7)
    vocab = [f"w{i:02d}x" for i in range(25)]
    queries = [[rng.choice(vocab) for _ in range(rng.randint(1, 4))] for _ in range(60)]
    index = BM25Index()
    truth: dict[str, tuple[list[str], bool]] = {}  # live docs in slot order

    def add(key: str, archived: bool = False) -> None:
        tokens = random_tokens(rng, vocab)
        index.add(key, tokens, archived=archived)
        truth.pop(key, None)
        truth[key] = (tokens, archived)

    def remove(key: str) -> None:
        index.remove(key)
        del truth[key]

    def fresh() -> BM25Index:
        rebuilt = BM25Index()
        for key, (tokens, archived) in truth.items():
            rebuilt.add(key, tokens, archived=archived)
        return rebuilt

    for i in range(80):
        add(f"k{i}", archived=i % 9 == 0)
    for i in range(0, 80, 7):
        remove(f"k{i}")  # dead slots
    for i in range(3, 80, 11):
        add(f"k{i}")  # rewrites take new slots

    # Adjacent pairs that really occur, so pair bonuses (hot or not) are part of the comparison.
    queries += [tokens[i : i + 2] for tokens, _ in list(truth.values())[::3] for i in range(0, len(tokens) - 1, 4)]
    loaded = round_trip(index)
    assert bool(loaded.hot_pairs) == (hot_pair_docs is not None or long_word_docs is not None)
    assert loaded.long_words.any() == (long_word_docs is not None)
    assert loaded.slot_count == len(truth) == len(loaded)  # dead slots compacted
    assert_same_results(index, loaded, queries)
    assert_same_results(fresh(), loaded, queries)

    # Postings now split between the loaded base and a delta.
    index = loaded
    for i in range(80, 110):
        add(f"k{i}")
    for key in ["k1", "k2", "k85"]:
        remove(key)
    add("k5")
    index.set_archived("k6", True)
    truth["k6"] = (truth["k6"][0], True)
    assert_same_results(fresh(), index, queries)

    again = round_trip(index)  # merges base and delta
    assert again.slot_count == len(truth)
    assert_same_results(fresh(), again, queries)


@pytest.mark.parametrize("hot_pair_docs", [None, 3], ids=["default", "many-hot-pairs"])
def test_add_many_equals_adding_one_by_one(hot_pair_docs: int | None, monkeypatch: pytest.MonkeyPatch) -> None:
    if hot_pair_docs is not None:
        monkeypatch.setattr(bm25, "HOT_PAIR_DOCS", hot_pair_docs)
    rng = random.Random(11)
    vocab = [f"v{i:02d}y" for i in range(20)]
    first = [(f"k{i}", random_tokens(rng, vocab), i % 5 == 0) for i in range(60)]
    # A second batch after a snapshot load (hot pairs then exist): rewrites of loaded keys, a key given
    # twice in the batch (the later wins), and an empty document.
    second = [(f"k{i}", random_tokens(rng, vocab), False) for i in (3, 70, 71, 3, 72)] + [("k73", [], False)]
    one_by_one, batched = BM25Index(), BM25Index()
    for key, tokens, archived in first:
        one_by_one.add(key, tokens, archived=archived)
    batched.add_many(first)
    one_by_one, batched = round_trip(one_by_one), round_trip(batched)
    for key, tokens, archived in second:
        one_by_one.add(key, tokens, archived=archived)
    slots = batched.add_many(second)

    assert len(slots) == 5 and batched.slot_of["k3"] == slots[2]  # k3 once, at its later place
    assert batched.slot_of.keys() == one_by_one.slot_of.keys()
    queries = [[rng.choice(vocab) for _ in range(rng.randint(1, 3))] for _ in range(60)]
    queries += [tokens[i : i + 2] for _, tokens, _ in first + second for i in range(0, len(tokens) - 1, 3)]
    assert_same_results(one_by_one, batched, queries)
    assert_same_results(round_trip(one_by_one), round_trip(batched), queries)


def test_from_arrays_rejects_mismatched_arrays() -> None:
    index = build(DOCS)
    live = index.live_slots()
    arrays = index.export_arrays(live)
    with pytest.raises(ValueError):
        BM25Index.from_arrays(arrays, ["d0", "d1"], list(index.terms))
    with pytest.raises(ValueError):
        BM25Index.from_arrays(arrays, ["d0", "d1", "d2"], [*index.terms, "extra"])


def test_a_snapshot_of_fewer_pairs_than_make_one_hot_is_written(tmp_path) -> None:
    """128 to 254 adjacent pairs in all once misaligned the hot-pair slices and broke the snapshot."""
    from rockmem_mcp.search.bm25 import HOT_PAIR_DOCS, _hot_pairs

    for count in (0, 1, HOT_PAIR_DOCS // 2, HOT_PAIR_DOCS - 1, HOT_PAIR_DOCS + 10):
        keys = np.arange(count, dtype=np.int64)
        ones = np.ones(count, dtype=np.int32)
        hot, slots, tf = _hot_pairs(keys, ones, ones, np.zeros(0, dtype=np.int32))
        assert len(hot) == 0 and len(slots) == len(tf) == 0  # every key distinct: none hot


def test_a_filtered_search_after_an_unfiltered_one_reuses_its_scores_and_a_write_voids_them() -> None:
    """The last unfiltered score array serves a filtered search of the same words (filters change results,
    not scores); any write (add, replace, remove, archive) makes it stale."""
    rng = random.Random(4)
    words = "deploy staging review ticket friday vault key tea cat".split()
    index = BM25Index()
    for i in range(300):
        index.add(f"d{i}", [rng.choice(words) for _ in range(rng.randint(1, 8))], archived=i % 17 == 0)
    for step in range(200):
        tokens = rng.sample(words, rng.randint(1, 3))
        allowed = np.array([rng.random() < 0.3 for _ in range(index.slot_count)])
        unfiltered = index.scores(tokens)
        index._last_scores = None
        assert np.array_equal(unfiltered, index.scores(tokens))
        cached = index.scores(tokens, allowed)  # from the unfiltered array just stored
        index._last_scores = None
        assert np.array_equal(cached, index.scores(tokens, allowed))
        action = step % 4
        key = f"d{rng.randrange(300)}"
        if action == 0:
            index.add(key, [rng.choice(words) for _ in range(3)])
        elif action == 1 and key in index:
            index.set_archived(key, not bool(rng.random() < 0.5))
        elif action == 2:
            index.remove(key)
        index.scores(tokens)  # stored...
        index.add(f"n{step}", tokens)  # ...and made stale by this write, which matches the words
        fresh = index.scores(tokens)
        index._last_scores = None
        assert np.array_equal(fresh, index.scores(tokens))


def test_kept_scores_cannot_be_changed_by_a_caller() -> None:
    """The kept score array is handed out as it is, not copied: it is read-only, so a caller that changed
    what it was given would fail loudly rather than change what the next search of the same words sees."""
    index = BM25Index()
    for i, text in enumerate(["deploy staging friday", "deploy review", "tea cat"]):
        index.add(f"d{i}", text.split())
    first = index.scores(["deploy"])
    expected = first.copy()
    with pytest.raises(ValueError, match="read-only"):
        first[0] = 99.0
    with pytest.raises(ValueError, match="read-only"):
        first *= 2
    again = index.scores(["deploy"])
    assert np.array_equal(again, expected)
    assert not again.flags.writeable and not index.scores(["deploy"], np.array([True, False, True])).flags.writeable


def _shapes(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Score arrays a sampled cut could misjudge: ties, order, one value, huge integers, the largest values
    sitting exactly where the sample looks."""
    strided = rng.random(n)
    strided[:: n // bm25.CUT_SAMPLE] += 10.0  # the sample sees only the largest: its cut lets few through
    return {
        "random": rng.random(n),
        "few distinct": rng.integers(0, 4, n).astype(np.float64),
        "ascending": np.arange(n, dtype=np.float64),
        "descending": np.arange(n, 0, -1, dtype=np.float64),
        "all equal": np.full(n, 0.5),
        "nanosecond times": 1_764_000_000_000_000_000 + rng.integers(0, 1000, n).astype(np.int64),
        "largest in the sample": strided,
        "one huge": np.where(np.arange(n) == n // 3, 1e9, rng.random(n)),
    }


@pytest.mark.parametrize("n", [bm25.SAMPLED_CUT_FROM - 1, bm25.SAMPLED_CUT_FROM, 120_001])
@pytest.mark.parametrize("limit", [1, 10, 20, 200])
def test_top_k_with_a_sampled_cut_equals_a_full_sort(n: int, limit: int) -> None:
    rng = np.random.default_rng(n + limit)
    slots = np.arange(n) * 3  # ascending, as top_k's callers pass them
    for shape, values in _shapes(n, rng).items():
        expected = np.lexsort((-slots, -values))[:limit]  # best first, ties to the newest slot
        assert bm25.kth_largest(values, limit) == np.sort(values)[n - limit], shape
        assert bm25.top_k(slots, values, limit).tolist() == expected.tolist(), shape


def test_a_snapshot_without_dead_slots_shares_the_append_only_arrays_and_is_unchanged_by_later_writes() -> None:
    """With nothing dead, the per-document arrays are exported as views, not copies (the snapshot's share of the
    server's peak memory at 1M). A snapshot is written after the lock is released, so writes that land while
    it is written (appends that regrow the columns, a delete, an archive) must not change what it holds."""
    rng = random.Random(11)
    vocab = [f"w{i}" for i in range(40)]
    index = BM25Index()
    for i in range(30):
        index.add(f"d{i}", [*random_tokens(rng, vocab), "common", "words"])
    live = index.live_slots()
    assert len(live) == index.slot_count
    keys = [index.keys[s] for s in live]
    expected = BM25Index.from_arrays(index.export_arrays(live), keys, list(index.terms))
    arrays = index.export_arrays(live)
    for name in ("pair_keys", "pair_tf", "pair_len", "pair_start", "doc_len", "pair_signature"):
        assert np.shares_memory(arrays[name], getattr(index, name).view), name
    assert not np.shares_memory(arrays["state"], index.state.view)  # changed in place by deletes: copied
    for i in range(30, 200):  # past every column's capacity: each is regrown
        index.add(f"d{i}", [*random_tokens(rng, vocab), "common", "words"])
    index.remove("d3")
    index.set_archived("d5", True)
    restored = BM25Index.from_arrays(arrays, keys, list(index.terms)[: len(expected.terms)])
    queries = [["common"], ["common", "words"], *([rng.choice(vocab), rng.choice(vocab)] for _ in range(20))]
    assert_same_results(expected, restored, queries)
    assert restored.search(["common"], limit=100).total == 30


# ---------------------------------------------------------------------------------------- MaxScore (best)
def zipf_corpus(rng: random.Random, n_docs: int, vocab: int = 400) -> dict[str, list[str]]:
    """Documents of 3-30 words drawn Zipf-like: a few words in most documents, a long tail in few."""
    words = [f"w{i}" for i in range(vocab)]
    weights = [1.0 / (i + 1) for i in range(vocab)]
    return {f"d{i}": rng.choices(words, weights, k=rng.randint(3, 30)) for i in range(n_docs)}


def exhaustive(
    index: BM25Index,
    tokens: list[str],
    allowed: np.ndarray | None,
    archived: bool,
    limit: int,
    factor: np.ndarray | None,
) -> tuple[list[int], list[float], int]:
    """What ranking every slot's score gives (the path `best` must equal)."""
    scores = index.scores(tokens, allowed, archived)
    values = scores if factor is None else scores * factor
    slots = np.flatnonzero((scores > 0) & (values > 0) if factor is not None else scores > 0)
    order = bm25.top_k(slots, values[slots], limit)
    return slots[order].tolist(), values[slots][order].tolist(), len(slots)


@pytest.mark.parametrize("seed", range(12))
def test_best_ranks_exactly_as_scoring_every_slot(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bm25, "PRUNE_FROM", 0)  # prune at any size
    rng = random.Random(seed)
    docs = zipf_corpus(rng, 600)
    index = BM25Index()
    for key, tokens in docs.items():
        index.add(key, tokens)
    for key in rng.sample(sorted(docs), 40):  # dead slots, rewrites (new slots) and archived ones
        index.remove(key) if rng.random() < 0.5 else index.add(key, docs[key][::-1], archived=rng.random() < 0.5)
    words = sorted({w for d in docs.values() for w in d})
    pruned = 0
    for _ in range(60):
        # A rare word or two beside common ones (what MaxScore prunes), and repeated words for the pairs.
        tokens = rng.choices(words[:8], k=rng.randint(1, 4)) + rng.sample(words[20:], rng.randint(0, 2))
        rng.shuffle(tokens)
        allowed = np.array([rng.random() < 0.8 for _ in range(index.slot_count)]) if rng.random() < 0.3 else None
        factor = None
        if rng.random() < 0.7:  # salience: a factor per slot, some 0 (dormant), many tied at 1
            factor = np.array([rng.choice([0.0, 0.4, 0.7, 1.0, 1.0]) for _ in range(index.slot_count)])
        archived = rng.random() < 0.3
        limit = rng.choice([1, 3, 10, 20])
        hits = index.best(tokens, allowed, archived, limit, factor)
        expected = exhaustive(index, tokens, allowed, archived, limit, factor)
        if hits is None:
            continue
        pruned += 1
        assert (hits.slots.tolist(), hits.scores.tolist(), hits.total) == expected, tokens
    assert pruned >= 40


def test_best_looks_up_a_common_words_postings_instead_of_scoring_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """The point of it: a word in every document is scored only for the slots a rare word leaves in the
    running, and the result is still the exhaustive one."""
    monkeypatch.setattr(bm25, "PRUNE_FROM", 0)
    index = BM25Index()
    for i in range(2000):
        index.add(f"d{i}", ["common", "filler", f"tail{i % 500}"] + (["rare", "rare"] if i % 100 == 0 else []))
    scored_sizes: list[int] = []
    norm = bm25.bm25_norm_tf

    def counting(tf: np.ndarray, length_norm: np.ndarray, k1: float = PRODUCT_K1) -> np.ndarray:
        scored_sizes.append(np.size(tf))
        return norm(tf, length_norm, k1)

    monkeypatch.setattr(bm25, "bm25_norm_tf", counting)
    hits = index.best(["rare", "common"], None, False, 5)
    assert hits is not None
    assert max(scored_sizes) < 100  # 20 documents hold "rare"; none of the 2,000 "common" ones is scored in full
    monkeypatch.setattr(bm25, "bm25_norm_tf", norm)
    assert (hits.slots.tolist(), hits.scores.tolist(), hits.total) == exhaustive(
        index, ["rare", "common"], None, False, 5, None
    )
    assert hits.total == 2000


def test_best_gives_way_to_scoring_everything_when_it_cannot_pay(monkeypatch: pytest.MonkeyPatch) -> None:
    index = BM25Index()
    for i in range(300):
        index.add(f"d{i}", ["common", "other", f"t{i}"])
    assert index.best(["common"], None, False, 5) is None  # fewer postings than PRUNE_FROM
    monkeypatch.setattr(bm25, "PRUNE_FROM", 0)
    # Only common words: the lists that must be scored in full hold more than 1 / PRUNE_SHARE of the slots.
    assert index.best(["common", "other"], None, False, 5) is None
    absent = index.best(["absent"], None, False, 5)  # nothing to score: nothing found, nothing counted
    assert absent is not None and (absent.slots.tolist(), absent.total) == ([], 0)


def test_a_pair_of_long_words_missing_from_their_table_is_known_absent_and_a_write_adds_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(bm25, "LONG_WORD_DOCS", 4)
    index = BM25Index()
    for i in range(6):
        index.add(f"d{i}", ["alpha", "beta", "gamma", f"rare{i}"])  # alpha, beta, gamma long; "gamma alpha" never
    loaded = round_trip(index)
    assert sorted(loaded.terms[t] for t in np.flatnonzero(loaded.long_words)) == ["alpha", "beta", "gamma"]

    def no_check(*_: object) -> np.ndarray:
        raise AssertionError("a pair of long words was checked document by document")

    with monkeypatch.context() as patched:
        patched.setattr(BM25Index, "_pair_tf", no_check)
        gamma, alpha = loaded.vocab["gamma"], loaded.vocab["alpha"]
        assert len(loaded._pair_postings(gamma, alpha)[0]) == 0  # absent, known from the table
        assert loaded._pair_postings(loaded.vocab["alpha"], loaded.vocab["beta"])[0].tolist() == list(range(6))
        loaded.add("new", ["gamma", "alpha"])  # the pair now occurs: the table takes it
        slots, tf = loaded._pair_postings(gamma, alpha)
        assert (slots.tolist(), tf.tolist()) == ([loaded.slot_of["new"]], [1])
    fresh = BM25Index()
    for i in range(6):
        fresh.add(f"d{i}", ["alpha", "beta", "gamma", f"rare{i}"])
    fresh.add("new", ["gamma", "alpha"])
    assert dict(ranked(loaded, ["gamma", "alpha"])) == pytest.approx(dict(ranked(fresh, ["gamma", "alpha"])))


def test_a_snapshot_without_long_words_checks_every_pair(monkeypatch: pytest.MonkeyPatch) -> None:
    """Snapshots written before long words carry no complete table: no pair is taken as absent."""
    monkeypatch.setattr(bm25, "LONG_WORD_DOCS", 4)
    index = BM25Index()
    for i in range(6):
        index.add(f"d{i}", ["alpha", "beta", f"rare{i}"] + (["beta", "alpha"] if i == 2 else []))
    live = index.live_slots()
    arrays = index.export_arrays(live)
    del arrays["long_words"]
    arrays["hot_keys"] = arrays["hot_keys"][:0]  # as an older snapshot: "beta alpha" (1 document) not hot
    arrays["hot_slots"], arrays["hot_tf"] = arrays["hot_slots"][:0], arrays["hot_tf"][:0]
    loaded = BM25Index.from_arrays(arrays, [index.keys[s] for s in live], list(index.terms))
    assert not loaded.long_words.any()
    assert loaded._pair_postings(loaded.vocab["beta"], loaded.vocab["alpha"])[0].tolist() == [2]


def test_the_seeds_constants_are_one_setting_away(tmp_path) -> None:
    # ROCKMEM_BM25=rockbot: RockBot's k1, b and pair weight for the indexes opened after it (README, settings).
    from rockmem_mcp.config import Settings
    from rockmem_mcp.memory.service import MemoryService

    seed = MemoryService(Settings(home=tmp_path / "seed", embedding_model="off", bm25="rockbot"))
    # Nothing process-wide: another index opened now (an episode or procedure index, say) keeps the defaults.
    assert (BM25Index().k1, BM25Index().b, BM25Index().pair_weight) == (0.6, 0.9, 1.0)
    tuned = MemoryService(Settings(home=tmp_path / "tuned", embedding_model="off"))
    try:
        for text in ("red apple pie", "green apple", "red car fast apple"):
            seed.save(text)
            tuned.save(text)
        index = seed.index.bm25
        assert (index.k1, index.b, index.pair_weight) == (1.5, 0.75, 2.0)
        index = tuned.index.bm25  # one process, two homes: each keeps its own (nothing process-wide)
        assert (index.k1, index.b, index.pair_weight) == (0.6, 0.9, 1.0)
        scores = [[round(r.score, 6) for r in s.search("red apple", mode="bm25").results] for s in (seed, tuned)]
        assert scores[0] != scores[1]
    finally:
        seed.close()
        tuned.close()
    assert (BM25Index().k1, BM25Index().b, BM25Index().pair_weight) == (0.6, 0.9, 1.0)


def test_a_snapshot_keeps_no_word_that_only_a_deleted_document_held() -> None:
    """Issue 45: a memory deleted for good left its words in the snapshot's vocabulary. They are written as "" (ids
    kept: the pairs and postings name words by id), and the snapshot loaded back ranks as the index did."""
    index = BM25Index()
    index.add("kept", ["red", "apple", "pie"])
    index.add("gone", ["locker", "code", "red"])
    index.add("later", ["apple", "crumble"])
    index.remove("gone")
    live = index.live_slots()
    arrays = index.export_arrays(live)
    terms = index.snapshot_terms(arrays["term_offsets"])
    assert "locker" not in terms and "code" not in terms and {"red", "apple", "pie", "crumble"} <= set(terms)
    restored = BM25Index.from_arrays(arrays, [index.keys[s] for s in live], terms)
    for query in (["red", "apple"], ["crumble"], ["locker"]):
        assert ranked(restored, query) == ranked(index, query)
    restored.add("again", ["locker", "room"])  # the word comes back with a new id
    assert [key for key, _ in ranked(restored, ["locker"])] == ["again"]
