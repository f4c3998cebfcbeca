"""Data shapes shared by the stores, services and the MCP surface, plus the rules that validate them."""

from __future__ import annotations

import json
import re
import unicodedata
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any, Literal, get_args

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

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


class WorkspaceFileInfo(BaseModel):
    """A workspace file in the data home: where to read it, its size and the version to write it with."""

    name: str = Field(description="AGENTS.md, SOUL.md, USER.md or HEARTBEAT.md")
    uri: str = Field(description="The resource holding its text, e.g. rockmem://workspace/SOUL.md")
    bytes: int
    tokens: int = Field(description="Its estimated token count (rockmem_mcp.tokens)")
    version: str = Field(description="Short sha256 of its bytes: pass it to write_workspace_file")


class WorkspaceListing(BaseModel):
    files: list[WorkspaceFileInfo] = Field(description="The workspace files in the home, in session-start order")
    missing: list[str] = Field(description="Workspace file names not in the home (or not readable: see the log)")


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


# ---------------------------------------------------------------------- working memory
class WorkingEntry(BaseModel):
    """A working-memory value: scratch data under a path key, gone at `expires_at`."""

    key: str = Field(description="Full path, e.g. 'session/3fa2/build-log'; its first two segments are the namespace")
    data: str
    category: str | None = None
    tags: list[str] = Field(default_factory=list)
    created_at: datetime
    expires_at: datetime

    def document_text(self) -> str:
        """What search reads: the key's words, category, tags, and the data."""
        parts = [self.key.replace("/", " ").replace("-", " "), *self.tags, self.data]
        if self.category:
            parts.append(self.category.replace("/", " ").replace("-", " "))
        return " ".join(parts)


class WorkingInfo(BaseModel):
    """An entry without its value (inventories never carry values)."""

    key: str
    category: str | None
    tags: list[str]
    created_at: datetime
    expires_at: datetime
    expires_in: str = Field(description="Time left, e.g. '4m32s'")
    size: int = Field(description="Bytes of data (UTF-8)")


class WorkingSaved(BaseModel):
    entry: WorkingInfo
    evicted: str | None = Field(None, description="Key removed to make room (the namespace was full), if any")


class WorkingSearchHit(BaseModel):
    info: WorkingInfo
    preview: str = Field(description="The first 200 characters of the data")
    score: float | None = Field(description="Relevance (BM25, hybrid with embeddings); null when listing")


class WorkingListing(BaseModel):
    namespace: str = Field(description="The caller's own namespace")
    entries: list[WorkingInfo] = Field(description="Live entries, soonest to expire first (values not included)")


class WorkingSearchResults(BaseModel):
    namespace: str = Field(description="The caller's own namespace")
    results: list[WorkingSearchHit]


class WorkingDeleted(BaseModel):
    key: str
    deleted: bool = Field(description="False when there was no such live entry")


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


# ---------------------------------------------------------------------- recall
class RecalledMemory(BaseModel):
    id: str
    category: str | None
    content: str
    score: float | None = Field(description="Relevance; null for first-turn fallback entries")


class RecalledEpisode(BaseModel):
    id: str
    at: datetime
    type: str
    memory_id: str | None = Field(None, description="The memory it logs (save_memory's episodes)")
    content: str
    resource: str = Field(description="The day's episode log")
    score: float | None = Field(description="Relevance; null when the period's episodes are listed in order")


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


