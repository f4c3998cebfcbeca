"""Gated writes (seed 004 §13): a sub-agent's memories become proposals the main agent commits, rejects or defers.

With `gated_writes` on, a process in a `subagent/NAME` namespace reads every store, keeps its working memory,
and writes nothing long-term: save_memory, remember (and a remember a trigger phrase acts on, and the facts a
compaction of its conversation finds) file a proposal here; every other long-term write is refused
(`refusal`). The main agent reviews proposals: `commit` writes one through the normal stores (Remembering's
all-or-nothing write) as `bot:commit-from:NAME`, `reject` keeps it with a reason, `defer` leaves it for the
reflection engine (`deferred`). Review modes: auto commits proposals of `trusted_agents` at or above
`auto_commit_confidence` as they arrive; batch (the default) lists open proposals at the head of the main
session's first recall; manual is the user's review: `commit` refuses without `user_confirmed`.

Conflicts: a proposal saying the same subject and attribute has another value than an open proposal ("Project
deadline is March 15" / "… is March 30") marks both `conflict`, each naming the other. Committing or rejecting
one of them takes its id off the other's list; a proposal with no rival left goes back to pending, its reason
saying what became of the rival (a committed rival usually means reject it).

Records (proposals/files.py) are the truth; meta/pending-memories.md, the seed's readable file, is
rendered from the open ones after each change. Committed and rejected records are kept (their status says so)
for the history: the audit trail names them, and `revert` can put one back.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Literal

from rockmem_mcp.audit.service import Audit, acting_as, quoted
from rockmem_mcp.config import Settings
from rockmem_mcp.errors import InvalidInputError, NotFoundError, WritesGatedError
from rockmem_mcp.models import Confidence, Remembered, RoutedEntity, RoutedMemory, check_text, normalize_tags, utc_now
from rockmem_mcp.proposals.files import ProposalFiles, checked_id, new_id
from rockmem_mcp.proposals.shapes import Proposal, ProposalStore
from rockmem_mcp.storage.pg import is_database_url
from rockmem_mcp.text import fold

if TYPE_CHECKING:
    from rockmem_mcp.memory.service import MemoryService
    from rockmem_mcp.recall.remembering import Remembering

log = logging.getLogger(__name__)

READABLE_NAME = "pending-memories.md"
RANK = {"low": 0, "medium": 1, "high": 2}
SESSION_LINES = 10  # open proposals listed in the main session's first recall (then "and N more")
SESSION_HEADING = "Memory proposals from sub-agents, waiting for you (review_proposals: commit, reject or defer):"
Writer = Callable[..., Remembered]  # Remembering.write(text, routed, driver, note, category=, metadata=)
Approval = Literal["auto", "approved"]

# ------------------------------------------------------------------------------------------- conflicts
# "X is Y", "X are Y", "X: Y", "X = Y": X is the subject and attribute, Y the value.
_COPULA = re.compile(r"\s+(?:is|are|was|were|will be|equals)\s+|\s*[:=]\s+", re.IGNORECASE)
_LEADING = re.compile(r"^(?:(?:the|a|an|our|my|your|their|its|now)\s+)+")
_NOT_WORD = re.compile(r"[^\w]+")
MAX_SUBJECT_WORDS = 8


def _plain(text: str) -> str:
    return " ".join(_NOT_WORD.sub(" ", fold(text).lower()).split())


def subject_and_value(text: str) -> tuple[str, str] | None:
    """("project deadline", "march 15") for "The project deadline is March 15."; None for a sentence without a
    copula, or with a subject longer than a name and an attribute would be."""
    sentence = re.split(r"(?<=[.!?])\s|\n", text.strip(), maxsplit=1)[0]
    found = _COPULA.search(sentence)
    if found is None:
        return None
    subject = _LEADING.sub("", _plain(sentence[: found.start()]))
    value = _LEADING.sub("", _plain(sentence[found.end() :]))
    if not subject or not value or len(subject.split()) > MAX_SUBJECT_WORDS:
        return None
    return subject, value


def conflicting(a: str, b: str) -> bool:
    """Whether `a` and `b` give the same subject and attribute different values (negation- or wording-based
    contradictions are fact_check's; this is the rule for proposals, where two sub-agents report one fact)."""
    said = subject_and_value(a)
    return said is not None and _gives_another_value(said, b)


def _gives_another_value(said: tuple[str, str], text: str) -> bool:
    other = subject_and_value(text)
    return other is not None and other[0] == said[0] and other[1] != said[1]


# ------------------------------------------------------------------------------------------- the service
def gates(settings: Settings) -> bool:
    """Whether this process's long-term writes are gated: gated_writes on, and a subagent/… namespace."""
    return settings.gated_writes and (settings.namespace or "").startswith("subagent/")


def agent_name(settings: Settings) -> str:
    """The sub-agent's name (its namespace's second segment); "main" for a process of its own."""
    root, _, name = (settings.namespace or "").partition("/")
    return name if root == "subagent" and name else "main"


def refusal(settings: Settings, tool: str) -> WritesGatedError:
    """What a gated sub-agent is told when it calls a long-term write other than save_memory and remember."""
    return WritesGatedError(
        f"writes from this sub-agent ({agent_name(settings)}) are gated (ROCKMEM_GATED_WRITES): {tool} would change "
        "long-term memory, which only the main agent does. To keep something, call save_memory or remember: that "
        "files a proposal the main agent reviews. Working memory (working_memory) is yours as before."
    )


def proposal_store(settings: Settings) -> ProposalFiles:
    """The proposal queue: the home's files, or the database replicas share (a sub-agent's proposal is reviewed
    through any replica)."""
    where = (settings.home, settings.meta_dir / "proposals", settings.meta_dir / "proposals.lock",
             settings.meta_dir / READABLE_NAME)  # fmt: skip
    if is_database_url(settings.store):
        from rockmem_mcp.proposals.postgres import PgProposalRows
        from rockmem_mcp.storage.pg import shared_database

        return PgProposalRows(shared_database(str(settings.store), "stores", settings.store_schema), *where)
    return ProposalFiles(*where)


class Proposals:
    def __init__(
        self,
        settings: Settings,
        audit: Audit,
        writer: Writer | None = None,
        clock: Callable[[], datetime] = utc_now,
        written: Callable[[Proposal], list[str]] | None = None,
    ) -> None:
        """`writer` commits a proposal (Remembering.write); without one (a listing CLI) commits are refused.
        `written`: what an earlier commit of a proposal already wrote (memory:ID, …), for a commit a crash cut
        off between its write and its record (`committed_memories` looks in the memory store)."""
        self.settings = settings
        self.audit = audit
        self.writer = writer
        self._written = written
        self.files = proposal_store(settings)
        self._clock = clock
        self.gated = gates(settings)
        self.agent = agent_name(settings)

    # ---------------------------------------------------------------- gate
    def refusal(self, tool: str) -> WritesGatedError:
        return refusal(self.settings, tool)

    def refuse(self, tool: str) -> None:
        if self.gated:
            raise self.refusal(tool)

    # ---------------------------------------------------------------- proposing
    def propose(
        self,
        content: str,
        *,
        trigger: str,
        store: ProposalStore = "semantic",
        entities: Iterable[str] = (),
        confidence: Confidence = "medium",
        core_worthy: bool = False,
        category: str | None = None,
        tags: Sequence[str] = (),
        from_agent: str | None = None,
    ) -> Proposal:
        """File a proposal (durable and audited when this returns); open rivals are marked as conflicts both ways;
        in auto mode a trusted agent's proposal at or above the confidence is committed at once."""
        check_text(content, "content", self.settings.max_content_bytes, "ROCKMEM_MAX_CONTENT_BYTES", "Summarise it.")
        if not content.strip():
            raise InvalidInputError("content is empty: say what to remember")
        proposal = Proposal(
            id="0" * 13,
            from_agent=from_agent or self.agent,
            time=self._clock(),
            trigger=" ".join(trigger.split())[:200],
            store=store,
            content=content,
            entities=list(dict.fromkeys(e.strip() for e in entities if e.strip())),
            confidence=confidence,
            core_worthy=core_worthy,
            category=category,
            tags=normalize_tags(list(tags), self.settings.max_tags),
        )
        with self.files.locked():
            while True:  # a taken id (same millisecond, another process) is never overwritten
                proposal.id = new_id(proposal.time)
                if self.files.create(proposal):
                    break
            opened = self._open()
            said = subject_and_value(content)
            rivals = [
                p.model_copy(deep=True)
                for p in opened
                if said is not None and p.id != proposal.id and _gives_another_value(said, p.content)
            ]
            before = {p.id: p.model_copy(deep=True) for p in rivals}
            for rival in rivals:
                rival.status, proposal.status = "conflict", "conflict"
                rival.conflict_with.append(proposal.id)
                proposal.conflict_with.append(rival.id)
                self.files.write(rival)
            if rivals:
                self.files.write(proposal)

            def undo() -> None:
                self.files.remove(proposal.id)
                for old in before.values():
                    self.files.write(old)

            summary = f"proposal #{proposal.id} ({proposal.store}, {proposal.confidence}) {quoted(content)}"
            if rivals:
                summary += " — conflict with " + ", ".join(f"#{r.id}" for r in rivals)
            self.audit.record("PROPOSE", self.files.path_for(proposal.id), summary, approval="pending", undo=undo)
            now = {p.id: p for p in opened} | {p.id: p for p in [*rivals, proposal]}
            self._render([now[i] for i in sorted(now)])
        if self._auto_commits(proposal):
            try:
                return self.commit(proposal.id, approval="auto")
            except (InvalidInputError, NotFoundError) as exc:  # filed all the same: the main agent decides
                log.warning("proposal %s was not auto-committed (%s)", proposal.id, exc)
        return proposal

    def propose_save(
        self,
        content: str,
        category: str | None = None,
        tags: Sequence[str] | None = None,
        importance: float | None = None,
        pinned: bool = False,
    ) -> Proposal:
        """save_memory's arguments as a proposal: pinned → vault; importance ≥ 0.8 (or pinned) → high, < 0.5 →
        low confidence."""
        level = 0.7 if importance is None else importance
        confidence: Confidence = "high" if pinned or level >= 0.8 else "low" if level < 0.5 else "medium"
        return self.propose(
            content,
            trigger="save_memory",
            store="vault" if pinned else "semantic",
            confidence=confidence,
            category=category,
            tags=tags or (),
        )

    def propose_route(self, text: str, routed: RoutedMemory, driver: str, note: str = "") -> Remembered:
        """A remember's routed write, as a proposal (Remembering's gate): core → semantic and core-worthy."""
        proposal = self.propose(
            text,
            trigger=f"remember (routed by {driver})",
            store="semantic" if routed.store == "core" else routed.store,
            entities=[e.name for e in routed.entities],
            confidence=routed.confidence,
            core_worthy=routed.core_update or routed.store == "core",
            tags=routed.tags,
        )
        done = Remembered(store=routed.store, driver=driver, route=routed, note=note, proposal=proposal.id)  # type: ignore[arg-type]
        if proposal.status == "committed":
            done.note = "; ".join(filter(None, [note, f"auto-committed as {', '.join(proposal.committed_as)}"]))
        else:
            done.note = "; ".join(filter(None, [note, f"filed as proposal #{proposal.id}: the main agent reviews it"]))
        return done

    def propose_fact(self, fact: str, session_id: str) -> Proposal:
        """A fact a compaction of this sub-agent's conversation found (Compactor's gate)."""
        return self.propose(fact, trigger=f"conversation compaction ({session_id})", confidence="low")

    def _auto_commits(self, proposal: Proposal) -> bool:
        return (
            self.settings.proposal_review == "auto"
            and proposal.status == "pending"
            and proposal.from_agent in self.settings.trusted_agents
            and RANK[proposal.confidence] >= RANK[self.settings.auto_commit_confidence]
        )

    # ---------------------------------------------------------------- reading
    def _open(self) -> list[Proposal]:
        return [p for p in self.files.all() if p.open]

    def get(self, proposal_id: str) -> Proposal:
        proposal_id = checked_id(proposal_id)
        try:
            return self.files.read(proposal_id)
        except FileNotFoundError:
            raise NotFoundError(f"no proposal #{proposal_id}: review_proposals lists the open ones") from None

    def pending(self) -> list[Proposal]:
        """Proposals waiting for the main agent (pending or in conflict), oldest first."""
        return [p.model_copy(deep=True) for p in self.files.all() if p.status in ("pending", "conflict")]

    def deferred(self) -> list[Proposal]:
        """Proposals the main agent left for the reflection engine, oldest first."""
        return [p.model_copy(deep=True) for p in self.files.all() if p.status == "deferred"]

    def history(self, limit: int = 50) -> list[Proposal]:
        """Every proposal, newest first (committed and rejected ones too)."""
        return [self.files.read(i) for i in reversed(self.files.ids()[-limit:])]

    # ---------------------------------------------------------------- deciding
    def _decidable(self, proposal_id: str, by_rule: bool = False) -> Proposal:
        """The open proposal `proposal_id`; only the main agent decides, but a rule (auto mode's commit in the
        proposing process) may commit anywhere."""
        if not by_rule and (self.gated or self.agent != "main"):
            raise InvalidInputError(f"only the main agent reviews proposals; {self.agent} proposes them")
        proposal = self.get(proposal_id)
        if not proposal.open:
            raise InvalidInputError(f"proposal #{proposal.id} is already {proposal.status}: nothing to decide")
        return proposal

    def commit(
        self,
        proposal_id: str,
        store: ProposalStore | None = None,
        *,
        approval: Approval = "approved",
        user_confirmed: bool = False,
    ) -> Proposal:
        """Write the proposal to `store` (default: its suggested one) through the normal stores, logged as
        bot:commit-from:NAME with `approval` ("approved": a reviewer's decision; "auto": a rule's, e.g. auto mode
        or the reflection engine); returns the record, status committed, committed_as naming what was written.
        Manual review mode: refused unless `user_confirmed` (the user said yes)."""
        if self.settings.proposal_review == "manual" and not user_confirmed:
            raise InvalidInputError(
                "proposal review is manual (ROCKMEM_PROPOSAL_REVIEW): show the user the proposal and commit with "
                "user_confirmed=true only once they agree"
            )
        if self.writer is None:
            raise InvalidInputError("this process cannot commit proposals (no stores open): use the server or CLI")
        with self.files.locked():
            proposal = self._decidable(proposal_id, by_rule=approval == "auto")
            target = store or proposal.store
            routed = RoutedMemory(
                store=target,
                summary=" ".join(proposal.content.split())[:500],
                entities=[RoutedEntity(name=name) for name in proposal.entities],
                tags=proposal.tags,
                confidence=proposal.confidence,
                core_update=proposal.core_worthy,
            )
            actor = f"bot:commit-from:{proposal.from_agent}"
            metadata = {"source": "proposal", "proposal": proposal.id, "proposed_by": proposal.from_agent}
            with acting_as(actor, approval):
                # A commit a crash cut off after its write: what it wrote is found, not written a second time.
                found = self._written(proposal) if proposal.committing_at and self._written else []
                if found:
                    written = found
                else:
                    proposal.committing_at = self._clock()
                    self.files.write(proposal)  # durable before the write: a crash after it is found above
                    done = self.writer(proposal.content, routed, "agent", category=proposal.category, metadata=metadata)
                    written = [f"memory:{done.memory_id}"] if done.memory_id else []
                    written += [f"procedure:{done.procedure}"] if done.procedure else []
                    written += [f"core:{done.core_line}"] if done.core_line else []
                    written += [f"episode:{done.episode_id}"] if done.episode_id else []
                proposal.committing_at = None
                where = f" as {target}" if target != proposal.store else ""
                self._decide(
                    proposal, "committed", "", written,
                    ("COMMIT", f"accepted proposal #{proposal.id}{where} → {', '.join(written) or 'nothing new'}"),
                )  # fmt: skip
        return proposal

    def reject(self, proposal_id: str, reason: str) -> Proposal:
        """Keep the record, status rejected with `reason` (logged as REJECT by the current actor)."""
        reason = " ".join(reason.split())[:500]
        if not reason:
            raise InvalidInputError("reason is required: say why the proposal is rejected (duplicate, wrong, …)")
        with self.files.locked():
            proposal = self._decidable(proposal_id)
            self._decide(proposal, "rejected", reason, [], ("REJECT", f"rejected proposal #{proposal.id} — {reason}"))
        return proposal

    def defer(self, proposal_id: str, reason: str = "") -> Proposal:
        """Leave the proposal for the reflection engine (`deferred()` lists it); its conflicts stay marked."""
        with self.files.locked():
            proposal = self._decidable(proposal_id)
            if proposal.status == "deferred":
                return proposal
            before = proposal.model_copy(deep=True)
            proposal.status, proposal.reason = "deferred", " ".join(reason.split())[:500]
            self.files.write(proposal)
            summary = f"deferred proposal #{proposal.id}" + (f" — {proposal.reason}" if proposal.reason else "")
            self.audit.record("EDIT", self.files.path_for(proposal.id), summary, undo=lambda: self.files.write(before))
            self._render()
        return proposal

    def _decide(
        self, proposal: Proposal, status: Literal["committed", "rejected"], reason: str, written: list[str],
        line: tuple[str, str],
    ) -> None:  # fmt: skip
        """Record a final decision (under the lock): the proposal's status, its rivals freed, the audit line."""
        before = [proposal.model_copy(deep=True)]
        proposal.status, proposal.reason, proposal.committed_as = status, reason, written
        proposal.decided_at = self._clock()
        changed = [proposal]
        for rival_id in proposal.conflict_with:
            try:
                rival = self.files.read(rival_id)
            except FileNotFoundError:
                continue
            before.append(rival.model_copy(deep=True))
            rival.conflict_with = [i for i in rival.conflict_with if i != proposal.id]
            if rival.status == "conflict" and not rival.conflict_with:
                rival.status = "pending"
            rival.reason = f"its rival #{proposal.id} was {status}"
            changed.append(rival)
        for record in changed:
            self.files.write(record)

        def undo() -> None:
            for old in before:
                self.files.write(old)

        self.audit.record(line[0], self.files.path_for(proposal.id), line[1], undo=undo)
        self._render()

    def heal(self) -> int:
        """Make conflict marks agree (a crash between the two records of a conflict leaves one side marked):
        each open proposal names every open rival that names it, names no closed or missing one, and is
        pending when none is left. Run at server start; returns how many records changed."""
        with self.files.locked():
            records = {p.id: p.model_copy(deep=True) for p in self._open()}
            changed = []
            for proposal in records.values():
                named = {i for i in proposal.conflict_with if i in records}
                named |= {other.id for other in records.values() if proposal.id in other.conflict_with}
                wanted = sorted(named)
                status = proposal.status
                if status != "deferred":
                    status = "conflict" if wanted else "pending"
                if wanted != proposal.conflict_with or status != proposal.status:
                    proposal.conflict_with, proposal.status = wanted, status  # type: ignore[assignment]
                    changed.append(proposal)
            for proposal in changed:
                self.files.write(proposal)
            if changed:
                ids = ", ".join(f"#{p.id}" for p in changed)
                self.audit.record("EDIT", self.files.root, f"conflict marks made to agree (after a crash): {ids}")
                self._render()
        return len(changed)

    # ---------------------------------------------------------------- views
    def _render(self, opened: list[Proposal] | None = None) -> None:
        """meta/pending-memories.md from the open records, `opened` if the caller has them (a failure is logged:
        the records are the truth)."""
        try:
            self.files.render(markdown(self._open() if opened is None else opened))
        except OSError as exc:
            log.warning("meta/%s not rendered (%s); the records in meta/proposals/ are current", READABLE_NAME, exc)

    def session_lines(self, _message: str = "") -> list[str]:
        """Batch review: the open proposals, at the head of the main agent's first recall ([] for a sub-agent, and
        when there are none). In auto mode these are the ones no rule committed: they wait as in batch."""
        if self.agent != "main":
            return []
        waiting = [p for p in self.files.all() if p.status in ("pending", "conflict")]
        if not waiting:
            return []
        lines = [SESSION_HEADING, *(line(p) for p in waiting[:SESSION_LINES])]
        if len(waiting) > SESSION_LINES:
            lines.append(f"- … and {len(waiting) - SESSION_LINES} more (review_proposals lists them all)")
        return lines


def committing(settings: Settings, remembering: Remembering) -> Proposals:
    """Proposals that commit through `remembering`, finding what a commit cut off by a crash already wrote."""
    memory = remembering.memory
    return Proposals(settings, memory.audit, remembering.write, written=lambda p: committed_memories(memory, p))


def committed_memories(memory: MemoryService, proposal: Proposal) -> list[str]:
    """The memories an earlier commit of `proposal` wrote (each carries metadata.proposal): found by its text."""
    hits = memory.search(" ".join(proposal.content.split())[:500], limit=20, include_archived=True).results
    return [f"memory:{h.entry.id}" for h in hits if h.entry.metadata.get("proposal") == proposal.id]


def line(proposal: Proposal) -> str:
    """One proposal in a line: '- #ID from researcher → semantic (high): content ⚠️ conflict with #ID'."""
    text = " ".join(proposal.content.split())
    text = text if len(text) <= 200 else text[:199] + "…"
    mark = f" ⚠️ conflict with {', '.join('#' + i for i in proposal.conflict_with)}" if proposal.conflict_with else ""
    return f"- #{proposal.id} from {proposal.from_agent} → {proposal.store} ({proposal.confidence}): {text}{mark}"


def markdown(proposals: Iterable[Proposal]) -> str:
    """The seed's pending-memories.md (004 §13.2, §13.6) for `proposals`."""
    out = [
        "# Pending Memory Proposals",
        "<!-- Rendered by rockmem from meta/proposals/*.json (the truth): edits here are overwritten. -->",
    ]
    for p in proposals:
        mark = f" ⚠️ CONFLICT with {', '.join('#' + i for i in p.conflict_with)}" if p.conflict_with else ""
        status = f"conflict — see {', '.join('#' + i for i in p.conflict_with)}" if p.status == "conflict" else p.status
        out += [
            "---",
            "",
            f"## Proposal #{p.id}{mark}",
            f"- **From**: {p.from_agent}",
            f"- **Timestamp**: {p.time.strftime('%Y-%m-%dT%H:%M:%SZ')}",
            f"- **Trigger**: {p.trigger}",
            f"- **Suggested store**: {p.store}",
            f"- **Content**: {' '.join(p.content.split())}",
            f"- **Entities**: [{', '.join(p.entities)}]",
            f"- **Confidence**: {p.confidence}",
            f"- **Core-worthy**: {'yes' if p.core_worthy else 'no'}",
            f"- **Status**: {status}" + (f" ({p.reason})" if p.reason else ""),
        ]
    return "\n".join(out) + "\n"
