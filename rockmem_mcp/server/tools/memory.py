"""Long-term memory tools: save, search, get, update, delete, list categories."""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Annotated, Any, Literal, get_args

from mcp.server.mcpserver import Context, MCPServer, Resolve
from mcp.types import CreateMessageResult, ToolAnnotations
from pydantic import Field

from rockmem_mcp.core.workspace import SEARCH_HITS
from rockmem_mcp.errors import RockmemError
from rockmem_mcp.models import CategoryTree, DeleteResult, MemoryEntry, ProcedureHit, Remembered, SearchResults
from rockmem_mcp.search.rank import Mode
from rockmem_mcp.server.context import services
from rockmem_mcp.server.tools import reports_errors
from rockmem_mcp.server.tools.sampling import remember_route, sampled_text

Store = Literal["memories", "episodes", "procedures", "workspace"]
STORES: tuple[str, ...] = get_args(Store)
PROCEDURES_BESIDE = 3
EPISODES_BESIDE = 5  # episodes returned beside memories (all of `limit` when only episodes are asked for)

log = logging.getLogger(__name__)

EntryId = Annotated[str, Field(description="Memory id")]
Category = Annotated[
    str | None,
    Field(description="e.g. 'user-preferences/timezone' (letters, digits, -, _ and /)"),
]
Tags = Annotated[list[str] | None, Field(description="Short labels")]
Metadata = Annotated[dict[str, str] | None, Field(description="Key/value strings")]
Importance = Annotated[float | None, Field(ge=0, le=1, description="1: the user asked; 0.7 default; 0.5 inferred")]
Pinned = Annotated[bool | None, Field(description="Pin (never fades, no dream changes it) or unpin")]
Content = Annotated[str, Field(description="One focused fact")]