class RecallBlock(BaseModel):
    text: str = Field(description="The context block to put before the model, delimited as data")
    session_id: str
    route: str = Field(
        "general",
        description="How the message was answered (seed 004 §11.1): when (episodes by time and keywords), how "
        "(procedures), about (an entity and its graph), latest (recent episodes, active context) or general",
    )
    trigger: TriggerFound | None = Field(None, description="A remember/forget/reflect/search phrase in the message")
    period: str | None = Field(
        None, description="The period a time phrase named (or latest's 14 days): its episodes lead"
    )
    session_start: list[str] = Field(
        default_factory=list,
        description="A session's first recall only: core memory, learnings and workspace files, as lines",
    )
    memories: list[RecalledMemory] = Field(description="Long-term memories injected this turn")
    already_injected: int = Field(description="Matches left out because this session already saw them")
    first_turn_fallback: bool = Field(
        description="True when nothing matched on the first turn and recent memories were used"
    )
    episodes: list[RecalledEpisode] = Field(default_factory=list, description="Episodes injected this turn")
    procedures: list[str] = Field(default_factory=list, description="Procedures offered: their trigger matched")
    active_context: list[str] = Field(
        default_factory=list, description="The latest route: core memory's Active Context lines"
    )
    entities: list[str] = Field(default_factory=list, description="Knowledge-graph entities the message names")
    graph: list[Fact] = Field(default_factory=list, description="Triples within 2 hops of those entities (<= 15)")
    working: list[WorkingInfo] = Field(description="The caller's working-memory inventory (no values)")
    patrol_findings: list[WorkingInfo] = Field(
        default_factory=list, description="Patrol entries, newest first (user sessions only; no values)"
    )
    subagent_outlines: list[WorkingSearchHit] = Field(
        default_factory=list, description="Sub-agent entries whose key ends in '-index' (user sessions only)"
    )


class RecallReset(BaseModel):
    session_id: str
    forgotten: int = Field(description="How many injected ids were cleared")


# ---------------------------------------------------------------------------------------------- knowledge graph
ENTITY_TYPES = ("person", "project", "topic", "tool", "event", "document", "place", "concept")
MAX_NAME_CHARS = 200
MAX_ALIASES = 50
_ENTITY_TYPE = re.compile(r"[a-z][a-z0-9_-]{0,39}")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_NOT_WORD = re.compile(r"[\W_]+")  # letters and digits of any script are kept ('arbeitet_für', 'знает')
_WORD = re.compile(r"\w+")
_SPACES = re.compile(r"\s+")


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


def normalize_entity_type(value: Any) -> str:
    if value is None:
        return "concept"
    if not isinstance(value, str) or not _ENTITY_TYPE.fullmatch(cleaned := value.strip().lower().replace(" ", "_")):
        raise InvalidInputError(
            f"invalid entity type {str(value)[:60]!r}: a short lowercase word such as {', '.join(ENTITY_TYPES)}"
        )
    return cleaned


def normalize_predicate(value: Any) -> str:
    """snake_case: 'works on', 'worksOn' and 'Works-On' all become 'works_on'; letters of any script stay
    (NFC, so a decomposed 'é' is not split off as a separator; invisible characters removed)."""
    if not isinstance(value, str):
        raise InvalidInputError(f"predicate must be text, got {type(value).__name__}")
    snake = _NOT_WORD.sub("_", _CAMEL.sub("_", clean(value).strip()).lower()).strip("_")
    if not snake or len(snake) > 100:
        raise InvalidInputError(f"invalid predicate {value[:60]!r}: a short verb phrase such as 'works_on', 'prefers'")
    return snake


class StrictInput(BaseModel):
    """A tool's nested input: a field it does not have (`alias` for `aliases`) is refused, naming the fields,
    rather than dropped. Checked by a validator, not `extra="forbid"`, so the published schema stays as small
    (`additionalProperties` on every nested object cost ~70 tokens of the default tool list)."""

    @model_validator(mode="before")
    @classmethod
    def _known_fields(cls, data: Any) -> Any:
        if isinstance(data, dict):
            unknown = [key for key in data if key not in cls.model_fields]
            if unknown:
                listed = ", ".join(cls.model_fields)
                raise ValueError(f"no field {', '.join(repr(k)[:60] for k in unknown[:5])}; the fields are {listed}")
        return data


class EntityInput(StrictInput):
    """An entity to add, as tools take it."""

    name: str = Field(description="The entity's name, e.g. 'Alice' or 'RockBot'")
    type: str | None = Field(None, description=f"What it is: {', '.join(ENTITY_TYPES)} (default concept)")
    aliases: list[str] | None = Field(None, description="Other names it goes by (matched like the name)")
    metadata: dict[str, str] | None = Field(None, description="Free key/value strings")


