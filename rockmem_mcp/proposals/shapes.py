"""Sub-agents' proposals: a proposal, its store and status, what a review returns."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from rockmem_mcp.models import Confidence, UtcDatetime

# ---------------------------------------------------------------------------------------------- proposals
ProposalStore = Literal["episodic", "semantic", "procedural", "vault"]


ProposalStatus = Literal["pending", "conflict", "committed", "rejected", "deferred"]


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
