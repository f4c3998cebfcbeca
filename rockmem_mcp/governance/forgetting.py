"""Forgetting across every store (seed 004 §8.3): find what a request matches, forget what the user confirmed,
bring it back, or delete it for good with a log line.

Ids name their store: `memory:ID`, `episode:ID`, `procedure:SLUG`, `entity:ID`, `core:BLOCK:HASH` (HASH: 8 hex
digits of the line's text, so a core line keeps its id when lines above it come or go).

A soft forget hides an item from search, recall and the graph, and keeps it so `restore` can put it back as it
was (governance/forgotten_files.py keeps what left its store):
- memory: archived (the store's own archive: hidden from search and recall); the episodes that logged it leave
  their day log with it (they hold its text). A pinned memory is archived too: the user confirmed this item.
- episode: leaves its day log; restored with its id and time.
- procedure: archived.
- entity: removed from the graph with every triple touching it, the records kept (the graph's indexes and other
  processes follow through the graph's own delete and restore); a restored triple whose other end is itself
  forgotten waits in that end's record.
- core line: removed from MEMORY.md (a Critical Facts line's pinned mirror is archived by core memory itself).
A permanent forget deletes the files (as delete_memory, delete_episode, delete_procedure, delete_entity do, plus
what a soft forget kept) and appends one line per item to meta/forget.log. Each item is done whole or not at all
(what a step did is undone when a later one fails); one item's failure is reported and the others go on.

Audit lines (meta/audit.log) come from the stores themselves, one per change of a store's file: a soft forget is
ARCHIVE (the memory or procedure archived in place; the episode, entity and core line leaving their file, kept
under forgotten/), a permanent one DELETE, a restore EDIT "restored". What forgotten/ keeps is part of that
change, not a line of its own, except a permanent forget of an item only forgotten/ still held: DELETE of its
record there.
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime
from typing import TYPE_CHECKING, Any

from rockmem_mcp.audit.service import Audit, quoted
from rockmem_mcp.config import Settings
from rockmem_mcp.core.service import LIST_BLOCK, VAULT_CATEGORY, VAULT_SOURCE, CoreMemory, block_name, is_mirror_of
from rockmem_mcp.episodes.service import Episodes
from rockmem_mcp.errors import ChangedSinceReadError, InvalidInputError, NotFoundError, RockmemError
from rockmem_mcp.governance.erasure import Erasure, Traces, user_texts
from rockmem_mcp.governance.forgotten_files import ForgottenFiles, ForgottenRecord, line_hash
from rockmem_mcp.governance.shapes import ForgetOutcome, ForgetResult, ForgottenItem
from rockmem_mcp.graph.service import GraphService
from rockmem_mcp.graph.shapes import Entity, Triple
from rockmem_mcp.memory.service import MemoryService
from rockmem_mcp.models import (
    FORGET_STORES,
    Episode,
    ForgetCandidate,
    check_reason,
    check_text,
    utc_now,
    validate_entry_id,
)
from rockmem_mcp.procedures.service import Procedures
from rockmem_mcp.procedures.shapes import procedure_slug
from rockmem_mcp.search.tokenizer import tokenize
from rockmem_mcp.storage.pg import is_database_url

if TYPE_CHECKING:
    from rockmem_mcp.governance.history import GitHistory

log = logging.getLogger(__name__)

REASON = "forgotten at the user's request"
PREVIEW_CHARS = 200
MAX_LIMIT = 50
MAX_IDS = 100
COVERAGE_WEIGHT = 0.7  # of a candidate's score: the share of the query's words it holds; the rest, its store rank
ID_HELP = "forget takes the ids a find returns: memory:ID, episode:ID, procedure:SLUG, entity:ID or core:BLOCK:HASH"
_HASH = re.compile(r"[0-9a-f]{8}")


@dataclass
class _Found:
    """A match before ranking: its store, key, preview, the words it holds and its store's own score."""

    store: str
    key: str
    text: str
    words: set[str]
    raw: float | None  # the store's relevance (None: none, e.g. a core line)


