"""Write-then-compact (seed 003, layer 5): before turns leave a conversation window, what they said is written
to disk; then the window becomes a summary turn + the last 4 turns.

When: a client that reports its context usage (`tokens_used` / `token_limit`) is advised to flush (save what
matters) at >= 60 % and its session is compacted at >= 70 %; a window that fills (`conversation_window`, 50
turns) is compacted too, all but its last 4 turns at once, so this happens once per ~46 turns, never per turn.

Writes, whatever the driver: every user turn compacted is appended to the episode log (source conversation,
at the time it was said) word for word, so nothing the user said is lost; the facts the driver extracts become
memories (each also logged as an episode, like save_memory; one a memory already says is skipped). Only
when every write succeeded is the window trimmed: a failed write leaves it as it was and raises CompactionError
saying so.

Drivers (setting `encode_driver`): the server's model (JSON `{facts, summary}`, validated), the client's model
through MCP sampling (the tool asks before it runs, only when this call compacts), the calling agent (the reply
carries the task: save facts with save_memory, then record_turn role="summary"), or rules with no model. In
`auto`: the server's model if configured, else the client's if it answered, else rules. A model's bad answer
falls back to rules, and the reply says so. Rules are conservative (see `rule_facts`): a sentence of a user
turn becomes a memory only if it is a first-person statement ("my … is …", "I live/work/prefer …") carrying a
detail (a number, a date, a name, a preference), at most MAX_RULE_FACTS per compaction; the summary is
extractive (the first sentence of each turn, cut to 160 characters, then the facts) and bounded: the previous
summary's lines are folded in and the oldest dropped beyond SUMMARY_MAX_CHARS.
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from typing import Annotated

from pydantic import BaseModel, Field, ValidationError

from rockmem_mcp.audit.service import AUTO_DETECT, acting_as, bot_actor
from rockmem_mcp.config import Settings
from rockmem_mcp.conversation.service import ConversationMemory, check_session_id
from rockmem_mcp.episodes.service import Episodes
from rockmem_mcp.errors import InvalidInputError, LLMError, RockmemError, reporting_io_errors
from rockmem_mcp.llm import ChatLLM, unfenced
from rockmem_mcp.memory.service import MemoryService
from rockmem_mcp.models import Compaction, CompactionDriver, ConversationTurn, check_text, utc_now
from rockmem_mcp.search.conversation_metadata import conversation_metadata

log = logging.getLogger(__name__)

FLUSH_AT = 0.60  # of the client's context: advise saving what matters now
COMPACT_AT = 0.70  # compact the session
KEEP_LAST = 4  # turns kept after the summary
SUMMARY_MAX_CHARS = 2_000
LINE_CHARS = 160  # a rules summary line: the first sentence of a turn, cut to this
MAX_RULE_FACTS = 8  # memories rules may save per compaction
MAX_MODEL_FACTS = 20
FACT_MAX_CHARS = 1_000  # one fact, one or two sentences
# Usage over 70% compacts only once this many turns have come since the summary (a client whose reported usage
# stays high until it trims its own context would otherwise compact, and ask a model, on every turn).
MIN_TURNS_TO_COMPACT = 4
TASK_TURN_CHARS = 2_000  # a turn's text in a prompt or an agent's task (the episode log keeps it whole)
FACT_TAGS = ["conversation", "compaction"]
# An agent-driven window that filled is left to the agent; at this many times its size rules compact it.
AGENT_GRACE = 2


class CompactionAnswer(BaseModel):
    """What the server's or the client's model answers."""

    facts: list[Annotated[str, Field(max_length=FACT_MAX_CHARS)]] = Field(
        default_factory=list, max_length=MAX_MODEL_FACTS
    )
    summary: str = Field(min_length=1, max_length=SUMMARY_MAX_CHARS)


class CompactionError(RockmemError):
    """A compaction's writes failed: the window was not trimmed."""


SYSTEM_PROMPT = f"""You compact a conversation before its older turns leave the context window.
Answer with JSON only: {{"facts": ["..."], "summary": "..."}}.
facts: durable facts worth remembering across sessions (about the user, their people, projects, preferences,
decisions), each one self-contained sentence, keeping names, numbers and dates exactly; at most {MAX_MODEL_FACTS};
[] if there are none. Do not list small talk or requests.
summary: what the conversation covered and where it stands, at most {SUMMARY_MAX_CHARS} characters; fold in the
earlier summary's points that still matter."""

