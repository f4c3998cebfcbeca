"""Data shapes shared across rooms, plus the rules that validate them: a memory entry and its fields, ids,
categories, tags, namespaces and names, search results, conversation turns, routing, episodes, feedback.
A shape one room owns lives in that room's `shapes` module."""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any, Literal, get_args

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from rockmem_mcp.errors import InvalidInputError
from rockmem_mcp.text import clean, fold

_CATEGORY_SEGMENT = re.compile(r"[A-Za-z0-9_-]+")
_ENTRY_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")  # C0, DEL and C1
MAX_CATEGORY_CHARS = 200
MAX_TAG_CHARS = 100


def utc_now() -> datetime:
    return datetime.now(UTC)


def as_utc(value: datetime) -> datetime:
    """Naive datetimes are taken as UTC; aware ones are converted to it."""
    try:
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    except OverflowError:  # e.g. 0001-01-01T00:00+14:00 is before the first representable instant
        raise InvalidInputError(f"{value.isoformat()} is out of range once converted to UTC") from None


def new_entry_id() -> str:
    """12 hex characters, as RockBot uses."""
    return uuid.uuid4().hex[:12]


def check_text(value: object, what: str, limit: int, setting: str, advice: str) -> str:
    """`value` as text of at most `limit` UTF-8 bytes, or an error naming the setting and what to do."""
    if not isinstance(value, str):
        raise InvalidInputError(f"{what} must be text, got {type(value).__name__}")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError as exc:  # a lone surrogate: possible from a library caller, never over JSON
        raise InvalidInputError(
            f"{what} is not valid Unicode (a lone surrogate U+{ord(value[exc.start]):04X} at character {exc.start})"
        ) from None
    if size > limit:
        raise InvalidInputError(f"{what} is {size} bytes; the limit is {limit} ({setting}). {advice}")
    return value


MAX_REASON_BYTES = 4_000  # why a memory was deleted (its archive_reason): a sentence or two


def check_reason(reason: object, what: str = "reason") -> str:
    return check_text(reason, what, MAX_REASON_BYTES, "a fixed cap", "Say why in a sentence or two.")


def check_metadata(metadata: Any, limit: int, owner: str = "") -> dict[str, str]:
    """Metadata: string keys (not blank) to string values, at most `limit` bytes as JSON."""
    what = f"metadata of {owner}" if owner else "metadata"
    if metadata is None:
        return {}
    if not isinstance(metadata, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()
    ):
        raise InvalidInputError(f'{what} must map strings to strings, e.g. {{"source": "user"}}')
    if any(not k.strip() for k in metadata):
        raise InvalidInputError(f"{what}: keys must not be empty")
    size = len(json.dumps(metadata).encode())
    if size > limit:
        raise InvalidInputError(f"{what} is {size} bytes as JSON; the limit is {limit} (ROCKMEM_MAX_METADATA_BYTES)")
    return dict(metadata)


ROOTS = ("session", "patrol", "subagent", "shared")
OWNED_ROOTS = ROOTS[:3]  # a caller's own namespace lives under one of these
_KEY_SEGMENT = re.compile(r"[A-Za-z0-9_.:-]+")
MAX_KEY_CHARS = 300
KEY_HINT = "keys are '/'-separated segments of letters, digits, '.', ':', '-' or '_', e.g. 'build-log' or 'shared/plan'"


def working_key_segments(key: Any, what: str = "key") -> list[str]:
    if not isinstance(key, str) or not key.strip():
        raise InvalidInputError(f"{what} must be non-empty text; {KEY_HINT}")
    value = key.strip().rstrip("/")
    if len(value) > MAX_KEY_CHARS:
        raise InvalidInputError(f"{what} is longer than {MAX_KEY_CHARS} characters")
    parts = value.split("/")
    for part in parts:
        if part in ("", ".", "..") or not _KEY_SEGMENT.fullmatch(part):
            raise InvalidInputError(f"invalid {what} {key!r}: bad segment {part!r}; {KEY_HINT}")
    return parts


