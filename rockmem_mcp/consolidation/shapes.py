"""Consolidation's shapes: the dream plan a model may send (and its limits), a dream's report, a reflection and its
actions."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from rockmem_mcp.graph.shapes import EntityInput, TripleInput
from rockmem_mcp.models import UtcDatetime

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
        default_factory=list,
        description="Decay pass: salience under the archive threshold (0.05 by default), listed for review (nothing "
        "is archived)",
    )
    summary: str = ""


class DreamMaterial(BaseModel):
    """An agent-driven dream: what to read, how to answer (dream apply with a plan of this schema)."""

    dream_pass: str
    directive: str
    material: str = Field(description="Numbered items to consider, ids in brackets")
    items: int
    remaining: int = Field(description="Items left for a further call (batches of at most the batch size)")
    plan_schema: dict[str, Any]


class DreamResult(BaseModel):
    """What the dream tool did: a report when it ran a pass, or the material for the calling agent to dream."""

    mode: str = Field(description="deterministic, agent (you answer with dream apply), llm or sampling")
    report: DreamReport | None = None
    material: DreamMaterial | None = None
    next_step: str = ""


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
    conflicts: list[DreamAction] = Field(
        default_factory=list,
        description="The contradictions as memory ids (older first) and why: left as they are for the user to decide",
    )
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
