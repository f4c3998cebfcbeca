"""Governance's shapes: what a forget and a revert return, a forgotten item kept for restore."""

from __future__ import annotations

from pydantic import BaseModel, Field

from rockmem_mcp.models import ForgetCandidate, ForgetStore, UtcDatetime


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