AGENT_TASK = """Compact this conversation: (1) save each durable fact it states (names, numbers, dates exactly)
with save_memory, one fact per call; (2) call record_turn with role="summary" and a summary of at most {limit}
characters that folds in any earlier summary. The server then keeps your summary and the last {keep} turns, and
logs what the user said in the episode log itself.

{turns}"""

# Rules' facts: a first-person statement ...
_STATEMENT = re.compile(
    r"^(?:my|our)\b|\bmy\s+[\w'-]+(?:\s+[\w'-]+){0,3}\s+(?:is|are|was|were)\b|"
    r"\b(?:i|we)(?:\s+(?:really|also|usually|always|never|still|just))?\s+(?:am|'m|was|have|has|had|live|lived|work|"
    r"worked|prefer|like|love|hate|use|own|moved|was born|study|studied|speak|drive|need to be)\b|\bi'm\b|\bi've\b",
    re.IGNORECASE,
)
# ... with a detail worth keeping: a number, a date word, a preference; names are checked apart (capitals).
_DETAIL = re.compile(
    r"\d|\b(?:january|february|march|april|may|june|july|august|september|october|november|december|monday|"
    r"tuesday|wednesday|thursday|friday|saturday|sunday|prefer|favou?rite|allergic|birthday|born|name)\b",
    re.IGNORECASE,
)
_REQUEST = re.compile(
    r"^(?:please|can|could|would|will|shall|should|do|does|did|is|are|what|who|where|when|why|how|which|let's|"
    r"help|show|tell|write|give|make|find|explain|remind)\b",
    re.IGNORECASE,
)
_NAME = re.compile(r"(?<=\s)(?!I\b|I'|I’)[A-Z][\w'-]+")
_SENTENCES = re.compile(r"(?<=[.!?])\s+|\n+")
_HEADER = re.compile(r"^Summary of the conversation before")


def _plain(text: str) -> str:
    return " ".join(re.findall(r"\w+", text.casefold()))