def register(server: MCPServer) -> None:
    @server.tool(
        title="Save a memory",
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False),
    )
    @reports_errors
    def save_memory(
        content: Content,
        ctx: Context,
        category: Category = None,
        tags: Tags = None,
        metadata: Metadata = None,
        importance: Importance = None,
        pinned: Pinned = None,
    ) -> MemoryEntry:
        """Save a durable fact, preference, decision or lesson ("Don't X — instead Y" under
        'anti-patterns/<domain>') to long-term memory, one per entry, reusing existing categories."""
        svc = services(ctx)
        entry = svc.memory.save(content, category, tags, metadata, importance, bool(pinned))
        try:  # the day's episode log gets a line (seed 003); the memory is saved whatever happens to it
            svc.episodes.log_save(entry)
        except (RockmemError, OSError) as exc:
            log.warning("memory %s saved, but its episode was not logged (%s)", entry.id, exc)
        if svc.enricher is not None:  # with a language model: expanded in the background, after the save
            svc.enricher.submit(entry)
        return entry

    @server.tool(
        title="Remember what the user asked",
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False),
    )
    @reports_errors
    def remember(
        content: Annotated[str, Field(description="What the user asked you to remember")],
        ctx: Context,
        route: Annotated[
            dict[str, Any] | None,
            Field(description="Your routing answer, when a reply asked for one"),
        ] = None,
        sampled: Annotated[CreateMessageResult | None, Resolve(remember_route)] = None,
    ) -> Remembered:
        """Keep what the user asked you to remember: routed to the right store (core, episodic, semantic,
        procedural or vault) with its entities and tags, in one step."""
        remembering = services(ctx).remembering
        assert remembering is not None
        return remembering.remember(content, route, sampled=sampled_text(sampled))

    @server.tool(title="Search memory", annotations=ToolAnnotations(read_only_hint=True))
    @reports_errors
    def search_memory(
        ctx: Context,
        query: Annotated[str | None, Field(description="Words to look for; omit for the newest")] = None,
        category: Annotated[str | None, Field(description="Only this category and its subcategories")] = None,
        tags: Annotated[list[str] | None, Field(description="Only entries with all of these")] = None,
        limit: Annotated[int, Field(ge=1, le=200, description="Most results to return")] = 20,
        created_after: Annotated[datetime | None, Field(description="ISO 8601")] = None,
        created_before: Annotated[datetime | None, Field(description="ISO 8601")] = None,
        include_archived: Annotated[bool, Field(description="Archived (deleted) ones too")] = False,
        include_dormant: Annotated[bool, Field(description="Dormant (long unused) ones too")] = False,
        mode: Annotated[
            Mode | None,
            Field(description="hybrid (words + meaning; default), bm25, vector or rockbot"),
        ] = None,
        stores: Annotated[
            list[Store] | None,
            Field(min_length=1, description="Only these (default all)"),
        ] = None,
    ) -> SearchResults:
        """Search long-term memory by words and meaning, best first with scores; also episodes ("last week"
        or a date in the query narrows them) and, unfiltered, procedures and workspace files. No query: the
        newest matching the filters."""
        svc = services(ctx)
        wanted = set(stores or STORES)
        svc.core.follow_hand_edit()  # a Critical Fact typed into MEMORY.md is pinned, so found, from now on
        if "memories" in wanted:
            found = svc.memory.search(
                query, category, tags, limit, created_after, created_before, include_archived, mode, include_dormant,
                True,
            )  # fmt: skip
        else:
            found = SearchResults(results=[], total_matches=0)
        # Workspace files and procedures have no category, tags, dates or archive: a filter leaves them out.
        filtered = category or tags or created_after or created_before or include_archived
        if "workspace" in wanted and query and not filtered:
            found.workspace = svc.workspace.search(query, min(limit, SEARCH_HITS))
        if "episodes" in wanted and not (category or include_archived):  # episodes have no category or archive
            only = wanted == {"episodes"}
            found.episodes, found.route = svc.episodes.find(
                query, limit if only else min(limit, EPISODES_BESIDE), created_after, created_before, tags,
                {hit.entry.id for hit in found.results}, logged_too=stores is not None,
            )  # fmt: skip
        if "procedures" in wanted and query and query.strip() and not filtered:
            try:
                found.procedures = [
                    ProcedureHit(procedure=svc.procedures.info(p), steps=p.steps, score=round(score, 4))
                    for score, p in svc.procedures.search(query, min(limit, PROCEDURES_BESIDE))
                ]
            except (RockmemError, OSError) as exc:  # beside the memories, a broken store costs them nothing
                if stores is not None:
                    raise
                log.warning("procedures left out of the search: %s", exc)
        return found

    @server.tool(title="Read a memory", annotations=ToolAnnotations(read_only_hint=True))
    @reports_errors
    def get_memory(id: EntryId, ctx: Context) -> MemoryEntry:
        """Read one memory in full (archived and dormant ones too)."""
        return services(ctx).memory.get(id, reinforce=True)

    @server.tool(
        title="Update a memory",
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True),
    )
    @reports_errors
    def update_memory(
        id: EntryId,
        ctx: Context,
        content: Annotated[str | None, Field(description="New content")] = None,
        category: Annotated[str | None, Field(description="New category ('' for none)")] = None,
        tags: Annotated[list[str] | None, Field(description="New tags")] = None,
        metadata: Annotated[dict[str, str] | None, Field(description="New metadata")] = None,
        importance: Importance = None,
        restore: Annotated[bool, Field(description="Bring back an archived memory")] = False,
        pinned: Pinned = None,
    ) -> MemoryEntry:
        """Correct or refile a memory when a fact changed, instead of saving a contradicting duplicate; only the
        fields you pass change."""
        return services(ctx).memory.update(id, content, category, tags, metadata, importance, restore, pinned)

    @server.tool(
        title="Delete a memory",
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True),
    )
    @reports_errors
    def delete_memory(
        id: EntryId,
        ctx: Context,
        permanent: Annotated[bool, Field(description="Erase instead of archive")] = False,
        reason: Annotated[str | None, Field(description="Why (kept with the archive)")] = None,
        confirm_pinned: Annotated[bool, Field(description="Needed for a pinned memory")] = False,
    ) -> DeleteResult:
        """Remove a wrong or outdated memory: archived (update_memory restore=true brings it back within 90 days)
        unless permanent, which erases it and its episode."""
        svc = services(ctx)
        if permanent:  # the episode that logged its content goes too, and the record's copies of its text
            return svc.erasure().delete_memory(id, reason, confirm_pinned)[0]
        return svc.memory.delete(id, permanent, reason, confirm_pinned=confirm_pinned)

    @server.tool(title="List memory categories", annotations=ToolAnnotations(read_only_hint=True))
    @reports_errors
    def list_memory_categories(ctx: Context) -> CategoryTree:
        """Every category path with its entry counts: reuse them when saving."""
        return services(ctx).memory.categories()
