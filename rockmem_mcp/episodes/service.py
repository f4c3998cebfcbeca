"""The episodic store (seed 004 §5): what happened, when, as typed events in append-only daily logs.

An episode has content, a type (decision, fact, preference, task, event, emotion, correction), a confidence
(high, medium, low), tags and a source (conversation, reflection, user-explicit). Each is appended durably
to `episodes/{YYYY-MM-DD}.jsonl` (the UTC day it happened) and read back in order; the seed's daily
markdown log is a view of that file. Episodes are never edited; a user's explicit delete rewrites the day
without it. Time queries ("on", "between", "last week") read only the days in range.
"""

from __future__ import annotations

import itertools
import json
import logging
import re
from collections.abc import Callable
from datetime import date, datetime, timedelta

import numpy as np

from rockmem_mcp.audit.service import Audit, quoted
from rockmem_mcp.config import Settings
from rockmem_mcp.errors import InvalidInputError, NotFoundError, RockmemError, StorageError
from rockmem_mcp.models import (
    CONFIDENCES,
    EPISODE_SOURCES,
    EPISODE_TYPES,
    Episode,
    EpisodeHit,
    EpisodeSearch,
    MemoryEntry,
    as_utc,
    check_text,
    new_entry_id,
    normalize_tags,
    tag_key,
    utc_now,
    validate_entry_id,
)
from rockmem_mcp.reinforcement import Reinforcer
from rockmem_mcp.search.episode_index import SNAPSHOT_AFTER_LINES, ChangeFeed, EpisodeIndex, touch_directory
from rockmem_mcp.search.routing import route
from rockmem_mcp.search.salience import (
    BASE_AGENT,
    BASE_DERIVED,
    BASE_EXPLICIT,
    TYPE_WEIGHTS,
    ranking_factor,
    salience,
    salience_of,
    tier_counts,
)
from rockmem_mcp.search.tokenizer import tokenize
from rockmem_mcp.storage.access_log import Access
from rockmem_mcp.storage.daily_log import DailyLog
from rockmem_mcp.storage.no_follow import read_bytes
from rockmem_mcp.storage.pg import is_database_url
from rockmem_mcp.text import inert_markdown

log = logging.getLogger(__name__)

# Salience's base per confidence (seed 004 §9: what the user stated counts most, what was inferred least).
CONFIDENCE_BASE = np.array([BASE_EXPLICIT, BASE_AGENT, BASE_DERIVED])  # high, medium, low
EPISODE = "episode"  # the access log's kind
EPISODE_SNAPSHOT = "episode-index.npz"  # in the index folder, beside the memory index's snapshot
REFINED = 3  # a search weighs this many × limit candidates with every process's uses, not only this one's


def episode_log(settings: Settings) -> DailyLog[Episode]:
    """The episodic store: the home's day files, or the database replicas share (ROCKMEM_STORE), where every
    append and removal also writes a change row, so each replica's episode index follows the others'."""
    if is_database_url(settings.store):
        from rockmem_mcp.storage.pg import shared_database
        from rockmem_mcp.storage.pg_daily_log import PgDailyLog

        db = shared_database(str(settings.store), "stores", settings.store_schema)
        return PgDailyLog(db, "episodes", Episode, settings.episodes_dir, feed_store=EPISODE)  # type: ignore[return-value]
    return DailyLog(settings.episodes_dir, Episode)


def episode_feed(episodes: DailyLog[Episode]) -> ChangeFeed | None:
    """The change feed an episode index follows a database's log by (None: it follows the files)."""
    if episodes.on_disk:
        return None
    from rockmem_mcp.storage.pg_changes import ParsedRows, PgChangeFeed

    return PgChangeFeed(episodes.db, ParsedRows(0), store=EPISODE, skip_own=False)  # type: ignore[attr-defined]


