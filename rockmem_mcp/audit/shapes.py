"""The audit trail's shapes: an entry, an item's versions, what the audit tool returns."""

from __future__ import annotations

from pydantic import BaseModel, Field

from rockmem_mcp.models import UtcDatetime


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
