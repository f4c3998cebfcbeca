"""Incremental Okapi BM25 with RockBot's word-pair boost.

Scoring (RockBot's Bm25Ranker, with k1, b and the pair weight below instead of its 1.5, 0.75 and 2):
  idf(n)   = ln((N - n + 0.5) / (n + 0.5) + 1)
  norm(f)  = f (k1 + 1) / (f + k1 (1 - b + b |d| / avgdl))
  score(d) = Σ_distinct query words idf · norm(tf)  +  Σ_distinct adjacent query word pairs w · idf · norm(pair tf)
N, n and avgdl are taken over the documents being searched (active ones; with archived ones when asked).
A pair is two query tokens next to each other, found next to each other in the document's tokens.

Layout, chosen so that a write touches only its own document:
- each document has a *slot*; slots are never reused while the process lives (a rewrite takes a new
  slot and the old one is marked dead), so every posting list stays sorted by slot;
- word postings: an immutable CSR *base* (loaded from a snapshot) plus a growable *delta* per word for
  postings added since; dead slots are skipped at query time and dropped when a snapshot is written;
- word pairs are not indexed globally (millions of distinct pairs would dwarf the word index); each
  document keeps its sorted pair keys and a 256-bit signature of them. A query checks the documents
  holding the rarer word of a pair: the signature rules most out with one mask, and a binary search in
  the pair keys of the rest gives the exact count;
- pairs found in many documents ("and the") would make that check slow, so a snapshot lists them as
  *hot* pairs with postings of their own, which later writes keep up to date;
- so would any pair of two *long* words (in 1 / LONG_WORD_SHARE of the documents, and LONG_WORD_DOCS or
  more, when the snapshot was written), found in few documents or none: every such pair found gets postings
  too, and the table of them is complete (kept so by writes), so a pair of two long words that is not in it
  is in no document, known without a check. At 1M memories (long: 20,000 documents) this costs ~0.5M
  postings and spares up to ~2 ms per such pair in a query; at 100k (2,048) ~0.2M postings, ~0.1 ms a pair.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from rockmem_mcp.search.columns import Column, concat_segments

# k1, b and the pair weight were chosen by leave-one-corpus-out over seven development corpora of different shapes
# (benchmarks/retrieval/, BENCHMARKS.md "Recall across corpora"): the setting whose worst corpus gains most over
# textbook BM25 (k1 1.5, b 0.75). RockBot's 1.5 / 0.75 / 2.0 and the earlier b = 0.3 (chosen on one corpus of
# short, like turns) let long memories win: with assistant answers of thousands of characters beside short
# statements, b = 0.3 fell below textbook BM25. Low k1 saturates a word's repeats (a long text says a topic word
# many times); a strong b keeps a long text from matching everything.
K1 = 0.6
B = 0.9
PAIR_WEIGHT = 1.0
# ROCKMEM_BM25=rockbot: the seed's constants for the long-term memory index (MemoryService applies them).
CONSTANTS: dict[str, tuple[float, float, float]] = {"tuned": (K1, B, PAIR_WEIGHT), "rockbot": (1.5, 0.75, 2.0)}


T = TypeVar("T")
DEAD, ACTIVE, ARCHIVED = 0, 1, 2
HOT_PAIR_DOCS = 256  # pairs in at least this many documents get their own postings at snapshot time
LONG_WORD_DOCS = 2048  # pairs of two words in this many documents each, too (see the module docstring)
LONG_WORD_SHARE = 50  # ... and in 1 / this of the documents
SIGNATURE_WORDS = 4  # 256 bits per document: ~9% false positives at 24 pairs, 32 bytes a document
_MIX = 0x9E3779B97F4A7C15  # Fibonacci hashing spreads the structured pair keys over the signature bits


def pair_bits(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(signature word, bit mask) for each pair key."""
    h = (keys.astype(np.uint64) * np.uint64(_MIX)) >> np.uint64(56)
    return (h >> np.uint64(6)).astype(np.intp), np.left_shift(np.uint64(1), h & np.uint64(63))


def bm25_idf(n_docs: int, doc_freq: int) -> float:
    return math.log((n_docs - doc_freq + 0.5) / (doc_freq + 0.5) + 1.0)


def bm25_length_norm(doc_len: np.ndarray, avgdl: float, k1: float = K1, b: float = B) -> np.ndarray:
    """The per-document part of norm(): k1 (1 - b + b |d| / avgdl)."""
    return k1 * (1.0 - b + b * doc_len / avgdl)


def bm25_norm_tf(tf: np.ndarray, length_norm: np.ndarray, k1: float = K1) -> np.ndarray:
    return tf * (k1 + 1.0) / (tf + length_norm)


