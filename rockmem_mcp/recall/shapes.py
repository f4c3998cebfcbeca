"""Recall's shapes: the block one recall returns, what it brings from each store."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from rockmem_mcp.graph.shapes import Fact
from rockmem_mcp.models import TriggerFound
from rockmem_mcp.working.shapes import WorkingInfo, WorkingSearchHit


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