def forgotten_store(settings: Settings) -> ForgottenFiles:
    """What soft forgets keep: the home's files, or the database replicas share (restored through any of them)."""
    where = (settings.home, settings.forgotten_dir, settings.meta_dir)
    if is_database_url(settings.store):
        from rockmem_mcp.governance.forgotten_postgres import PgForgottenRows
        from rockmem_mcp.storage.pg import shared_database

        return PgForgottenRows(shared_database(str(settings.store), "stores", settings.store_schema), *where)
    return ForgottenFiles(*where)


class Forgetting:
    def __init__(
        self,
        settings: Settings,
        memory: MemoryService,
        episodes: Episodes,
        procedures: Procedures,
        graph: Callable[[], GraphService],
        core: CoreMemory,
        clock: Callable[[], datetime] = utc_now,
        history: GitHistory | None = None,
    ) -> None:
        """`graph` is called when the graph is needed (a server opens it in the background); `history`: the home's,
        rewritten after a permanent forget (governance/erasure.py)."""
        self.settings = settings
        self.memory = memory
        self.episodes = episodes
        self.procedures = procedures
        self._graph = graph
        self.core = core
        self.files = forgotten_store(settings)
        self.audit = Audit(settings)  # stamped by the wall clock: a store's own clock is its records' time
        self.erasure = Erasure(settings, memory.audit, memory, episodes, history, graph)
        self._clock = clock
        self._core_words: tuple[str, list[tuple[str, str, set[str]]]] | None = None  # (version, lines)

    # ------------------------------------------------------------------ finding
    def find(self, query: str, limit: int = 10, wait: bool = True) -> list[ForgetCandidate]:
        """What `query` matches in every store (live items only), best first; nothing changes (no use counted).

        Each store is searched as it searches itself (memories by BM25 with dormant ones included, episodes by
        BM25 alone, live procedures, entities by name, core lines holding any of the query's words); stores
        interleave by one score: 0.7 × the share of the query's words the item holds + 0.3 × its score over its
        store's best. Ties go core, memory, entity, procedure, episode. An episode that logs a memory found too is
        left out (the memory speaks for it), and so is a Critical Facts line's pinned mirror (the line does).
        Without `wait`, episodes are left out while their index is being built (a server's first seconds at
        100k): for a caller on recall's path."""
        if not isinstance(query, str) or not query.strip():
            raise InvalidInputError("query is empty: say what the user wants forgotten, e.g. 'my old address'")
        check_text(query, "query", self.settings.max_content_bytes, "ROCKMEM_MAX_CONTENT_BYTES", "Shorten it.")
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
            raise InvalidInputError(f"limit must be a whole number from 1 to {MAX_LIMIT}; got {limit!r}")
        words = set(tokenize(query))
        found: list[_Found] = []
        memory_ids: set[str] = set()
        for store, search in (
            ("core", lambda: self._core_lines(words)),
            ("memory", lambda: self._memories(query, limit, memory_ids)),
            ("entity", lambda: self._entities(query, limit)),
            ("procedure", lambda: self._procedures(query, limit)),
            ("episode", lambda: self._episodes(query, limit, memory_ids, wait)),
        ):
            try:
                found += search()
            except (RockmemError, OSError) as exc:  # one broken store costs the others nothing
                log.warning("forget: %s left out of the candidates (%s)", store, exc)
        best: dict[str, float] = {}
        for item in found:
            if item.raw is not None:
                best[item.store] = max(best.get(item.store, 0.0), item.raw)
        ranked = []
        for rank, item in enumerate(found):
            coverage = len(words & item.words) / len(words) if words else 0.0
            top = best.get(item.store)
            relative = item.raw / top if item.raw is not None and top else coverage
            score = round(COVERAGE_WEIGHT * coverage + (1 - COVERAGE_WEIGHT) * relative, 3)
            ranked.append((-score, FORGET_STORES.index(item.store), rank, score, item))
        ranked.sort(key=lambda row: row[:3])
        return [
            ForgetCandidate(id=f"{item.store}:{item.key}", store=item.store, text=item.text, score=score)  # type: ignore[arg-type]
            for *_, score, item in ranked[:limit]
        ]

    def _core_lines(self, words: set[str]) -> list[_Found]:
        if not words:
            return []
        view = self.core.read()
        if self._core_words is None or self._core_words[0] != view.version:  # tokenized once per version
            lines = [
                (f"{block.name}:{line_hash(line)}", f"{block.name}: {line}", set(tokenize(line)))
                for block in view.blocks
                for line in block.lines
            ]
            self._core_words = (view.version, lines)
        lines = self._core_words[1]
        unique = {key: (text, held) for key, text, held in reversed(lines)}  # a line written twice: one id, once
        return [_Found("core", key, _preview(text), held, None) for key, (text, held) in unique.items() if words & held]

    def _memories(self, query: str, limit: int, memory_ids: set[str]) -> list[_Found]:
        # BM25 alone: a forget must be quick (the trigger asks on every recall), and keywords are what it names.
        hits = self.memory.search(query, limit=limit, mode="bm25", include_dormant=True).results
        found = []
        for hit in hits:
            entry = hit.entry
            if entry.category == VAULT_CATEGORY and entry.metadata.get("source") == VAULT_SOURCE["source"]:
                continue  # a Critical Facts line's mirror: the core line is the candidate
            memory_ids.add(entry.id)
            text = ("(pinned) " if entry.pinned else "") + entry.content
            found.append(_Found("memory", entry.id, _preview(text), set(tokenize(entry.content)), hit.score))
        return found

    def _episodes(self, query: str, limit: int, memory_ids: set[str], wait: bool = True) -> list[_Found]:
        # The memories found speak for the episodes that logged them: those are dropped, not replaced (reading
        # more episodes to make up for them would cost more than the whole rest of a find).
        found = []
        for score, episode in self.episodes.matching(query, limit, wait):
            if episode.memory_id in memory_ids:
                continue
            text = f"{episode.at:%Y-%m-%d %H:%M} {episode.type}: {episode.content}"
            words = set(tokenize(" ".join([episode.content, *episode.tags, episode.type])))
            found.append(_Found("episode", episode.id, _preview(text), words, score))
        return found

    def _procedures(self, query: str, limit: int) -> list[_Found]:
        found = []
        for score, procedure in self.procedures.search(query, limit, include_archived=True):
            if procedure.archived:
                continue
            text = f"procedure {procedure.name}: {'; '.join(procedure.steps)}"
            found.append(
                _Found("procedure", procedure.slug, _preview(text), set(tokenize(procedure.document_text())), score)
            )
        return found

    def _entities(self, query: str, limit: int) -> list[_Found]:
        found = []
        for hit in self._graph().find_entities(query, limit=limit).results:
            entity = hit.entity
            aliases = f", also {', '.join(entity.aliases)}" if entity.aliases else ""
            text = f"entity {entity.name} ({entity.type}{aliases}; {hit.triples} triple(s))"
            words = set(tokenize(" ".join([entity.name, *entity.aliases, entity.type, *entity.metadata.values()])))
            found.append(_Found("entity", entity.id, _preview(text), words, hit.score))
        return found

    # ------------------------------------------------------------------ forgetting and restoring
    def forget(self, ids: list[str], permanent: bool = False, reason: str | None = None) -> ForgetResult:
        """Forget the items the user confirmed: soft (hidden, kept for `restore`) or `permanent` (deleted, with
        a line per item in meta/forget.log). Each id is reported: done, or why not."""
        if reason is not None:
            check_reason(reason)
        if not permanent:
            return ForgetResult(items=[self._each(raw, lambda s, key: self._hide[s](key, reason)) for raw in _ids(ids)])
        traces = Traces()  # what the items deleted left in the record: taken out once, for all of them
        items = [self._each(raw, lambda s, key: self._erase[s](key, reason, traces)) for raw in _ids(ids)]
        left = self.erasure.erase(traces)
        for item in items:
            if item.ok and left:
                item.done += "; but " + "; ".join(left)
        return ForgetResult(items=items)

    def restore(self, ids: list[str]) -> ForgetResult:
        """Bring soft-forgotten items back (a memory or procedure archived some other way comes back too)."""
        restores = {
            "memory": self._restore_memory,
            "episode": self._restore_episode,
            "procedure": self._restore_procedure,
            "entity": self._restore_entity,
            "core": self._restore_core,
        }
        return ForgetResult(items=[self._each(raw, lambda store, key: restores[store](key)) for raw in _ids(ids)])

    def forgotten(self, limit: int = 100) -> list[ForgottenItem]:
        """What is soft-forgotten now, newest first: what `restore` can bring back."""
        records = sorted(self.files.all(), key=lambda r: (r.at, r.id), reverse=True)[:limit]
        return [ForgottenItem(id=r.id, store=r.store, text=r.text, at=r.at, reason=r.reason) for r in records]

    def _each(self, raw: str, act: Callable[[str, str], str]) -> ForgetOutcome:
        try:
            store, key = parse_id(raw)
            with self.files.locked():  # one forget or restore of an item at a time, across processes
                return ForgetOutcome(id=raw, ok=True, done=act(store, key))
        except (RockmemError, OSError) as exc:
            return ForgetOutcome(id=raw, ok=False, done=str(exc))

    @property
    def _hide(self) -> dict[str, Callable[[str, str | None], str]]:
        return {
            "memory": self._hide_memory,
            "episode": self._hide_episode,
            "procedure": self._hide_procedure,
            "entity": self._hide_entity,
            "core": self._hide_core,
        }

    @property
    def _erase(self) -> dict[str, Callable[[str, str | None, Traces], str]]:
        return {
            "memory": self._erase_memory,
            "episode": self._erase_episode,
            "procedure": self._erase_procedure,
            "entity": self._erase_entity,
            "core": self._erase_core,
        }

    def _record(self, store: str, key: str, text: str, reason: str | None, **kept: Any) -> ForgottenRecord:
        record = ForgottenRecord(
            id=f"{store}:{key}", store=store, at=self._clock(), text=_preview(text), reason=reason, **kept
        )  # type: ignore[arg-type]
        self.files.write(record, key)
        return record

    # memories
    def _hide_memory(self, key: str, reason: str | None) -> str:
        entry = self.memory.get(key)
        if entry.archived and self.files.read("memory", key) is not None:
            return "already forgotten"
        logged = self.episodes.logging(entry)
        with contextlib.ExitStack() as undo:
            self._record("memory", key, entry.content, reason, pinned=entry.pinned, episodes=logged)
            undo.callback(_quietly, self.files.remove, "memory", key)
            self.memory.delete(key, reason=reason or REASON, confirm_pinned=True)
            if not entry.archived:
                undo.callback(_quietly, self.memory.update, key, restore=True)
            if logged:
                self._drop_episodes(entry.created_at.date(), {e.id for e in logged})
            undo.pop_all()
        done = "archived: hidden from search and recall until restored"
        if logged:
            done += f"; the {len(logged)} episode(s) that logged it are hidden with it"
        if entry.pinned:
            done += "; it was pinned (in the vault) and is forgotten because the user confirmed this item"
        return done

    def _erase_memory(self, key: str, reason: str | None, traces: Traces) -> str:
        entry = self.memory.get(key)
        record = self.files.read("memory", key)
        self.memory.delete(key, permanent=True, confirm_pinned=True)
        episodes = self.episodes.forget_memory(entry)
        self.files.remove("memory", key)  # the episodes a soft forget kept go with it
        self._log("memory", key, entry.content, reason)
        traces.add(self.erasure.memory_traces(entry))
        if record is not None:
            traces.add(self._episode_traces(record.episodes))
        return f"deleted for good{f' with the {episodes} episode(s) that logged it' if episodes else ''}; logged"

    def _restore_memory(self, key: str) -> str:
        record = self.files.read("memory", key)
        try:
            self.memory.update(key, restore=True)
        except NotFoundError:
            if record is not None:  # erased or purged since: nothing left to bring back
                self.files.remove("memory", key)
            raise
        with contextlib.ExitStack() as undo:
            undo.callback(_quietly, self.memory.delete, key, reason=(record.reason if record else None) or REASON,
                          confirm_pinned=True)  # fmt: skip
            for episode in record.episodes if record else ():
                if self.episodes.put_back(episode):
                    undo.callback(_quietly, self._drop_episodes, episode.at.date(), {episode.id})
            if record is not None:
                self.files.remove("memory", key)
            undo.pop_all()
        return "restored"

    def _drop_episodes(self, day: date, episode_ids: set[str], why: str = "forgotten with their memory") -> None:
        self.episodes.remove_many(day, episode_ids, "ARCHIVE", why)

    # episodes
    def _hide_episode(self, key: str, reason: str | None) -> str:
        validate_entry_id(key)
        try:
            episode = self.episodes.get(key)
        except NotFoundError:
            if self.files.read("episode", key) is not None:
                return "already forgotten"
            raise
        with contextlib.ExitStack() as undo:
            self._record("episode", key, f"{episode.at:%Y-%m-%d %H:%M} {episode.content}", reason, episodes=[episode])
            undo.callback(_quietly, self.files.remove, "episode", key)
            kept = self._kept("episode", key, reason)
            if not self.episodes.delete(key, episode.at.date(), "ARCHIVE", kept):
                raise NotFoundError(f"episode {key} left its day log meanwhile; nothing was forgotten")
            undo.pop_all()
        return "hidden from search and recall (kept under forgotten/episodes/ until restored)"

    def _erase_episode(self, key: str, reason: str | None, traces: Traces) -> str:
        validate_entry_id(key)
        record = self.files.read("episode", key)
        try:
            episodes = [self.episodes.remove(key, why=_because("forgotten for good", reason))]
            summary = episodes[0].content
        except NotFoundError:
            if record is None:
                raise
            summary, episodes = record.text, record.episodes
            self._erase_record("episode", key, record, reason)
        self.files.remove("episode", key)
        self._log("episode", key, summary, reason)
        traces.add(self._episode_traces(episodes))
        traces.add(Traces([summary], ids=[key]))
        return "deleted for good; logged"

    def _restore_episode(self, key: str) -> str:
        validate_entry_id(key)
        record = self._forgotten("episode", key)
        for episode in record.episodes:
            self.episodes.put_back(episode)
        self.files.remove("episode", key)
        return "restored to its day's log"

    # procedures
    def _hide_procedure(self, key: str, reason: str | None) -> str:
        procedure = self.procedures.get(key)
        if procedure.archived and self.files.read("procedure", procedure.slug) is not None:
            return "already forgotten"
        with contextlib.ExitStack() as undo:
            self._record("procedure", procedure.slug, f"procedure {procedure.name}", reason)
            undo.callback(_quietly, self.files.remove, "procedure", procedure.slug)
            self.procedures.archive(procedure.slug, reason or REASON)
            undo.pop_all()
        return "archived: hidden from search and recall until restored"

    def _erase_procedure(self, key: str, reason: str | None, traces: Traces) -> str:
        procedure = self.procedures.delete(key, _because("forgotten", reason))
        self.files.remove("procedure", procedure.slug)
        self._log("procedure", procedure.slug, f"{procedure.name}: {'; '.join(procedure.steps)}", reason)
        traces.add(Traces(user_texts(procedure.model_dump(mode="json")), ids=[procedure.slug]))
        return "deleted for good, history and all; logged"

    def _restore_procedure(self, key: str) -> str:
        procedure = self.procedures.restore(key)
        self.files.remove("procedure", procedure.slug)
        return "restored"

    # entities
    def _hide_entity(self, key: str, reason: str | None) -> str:
        graph = self._graph()
        kept: list[ForgottenRecord] = []

        def keep(entity: Entity, triples: list[Triple]) -> None:
            text = f"entity {entity.name} ({entity.type})"
            kept.append(self._record("entity", entity.id, text, reason, entity=entity, triples=triples))

        try:
            deleted = graph.delete_entity(key, keep=keep, why=self._kept("entity", key, reason))
        except BaseException:
            if kept:
                self._undo_entity(graph, kept[0])
            raise
        return (
            f"hidden from the graph with its {deleted.triples_deleted} triple(s) (kept under forgotten/graph/ "
            "until restored)"
        )

    def _undo_entity(self, graph: GraphService, record: ForgottenRecord) -> None:
        """A hide that failed part-way: triples already removed go back; the record stays only if the entity
        left the graph after all (then it is forgotten, whole)."""
        assert record.entity is not None
        try:
            graph.resolve(record.entity.id)
        except NotFoundError:
            return
        with contextlib.suppress(RockmemError, OSError):
            graph.restore([], record.triples, "put back: the forget failed", "EDIT")
            self.files.remove("entity", record.entity.id)

    def _erase_entity(self, key: str, reason: str | None, traces: Traces) -> str:
        record = self.files.read("entity", key) if _is_id(key) else None
        try:
            # The triples that go with it are its own files; other triples keep every word (one naming "Bob Jones"
            # is not about "Bob").
            touching = [fact.id for fact in self._graph().get_entity(key).facts]
        except NotFoundError:
            touching = [t.id for t in record.triples] if record is not None else []
        try:
            deleted = self._graph().delete_entity(key, why=_because("forgotten for good", reason))
            name, triples = deleted.entity.name, deleted.triples_deleted
        except NotFoundError:
            if record is None or record.entity is None:
                raise
            name, triples = record.entity.name, len(record.triples)
            self._erase_record("entity", record.entity.id, record, reason)
        entity = record.entity if record is not None and record.entity else deleted.entity
        entity_id = entity.id
        self.files.remove("entity", entity_id)
        self._log("entity", entity_id, f"{name} and {triples} triple(s)", reason)
        triples = [self.erasure.relative(self.settings.graph_dir / "triples" / f"{t}.json") for t in touching]
        traces.add(Traces([entity.name, *entity.aliases], own_files=triples, ids=[entity_id]))
        return f"deleted for good with its {triples} triple(s); logged"

    def _restore_entity(self, key: str) -> str:
        validate_entry_id(key)
        record = self._forgotten("entity", key)
        entity = record.entity
        assert entity is not None
        graph = self._graph()
        for label in (entity.name, *entity.aliases):
            with contextlib.suppress(NotFoundError):
                other = graph.resolve(label)
                if other.id != entity.id:
                    raise InvalidInputError(
                        f"cannot restore entity {entity.name!r}: {label!r} now names entity {other.id} "
                        f"({other.name!r}); merge or delete that one first (graph), then restore again"
                    )
        now: list[Triple] = []
        waiting: dict[str, list[Triple]] = {}  # an end that is itself forgotten: its record keeps the triple
        dropped = 0
        for triple in record.triples:
            other_end = triple.object if triple.subject == entity.id else triple.subject
            if other_end == entity.id or _exists(graph, other_end):
                now.append(triple)
            elif self.files.read("entity", other_end) is not None:
                waiting.setdefault(other_end, []).append(triple)
            else:
                dropped += 1  # the other end was deleted for good: so is the fact
        for other_end, triples in waiting.items():
            other = self.files.read("entity", other_end)
            if other is not None:
                known = {t.id for t in other.triples}
                other.triples += [t for t in triples if t.id not in known]
                self.files.write(other, other_end)
        graph.restore([entity], now, "restored (it was forgotten)", "EDIT")
        graph.resolve(entity.id)  # NotFoundError if the graph refused it after all
        self.files.remove("entity", key)
        done = f"restored with {len(now)} triple(s)"
        if waiting:
            done += f"; {sum(map(len, waiting.values()))} more come back when the other entity is restored"
        if dropped:
            done += f"; {dropped} triple(s) to entities deleted since are gone"
        return done

    # core lines
    def _hide_core(self, key: str, reason: str | None) -> str:
        return self._remove_core_line(key, reason, keep=True)

    def _erase_core(self, key: str, reason: str | None, traces: Traces) -> str:
        return self._remove_core_line(key, reason, keep=False, traces=traces)

    def _remove_core_line(self, key: str, reason: str | None, keep: bool, traces: Traces | None = None) -> str:
        name, digest = key.split(":")
        record = self.files.read("core", key)
        for attempt in range(2):  # the file changed between the read and the edit: read it again, once
            view = self.core.read(name)
            lines, version = view.blocks[0].lines, view.version
            line = next((n for n, text in enumerate(lines, start=1) if line_hash(text) == digest), None)
            if line is None:
                if record is None:
                    raise NotFoundError(
                        f"no line of {name} has id {key}: the line changed or went since it was found; find again"
                    )
                if keep:
                    return "already forgotten"
                break
            text = lines[line - 1]
            with contextlib.ExitStack() as undo:
                if keep:
                    self._record("core", key, f"{name}: {text}", reason, block=name, line=text)
                    undo.callback(_quietly, self.files.remove, "core", key)
                    said = ("ARCHIVE", self._kept("core", key, reason))
                else:
                    said = ("DELETE", _because("forgotten for good", reason))
                    if name == LIST_BLOCK:  # its pinned mirror goes for good too, not to the archive
                        self._erase_mirrors(text, reason, traces)
                try:
                    self.core.edit("remove_line", name, version, line=line, audit_as=said)
                except ChangedSinceReadError:
                    if attempt:
                        raise
                    continue
                undo.pop_all()
            record = record or ForgottenRecord(id=f"core:{key}", store="core", at=self._clock(), text=text)
            break
        if keep:
            return f"removed from {name} in MEMORY.md (kept under forgotten/core/ until restored)"
        if line is None and record is not None and self.files.read("core", key) is not None:
            self._erase_record("core", key, record, reason)  # forgotten before: only its record was left
        self.files.remove("core", key)
        assert record is not None
        self._log("core", key, record.line or record.text, reason)
        if traces is not None:
            kept = self.erasure.relative(self.files.path_for("core", key))
            traces.add(Traces([record.line or record.text], [kept], [self.erasure.relative(self.settings.core_file)]))
        return f"removed from {name} for good; logged"

    def _erase_mirrors(self, line: str, reason: str | None, traces: Traces | None = None) -> None:
        """Delete for good the vault mirrors of Critical Facts line `line`, live or archived (a line hidden before
        left its mirror archived). If the line's removal then fails, the next sync of the vault mirrors it again."""
        for entry in [e for e in self.memory.iter_entries() if is_mirror_of(e, line)]:
            self.memory.delete(entry.id, permanent=True, reason=reason or "forgotten for good", confirm_pinned=True)
            if traces is not None:
                traces.add(self.erasure.memory_traces(entry))

    def _restore_core(self, key: str) -> str:
        record = self._forgotten("core", key)
        name, digest = key.split(":")
        assert record.line is not None
        for attempt in range(2):
            view = self.core.read(name)
            if any(line_hash(text) == digest for text in view.blocks[0].lines):
                break  # written back by hand meanwhile
            try:
                self.core.edit("append", name, view.version, text=record.line, audit_as=("EDIT", "restored"))
            except ChangedSinceReadError:
                if attempt:
                    raise
                continue
            break
        self.files.remove("core", key)
        return f"appended to {name} again"

    # ------------------------------------------------------------------ helpers
    def _forgotten(self, store: str, key: str) -> ForgottenRecord:
        record = self.files.read(store, key)
        if record is None:
            raise NotFoundError(
                f"{store}:{key} is not forgotten (nothing kept to restore); rockmem://forgotten lists what is"
            )
        return record

    def _episode_traces(self, episodes: list[Episode]) -> Traces:
        """Episodes deleted for good: their content, their day logs, what a soft forget kept (named by their ids)."""
        days = {self.erasure.relative(self.episodes.log.path(e.at.date())) for e in episodes}
        return Traces([e.content for e in episodes], shared=sorted(days), ids=[e.id for e in episodes])

    def _log(self, store: str, key: str, summary: str, reason: str | None) -> None:
        self.files.log_deleted(self._clock(), store, f"{store}:{key}", summary, reason)

    def _kept(self, store: str, key: str, reason: str | None) -> str:
        """What a soft forget's ARCHIVE line says: why, and where the item is kept."""
        kept = self.audit.file(self.files.path_for(store, key))
        return f"{_because('forgotten', reason)}, kept in {kept}"

    def _erase_record(self, store: str, key: str, record: ForgottenRecord, reason: str | None) -> None:
        """A permanent forget of an item only its forgotten/ record still held: the record goes, with a DELETE
        line (if that cannot be written, the record is written back and the error raised)."""
        if not self.files.remove(store, key):
            return
        said = f"{_because('forgotten for good', reason)}: {quoted(record.text)}"
        self.audit.record("DELETE", self.files.path_for(store, key), said, undo=lambda: self.files.write(record, key))


