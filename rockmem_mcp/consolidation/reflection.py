"""The reflection engine (seed 004 §10): sleep-time consolidation that proposes and waits for approval.

A cycle runs the seed's five phases:
1. survey: what changed since the last reflection (new memories and episodes, salience tiers, what each dream
   pass has to read), and the passes to run, busiest first;
2. meta-reflection: a language model reads the reflection log and evolution.md (their newest part) and the
   survey, and answers patterns, evolving understanding, revised assumptions, questions and guidance — with
   the seed's milestone tasks at reflections 10, 25, 50 and 100;
3. consolidation: the dream passes' plans (consolidation/dream.py) guided by phase 2, plus contradictions found
   among memories about one thing, archive candidates from salience, and proposals the main agent deferred. A
   planned merge the dream would refuse is not proposed: one of memories that contradict each other becomes a
   contradiction for the user to decide, one whose text drops a source's facts is listed as not covered;
4. core rewrite: the model rewrites core memory blocks, each kept within its cap;
5. summary: the readable proposal in the seed's sections (meta/pending-reflection.md).
Without a model, phases 2 and 4 are skipped and phase 3 merges exact and near duplicates.

The output budget (`reflection_token_budget`, 8,000 by default) bounds what the model writes: every request
asks for at most what is left (`max_tokens`), a batch is not sent with less than MIN_OUTPUT_TOKENS left, and
what was not covered is listed. Phase 4 keeps CORE_RESERVE of the budget.

Each action of the plan has an id (a1, a2, …). Nothing is applied until the user resolves the reflection:
approve, approve_with_changes (edits to actions), partial (chosen action ids) or reject (with a reason). A
resolution applies through the dream's safeguards, logged as `reflection:r-NNN` (so `revert run=…` undoes
it), is entered in meta/reflection-log.md, and adds the cycle's insights to meta/evolution.md.
"""

from __future__ import annotations

import contextlib
import logging
from collections import Counter
from collections.abc import Callable
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from rockmem_mcp.audit.service import acting_as
from rockmem_mcp.config import Settings
from rockmem_mcp.consolidation.dream import ALLOWED, PROTECTED_REINFORCEMENT, Dreamer, LLMPlan, Progress
from rockmem_mcp.consolidation.dream_episodes import EpisodeMark
from rockmem_mcp.consolidation.dream_journal import version
from rockmem_mcp.consolidation.fact_check import contradiction, contradictions, merge_loss
from rockmem_mcp.consolidation.reflection_files import ReflectionBusy, ReflectionFiles
from rockmem_mcp.consolidation.reflection_summary import evolution_entry, log_entry, summary
from rockmem_mcp.consolidation.schedule import next_scheduled
from rockmem_mcp.consolidation.shapes import (
    CoreRewrite,
    DreamAction,
    DreamPlan,
    DreamReport,
    MetaReflection,
    Reflection,
    ReflectionAction,
    ReflectionResolution,
)
from rockmem_mcp.conversation.service import LogMark
from rockmem_mcp.core.service import CoreMemory
from rockmem_mcp.errors import InvalidInputError, RockmemError
from rockmem_mcp.llm import ChatLLM
from rockmem_mcp.models import MemoryEntry, utc_now
from rockmem_mcp.procedures.shapes import procedure_slug
from rockmem_mcp.proposals.service import Proposals
from rockmem_mcp.search.salience import ARCHIVE_CANDIDATE, tier, tier_counts
from rockmem_mcp.storage.pg import is_database_url
from rockmem_mcp.tokens import estimate_tokens

log = logging.getLogger(__name__)

REFLECTION_PASSES = ("episodes", "consolidation", "preferences", "anti-patterns", "entities")
KIND_FIELDS = {
    "merge": "merges",
    "archive": "archives",
    "update": "updates",
    "create": "creates",
    "entity": "entities",
    "triple": "triples",
    "procedure": "procedures",
}
FIELD_KINDS = {field: kind for kind, field in KIND_FIELDS.items()}
MILESTONES = {
    10: "First evolution summary: identify the initial patterns.",
    25: "Consolidate the threads of evolution.md.",
    50: "Major synthesis: what has fundamentally changed?",
    100: "Deep retrospective over every reflection.",
}
META_TOKENS = 1_200  # the most phase 2 may write
CORE_RESERVE = 1_500  # kept for phase 4 while phase 3 plans
MAX_ARCHIVE_CANDIDATES = 500  # proposed per cycle (the rest wait for the next one, and are listed)
MAX_CONTRADICTIONS = 50
LOG_CONTEXT_CHARS = 24_000  # how much of the reflection log and evolution.md phase 2 reads (the newest part)
DECISIONS = ("approve", "approve_with_changes", "partial", "reject")
STATUS_OF = {"approve": "approved", "approve_with_changes": "approved", "partial": "partial", "reject": "rejected"}
APPROVAL_OF = {"approve": "approved", "approve_with_changes": "approved-with-changes", "partial": "partial"}