def entry_key_segments(key: Any) -> list[str]:
    """A full working-memory key: a namespace root, the namespace's name, then the entry's name, e.g.
    'shared/plan/steps'. A key naming only a namespace ('shared/plan', 'session/ab12') is refused: the first
    two segments are the namespace, so such an entry could not be listed, capped or addressed as one."""
    parts = working_key_segments(key)
    if parts[0] not in ROOTS:
        raise InvalidInputError(f"working-memory key {key!r} has no namespace root ({', '.join(ROOTS)})")
    if len(parts) < 3:
        namespace = "/".join(parts) if len(parts) == 2 else f"{parts[0]}/<name>"
        raise InvalidInputError(
            f"{key!r} names a namespace, not an entry: add the entry's name, e.g. '{namespace}/notes'"
        )
    return parts


def parse_namespace(namespace: str) -> str:
    """Validate a caller namespace such as 'session/3fa2' or 'subagent/t1b2c3'."""
    parts = working_key_segments(namespace, "namespace")
    if len(parts) != 2 or parts[0] not in OWNED_ROOTS:
        raise InvalidInputError(f"invalid namespace {namespace!r}: use session/<id>, patrol/<task> or subagent/<task>")
    return "/".join(parts)


def normalize_category(category: str | None) -> str | None:
    """Validate a slash-separated category path; '' and None mean uncategorized.

    Each segment is letters, digits, '-' or '_'. This rules out '..', absolute paths, backslashes and
    empty segments, so a category can never name a folder outside the memory directory.
    """
    if category is None:
        return None
    if not isinstance(category, str):
        raise InvalidInputError(f"invalid category {category!r}: categories are text like 'user-preferences/timezone'")
    value = category.strip()
    if value.endswith("/") and len(value) > 1:
        value = value[:-1]
    if value == "":
        return None
    hint = "use segments of letters, digits, '-' or '_' separated by '/', e.g. 'user-preferences/timezone'"
    if value.startswith("/"):
        raise InvalidInputError(f"invalid category {category!r}: absolute paths are not allowed; {hint}")
    if len(value) > MAX_CATEGORY_CHARS:
        raise InvalidInputError(f"invalid category: longer than {MAX_CATEGORY_CHARS} characters; {hint}")
    for segment in value.split("/"):
        if segment == "":
            raise InvalidInputError(f"invalid category {category!r}: empty path segment; {hint}")
        if segment in (".", "..") or not _CATEGORY_SEGMENT.fullmatch(segment):
            raise InvalidInputError(f"invalid category {category!r}: bad segment {segment!r}; {hint}")
    return value


def category_matches(category: str | None, prefix: str) -> bool:
    """Whole-segment prefix match: 'project' matches 'project' and 'project/x', not 'projects'."""
    return category is not None and (category == prefix or category.startswith(prefix + "/"))


def normalize_tags(tags: list[str] | None, max_tags: int) -> list[str]:
    """Strip, drop invisible characters, empties and duplicates (compared by `tag_key`, first spelling kept)."""
    if tags is not None and not isinstance(tags, list | tuple):
        raise InvalidInputError(f'tags must be a list of strings, e.g. ["email", "work"], got {tags!r:.60}')
    result: list[str] = []
    seen: set[str] = set()
    for raw in tags or []:
        if not isinstance(raw, str):
            raise InvalidInputError(f"invalid tag {raw!r}: tags must be strings")
        tag = clean(raw).strip()
        if not tag or tag_key(tag) in seen:
            continue
        if len(tag) > MAX_TAG_CHARS or _CONTROL.search(tag):
            raise InvalidInputError(
                f"invalid tag {tag[:40]!r}: tags are at most {MAX_TAG_CHARS} characters without control characters"
            )
        seen.add(tag_key(tag))
        result.append(tag)
    if len(result) > max_tags:
        raise InvalidInputError(f"too many tags ({len(result)}); at most {max_tags} are allowed")
    return result


