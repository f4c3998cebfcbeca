"""The long-term memory index: BM25 plus the columns that filters need, and its on-disk snapshot.

It holds no entry content (results are read from their files, which keeps memory small and answers
fresh); per document it keeps the id, category, tags and creation time, and for conversation memories (metadata
`session`) the session and the turn's place in it, from which a search finds a hit's neighbours.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

import numpy as np

from rockmem_mcp.models import MAX_USE_COUNT, EntryLocation, MemoryEntry, tag_key
from rockmem_mcp.search import facets
from rockmem_mcp.search.array_files import read_arrays, write_arrays
from rockmem_mcp.search.bm25 import ACTIVE, DEAD, BM25Index, Hits, last_versions, top_k
from rockmem_mcp.search.columns import Column
from rockmem_mcp.search.conversation_metadata import DATE_KEY, SESSION_KEY, SPEAKER_KEY, TURN_KEY, turn_number
from rockmem_mcp.search.rank import (
    NEIGHBOUR_WEIGHTS,
    NEIGHBOUR_WINDOW,
    Lifts,
    Named,
    Neighbours,
    Ranking,
    Weigh,
    best_lexical,
    rank,
    scored,
)
from rockmem_mcp.search.salience import FADING_MIN, ranking_factor
from rockmem_mcp.search.salience import salience as salience_values
from rockmem_mcp.search.strings import pack_strings, unpack_strings
from rockmem_mcp.search.tiers import Members, Tiers, tiered
from rockmem_mcp.search.tokenizer import TOKENIZER_VERSION, tokenize
from rockmem_mcp.search.vectors import VectorTable
from rockmem_mcp.storage.access_log import Access, uses_of
from rockmem_mcp.storage.changes import JournalPosition
from rockmem_mcp.storage.no_follow import open_fd

log = logging.getLogger(__name__)

# 5: salience columns; 6: conversation sessions; 7: int8 vectors with a scale per row; 8: the turn column is read
# from metadata `turn` (before, from a benchmark's own turn ids, which nothing reads now)
SNAPSHOT_FORMAT = 8
READABLE_FORMATS = (6, 7, SNAPSHOT_FORMAT)  # 6: float32 vectors, quantized when loaded; 6 and 7: turns zeroed
_NO_CATEGORY = -1
_NO_SESSION = -1
SALIENCE_REFRESH_S = 3600.0


@dataclass(frozen=True)
class SearchFilter:
    category: str | None = None  # whole-segment prefix
    tags: tuple[str, ...] = ()  # all must match, case-insensitively
    created_after: datetime | None = None
    created_before: datetime | None = None
    include_archived: bool = False
    salience_within: tuple[float, float, SalienceView] | None = None  # [low, high) as of the view: one tier


@dataclass(frozen=True)
class SalienceView:
    """How salience enters one search: the model's settings and the moment it is computed for."""

    now: float  # seconds since the epoch
    lam: float
    floor: float
    include_dormant: bool = False


