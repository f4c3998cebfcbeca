"""The dream pass: consolidation, preference inference, anti-patterns, graph extraction, graph cleanup, and
reading the episodes (facts, graph and procedures learned from them: consolidation/dream_episodes.py).

Whoever proposes the changes (an LLM, the calling agent, or the deterministic pass below), every plan goes
through `apply`, which enforces the safeguards in code:
- an id the plan names must be a live memory (or graph triple) — unknown ids are refused with a report;
- every source of a merge is archived (superseded by the merged memory), never deleted;
- a merge whose text drops a proper noun, a number, a negation or any other content word of a source is refused,
  naming the source and the words (consolidation/fact_check.py);
- a merge of memories that contradict each other (a negation, or different times, dates or amounts) is refused,
  and the pair is listed under the report's contradictions for the user to decide;
- pinned memories (the vault) are never merged away, archived, changed or purged (an archived one neither);
  memories used 5 times or more are never pruned (archived as noise: RockBot's rule, counting the uses in the
  access log too) but may be merged (their uses carry into the merged memory) or re-filed;
- merge arithmetic: earliest created_at, latest last use, summed uses (access log included), highest
  importance;
- one memory is changed by at most one action of a plan;
- each pass may only do its own kind of change (consolidation merges, archives and updates; preferences and
  anti-patterns create; entities adds to the graph; graph merges entities and drops triples; episodes creates,
  adds to the graph and saves procedures);
- what the episodes pass makes names the episodes it came from, which must exist; episodes never change.
A run holds a lock (two dreams never overlap), and writes a report to dream-reports/{id}.json.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import secrets
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import numpy as np

from rockmem_mcp.audit.retention import fold_quietly
from rockmem_mcp.audit.service import acting_as, quoted
from rockmem_mcp.config import Settings
from rockmem_mcp.consolidation.decay import decay_pass
from rockmem_mcp.consolidation.dream_episodes import (
    EpisodeMark,
    EpisodeMarks,
    episode_line,
    known_procedures,
    later,
    mark_after,
    unknown_episodes,
    unread,
)
from rockmem_mcp.consolidation.dream_hooks import checkpoint
from rockmem_mcp.consolidation.dream_journal import MergeJournal, version
from rockmem_mcp.consolidation.dream_reports import report_store
from rockmem_mcp.consolidation.fact_check import (
    Facts,
    clash,
    clues,
    contradiction,
    contradictions,
    details,
    facts,
    merge_loss,
)
from rockmem_mcp.consolidation.shapes import (
    DreamAction,
    DreamMaterial,
    DreamPlan,
    DreamProcedure,
    DreamReport,
    PlanCreate,
    PlanMerge,
)
from rockmem_mcp.consolidation.templates import Templates
from rockmem_mcp.conversation.feedback import FeedbackLog
from rockmem_mcp.conversation.service import LogMark, consume_log, read_log, remember_read, take_read_mark
from rockmem_mcp.episodes.service import Episodes
from rockmem_mcp.errors import CorruptEntryError, InvalidInputError, NotFoundError, RockmemError
from rockmem_mcp.graph.service import GraphService
from rockmem_mcp.llm import ChatLLM
from rockmem_mcp.memory.service import MemoryService
from rockmem_mcp.models import MemoryEntry, normalize_category, normalize_tags, utc_now
from rockmem_mcp.procedures.service import Procedures
from rockmem_mcp.procedures.shapes import MAX_LINKS, Procedure, procedure_slug
from rockmem_mcp.search.salience import derived_importance
from rockmem_mcp.search.tokenizer import tokenize
from rockmem_mcp.storage.no_follow import make_folders, open_fd
from rockmem_mcp.storage.pg import DREAM_LOCK, store_lock

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no cross-process lock
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger(__name__)
Progress = Callable[[int, int, str], None]  # (steps done, steps in all, what the last one did)

PASSES = ("consolidation", "preferences", "anti-patterns", "entities", "graph", "episodes")
DIRECTIVES = {
    "consolidation": "dream",
    "anti-patterns": "anti-pattern-dream",
    "preferences": "pref-dream",
    "entities": "entity-dream",
    "graph": "graph-consolidation-dream",
    "episodes": "episode-dream",
}
# Which plan fields each pass may use.
ALLOWED = {
    "consolidation": {"merges", "archives", "updates"},
    "preferences": {"creates"},
    "anti-patterns": {"creates"},
    "entities": {"entities", "triples"},
    "graph": {"entity_merges", "drop_triples"},
    "episodes": {"creates", "entities", "triples", "procedures"},
}
PROTECTED_REINFORCEMENT = 5
NEAR_DUPLICATE_COSINE = 0.88
NEAR_DUPLICATE_OVERLAP = 0.8  # word-set Jaccard without embeddings
SUBJECT_HOLDERS = 200  # a word held by more memories is no sign two of them are about one thing
# The half-life decay before salience kept the importance it lowered here; a merge does not carry it on.
LEGACY_DECAY_KEY = "importance_before_decay"
PURGE_ARCHIVED_DAYS = 90
WEAK_TRIPLE_CONFIDENCE = 0.4
OLD_GRAPH_DAYS = 14
MIN_INTERVAL = timedelta(hours=6)  # scheduled runs keep at least this far apart
MERGE_BATCH = 250  # merges written per durable batch
MIN_OUTPUT_TOKENS = 256  # a batch is not sent with less output budget left: the plan would be cut off
MARKED_MODES = ("llm", "reflection")  # modes whose apply is told how far the material was read
SENSITIVE = re.compile(
    r"password|passphrase|credential|secret|token|api[ _-]?key|ssh|2fa|mfa|security|secure|encrypt|vpn|"
    r"firewall|login|log in|sign[ -]?in|auth|permission|access|private key|bank|credit card|card number|iban|"
    r"salary|payment|money|invoice|budget|price|\$|€|£",
    re.IGNORECASE,
)


class DreamBusy(RockmemError):
    pass


def protection(entry: MemoryEntry, pruning: bool = False) -> str | None:
    """Why a dream must leave `entry` (with its uses merged: MemoryService.with_uses) as it is, or None;
    `pruning`: for archiving it as noise, which a memory in use is also spared (a merge keeps its uses)."""
    if entry.pinned:
        return f"{entry.id} is pinned (unpin it with update_memory pinned=false to let a dream change it)"
    if pruning and entry.reinforcement_count >= PROTECTED_REINFORCEMENT:
        return f"{entry.id} was used {entry.reinforcement_count} times"
    return None


def protected(entry: MemoryEntry) -> bool:
    """Never pruned (pinned, or in use)."""
    return protection(entry, pruning=True) is not None


@dataclass
class _Run:
    """One apply: the report being built, the entries as they stand, the ids already changed."""

    report: DreamReport
    entries: dict[str, MemoryEntry]
    touched: set[str]

    def reject(self, action: str, ids: list[str], reason: str) -> None:
        self.report.rejected.append(DreamAction(action=action, ids=ids, reason=reason))

    def applied(self, action: str, ids: list[str], reason: str, result_id: str | None = None) -> None:
        self.report.applied.append(DreamAction(action=action, ids=ids, reason=reason, result_id=result_id))

    def contradiction(self, ids: list[str], reason: str) -> None:
        if all(set(found.ids) != set(ids) for found in self.report.contradictions):
            self.report.contradictions.append(DreamAction(action="contradiction", ids=ids, reason=reason))

    def live(self, entry_id: str) -> MemoryEntry | None:
        entry = self.entries.get(entry_id)
        return entry if entry is not None and not entry.archived else None


@dataclass
class _ReadyMerge:
    """A merge that passed the safeguards, ready to write."""

    ids: list[str]
    sources: list[MemoryEntry]
    merged: MemoryEntry
    reason: str


@dataclass
class LLMPlan:
    """A model's plan for one pass, before it is applied."""

    plan: DreamPlan = field(default_factory=DreamPlan)
    problems: list[str] = field(default_factory=list)
    read_through: LogMark | EpisodeMark | None = None
    uncovered: int = 0  # items of the material not sent to the model (a budget or a failure stopped it)
    sent: int = 0  # items the model answered for