def parse_id(raw: object) -> tuple[str, str]:
    """(store, key) of a candidate id; the key checked as its store names things (a core key made canonical:
    'Critical Facts:1a2b3c4d')."""
    if not isinstance(raw, str) or ":" not in raw:
        raise InvalidInputError(f"unknown id {str(raw)[:60]!r}: {ID_HELP}")
    store, _, key = raw.partition(":")
    store = store.strip().lower()
    key = key.strip()
    if store not in FORGET_STORES or not key:
        raise InvalidInputError(f"unknown id {raw[:60]!r}: {ID_HELP}")
    if store in ("memory", "episode"):
        validate_entry_id(key)
    elif store == "procedure":
        key = procedure_slug(key)
    elif store == "core":
        block, _, digest = key.rpartition(":")
        name = block_name(block)
        if name is None or not _HASH.fullmatch(digest):
            raise InvalidInputError(f"unknown core line id {raw[:60]!r}: core ids look like core:Persona:1a2b3c4d")
        key = f"{name}:{digest}"
    return store, key


def _ids(ids: object) -> list[str]:
    if not isinstance(ids, list) or not ids:
        raise InvalidInputError("ids must be a non-empty list of the ids a find returned")
    if len(ids) > MAX_IDS:
        raise InvalidInputError(f"at most {MAX_IDS} ids per call; split the list")
    return list(dict.fromkeys(str(i) for i in ids))


def _is_id(key: str) -> bool:
    try:
        validate_entry_id(key)
    except InvalidInputError:
        return False
    return True


def _exists(graph: GraphService, entity_id: str) -> bool:
    try:
        return graph.resolve(entity_id).id == entity_id
    except NotFoundError:
        return False


def _because(what: str, reason: str | None) -> str:
    return f"{what} ({reason})" if reason else what


def _preview(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= PREVIEW_CHARS else flat[: PREVIEW_CHARS - 1] + "…"


def _quietly(undo: Callable[..., object], *args: Any, **kwargs: Any) -> None:
    """An undo step: its failure is logged, and the error that called for the undo is the one reported."""
    try:
        undo(*args, **kwargs)
    except (RockmemError, OSError) as exc:
        log.warning("forget: could not undo a step (%s)", exc)