def tag_key(tag: str) -> str:
    """How tags are compared (filters, duplicates): NFKC and case folded, invisible characters ignored."""
    return fold(tag)


def validate_entry_id(entry_id: str) -> str:
    if not isinstance(entry_id, str) or not _ENTRY_ID.fullmatch(entry_id):
        raise InvalidInputError(
            f"invalid memory id {entry_id!r}: ids are 1-64 letters, digits, '-' or '_' "
            "(as returned by save_memory or search_memory)"
        )
    return entry_id


UtcDatetime = Annotated[datetime, AfterValidator(as_utc)]

MAX_USE_COUNT = 2**31 - 1  # indexes keep use counts as int32; a larger count (a hand-edited file) is clamped


def _clamp_uses(count: int) -> int:
    return min(count, MAX_USE_COUNT)


UseCount = Annotated[int, AfterValidator(_clamp_uses)]


@dataclass(frozen=True)
class EntryLocation:
    """Where a memory lies: its id and category (a file store's folder; a database row's column)."""

    entry_id: str
    category: str | None


class MemoryEntry(BaseModel):
    """One long-term memory; stored as memory/{category}/{id}.json."""

    model_config = ConfigDict(extra="ignore")

    id: str = Field(description="12-hex-character id (imports may bring their own)")
    content: str = Field(description="The fact, preference or note itself")
    category: str | None = Field(None, description="Slash path, e.g. 'user-preferences/timezone'")
    tags: list[str] = Field(default_factory=list)
    created_at: UtcDatetime
    updated_at: UtcDatetime | None = None
    metadata: dict[str, str] = Field(default_factory=dict, description="Free key/value strings")
    importance: float = Field(
        0.7, ge=0.0, le=1.0, description="Salience base: 1 asked by the user, 0.7 agent, 0.5 derived"
    )
    last_seen_at: UtcDatetime | None = Field(None, description="Last use (save, recall, read, search hit)")
    reinforcement_count: UseCount = Field(1, ge=1, description="Times used, the save included")
    pinned: bool = Field(False, description="In the vault: never decays, never changed by a dream")
    superseded_by: str | None = None
    archived_at: UtcDatetime | None = None
    archive_reason: str | None = None

    @property
    def archived(self) -> bool:
        return self.archived_at is not None

    def document_text(self) -> str:
        """What search indexes (words and embedding): content, tags, and the category with '/' and '-' as spaces."""
        parts = [self.content, *self.tags]
        if self.category:
            parts.append(self.category.replace("/", " ").replace("-", " "))
        return " ".join(parts)


class ScoredEntry(BaseModel):
    store: Literal["memories"] = "memories"
    entry: MemoryEntry
    score: float | None = Field(description="Relevance (higher is better; scale depends on mode); null when listing")
    salience: float | None = Field(None, description="0 to 1: how alive the memory is (use, age, pin)")
    tier: str | None = Field(None, description="active, fading, dormant or archive_candidate")


class WorkspaceHit(BaseModel):
    """A section of a workspace file that matched a search."""

    store: Literal["workspace"] = "workspace"
    file: str = Field(description="e.g. 'SOUL.md'")
    heading: str = Field(description="The section's markdown heading ('' before the first one)")
    line: int = Field(description="The section's first line number in the file (1-based)")
    text: str = Field(description="The section (long ones come in parts of at most ~1,500 characters)")
    score: float = Field(description="BM25 relevance among the workspace sections")