class Episodes:
    def __init__(
        self, settings: Settings, clock: Callable[[], datetime] = utc_now, reinforcer: Reinforcer | None = None
    ) -> None:
        """`reinforcer`: the memory store's (one per process), so episodes' uses reach the access log."""
        self.settings = settings
        self.log = episode_log(settings)
        self.index = EpisodeIndex(self.log, settings.index_dir / EPISODE_SNAPSHOT, episode_feed(self.log))
        self.reinforcer = reinforcer
        self.audit = Audit(settings)  # stamped by the wall clock: a store's own clock is its records' time
        self._clock = clock

    def record(
        self,
        content: str,
        type: str = "event",
        confidence: str = "medium",
        tags: list[str] | None = None,
        source: str = "conversation",
        memory_id: str | None = None,
        at: datetime | None = None,
    ) -> Episode:
        """Append an episode to its day's log, durably; `at` defaults to now."""
        _one_of(type, EPISODE_TYPES, "type")
        _one_of(confidence, CONFIDENCES, "confidence")
        _one_of(source, EPISODE_SOURCES, "source")
        check_text(content, "content", self.settings.max_content_bytes, "ROCKMEM_MAX_CONTENT_BYTES", "Summarise it.")
        if not content.strip():
            raise InvalidInputError("content is empty: say what happened")
        now = self._clock()
        episode = Episode(
            id=new_entry_id(),
            at=as_utc(at) if at is not None else now,
            type=type,  # type: ignore[arg-type]
            confidence=confidence,  # type: ignore[arg-type]
            tags=normalize_tags(tags, self.settings.max_tags),
            source=source,  # type: ignore[arg-type]
            content=content,
            memory_id=validate_entry_id(memory_id) if memory_id else None,
        )
        day = episode.at.date()
        self.log.append(episode, day)
        self.audit.record(
            "APPEND", self.log.path(day), f"{episode.type} [{episode.id}] {quoted(content)}",
            undo=lambda: self.log.remove_where(day, lambda e: e.id == episode.id),
        )  # fmt: skip
        if day not in (now.date(), now.date() - timedelta(days=1)):  # followers check only those: tell them
            touch_directory(self.settings.episodes_dir)
        return episode

    def warm(self) -> None:
        """Build the search index now (a server does it in the background at start): from its snapshot and what
        the day files gained since, or from every line; a build that read many lines is saved for the next start."""
        try:
            with self.index.lock:
                self.index.sync()
        except (OSError, StorageError) as exc:  # a day file, or the shared store, that failed
            log.warning("episode index not built yet (%s); the first search tries again", exc)
            return
        if self.index.lines_since_snapshot >= SNAPSHOT_AFTER_LINES:
            self._save_index()

    def close(self) -> None:
        """Save the index if it changed since it was saved (the next start then reads only what is new)."""
        if self.index.built:
            self._follow_files()  # a day rewritten meanwhile (a delete) is saved as it is now, not as it was
        if self.index.built and self.index.lines_since_snapshot:
            self._save_index()

    def save_index(self) -> None:
        """Save the index now, as the day files are (after a permanent delete: the snapshot kept the episode's
        words and the end of its day's file; the one written here has neither)."""
        if self.index.built:
            self._follow_files()
            self._save_index()

    def _follow_files(self) -> None:
        try:
            with self.index.lock:
                self.index.sync()
        except (OSError, StorageError) as exc:  # saved as last followed: the next start checks every day file
            log.debug("episode index not followed before saving (%s)", exc)

    def _save_index(self) -> None:
        if self.index.snapshot is None:
            return
        try:
            self.index.save(self.index.snapshot)
        except OSError as exc:  # derived data: without it the next start reads every day file again
            log.debug("episode index snapshot not written (%s)", exc)

    def log_save(self, entry: MemoryEntry) -> Episode:
        """The line save_memory adds to the day's log (seed 003: "saves to daily log + structured DB"): the
        memory's content and tags, a type read from its category, confidence from its importance (>= 0.9
        high, >= 0.6 medium, else low), source user-explicit for importance 1 (the user asked)."""
        importance = entry.importance
        return self.record(
            entry.content,
            type=_type_of(entry.category),
            confidence="high" if importance >= 0.9 else "medium" if importance >= 0.6 else "low",
            tags=entry.tags,
            source="user-explicit" if importance >= 1.0 else "conversation",
            memory_id=entry.id,
            at=entry.created_at,
        )

    def find(
        self,
        query: str | None,
        limit: int,
        since: datetime | None = None,
        until: datetime | None = None,
        tags: list[str] | None = None,
        besides: set[str] = frozenset(),  # type: ignore[assignment]
        logged_too: bool = True,
    ) -> tuple[list[EpisodeHit], str | None]:
        """search_memory's episodes: with no period given, a time phrase in `query` ("last week",
        "on 2026-03-04") narrows them to its period and the rest of the query is searched; episodes that log a
        memory in `besides` (already returned) are left out, and without `logged_too` every episode that logs a
        memory unless a period is given (the memory speaks for it). Returns the hits and the route taken, if any."""
        taken = None
        if query and since is None and until is None:
            routed = route(query, self._clock())
            if routed.since is not None:  # the rest of the query, less the question's words, is searched
                since, until, query = routed.since, routed.until, routed.subject or None
                taken = routed.describe()
        unlogged = not logged_too and since is None and until is None
        found = self.search(
            query, limit + len(besides), since, until, tags=tags, reinforce=bool(query), unlogged=unlogged,
            wait=not unlogged,  # episodes beside memories: not waited for while the index is built at start
        )  # fmt: skip
        hits = [hit for hit in found.hits if hit.episode.memory_id not in besides][:limit]
        return hits, taken

    def search(
        self,
        query: str | None = None,
        limit: int = 10,
        since: datetime | None = None,
        until: datetime | None = None,
        types: list[str] | None = None,
        tags: list[str] | None = None,
        newest: bool = False,
        reinforce: bool = False,
        unlogged: bool = False,
        wait: bool = True,
    ) -> EpisodeSearch:
        """Episodes matching `query` best first (BM25 × salience's ranking factor: an old, unused, low-confidence
        episode ranks lower, never out), or without a query every episode in the period in the order they
        happened (the first `limit`, or with `newest` the last). `since` inclusive, `until` exclusive; `types`:
        any of them; `tags`: all; `unlogged`: only episodes that log no memory (save_memory's are left out).
        Without `wait`, nothing is found while another thread builds the index (a server's first seconds at
        100k episodes): for callers that add episodes to another answer."""
        for kind in types or ():
            _one_of(kind, EPISODE_TYPES, "type")
        wanted_tags = {tag_key(t) for t in normalize_tags(tags, self.settings.max_tags)} if tags else set()
        index = self.index
        if wait or index.built:
            index.lock.acquire()
        elif not index.lock.acquire(blocking=False):
            return EpisodeSearch(hits=[], total_matches=0)  # being built (the server's start): not waited for
        try:
            if not wait:  # beside another answer: a broken episode store costs that answer nothing
                try:
                    return self._search(query, limit, since, until, types, wanted_tags, newest, reinforce, unlogged)
                except (RockmemError, OSError) as exc:
                    log.warning("episodes left out of the answer: %s", exc)
                    return EpisodeSearch(hits=[], total_matches=0)
            return self._search(query, limit, since, until, types, wanted_tags, newest, reinforce, unlogged)
        finally:
            index.lock.release()

    def _search(
        self,
        query: str | None,
        limit: int,
        since: datetime | None,
        until: datetime | None,
        types: list[str] | None,
        wanted_tags: set[str],
        newest: bool,
        reinforce: bool,
        unlogged: bool,
    ) -> EpisodeSearch:
        index = self.index
        index.sync()
        allowed = index.live()
        at = index.at.view
        if since is not None:
            allowed &= at >= as_utc(since).timestamp()
        if until is not None:
            allowed &= at < as_utc(until).timestamp()
        if unlogged:
            allowed &= ~index.logs_memory.view
        if types:
            allowed &= np.isin(index.type_code.view, [EPISODE_TYPES.index(t) for t in types])
        for tag in wanted_tags:  # tags are indexed words: only episodes holding a tag's words are read to check it
            words = tokenize(tag)
            if words:
                allowed &= index.bm25.scores(words, allowed) > 0
        if not allowed.any():  # e.g. only save_memory's episodes, and those are not wanted
            return EpisodeSearch(hits=[], total_matches=0)
        now = self._clock().timestamp()
        if query and query.strip():
            wanted = max(limit, 1) * REFINED + (50 if wanted_tags else 0)
            hits = index.search(tokenize(query), allowed, wanted, self._factor)
            # Weighed again with every process's uses (the candidates were by this process's), then read.
            slots = hits.slots.tolist()
            values = [self._slot_salience(slot, now) for slot in slots]
            scores = hits.scores
            if self.settings.salience and slots:
                refined_factor = ranking_factor(np.array(values), self.settings.salience_floor)
                scores = scores / self._factor(hits.slots) * refined_factor
            refined = sorted(zip(scores.tolist(), slots, values, strict=True), key=lambda item: -item[0])
            candidates = [(slot, score, value) for score, slot, value in refined]
            total = hits.total
        else:
            listed = np.flatnonzero(allowed)
            order = np.argsort(at[listed], kind="stable")
            if newest:
                order = order[::-1]  # the newest first while reading; back in time order below
            candidates = [(slot, None, None) for slot in listed[order].tolist()]
            total = len(listed)
        found = self._read(candidates, wanted_tags, limit, now)
        if newest and not (query and query.strip()):
            found.reverse()
        if wanted_tags:
            total = len(found) if len(found) < limit else total
        if reinforce and found:
            self._use([hit.episode for hit in found])
        return EpisodeSearch(hits=found, total_matches=total)

    def matching(self, query: str, limit: int, wait: bool = True) -> list[tuple[float, Episode]]:
        """Episodes holding `query`'s words, best first by BM25 alone (however faded: a forget must find what
        salience ranks low), with their scores; no use is counted. Without `wait`, none while another thread
        builds the index (a server's first seconds)."""
        tokens = tokenize(query)
        index = self.index
        if not tokens or limit < 1:
            return []
        if wait or index.built:
            index.lock.acquire()
        elif not index.lock.acquire(blocking=False):
            return []
        try:
            index.sync()
            hits = index.search(tokens, index.live(), limit, lambda slots: np.ones(len(slots)))
            index.prefetch(hits.slots.tolist())
            found = [
                (score, index.read(slot)) for slot, score in zip(hits.slots.tolist(), hits.scores.tolist(), strict=True)
            ]
            return [(score, episode) for score, episode in found if episode is not None]
        finally:
            index.lock.release()

    def _read(
        self, candidates: list[tuple[int, float | None, float | None]], wanted_tags: set[str], limit: int, now: float
    ) -> list[EpisodeHit]:
        """The first `limit` candidates (slot, score, salience) whose episode reads back and has the tags."""
        hits: list[EpisodeHit] = []
        self.index.prefetch([slot for slot, _, _ in candidates[:limit]])  # a database's rows: one query
        for slot, score, value in candidates:
            if len(hits) >= limit:
                break
            episode = self.index.read(slot)
            if episode is None or (wanted_tags and not wanted_tags <= {tag_key(t) for t in episode.tags}):
                continue
            value = self._slot_salience(slot, now) if value is None else value
            hits.append(EpisodeHit(episode=episode, score=score, salience=round(value, 4), resource=resource(episode)))
        return hits

    # ------------------------------------------------------------------ salience
    def _factor(self, slots: np.ndarray) -> np.ndarray:
        """Salience's ranking factor for these slots, from this process's view of their uses."""
        index = self.index
        base = CONFIDENCE_BASE[index.confidence_code.view[slots]]
        values = salience(
            base,
            index.last_use.view[slots],
            index.uses.view[slots],
            np.zeros(len(slots), dtype=bool),
            self._clock().timestamp(),
            self.settings.salience_lambda,
            TYPE_WEIGHTS["episodic"],
        )
        return ranking_factor(values, self.settings.salience_floor) if self.settings.salience else np.ones(len(slots))

    def tier_counts(self) -> dict[str, int]:
        """How many episodes are in each salience tier (rockmem://salience)."""
        index = self.index
        with index.lock:
            index.sync()
            live = np.flatnonzero(index.live())
            uses, last = index.uses.view[live].copy(), index.last_use.view[live].copy()
            table = self.reinforcer.accesses(EPISODE) if self.reinforcer is not None else {}
            position = {int(slot): n for n, slot in enumerate(live.tolist())}
            for episode_id, access in list(table.items()):
                slot = index.slot(episode_id)
                if slot is not None and slot in position:
                    n = position[slot]
                    uses[n], last[n] = max(uses[n], access.count), max(last[n], access.last)
            values = salience(
                CONFIDENCE_BASE[index.confidence_code.view[live]], last, uses, np.zeros(len(live), dtype=bool),
                self._clock().timestamp(), self.settings.salience_lambda, TYPE_WEIGHTS["episodic"],
            )  # fmt: skip
        return tier_counts(values, self.settings.salience_archive_threshold)

    def _access(self, episode_id: str, slot: int) -> Access:
        index = self.index
        known = Access(int(index.uses.view[slot]), float(index.last_use.view[slot]))
        table = self.reinforcer.accesses(EPISODE) if self.reinforcer is not None else {}
        return known.merged(table.get(episode_id))

    def _slot_salience(self, slot: int, now: float) -> float:
        access = self._access(self.index.key(slot), slot)
        base = float(CONFIDENCE_BASE[int(self.index.confidence_code.view[slot])])
        lam = self.settings.salience_lambda
        return salience_of(base, access.last, access.count, False, now, lam, TYPE_WEIGHTS["episodic"])

    def _use(self, episodes: list[Episode]) -> None:
        """A use of these episodes (caller holds the index lock): counted now, logged in the background."""
        if self.reinforcer is None:
            return
        current = {}
        for episode in episodes:
            slot = self.index.slot(episode.id)
            if slot is not None:
                current[episode.id] = self._access(episode.id, slot)
        for episode_id, access in self.reinforcer.use(EPISODE, current).items():
            slot = self.index.slot(episode_id)
            if slot is not None:
                self.index.set_use(slot, access.count, access.last)

    def reinforce(self, episode_ids: list[str]) -> None:
        """Count a use of these episodes (recall showed them)."""
        with self.index.lock:
            episodes = [
                e for i in episode_ids if (slot := self.index.slot(i)) is not None and (e := self.index.read(slot))
            ]
            self._use(episodes)

    def on(self, day: date) -> list[Episode]:
        """The day's episodes, in the order they happened."""
        return sorted(self.log.read(day), key=lambda e: e.at)

    def between(
        self, start: datetime, end: datetime, query: str | None = None, limit: int | None = None
    ) -> list[Episode]:
        """Episodes from `start` (inclusive) to `end` (exclusive), oldest first; with `query`, only those whose
        text holds every searchable word of it (as search tokenizes words)."""
        start, end = as_utc(start), as_utc(end)
        if end <= start:
            raise InvalidInputError("the end of the period must come after its start")
        words = set(tokenize(query)) if query else set()
        found = []
        for day in self.log.days():
            if start.date() <= day <= end.date():
                for episode in self.on(day):
                    if start <= episode.at < end and (not words or words <= set(tokenize(_text(episode)))):
                        found.append(episode)
        return found[:limit] if limit is not None else found

    def last(self, days: int, query: str | None = None) -> list[Episode]:
        """The last `days` days' episodes ("last week": 7), oldest first."""
        now = self._clock()
        return self.between(now - timedelta(days=days), now + timedelta(microseconds=1), query)

    def delete(self, episode_id: str, day: date, action: str = "DELETE", why: str | None = None) -> bool:
        """A user's explicit delete: the day's log is rewritten without the episode. False if it was not there.
        `action`, `why`: how its audit line says it (ARCHIVE for a soft forget, which keeps it elsewhere)."""
        validate_entry_id(episode_id)
        return bool(self.remove_many(day, {episode_id}, action, why))

    def remove_many(
        self, day: date, episode_ids: set[str], action: str = "DELETE", why: str | None = None
    ) -> list[Episode]:
        """Rewrite `day`'s log without these episodes, with one audit line (if the line cannot be written, they
        are appended back and the error raised); returns those removed."""
        return self._remove_where(day, lambda episode: episode.id in episode_ids, action, why)

    def _remove_where(self, day: date, drop: Callable[[Episode], bool], action: str, why: str | None) -> list[Episode]:
        gone: list[Episode] = []

        def dropped(episode: Episode) -> bool:
            if drop(episode):
                gone.append(episode)
                return True
            return False

        if self.log.remove_where(day, dropped):
            what = "; ".join(f"[{e.id}] {quoted(e.content, 40)}" for e in gone[:3]) + (" …" * (len(gone) > 3))
            because = f" ({why})" if why else ""
            self.audit.record(
                action, self.log.path(day), f"{len(gone)} episode(s){because}: {what}",
                undo=lambda: self._append_back(gone),
            )  # fmt: skip
        return gone

    def _append_back(self, episodes: list[Episode]) -> None:
        for episode in episodes:
            self.log.append(episode, episode.at.date())
        touch_directory(self.settings.episodes_dir)

    def _day_rows(self, day: date) -> list[tuple[str, str, str, list[str], str]]:
        """(time in ISO 8601, UTC; type, confidence, tags, content) of the day's episodes in time order. A day
        whose every line is an episode as this server writes it (UTC times ending in Z) is read with plain JSON —
        a 10,000-episode day in about half the time full validation takes; any other day through the model."""
        try:
            data = read_bytes(self.log.path(day)) if self.log.on_disk else b""
        except FileNotFoundError:
            return []
        except OSError:  # a link, FIFO or unreadable file: the model's path reports it as before
            data = b""
        lines = [line for line in data.split(b"\n") if line.strip()]
        try:
            records = json.loads(b"[" + b",".join(lines) + b"]") if data.endswith(b"\n") else []
            rows = [_plain_row(record) for record in records]
        except (ValueError, TypeError, KeyError, AttributeError):  # not as written here: the model decides
            rows = []
        if not rows or len(rows) != len(lines):
            return [(e.at.isoformat(), e.type, e.confidence, e.tags, e.content) for e in self.on(day)]
        if any(later[0] < earlier[0] for earlier, later in itertools.pairwise(rows)):  # appended in time order
            rows.sort(key=lambda row: _sortable(row[0]))
        return rows

    def get(self, episode_id: str) -> Episode:
        """The episode with this id, as its day log holds it now."""
        try:
            validate_entry_id(episode_id)
        except InvalidInputError:
            raise InvalidInputError(
                f"invalid episode id {str(episode_id)[:40]!r}: ids are as search_memory with stores=['episodes'] "
                "returns them"
            ) from None
        with self.index.lock:
            self.index.sync()
            slot = self.index.slot(episode_id)
            episode = self.index.read(slot) if slot is not None else None
        if episode is None:
            raise NotFoundError(f"no episode {episode_id}: search_memory with stores=['episodes'] finds ids")
        return episode

    def remove(self, episode_id: str, why: str | None = None) -> Episode:
        """A user's explicit delete by id: the episode's day is rewritten without it; returns what went."""
        episode = self.get(episode_id)
        if not self.delete(episode_id, episode.at.date(), why=why):
            raise NotFoundError(f"no episode {episode_id}: search_memory with stores=['episodes'] finds ids")
        return episode

    def put_back(self, episode: Episode) -> bool:
        """Append a removed episode to its day's log again, with its id and time (a restore); False, nothing
        written, if the day already holds it."""
        day = episode.at.date()
        if any(e.id == episode.id for e in self.log.read(day)):
            return False
        self.log.append(episode, day)
        self.audit.record(
            "EDIT", self.log.path(day), f"restored episode [{episode.id}] {quoted(episode.content)}",
            undo=lambda: self.log.remove_where(day, lambda e: e.id == episode.id),
        )  # fmt: skip
        touch_directory(self.settings.episodes_dir)  # an older day: followers must look again
        return True

    def logging(self, entry: MemoryEntry) -> list[Episode]:
        """The episodes that logged this memory (save_memory's line, on the day it was created)."""
        return [e for e in self.log.read(entry.created_at.date()) if e.memory_id == entry.id]

    def forget_memory(self, entry: MemoryEntry) -> int:
        """A memory erased for good takes the episodes that logged it along (their content is its content)."""
        why = f"they logged memory {entry.id}, deleted for good"
        return len(self._remove_where(entry.created_at.date(), lambda e: e.memory_id == entry.id, "DELETE", why))

    def days(self) -> list[tuple[date, int]]:
        """Every day with a log and how many episodes it holds, oldest first."""
        with self.index.lock:
            self.index.sync()
            return self.index.day_counts()

    def markdown(self, day: date) -> str:
        """The day as the seed's episode log: a title, then `## HH:MM | type | confidence:… | tags:[…]` and the
        content per episode. Stored text cannot forge the log's structure: a content line markdown would read as
        a heading, setext underline, HTML block or fence is escaped with `\\` (text.inert_markdown), and `]`,
        `|`, `,` and `:` in a tag are escaped so a tag cannot forge a heading's fields."""
        lines = [f"# {day.isoformat()} — Episode Log", ""]
        escapes = _TAG_ESCAPES
        for at, kind, confidence, tags, content in self._day_rows(day):  # at: ISO 8601 in UTC
            tags_text = ", ".join([tag.translate(escapes) for tag in tags]) if tags else ""
            lines.append(
                f"## {at[11:16]} | {kind} | confidence:{confidence} | tags:[{tags_text}]\n{inert_markdown(content)}\n"
            )
        return "\n".join(lines)