def reflection_store(settings: Settings) -> ReflectionFiles:
    """The reflections: the home's files, or the database replicas share (ROCKMEM_STORE). The service names the
    store it opens, so neither store's module imports the other."""
    if is_database_url(settings.store):
        from rockmem_mcp.consolidation.reflection_postgres import PgReflectionRows
        from rockmem_mcp.storage.pg import shared_database

        return PgReflectionRows(settings, shared_database(str(settings.store), "stores", settings.store_schema))
    return ReflectionFiles(settings)


class Steps:
    """Counts a run's phases for a progress callback (done, in all, what); without one, nothing."""

    def __init__(self, progress: Progress | None, total: int) -> None:
        self.progress, self.total, self.count = progress, total, 0

    def done(self, what: str) -> None:
        self.count += 1
        if self.progress is not None:
            self.progress(self.count, max(self.total, self.count), what)


class Reflector:
    def __init__(
        self,
        settings: Settings,
        dreamer: Dreamer,
        core: CoreMemory | None = None,
        clock: Callable[[], datetime] = utc_now,
        proposals: Proposals | None = None,
    ) -> None:
        """`proposals`: the sub-agents' proposals; those the main agent deferred become actions, committed when
        the user approves the reflection (seed 004 §13.3)."""
        self.settings = settings
        self.dreamer = dreamer
        self.memory = dreamer.memory
        self.core = core
        self.files = reflection_store(settings)
        self._clock = clock
        self.proposals = proposals
        self._read: dict[str, str] = {}  # during a run: each live memory's version as read
        self._live: dict[str, MemoryEntry] = {}  # during a run: the live memories as read
        self._clashed: set[frozenset[str]] = set()  # during a run: the pairs listed as contradictions

    # ------------------------------------------------------------------ reading
    def get(self, reflection_id: str) -> Reflection:
        return self.files.read(reflection_id.strip())

    def recent(self, limit: int = 10) -> list[Reflection]:
        return list(self.files.all())[-limit:]

    def latest(self) -> Reflection | None:
        """The newest reflection, whatever its status (one record read, not all)."""
        numbers = self.files.numbers()
        return self.get(f"r-{numbers[-1]:03d}") if numbers else None

    def pending(self) -> list[Reflection]:
        return list(self.files.with_status("pending"))

    def last_started(self) -> datetime | None:
        numbers = self.files.numbers()
        return self.get(f"r-{numbers[-1]:03d}").started_at if numbers else None

    def new_since_last(self) -> int:
        """New memories and episodes since the last reflection began (all of them before the first)."""
        since = self.last_started()
        saliences = self.memory.saliences()
        memories = int((saliences.created > since.timestamp()).sum()) if since else len(saliences.ids)
        return memories + self._new_episodes(since)

    def session_lines(self, message: str) -> list[str]:
        return pending_lines(self.files)

    # ------------------------------------------------------------------ a cycle
    def run(self, trigger: str = "manual", llm: ChatLLM | None = None, progress: Progress | None = None) -> Reflection:
        """One cycle; the reflection is stored pending, or applied at once when it needs no approval. Raises
        ReflectionBusy when another reflection is running on the home. `progress(done, in all, what)` hears of each
        phase as it ends (with a model, each takes seconds)."""
        with self.files.claim():
            numbers = self.files.numbers()
            number = (numbers[-1] if numbers else 0) + 1
            since = self.get(f"r-{numbers[-1]:03d}").started_at if numbers else None
            reflection = Reflection(
                id=f"r-{number:03d}",
                number=number,
                trigger=trigger,
                mode="llm" if llm is not None else "deterministic",
                status="pending",
                needs_approval=self._needs_approval(llm is not None),
                started_at=self._clock(),
                since=since,
                token_budget=self.settings.reflection_token_budget if llm is not None else 0,
            )
            passes = self._survey(reflection)
            steps = Steps(progress, 3 + (len(passes) + 1 if llm is not None else 0))  # survey, plans, written
            steps.done("surveyed: " + (reflection.survey[0] if reflection.survey else "nothing new"))
            if llm is not None:
                self._meta_reflect(reflection, llm)
                steps.done("meta-reflection")
            self._consolidate(reflection, passes, llm, steps)
            if llm is not None:
                self._rewrite_core(reflection, llm)
                reflection.output_tokens = llm.output_tokens
                steps.done("core memory reviewed")
            reflection.questions += reflection.meta.questions
            reflection.finished_at = self._clock()
            reflection.summary = summary(reflection, self._next_scheduled())
            self.files.write(reflection)
            steps.done(f"{len(reflection.actions)} actions proposed")
            if reflection.needs_approval:
                self._render_pending()
                log.info("reflection %s: %d actions wait for approval", reflection.id, len(reflection.actions))
                return reflection
            return self._resolve(reflection, "approve", None, None, "", automatic=True)

    def _needs_approval(self, with_model: bool) -> bool:
        mode = self.settings.reflection_approval
        return mode == "always" or (mode == "model" and with_model)

    def _next_scheduled(self) -> str:
        return f"{next_scheduled(self._clock(), self.settings.reflection_at):%Y-%m-%d %H:%M} local"

    # Phase 1
    def _survey(self, reflection: Reflection) -> list[str]:
        since = reflection.since
        saliences = self.memory.saliences()
        new = int((saliences.created > since.timestamp()).sum()) if since else len(saliences.ids)
        episodes = self._new_episodes(since)
        tiers = tier_counts(saliences.salience, self.settings.salience_archive_threshold)
        waiting: dict[str, int] = {}
        for dream_pass in REFLECTION_PASSES:
            try:
                material = self.dreamer.material_size(dream_pass)
            except (RockmemError, OSError) as exc:
                reflection.not_covered.append(f"the {dream_pass} pass could not read its material: {exc}")
                continue
            if material:
                waiting[dream_pass] = material
        passes = sorted(waiting, key=lambda p: -waiting[p])
        since_text = f"since {since:%Y-%m-%d %H:%M} UTC" if since else "(first reflection)"
        reflection.survey = [
            f"{new} new memories and {episodes} new episodes {since_text}; {len(saliences.ids)} memories in all",
            "salience tiers: " + ", ".join(f"{n} {t.replace('_', ' ')}" for t, n in tiers.items()),
            "to consolidate, busiest first: "
            + (", ".join(f"{p} ({waiting[p]} items)" for p in passes) or "nothing new"),
        ]
        reflection.processed = {"memories": len(saliences.ids), "new memories": new, "new episodes": episodes}
        reflection.processed["reflections reviewed"] = reflection.number - 1
        return passes

    def _new_episodes(self, since: datetime | None) -> int:
        episodes = self.dreamer.episodes
        if since is None:
            return sum(count for _, count in episodes.days())
        now = self._clock()
        return len(episodes.between(since, now)) if now > since else 0

    # Phase 2
    def _meta_reflect(self, reflection: Reflection, llm: ChatLLM) -> None:
        past = self.files.read_text(self.files.log_file, LOG_CONTEXT_CHARS) or "(no reflection yet)"
        evolution = self.files.read_text(self.files.evolution_file, LOG_CONTEXT_CHARS) or "(nothing yet)"
        milestone = MILESTONES.get(reflection.number, "")
        system = self.dreamer.templates.render(
            "reflection-meta", number=str(reflection.number), milestone=milestone or "None this cycle."
        )
        user = "\n".join(
            ["## Survey", *reflection.survey, "", "## reflection-log.md", past, "", "## evolution.md", evolution]
        )
        budget = min(META_TOKENS, self._left(reflection, llm))
        try:
            reflection.meta = llm.complete_json(system, user, MetaReflection, max_tokens=budget)
        except RockmemError as exc:
            reflection.not_covered.append(f"meta-reflection: {exc}")

    # Phase 3
    def _consolidate(
        self, reflection: Reflection, passes: list[str], llm: ChatLLM | None, steps: Steps | None = None
    ) -> None:
        live = [e for e in self.memory.iter_entries() if not e.archived]
        self._read = {e.id: version(e) for e in live}  # what each action's memories were as planned
        self._live = {e.id: e for e in live}
        self._clashed = set()
        touched: set[str] = set()
        if llm is not None:
            for dream_pass in passes:
                budget = reflection.token_budget - CORE_RESERVE
                planned = self.dreamer.plan_llm(dream_pass, llm, budget, reflection.meta.guidance)
                self._add_plan(reflection, dream_pass, planned, touched)
                if steps is not None:
                    steps.done(f"{dream_pass} planned")
        else:
            merges, _ = self.dreamer.duplicate_merges(live)
            planned = LLMPlan(plan=DreamPlan(merges=merges))
            self._add_plan(reflection, "consolidation", planned, touched)
            if steps is not None:
                steps.done("consolidation planned")
        for older, newer, why in self.dreamer.contradicting_pairs(live):
            self._contradiction(reflection, older, newer, why)
        if (further := len(reflection.conflicts) - MAX_CONTRADICTIONS) > 0:
            del reflection.conflicts[MAX_CONTRADICTIONS:]
            reflection.not_covered.append(f"{further} further contradictions")
        for found in reflection.conflicts:
            older, newer = found.ids
            reflection.contradictions.append(f"{older} and {newer}: {found.reason}")
            reflection.questions.append(
                f"{older} and {newer} contradict each other ({found.reason}): which one is right?"
            )
        self._archive_candidates(reflection, touched)
        deferred = [(p.id, p.content) for p in self.proposals.deferred()] if self.proposals is not None else []
        if deferred and not reflection.needs_approval:  # committing one is the user's call, never a rule's
            reflection.questions.append(f"{len(deferred)} deferred sub-agent proposals wait: review_proposals")
            return
        for proposal_id, content in deferred:
            item = {"proposal": proposal_id, "content": content}
            self._action(reflection, "proposal", None, item, f"commit deferred proposal {proposal_id}: {content[:80]}")

    def _add_plan(self, reflection: Reflection, dream_pass: str, planned: LLMPlan, touched: set[str]) -> None:
        for problem in planned.problems:
            reflection.not_covered.append(f"{dream_pass}: {problem}")
        mark = _mark_json(planned.read_through)
        if mark is not None:
            reflection.marks[dream_pass] = mark
        for field, kind in FIELD_KINDS.items():
            items = getattr(planned.plan, field)
            if items and field not in ALLOWED[dream_pass]:  # the dream would refuse them: not proposed
                reflection.not_covered.append(f"{dream_pass}: {len(items)} {field} left out (not this pass's)")
                continue
            for item in items:
                data = item.model_dump(mode="json", exclude_defaults=True)
                if kind == "merge" and self._refused_merge(reflection, dream_pass, data):
                    continue
                touched.update(_ids_of(kind, data))
                self._action(reflection, kind, dream_pass, data, _describe(kind, data))

    def _refused_merge(self, reflection: Reflection, dream_pass: str, item: dict[str, Any]) -> bool:
        """Whether a planned merge is one the dream would refuse, and so is not proposed (the user would approve
        what cannot be applied): sources that contradict each other become contradictions for the user to
        decide, a text that drops a source's facts is listed as not covered, saying what it drops."""
        texts = {i: self._live[i].content for i in item.get("ids", []) if i in self._live}
        if clashes := contradictions(texts):
            for a, b, _ in clashes:
                older, newer = sorted([a, b], key=lambda i: (self._live[i].created_at, i))
                self._contradiction(reflection, older, newer, contradiction(texts[older], texts[newer]) or "")
            return True
        if loss := merge_loss(texts, item.get("content", "")):
            reflection.not_covered.append(f"{dream_pass}: a merge of {', '.join(texts)} left out: {loss}")
            return True
        return False

    def _contradiction(self, reflection: Reflection, older: str, newer: str, why: str) -> None:
        if frozenset((older, newer)) not in self._clashed:
            self._clashed.add(frozenset((older, newer)))
            reflection.conflicts.append(DreamAction(action="contradiction", ids=[older, newer], reason=why))

    def _archive_candidates(self, reflection: Reflection, touched: set[str]) -> None:
        saliences = self.memory.saliences()
        now = saliences.now.timestamp()
        archive_below = self.settings.salience_archive_threshold
        found = 0
        for row, entry_id in enumerate(saliences.ids):
            value = float(saliences.salience[row])
            if tier(value, archive_below) != ARCHIVE_CANDIDATE or saliences.pinned[row] or entry_id in touched:
                continue
            if int(saliences.access_count[row]) >= PROTECTED_REINFORCEMENT:
                continue
            found += 1
            if found > MAX_ARCHIVE_CANDIDATES:
                continue
            days = int((now - float(saliences.last_access[row])) // 86_400)
            reason = f"salience {value:.3f}: last used {days} days ago"
            item = {"id": entry_id, "reason": reason}
            self._action(reflection, "archive", "consolidation", item, f"archive {entry_id} ({reason})")
        if found > MAX_ARCHIVE_CANDIDATES:
            reflection.not_covered.append(f"{found - MAX_ARCHIVE_CANDIDATES} further archive candidates")

    # Phase 4
    def _rewrite_core(self, reflection: Reflection, llm: ChatLLM) -> None:
        if self.core is None:
            return
        left = self._left(reflection, llm)
        if left < 200:
            reflection.not_covered.append("core memory rewrite: the output budget ran out")
            return
        try:
            view = self.core.read()
        except RockmemError as exc:
            reflection.not_covered.append(f"core memory rewrite: {exc}")
            return
        caps = ", ".join(f"{b.name} {b.tokens}/{b.cap}" for b in view.blocks)
        salient = [f"- [{h.entry.id}] {' '.join(h.entry.content.split())[:300]}" for h in self.memory.most_salient(30)]
        new = [f"- {a.summary}" for a in reflection.actions if a.kind in ("create", "merge", "procedure")][:60]
        system = self.dreamer.templates.render("reflection-core", caps=caps, total=f"{view.tokens}/{view.cap}")
        parts = ["## Core memory now", view.text, "", "## Guidance", reflection.meta.guidance or "(none)", ""]
        parts += ["## Most salient memories", *salient, "", "## Proposed this cycle", *(new or ["(nothing)"])]
        user = "\n".join(parts)
        try:
            rewrite = llm.complete_json(system, user, CoreRewrite, max_tokens=left)
        except RockmemError as exc:
            reflection.not_covered.append(f"core memory rewrite: {exc}")
            return
        caps_of = {b.name: b.cap for b in view.blocks}
        for block in rewrite.blocks:
            tokens, cap = estimate_tokens(block.text), caps_of.get(block.block, 0)
            if block.block != "Critical Facts" and tokens > cap:
                reflection.not_covered.append(f"core rewrite of {block.block} left out: {tokens} tokens, cap {cap}")
                continue
            item = block.model_dump(mode="json")
            verb = "add to" if block.block == "Critical Facts" else "rewrite"
            self._action(reflection, "core", None, item, f"{verb} {block.block}: {' / '.join(block.text.splitlines())}")

    def _left(self, reflection: Reflection, llm: ChatLLM) -> int:
        return reflection.token_budget - llm.output_tokens

    def _action(
        self, reflection: Reflection, kind: str, dream_pass: str | None, item: dict[str, Any], text: str
    ) -> None:
        action_id = f"a{len(reflection.actions) + 1}"
        read = {i: self._read[i] for i in _ids_of(kind, item) if i in self._read}
        reflection.actions.append(
            ReflectionAction(id=action_id, kind=kind, dream_pass=dream_pass, item=item, summary=text, read=read)
        )

    # ------------------------------------------------------------------ the user's decision
    def resolve(
        self,
        reflection_id: str,
        decision: str,
        action_ids: list[str] | None = None,
        edits: dict[str, dict[str, Any]] | None = None,
        reason: str = "",
    ) -> Reflection:
        """Apply a pending reflection as the user decided: approve (every action), approve_with_changes (`edits`:
        action id → fields to change; with `action_ids`, only those), partial (`action_ids`), or reject
        (`reason` required; nothing changes)."""
        if decision not in DECISIONS:
            raise InvalidInputError(f"decision must be one of {', '.join(DECISIONS)}; got {decision!r}")
        with self.files.claim():
            reflection = self.get(reflection_id)
            closing = reflection.status == "interrupted" and decision == "reject"  # the user has heard: closed
            if reflection.status != "pending" and not closing:
                raise InvalidInputError(f"reflection {reflection.id} is {reflection.status}, not pending")
            return self._resolve(reflection, decision, action_ids, edits, reason)

    def _resolve(
        self,
        reflection: Reflection,
        decision: str,
        action_ids: list[str] | None,
        edits: dict[str, dict[str, Any]] | None,
        reason: str,
        automatic: bool = False,
    ) -> Reflection:
        chosen = self._chosen(reflection, decision, action_ids, edits, reason)
        resolution = ReflectionResolution(decision=decision, at=self._clock(), reason=reason.strip())
        resolution.chosen = [a.id for a in chosen]
        resolution.edited = sorted(edits or {}, key=_number)
        if decision != "reject":
            with self.dreamer.locked():  # a dream running now would refuse the first pass: say so before anything
                pass
            reflection.status = "applying"  # a crash from here on leaves it so: start-up says so
            self.files.write(reflection)
            approval = "auto" if automatic else APPROVAL_OF[decision]
            try:
                with acting_as(f"reflection:{reflection.id}", approval):
                    self._apply(reflection, chosen, resolution, approval)
            except (RockmemError, OSError) as exc:
                self._failed(reflection, resolution, exc)
                raise
        for action in reflection.actions:
            if action.outcome is None:
                action.outcome = "rejected" if decision == "reject" else "not chosen"
        reflection.status = "applied" if automatic else STATUS_OF[decision]
        reflection.resolution = resolution
        self.files.write(reflection)
        self.files.append_log(log_entry(reflection))
        if decision != "reject":
            self.files.append_evolution(evolution_entry(reflection, MILESTONES.get(reflection.number)))
        self._render_pending()
        return reflection

    def _chosen(
        self,
        reflection: Reflection,
        decision: str,
        action_ids: list[str] | None,
        edits: dict[str, dict[str, Any]] | None,
        reason: str,
    ) -> list[ReflectionAction]:
        by_id = {a.id: a for a in reflection.actions}
        named = [i.strip() for i in action_ids or []]
        if unknown := [i for i in [*named, *(edits or {})] if i not in by_id]:
            raise InvalidInputError(
                f"reflection {reflection.id} has no action {', '.join(unknown)}; its actions are a1..a{len(by_id)}"
            )
        if decision == "reject":
            if not reason.strip():
                raise InvalidInputError("say why you reject the reflection (reason): it is kept for learning")
            return []
        if decision == "partial" and not named:
            raise InvalidInputError("partial needs action_ids: the actions to apply (the others are not)")
        if decision == "approve_with_changes" and not edits:
            raise InvalidInputError("approve_with_changes needs edits: {action id: {field: new value}}")
        for action_id, changes in (edits or {}).items():
            _edit(by_id[action_id], changes)
        return [by_id[i] for i in dict.fromkeys(named)] if named else list(reflection.actions)

    def _apply(
        self, reflection: Reflection, chosen: list[ReflectionAction], resolution: ReflectionResolution, approval: str
    ) -> None:
        actor = f"reflection:{reflection.id}"
        counts: Counter[str] = Counter()
        for dream_pass in REFLECTION_PASSES:
            mine = [a for a in chosen if a.dream_pass == dream_pass and self._unchanged(a)]
            mark = _mark_of(reflection.marks.get(dream_pass))
            if not mine and mark is None:
                continue
            plan = DreamPlan(**{f: [a.item for a in mine if KIND_FIELDS[a.kind] == f] for f in FIELD_KINDS})
            report = self.dreamer.apply(
                plan, dream_pass, "reflection", read_through=mark, actor=actor, approval=approval
            )
            resolution.reports.append(report.id)
            counts.update(done.action for done in report.applied if done.action in KIND_FIELDS)
            _outcomes(mine, report)
        for action in chosen:
            if action.kind == "core":
                action.outcome = self._apply_core(action)
            elif action.kind == "proposal":
                action.outcome = self._apply_proposal(action)
        counts.update(a.kind for a in chosen if a.kind in ("core", "proposal") and a.outcome == "applied")
        resolution.applied = dict(sorted(counts.items()))
        resolution.refused = sum(1 for a in chosen if (a.outcome or "").startswith("refused"))

    def _failed(self, reflection: Reflection, resolution: ReflectionResolution, exc: BaseException) -> None:
        """An apply that failed part-way: with nothing applied the reflection is pending again (resolve it again
        later); otherwise it is interrupted, and what it applied is undone with the revert the error names."""
        if resolution.reports or any(a.outcome == "applied" for a in reflection.actions):
            reflection.status = "interrupted"
            self.files.write(reflection)
            log.warning("reflection %s failed part-way (%s): revert run=reflection:%s undoes it", reflection.id,
                        exc, reflection.id)  # fmt: skip
            if isinstance(exc, RockmemError):
                exc.args = (f"{exc} — reflection {reflection.id} was applied in part: revert "
                            f"run=reflection:{reflection.id} undoes what it did",)  # fmt: skip
            return
        for action in reflection.actions:
            action.outcome = None
        reflection.status = "pending"
        self.files.write(reflection)

    def _unchanged(self, action: ReflectionAction) -> bool:
        """Whether the memories the action names are still as the reflection read them; if not, it is refused
        (applying it would undo what someone wrote since: the dream's own check only sees the apply's read)."""
        for entry_id, seen in action.read.items():
            try:
                now: str | None = version(self.memory.get(entry_id))
            except RockmemError:
                now = None
            if now != seen:
                action.outcome = f"refused: {entry_id} changed since the reflection read it; left as it is now"
                return False
        return True

    def _apply_core(self, action: ReflectionAction) -> str:
        if self.core is None:
            return "refused: no core memory in this process"
        block, text = action.item["block"], action.item["text"]
        try:
            if block == "Critical Facts":  # pinned lines are never rewritten away: new ones are added
                for line in [line for line in text.splitlines() if line.strip()]:
                    self.core.edit("append", block, self.core.read().version, line)
            else:
                self.core.edit("replace_block", block, self.core.read().version, text)
        except RockmemError as exc:
            return f"refused: {exc}"
        return "applied"

    def _apply_proposal(self, action: ReflectionAction) -> str:
        if self.proposals is None:
            return "refused: proposals are not open in this process"
        try:  # the user approved the reflection that holds it
            self.proposals.commit(action.item["proposal"], approval="approved", user_confirmed=True)
        except RockmemError as exc:
            return f"refused: {exc}"
        return "applied"

    # ------------------------------------------------------------------ start-up
    def recover(self) -> list[str]:
        return recover_interrupted(self.files)

    def _render_pending(self) -> None:
        waiting = self.pending()
        self.files.write_pending("\n\n---\n\n".join(r.summary for r in waiting))


# ---------------------------------------------------------------------------------------------- without a dreamer
def pending_lines(files: ReflectionFiles) -> list[str]:
    """A session-start starter's lines: the reflections waiting for the user (nothing when none is)."""
    waiting = list(files.with_status("pending"))
    cut = list(files.with_status("interrupted"))
    lines = []
    if waiting:
        lines.append(
            f"Reflections waiting for the user's approval ({len(waiting)}): show them with reflect, ask the user"
        )
        lines += [f"- {r.id} ({r.started_at:%Y-%m-%d}, {r.trigger}): {len(r.actions)} actions" for r in waiting[:5]]
    for r in cut[-3:]:
        lines.append(f"Reflection {r.id} was cut off while being applied: tell the user; revert run=reflection:{r.id} "
                     "undoes what it applied")  # fmt: skip
    return lines


def recover_interrupted(files: ReflectionFiles) -> list[str]:
    """Reflections a crash left applying are marked interrupted (what they applied is in the audit log under
    reflection:r-NNN: `revert run=reflection:r-NNN` undoes it); their ids."""
    found: list[str] = []
    # Busy: a live process is applying one right now, so none is interrupted.
    with contextlib.suppress(ReflectionBusy), files.claim():
        for reflection in files.with_status("applying"):
            reflection.status = "interrupted"
            files.write(reflection)
            found.append(reflection.id)
            log.warning(
                "reflection %s was cut off while being applied: what it applied is logged as reflection:%s "
                "(revert run=reflection:%s undoes it)",
                *(reflection.id,) * 3,
            )
    return found


# ---------------------------------------------------------------------------------------------- helpers
def _outcomes(actions: list[ReflectionAction], report: DreamReport) -> None:
    """Each action's outcome from its pass's report: by the memories it names (merge, archive, update) or the
    procedure's name; for the kinds a report cannot tell apart (create, entity, triple), by count."""
    refused = {(r.action, frozenset(r.ids)): r.reason for r in report.rejected}
    for action in actions:
        key = _ids_of(action.kind, action.item) or (
            [procedure_slug(action.item["name"])] if action.kind == "procedure" else []
        )
        if key:
            why = refused.get((action.kind, frozenset(key)))
            action.outcome = f"refused: {why}" if why else "applied"
    for kind in ("create", "entity", "triple"):
        mine = [a for a in actions if a.kind == kind]
        done = sum(1 for r in report.applied if r.action == kind)
        reasons = [r.reason for r in report.rejected if r.action == kind]
        for action in mine:
            if not reasons:
                action.outcome = "applied"
            elif not done:
                action.outcome = f"refused: {'; '.join(dict.fromkeys(reasons))[:300]}"
            else:
                action.outcome = f"{done} of {len(mine)} {kind}s applied (dream report {report.id} says which)"


def _ids_of(kind: str, item: dict[str, Any]) -> list[str]:
    if kind == "merge":
        return list(item.get("ids", []))
    if kind in ("archive", "update"):
        return [item["id"]] if "id" in item else []
    return []


def _describe(kind: str, item: dict[str, Any]) -> str:
    why = f" ({item['reason']})" if item.get("reason") else ""
    if kind == "merge":
        return f"merge {', '.join(item.get('ids', []))} into: {item.get('content', '')}{why}"
    if kind == "archive":
        return f"archive {item.get('id')}{why}"
    if kind == "update":
        return f"refile {item.get('id')} under {item.get('category') or '-'} tags {item.get('tags') or '-'}{why}"
    if kind == "create":
        return f"new memory in {item.get('category') or 'default'}: {item.get('content', '')}{why}"
    if kind == "entity":
        return f"new entity {item.get('name')} ({item.get('type') or 'entity'})"
    if kind == "triple":
        return f"{item.get('subject')} → {item.get('predicate')} → {item.get('object')}"
    if kind == "procedure":
        return f"procedure {item.get('name')}: {len(item.get('steps', []))} steps{why}"
    return str(item)


def _edit(action: ReflectionAction, changes: dict[str, Any]) -> None:
    """Change an action's fields; the result must still be a valid action of its kind."""
    if not isinstance(changes, dict) or not changes:
        raise InvalidInputError(f"edits for {action.id} must be an object of fields to change")
    item = {**action.item, **changes}
    try:
        if action.kind in KIND_FIELDS:
            DreamPlan.model_validate({KIND_FIELDS[action.kind]: [item]})
        elif action.kind == "core":
            CoreRewrite.model_validate({"blocks": [item]})
        else:
            raise InvalidInputError(
                f"{action.id} commits a deferred proposal as filed: leave it out (partial) or reject it with "
                "review_proposals"
            )
    except ValidationError as exc:
        problem = "; ".join(f"{'.'.join(map(str, e['loc'][2:])) or 'item'}: {e['msg']}" for e in exc.errors()[:3])
        raise InvalidInputError(f"edits for {action.id} ({action.kind}) are not valid: {problem}") from None
    action.item = item
    action.summary = _describe(action.kind, item) if action.kind in KIND_FIELDS else action.summary + " (edited)"


def _number(action_id: str) -> int:
    return int(action_id[1:]) if action_id[1:].isdigit() else 0


def _mark_json(mark: LogMark | EpisodeMark | None) -> dict[str, Any] | None:
    if isinstance(mark, EpisodeMark):
        return {"episodes": {"at": mark.at.isoformat(), "ids": sorted(mark.ids)}}
    if isinstance(mark, LogMark):
        return {"log": {"day": mark.day.isoformat(), "end": mark.end, "inode": mark.inode}}
    return None


def _mark_of(data: dict[str, Any] | None) -> LogMark | EpisodeMark | None:
    if not data:
        return None
    from datetime import date

    if "episodes" in data:
        found = data["episodes"]
        return EpisodeMark(datetime.fromisoformat(found["at"]), frozenset(found["ids"]))
    found = data["log"]
    return LogMark(date.fromisoformat(found["day"]), int(found["end"]), int(found["inode"]))