# MaxScore (`BM25Index.best`) is tried from this many postings in a query (below, scoring them all costs
# ~0.1 ms; at 100k memories it took 245 of 300 corpus questions and search went 2.0 -> 1.6 ms), and it gives up
# (scores everything) once the lists it must score in full hold more than 1 / PRUNE_SHARE of the slots.
PRUNE_FROM = 4_096
PRUNE_SHARE = 8
MARGIN = 1e-9
SAMPLED_CUT_FROM = 50_000  # values; below this a partition of all of them costs under ~0.3 ms
CUT_SAMPLE = 4096  # values looked at to choose the cut
CUT_MARGIN = 8  # the cut lets about this many times `limit` values through


def kth_largest(values: np.ndarray, k: int) -> np.generic:
    """The k-th largest of `values` (1 <= k < len). For many values and a small k, a cut-off chosen from an
    evenly spaced sample first keeps only the ~CUT_MARGIN x k largest, and only those are partitioned (at 1M
    memories a common word matches ~300,000: a partition of all of them took 2.8 ms of a 8 ms search). Exact
    whatever the sample: if fewer than k values pass the cut, all of them are partitioned instead."""
    n = len(values)
    if n >= SAMPLED_CUT_FROM and 2 * k * CUT_MARGIN < n:  # the cut falls within the sample's top half
        sample = values[:: n // CUT_SAMPLE]
        rank = max(1, len(sample) * k * CUT_MARGIN // n)  # the cut's place among the sample's largest
        cut = np.partition(sample, len(sample) - rank)[len(sample) - rank]
        passed = values[values >= cut]
        if len(passed) >= k:  # the k largest all pass: the k-th largest of those is the answer
            return np.partition(passed, len(passed) - k)[len(passed) - k]
    return np.partition(values, n - k)[n - k]  # in the values' own type: int64 times stay exact


def top_k(slots: np.ndarray, values: np.ndarray, limit: int) -> np.ndarray:
    """Positions of the `limit` best: highest value first, ties to the highest (newest) slot.

    `slots` must be ascending. Equal to a full sort on (value, slot), but only the boundary ties are
    sorted, so a cut from 90,000 matches costs a partition, not a sort.
    """
    if len(values) > limit:
        kth = kth_largest(values, limit)
        better = np.flatnonzero(values > kth)
        tied = np.flatnonzero(values == kth)[::-1][: limit - len(better)]  # newest slots first
        candidates = np.concatenate((better, tied))
    else:
        candidates = np.arange(len(values))
    return candidates[np.lexsort((-slots[candidates], -values[candidates]))]


@dataclass
class _Query:
    eligible: np.ndarray  # bool per slot: may be returned
    everything: bool  # every slot is eligible: the lists need no masking
    length_norm: np.ndarray  # per slot
    lists: list[tuple[np.ndarray, np.ndarray, float]]  # (slots ascending, tf, weight x idf): words, then pairs
    words: int  # how many of `lists` are words


@dataclass
class Hits:
    slots: np.ndarray  # best first
    scores: np.ndarray
    total: int  # matches before the limit


class BM25Index:
    def __init__(self, k1: float = K1, b: float = B, pair_weight: float = PAIR_WEIGHT) -> None:
        self.k1, self.b, self.pair_weight = k1, b, pair_weight
        self.keys: list[str] = []  # slot -> document key ("" once dead)
        self.slot_of: dict[str, int] = {}
        self.doc_len = Column(np.int32)
        self.state = Column(np.int8)
        self.pair_start = Column(np.int64)
        self.pair_len = Column(np.int32)
        self.pair_keys = Column(np.int64)
        self.pair_tf = Column(np.int32)
        self.pair_signature = Column(np.uint64, width=SIGNATURE_WORDS)
        self.terms: list[str] = []
        self.vocab: dict[str, int] = {}
        self.base_offsets = np.zeros(1, dtype=np.int64)
        self.base_slots = np.zeros(0, dtype=np.int32)
        self.base_tf = np.zeros(0, dtype=np.int32)
        self.delta: dict[int, Column] = {}  # term id -> (slot, tf) rows
        self.hot_pairs: dict[int, Column] = {}  # pair key -> (slot, tf) rows
        self.long_words = np.zeros(0, dtype=bool)  # per term id: long in the snapshot loaded (module docstring)
        self._count = {ACTIVE: 0, ARCHIVED: 0}
        self._len_sum = {ACTIVE: 0, ARCHIVED: 0}
        # length_norm for every slot, reused until a write changes avgdl or adds a slot
        self._length_norm: tuple[tuple[int, float], np.ndarray] | None = None
        self.changes = 0  # bumped by every write: what was scored before it is stale
        # The last unfiltered scores, by (tokens, include_archived, changes): filters narrow results without
        # changing scores, so a second search of the same words with a filter (a session's first recall asks
        # for the message's matches, then for its anti-patterns) is the same array masked.
        self._last_scores: tuple[tuple[tuple[str, ...], bool, int], np.ndarray] | None = None

    # ------------------------------------------------------------------ writes
    def __len__(self) -> int:
        return self._count[ACTIVE] + self._count[ARCHIVED]

    def __contains__(self, key: str) -> bool:
        return key in self.slot_of

    @property
    def slot_count(self) -> int:
        return len(self.keys)

    def add(self, key: str, tokens: Sequence[str], archived: bool = False) -> int:
        """Index a document (replacing any previous version of `key`); returns its slot."""
        return self.add_many([(key, tokens, archived)])[0]

    def add_many(self, docs: Sequence[tuple[str, Sequence[str], bool]]) -> list[int]:
        """Index (key, tokens, archived) documents in order, as add() would one by one; returns their slots.

        Vectorised over the batch, so an import pays one numpy pass per batch, not per document.
        """
        if docs:
            self.changes += 1
        docs = last_versions(docs, key=lambda doc: doc[0])
        for key, _, _ in docs:
            self.remove(key)
        first = len(self.keys)
        slots = list(range(first, first + len(docs)))
        term_id = self._term_id
        ids = [[term_id(t) for t in tokens] for _, tokens, _ in docs]
        lengths = np.fromiter((len(d) for d in ids), dtype=np.int64, count=len(docs))
        for slot, (key, tokens, archived) in zip(slots, docs, strict=True):
            self.keys.append(key)
            self.slot_of[key] = slot
            state = ARCHIVED if archived else ACTIVE
            self._count[state] += 1
            self._len_sum[state] += len(tokens)
        self.doc_len.extend(lengths)
        self.state.extend(np.array([ARCHIVED if a else ACTIVE for _, _, a in docs], dtype=np.int8))

        flat = np.fromiter(itertools.chain.from_iterable(ids), dtype=np.int64, count=int(lengths.sum()))
        owner = np.repeat(np.arange(first, first + len(docs), dtype=np.int64), lengths)
        self._add_postings(owner, flat)
        self._add_pairs(owner, flat, lengths, first)
        return slots

    def _add_postings(self, owner: np.ndarray, term_ids: np.ndarray) -> None:
        """Append (slot, tf) to each word's delta postings; slots ascend because new slots are the highest."""
        if not len(term_ids):
            return
        term_ids, slot_of_run, tf = _runs(term_ids, owner)  # by word, then slot
        starts = _run_starts(term_ids)
        rows = np.stack((slot_of_run, tf), axis=1).astype(np.int32)
        for lo, hi in zip(starts.tolist(), [*starts[1:].tolist(), len(term_ids)], strict=True):
            tid = int(term_ids[lo])
            postings = self.delta.get(tid)
            if postings is None:
                postings = self.delta[tid] = Column(np.int32, width=2, capacity=max(2, hi - lo))
            postings.extend(rows[lo:hi])

    def _add_pairs(self, owner: np.ndarray, term_ids: np.ndarray, lengths: np.ndarray, first: int) -> None:
        """Per document: its sorted distinct adjacent-word pairs with counts, and their signature."""
        n_docs = len(lengths)
        within = owner[1:] == owner[:-1]  # adjacent tokens of one document
        keys = ((term_ids[:-1] << 32) | term_ids[1:])[within]
        pair_owner = owner[1:][within]
        pair_owner, keys, tf = _runs(pair_owner, keys)  # by document, then key: what each document keeps
        per_doc = np.bincount(pair_owner - first, minlength=n_docs)
        self.pair_start.extend(len(self.pair_keys) + np.cumsum(per_doc) - per_doc)
        self.pair_len.extend(per_doc)
        self.pair_keys.extend(keys)
        self.pair_tf.extend(tf)
        signatures = np.zeros((n_docs, SIGNATURE_WORDS), dtype=np.uint64)
        words, bits = pair_bits(keys)
        np.bitwise_or.at(signatures, (pair_owner - first, words), bits)
        self.pair_signature.extend(signatures)
        if self.hot_pairs or self.long_words.any():  # dict lookups: a save does not pay for the table's size
            both_long = self._long(keys >> 32) & self._long(keys & 0xFFFFFFFF)
            for key, slot, count, long in zip(
                keys.tolist(), pair_owner.tolist(), tf.tolist(), both_long.tolist(), strict=True
            ):
                hot = self.hot_pairs.get(key)
                if hot is None and long:  # the table of long words' pairs stays complete
                    hot = self.hot_pairs[key] = Column(np.int32, width=2, capacity=2)
                if hot is not None:
                    hot.append((slot, count))

    def remove(self, key: str) -> bool:
        slot = self.slot_of.pop(key, None)
        if slot is None:
            return False
        self.changes += 1
        state = int(self.state.view[slot])
        self._count[state] -= 1
        self._len_sum[state] -= int(self.doc_len.view[slot])
        self.state[slot] = DEAD
        self.keys[slot] = ""
        return True

    def set_archived(self, key: str, archived: bool) -> None:
        slot = self.slot_of[key]
        old = int(self.state.view[slot])
        new = ARCHIVED if archived else ACTIVE
        if old != new:
            self.changes += 1
            length = int(self.doc_len.view[slot])
            self._count[old] -= 1
            self._len_sum[old] -= length
            self._count[new] += 1
            self._len_sum[new] += length
            self.state[slot] = new

    def _term_id(self, term: str) -> int:
        tid = self.vocab.get(term)
        if tid is None:
            tid = self.vocab[term] = len(self.terms)
            self.terms.append(term)
        return tid

    def _long(self, term_ids: np.ndarray) -> np.ndarray:
        """Whether each word was long in the snapshot loaded (words new since are not)."""
        long = self.long_words
        return long[np.minimum(term_ids, len(long) - 1)] & (term_ids < len(long)) if len(long) else term_ids < 0

    # ------------------------------------------------------------------ reads
    def _postings(self, tid: int) -> tuple[np.ndarray, np.ndarray]:
        slots, tf = self.base_slots[:0], self.base_tf[:0]
        if tid + 1 < len(self.base_offsets):
            lo, hi = self.base_offsets[tid], self.base_offsets[tid + 1]
            slots, tf = self.base_slots[lo:hi], self.base_tf[lo:hi]
        delta = self.delta.get(tid)
        if delta is not None and len(delta):
            rows = delta.view
            if len(slots):
                return np.concatenate((slots, rows[:, 0])), np.concatenate((tf, rows[:, 1]))
            return rows[:, 0], rows[:, 1]
        return slots, tf

    def _pair_postings(self, a: int, b: int) -> tuple[np.ndarray, np.ndarray]:
        """Slots holding words a, b next to each other, with counts (dead slots included)."""
        key = (a << 32) | b
        hot = self.hot_pairs.get(key)
        if hot is not None:
            rows = hot.view
            return rows[:, 0], rows[:, 1]
        if self._long(np.array([a, b])).all():  # not in the complete table of long words' pairs: in no document
            return self.base_slots[:0], self.base_tf[:0]
        slots_a, _ = self._postings(a)
        slots_b, _ = self._postings(b)
        slots = slots_a if len(slots_a) <= len(slots_b) else slots_b
        word, bit = pair_bits(np.array([key], dtype=np.int64))
        slots = slots[(self.pair_signature.view[slots, word[0]] & bit[0]) != 0]
        tf = self._pair_tf(slots, key)
        has = tf > 0
        return slots[has], tf[has]

    def _pair_tf(self, slots: np.ndarray, key: int) -> np.ndarray:
        """Occurrences of pair `key` in each of `slots`: a vectorised binary search per document."""
        start = self.pair_start.view[slots]
        end = start + self.pair_len.view[slots]
        keys = self.pair_keys.view
        if len(keys) == 0 or len(slots) == 0:
            return np.zeros(len(slots), dtype=np.int32)
        lo, hi = start.copy(), end.copy()
        while True:
            open_ = lo < hi
            if not open_.any():
                break
            mid = (lo + hi) >> 1
            below = keys[np.where(open_, mid, 0)] < key
            lo = np.where(open_ & below, mid + 1, lo)
            hi = np.where(open_ & ~below, mid, hi)
        found = lo < end
        at = np.where(found, lo, 0)
        found &= keys[at] == key
        return np.where(found, self.pair_tf.view[at], 0)

    def search(
        self,
        tokens: Sequence[str],
        allowed: np.ndarray | None = None,
        include_archived: bool = False,
        limit: int = 20,
    ) -> Hits:
        """Rank documents for `tokens`; `allowed` (bool per slot) restricts results, not statistics."""
        scores = self.scores(tokens, allowed, include_archived)
        matched = np.flatnonzero(scores > 0)
        best = top_k(matched, scores[matched], limit)
        return Hits(matched[best], scores[matched][best], len(matched))

    def scores(
        self, tokens: Sequence[str], allowed: np.ndarray | None = None, include_archived: bool = False
    ) -> np.ndarray:
        """The BM25 score of every slot (0: no match, or not allowed), for fusion with other signals.

        Read-only: the last unfiltered result is kept for the same words and handed out again, not copied (a
        copy of 1M scores cost ~0.7 ms a search); a caller that changes scores works on its own copy."""
        key = (tuple(tokens), include_archived, self.changes)
        last = self._last_scores
        if last is not None and last[0] == key:
            scores = last[1] if allowed is None else np.where(allowed, last[1], 0.0)
        else:
            scores = self._scores(tokens, allowed, include_archived)
            if allowed is None:
                self._last_scores = (key, scores)
        scores.flags.writeable = False
        return scores

    def _query(self, tokens: Sequence[str], allowed: np.ndarray | None, include_archived: bool) -> _Query | None:
        """What scoring `tokens` needs: the statistics and each distinct word's and adjacent pair's postings
        with its weight (the pair weight or 1, times idf), in the order they are summed. None: nothing to score."""
        state = self.state.view
        counted = state != DEAD if include_archived else state == ACTIVE
        n_docs = self._count[ACTIVE] + (self._count[ARCHIVED] if include_archived else 0)
        if n_docs == 0 or not tokens:
            return None
        length_sum = self._len_sum[ACTIVE] + (self._len_sum[ARCHIVED] if include_archived else 0)
        avgdl = length_sum / n_docs or 1.0
        # When every slot is searchable and nothing filters, posting lists need no masking.
        everything = allowed is None and n_docs == len(state)
        eligible = counted if allowed is None else counted & allowed
        lists: list[tuple[np.ndarray, np.ndarray, float]] = []
        for term in dict.fromkeys(tokens):
            tid = self.vocab.get(term)
            if tid is None:
                continue
            slots, tf = self._postings(tid)
            doc_freq = len(slots) if everything else int(np.count_nonzero(counted[slots]))
            if doc_freq:
                lists.append((slots, tf, bm25_idf(n_docs, doc_freq)))
        words = len(lists)
        for first, second in dict.fromkeys(itertools.pairwise(tokens)):
            a, b = self.vocab.get(first), self.vocab.get(second)
            if a is None or b is None:
                continue
            slots, tf = self._pair_postings(a, b)
            if not everything:
                keep = counted[slots]
                slots, tf = slots[keep], tf[keep]
            if len(slots):
                lists.append((slots, tf, self.pair_weight * bm25_idf(n_docs, len(slots))))
        return _Query(eligible, everything, self._length_norms(avgdl), lists, words)

    def _scores(self, tokens: Sequence[str], allowed: np.ndarray | None, include_archived: bool) -> np.ndarray:
        scores = np.zeros(self.slot_count, dtype=np.float64)
        query = self._query(tokens, allowed, include_archived)
        if query is None:
            return scores
        for slots, tf, weight in query.lists:
            if not query.everything:
                keep = query.eligible[slots]
                slots, tf = slots[keep], tf[keep]
            scores[slots] += weight * bm25_norm_tf(tf.astype(np.float64), query.length_norm[slots], self.k1)
        return scores

    def best(
        self,
        tokens: Sequence[str],
        allowed: np.ndarray | None,
        include_archived: bool,
        limit: int,
        factor: np.ndarray | None = None,
        awake: np.ndarray | None = None,
    ) -> Hits | None:
        """The `limit` best slots by BM25 (times `factor`: per slot, in [0, 1]; `awake` = factor > 0, the slots
        it does not leave out), exactly as ranking every slot's `scores()` would give them, scoring only what
        can still make the cut (MaxScore). Lists (a word's or a pair's postings) are taken heaviest first and
        scored in full until the most all the others could add together falls below the `limit`-th best
        score so far: a slot none of the scored lists holds cannot make the cut. The other lists are only
        looked up for the candidates, heaviest first, dropping after each the candidates that can no longer
        make it. At 1M memories a common word's 100,000-300,000 postings are then looked up for a few
        thousand candidates instead of scored. None when pruning cannot pay (few postings in all, or the
        lists that must be scored in full are long): then score everything."""
        query = self._query(tokens, allowed, include_archived)
        if query is None or sum(len(slots) for slots, _, _ in query.lists) < PRUNE_FROM:
            return None
        if factor is not None and awake is None:
            awake = factor > 0
        k1, norm_of = self.k1, query.length_norm
        # A list's most: its weight times norm() at its largest tf and the shortest possible document.
        # Floats are rounded: bounds are widened and cuts lowered by MARGIN, so no rounding prunes a slot.
        shortest = k1 * (1.0 - self.b)
        most = [weight * bm25_norm_tf(float(tf.max()), shortest, k1) * (1 + MARGIN) for _, tf, weight in query.lists]
        order = sorted(range(len(query.lists)), key=lambda i: -most[i])
        # What the lists from the n-th on could add, summed smallest first (no running subtraction to round).
        rests = list(itertools.accumulate(reversed([most[i] for i in order]), initial=0.0))[::-1]
        budget = max(PRUNE_FROM, self.slot_count // PRUNE_SHARE)

        # Scored in full, heaviest first, until the rest cannot lift an unseen slot to the cut.
        taken, scored = 0, 0
        cut_off, rest = 0.0, rests[0]
        candidates, partial = np.zeros(0, dtype=np.int64), np.zeros(0)
        while taken < len(order) and not (taken and rest < cut_off):
            i = order[taken]
            slots, tf, weight = query.lists[i]
            if not query.everything:
                keep = query.eligible[slots]
                slots, tf = slots[keep], tf[keep]
            if awake is not None:
                keep = awake[slots]
                slots, tf = slots[keep], tf[keep]
            taken, scored, rest = taken + 1, scored + len(slots), rests[taken + 1]
            if scored > budget:
                return None
            scores = weight * bm25_norm_tf(tf.astype(np.float64), norm_of[slots], k1)
            candidates, partial = _merged(candidates, partial, slots, scores)
            cut_off = max(cut_off, _cut(partial if factor is None else partial * factor[candidates], limit))

        # The other lists, looked up for the candidates only; after each, those that cannot make it are dropped.
        weights = np.ones(len(candidates)) if factor is None else factor[candidates]
        for n in range(taken, len(order)):
            keep = (partial + rest) * weights >= cut_off
            candidates, partial, weights = candidates[keep], partial[keep], weights[keep]
            partial = partial + _looked_up(*query.lists[order[n]], candidates, norm_of[candidates], k1)
            rest = rests[n + 1]
            cut_off = max(cut_off, _cut(partial * weights, limit))
        candidates = candidates[partial * weights >= cut_off]

        # Exact scores, summed in the order scores() sums them: the same floats, so the same order and ties.
        totals = np.zeros(len(candidates))
        for slots, tf, weight in query.lists:
            totals += _looked_up(slots, tf, weight, candidates, norm_of[candidates], k1)
        values = totals if factor is None else totals * factor[candidates]
        best = top_k(candidates, values, limit)
        return Hits(candidates[best].astype(np.int64), values[best], self._matched(query, awake))

    def _matched(self, query: _Query, awake: np.ndarray | None) -> int:
        """How many slots the query matches (any word's postings: a pair's hold both words), eligible and
        awake, as scoring every slot counts them."""
        hit = np.zeros(self.slot_count, dtype=bool)
        for slots, _, _ in query.lists[: query.words]:
            hit[slots] = True
        hit &= query.eligible
        if awake is not None:
            hit &= awake
        return int(np.count_nonzero(hit))

    def use_constants(self, k1: float, b: float, pair_weight: float) -> None:
        """Rank with these from now on (they are read per query; the length norms are recomputed)."""
        self.k1, self.b, self.pair_weight = k1, b, pair_weight
        self._length_norm = None
        self._last_scores = None

    def _length_norms(self, avgdl: float) -> np.ndarray:
        key = (self.slot_count, avgdl)
        if self._length_norm is None or self._length_norm[0] != key:
            self._length_norm = (key, bm25_length_norm(self.doc_len.view.astype(np.float64), avgdl, self.k1, self.b))
        return self._length_norm[1]

    # ------------------------------------------------------------------ snapshots
    def live_slots(self) -> np.ndarray:
        return np.flatnonzero(self.state.view != DEAD)

    def export_arrays(self, live: np.ndarray) -> dict[str, np.ndarray]:
        """Compact arrays of the live documents (renumbered 0..len-1 in slot order) for a snapshot.

        Written to keep temporaries small (int32 where it fits, one sort per posting kind): this runs
        in the server, and its peak is the server's peak.
        """
        if len(live) == self.slot_count:
            # Nothing dead: the per-document arrays are exported as they are. They are only ever appended to
            # (a write adds a slot; an extend writes past these views, and a regrown column leaves the old
            # buffer to them), so the views stay what they are now while the snapshot is written after the
            # lock is released: ~220 MB of copies less at 1M memories, the snapshot's share of the peak.
            remap = None
            pair_len, pair_keys, pair_tf = self.pair_len.view, self.pair_keys.view, self.pair_tf.view
            pair_start, doc_len, signature = self.pair_start.view, self.doc_len.view, self.pair_signature.view
        else:
            remap = np.full(self.slot_count, -1, dtype=np.int32)
            remap[live] = np.arange(len(live), dtype=np.int32)
            pair_len = self.pair_len.view[live]
            pair_idx = concat_segments(self.pair_start.view[live], pair_len)
            pair_keys = self.pair_keys.view[pair_idx]
            pair_tf = self.pair_tf.view[pair_idx]
            del pair_idx
            pair_start = (np.cumsum(pair_len) - pair_len).astype(np.int64)
            doc_len, signature = self.doc_len.view[live], self.pair_signature.view[live]
        postings = self._export_postings(remap)
        long = max(LONG_WORD_DOCS, len(live) // LONG_WORD_SHARE)
        long_words = np.flatnonzero(np.diff(postings["term_offsets"]) >= long).astype(np.int32)
        hot_keys, hot_slots, hot_tf = _hot_pairs(pair_keys, pair_tf, pair_len, long_words)
        return {
            "long_words": long_words,
            "hot_keys": hot_keys,
            "hot_slots": hot_slots,
            "hot_tf": hot_tf,
            "doc_len": doc_len,
            "state": self.state.view[live],  # changed in place (delete, archive): always a copy
            "pair_start": pair_start,
            "pair_len": pair_len,
            "pair_keys": pair_keys,
            "pair_tf": pair_tf,
            "pair_signature": signature,
            **postings,
        }

    def snapshot_terms(self, term_offsets: np.ndarray) -> list[str]:
        """The vocabulary to write with `export_arrays`' postings (`term_offsets`): a word no live document holds
        any more is written as "" (a permanently deleted document's words are not kept on disk, issue 45). Word ids
        stay as they are, so the pairs and postings that name words by id need no renumbering; "" is never a
        token, so no query finds those slots."""
        held = np.diff(term_offsets) > 0
        if len(held) != len(self.terms) or held.all():
            return self.terms
        return [term if keep else "" for term, keep in zip(self.terms, held.tolist(), strict=True)]

    def _export_postings(self, remap: np.ndarray | None) -> dict[str, np.ndarray]:
        """Base and delta word postings merged into one CSR, dead slots dropped (remap None: none dead)."""
        deltas = [(tid, rows.view) for tid, rows in self.delta.items() if len(rows)]
        if remap is None and not deltas and len(self.base_offsets) == len(self.terms) + 1:
            # Nothing written since the last snapshot: the base arrays are never modified in place.
            return {"term_offsets": self.base_offsets, "term_slots": self.base_slots, "term_tf": self.base_tf}
        base_slots, base_tf, live_offsets = self.base_slots, self.base_tf, self.base_offsets
        if remap is not None:
            renumbered = remap[base_slots]
            keep = renumbered >= 0
            base_slots, base_tf = renumbered[keep], base_tf[keep]
            dead = np.flatnonzero(~keep)  # few: only postings of entries deleted since the base was built
            dead_terms = np.searchsorted(live_offsets, dead, side="right") - 1
            del renumbered, keep
            live_counts = np.diff(live_offsets) - np.bincount(dead_terms, minlength=len(live_offsets) - 1)
            live_offsets = np.concatenate(([0], np.cumsum(live_counts)))
        n_terms = len(self.terms)
        counts = np.zeros(n_terms, dtype=np.int64)
        counts[: len(live_offsets) - 1] = np.diff(live_offsets)
        if deltas:
            d_terms = np.concatenate([np.full(len(rows), tid, dtype=np.int64) for tid, rows in deltas])
            d_rows = np.concatenate([rows for _, rows in deltas])
            d_slots = d_rows[:, 0] if remap is None else remap[d_rows[:, 0]]
            alive = d_slots >= 0
            d_terms, d_slots, d_tf = d_terms[alive], d_slots[alive], d_rows[alive, 1]
            order = np.argsort(d_terms, kind="stable")  # a term's delta rows stay in slot order
            d_terms, d_slots, d_tf = d_terms[order], d_slots[order], d_tf[order]
            # Each delta posting goes after its term's base postings (terms new since the base: at the end).
            at = live_offsets[np.minimum(d_terms + 1, len(live_offsets) - 1)]
            base_slots, base_tf = np.insert(base_slots, at, d_slots), np.insert(base_tf, at, d_tf)
            counts += np.bincount(d_terms, minlength=n_terms)
        return {
            "term_offsets": np.concatenate(([0], np.cumsum(counts))).astype(np.int64),
            "term_slots": base_slots.astype(np.int32, copy=False),
            "term_tf": base_tf.astype(np.int32, copy=False),
        }

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], keys: list[str], terms: list[str]) -> BM25Index:
        index = cls()
        index.keys = keys
        index.slot_of = {k: i for i, k in enumerate(keys)}
        index.doc_len = Column(np.int32, data=arrays["doc_len"], take=True)
        index.state = Column(np.int8, data=arrays["state"], take=True)
        index.pair_start = Column(np.int64, data=arrays["pair_start"], take=True)
        index.pair_len = Column(np.int32, data=arrays["pair_len"], take=True)
        index.pair_keys = Column(np.int64, data=arrays["pair_keys"], take=True)
        index.pair_tf = Column(np.int32, data=arrays["pair_tf"], take=True)
        index.pair_signature = Column(np.uint64, data=arrays["pair_signature"], take=True)
        index.terms = terms
        index.vocab = {t: i for i, t in enumerate(terms)}
        index.base_offsets = arrays["term_offsets"]
        index.base_slots = arrays["term_slots"]
        index.base_tf = arrays["term_tf"]
        index.long_words = np.zeros(len(terms), dtype=bool)
        if "long_words" in arrays:  # snapshots before it have no complete table of long words' pairs
            index.long_words[arrays["long_words"]] = True
        hot_keys = arrays["hot_keys"]
        if len(hot_keys):
            starts = _run_starts(hot_keys)
            rows = np.stack((arrays["hot_slots"], arrays["hot_tf"]), axis=1).astype(np.int32)
            for lo, hi in zip(starts, [*starts[1:], len(hot_keys)], strict=True):
                index.hot_pairs[int(hot_keys[lo])] = Column(np.int32, data=rows[lo:hi])
        if len(index.base_offsets) != len(terms) + 1 or len(index.doc_len) != len(keys):
            raise ValueError("snapshot arrays do not match their vocabulary or documents")
        state, lengths = index.state.view, index.doc_len.view
        for s in (ACTIVE, ARCHIVED):
            index._count[s] = int(np.count_nonzero(state == s))
            index._len_sum[s] = int(lengths[state == s].sum())
        return index


def _merged(
    slots_a: np.ndarray, scores_a: np.ndarray, slots_b: np.ndarray, scores_b: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Two (ascending distinct slots, scores) lists as one, scores of a slot in both added. A stable sort of
    two sorted runs is a merge (~1.5x faster than np.unique with its inverse, at 24,000 postings)."""
    if not len(slots_a):
        return slots_b, scores_b
    slots = np.concatenate((slots_a, slots_b))
    order = np.argsort(slots, kind="stable")
    slots = slots[order]
    starts = np.flatnonzero(np.concatenate(([True], slots[1:] != slots[:-1])))
    return slots[starts], np.add.reduceat(np.concatenate((scores_a, scores_b))[order], starts)


def _cut(lower: np.ndarray, limit: int) -> float:
    """A floor under the `limit`-th best final score, from lower bounds of some slots' (0 below `limit` slots)."""
    if len(lower) < limit:
        return 0.0
    kth = kth_largest(lower, limit) if len(lower) > limit else lower.min()
    return float(kth) * (1 - MARGIN)


def _looked_up(
    slots: np.ndarray, tf: np.ndarray, weight: float, candidates: np.ndarray, length_norm: np.ndarray, k1: float
) -> np.ndarray:
    """Each candidate's score from one list (`slots` ascending): its term where the list holds it, else 0."""
    if not len(candidates):
        return np.zeros(0)
    at = np.minimum(np.searchsorted(slots, candidates), len(slots) - 1)
    held = slots[at] == candidates
    return np.where(held, weight * bm25_norm_tf(tf[at].astype(np.float64), length_norm, k1), 0.0)


def _member(sorted_values: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Whether each of `values` is in `sorted_values` (ascending, not empty)."""
    at = np.minimum(np.searchsorted(sorted_values, values), len(sorted_values) - 1)
    return sorted_values[at] == values


def last_versions(items: Sequence[T], key: Callable[[T], str]) -> list[T]:
    """`items` without the earlier versions of a key given twice, in the order of the versions kept."""
    last = {key(item): i for i, item in enumerate(items)}
    return [item for i, item in enumerate(items) if last[key(item)] == i]


def _run_starts(*sorted_columns: np.ndarray) -> np.ndarray:
    """Where each run of equal rows begins in columns sorted together (empty columns: no runs)."""
    if not len(sorted_columns[0]):
        return np.zeros(0, dtype=np.int64)
    changed = np.zeros(len(sorted_columns[0]) - 1, dtype=bool)
    for column in sorted_columns:
        changed |= column[1:] != column[:-1]
    return np.flatnonzero(np.concatenate(([True], changed)))


def _runs(major: np.ndarray, minor: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Distinct (major, minor) pairs sorted by major then minor, with how often each occurs."""
    if not len(major):
        return major, minor, np.zeros(0, dtype=np.int32)
    order = np.lexsort((minor, major))
    major, minor = major[order], minor[order]
    starts = _run_starts(major, minor)
    counts = np.diff(np.append(starts, len(major))).astype(np.int32)
    return major[starts], minor[starts], counts


def _hot_pairs(
    pair_keys: np.ndarray, pair_tf: np.ndarray, pair_len: np.ndarray, long_words: np.ndarray
) -> tuple[np.ndarray, ...]:
    """Postings (key, slot, tf) of the pairs found in at least HOT_PAIR_DOCS documents and of every pair of two
    `long_words` (term ids, ascending), by key then slot."""
    ordered = np.sort(pair_keys)
    # A key equal to the key HOT_PAIR_DOCS - 1 places on is in a run that long (documents hold a key once).
    # Fewer pairs than that in all: none can be hot (and the slices below would be misaligned).
    head = ordered[: max(0, len(ordered) - HOT_PAIR_DOCS + 1)]
    hot_keys = np.unique(head[ordered[HOT_PAIR_DOCS - 1 :] == head])
    del head
    if len(long_words):
        distinct = ordered[np.concatenate(([True], ordered[1:] != ordered[:-1]))] if len(ordered) else ordered
        both = _member(long_words, distinct >> 32) & _member(long_words, distinct & 0xFFFFFFFF)
        hot_keys = np.union1d(hot_keys, distinct[both])
        del distinct
    del ordered
    if not len(hot_keys):
        return hot_keys, np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.int32)
    at = np.searchsorted(hot_keys, pair_keys)
    picked = np.flatnonzero(hot_keys[np.minimum(at, len(hot_keys) - 1)] == pair_keys)  # in slot order
    del at
    owner = (np.searchsorted(np.cumsum(pair_len), picked, side="right")).astype(np.int32)
    by_key = np.argsort(pair_keys[picked], kind="stable")  # stable: slots stay ascending within a key
    picked = picked[by_key]
    return pair_keys[picked], owner[by_key], pair_tf[picked]