class SearchResults(BaseModel):
    results: list[ScoredEntry]
    total_matches: int = Field(description="How many entries matched before the limit was applied")
    mode: str = Field(
        "bm25", description="Ranking used: hybrid, bm25, vector or rockbot ('bm25' when embeddings are unavailable)"
    )
    unembedded: int = Field(0, description="Entries still waiting for an embedding (found by keywords only until then)")
    workspace: list[WorkspaceHit] = Field(
        default_factory=list,
        description="Sections of the workspace files (AGENTS.md, SOUL.md, USER.md, HEARTBEAT.md, MEMORY.md) that "
        "match the query, best first by BM25; only for a query without filters",
    )
    episodes: list[EpisodeHit] = Field(
        default_factory=list,
        description="Episodes (what happened, when) that match, best first; without a query, the period's in "
        "order. Episodes that log a memory in results are left out",
    )
    procedures: list[ProcedureHit] = Field(
        default_factory=list, description="Procedures (learned workflows) that match, best first"
    )
    route: str | None = Field(None, description="A time phrase in the query narrows episodes to its period")


class DeleteResult(BaseModel):
    id: str
    permanent: bool
    entry: MemoryEntry | None = Field(description="The archived entry; null when permanently deleted")


class CategoryCount(BaseModel):
    category: str
    entries: int = Field(description="Entries filed directly in this category")
    total: int = Field(description="Entries in this category and all its subcategories")


class CategoryTree(BaseModel):
    categories: list[CategoryCount] = Field(description="Every category path and its ancestors, sorted")
    uncategorized: int
    total: int = Field(description="All active (not archived) entries")


# ---------------------------------------------------------------------- conversation memory
# "summary": a compaction's summary of the turns before it (consolidation/compaction.py), first in the window.
Role = Literal["user", "assistant", "system", "tool", "summary"]


class ConversationTurn(BaseModel):
    session_id: str
    role: Role
    content: str
    at: datetime


CompactionDriver = Literal["llm", "sampling", "agent", "rules"]


class Compaction(BaseModel):
    """What record_turn did or advises about the conversation window (seed 003 layer 5, write-then-compact)."""

    usage: float | None = Field(None, description="tokens_used / token_limit, when given")
    advice: Literal["flush", "compact"] = Field(
        description="flush: save what matters now (>= 60%); compact: the window is compacted (>= 70%, or full)"
    )
    driver: CompactionDriver | None = Field(
        None, description="Who extracted the facts: the server's model, your client's model, you (agent), rules"
    )
    compacted: int = Field(0, description="Turns folded into the summary (their facts saved first)")
    saved: list[str] = Field(default_factory=list, description="Ids of the memories saved from those turns")
    logged: int = Field(0, description="User turns logged word for word in the episode log")
    summary: str | None = Field(None, description="The summary turn now first in the window")
    task: str | None = Field(None, description="agent driver: the turns to compact and what to do with them")
    note: str = Field(description="What happened and what to do next")


class TurnRecorded(ConversationTurn):
    trigger: TriggerFound | None = Field(None, description="A trigger phrase in a user's turn, and what it led to")
    compaction: Compaction | None = Field(None, description="Context advice or compaction; null: nothing to say")


class Conversation(BaseModel):
    session_id: str
    turns: list[ConversationTurn] = Field(description="Oldest first")
    kept: int = Field(
        description="Turns held for this session (50 by default; older ones are compacted into a summary turn)"
    )


RoutedStore = Literal["core", "episodic", "semantic", "procedural", "vault"]


class RoutedEntity(BaseModel):
    name: str = Field(description="A person, project, tool, place … the text names")
    type: str = Field("concept", description="person, project, topic, tool, event, document, place or concept")


class RoutedRelation(BaseModel):
    subject: str = Field(alias="from", description="An entity's name")
    predicate: str = Field(alias="relation", description="A short verb phrase, e.g. works_on, prefers")
    object: str = Field(alias="to", description="An entity's name")

    model_config = {"populate_by_name": True}