# A saved memory's category, by its words, to the episode type it logs (the first that matches; else fact).
_CATEGORY_TYPES = (
    ("preference", "preference"),
    ("decision", "decision"),
    ("anti-pattern", "correction"),
    ("correction", "correction"),
    ("task", "task"),
    ("todo", "task"),
    ("event", "event"),
)


def _type_of(category: str | None) -> str:
    words = (category or "").lower()
    return next((kind for word, kind in _CATEGORY_TYPES if word in words), "fact")


_TAG_ESCAPES = str.maketrans(
    {c: "\\" + c for c in "\\]|,:["}
)  # what would end or split the tags:[…] field, or forge a field: label


_UTC_TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?Z")


def _plain_row(record: dict) -> tuple[str, str, str, list[str], str]:
    """A decoded line as (at, type, confidence, tags, content), checked as the model would accept it; ValueError
    (or the KeyError, TypeError a missing or odd field raises) otherwise."""
    at, kind, confidence, tags, content = (
        record["at"], record["type"], record["confidence"], record["tags"], record["content"]
    )  # fmt: skip
    if (
        not isinstance(record["id"], str)
        or not _UTC_TIME.fullmatch(at)
        or kind not in EPISODE_TYPES
        or confidence not in CONFIDENCES
        or type(content) is not str
        or type(tags) is not list
    ):
        raise ValueError("not an episode as written here")
    "".join(tags)  # TypeError for a tag that is not text
    return at, kind, confidence, tags, content


def _sortable(at: str) -> str:
    """A UTC time written with or without microseconds, as a string that sorts in time order."""
    whole, _, fraction = at[:-1].partition(".")
    return f"{whole}.{fraction:0<6}"


def parse_day(text: str) -> date:
    """A day as YYYY-MM-DD, or an error that says so."""
    try:
        return date.fromisoformat(text.strip())
    except ValueError:
        raise InvalidInputError(f"a day is YYYY-MM-DD (UTC), e.g. 2026-03-04; got {text[:40]!r}") from None


def resource(episode: Episode) -> str:
    return f"rockmem://episodes/{episode.at.date().isoformat()}"


def _text(episode: Episode) -> str:
    return " ".join([episode.content, *episode.tags, episode.type])


def _one_of(value: str, allowed: tuple[str, ...], what: str) -> None:
    if value not in allowed:
        raise InvalidInputError(f"{what} must be one of {', '.join(allowed)}; got {value!r}")
