"""The one settings object: defaults < ROCKMEM_* environment < command-line flags.

Built once at the composition root (CLI or server start) and passed down; nothing else reads the
environment.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from platformdirs import user_data_dir
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from rockmem_mcp.errors import ConfigError, InvalidInputError
from rockmem_mcp.models import parse_namespace
from rockmem_mcp.search.rank import HYBRID_MIN_SIMILARITY, HYBRID_VECTOR_WEIGHT, Mode
from rockmem_mcp.search.tiers import DEFAULT_CATEGORIES, DEFAULT_RULE, TierRule

ENV_PREFIX = "ROCKMEM_"
APP_NAME = "rockmem"

LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR"]


def default_home() -> Path:
    """The platform's user data dir for app `rockmem` (e.g. ~/.local/share/rockmem on Linux)."""
    return Path(user_data_dir(APP_NAME, appauthor=False))


class Settings(BaseModel):
    """Everything configurable about a rockmem home and server."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    home: Path = Field(
        default_factory=default_home,
        description="Data home, where every store lives; created on first "
        "use (default: the platform's user data dir for rockmem)",
    )
    log_level: LogLevel = Field(
        "WARNING",
        description="Log level: `DEBUG`, `INFO`, `WARNING` or `ERROR` (the CLI's `-v` means INFO, `-vv` DEBUG)",
    )
    max_content_bytes: int = Field(
        100_000, ge=1, description="Largest content (memory, episode, turn, …) or search query accepted, in UTF-8 bytes"
    )
    max_tags: int = Field(
        50,
        ge=0,
        description="Most tags per entry (memory, working-memory value, episode, …); more are refused, 0 allows none",
    )
    max_metadata_bytes: int = Field(16_000, ge=0, description="Largest metadata accepted (JSON bytes).")
    search_limit_max: int = Field(
        200,
        ge=1,
        description="Largest search `limit` the CLI and library accept (MCP tool schemas cap it at 200 regardless)",
    )
    host: str = Field(
        "127.0.0.1",
        description="Streamable HTTP bind address; beyond loopback a bearer token (or a tenants file) is required",
    )
    port: int = Field(8765, ge=0, le=65535, description="Streamable HTTP port (0: any free one, announced at start)")
    # Where long-term memories live: unset, the home's files; postgresql://… a database several replicas share
    # (storage/pg.py). The home still keeps this replica's own index, access log and audit trail.
    store: str | None = Field(
        None,
        repr=False,
        pattern=r"^postgres(ql)?://",
        description="`postgresql://user@host/db`: long-term stores in "
        "one database several replicas share; unset: the home",
    )
    store_schema: str | None = Field(
        None,
        pattern=r"^[a-z][a-z0-9_]{0,62}$",
        description="PostgreSQL schema for a database store's tables "
        "(created if missing); unset: the connection's default",
    )
    # Tenants: a JSON file mapping tenants to their tokens' hashes (server/tenancy.py), read again when it changes.
    tenants_file: Path | None = Field(
        None,
        description="JSON file of tenants and their tokens' SHA-256 "
        "hashes, each tenant its own memory; re-read on change",
    )
    # A tenant's services (its connections to a database store among them) close after this long without a request,
    # and reopen at the next; 0 keeps them open until the server stops.
    tenant_idle_minutes: float = Field(
        15.0,
        ge=0,
        description="Minutes without a request after which a tenant's stores and connections close; 0: kept open",
    )
    # Streamable HTTP beyond loopback needs a bearer token (and then serves any Host). On loopback, Host names
    # besides its own, e.g. "memory.example.com:*", pass DNS-rebinding protection when listed here; beyond
    # loopback, listing names serves only those.
    auth_token: str | None = Field(
        None,
        repr=False,
        min_length=16,
        description="Bearer token HTTP clients must send (16+ characters); "
        "it or a tenants file is required beyond loopback",
    )
    allowed_hosts: list[str] = Field(
        default_factory=list,
        description="Extra Host values (`name:port`, `name:*`), comma-separated, "
        "allowed on loopback; beyond loopback, the only ones",
    )
    # The change journal is rotated (and a fresh index snapshot written) past this many bytes.
    journal_rotate_bytes: int = Field(
        1_000_000,
        ge=1_000,
        description="Bytes past which a change journal (and the access log) is rotated at the next snapshot",
    )
    # After this many changes since the last snapshot, a fresh snapshot is written in the background.
    snapshot_every_changes: int = Field(
        2_000,
        ge=1,
        description="Changes (or new vectors) after which the index snapshot is rewritten in the background",
    )

    # Embeddings: an OpenAI-compatible endpoint (with a model name), else a local model2vec model (a folder or
    # a published name), `onnx:NAME` a local transformer, `static` the bundled static model, else the bundled
    # transformer (no network); `off` turns them off (BM25 alone).
    embedding_endpoint: str | None = Field(
        None,
        description="OpenAI-compatible embeddings server: base URL (e.g. "
        "http://localhost:11434) or full `…/v1/embeddings`",
    )
    embedding_model: str | None = Field(
        None,
        description="Endpoint's model; else `bundled` (default), `static`, "
        "`off` (BM25 only), `onnx:NAME` or a model2vec model",
    )
    embedding_api_key: str | None = Field(
        None, repr=False, description="API key for the embeddings endpoint, sent as `Authorization: Bearer …`"
    )
    embedding_batch_size: int = Field(
        64,
        ge=1,
        le=2048,
        description="Texts per embedding request or background batch; "
        "also most working-memory values embedded per search",
    )
    embedding_timeout_s: float = Field(
        30.0,
        gt=0,
        description="Seconds per endpoint request when embedding memories (3 retries with backoff on errors)",
    )
    # A search never waits long for its query vector: past this it answers on BM25 alone.
    embedding_query_timeout_s: float = Field(
        5.0, gt=0, description="Seconds a search waits for its query vector (one attempt), then answers on BM25 alone"
    )
    # After a failure the provider is left alone this long (searches use BM25 meanwhile).
    embedding_retry_after_s: float = Field(
        30.0,
        ge=0,
        description="Seconds the embedding provider is left alone after a failure; searches use BM25 meanwhile",
    )
    search_mode: Mode = Field(
        "hybrid", description="Ranking for searches that do not name one: `hybrid`, `bm25`, `vector` or `rockbot`"
    )
    hybrid_vector_weight: float = Field(
        HYBRID_VECTOR_WEIGHT,
        ge=0,
        description="Cosine weight in hybrid ranking: score = BM25 / the query's top BM25 + weight × cosine",
    )
    hybrid_min_similarity: float = Field(
        HYBRID_MIN_SIMILARITY,
        ge=-1,
        le=1,
        description="Cosine (-1 to 1) a memory needs to be returned by hybrid search when no keyword matched",
    )
    # Context from neighbours (issue 24): a conversation memory (metadata `session`) borrows from its turns.
    search_neighbours: bool = Field(
        True,
        description="A memory with metadata `session` borrows score from its session's turns within two (bm25, hybrid)",
    )
    search_lifts: bool = Field(
        True, description="A speaker or month the query names lifts memories whose `speaker` / `date` metadata match"
    )
    bm25: Literal["tuned", "rockbot"] = Field(
        "tuned",
        description="Memory index's BM25 k1, b, pair weight: `tuned` (0.6, 0.9, "
        "1; chosen across corpora) or `rockbot` (1.5, 0.75, 2)",
    )
    # Three-tier retrieval (seed 003): off, as it did not clearly beat the flat search on LoCoMo dev (BENCHMARKS.md).
    search_tiers: bool = Field(False, description="Rank categories first; a query's hits in the best ones come first")
    search_tier_categories: int = Field(
        DEFAULT_CATEGORIES, ge=1, description="How many of the best categories the tiered search looks in first"
    )
    search_tier_rule: TierRule = Field(
        DEFAULT_RULE,
        description="How tiered search ranks categories: `max` (best hit), "
        "`top3` (best three), `sum`, `mean` or `centroid` (cosine)",
    )

    # Working memory: a sub-agent or patrol process names its namespace (e.g. subagent/t1b2c3); otherwise
    # each MCP session gets session/{id}.
    namespace: str | None = Field(
        None,
        description="This process's working-memory namespace: `session/<id>`, `patrol/<task>` or `subagent/<task>`",
    )
    working_max_entries: int = Field(50, ge=1, description="Entries per working-memory namespace")
    working_max_value_bytes: int = Field(1_000_000, ge=1, description="Largest working-memory value (UTF-8 bytes)")
    # Every namespace under a root shares one file that each save rewrites and other processes re-parse: 8 MB is
    # eight values at the largest size, far above normal use (50 entries of a few KB), and keeps that file small.
    working_max_namespace_bytes: int = Field(
        8_000_000,
        ge=1,
        description="Most UTF-8 bytes of values one working-memory namespace holds; a save past it evicts the "
        "entries closest to expiry",
    )
    working_max_ttl_minutes: float = Field(
        7 * 24 * 60, gt=0, description="Longest working-memory TTL, in minutes (default 10080: a week)"
    )
    # A running server rewrites working-memory files that hold expired entries this often (and at start).
    working_sweep_seconds: float = Field(
        60, gt=0, description="Seconds between a running server's sweeps of expired working memory from disk"
    )

    conversation_window: int = Field(
        50,
        ge=1,
        description="Turns kept per conversation session; a full window is compacted (older turns summarised), not cut",
    )
    conversation_idle_minutes: float = Field(
        60,
        gt=0,
        description="Minutes after which an idle conversation session is forgotten (its window and recall's delta set)",
    )
    conversation_keep_windows: bool = Field(
        True, description="Keep conversation windows in the home across restarts (conversations/windows.json)"
    )
    # On: every recorded turn is also appended to conversations/{date}.jsonl, which the dream pass reads.
    conversation_log: bool = Field(
        False, description="Also append every turn, durably, to conversations/{date}.jsonl, which the dream pass reads"
    )

    # A language model for the dream pass: any OpenAI-compatible chat-completions endpoint.
    llm_endpoint: str | None = Field(
        None,
        description="OpenAI-compatible chat base URL (or full `…/v1/chat/completions`) "
        "for dreams, reflection, enrichment, routing",
    )
    llm_model: str | None = Field(
        None, description="Chat model name at the endpoint (both must be set for the server to have a language model)"
    )
    llm_api_key: str | None = Field(
        None, repr=False, description="API key for the chat endpoint, sent as `Authorization: Bearer …`"
    )
    llm_timeout_s: float = Field(120.0, gt=0, description="Seconds per chat request")
    llm_retries: int = Field(2, ge=0, le=10, description="Further attempts after a failed or malformed answer")
    llm_token_budget: int = Field(
        200_000,
        ge=1,
        description="Tokens one dream pass may spend (as the endpoint reports them); then it applies what it planned",
    )
    # Dream: how many items an agent-driven or LLM dream considers per call (prompt).
    dream_batch_size: int = Field(
        200, ge=1, le=1000, description="Items per dream prompt or agent batch (at most 1,000)"
    )

    # Salience (seed 004 §9): decay per day since last use, and how it shapes ranking and recall.
    salience: bool = Field(True, description="Salience shapes ranking and hides dormant memories (off: relevance only)")
    salience_lambda: float = Field(
        0.03, ge=0, le=10, description="Decay rate per day since last use (0.03: ~23-day half-life)"
    )
    salience_floor: float = Field(
        0.4, ge=0, le=1, description="Lowest ranking factor (0 to 1) salience can give a match"
    )
    # At most 0.2, the dormant tier's top: a higher threshold would call fading memories archive candidates.
    salience_archive_threshold: float = Field(
        0.05, ge=0, le=0.2, description="Salience under which a memory is an archive candidate (0 to 0.2)"
    )
    # Reinforcement is kept in memory at once and written to meta/access/ in batches this often.
    salience_flush_s: float = Field(
        2.0, gt=0, description="Seconds between writes of reinforcement to meta/access/ (what a crash may lose)"
    )
    reinforce_interval_s: float = Field(
        60.0, ge=0, description="An item is reinforced (counts a use) at most once per this many seconds"
    )

    # Core memory (seed 004 §4): MEMORY.md in the home, four blocks, each capped (tokens as rockmem_mcp.tokens
    # counts them), and a cap on the whole.
    core_identity_tokens: int = Field(500, ge=1, description="Cap of core memory's Identity block (tokens)")
    core_active_context_tokens: int = Field(
        1_000, ge=1, description="Cap of core memory's Active Context block (tokens)"
    )
    core_persona_tokens: int = Field(500, ge=1, description="Cap of core memory's Persona block (tokens)")
    core_critical_facts_tokens: int = Field(
        1_000, ge=1, description="Cap of core memory's Critical Facts block (tokens)"
    )
    core_total_tokens: int = Field(3_000, ge=1, description="Cap of the whole core memory (tokens)")
    # Learnings (seed 003 layer 4): the newest tool failures and corrections join a session's first recall.
    learnings_limit: int = Field(
        10, ge=0, description="Newest tool failures and corrections in a session's first recall (0: none)"
    )
    learnings_tokens: int = Field(
        500, ge=0, description="Token budget of the learnings and anti-patterns in a session's first recall (0: none)"
    )
    # Workspace files (seed 003 layer 3): AGENTS.md, SOUL.md, USER.md, HEARTBEAT.md in the home.
    workspace_tokens: int = Field(
        1_500,
        ge=0,
        description="Token budget of workspace files (AGENTS.md, SOUL.md, "
        "USER.md, HEARTBEAT.md) in a session's first recall",
    )

    # Trigger phrases in a user's message (seed 004 §8.1): suggest what to do, act on a remember, or look for none.
    trigger_mode: Literal["suggest", "act", "off"] = Field(
        "suggest",
        description="On a trigger phrase: suggest (the reply says what to call), act (a remember is saved at once; "
        "a forget still needs the user's confirmation) or off",
    )
    # Who routes a remembered span to its store and extracts facts when a conversation is compacted (issue 21).
    encode_driver: Literal["auto", "agent", "rules"] = Field(
        "auto",
        description="auto: the server's language model if configured, else the client's model (MCP sampling) if "
        "it offers one, else rules; agent: the reply carries the task for the calling agent to answer; rules: "
        "no model",
    )

    # Reflection (seed 004 §10): a cycle surveys, reflects on past reflections, consolidates, rewrites core and
    # writes a proposal; with approval required nothing changes until the user resolves it.
    reflection_token_budget: int = Field(8_000, ge=500, description="Output tokens one reflection may spend")
    # Seed 004 §10.6, "never apply changes without user approval": every reflection waits for the user by default.
    reflection_approval: Literal["model", "always", "never"] = Field(
        "always",
        description="Which reflections wait for approval: model (those a language model planned), always, never",
    )
    reflection_at: str = Field(
        "03:00",
        pattern=r"^([01]\d|2[0-3]):[0-5]\d$",
        description="Scheduled reflection's local time, HH:MM (run by "
        "the sidecar, or a server with reflection_in_server)",
    )
    reflection_threshold: int = Field(
        50, ge=1, description="New memories and episodes since the last reflection that start one"
    )
    reflection_in_server: bool = Field(
        False, description="The serving process runs scheduled, idle and threshold reflections itself"
    )
    reflection_idle_minutes: float = Field(
        30.0, gt=0, description="Minutes a conversation must be quiet to count as ended (it may start a reflection)"
    )
    reflection_check_seconds: float = Field(
        60.0, gt=0, description="Seconds between a serving process's checks of its reflection triggers"
    )

    # Accountability (seed 004 §12): every durable change appends a line to meta/audit.log; the home is a git
    # repository that a background thread commits the changes to in batches (history and rollback need it).
    audit: bool = Field(True, description="Append a line to meta/audit.log for every durable change")
    audit_git: bool = Field(
        True,
        description="Keep the home's history in git (needs the git program; off with audit off or a database store)",
    )
    audit_commit_seconds: float = Field(
        1.0, gt=0, description="Seconds between background commits of pending changes to git"
    )
    audit_retention_days: int = Field(
        90, ge=1, description="Audit lines older than this many days fold into monthly digests"
    )
    critical_files: list[str] = Field(
        default_factory=lambda: ["SOUL.md", "IDENTITY.md", "MEMORY.md", "AGENTS.md", "triggers.json"],
        description="Files (relative to the home) whose change outside the server raises an alert, comma-separated",
    )

    # Gated writes (seed 004 §13): a subagent/… process's long-term writes become proposals the main agent reviews.
    # Seed 004 §13.1: only the main agent writes long-term memory; RockBot's direct sub-agent writes are the opt-in.
    gated_writes: bool = Field(True, description="Sub-agents (subagent/… namespace) propose instead of writing")
    proposal_review: Literal["auto", "batch", "manual"] = Field(
        "batch",
        description="auto: trusted agents' proposals at the confidence are committed at once; batch: open proposals "
        "head the main session's first recall; manual: a commit needs the user's confirmation",
    )
    trusted_agents: list[str] = Field(
        default_factory=list, description="Sub-agent names auto mode trusts, comma-separated"
    )
    auto_commit_confidence: Literal["high", "medium", "low"] = Field(
        "high", description="Lowest proposal confidence auto mode commits: `high`, `medium` or `low`"
    )

    # The MCP tools to expose, by named toolset (server/toolsets.py checks the names): every listed tool costs
    # the client's model context, so sets beyond the default are opt-in.
    toolsets: list[str] = Field(
        default_factory=lambda: ["default"],
        description="MCP toolsets to expose, comma-separated: `default`, `all` or set names, e.g. default,episodes",
    )

    @field_validator("allowed_hosts", "toolsets", "critical_files", "trusted_agents", mode="before")
    @classmethod
    def _comma_separated(cls, value: Any) -> Any:
        return [part.strip() for part in value.split(",") if part.strip()] if isinstance(value, str) else value

    @field_validator("namespace")
    @classmethod
    def _valid_namespace(cls, value: str | None) -> str | None:
        try:
            return parse_namespace(value) if value else None
        except InvalidInputError as exc:
            raise ValueError(str(exc)) from None

    @property
    def memory_dir(self) -> Path:
        return self.home / "memory"

    @property
    def index_dir(self) -> Path:
        return self.home / "index"

    @property
    def working_dir(self) -> Path:
        return self.home / "working-memory"

    @property
    def conversations_dir(self) -> Path:
        return self.home / "conversations"

    @property
    def embeddings_dir(self) -> Path:
        return self.home / ".embeddings"

    @property
    def graph_dir(self) -> Path:
        return self.home / "knowledge-graph"

    @property
    def feedback_dir(self) -> Path:
        return self.home / "feedback"

    @property
    def episodes_dir(self) -> Path:
        """The episodic store: one append-only log per UTC day."""
        return self.home / "episodes"

    @property
    def procedures_dir(self) -> Path:
        """The procedural store: one JSON file per learned workflow."""
        return self.home / "procedures"

    @property
    def dream_reports_dir(self) -> Path:
        return self.home / "dream-reports"

    @property
    def meta_dir(self) -> Path:
        return self.home / "meta"

    @property
    def forgotten_dir(self) -> Path:
        """What a soft forget keeps until it is restored (governance/forgetting.py)."""
        return self.home / "forgotten"

    @property
    def access_dir(self) -> Path:
        """The access log: reinforcement of memories, entities and triples (salience's input)."""
        return self.meta_dir / "access"

    @property
    def core_file(self) -> Path:
        """Core memory: always loaded, edited by the agent and by hand."""
        return self.home / "MEMORY.md"

    @property
    def prompts_dir(self) -> Path:
        """Same-named markdown files here override the shipped prompt templates and directives."""
        return self.home / "prompts"

    @property
    def store_dirs(self) -> tuple[Path, ...]:
        """Every folder rockmem keeps in the home, parents first: none may be a symbolic link (see no_follow)."""
        return (
            self.memory_dir,
            self.index_dir,
            self.index_dir / "graph",  # the graph's change journal
            self.working_dir,
            self.conversations_dir,
            self.embeddings_dir,
            self.graph_dir,
            self.graph_dir / "entities",
            self.graph_dir / "triples",
            self.feedback_dir,
            self.episodes_dir,
            self.procedures_dir,
            self.dream_reports_dir,
            self.prompts_dir,
            self.meta_dir,
            self.access_dir,
            self.meta_dir / "proposals",  # sub-agents' proposals (proposals/service.py)
            self.forgotten_dir,
            self.home / "quarantine",
        )

    @classmethod
    def load(cls, overrides: Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None) -> Settings:
        """Merge defaults, `ROCKMEM_*` variables and explicit overrides (flags); None overrides are ignored."""
        env = os.environ if env is None else env
        values: dict[str, Any] = {}
        for name in cls.model_fields:
            raw = env.get(ENV_PREFIX + name.upper())
            if raw not in (None, ""):
                values[name] = raw
        values.update({k: v for k, v in (overrides or {}).items() if v is not None})
        if "home" in values:
            values["home"] = Path(values["home"]).expanduser().resolve()
        try:
            return cls(**values)
        except ValidationError as exc:
            problems = "; ".join(
                f"{ENV_PREFIX}{'.'.join(map(str, e['loc'])).upper()}: {e['msg']}" for e in exc.errors()
            )
            raise ConfigError(f"invalid settings: {problems}") from exc