class RoutedMemory(BaseModel):
    """The seed's routing answer (004 §8.2), whoever gives it: a model, the client's model, the agent, or rules."""

    store: RoutedStore = Field(
        description="vault (keep for good), procedural (a way of doing something), core (who the user is or what "
        "is happening now), episodic (an event with a time), semantic (a fact)"
    )
    entities: list[RoutedEntity] = Field(
        default_factory=list, max_length=50, description="What the text names, for the graph"
    )
    relations: list[RoutedRelation] = Field(
        default_factory=list, max_length=50, description="Facts between those entities"
    )
    tags: list[str] = Field(default_factory=list, max_length=20, description="2 to 5 topical tags")
    confidence: Literal["high", "medium", "low"] = Field("medium", description="high when the user asked")
    core_update: bool = Field(False, description="True when core memory (always loaded) should gain a line")
    summary: str = Field(max_length=500, description="One line: what to remember")


class RoutingTask(BaseModel):
    """A routing step for the calling agent (ROCKMEM_ENCODE_DRIVER=agent): decide, then answer as it says."""

    text: str = Field(description="What the user asked to remember")
    instructions: str
    answer_schema: dict[str, Any] = Field(description="JSON schema of the `route` to pass back")


class Remembered(BaseModel):
    """What a remember did: the store chosen, by whom, and every record written (all in one step, or none)."""

    store: RoutedStore | None = Field(None, description="Where it went; null while the agent has to route it")
    driver: Literal["llm", "sampling", "agent", "rules"] = Field(
        description="Who routed it: the server's model, the client's model, the calling agent, or rules"
    )
    route: RoutedMemory | None = None
    memory_id: str | None = Field(None, description="The memory saved (semantic, vault)")
    episode_id: str | None = Field(None, description="Its line in the day's episode log")
    procedure: str | None = Field(None, description="The procedure saved (procedural)")
    core_line: str | None = Field(None, description="The line core memory gained, as 'Block: text'")
    entities: list[str] = Field(default_factory=list, description="Graph entities named (created or known)")
    triples: list[str] = Field(default_factory=list, description="Graph triple ids added")
    note: str = Field("", description="Why a model's answer was not used, if it was not")
    task: RoutingTask | None = Field(None, description="agent driver: route it, then call remember with `route`")
    proposal: str | None = Field(None, description="Gated sub-agent: filed as this proposal for the main agent")


ForgetStore = Literal["core", "memory", "entity", "procedure", "episode"]


class ForgetCandidate(BaseModel):
    """Something a forget request matches, for the user to confirm before anything changes."""

    id: str = Field(description="Pass it to forget: memory:ID, episode:ID, procedure:SLUG, entity:ID, core:BLOCK:HASH")
    store: ForgetStore
    text: str = Field(description="What it says (at most 200 characters)")
    score: float = Field(description="0 to 1: share of the query's words it holds, and its rank in its store")


class TriggerFound(BaseModel):
    """A trigger phrase in a user's message (seed 004 §8.1) and what it led to."""

    intent: Literal["remember", "forget", "reflect", "search"]
    phrase: str = Field(description="The phrase as it stands in the message")
    span: str = Field(description="What it applies to ('' when it names nothing, as 'scratch that')")
    action: str = Field(description="What was done, or what to call (ROCKMEM_TRIGGER_MODE)")
    memory_id: str | None = Field(None, description="The memory a remember saved (act mode)")
    remembered: Remembered | None = Field(None, description="Act mode: where a remember went, or its routing task")
    route: RoutedMemory | None = Field(None, description="Suggest mode: the rules' route, to pass to remember")
    candidates: list[str] = Field(
        default_factory=list,
        description="Ids of what the span matches in every store, as forget takes them: to confirm before "
        "forgetting, or found",
    )
    matches: list[ForgetCandidate] = Field(default_factory=list, description="The candidates with their text")


_WORD = re.compile(r"\w+")
_SPACES = re.compile(r"\s+")


MAX_NAME_CHARS = 200