class TripleInput(StrictInput):
    """A fact to add, as tools take it: subject --predicate--> object."""

    subject: str = Field(description="Entity name, alias or id (created if unknown)")
    predicate: str = Field(description="A verb phrase; stored in snake_case, e.g. 'works_on', 'prefers'")
    object: str = Field(description="Entity name, alias or id (created if unknown)")
    confidence: float | None = Field(None, description="How sure, 0 to 1 (default 1; clamped)")
    source: str | None = Field(None, description="Where the fact came from, e.g. a memory id or 'user'")


class Entity(BaseModel):
    """A node of the knowledge graph; stored as knowledge-graph/entities/{id}.json."""

    model_config = ConfigDict(extra="ignore")

    id: str
    name: str
    type: str = Field("concept", description=f"e.g. {', '.join(ENTITY_TYPES)}")
    aliases: list[str] = Field(default_factory=list)
    metadata: dict[str, str] = Field(default_factory=dict)
    created_at: UtcDatetime
    last_referenced_at: UtcDatetime | None = None  # before salience: when recall last named it
    # Uses, as for memories: the file holds them as of its last write, the access log (meta/access/) the rest.
    last_seen_at: UtcDatetime | None = Field(None, description="Last use (get, search, recall, a new link)")
    reinforcement_count: UseCount = Field(1, ge=1, description="Times used, the creation included")


class Triple(BaseModel):
    """An edge: subject --predicate--> object (entity ids); stored as knowledge-graph/triples/{id}.json."""

    model_config = ConfigDict(extra="ignore")

    id: str
    subject: str
    predicate: str
    object: str
    confidence: float = Field(1.0, ge=0.0, le=1.0)
    source: str | None = None
    created_at: UtcDatetime
    last_seen_at: UtcDatetime | None = Field(None, description="Last use (recall, traversal, added again)")
    reinforcement_count: UseCount = Field(1, ge=1, description="Times used, the creation included")


class Fact(BaseModel):
    """A triple with its entities' names, as tools and recall show it."""

    id: str
    subject: str = Field(description="Subject entity name")
    predicate: str
    object: str = Field(description="Object entity name")
    confidence: float
    source: str | None = None
    subject_id: str
    object_id: str
    created_at: datetime
    hop: int | None = Field(None, description="In a traversal: how many hops from the start")
    reinforcement_count: int = Field(1, description="Times used, the creation included")
    last_seen_at: datetime | None = Field(None, description="Last use")
    salience: float = Field(description="0..1: confidence x 0.7, faded since the last use, grown with uses")
    tier: str = Field(description="active, fading, dormant or archive_candidate")
    superseded_by: str | None = Field(
        None, description="Set when an end of this fact is superseded (X --supersedes--> it): X's name; may be stale"
    )

    def line(self) -> str:
        stale = f" (superseded by {self.superseded_by})" if self.superseded_by else ""
        return f"- {self.subject} --{self.predicate}--> {self.object} (confidence={self.confidence:.2f}){stale}"


class EntityAdded(BaseModel):
    entity: Entity
    created: bool = Field(description="False when the name or an alias already named this entity")
    ignored_aliases: list[str] = Field(default_factory=list, description="Aliases that already name another entity")


class EntitiesAdded(BaseModel):
    entities: list[EntityAdded]


class TripleAdded(BaseModel):
    fact: Fact
    created: bool = Field(
        description="False when the same subject, predicate and object existed (kept the higher confidence)"
    )
    hint: str | None = Field(
        None, description="A predicate outside the vocabulary (rockmem://graph-relations) close to one in it"
    )


class TriplesAdded(BaseModel):
    triples: list[TripleAdded]
    created_entities: list[str] = Field(description="Names of entities created because a triple named them")


class EntityHit(BaseModel):
    entity: Entity
    score: float | None = Field(
        description="Relevance: BM25 for word matches; below 1 for a name that only contains the query; "
        "null when listing without a query"
    )
    triples: int = Field(description="How many triples touch this entity")
    salience: float = Field(description="0..1: 0.7, faded since the last use, grown with uses")
    tier: str = Field(description="active, fading, dormant or archive_candidate")


class EntitySearch(BaseModel):
    results: list[EntityHit]
    total_matches: int


