"""Working-memory tools: save, get, delete, list, search scratch entries that expire.

`working_memory` does all five (the default surface); the one-tool-per-action names stay in the `classic` set.
"""

from __future__ import annotations

from typing import Annotated, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations
from pydantic import Field

from rockmem_mcp.errors import InvalidInputError
from rockmem_mcp.server.context import working_memory
from rockmem_mcp.server.tools import reports_errors
from rockmem_mcp.working.shapes import WorkingDeleted, WorkingEntry, WorkingListing, WorkingSaved, WorkingSearchResults

Key = Annotated[
    str,
    Field(
        description="'build-log' (your own namespace) or a full path: 'shared/plan/steps', 'subagent/t1/result' "
        "(another namespace: readable, writable only under shared/)"
    ),
]
Namespace = Annotated[
    str | None,
    Field(description="e.g. 'shared', 'patrol', 'subagent/t1'; default: your own namespace and shared/…"),
]


def register(server: MCPServer) -> None:
    @server.tool(
        title="Save to working memory",
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True),
    )
    @reports_errors
    def save_to_working_memory(
        key: Key,
        data: Annotated[str, Field(description="The value: text, or JSON as text (up to 1 MB by default)")],
        ctx: Context,
        ttl_minutes: Annotated[float, Field(gt=0, description="Minutes until it expires (default 5)")] = 5,
        category: Annotated[str | None, Field(description="Optional category path, e.g. 'tool-results'")] = None,
        tags: Annotated[list[str] | None, Field(description="Optional labels")] = None,
    ) -> WorkingSaved:
        """Park something for this task: a large tool result, a plan, a hand-off to a sub-agent.

        It expires after ttl_minutes. Keys without a namespace land in your own; 'shared/…' keys are
        visible to every agent on this memory. When your namespace is full (50 entries by default) the
        entry closest to expiry is evicted and `evicted` names it.
        """
        return working_memory(ctx).save(key, data, ttl_minutes, category, tags)

    @server.tool(title="Read from working memory", annotations=ToolAnnotations(read_only_hint=True))
    @reports_errors
    def get_from_working_memory(key: Key, ctx: Context) -> WorkingEntry:
        """Read one working-memory entry with its full value (any namespace, by full path)."""
        return working_memory(ctx).get(key)

    @server.tool(
        title="Delete from working memory",
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True),
    )
    @reports_errors
    def delete_from_working_memory(key: Key, ctx: Context) -> WorkingDeleted:
        """Remove a working-memory entry of your own namespace (or shared/…) before it expires."""
        working = working_memory(ctx)
        return WorkingDeleted(key=working.resolve(key), deleted=working.delete(key))

    @server.tool(title="List working memory", annotations=ToolAnnotations(read_only_hint=True))
    @reports_errors
    def list_working_memory(ctx: Context, namespace: Namespace = None) -> WorkingListing:
        """List live working-memory entries (keys, time left, category, tags, size; never the values)."""
        working = working_memory(ctx)
        return WorkingListing(namespace=working.namespace, entries=working.list(namespace))

    @server.tool(title="Search working memory", annotations=ToolAnnotations(read_only_hint=True))
    @reports_errors
    def search_working_memory(
        ctx: Context,
        query: Annotated[str | None, Field(description="Words to look for; omit to list the newest")] = None,
        category: Annotated[str | None, Field(description="Only this category and its subcategories")] = None,
        tags: Annotated[list[str] | None, Field(description="Only entries carrying all of these tags")] = None,
        namespace: Namespace = None,
        limit: Annotated[int, Field(ge=1, le=200, description="Most results to return")] = 20,
    ) -> WorkingSearchResults:
        """Search working memory, best first, with a 200-character preview of each value."""
        working = working_memory(ctx)
        hits = working.search(query, category, tags, namespace, limit)
        return WorkingSearchResults(namespace=working.namespace, results=hits)

    @server.tool(
        name="working_memory",
        title="Working memory",
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False),
    )
    @reports_errors
    def working_memory_tool(
        action: Annotated[Literal["save", "get", "delete", "list", "search"], Field(description="What to do")],
        ctx: Context,
        key: Annotated[str | None, Field(description="e.g. 'build-log' (yours), 'shared/plan' (every agent's)")] = None,
        data: Annotated[str | None, Field(description="save: text or JSON (≤ 1 MB)")] = None,
        ttl_minutes: Annotated[float, Field(gt=0, description="save: minutes until it expires")] = 5,
        query: Annotated[str | None, Field(description="search: words; omit for the newest")] = None,
        category: Annotated[str | None, Field(description="save: a path; search: only under it")] = None,
        tags: Annotated[list[str] | None, Field(description="save: labels; search: all of these")] = None,
        namespace: Annotated[str | None, Field(description="list/search: e.g. 'shared'; default yours")] = None,
        limit: Annotated[int, Field(ge=1, le=200, description="search: most results")] = 20,
    ) -> WorkingSaved | WorkingEntry | WorkingDeleted | WorkingListing | WorkingSearchResults:
        """Scratch notes that expire: a large tool result, a plan, a hand-off to a sub-agent. list: keys and
        sizes; search: previews; get: one value."""
        if action in ("save", "get", "delete") and not key:
            raise InvalidInputError(f"working_memory {action} needs a key")
        if action == "save":
            if data is None:
                raise InvalidInputError("working_memory save needs data (the value to keep)")
            return save_to_working_memory(key, data, ctx, ttl_minutes, category, tags)
        if action == "get":
            return get_from_working_memory(key, ctx)
        if action == "delete":
            return delete_from_working_memory(key, ctx)
        if action == "list":
            return list_working_memory(ctx, namespace)
        return search_working_memory(ctx, query, category, tags, namespace, limit)