def normalize_name(name: Any, what: str = "name") -> str:
    """An entity name or alias: NFC, zero-width and bidi characters removed, trimmed, inner whitespace
    collapsed, no control characters, 1-200 characters."""
    if not isinstance(name, str):
        raise InvalidInputError(f"{what} must be text, got {type(name).__name__}")
    cleaned = _SPACES.sub(" ", clean(name)).strip()
    if not cleaned or len(cleaned) > MAX_NAME_CHARS or _CONTROL.search(cleaned):
        raise InvalidInputError(
            f"invalid {what} {name[:60]!r}: use 1-{MAX_NAME_CHARS} characters of visible text, no control characters "
            "(zero-width and bidi characters are removed)"
        )
    return cleaned


def name_key(name: str) -> str:
    """How names are compared: NFKC and case folded (`text.fold`), invisible characters ignored, whitespace
    collapsed."""
    return _SPACES.sub(" ", fold(name)).strip()


def mention_key(text: str) -> str:
    """A name as the words recall looks for in a message: 'Node.js' -> 'node js'."""
    return " ".join(message_words(text))


def message_words(text: str) -> list[str]:
    """The words of a message, folded as names are (so a name typed in another Unicode form is found)."""
    return _WORD.findall(fold(text))


# ---------------------------------------------------------------------------------------------- feedback and dream
FeedbackType = Literal["Correction", "ToolFailure", "SessionSummary", "UserThumbsUp", "UserThumbsDown"]


class Feedback(BaseModel):
    """A signal about how the agent did; the dream pass learns from the last week of them."""

    id: str
    type: FeedbackType
    content: str
    session_id: str
    metadata: dict[str, str] = Field(default_factory=dict)
    at: UtcDatetime


EpisodeType = Literal["decision", "fact", "preference", "task", "event", "emotion", "correction"]
Confidence = Literal["high", "medium", "low"]
EpisodeSource = Literal["conversation", "reflection", "user-explicit"]
EPISODE_TYPES: tuple[str, ...] = get_args(EpisodeType)
CONFIDENCES: tuple[str, ...] = get_args(Confidence)
EPISODE_SOURCES: tuple[str, ...] = get_args(EpisodeSource)


class Episode(BaseModel):
    """One event of the episodic store (seed 004 §5): appended to its day's log, never edited."""

    id: str
    at: UtcDatetime = Field(description="When it happened (UTC)")
    type: EpisodeType = "event"
    confidence: Confidence = "medium"
    tags: list[str] = Field(default_factory=list)
    source: EpisodeSource = "conversation"
    content: str
    memory_id: str | None = Field(None, description="The memory this episode logged, when save_memory wrote it")


class EpisodeHit(BaseModel):
    """An episode a search found, with the day's resource it is in."""

    store: Literal["episodes"] = "episodes"
    episode: Episode
    score: float | None = Field(description="Relevance (BM25 × salience's factor); null when listing by time")
    salience: float | None = Field(None, description="0 to 1: how alive the episode is (confidence, age, use)")
    resource: str = Field(description="The day's episode log, e.g. rockmem://episodes/2026-11-25")


class EpisodeSearch(BaseModel):
    hits: list[EpisodeHit]
    total_matches: int


class ProcedureInfo(BaseModel):
    """A procedure as rockmem://procedures lists it and the procedure tools answer."""

    name: str
    uri: str = Field(description="Its readable view, e.g. rockmem://procedures/how-to-deploy")
    trigger: list[str]
    version: int
    updated_at: datetime
    archived: bool = False
    earlier_versions: int = Field(0, description="Versions kept in its history")
    done: str | None = Field(None, description="What the call did: created, updated, archived, restored, deleted")


class ProcedureHit(BaseModel):
    """A procedure a search found."""

    store: Literal["procedures"] = "procedures"
    procedure: ProcedureInfo
    steps: list[str]
    score: float = Field(description="BM25 relevance × salience's ranking factor")


SearchResults.model_rebuild()
TurnRecorded.model_rebuild()


# ---------------------------------------------------------------------- forgetting (issue 21, seed 004 §8.3)
FORGET_STORES: tuple[str, ...] = get_args(ForgetStore)  # also the tie order of candidates with equal scores


Confidence = Literal["high", "medium", "low"]