class EntityDetail(BaseModel):
    entity: Entity
    salience: float = Field(description="0..1: 0.7, faded since the last use, grown with uses")
    tier: str = Field(description="active, fading, dormant or archive_candidate")
    facts: list[Fact] = Field(description="Every triple touching the entity, outgoing then incoming")


class Traversal(BaseModel):
    start: Entity
    facts: list[Fact] = Field(description="Breadth-first, nearest first; each triple once")
    entities_reached: int
    truncated: bool = Field(description="True when the limit cut the traversal short")


class EntityDeleted(BaseModel):
    entity: Entity
    triples_deleted: int


class TripleDeleted(BaseModel):
    fact: Fact


class EntitiesMerged(BaseModel):
    entity: Entity = Field(description="The kept entity, with the merged one's name and aliases as aliases")
    merged_id: str
    triples_repointed: int
    duplicates_folded: int = Field(
        description="Triples dropped: identical to an existing one after re-pointing, or linking the two merged"
    )


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


# A plan is held whole before it is checked: its size is bounded here (a dream batch is at most 1,000 items);
# each text that reaches a memory (content, category, tags) or the graph is checked like a tool call's.
MAX_PLAN_ITEMS = 1_000  # actions of each kind; ids per merge
MAX_PLAN_REASON_CHARS = 500
Reason = Annotated[str, Field(max_length=MAX_PLAN_REASON_CHARS, description="Why (for the report)")]


def _actions(description: str) -> Any:
    return Field(default_factory=list, max_length=MAX_PLAN_ITEMS, description=description)


def _untitled(schema: dict[str, Any]) -> None:
    """Drop the titles pydantic makes of names: they repeat the names and cost tools/list tokens."""
    schema.pop("title", None)
    for spec in schema.get("properties", {}).values():
        spec.pop("title", None)


# A misspelled field is an error, not an action silently dropped; the plan's schema is in tools/list: no titles.
_PLAN = ConfigDict(extra="forbid", json_schema_extra=_untitled)


class PlanMerge(BaseModel):
    model_config = _PLAN

    ids: list[str] = Field(
        min_length=2, max_length=MAX_PLAN_ITEMS, description="The memories merged (every one is archived)"
    )
    content: str = Field(description="The merged memory: every name and number of the sources kept")
    category: str | None = Field(None, description="Default: the first source's category")
    tags: list[str] | None = Field(None, description="Default: the sources' tags together")
    reason: Reason = ""


class PlanArchive(BaseModel):
    model_config = _PLAN

    id: str = Field(description="The memory to archive")
    reason: Reason = ""


class PlanUpdate(BaseModel):
    model_config = _PLAN

    id: str = Field(description="The memory to refile")
    category: str | None = Field(None, description="A better category path")
    tags: list[str] | None = Field(None, description="Better tags (replace the old ones)")
    reason: Reason = ""


class PlanCreate(BaseModel):
    model_config = _PLAN

    content: str = Field(description='Preferences: a statement; anti-patterns: "Don\'t X for Y — instead Z"')
    category: str | None = Field(
        None, description="Default by pass: user-preferences/inferred or anti-patterns/general"
    )
    tags: list[str] | None = Field(None, description="A few search words not already in the text")
    importance: float | None = Field(None, ge=0, le=1, description="0 to 1 (default 0.5)")
    source_episodes: list[str] = Field([], description="Episodes pass: the episode ids it is from")
    reason: Reason = ""


# A workflow the episodes pass learned (seed 004 §7); no docstring: its schema is in tools/list.
class DreamProcedure(BaseModel):
    model_config = _PLAN

    name: str = Field(description="e.g. how-to-deploy; a known name is updated")
    trigger: list[str] = Field(description="Phrases that call for it")
    steps: list[str] = Field(description="In order")
    notes: list[str] = Field([], description="The user's wishes")
    learned_from: list[str] = Field([], description="The episode ids")
    reason: Reason = ""


class EntityMergeInput(BaseModel):
    model_config = _PLAN

    keep: str = Field(description="The entity that stays (name, alias or id)")
    merge: str = Field(description="The duplicate folded into it")
    reason: Reason = ""