def advice_for(tokens_used: int, token_limit: int) -> tuple[float | None, str | None]:
    """The usage fraction (None when not reported: both 0) and the advice it calls for, if any."""
    for name, value in (("tokens_used", tokens_used), ("token_limit", token_limit)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InvalidInputError(f"{name} must be a whole number of tokens, 0 or more; got {value!r}")
    if token_limit == 0:
        if tokens_used:
            raise InvalidInputError("tokens_used needs token_limit: give your context window's size in tokens too")
        return None, None
    usage = tokens_used / token_limit
    return usage, "compact" if usage >= COMPACT_AT else "flush" if usage >= FLUSH_AT else None


def rule_facts(turns: list[ConversationTurn]) -> list[str]:
    """The sentences of user turns that state a fact, conservatively (see the module's docstring), in order,
    without repeats, at most MAX_RULE_FACTS."""
    found: list[str] = []
    seen: set[str] = set()
    for turn in turns:
        if turn.role != "user":
            continue
        for sentence in _SENTENCES.split(turn.content):
            sentence = " ".join(sentence.split()).strip(" -*•")
            words = len(sentence.split())
            if not 3 <= words <= 60 or sentence.endswith("?") or _REQUEST.match(sentence):
                continue
            if not _STATEMENT.search(sentence) or not (_DETAIL.search(sentence) or _NAME.search(sentence)):
                continue
            key = sentence.lower().rstrip(".!")
            if key not in seen:
                seen.add(key)
                found.append(sentence)
            if len(found) == MAX_RULE_FACTS:
                return found
    return found


def rule_summary(turns: list[ConversationTurn], facts: Sequence[str] = ()) -> str:
    """An extractive summary of `turns` (a summary turn among them is folded in), at most SUMMARY_MAX_CHARS:
    a header, the earlier summary's lines, one line per turn (its first sentence), then the facts saved from
    them; beyond the bound the oldest lines go first, so the facts go last."""
    lines: list[str] = []
    count = 0
    for turn in turns:
        if turn.role == "summary":
            lines += [line for line in turn.content.splitlines() if line.strip() and not _HEADER.match(line)]
            continue
        count += 1
        first = _SENTENCES.split(" ".join(turn.content.split()), maxsplit=1)[0]
        cut = first if len(first) <= LINE_CHARS else first[: LINE_CHARS - 1].rstrip() + "…"
        lines.append(f"- {turn.role}: {cut}")
    lines += [f"- fact: {fact}" for fact in facts]
    last = turns[-1].at
    header = (
        f"Summary of the conversation before {last:%Y-%m-%d %H:%M} UTC ({count} turns compacted now; what the user "
        "said is in the episode log, found by search_memory):"
    )
    budget = SUMMARY_MAX_CHARS - len(header) - 1
    kept: list[str] = []
    for line in reversed(lines):
        line = line if len(line) <= budget else line[: budget - 1] + "…"
        if len(line) + 1 > budget:
            break
        kept.append(line)
        budget -= len(line) + 1
    return "\n".join([header, *reversed(kept)])


def transcript(turns: list[ConversationTurn]) -> str:
    """Numbered turns for a model or an agent, each cut to TASK_TURN_CHARS."""
    rows = []
    for number, turn in enumerate(turns, 1):
        text = turn.content if len(turn.content) <= TASK_TURN_CHARS else turn.content[:TASK_TURN_CHARS] + "…"
        label = "earlier summary" if turn.role == "summary" else turn.role
        rows.append(f"[{number}] {label}: {text}")
    return "\n".join(rows)


class Compactor:
    def __init__(
        self,
        conversation: ConversationMemory,
        memory: MemoryService,
        episodes: Episodes,
        settings: Settings,
        llm: Callable[[Settings], ChatLLM] = ChatLLM,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        """`conversation` must be made with compacted=True (else a full window drops turns before this sees them)."""
        self.conversation = conversation
        self.memory = memory
        self.episodes = episodes
        self.settings = settings
        self._llm = llm
        self._clock = clock
        self._busy: set[str] = set()  # sessions being compacted: one compaction at a time per session
        # User turns already logged by a compaction that failed later: its retry does not log them again.
        self._logged: dict[str, set[tuple[datetime, str]]] = {}
        self._lock = threading.Lock()
        # A gated sub-agent (proposals/service.py): its old turns are not logged as episodes and the facts found
        # in them are filed as proposals (fact, session id) instead of saved.
        self.propose_fact: Callable[[str, str], object] | None = None

    # ------------------------------------------------------------------ when
    @property
    def keep_last(self) -> int:
        """KEEP_LAST, or fewer for a window too small to hold a summary and 4 turns and still have room."""
        return max(0, min(KEEP_LAST, self.settings.conversation_window - 2))

    def driver(self, sampled: bool = False) -> CompactionDriver:
        """Who extracts facts now: the setting, with `auto` resolved (`sampled`: the client's model answered)."""
        choice = self.settings.encode_driver
        if choice != "auto":
            return choice
        if self.settings.llm_endpoint and self.settings.llm_model:
            return "llm"
        return "sampling" if sampled else "rules"

    def will_compact(self, session_id: str, tokens_used: int, token_limit: int) -> bool:
        """Whether recording one more turn now compacts the session (for asking the client's model beforehand;
        reads and changes nothing). Invalid arguments: False (the tool reports them)."""
        try:
            _, advice = advice_for(tokens_used, token_limit)
            turns = self.conversation.window(session_id)
        except InvalidInputError:
            return False
        pending = len(turns) + 1 - self.keep_last - (1 if turns and turns[0].role == "summary" else 0)
        full = len(turns) + 1 >= self.settings.conversation_window
        return (full and pending > 0) or (advice == "compact" and pending >= MIN_TURNS_TO_COMPACT)

    def sample_prompt(self, session_id: str) -> tuple[str, str] | None:
        """The (system, user) prompt for the turns that recording one more turn would compact, or None."""
        turns = self.conversation.window(session_id)
        pending = turns[: max(0, len(turns) + 1 - self.keep_last)]
        if not [turn for turn in pending if turn.role != "summary"]:
            return None
        return SYSTEM_PROMPT, transcript(pending)

    # ------------------------------------------------------------------ record
    def record(
        self,
        session_id: str,
        role: str,
        content: str,
        tokens_used: int = 0,
        token_limit: int = 0,
        sampled: str | None = None,
    ) -> tuple[ConversationTurn, Compaction | None]:
        """Record a turn (role "summary": an agent's summary, which compacts the window), then flush advice or
        compaction as the usage and the window call for. `sampled`: the client's model's answer, if asked."""
        session_id = check_session_id(session_id)
        usage, advice = advice_for(tokens_used, token_limit)
        if role == "summary":
            return self.accept_summary(session_id, content, usage)
        turn = self.conversation.record(session_id, role, content)
        size = self.conversation.held(session_id)
        full = size >= self.settings.conversation_window
        if advice == "compact" and not full and self._since_summary(session_id) < MIN_TURNS_TO_COMPACT:
            note = (
                "Your context is over 70% full, but this session was compacted moments ago: replace your older "
                "context with the last compaction.summary (get_conversation shows it)."
            )
            return turn, Compaction(usage=usage, advice="compact", note=note)
        if advice == "compact" or full:
            driver = self.driver(sampled is not None)
            if driver == "agent" and advice != "compact":
                # A full window: the agent is told once, when it fills; rules step in if it never answers.
                if size >= self.settings.conversation_window * AGENT_GRACE:
                    driver = "rules"
                elif size != self.settings.conversation_window:
                    return turn, None
            try:
                return turn, self.compact(session_id, driver, sampled, usage)
            except CompactionError as exc:
                note = f"turn recorded; {exc}"
                return turn, Compaction(usage=usage, advice="compact", driver=driver, note=note)
        if advice == "flush":
            note = (
                "Your context is over 60% full: save what matters now - durable facts with save_memory (one per "
                "call), the current task's state with working_memory save. At 70% this session is compacted."
            )
            return turn, Compaction(usage=usage, advice="flush", note=note)
        return turn, None

    def _since_summary(self, session_id: str) -> int:
        """Turns beyond the last `keep_last` that a compaction now would take (the summary not counted)."""
        turns = self.conversation.window(session_id)
        return len(turns) - self.keep_last - (1 if turns and turns[0].role == "summary" else 0)

    # ------------------------------------------------------------------ compact
    def compact(
        self, session_id: str, driver: CompactionDriver, sampled: str | None = None, usage: float | None = None
    ) -> Compaction:
        """Compact the session's window now: all but the last `keep_last` turns are written (facts, episodes) and
        replaced by a summary turn. The agent driver gets the task instead. Raises CompactionError, the window
        untouched, when a write fails."""
        session_id = check_session_id(session_id)
        with self._session(session_id) as mine:
            if not mine:
                return Compaction(usage=usage, advice="compact", note="another call is compacting this session")
            turns = self.conversation.window(session_id)
            old = turns[: max(0, len(turns) - self.keep_last)]
            if not [turn for turn in old if turn.role != "summary"]:
                note = f"nothing to compact: the window holds a summary and at most {self.keep_last} turns"
                return Compaction(usage=usage, advice="compact", note=note)
            if driver == "agent":
                task = AGENT_TASK.format(limit=SUMMARY_MAX_CHARS, keep=self.keep_last, turns=transcript(old))
                note = "Do compaction.task: save the facts, then record_turn role='summary' with your summary."
                return Compaction(usage=usage, advice="compact", driver="agent", task=task, note=note)
            answer, used, problem = self._answer(old, driver, sampled)
            facts = answer.facts if answer else rule_facts(old)
            # The server picked these out of the conversation itself (seed 004 §12.3: auto-detected).
            with acting_as(bot_actor(AUTO_DETECT, self.settings.namespace)):
                saved, logged = self._write(session_id, old, facts)
            summary = answer.summary if answer else rule_summary(old, facts)
            self._trim(session_id, summary, old[-1])
        compacted = len([turn for turn in old if turn.role != "summary"])
        done = f"{compacted} turns compacted: {len(saved)} facts saved, {logged} user turns logged as episodes"
        note = f"{problem}; rules used. {done}." if problem else f"{done}; the window is the summary + the last turns."
        if usage is not None:
            note += " You may replace your own older context with compaction.summary."
        return Compaction(
            usage=usage,
            advice="compact",
            driver=used,
            compacted=compacted,
            saved=saved,
            logged=logged,
            summary=summary,
            note=note,
        )

    def accept_summary(
        self, session_id: str, content: str, usage: float | None = None
    ) -> tuple[ConversationTurn, Compaction]:
        """An agent's summary: the user turns before the last `keep_last` are logged as episodes (the facts are
        the agent's to save), then the window becomes this summary + those turns."""
        session_id = check_session_id(session_id)
        limit = self.settings.max_content_bytes
        check_text(content, "content", limit, "ROCKMEM_MAX_CONTENT_BYTES", "Shorten the summary.")
        if len(content) > SUMMARY_MAX_CHARS:
            raise InvalidInputError(
                f"a summary is at most {SUMMARY_MAX_CHARS} characters and this one has {len(content)}: shorten it"
            )
        if not content.strip():
            raise InvalidInputError("content is empty: give the summary of the earlier turns")
        with self._session(session_id) as mine:
            if not mine:
                raise InvalidInputError("another call is compacting this session: record the summary again")
            turns = self.conversation.window(session_id)
            if not turns:
                raise InvalidInputError(
                    f"conversation {session_id!r} has no turns to summarise: record the turns first (or check "
                    "session_id)"
                )
            old = turns[: max(0, len(turns) - self.keep_last)]
            _, logged = self._write(session_id, old, [])
            turn = self._trim(session_id, content, old[-1] if old else None)
        compacted = len([t for t in old if t.role != "summary"])
        note = f"summary stored; {compacted} turns compacted, {logged} user turns logged as episodes"
        return turn, Compaction(
            usage=usage,
            advice="compact",
            driver="agent",
            compacted=compacted,
            logged=logged,
            summary=content,
            note=note,
        )

    # ------------------------------------------------------------------ steps
    @contextlib.contextmanager
    def _session(self, session_id: str) -> Iterator[bool]:
        with self._lock:
            mine = session_id not in self._busy
            self._busy.add(session_id)
        try:
            yield mine
        finally:
            if mine:
                with self._lock:
                    self._busy.discard(session_id)

    def _answer(
        self, turns: list[ConversationTurn], driver: CompactionDriver, sampled: str | None
    ) -> tuple[CompactionAnswer | None, CompactionDriver, str]:
        """The model's answer (None: use rules), the driver that gave it, and why a model's answer was not used."""
        if driver == "llm":
            try:
                model = self._llm(self.settings)
            except LLMError as exc:
                return None, "rules", f"the server's model is unavailable ({exc})"
            try:
                return model.complete_json(SYSTEM_PROMPT, transcript(turns), CompactionAnswer), "llm", ""
            except LLMError as exc:
                return None, "rules", f"the server's model gave no usable answer ({exc})"
            finally:
                model.close()
        if driver == "sampling" and sampled is not None:
            try:
                return CompactionAnswer.model_validate_json(unfenced(sampled)), "sampling", ""
            except ValidationError as exc:
                return None, "rules", f"your client's model answered no valid JSON ({exc.error_count()} problems)"
        return None, "rules", ""

    def _write(self, session_id: str, turns: list[ConversationTurn], facts: list[str]) -> tuple[list[str], int]:
        """Every user turn of `turns` to the episode log, then `facts` to memory (each logged too). Returns the
        memory ids and how many turns were logged. Any failure: CompactionError (what was written stays written; a
        retry may log some of it twice, which the dream merges)."""
        saved: list[str] = []
        logged = 0
        try:
            with reporting_io_errors(f"compacting conversation {session_id}"):
                done = self._logged.setdefault(session_id, set())
                for turn in turns if self.propose_fact is None else ():
                    if turn.role == "user" and turn.content.strip() and (turn.at, turn.content) not in done:
                        self.episodes.record(turn.content, "event", "medium", ["conversation"], at=turn.at)
                        done.add((turn.at, turn.content))
                        logged += 1
                for fact in facts:
                    fact = " ".join(fact.split())
                    try:
                        if not fact or self._known(fact):
                            continue
                        if self.propose_fact is not None:
                            self.propose_fact(fact, session_id)
                            continue
                        # The conversation-memory contract: its session, and the day of its last compacted turn.
                        when = turns[-1].at.date().isoformat() if turns else None
                        metadata = {"source": "compaction"} | conversation_metadata(session_id, date=when)
                        entry = self.memory.save(fact, None, FACT_TAGS, metadata, 0.5)
                    except InvalidInputError as exc:  # one fact a store refuses costs the others nothing
                        log.warning("compaction of %s: a fact was not saved (%s)", session_id, exc)
                        continue
                    saved.append(entry.id)
                    self.episodes.log_save(entry)
        except RockmemError as exc:
            raise CompactionError(
                f"compaction failed while saving the old turns ({exc}); the window was not trimmed, so nothing "
                "is lost: it is tried again on the next turn"
            ) from exc
        return saved, logged

    def _known(self, fact: str) -> bool:
        """Whether a memory already says `fact` (one contains the other, at least half of it, case and punctuation
        aside): a fact saved when it was said ("remember that …") is not saved again when its turn is compacted,
        and one the user had forgotten (an archived memory) is not brought back."""
        key = _plain(fact)
        for hit in self.memory.search(fact, limit=5, mode="bm25", include_archived=True).results:
            known = _plain(hit.entry.content)
            if known and ((known in key and 2 * len(known) >= len(key)) or key in known):
                return True
        return False

    def _trim(self, session_id: str, summary: str, through: ConversationTurn | None) -> ConversationTurn:
        turn = ConversationTurn(session_id=session_id, role="summary", content=summary, at=self._clock())
        if not self.conversation.replace_window(session_id, turn, through):
            log.warning("conversation %s changed while it was compacted; its window was left as it is", session_id)
        else:
            self._logged.pop(session_id, None)  # those turns are gone from the window: no retry will see them
        return turn