class MemoryIndex:
    def __init__(self, bm25: BM25Index | None = None) -> None:
        self.bm25 = bm25 if bm25 is not None else BM25Index()  # an empty index is falsy (len 0)
        # The memory folders' stamps as of the last reconcile with them (memory/files.py, FolderStamp): kept in
        # the snapshot, so a start lists only the folders changed since.
        self.folder_stamps: dict[str, tuple[int, int, int]] = {}
        self.vectors = VectorTable(rows=self.bm25.slot_count)  # a row per slot, filled in the background
        self.category_code = Column(np.int32)
        self.created = Column(np.float64)
        # Salience inputs per slot: base (importance), pinned, uses and last use (file fields merged with the
        # access log's, through `accesses`).
        self.base = Column(np.float32)
        self.pinned = Column(np.bool_)
        self.access_count = Column(np.int32)
        self.last_access = Column(np.float64)
        self.accesses: Mapping[str, Access] = {}
        # Salience per slot, as of `_salience_at`: it moves by < 0.2% an hour, so a search reads this cache
        # (a full pass costs ~6 ms at 100k entries) and it is recomputed when an hour old; new slots and
        # reinforced ones are computed as they change.
        self._salience: Column | None = None
        self._factor_cache: Column | None = None  # the ranking factor, 0 for dormant: what a default search reads
        self._awake: Column | None = None  # factor > 0, kept beside it: what a pruned search counts as matches
        self._salience_at = 0.0
        self._salience_key = (-1.0, -1.0)  # (λ, floor) the cache was computed with
        # Conversation memories: the session code per slot (-1: none) and the turn number (ties in created_at).
        self.session_code = Column(np.int32)
        self.turn = Column(np.float64)
        self.sessions: list[str] = []
        self._session_ids: dict[str, int] = {}
        self._session_slots = 0  # slots ever given a session: 0 means no search pays for neighbours
        # Named speaker and month (search/facets.py): a code per slot, -1 without the metadata.
        self.speaker_code = Column(np.int32)
        self.month_code = Column(np.int32)
        self.speakers: list[str] = []  # speaker keys (lowercase words)
        self._speaker_ids: dict[str, int] = {}
        self._dated_slots = 0
        self._neighbours: tuple[int, np.ndarray, np.ndarray, np.ndarray] | None = None  # changes, slots, same, rows
        self.tag_codes = Column(np.int32)  # flat: every (slot, tag) pair, with its owner slot beside it
        self.tag_owner = Column(np.int32)
        self.categories: list[str] = []
        self._category_ids: dict[str, int] = {}
        self.tags: list[str] = []  # lowercased
        self._tag_ids: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self.bm25)

    def __contains__(self, entry_id: str) -> bool:
        return entry_id in self.bm25

    # ------------------------------------------------------------------ writes
    def upsert(self, entry: MemoryEntry) -> None:
        self.upsert_many([entry])

    def upsert_many(self, entries: Sequence[MemoryEntry]) -> None:
        """Index entries in order (a later version of an id replaces an earlier one)."""
        if not entries:  # every search catches up with the journal, mostly finding nothing: ~0.2 ms saved
            return
        entries = last_versions(entries, key=lambda e: e.id)
        # Every column is built before any is extended: a value that cannot be stored must not leave the
        # columns out of step with the BM25 slots.
        uses = [self._access_of(e) for e in entries]
        columns = (
            (self.category_code, np.array([self._category_id(e.category) for e in entries], dtype=np.int32)),
            (self.created, np.array([e.created_at.timestamp() for e in entries], dtype=np.float64)),
            (self.base, np.array([e.importance for e in entries], dtype=np.float32)),
            (self.pinned, np.array([e.pinned for e in entries], dtype=np.bool_)),
            (self.access_count, np.array([min(a.count, MAX_USE_COUNT) for a in uses], dtype=np.int32)),
            (self.last_access, np.array([a.last for a in uses], dtype=np.float64)),
            (self.session_code, np.array([self._session_id(e.metadata.get(SESSION_KEY)) for e in entries], np.int32)),
            (self.turn, np.array([turn_number(e.metadata.get(TURN_KEY)) for e in entries], dtype=np.float64)),
            (self.speaker_code, np.array([self._speaker_id(e.metadata.get(SPEAKER_KEY)) for e in entries], np.int32)),
            (self.month_code, np.array([facets.month_code(e.metadata.get(DATE_KEY)) for e in entries], np.int32)),
        )
        slots = self.bm25.add_many([(e.id, tokenize(e.document_text()), e.archived) for e in entries])
        self.vectors.match_slots(self.bm25.slot_count)
        for column, values in columns:
            column.extend(values)
        self._dated_slots += int(np.count_nonzero(columns[-1][1] != facets.NO_CODE))
        for slot, entry in zip(slots, entries, strict=True):
            for tag in entry.tags:
                self.tag_codes.append(self._tag_id(tag_key(tag)))
                self.tag_owner.append(slot)

    def remove(self, entry_id: str) -> bool:
        return self.bm25.remove(entry_id)

    def _access_of(self, entry: MemoryEntry) -> Access:
        return uses_of(entry).merged(self.accesses.get(entry.id))

    def set_access(self, entry_id: str, access: Access) -> None:
        """A use recorded since the entry was indexed (this process's or another's)."""
        slot = self.bm25.slot_of.get(entry_id)
        if slot is not None:
            self.access_count[slot] = max(int(self.access_count.view[slot]), min(access.count, MAX_USE_COUNT))
            self.last_access[slot] = max(float(self.last_access.view[slot]), access.last)
            if self._salience is not None and self._factor_cache is not None and slot < len(self._salience):
                value, factor = self._compute_salience(np.array([slot]), self._salience_at)
                self._salience[slot], self._factor_cache[slot] = value[0], factor[0]
                if self._awake is not None:
                    self._awake[slot] = factor[0] > 0

    def access(self, entry_id: str) -> Access | None:
        slot = self.bm25.slot_of.get(entry_id)
        if slot is None:
            return None
        return Access(int(self.access_count.view[slot]), float(self.last_access.view[slot]))

    def salience(self, slots: np.ndarray, view: SalienceView) -> np.ndarray:
        """The salience of `slots` as of `view.now` (to within an hour: see `_salience`)."""
        return self._cached(view)[0].view[slots]

    def _cached(self, view: SalienceView) -> tuple[Column, Column, Column]:
        """Salience, the ranking factor and whether it is above 0, per slot; recomputed when an hour old or the
        settings differ."""
        salience, factor, awake = self._salience, self._factor_cache, self._awake
        key = (view.lam, view.floor)
        if (
            salience is None
            or factor is None
            or awake is None
            or key != self._salience_key
            or abs(view.now - self._salience_at) > SALIENCE_REFRESH_S
        ):
            self._salience_at, self._salience_key = view.now, key
            values, factors = self._compute_salience(np.arange(self.bm25.slot_count), view.now)
            salience = self._salience = Column(np.float64, data=values)
            factor = self._factor_cache = Column(np.float64, data=factors)
            awake = self._awake = Column(np.bool_, data=factors > 0, take=True)
        elif len(salience) < self.bm25.slot_count:
            values, factors = self._compute_salience(np.arange(len(salience), self.bm25.slot_count), self._salience_at)
            salience.extend(values)
            factor.extend(factors)
            awake.extend(factors > 0)
        return salience, factor, awake

    def _compute_salience(self, slots: np.ndarray, now: float) -> tuple[np.ndarray, np.ndarray]:
        lam, floor = self._salience_key
        values = salience_values(
            self.base.view[slots], self.last_access.view[slots], self.access_count.view[slots],
            self.pinned.view[slots], now, lam,
        )  # fmt: skip
        factor = ranking_factor(values, floor)
        factor[values < FADING_MIN] = 0.0
        return values, factor

    def _category_id(self, category: str | None) -> int:
        if category is None:
            return _NO_CATEGORY
        code = self._category_ids.get(category)
        if code is None:
            code = self._category_ids[category] = len(self.categories)
            self.categories.append(category)
        return code

    def _session_id(self, session: str | None) -> int:
        if session is None or not session.strip():
            return _NO_SESSION
        session = session.replace("\n", " ")  # snapshots separate names by newlines; only identity matters
        code = self._session_ids.get(session)
        if code is None:
            code = self._session_ids[session] = len(self.sessions)
            self.sessions.append(session)
        self._session_slots += 1
        return code

    def _speaker_id(self, speaker: str | None) -> int:
        key = facets.speaker_key(speaker)
        if key is None:
            return facets.NO_CODE
        code = self._speaker_ids.get(key)
        if code is None:
            code = self._speaker_ids[key] = len(self.speakers)
            self.speakers.append(key)
        return code

    def neighbours(self, eligible: np.ndarray) -> Neighbours | None:
        """Every live session member and its neighbours within NEIGHBOUR_WINDOW, in the session's order:
        creation time, then turn number, then slot (import order). None when no memory has a session.
        Rebuilt after a write (one sort over the session members), reused by the searches that follow."""
        if not self._session_slots:
            return None
        cached = self._neighbours
        if cached is None or cached[0] != self.bm25.changes:
            slots = np.flatnonzero((self.session_code.view != _NO_SESSION) & (self.bm25.state.view != DEAD))
            session = self.session_code.view[slots]
            order = np.lexsort((slots, self.turn.view[slots], self.created.view[slots], session))
            slots, session = slots[order], session[order]
            same = Neighbours.within_sessions(session, NEIGHBOUR_WINDOW)
            row_of = np.full(self.bm25.slot_count, -1, dtype=np.int64)
            row_of[slots] = np.arange(len(slots))
            cached = self._neighbours = (self.bm25.changes, slots, same, row_of)
        return Neighbours(cached[1], cached[2], cached[3], eligible)

    def _tag_id(self, tag: str) -> int:
        code = self._tag_ids.get(tag)
        if code is None:
            code = self._tag_ids[tag] = len(self.tags)
            self.tags.append(tag)
        return code

    # ------------------------------------------------------------------ reads
    def location(self, entry_id: str) -> EntryLocation | None:
        slot = self.bm25.slot_of.get(entry_id)
        if slot is None:
            return None
        code = int(self.category_code.view[slot])
        return EntryLocation(entry_id, None if code == _NO_CATEGORY else self.categories[code])

    def ids_by_category(self, excluding: Collection[str | None] = ()) -> dict[str | None, set[str]]:
        """Indexed ids grouped by category (None: uncategorized), for diffing against the folders; the categories
        `excluding` names are left out (folders known unchanged: their ids are not even looked at)."""
        codes = self.category_code.view.tolist()
        names: list[str | None] = [*self.categories, None]  # code -1 picks the trailing None
        grouped: dict[str | None, set[str]] = {}
        if excluding:
            # A folder that is no indexed category (a parent of one, an empty one) excludes nothing.
            skipped = [_NO_CATEGORY if c is None else self._category_ids[c] for c in excluding
                       if c is None or c in self._category_ids]  # fmt: skip
            view = self.category_code.view
            wanted = np.flatnonzero((self.bm25.state.view != DEAD) & ~np.isin(view, skipped)).tolist()
            pairs: Iterable[tuple[str, int]] = ((self.bm25.keys[slot], slot) for slot in wanted)
        else:
            pairs = self.bm25.slot_of.items()
        for key, slot in pairs:
            category = names[codes[slot]]
            ids = grouped.get(category)
            if ids is None:
                ids = grouped[category] = set()
            ids.add(key)
        return grouped

    def _allowed(self, flt: SearchFilter) -> np.ndarray | None:
        """A bool mask over slots for the filters, or None when nothing filters."""
        mask: np.ndarray | None = None

        def narrow(m: np.ndarray) -> None:
            nonlocal mask
            mask = m if mask is None else mask & m

        if flt.category is not None:
            prefix = flt.category
            lut = np.zeros(len(self.categories) + 1, dtype=bool)  # index 0 is "uncategorized"
            for code, cat in enumerate(self.categories):
                lut[code + 1] = cat == prefix or cat.startswith(prefix + "/")
            narrow(np.take(lut, self.category_code.view + 1))  # take: half the time of lut[...] at 100k
        for tag in flt.tags:
            code = self._tag_ids.get(tag_key(tag))
            has = np.zeros(self.bm25.slot_count, dtype=bool)
            if code is not None:
                has[self.tag_owner.view[self.tag_codes.view == code]] = True
            narrow(has)
        if flt.created_after is not None:
            narrow(self.created.view >= flt.created_after.timestamp())
        if flt.created_before is not None:
            narrow(self.created.view < flt.created_before.timestamp())
        if flt.salience_within is not None:
            low, high, view = flt.salience_within
            values = self._cached(view)[0].view
            narrow((values >= low) & (values < high))
        return mask

    def search(
        self,
        query: str | None,
        flt: SearchFilter,
        limit: int,
        ranking: Ranking | None = None,
        query_vector: np.ndarray | None = None,
        salience: SalienceView | None = None,
        tiers: Tiers | None = None,
    ) -> Hits:
        """Ranked hits for `query` (BM25 unless `query_vector` is given for another mode), or the newest
        matching entries when there is no query. With `salience` (not in rockbot mode): relevance times the
        salience factor, dormant entries left out unless it includes them. With `tiers`, a query's hits in
        its best categories come first (search/tiers.py)."""
        if ranking is not None and ranking.mode == "rockbot":
            salience = None  # RockBot's ranking, exactly
        allowed = self._allowed(flt)
        tokens = tokenize(query) if query else []
        weigh: Weigh | None = None
        if salience is not None:
            view = salience
            weigh = lambda slots: self._factor(slots, view)  # noqa: E731
        searching = bool(tokens) or (ranking is not None and query_vector is not None)
        neighbours, lifts = (
            self._context(ranking, query_vector, query or "", allowed, flt) if searching else (None, None)
        )
        if tiers is not None and searching:
            return self._tiered(
                tokens, allowed, flt, limit, ranking or Ranking("bm25"), query_vector, weigh, tiers, neighbours, lifts
            )
        if ranking is not None and query_vector is not None and query and query.strip():
            lexical = self.bm25.scores(tokens, allowed, flt.include_archived)
            eligible = self._eligible(allowed, flt.include_archived)
            with_vector = eligible & self.vectors.present.view
            similarity = self.vectors.similarities(query_vector)
            return rank(ranking, lexical, similarity, with_vector, limit, weigh, neighbours, lifts)
        if tokens:
            if neighbours is None and lifts is None and (salience is None or not salience.include_dormant):
                # Nothing but BM25 and a factor per slot: MaxScore scores only what can make the cut.
                factor = awake = None
                if salience is not None:
                    _, factor_column, awake_column = self._cached(salience)
                    factor, awake = factor_column.view, awake_column.view
                hits = self.bm25.best(tokens, allowed, flt.include_archived, limit, factor, awake)
                if hits is not None:
                    return hits
            if weigh is None and neighbours is None and lifts is None:
                return self.bm25.search(tokens, allowed, flt.include_archived, limit)
            lexical = self.bm25.scores(tokens, allowed, flt.include_archived)
            weight = NEIGHBOUR_WEIGHTS["bm25"] if neighbours is not None else 0.0
            return best_lexical(lexical, limit, weigh, neighbours, weight, lifts)
        if query and query.strip():
            # Words were given but none is searchable (all shorter than three characters).
            return _NO_HITS
        slots = np.flatnonzero(self._eligible(allowed, flt.include_archived))
        if weigh is not None:
            slots = slots[weigh(slots) > 0]
        newest = top_k(slots, self.created.view[slots], limit)
        return Hits(slots[newest], np.full(len(newest), np.nan), len(slots))

    def _tiered(
        self,
        tokens: list[str],
        allowed: np.ndarray | None,
        flt: SearchFilter,
        limit: int,
        ranking: Ranking,
        query_vector: np.ndarray | None,
        weigh: Weigh | None,
        tiers: Tiers,
        neighbours: Neighbours | None = None,
        lifts: Lifts | None = None,
    ) -> Hits:
        """Every candidate scored as the flat search scores it, then ordered by the tiers."""
        lexical = self.bm25.scores(tokens, allowed, flt.include_archived)
        similarity = self.vectors.similarities(query_vector) if query_vector is not None else None
        with_vector = self.vectors.present.view
        if similarity is not None:
            with_vector = self._eligible(allowed, flt.include_archived) & with_vector
        slots, values = scored(ranking, lexical, similarity, with_vector, weigh, neighbours, lifts)
        category = self.category_code.view

        def members() -> Members:
            member_slots = np.flatnonzero(self._eligible(allowed, flt.include_archived))
            codes = category[member_slots] + 1
            if similarity is None:
                return Members(codes)
            return Members(codes, np.where(with_vector[member_slots], similarity[member_slots], np.nan))

        # Uncategorized (-1) becomes category 0.
        return tiered(tiers, slots, values, category[slots] + 1, len(self.categories) + 1, limit, members)

    def _context(
        self,
        ranking: Ranking | None,
        query_vector: np.ndarray | None,
        query: str,
        allowed: np.ndarray | None,
        flt: SearchFilter,
    ) -> tuple[Neighbours | None, Lifts | None]:
        """The session neighbours and the named speaker / month lifts this search uses: None each when the
        ranking has none (rockbot, vector, callers that did not ask) or no memory carries the metadata."""
        if ranking is None or ranking.mode not in ("hybrid", "bm25"):
            return None, None
        if query_vector is None:
            ranking = replace(ranking, mode="bm25")  # hybrid without embeddings ranks as bm25 does
        neighbours = None
        if ranking.neighbour_weight > 0 and self._session_slots:
            neighbours = self.neighbours(self._eligible(allowed, flt.include_archived))
        named: list[tuple[Named, float]] = []
        if ranking.lift_weight("speaker") > 0 and self.speakers:
            query_words = set(facets.words(query))
            codes = [code for code, key in enumerate(self.speakers) if facets.names_speaker(query_words, key)]
            if codes:
                speaker = self.speaker_code.view
                named.append((lambda slots: np.isin(speaker[slots], codes), ranking.lift_weight("speaker")))
        if ranking.lift_weight("month") > 0 and self._dated_slots:
            months, years = facets.named_months(query)
            if months:
                month = self.month_code.view
                in_month = lambda slots: facets.in_months(month[slots], months, years)  # noqa: E731
                named.append((in_month, ranking.lift_weight("month")))
        return neighbours, Lifts(tuple(named)) if named else None

    def _factor(self, slots: np.ndarray, view: SalienceView) -> np.ndarray:
        """The ranking factor of candidate slots; 0 (left out) for dormant ones unless the view includes them.
        Computed for candidates only: a search pays for the entries it matched, not for the whole index."""
        salience, factor, _ = self._cached(view)
        if view.include_dormant:
            return ranking_factor(salience.view[slots], view.floor)
        return factor.view[slots]

    def most_salient(self, limit: int, view: SalienceView, flt: SearchFilter | None = None) -> Hits:
        """Active (not archived) entries by salience, pinned ones first (they are 1), then the newest; `flt`
        narrows them (its include_archived is ignored)."""
        slots = np.flatnonzero(self._eligible(self._allowed(flt) if flt else None, include_archived=False))
        values = self.salience(slots, view)
        keep = values >= FADING_MIN if not view.include_dormant else np.ones(len(slots), dtype=bool)
        slots, values = slots[keep], values[keep]
        # Pinned first: salience is capped at 1, so a pinned memory ties with any other at the cap.
        best = top_k(slots, values + 2.0 * self.pinned.view[slots], limit)
        return Hits(slots[best], values[best], len(slots))

    def _eligible(self, allowed: np.ndarray | None, include_archived: bool) -> np.ndarray:
        state = self.bm25.state.view
        eligible = (state != DEAD) if include_archived else (state == ACTIVE)
        return eligible if allowed is None else eligible & allowed

    def category_counts(self) -> tuple[dict[str, int], int]:
        """Active entries per category, and the uncategorized count."""
        active = self.bm25.state.view == ACTIVE
        codes = self.category_code.view[active]
        counts = np.bincount(codes + 1, minlength=len(self.categories) + 1)
        per_category = {cat: int(counts[i + 1]) for i, cat in enumerate(self.categories) if counts[i + 1]}
        return per_category, int(counts[0])

    # ------------------------------------------------------------------ snapshots
    def save(self, path: Path, journal: JournalPosition) -> None:
        self.write_snapshot(path, self.snapshot_arrays(journal))

    @staticmethod
    def write_snapshot(path: Path, arrays: dict[str, np.ndarray]) -> None:
        """Write a snapshot (derived data: atomic but not fsynced; a torn one is just rebuilt)."""
        write_arrays(path, arrays)

    def snapshot_arrays(self, journal: JournalPosition) -> dict[str, np.ndarray]:
        """Compact arrays of the index (dead slots dropped) as of `journal`; safe to write unlocked: copies,
        or views of arrays that are only ever appended to (BM25Index.export_arrays)."""
        live = self.bm25.live_slots()
        arrays = self.bm25.export_arrays(live)
        stamps = self.folder_stamps  # replaced whole by a reconcile, never changed in place
        owners = self.tag_owner.view
        tag_keep = self.bm25.state.view[owners] != DEAD
        remap = np.full(self.bm25.slot_count, -1, dtype=np.int64)
        remap[live] = np.arange(len(live))
        new_owner = remap[owners[tag_keep]]
        order = np.argsort(new_owner, kind="stable")
        arrays.update(
            category_code=self.category_code.view[live],
            created=self.created.view[live],
            base=self.base.view[live],
            pinned=self.pinned.view[live],
            access_count=self.access_count.view[live],
            last_access=self.last_access.view[live],
            session_code=self.session_code.view[live],
            speaker_code=self.speaker_code.view[live],
            month_code=self.month_code.view[live],
            speakers=pack_strings(self.speakers),
            turn=self.turn.view[live],
            tag_owner=new_owner[order].astype(np.int32),
            tag_codes=self.tag_codes.view[tag_keep][order],
            **self.vectors.export(live),
            keys=pack_strings([self.bm25.keys[s] for s in live]),
            terms=pack_strings(self.bm25.snapshot_terms(arrays["term_offsets"])),
            categories=pack_strings(self.categories),
            tags=pack_strings(self.tags),
            sessions=pack_strings(self.sessions),
            folder_paths=pack_strings(list(stamps)),
            folder_stamps=np.array(list(stamps.values()), dtype=np.int64).reshape(-1, 3),
            header=np.array(
                [SNAPSHOT_FORMAT, TOKENIZER_VERSION, journal.generation, journal.offset, len(live)], dtype=np.int64
            ),
        )
        return arrays

    @classmethod
    def load(cls, path: Path, with_vectors: bool = True) -> tuple[MemoryIndex, JournalPosition] | None:
        """The snapshot at `path`, or None (with a log line) when absent, stale in format, or damaged.

        Without `with_vectors` (no embeddings configured) the vectors are not read: 100 MB at 100k entries.
        """
        try:
            snapshot = os.fdopen(open_fd(path, os.O_RDONLY), "rb")
        except FileNotFoundError:
            return None
        except OSError as exc:  # a link there (LinkRefusedError) or unreadable: rebuilt from the files
            log.warning("index snapshot %s is unusable (%s); rebuilding", path, exc)
            return None
        try:
            with snapshot:
                skipped = set() if with_vectors else {"vectors", "vector_scale", "vector_present", "vector_model"}
                arrays = read_arrays(snapshot, skip=skipped)
            fmt, tok_version, generation, offset, count = (int(x) for x in arrays["header"])
            if fmt not in READABLE_FORMATS or tok_version != TOKENIZER_VERSION:
                log.info("index snapshot %s is from another version; rebuilding", path)
                return None
            keys = unpack_strings(arrays["keys"])
            bm25 = BM25Index.from_arrays(arrays, keys, unpack_strings(arrays["terms"]))
            index = cls(bm25)
            index.category_code = Column(np.int32, data=arrays["category_code"], take=True)
            index.created = Column(np.float64, data=arrays["created"], take=True)
            index.base = Column(np.float32, data=arrays["base"], take=True)
            index.pinned = Column(np.bool_, data=arrays["pinned"], take=True)
            index.access_count = Column(np.int32, data=arrays["access_count"], take=True)
            index.last_access = Column(np.float64, data=arrays["last_access"], take=True)
            index.session_code = Column(np.int32, data=arrays["session_code"], take=True)
            # Before format 8 the column came from another key: ties fall back to creation order and import order.
            turns = arrays["turn"] if fmt == SNAPSHOT_FORMAT else np.zeros(count, dtype=np.float64)
            index.turn = Column(np.float64, data=turns, take=True)
            index.sessions = unpack_strings(arrays["sessions"])
            index._session_ids = {name: i for i, name in enumerate(index.sessions)}
            index._session_slots = int(np.count_nonzero(arrays["session_code"] != _NO_SESSION))
            index.speaker_code = Column(np.int32, data=arrays["speaker_code"], take=True)
            index.month_code = Column(np.int32, data=arrays["month_code"], take=True)
            index.speakers = unpack_strings(arrays["speakers"])
            index._speaker_ids = {name: i for i, name in enumerate(index.speakers)}
            index._dated_slots = int(np.count_nonzero(arrays["month_code"] != facets.NO_CODE))
            index.tag_owner = Column(np.int32, data=arrays["tag_owner"], take=True)
            index.tag_codes = Column(np.int32, data=arrays["tag_codes"], take=True)
            index.vectors = VectorTable.from_arrays(arrays, count)
            index.categories = unpack_strings(arrays["categories"])
            index._category_ids = {c: i for i, c in enumerate(index.categories)}
            index.tags = unpack_strings(arrays["tags"])
            if "folder_paths" in arrays:  # older snapshots have none: the first start lists every folder
                stamps = arrays["folder_stamps"].reshape(-1, 3).tolist()
                index.folder_stamps = {
                    path: tuple(stamp)
                    for path, stamp in zip(unpack_strings(arrays["folder_paths"]), stamps, strict=True)
                }
            index._tag_ids = {t: i for i, t in enumerate(index.tags)}
            columns = (index.category_code, index.created, index.base, index.pinned, index.access_count,
                       index.last_access, index.session_code, index.turn, index.speaker_code,
                       index.month_code)  # fmt: skip
            if not all(len(keys) == count == len(column) for column in columns):
                raise ValueError("document columns disagree")
        except Exception as exc:  # derived data: whatever is wrong with it, rebuild it
            # (a damaged zip alone can raise BadZipFile, NotImplementedError, EOFError, OSError, ...)
            log.warning("index snapshot %s is damaged (%s); rebuilding from the memory files", path, exc)
            return None
        return index, JournalPosition(generation, offset)


_NO_HITS = Hits(np.zeros(0, dtype=np.int64), np.zeros(0), 0)