class DreamPlan(BaseModel):
    """What a dream pass proposes; the server validates every action and applies what passes its safeguards."""

    model_config = _PLAN

    merges: list[PlanMerge] = _actions("Memories that are one fact: merge them")
    archives: list[PlanArchive] = _actions("Noise, stale or contradicted memories")
    updates: list[PlanUpdate] = _actions("Memories to refile (category, tags)")
    creates: list[PlanCreate] = _actions("New memories: preferences, anti-patterns, facts from episodes")
    entities: list[EntityInput] = _actions("Entities to add to the graph")
    triples: list[TripleInput] = _actions("Facts to add to the graph")
    entity_merges: list[EntityMergeInput] = _actions("Graph entities to merge")
    drop_triples: list[str] = _actions("Ids of graph triples to delete")
    procedures: list[DreamProcedure] = _actions("Workflows learned from episodes")


class SalientMemory(BaseModel):
    """One memory's salience as of now: for the dream's decay pass and the least/most salient listing."""

    id: str
    tier: str = Field(description="active, fading, dormant or archive_candidate")
    salience: float
    uses: int = Field(description="access_count: the save, then every reinforced use")
    last_use: UtcDatetime
    pinned: bool = False
    preview: str = Field("", description="The content's first words")


class TierChange(BaseModel):
    """A memory whose salience tier differs from the one the previous decay pass recorded."""

    id: str
    from_tier: str
    to_tier: str
    salience: float


class SalienceListing(BaseModel):
    """The least or most salient live memories, with the count per tier."""

    order: Literal["least", "most"]
    memories: list[SalientMemory]
    tiers: dict[str, int] = Field(description="Live memories per tier")
    pinned: int


class DreamAction(BaseModel):
    action: str = Field(
        description="merge, archive, update, create, purge, entity, triple, drop_triple, entity_merge, drop_entity, "
        "procedure"
    )
    ids: list[str] = Field(default_factory=list, description="The memories, graph records or procedure it touched")
    result_id: str | None = Field(None, description="The memory it made (merge, create)")
    reason: str = ""


class DreamReport(BaseModel):
    id: str = Field(description="The report's name: its start time, e.g. 20261123T134000Z")
    run_id: str | None = Field(None, description="The run's actor in meta/audit.log: dream:RUN_ID")
    dream_pass: str
    mode: str = Field(description="llm, sampling, agent or deterministic")
    dry_run: bool
    started_at: UtcDatetime
    finished_at: UtcDatetime | None = None
    applied: list[DreamAction] = Field(default_factory=list, description="What changed (or would, on a dry run)")
    rejected: list[DreamAction] = Field(default_factory=list, description="Proposals refused, with the reason")
    contradictions: list[DreamAction] = Field(
        default_factory=list, description="Memories that contradict each other, left as they are for you to resolve"
    )
    tiers: dict[str, int] = Field(default_factory=dict, description="Decay pass: live memories per salience tier")
    tier_changes: list[TierChange] = Field(
        default_factory=list, description="Decay pass: memories whose tier changed since the previous pass"
    )
    archive_candidates: list[SalientMemory] = Field(
        default_factory=list, description="Decay pass: salience under 0.05, listed for review (nothing is archived)"
    )
    summary: str = ""


class DreamMaterial(BaseModel):
    """An agent-driven dream: what to read, how to answer (apply_dream with a plan of this schema)."""

    dream_pass: str
    directive: str
    material: str = Field(description="Numbered items to consider, ids in brackets")
    items: int
    remaining: int = Field(description="Items left for a further call (batches of at most the batch size)")
    plan_schema: dict[str, Any]


class DreamResult(BaseModel):
    """What the dream tool did: a report when it ran a pass, or the material for the calling agent to dream."""

    mode: str = Field(description="deterministic, agent (you answer with apply_dream), llm or sampling")
    report: DreamReport | None = None
    material: DreamMaterial | None = None
    next_step: str = ""


class CoreBlock(BaseModel):
    name: str = Field(description="Identity, Active Context, Persona or Critical Facts")
    tokens: int = Field(description="Its content's estimated tokens")
    cap: int = Field(description="Its cap in tokens")
    lines: list[str] = Field(description="Its content lines; edits address them by number, from 1")