class Dreamer:
    def __init__(
        self,
        memory: MemoryService,
        graph: GraphService,
        settings: Settings,
        templates: Templates,
        clock: Callable[[], datetime] = utc_now,
        episodes: Episodes | None = None,
        procedures: Procedures | None = None,
        before_run: Callable[[], object] | None = None,
    ) -> None:
        """`episodes`, `procedures`: the process's stores (the server's); without them the episodes pass opens
        its own on first use, sharing the memory store's reinforcer. `before_run`: called as a run that may
        change things starts (the git history commits what is pending, so undoing the run finds the state
        just before it)."""
        self.memory = memory
        self.graph = graph
        self.settings = settings
        self.templates = templates
        self.feedback = FeedbackLog(settings, clock)
        self.journal = MergeJournal(settings.dream_reports_dir)
        self.episode_marks = EpisodeMarks(settings)
        self._clock = clock
        self._episodes = episodes
        self._procedures = procedures
        self._before_run = before_run

    @property
    def episodes(self) -> Episodes:
        if self._episodes is None:
            self._episodes = Episodes(self.settings, self._clock, self.memory.reinforcer)
        return self._episodes

    @property
    def procedures(self) -> Procedures:
        if self._procedures is None:
            self._procedures = Procedures(self.settings, self.memory.reinforcer, self._clock)
        return self._procedures

    # ------------------------------------------------------------------ the lock and the reports
    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the home's dream lock, or raise DreamBusy at once if another dream holds it."""
        directory = self.settings.dream_reports_dir
        make_folders(directory)
        fd = open_fd(directory / ".dream.lock", os.O_RDWR | os.O_CREAT)
        try:
            if fcntl is not None:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    raise DreamBusy("another dream is running on this home; try again when it has finished") from None
            if self.memory.shared:  # replicas on one database: one dream on its memories at a time
                with store_lock(self.memory.files.db, DREAM_LOCK, wait=False) as had:  # type: ignore[attr-defined]
                    if not had:
                        raise DreamBusy("another replica is dreaming on this store; try again when it has finished")
                    yield
            else:
                yield
        finally:
            os.close(fd)

    def _new_report(self, dream_pass: str, mode: str, dry_run: bool) -> DreamReport:
        if not dry_run and self._before_run is not None:
            self._before_run()
        started = self._clock()
        return DreamReport(
            id=started.strftime("%Y%m%dT%H%M%S%fZ"),
            run_id=f"d-{started:%Y%m%d-%H%M%S}-{secrets.token_hex(2)}",
            dream_pass=dream_pass,
            mode=mode,
            dry_run=dry_run,
            started_at=started,
        )

    def _finish(self, report: DreamReport) -> DreamReport:
        report.finished_at = self._clock()
        kinds: dict[str, int] = {}
        for action in report.applied:
            kinds[action.action] = kinds.get(action.action, 0) + 1
        done = ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items())) or "no changes"
        would = "would apply" if report.dry_run else "applied"
        report.summary = f"{report.dream_pass} ({report.mode}): {would} {done}; {len(report.rejected)} rejected"
        if report.contradictions:
            report.summary += f"; {len(report.contradictions)} contradictions to resolve"
        if report.tier_changes:
            report.summary += f"; {len(report.tier_changes)} salience tier changes"
        if report.archive_candidates:
            report.summary += f"; {report.tiers.get('archive_candidate', 0)} archive candidates to review"
        reports = report_store(self.settings)
        reports.write(report)
        self.memory.audit.record(
            "CREATE", reports.path(report.id), f"dream report: {report.summary}", undo=lambda: reports.remove(report.id)
        )
        log.info("dream %s", report.summary)
        if not report.dry_run:
            self.journal.clear()  # every merge of this run is complete
        return report

    def reports(self) -> list[str]:
        """Report ids, oldest first (a database store's: every replica's)."""
        return report_store(self.settings).ids()

    def report(self, report_id: str | None = None) -> DreamReport:
        """A report by id, or the latest."""
        ids = self.reports()
        wanted = report_id or (ids[-1] if ids else None)
        if wanted is None or wanted not in ids:
            raise InvalidInputError(
                "no dream report yet: run the dream tool (or `rockmem-mcp dream`) first"
                if wanted is None
                else f"no dream report {report_id!r}; the latest are: {', '.join(ids[-5:]) or 'none'}"
            )
        reports = report_store(self.settings)
        path = reports.path(wanted)
        try:
            return reports.read(wanted)
        except (OSError, ValueError) as exc:
            problem = str(exc).splitlines()[0][:200]
            raise CorruptEntryError(
                f"dream report {wanted} cannot be read ({problem}); fix or move {path} away"
            ) from None

    def last_run(self) -> datetime | None:
        """When the last real (not dry-run) dream finished."""
        for report_id in reversed(self.reports()):
            with contextlib.suppress(RockmemError):
                found = self.report(report_id)
                if not found.dry_run and found.finished_at is not None:
                    return found.finished_at
        return None

    def due(self) -> bool:
        last = self.last_run()
        return last is None or self._clock() - last >= MIN_INTERVAL

    # ------------------------------------------------------------------ agent-driven material
    def material(self, dream_pass: str, offset: int = 0) -> DreamMaterial:
        """What an agent reads to dream: the directive, the numbered items, and the plan schema."""
        found, through = self._material(dream_pass, offset)
        if isinstance(through, LogMark) and found.remaining == 0:
            remember_read(self.settings, through)  # the log shown to its end: the plan applied consumes it
        elif isinstance(through, EpisodeMark) and found.items:
            self.episode_marks.show(through)  # the plan applied moves the pass's mark there
        return found

    def material_size(self, dream_pass: str) -> int:
        """How many items the pass has to read now (a reflection's survey)."""
        if dream_pass == "episodes":
            through, _ = self.episode_marks.read()
            return unread(self.episodes, through, 0, 1)[1]
        if dream_pass in ("consolidation", "entities"):
            return len(self.memory.saliences().ids)
        return len(self._items(dream_pass)[0])

    def _material(self, dream_pass: str, offset: int) -> tuple[DreamMaterial, LogMark | EpisodeMark | None]:
        """The material, and for the preference pass the mark just past the last turn in it, for the episodes
        pass the mark just past its newest episode."""
        self._check_pass(dream_pass)
        batch = self.settings.dream_batch_size
        through: LogMark | EpisodeMark | None
        if dream_pass == "episodes":
            chosen, total, values, through = self._episode_items(offset, batch)
        else:
            items, values, marks = self._items(dream_pass)
            chosen, total = items[offset : offset + batch], len(items)
            through = marks[offset + len(chosen) - 1] if chosen and marks else None
        lines = [f"{offset + n}. {text}" for n, text in enumerate(chosen, start=1)]
        directive = self.templates.render(DIRECTIVES[dream_pass], **values)
        found = DreamMaterial(
            dream_pass=dream_pass,
            directive=directive,
            material="\n".join(lines) or "(nothing to consider)",
            items=len(chosen),
            remaining=max(0, total - offset - len(chosen)),
            plan_schema=DreamPlan.model_json_schema(),
        )
        return found, through

    def _episode_items(self, offset: int, batch: int) -> tuple[list[str], int, dict[str, str], EpisodeMark | None]:
        """The episodes pass's batch (read from the store, not all listed: a first pass may face years of them),
        how many episodes there are to read, the directive's values, and the mark past the batch."""
        through, _ = self.episode_marks.read()
        chosen, total = unread(self.episodes, through, offset, batch)
        values = {"entities": self._entity_names(), "procedures": known_procedures(self.procedures)}
        return [episode_line(e) for e in chosen], total, values, mark_after(chosen, through) if chosen else None

    def _items(self, dream_pass: str) -> tuple[list[str], dict[str, str], list[LogMark]]:
        if dream_pass in ("consolidation", "entities"):
            entries = sorted(self._live_entries(), key=lambda e: (e.category or "", e.created_at))
            items = [self._describe(e) for e in entries]
            return items, {"entities": self._entity_names(), "feedback": self._feedback_text()}, []
        if dream_pass == "preferences":
            turns = read_log(self.settings)
            items = [f"[{t.session_id}] {t.role}: {' '.join(t.content.split())[:2000]}" for t, _ in turns]
            known = self.memory.search(category="user-preferences", limit=200).results
            preferences = "\n".join(f"- {h.entry.content}" for h in known) or "(none yet)"
            return items, {"preferences": preferences}, [mark for _, mark in turns]
        if dream_pass == "anti-patterns":
            signals = self.feedback.recent(types=("Correction", "ToolFailure"))
            items = [f"[{f.id}] {f.type} in {f.session_id}: {' '.join(f.content.split())}" for f in signals]
            known = self.memory.search(category="anti-patterns", limit=100).results
            existing = "\n".join(f"- {h.entry.content}" for h in known) or "(none yet)"
            return items, {"feedback": f"Anti-patterns already known:\n{existing}"}, []
        # graph
        stats = self.graph.find_entities(limit=200).results
        items = [
            f"[entity {h.entity.id}] {h.entity.name} ({h.entity.type}; aliases: {', '.join(h.entity.aliases) or '-'};"
            f" {h.triples} triples)"
            for h in stats
        ]
        items += [f"[triple {f.id}] {f.line()[2:]}" for f in self.graph.weakest_facts(200)]
        return items, {}, []

    def _entity_names(self) -> str:
        """The graph's entity names (up to 200), for a directive that extracts entities."""
        names = ", ".join(sorted(h.entity.name for h in self.graph.find_entities(limit=200).results))
        return names or "(none yet)"

    def _feedback_text(self) -> str:
        """Every kind of recent feedback (RockBot: the last 7 days, up to 50), for judging the memories."""
        signals = self.feedback.recent()
        if not signals:
            return ""
        lines = [f"- {f.type}: {' '.join(f.content.split())}" for f in signals]
        header = "Recent feedback (a Correction makes the memories it contradicts stale):\n"
        return header + "\n".join(lines)

    def _protection(self, entry: MemoryEntry, pruning: bool = False) -> str | None:
        with self.memory.lock:
            return protection(self.memory.with_uses(entry), pruning)

    def _describe(self, entry: MemoryEntry) -> str:
        with self.memory.lock:
            entry = self.memory.with_uses(entry)
        flags = " PINNED" if entry.pinned else " PROTECTED" if protected(entry) else ""
        tags = f" #{' #'.join(entry.tags)}" if entry.tags else ""
        return (
            f"[{entry.id}] ({entry.category or 'uncategorized'}){tags} importance={entry.importance:.2f} "
            f"reinforced={entry.reinforcement_count}{flags}: {' '.join(entry.content.split())}"
        )

    def _live_entries(self) -> list[MemoryEntry]:
        return [e for e in self.memory.iter_entries() if not e.archived]

    def _check_pass(self, dream_pass: str) -> None:
        if dream_pass not in PASSES:
            raise InvalidInputError(f"unknown dream pass {dream_pass!r}; passes: {', '.join(PASSES)}")

    # ------------------------------------------------------------------ applying a plan
    def prompt(self, material: DreamMaterial) -> tuple[str, str]:
        """(system, user) messages for a model: the directive with the plan schema, then the material."""
        schema = json.dumps(material.plan_schema, separators=(",", ":"))
        return f"{material.directive}\n\nThe plan, as JSON Schema:\n{schema}", material.material

    def run_llm(
        self, dream_pass: str, llm: ChatLLM, dry_run: bool = False, progress: Progress | None = None
    ) -> DreamReport:
        """A pass driven by a language model: every batch of material is sent with the directive, the plans
        are joined and applied through the safeguards. Stops at the token budget, or at a model failure (what
        was planned before it is still applied; the report says why it stopped). `progress(done, in all,
        what)` hears of each batch the model answered (a step per item) and of the plan applied (one more)."""
        planned = self.plan_llm(dream_pass, llm, progress=progress)
        report = self.apply(planned.plan, dream_pass, "llm", dry_run, planned.problems, planned.read_through)
        if progress is not None:
            changed = f"applied: {len(report.applied)} changes, {len(report.rejected)} refused"
            progress(planned.sent + 1, planned.sent + 1, changed)  # the last step: applying the plan
        return report

    def plan_llm(
        self,
        dream_pass: str,
        llm: ChatLLM,
        output_budget: int | None = None,
        guidance: str = "",
        progress: Progress | None = None,
    ) -> LLMPlan:
        """The model's plan for a pass, batch by batch, applying nothing. Stops at the pass's token budget (all
        tokens), at `output_budget` (the model's output tokens, which `llm` counts), or at a model failure;
        `problems` says why, and `uncovered` how many items were not sent. `guidance` is added to the directive
        (a reflection's meta-reflection). `progress` hears of each batch answered (items so far, items in all)."""
        self._check_pass(dream_pass)
        found = LLMPlan()
        offset, read_through = 0, None
        while True:
            budget = self.settings.llm_token_budget
            if llm.tokens_used >= budget:
                found.problems.append(f"stopped at the token budget ({llm.tokens_used} of {budget} tokens used)")
                break
            material, through = self._material(dream_pass, offset)
            if material.items == 0:
                break
            left = None if output_budget is None else output_budget - llm.output_tokens
            if left is not None and left < MIN_OUTPUT_TOKENS:
                found.uncovered = material.items + material.remaining
                found.problems.append(f"stopped at the output budget: {found.uncovered} items not covered")
                break
            sent = later(read_through, through) if isinstance(through, EpisodeMark) else through or read_through
            if dream_pass == "preferences":
                read_through = sent  # the conversation log sent to the model is consumed, whatever it answers
            system, user = self.prompt(material)
            if guidance:
                system = f"{system}\n\nGuidance for this cycle (from reviewing past reflections):\n{guidance}"
            try:
                part = llm.complete_json(system, user, DreamPlan, max_tokens=left)
            except RockmemError as exc:
                found.problems.append(str(exc))
                found.uncovered = material.items + material.remaining
                break
            read_through = sent  # episodes: the mark moves only past what the model answered for
            found.plan = DreamPlan(**{f: getattr(found.plan, f) + getattr(part, f) for f in DreamPlan.model_fields})
            offset += material.items
            found.sent = offset
            if progress is not None:
                # one step per item sent, and one more for applying the plan (run_llm): the count only grows
                progress(offset, offset + material.remaining + 1, f"{dream_pass}: the model answered {offset} items")
            if not material.remaining:
                break
        found.read_through = read_through
        return found

    def apply(
        self,
        plan: DreamPlan,
        dream_pass: str,
        mode: str = "agent",
        dry_run: bool = False,
        problems: list[str] | None = None,
        read_through: LogMark | EpisodeMark | None = None,
        actor: str | None = None,
        approval: str | None = None,
    ) -> DreamReport:
        """Validate every action of `plan` against the safeguards and apply those that pass (none on a dry
        run); the report lists both, with reasons (and `problems` met while planning). Holds the dream lock.
        A preference pass then consumes the conversation log: a model's pass what it read (`read_through`),
        another what the agent was shown to its end (or the whole log when it fits one batch). An episodes
        pass moves its mark past the episodes read: a model's pass those it answered for (`read_through`),
        another the newest episode the material showed. `actor`: whose changes they are in the audit log (a
        reflection's, with its `approval`); default the run's own `dream:RUN_ID`."""
        self._check_pass(dream_pass)
        with self.locked():
            report = self._new_report(dream_pass, mode, dry_run)
            with acting_as(actor or f"dream:{report.run_id}", approval):  # every change of the run, and its report
                return self._apply(report, plan, problems, read_through)

    def _apply(
        self,
        report: DreamReport,
        plan: DreamPlan,
        problems: list[str] | None,
        read_through: LogMark | EpisodeMark | None,
    ) -> DreamReport:
        dream_pass, mode, dry_run = report.dream_pass, report.mode, report.dry_run
        run = self._start(report)
        checkpoint("planned")
        for problem in problems or []:
            run.reject("plan", [], problem)
        allowed = ALLOWED[dream_pass]
        for name in DreamPlan.model_fields:
            proposed = getattr(plan, name)
            if proposed and name not in allowed:
                run.reject(name, [], f"{len(proposed)} {name} are not part of the {dream_pass} pass")
        if "merges" in allowed:
            self._merge_all(run, plan.merges)
        if "archives" in allowed:
            for archive in plan.archives:
                self._archive(run, archive.id, archive.reason)
        if "updates" in allowed:
            for update in plan.updates:
                self._update(run, update.id, update.category, update.tags, update.reason)
        if "creates" in allowed:
            for create in plan.creates:
                self._create(run, dream_pass, create)
        if "entities" in allowed:
            self._graph_additions(run, plan)
        if dream_pass == "graph":
            self._graph_cleanup(run, plan)
        if "procedures" in allowed:
            for procedure in plan.procedures:
                self._procedure(run, procedure)
        if dream_pass == "preferences" and not dry_run:
            read = read_through if mode in MARKED_MODES else self._agent_read_mark()
            self._consume_conversation_log(read if isinstance(read, LogMark) else None)
        if dream_pass == "episodes" and not dry_run:
            read = read_through if mode in MARKED_MODES else self.episode_marks.read()[1]
            self.episode_marks.advance(read if isinstance(read, EpisodeMark) else None)
        return self._finish(run.report)

    def _merge(
        self, run: _Run, ids: list[str], content: str, category: str | None, tags: list[str] | None, reason: str
    ) -> None:
        ready = self._checked_merge(run, ids, content, category, tags, reason)
        if ready is not None:
            self._write_merges(run, [ready])

    def _merge_all(self, run: _Run, merges: list[PlanMerge]) -> None:
        """A plan's merges: each checked, then written in batches (one durable flush per batch for the merged
        memories, one for their archived sources: a 1,000-merge reflection is not 5,000 separate writes)."""
        ready = []
        for merge in merges:
            checked = self._checked_merge(run, merge.ids, merge.content, merge.category, merge.tags, merge.reason)
            if checked is not None:
                ready.append(checked)
        for start in range(0, len(ready), MERGE_BATCH):
            self._write_merges(run, ready[start : start + MERGE_BATCH])

    def _checked_merge(
        self, run: _Run, ids: list[str], content: str, category: str | None, tags: list[str] | None, reason: str
    ) -> _ReadyMerge | None:
        """The merge, if it passes every safeguard (else rejected, with why); its ids count as touched."""
        ids = list(dict.fromkeys(ids))
        if len(ids) < 2:
            return run.reject("merge", ids, "a merge needs at least two distinct memories")
        if unknown := [i for i in ids if run.live(i) is None]:
            return run.reject("merge", ids, f"unknown or archived ids: {', '.join(unknown)}")
        if again := [i for i in ids if i in run.touched]:
            return run.reject("merge", ids, f"already changed by another action of this plan: {', '.join(again)}")
        sources = [run.entries[i] for i in ids]
        used = [self.memory.with_uses(e) for e in sources]  # uses since a source's last write are in the log
        if kept := [why for e in sources if (why := self._protection(e))]:
            return run.reject("merge", ids, f"protected memories are never merged away: {'; '.join(kept)}")
        texts = {e.id: e.content for e in sources}
        if clashes := contradictions(texts):
            for a, b, why in clashes:  # not resolved by whoever planned the merge: listed for the user to decide
                run.contradiction([a, b], why)
            a, b, why = clashes[0]
            return run.reject("merge", ids, f"{a} and {b} contradict each other ({why}): keep both, or archive one")
        if loss := merge_loss(texts, content):
            return run.reject("merge", ids, loss)
        try:
            merged = self.memory.prepare_entry(
                {
                    "content": content,
                    "category": category if category is not None else sources[0].category,
                    "tags": tags if tags is not None else list(dict.fromkeys(t for e in sources for t in e.tags)),
                    "metadata": {**_merged_metadata(sources), "merged_from": ",".join(ids)},
                    "importance": max(e.importance for e in sources),
                    "created_at": min(e.created_at for e in sources),
                    "last_seen_at": max(e.last_seen_at or e.created_at for e in used),
                    "reinforcement_count": sum(e.reinforcement_count for e in used),
                }
            )
        except RockmemError as exc:
            return run.reject("merge", ids, str(exc))
        run.touched.update(ids)
        if run.report.dry_run:
            return run.applied("merge", ids, reason, merged.id)
        return _ReadyMerge(ids, sources, merged, reason)

    def _write_merges(self, run: _Run, batch: list[_ReadyMerge]) -> None:
        """Write checked merges: journalled first (a re-run after a kill finishes them), then every merged memory
        in one batch (a crash here: duplicates, no loss), then every source archived in one batch. A merge
        whose sources someone else changed since the run read them is skipped, and reported."""
        sources = [e for ready in batch for e in ready.sources]
        with self.memory.unchanged(sources, [ready.merged.id for ready in batch]) as changed:
            gone = set(changed)
            writing = []
            for ready in batch:
                if stale := [i for i in ready.ids if i in gone]:
                    why = f"changed since the dream read it, left as it is now: {', '.join(stale)}"
                    run.reject("merge", ready.ids, why)
                else:
                    writing.append(ready)
            if not writing:
                return
            self.journal.add_many([(ready.merged.id, ready.sources) for ready in writing])
            said = {
                r.merged.id: ("MERGE", f"merged {len(r.ids)} memories ({', '.join(r.ids)}; {r.reason}): "
                              f"{quoted(r.merged.content)}")
                for r in writing
            }  # fmt: skip
            self.memory.save_many([ready.merged for ready in writing], audit_as=said)
            checkpoint("merged")
            into = {i: ready.merged.id for ready in writing for i in ready.ids}
            self.memory.archive_many({i: (f"merged into {merged}", merged) for i, merged in into.items()})
            for ready in writing:
                run.applied("merge", ready.ids, ready.reason, ready.merged.id)

    @contextlib.contextmanager
    def _writing(self, run: _Run, action: str, ids: list[str], new_id: str | None = None) -> Iterator[bool]:
        """Hold the store's lock while `ids` are still as this run read them: yields False, and reports the
        action as skipped, when one was changed (updated, archived, removed) by someone else since, so an
        acknowledged write is never replaced with the older text the dream read. `new_id`: an entry the action
        creates, locked together with `ids`."""
        with self.memory.unchanged([run.entries[i] for i in ids], [new_id] if new_id else []) as changed:
            if changed:
                run.reject(action, ids, f"changed since the dream read it, left as it is now: {', '.join(changed)}")
            yield not changed

    def _archive(self, run: _Run, entry_id: str, reason: str) -> None:
        entry = run.live(entry_id)
        if entry is None:
            return run.reject("archive", [entry_id], "unknown or already archived id")
        if entry_id in run.touched:
            return run.reject("archive", [entry_id], "already changed by another action of this plan")
        if why := self._protection(entry, pruning=True):
            return run.reject("archive", [entry_id], f"protected memories are never pruned: {why}")
        run.touched.add(entry_id)
        if run.report.dry_run:
            return run.applied("archive", [entry_id], reason)
        with self._writing(run, "archive", [entry_id]) as unchanged:
            # Uses do not change the file, so the unchanged-check cannot see them: asked again under the lock,
            # after its catch-up, a memory that reached 5 uses since the plan was checked is still spared.
            if unchanged and (why := self._protection(entry, pruning=True)):
                run.reject("archive", [entry_id], f"protected memories are never pruned: {why}")
            elif unchanged:
                self.memory.delete(entry_id, reason=f"dream: {reason}" if reason else "dream: noise or stale")
                run.applied("archive", [entry_id], reason)
        return None

    def _update(self, run: _Run, entry_id: str, category: str | None, tags: list[str] | None, reason: str) -> None:
        entry = run.live(entry_id)
        if entry is None:
            return run.reject("update", [entry_id], "unknown or archived id")
        if entry_id in run.touched:
            return run.reject("update", [entry_id], "already changed by another action of this plan")
        if why := self._protection(entry):
            return run.reject("update", [entry_id], f"protected memories are left as they are: {why}")
        if category is None and tags is None:
            return run.reject("update", [entry_id], "an update names a category or tags")
        try:
            normalize_category(category)
            normalize_tags(tags, self.settings.max_tags)
            run.touched.add(entry_id)
            if run.report.dry_run:
                return run.applied("update", [entry_id], reason)
            with self._writing(run, "update", [entry_id]) as unchanged:
                if unchanged:
                    self.memory.update(entry_id, category=category, tags=tags)
                    run.applied("update", [entry_id], reason)
        except RockmemError as exc:
            return run.reject("update", [entry_id], str(exc))
        return None

    def _create(self, run: _Run, dream_pass: str, create: PlanCreate) -> None:
        content = create.content
        metadata = {"source": "inferred" if dream_pass == "preferences" else "dream"}
        tags = list(create.tags or [])
        try:
            category = normalize_category(create.category)
        except RockmemError as exc:
            return run.reject("create", [], str(exc))
        if create.source_episodes and dream_pass != "episodes":
            return run.reject("create", [], "source_episodes belong to the episodes pass's creates")
        if dream_pass == "episodes":
            if not create.source_episodes:
                return run.reject("create", [], f"name the episodes it is from in source_episodes: {content[:80]!r}")
            if unknown := unknown_episodes(self.episodes, create.source_episodes):
                return run.reject("create", unknown, f"unknown episode ids in source_episodes: {', '.join(unknown)}")
            metadata["source_episodes"] = ",".join(dict.fromkeys(create.source_episodes))
        elif dream_pass == "preferences":
            if not (category or "").startswith("user-preferences/"):
                category = "user-preferences/inferred"
            tags.append("inferred")
            if SENSITIVE.search(content):
                metadata["requires_user_permission"] = "true"
        else:
            if not (category or "").startswith("anti-patterns/"):
                category = "anti-patterns/general"
            tags.append("anti-pattern")
            plain = content.replace("\u2019", "'")  # models often write the typographic apostrophe
            if not re.match(r"\s*(don't|do not|never)\b", plain, re.IGNORECASE) or "instead" not in plain.lower():
                return run.reject("create", [], f'an anti-pattern reads "Don\'t X for Y — instead Z": {content[:80]!r}')
        duplicate = self.memory.search(content, category=category, limit=1).results
        if duplicate and duplicate[0].entry.content.strip().casefold() == content.strip().casefold():
            return run.reject("create", [duplicate[0].entry.id], "already remembered")
        try:
            entry = self.memory.prepare_entry(
                {
                    "content": content,
                    "category": category,
                    "tags": tags,
                    "importance": derived_importance(create.importance),
                    "metadata": metadata,
                }
            )
        except RockmemError as exc:
            return run.reject("create", [], str(exc))
        run.applied("create", [], create.reason, entry.id)
        if not run.report.dry_run:
            self.memory.save_many([entry])
        return None

    def _procedure(self, run: _Run, proposal: DreamProcedure) -> None:
        """Create a procedure the episodes taught, or update the one with its name when its steps differ (the
        version replaced stays in its history). Its episodes must exist; an archived procedure is left as it is."""
        try:
            slug = procedure_slug(proposal.name)
        except RockmemError as exc:
            return run.reject("procedure", [], str(exc))
        if slug in run.touched:
            return run.reject("procedure", [slug], "already changed by another action of this plan")
        if not proposal.learned_from:
            return run.reject("procedure", [slug], "name the episodes it was learned from in learned_from")
        if unknown := unknown_episodes(self.episodes, proposal.learned_from):
            return run.reject("procedure", [slug], f"unknown episode ids in learned_from: {', '.join(unknown)}")
        try:
            current: Procedure | None = self.procedures.get(slug)
        except NotFoundError:
            current = None
        except RockmemError as exc:
            return run.reject("procedure", [slug], str(exc))
        if current is not None and current.archived:
            return run.reject("procedure", [slug], f"{current.name!r} is archived: restore it to let a dream update it")
        if current is not None and _same_steps(current.steps, proposal.steps):
            return run.reject("procedure", [slug], f"{current.name!r} already has these steps")
        run.touched.add(slug)
        why = proposal.reason or "learned from episodes"
        done = f"updated {current.name!r} (version {current.version} kept in its history)" if current else "created"
        if run.report.dry_run:
            return run.applied("procedure", [slug], f"{done}: {why}")
        learned = list(dict.fromkeys([*(current.learned_from if current else []), *proposal.learned_from]))
        try:
            self.procedures.save(
                current.name if current else proposal.name,
                proposal.trigger,
                proposal.steps,
                proposal.notes or (current.notes if current else None),
                learned[-MAX_LINKS:],
                reason=f"dream: {why}",
                version=current.version if current else 0,  # changed meanwhile: refused, left as it is now
            )
        except RockmemError as exc:
            return run.reject("procedure", [slug], str(exc))
        run.applied("procedure", [slug], f"{done}: {why}")
        return None

    def _graph_additions(self, run: _Run, plan: DreamPlan) -> None:
        for kind, items, add in (
            ("entity", plan.entities, self.graph.add_entities),
            ("triple", plan.triples, self.graph.add_triples),
        ):
            for item in items:
                fields = item.model_dump(exclude_none=True)
                try:
                    if run.report.dry_run:
                        self.graph.check(kind, fields)
                        run.applied(kind, [], json.dumps(fields, ensure_ascii=False)[:200])
                        continue
                    added = add([fields])
                except RockmemError as exc:
                    run.reject(kind, [], str(exc))
                    continue
                record = added.entities[0].entity if kind == "entity" else added.triples[0].fact  # type: ignore[union-attr]
                run.applied(kind, [record.id], json.dumps(fields, ensure_ascii=False)[:200])

    def _graph_cleanup(self, run: _Run, plan: DreamPlan) -> None:
        for pair in plan.entity_merges:
            try:
                if not run.report.dry_run:
                    merged = self.graph.merge_entities(pair.keep, pair.merge)
                    run.applied("entity_merge", [merged.entity.id, merged.merged_id], pair.reason)
                else:
                    ids = [self.graph.resolve(pair.keep).id, self.graph.resolve(pair.merge).id]
                    if ids[0] == ids[1]:
                        raise InvalidInputError(f"{pair.keep!r} and {pair.merge!r} are the same entity")
                    run.applied("entity_merge", ids, pair.reason)
            except RockmemError as exc:
                run.reject("entity_merge", [], str(exc))
        for triple_id in plan.drop_triples:
            if triple_id in run.touched:
                run.reject("drop_triple", [triple_id], "already dropped by this plan")
                continue
            run.touched.add(triple_id)
            try:
                if run.report.dry_run:
                    self.graph.fact(triple_id)
                else:
                    self.graph.delete_triple(triple_id)
            except RockmemError as exc:
                run.reject("drop_triple", [triple_id], str(exc))
                continue
            run.applied("drop_triple", [triple_id], "dropped by the graph pass")

    def _agent_read_mark(self) -> LogMark | None:
        """How far the agent read the log: the mark its last batch left, else the whole log if it fits one
        batch (any plan for the pass has seen it); None while batches are left to read."""
        if (mark := take_read_mark(self.settings)) is not None:
            return mark
        found, through = self._material("preferences", 0)
        return through if found.remaining == 0 else None

    def _consume_conversation_log(self, through: LogMark | None) -> None:
        """The preference pass consumes what it read of the conversation log, as RockBot's does."""
        if through is not None:
            consume_log(self.settings, through)
            log.info("conversation log consumed through %s (offset %d)", through.day, through.end)

    def _start(self, report: DreamReport) -> _Run:
        """A run over the entries as they are now, after finishing the merges a killed dream left half done."""
        run = _Run(report, {}, set())
        if not report.dry_run:
            for pending in self.journal.pending():
                self._finish_merge(run, pending.merged_id, pending.sources)
            self.journal.clear()
        run.entries = {e.id: e for e in self.memory.iter_entries()}
        return run

    def _finish_merge(self, run: _Run, merged_id: str, sources: dict[str, str]) -> None:
        try:
            merged = self.memory.get(merged_id)
        except RockmemError:
            return  # the merged memory was never written: its sources are as they were
        left = []
        for source_id, seen in sources.items():
            try:
                current = self.memory.get(source_id)
            except RockmemError:
                continue
            if current.archived:
                continue
            with self.memory.unchanged([current]) as changed:
                if changed or version(current) != seen:
                    run.reject("merge", [source_id], f"changed since it was merged into {merged_id}; left as it is")
                    continue
                self.memory.delete(source_id, reason=f"merged into {merged_id}", superseded_by=merged.id)
                left.append(source_id)
        run.touched.add(merged_id)
        if left:
            run.applied("merge", left, "finished a merge that an interrupted dream left half done", merged_id)

    # ------------------------------------------------------------------ the deterministic pass
    def run_deterministic(self, dry_run: bool = False, progress: Progress | None = None) -> DreamReport:
        """What needs no model: exact and near-duplicate merges (cosine >= 0.88 with embeddings, word overlap
        >= 0.8 without), the decay pass (salience tiers: changes and archive candidates reported, nothing
        changed), purge of archives older than 90 days, graph cleanup, and audit retention. `progress(done,
        total, what)` hears of each step as it ends (a client shows it: this takes seconds at 10k memories)."""
        with self.locked():
            report = self._new_report("deterministic", "deterministic", dry_run)
            with acting_as(f"dream:{report.run_id}"):  # every change of the run, and its report, is the run's
                return self._deterministic(report, progress or (lambda done, total, what: None))

    def _deterministic(self, report: DreamReport, progress: Progress) -> DreamReport:
        steps = 6
        run = self._start(report)
        entries = run.entries
        progress(1, steps, f"read {len(entries):,} memories")
        live = [e for e in entries.values() if not e.archived and e.id not in run.touched]
        exact, near = self._duplicate_clusters(live, run)
        for older, newer, why in self._contradicting(live, self._same_subject_pairs(live)):
            run.contradiction([older, newer], why)  # not near-duplicates, yet about one thing: "at 9am" / "at 10am"
        checkpoint("planned")
        progress(2, steps, f"found {len(exact) + len(near):,} group(s) of duplicates")
        for merge in self._duplicate_merges(exact, near, entries, run):
            self._merge(run, merge.ids, merge.content, merge.category, None, merge.reason)
        progress(3, steps, "merged duplicates")
        decay_pass(self.memory, self.settings, run.report)
        progress(4, steps, "salience tiers updated")
        self._purge(run, [e for e in entries.values() if e.archived])
        progress(5, steps, "old archives purged")
        self._graph_sweep(run)
        if not report.dry_run:  # audit lines past retention fold into monthly digests (seed 004 §12.6)
            fold_quietly(self.settings, self.memory.audit.log, self._clock())
        progress(6, steps, "graph and audit trail tidied")
        return self._finish(run.report)

    def duplicate_merges(self, live: list[MemoryEntry]) -> tuple[list[PlanMerge], list[DreamAction]]:
        """The merges the deterministic pass would make of `live` (each keeping its most detailed source's
        text), and the contradictions it would report instead."""
        run = _Run(DreamReport(id="", dream_pass="consolidation", mode="deterministic", dry_run=True,
                               started_at=self._clock()), {e.id: e for e in live}, set())  # fmt: skip
        exact, near = self._duplicate_clusters(live, run)
        return list(self._duplicate_merges(exact, near, run.entries, run)), run.report.contradictions

    def _duplicate_merges(
        self, exact: list[list[str]], near: list[list[str]], entries: dict[str, MemoryEntry], run: _Run
    ) -> Iterator[PlanMerge]:
        for cluster, why in [(c, "exact duplicates") for c in exact] + [(c, "near-duplicates") for c in near]:
            cluster = [i for i in cluster if i not in run.touched]
            if len(cluster) < 2:
                continue
            if why == "near-duplicates" and (clashes := contradictions({i: entries[i].content for i in cluster})):
                for a, b, reason in clashes:
                    run.contradiction([a, b], reason)
                continue
            sources = [entries[i] for i in cluster]
            texts = {e.id: e.content for e in sources}
            # The text is a source that keeps every other's facts and words, when one does (else the merge is refused)
            keeping = [e for e in sources if merge_loss(texts, e.content) is None] or sources
            best = max(keeping, key=lambda e: (len(details(e.content)), len(e.content), -e.created_at.timestamp()))
            yield PlanMerge(ids=cluster, content=best.content, category=best.category, reason=f"{why} (deterministic)")

    def _duplicate_clusters(self, live: list[MemoryEntry], run: _Run) -> tuple[list[list[str]], list[list[str]]]:
        """Groups of the same text (case, spacing and final punctuation aside), then groups of near-identical
        memories among the rest; each group two or more ids, oldest first. Near-identical memories that
        contradict each other ("is" / "is not allergic") are not grouped: the run reports them instead."""
        by_text: dict[str, list[MemoryEntry]] = {}
        for entry in live:
            by_text.setdefault(" ".join(entry.content.casefold().split()).rstrip(".!"), []).append(entry)
        exact = [group for group in by_text.values() if len(group) > 1]
        grouped = {e.id for group in exact for e in group}
        rest = [e for e in live if e.id not in grouped]
        parent = {e.id: e.id for e in rest}

        def root(i: str) -> str:
            while parent[i] != i:
                parent[i] = parent[parent[i]]
                i = parent[i]
            return i

        by_id = {e.id: e for e in rest}
        for a, b in self._similar_pairs(rest):
            older, newer = sorted([a, b], key=lambda i: (by_id[i].created_at, i))  # reported oldest first
            if (why := contradiction(by_id[older].content, by_id[newer].content)) is not None:
                run.contradiction([older, newer], why)
                continue
            ra, rb = root(a), root(b)
            if ra != rb:
                parent[rb] = ra
        near: dict[str, list[MemoryEntry]] = {}
        for entry in rest:
            near.setdefault(root(entry.id), []).append(entry)

        def ids(groups: list[list[MemoryEntry]]) -> list[list[str]]:
            return [[e.id for e in sorted(g, key=lambda e: e.created_at)] for g in groups if len(g) > 1]

        return ids(exact), ids(list(near.values()))

    def _similar_pairs(self, live: list[MemoryEntry]) -> Iterator[tuple[str, str]]:
        vectors = self.memory.vectors_for([e.id for e in live])
        if vectors is not None:
            ids, matrix = vectors
            norms = np.linalg.norm(matrix, axis=1, keepdims=True)
            unit = matrix / np.where(norms == 0, 1, norms)
            for start in range(0, len(ids), 1024):
                block = unit[start : start + 1024] @ unit.T
                rows, cols = np.nonzero(block >= NEAR_DUPLICATE_COSINE)
                for r, c in zip(rows.tolist(), cols.tolist(), strict=True):
                    if start + r < c:
                        yield ids[start + r], ids[c]
            return
        # Without embeddings: word sets; candidates share one of their two rarest words.
        words = {e.id: set(tokenize(e.content)) for e in live}
        for a, b in _rare_word_pairs(words, min_words=3):
            wa, wb = words[a], words[b]
            if len(wa & wb) / len(wa | wb) >= NEAR_DUPLICATE_OVERLAP:
                yield a, b

    def _same_subject_pairs(self, live: list[MemoryEntry]) -> Iterator[tuple[str, str]]:
        """Candidates for a contradiction whatever the embeddings: each memory with those holding one of its two
        rarest words, numbers left out (they are what differs: "standup at 9am" meets "the team standup is at
        10am every weekday", whose other words the shorter one lacks)."""
        words = {e.id: {w for w in tokenize(e.content) if not w[0].isdigit()} for e in live}
        holding: dict[str, list[str]] = {}
        for entry_id, found in words.items():
            for word in found:
                holding.setdefault(word, []).append(entry_id)
        seen: set[tuple[str, str]] = set()
        for entry_id, found in words.items():
            for word in sorted(found, key=lambda w: (len(holding[w]), w))[:2]:
                if len(holding[word]) > SUBJECT_HOLDERS:
                    continue
                for other in holding[word]:
                    pair = (entry_id, other) if entry_id < other else (other, entry_id)
                    if other != entry_id and pair not in seen:
                        seen.add(pair)
                        yield pair

    def contradicting_pairs(self, live: list[MemoryEntry]) -> list[tuple[str, str, str]]:
        """Pairs of live memories about the same thing that contradict each other: (older id, newer id, why)."""
        return self._contradicting(live, [*self._similar_pairs(live), *self._same_subject_pairs(live)])

    def _contradicting(self, live: list[MemoryEntry], pairs: Iterable[tuple[str, str]]) -> list[tuple[str, str, str]]:
        by_id = {e.id: e for e in live}
        read: dict[str, Facts] = {}  # each text's facts read once (fact_check's cache holds a few hundred)

        def facts_of(entry_id: str) -> Facts:
            if entry_id not in read:
                read[entry_id] = facts(by_id[entry_id].content)
            return read[entry_id]

        hints = {e.id: clues(e.content) for e in live}  # (a negation, a digit)
        found: dict[tuple[str, str], str] = {}
        for a, b in pairs:
            (negation_a, digit_a), (negation_b, digit_b) = hints[a], hints[b]
            if not (negation_a or negation_b or (digit_a and digit_b)):
                continue  # most pairs: reading their facts costs ~0.1 ms a text, 1 s at 10k memories
            older, newer = sorted([a, b], key=lambda i: (by_id[i].created_at, i))
            if (older, newer) not in found and (why := clash(facts_of(older), facts_of(newer))):
                found[older, newer] = why
        return [(older, newer, why) for (older, newer), why in found.items()]

    def _purge(self, run: _Run, archived: list[MemoryEntry]) -> None:
        cutoff = self._clock() - timedelta(days=PURGE_ARCHIVED_DAYS)
        for entry in archived:
            if entry.archived_at is not None and entry.archived_at < cutoff:
                if entry.pinned:
                    why = "pinned: never purged (delete_memory permanent=true confirm_pinned=true erases it)"
                    run.reject("purge", [entry.id], f"{entry.id} is {why}")
                    continue
                if run.report.dry_run:
                    run.applied("purge", [entry.id], f"archived on {entry.archived_at.date()}: over 90 days ago")
                    continue
                with self._writing(run, "purge", [entry.id]) as unchanged:  # restored meanwhile: it stays
                    if unchanged:
                        self.memory.delete(entry.id, permanent=True)
                        run.applied("purge", [entry.id], f"archived on {entry.archived_at.date()}: over 90 days ago")

    def _graph_sweep(self, run: _Run) -> None:
        """Weak old triples (confidence < 0.4, older than 14 days) and orphans (entities with no triple, not
        referenced for 14 days) go."""
        cutoff = self._clock() - timedelta(days=OLD_GRAPH_DAYS)
        weak = self.graph.weak_triples(WEAK_TRIPLE_CONFIDENCE, cutoff)
        for triple in weak:
            why = f"confidence {triple.confidence:.2f} and older than 14 days"
            run.applied("drop_triple", [triple.id], why)
            if not run.report.dry_run:
                self.graph.delete_triple(triple.id, why=f"dream: {why}")
        for entity in self.graph.orphans(cutoff, without={t.id for t in weak}):
            run.applied("drop_entity", [entity.id], f"{entity.name}: no triples, not referenced for 14 days")
            if not run.report.dry_run:
                self.graph.delete_entity(entity.id, why="dream: no triples, not referenced for 14 days")


