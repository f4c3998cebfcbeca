"""Core memory's and the workspace's shapes: a block of MEMORY.md, the view of all blocks, the workspace listing."""

from __future__ import annotations

from pydantic import BaseModel, Field


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