class CoreMemoryView(BaseModel):
    """Core memory (MEMORY.md) as read: the version to pass to an edit, each block with its lines and size."""

    version: str = Field(description="Pass it to an edit: an edit of a changed file is refused")
    blocks: list[CoreBlock]
    tokens: int = Field(description="Estimated tokens of the whole core as loaded into context")
    cap: int = Field(description="Cap of the whole core in tokens")
    over_cap: list[str] = Field(default_factory=list, description="Blocks (or the whole) over their cap")
    text: str = Field("", description="The blocks with numbered lines, as a model reads them")
    changed: str | None = Field(None, description="What the edit did")


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


# ---------------------------------------------------------------------------------------------- procedures
MAX_SLUG_CHARS = 80
MAX_TRIGGERS = 20
MAX_TRIGGER_CHARS = 200
MAX_STEPS = 50
MAX_STEP_CHARS = 2_000
MAX_NOTES = 50
MAX_NOTE_CHARS = 2_000
MAX_LINKS = 50
MAX_LINK_CHARS = 200
_NOT_SLUG = re.compile(r"[^a-z0-9]+")


def procedure_slug(name: str) -> str:
    """A procedure's file name: the name lower-cased, accents dropped ('é' -> 'e'), runs of anything but a-z
    and 0-9 turned into '-', at most 80 characters. Names with one slug are one procedure, so a case-insensitive
    filesystem can never hold two files for them. A name of no Latin letter or digit is refused."""
    ascii_name = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode().lower()
    slug = _NOT_SLUG.sub("-", ascii_name).strip("-")[:MAX_SLUG_CHARS].rstrip("-")
    if not slug:
        raise InvalidInputError(
            f"procedure name {name[:60]!r} has no Latin letter or digit to name its file by; "
            "use a name such as 'how-to-deploy'"
        )
    return slug


class ProcedureVersion(BaseModel):
    """An earlier version of a procedure, kept in its `history` when an update replaced it."""

    model_config = ConfigDict(extra="ignore")

    version: int = Field(ge=1)
    updated_at: UtcDatetime = Field(description="When this version was saved")
    trigger: list[str]
    steps: list[str]
    notes: list[str] = Field(default_factory=list)
    learned_from: list[str] = Field(default_factory=list)
    reason: str | None = Field(None, description="Why this version was saved")


class Procedure(BaseModel):
    """A learned workflow (seed 004 §7): when it applies, its steps; stored as procedures/{slug}.json."""

    model_config = ConfigDict(extra="ignore")

    name: str
    slug: str = Field(description="The file name: procedure_slug(name)")
    trigger: list[str] = Field(min_length=1, max_length=MAX_TRIGGERS, description="Phrases that call for it")
    steps: list[str] = Field(min_length=1, max_length=MAX_STEPS, description="What to do, in order")
    notes: list[str] = Field(default_factory=list, max_length=MAX_NOTES)
    learned_from: list[str] = Field(
        default_factory=list, max_length=MAX_LINKS, description="Episode or memory ids, or free text"
    )
    reason: str | None = Field(None, description="Why this version was saved")
    created_at: UtcDatetime
    updated_at: UtcDatetime
    version: int = Field(1, ge=1, description="1 on create, + 1 per update")
    archived_at: UtcDatetime | None = None
    archive_reason: str | None = None
    importance: float = Field(0.7, ge=0.0, le=1.0, description="Salience base (0.7: saved by an agent)")
    last_seen_at: UtcDatetime | None = Field(None, description="Last use (save, a trigger matched)")
    reinforcement_count: UseCount = Field(1, ge=1, description="Times used, the save included")
    history: list[ProcedureVersion] = Field(default_factory=list, description="Earlier versions, oldest first")
    history_dropped: int = Field(0, ge=0, description="Oldest versions dropped to keep the history in its cap")

    @property
    def archived(self) -> bool:
        return self.archived_at is not None

    def document_text(self) -> str:
        """What search indexes: name, trigger phrases, steps and notes."""
        return " ".join([self.name, *self.trigger, *self.steps, *self.notes])


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


class ForgetOutcome(BaseModel):
    """What happened to one id of a forget or restore call."""

    id: str
    ok: bool
    done: str = Field(description="What was done, or why nothing was")


