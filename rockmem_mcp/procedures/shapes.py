"""Procedures' shapes and limits: a procedure, its versions, its slug rule."""

from __future__ import annotations

import re
import unicodedata

from pydantic import BaseModel, ConfigDict, Field

from rockmem_mcp.errors import InvalidInputError
from rockmem_mcp.models import UseCount, UtcDatetime

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