def _rare_word_pairs(words: dict[str, set[str]], min_words: int) -> Iterator[tuple[str, str]]:
    """Each pair of ids (once) whose word sets share one of either's two rarest words; sets smaller than
    `min_words` and words in more than SUBJECT_HOLDERS sets left out."""
    frequency: dict[str, int] = {}
    for found in words.values():
        for word in found:
            frequency[word] = frequency.get(word, 0) + 1
    buckets: dict[str, list[str]] = {}
    for entry_id, found in words.items():
        if len(found) >= min_words:
            for word in sorted(found, key=lambda w: (frequency[w], w))[:2]:
                buckets.setdefault(word, []).append(entry_id)
    seen: set[tuple[str, str]] = set()
    for members in buckets.values():
        if len(members) > SUBJECT_HOLDERS:  # a word this common is no evidence of a duplicate
            continue
        for i, a in enumerate(members):
            for b in members[i + 1 :]:
                pair = (a, b) if a < b else (b, a)
                if pair not in seen:
                    seen.add(pair)
                    yield pair


def _same_steps(steps: list[str], proposed: list[str]) -> bool:
    """The same steps, case and spacing aside."""
    return [" ".join(s.casefold().split()) for s in steps] == [" ".join(s.casefold().split()) for s in proposed]


def _merged_metadata(sources: list[MemoryEntry]) -> dict[str, str]:
    merged: dict[str, str] = {}
    for entry in reversed(sources):  # the oldest source's values win
        merged.update(entry.metadata)
    merged.pop("merged_from", None)
    merged.pop(LEGACY_DECAY_KEY, None)  # the merged memory's importance is its own
    return merged