class ForgetResult(BaseModel):
    """A forget, restore or find: per id what happened (each id is done whole or not at all), or the candidates."""

    candidates: list[ForgetCandidate] = Field(default_factory=list)
    items: list[ForgetOutcome] = Field(default_factory=list)


class ForgottenItem(BaseModel):
    """A soft-forgotten item: `forget` with restore brings it back."""

    id: str
    store: ForgetStore
    text: str
    at: UtcDatetime = Field(description="When it was forgotten")
    reason: str | None = None


class AuditEntry(BaseModel):
    """One line of the audit trail (seed 004 §12.4): who changed which file, when, how and why."""

    time: UtcDatetime
    action: str = Field(description="CREATE, EDIT, APPEND, DELETE, ARCHIVE, MERGE, REVERT, DECAY, RENAME, ALERT, …")
    file: str = Field(description="Relative to the data home")
    actor: str = Field(description="main, subagent:NAME, patrol:NAME, dream:RUN, manual, system:…")
    approval: str
    summary: str


class AuditVersion(BaseModel):
    """One version of a file in the home's git history, with the audit lines that made it."""

    commit: str = Field(description="Pass it as `to` to revert")
    time: UtcDatetime
    file: str
    deleted: bool = Field(description="The file did not exist in this version")
    text: str | None = Field(None, description="A memory's content, or the file's text (at most 2,000 characters)")
    changes: list[AuditEntry] = Field(default_factory=list, description="Who changed it and why")


class AuditResult(BaseModel):
    """Audit lines (newest first), or one item's history (newest version first), or alerts acknowledged."""

    entries: list[AuditEntry] = Field(default_factory=list)
    versions: list[AuditVersion] = Field(default_factory=list)
    note: str | None = Field(None, description="What could not be shown, and why")


class RevertSkip(BaseModel):
    file: str
    reason: str


class RevertResult(BaseModel):
    """What a revert restored. It logged REVERT lines; revert `revert_id` (as run) to undo it."""

    revert_id: str
    restored_to: str = Field(description="The commit the files now match")
    restored: list[str] = Field(default_factory=list, description="Files put back as they were")
    removed: list[str] = Field(default_factory=list, description="Files that did not exist then, removed")
    skipped: list[RevertSkip] = Field(default_factory=list)


# Reflection (seed 004 §10): a cycle's proposal, kept until the user resolves it.
REFLECTION_BLOCKS = ("Identity", "Active Context", "Persona", "Critical Facts")
ReflectionDecision = Literal["approve", "approve_with_changes", "partial", "reject"]


class MetaReflection(BaseModel):
    """Phase 2's answer: what the past reflections and evolution.md show, and guidance for this cycle."""

    model_config = _PLAN

    patterns: list[str] = Field([], description="Themes recurring across reflections")
    evolution: list[str] = Field([], description="Insights on how understanding of the user evolved (evolution.md)")
    revised_assumptions: list[str] = Field([], description="Beliefs the memories now correct")
    questions: list[str] = Field([], description="Questions for the user, persisting or new")
    guidance: str = Field("", description="What this cycle should focus on")


class CoreBlockRewrite(BaseModel):
    model_config = _PLAN

    block: Literal["Identity", "Active Context", "Persona", "Critical Facts"]
    text: str = Field(description="The block's new content (Critical Facts: lines to add; pinned lines stay)")
    reason: Reason = ""


class CoreRewrite(BaseModel):
    """Phase 4's answer: core memory blocks rewritten to the current state, each within its cap."""

    model_config = _PLAN

    blocks: list[CoreBlockRewrite] = Field([], description="Only the blocks that should change")


class ReflectionAction(BaseModel):
    id: str = Field(description="a1, a2, …: name it to approve part of a reflection or to change it")
    kind: str = Field(description="merge, archive, update, create, entity, triple, procedure, core or proposal")
    dream_pass: str | None = Field(None, description="The dream pass it applies through (None: core, proposal)")
    item: dict[str, Any] = Field(description="What it does, as the plan says it (edits change these fields)")
    summary: str
    outcome: str | None = Field(None, description="After the resolution: applied, refused (why) or not chosen")
    read: dict[str, str] = Field(
        default_factory=dict, description="Each memory it names, as read (a version): changed since, it is refused"
    )


