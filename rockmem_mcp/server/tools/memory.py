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

EntryId = Annotated[str, Field(description="Memory id, as returned by save_memory or search_memory")]
Category = Annotated[
    str | None,
    Field(description="Slash-separated path of letters, digits, '-' and '_', e.g. 'user-preferences/timezone'"),
]
Tags = Annotated[list[str] | None, Field(description="Short labels, e.g. ['email', 'work']")]
Metadata = Annotated[dict[str, str] | None, Field(description="Free string key/value pairs, e.g. {'source': 'user'}")]
Importance = Annotated[
    float | None, Field(ge=0, le=1, description="1 if the user asked you to remember it; default 0.7; 0.5 inferred")
]
Pinned = Annotated[bool | None, Field(description="Pin (true: never fades or changed by a dream) or unpin")]


def register(server: MCPServer) -> None:
    @server.tool(
        title="Save a memory",
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False),
    )
    @reports_errors
    def save_memory(
        content: Annotated[str, Field(description="One focused fact, preference, decision or lesson")],
        ctx: Context,
        category: Category = None,
        tags: Tags = None,
        metadata: Metadata = None,
        importance: Importance = None,
        pinned: Pinned = None,
    ) -> MemoryEntry:
        """Save something worth remembering across sessions to long-term memory.

        Use it for durable facts about the user or their projects, preferences, decisions and lessons
        learned (category 'anti-patterns/<domain>' for "Don't X — instead Y"). Keep one fact per entry and
        reuse existing categories (see list_memory_categories).
        """
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
            Field(
                description="Your routing answer, if a task asked for one: {store, summary, entities, relations, "
                "tags, confidence, core_update}"
            ),
        ] = None,
        sampled: Annotated[CreateMessageResult | None, Resolve(remember_route)] = None,
    ) -> Remembered:
        """Remember what the user asked you to keep, routed to the right store (core, episodic, semantic,
        procedural or vault) with its entities and tags, all written in one step."""
        remembering = services(ctx).remembering
        assert remembering is not None
        return remembering.remember(content, route, sampled=sampled_text(sampled))

    @server.tool(title="Search memory", annotations=ToolAnnotations(read_only_hint=True))
    @reports_errors
    def search_memory(
        ctx: Context,
        query: Annotated[str | None, Field(description="Words to look for; omit to list the newest entries")] = None,
        category: Annotated[str | None, Field(description="Only this category and its subcategories")] = None,
        tags: Annotated[list[str] | None, Field(description="Only entries carrying all of these tags")] = None,
        limit: Annotated[int, Field(ge=1, le=200, description="Most results to return")] = 20,
        created_after: Annotated[datetime | None, Field(description="ISO 8601; created at or after")] = None,
        created_before: Annotated[datetime | None, Field(description="ISO 8601; only entries created before")] = None,
        include_archived: Annotated[bool, Field(description="Also return archived (deleted) entries")] = False,
        include_dormant: Annotated[bool, Field(description="Also return dormant (long unused) entries")] = False,
        mode: Annotated[
            Mode | None,
            Field(description="Ranking: hybrid (keywords + meaning, default), bm25, vector (meaning), rockbot"),
        ] = None,
        stores: Annotated[
            list[Store] | None,
            Field(min_length=1, description="Only these stores (default: all); each hit names its store"),
        ] = None,
    ) -> SearchResults:
        """Search long-term memory, best first, with scores, e.g. 'user timezone'.

        With embeddings configured, hybrid also finds paraphrases (else keywords: `mode` in the reply says).
        No query: the newest entries matching the filters. Also searched: episodes ("last week", "on
        2026-03-04" in the query narrow them) and, without filters, procedures and workspace files.
        """
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
        """Read one memory entry in full by its id (archived and dormant entries too)."""
        return services(ctx).memory.get(id, reinforce=True)

    @server.tool(
        title="Update a memory",
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True),
    )
    @reports_errors
    def update_memory(
        id: EntryId,
        ctx: Context,
        content: Annotated[str | None, Field(description="New content; omit to keep")] = None,
        category: Annotated[str | None, Field(description="New category; '' for uncategorized; omit to keep")] = None,
        tags: Annotated[list[str] | None, Field(description="Replacement tag list; omit to keep")] = None,
        metadata: Annotated[dict[str, str] | None, Field(description="Replacement metadata; omit to keep")] = None,
        importance: Importance = None,
        restore: Annotated[bool, Field(description="Bring back an archived (deleted) memory")] = False,
        pinned: Pinned = None,
    ) -> MemoryEntry:
        """Correct or refile an existing memory; only the fields you pass change.

        Use it when a remembered fact changed (new address, revised decision) instead of saving a
        contradicting duplicate. An archived memory must be restored (restore=true) to change it.
        """
        return services(ctx).memory.update(id, content, category, tags, metadata, importance, restore, pinned)

    @server.tool(
        title="Delete a memory",
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True),
    )
    @reports_errors
    def delete_memory(
        id: EntryId,
        ctx: Context,
        permanent: Annotated[bool, Field(description="Erase the file instead of archiving it")] = False,
        reason: Annotated[str | None, Field(description="Why it is being removed (kept with the archive)")] = None,
        confirm_pinned: Annotated[bool, Field(description="Required to delete a pinned memory")] = False,
    ) -> DeleteResult:
        """Remove a memory that is wrong or no longer true.

        By default it is archived: kept on disk, hidden from search (include_archived shows it),
        restorable with update_memory(id, restore=true) for 90 days. permanent=true erases it and its episode.
        """
        svc = services(ctx)
        entry = svc.memory.get(id) if permanent else None
        result = svc.memory.delete(id, permanent, reason, confirm_pinned=confirm_pinned)
        if entry is not None:  # erased for good: so is the episode that logged its content
            svc.episodes.forget_memory(entry)
        return result

    @server.tool(title="List memory categories", annotations=ToolAnnotations(read_only_hint=True))
    @reports_errors
    def list_memory_categories(ctx: Context) -> CategoryTree:
        """List every category path with entry counts (direct and including subcategories).

        Call it before saving to reuse the existing organisation rather than inventing new categories.
        """
        return services(ctx).memory.categories()
