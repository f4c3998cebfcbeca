"""Working memory's shapes: an entry, what a get, save, list, search and delete return."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field


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
    evicted_keys: list[str] = Field(
        default_factory=list,
        description="Every key removed to make room, closest to expiry first (several when a large value needed "
        "the bytes of more than one); `evicted` is the first",
    )


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