class ReflectionResolution(BaseModel):
    decision: str
    at: UtcDatetime
    reason: str = ""
    chosen: list[str] = Field(default_factory=list, description="Action ids applied (all, on approve)")
    edited: list[str] = Field(default_factory=list, description="Action ids the user changed")
    applied: dict[str, int] = Field(default_factory=dict, description="Applied actions by kind")
    refused: int = 0
    reports: list[str] = Field(default_factory=list, description="The dream reports of the applied passes")


class Reflection(BaseModel):
    """One reflection cycle: its survey, meta-reflection and plan; pending until resolved (or applied at once
    when it needs no approval)."""

    id: str = Field(description="r-NNN; its changes are logged as reflection:r-NNN")
    number: int
    trigger: str = Field(description="schedule, session-end, idle, manual or threshold")
    mode: str = Field(description="llm (a language model) or deterministic")
    status: str = Field(description="pending, applying, approved, partial, rejected, applied or interrupted")
    needs_approval: bool
    started_at: UtcDatetime
    finished_at: UtcDatetime | None = None
    since: UtcDatetime | None = Field(None, description="The previous reflection's start: what is new came after")
    survey: list[str] = Field(default_factory=list)
    meta: MetaReflection = Field(default_factory=MetaReflection)
    actions: list[ReflectionAction] = Field(default_factory=list)
    contradictions: list[str] = Field(default_factory=list)
    questions: list[str] = Field(default_factory=list)
    not_covered: list[str] = Field(default_factory=list, description="What the budget or a failure left out")
    output_tokens: int = 0
    token_budget: int = 0
    processed: dict[str, int] = Field(default_factory=dict, description="What it read: memories, episodes, …")
    marks: dict[str, Any] = Field(default_factory=dict, description="How far each pass read (moved on approval)")
    resolution: ReflectionResolution | None = None
    summary: str = Field("", description="The readable proposal (meta/pending-reflection.md)")


class ReflectResult(BaseModel):
    """What the reflect tool did: the reflection it ran or resolved, or those it was asked to show."""

    reflections: list[Reflection] = Field(default_factory=list)
    next_step: str = ""


# ---------------------------------------------------------------------------------------------- proposals
ProposalStore = Literal["episodic", "semantic", "procedural", "vault"]
ProposalStatus = Literal["pending", "conflict", "committed", "rejected", "deferred"]
Confidence = Literal["high", "medium", "low"]
OPEN_STATUSES: tuple[str, ...] = ("pending", "conflict", "deferred")  # still waiting for a decision


class Proposal(BaseModel):
    """A gated sub-agent's memory, waiting for the main agent (seed 004 §13.2): meta/proposals/{id}.json."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    id: str = Field(description="Short and sortable by time; the #N of meta/pending-memories.md")
    from_agent: str = Field(alias="from", description="The sub-agent's name (its namespace's second segment)")
    time: UtcDatetime
    trigger: str = Field(description="What led to it: the tool, or a user's phrase")
    store: ProposalStore = Field(description="The suggested store")
    content: str
    entities: list[str] = Field(default_factory=list)
    confidence: Confidence = "medium"
    core_worthy: bool = False
    category: str | None = Field(None, description="save_memory's category, kept for the commit")
    tags: list[str] = Field(default_factory=list)
    status: ProposalStatus = "pending"
    conflict_with: list[str] = Field(default_factory=list, description="Open proposals saying otherwise")
    reason: str = Field("", description="Why it was rejected or deferred, or a rival's fate")
    committed_as: list[str] = Field(default_factory=list, description="What the commit wrote: memory:ID, …")
    committing_at: UtcDatetime | None = Field(
        None, description="Set while a commit writes: found set after a crash, the next commit looks for its writes"
    )
    decided_at: UtcDatetime | None = None

    @property
    def open(self) -> bool:
        return self.status in OPEN_STATUSES


class ProposalResult(BaseModel):
    """Proposals (open ones unless asked otherwise), or what a review decision did."""

    proposals: list[Proposal] = Field(default_factory=list)
    note: str | None = Field(None, description="What happened, or what to do next")
