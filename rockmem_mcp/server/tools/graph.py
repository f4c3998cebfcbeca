"""Knowledge-graph tools: add entities and triples, find, read, traverse, delete, merge.

`graph` does them all (the default surface); the one-tool-per-action names stay in the `classic` set.
"""

from __future__ import annotations

from typing import Annotated, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations
from pydantic import Field

from rockmem_mcp.errors import InvalidInputError
from rockmem_mcp.graph.shapes import (
    EntitiesAdded,
    EntitiesMerged,
    EntityDeleted,
    EntityDetail,
    EntityInput,
    EntitySearch,
    GraphAdded,
    Traversal,
    TripleDeleted,
    TripleInput,
    TriplesAdded,
)
from rockmem_mcp.server.context import services
from rockmem_mcp.server.tools import reports_errors

NameOrId = Annotated[str, Field(description="An entity's name or alias (any case) or its id")]


def register(server: MCPServer) -> None:
    @server.tool(
        title="Add entities to the graph",
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True),
    )
    @reports_errors
    def add_entities(
        entities: Annotated[list[EntityInput], Field(description="1 to 1000 entities")], ctx: Context
    ) -> EntitiesAdded:
        """Add people, projects, tools, topics… to the knowledge graph.

        A name or alias that already exists (in any case) returns that entity instead of a twin, with the new
        aliases and metadata added to it (`created` says which). Use triples to say how entities relate.
        """
        return services(ctx).graph.add_entities([e.model_dump(exclude_none=True) for e in entities])

    @server.tool(
        title="Add facts to the graph",
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True),
    )
    @reports_errors
    def add_triples(
        triples: Annotated[list[TripleInput], Field(description="1 to 1000 facts")], ctx: Context
    ) -> TriplesAdded:
        """Add facts that relate two entities: subject --predicate--> object, e.g. Alice --works_on--> RockBot.

        Entities are named by name, alias or id; unknown ones are created (type concept). Predicates are
        stored in snake_case (vocabulary: rockmem://graph-relations). A fact added again is kept once.
        """
        return services(ctx).graph.add_triples([t.model_dump(exclude_none=True) for t in triples])

    @server.tool(title="Find graph entities", annotations=ToolAnnotations(read_only_hint=True))
    @reports_errors
    def find_entities(
        ctx: Context,
        query: Annotated[str | None, Field(description="Words of the name, alias, type or metadata")] = None,
        type: Annotated[str | None, Field(description="Only entities of this type, e.g. 'person'")] = None,
        limit: Annotated[int, Field(ge=1, le=200, description="Most results to return")] = 20,
    ) -> EntitySearch:
        """Find entities by words (best first; names that merely contain the query follow), or list the
        newest without a query. Each result says how many triples touch it."""
        return services(ctx).graph.find_entities(query, type, limit, reinforce=True)

    @server.tool(title="Read a graph entity", annotations=ToolAnnotations(read_only_hint=True))
    @reports_errors
    def get_entity(name_or_id: NameOrId, ctx: Context) -> EntityDetail:
        """One entity with every triple touching it (outgoing first), with names on both ends."""
        return services(ctx).graph.get_entity(name_or_id, reinforce=True)

    @server.tool(title="Traverse the graph", annotations=ToolAnnotations(read_only_hint=True))
    @reports_errors
    def traverse_graph(
        start: NameOrId,
        ctx: Context,
        max_hops: Annotated[int, Field(ge=1, le=5, description="How far to walk (default 2)")] = 2,
        limit: Annotated[int, Field(ge=1, le=200, description="Most triples to return (default 15)")] = 15,
        min_confidence: Annotated[float, Field(ge=0, le=1, description="Skip triples below this confidence")] = 0,
    ) -> Traversal:
        """What is connected to an entity: a breadth-first walk along triples in both directions, nearest
        first, each triple once, cycles not followed twice. `truncated` says the limit cut it short."""
        return services(ctx).graph.traverse(start, max_hops, limit, min_confidence, reinforce=True)

    @server.tool(
        title="Delete a graph entity",
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False),
    )
    @reports_errors
    def delete_entity(name_or_id: NameOrId, ctx: Context) -> EntityDeleted:
        """Delete an entity and every triple touching it."""
        return services(ctx).graph.delete_entity(name_or_id)

    @server.tool(
        title="Delete a graph fact",
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False),
    )
    @reports_errors
    def delete_triple(
        id: Annotated[str, Field(description="The triple's id, from get_entity or traverse_graph")], ctx: Context
    ) -> TripleDeleted:
        """Delete one fact (its entities stay)."""
        return services(ctx).graph.delete_triple(id)

    @server.tool(
        title="Merge graph entities",
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False),
    )
    @reports_errors
    def merge_entities(
        keep: Annotated[str, Field(description="The entity that stays (name, alias or id)")],
        merge: Annotated[str, Field(description="The duplicate folded into it (name, alias or id)")],
        ctx: Context,
    ) -> EntitiesMerged:
        """Fold a duplicate entity into another: its name and aliases become aliases, its metadata fills gaps,
        its triples are re-pointed, and triples that become identical are folded into one."""
        return services(ctx).graph.merge_entities(keep, merge)

    @server.tool(
        name="graph",
        title="Knowledge graph",
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False),
    )
    @reports_errors
    def graph_tool(
        action: Annotated[
            Literal["add", "find", "get", "traverse", "delete", "merge"], Field(description="What to do")
        ],
        ctx: Context,
        triples: Annotated[list[TripleInput] | None, Field(description="add: Alice --works_on--> RockBot")] = None,
        entities: Annotated[list[EntityInput] | None, Field(description="add: with a type, aliases")] = None,
        name: Annotated[str | None, Field(description="An entity's name, alias or id (merge: the one kept)")] = None,
        merge: Annotated[str | None, Field(description="merge: the duplicate")] = None,
        triple_id: Annotated[str | None, Field(description="delete: this fact only")] = None,
        query: Annotated[str | None, Field(description="find: words")] = None,
        type: Annotated[str | None, Field(description="find: only this type")] = None,
        max_hops: Annotated[int, Field(ge=1, le=5, description="traverse: how far")] = 2,
        min_confidence: Annotated[float, Field(ge=0, le=1, description="traverse: skip facts below")] = 0,
        limit: Annotated[int | None, Field(ge=1, le=200, description="Most results")] = None,
    ) -> GraphAdded | EntitySearch | EntityDetail | Traversal | EntityDeleted | TripleDeleted | EntitiesMerged:
        """People, projects and how they relate: add facts (unknown entities are created), find entities, get one
        with its facts, traverse what is connected, delete an entity or a fact, merge a duplicate."""
        if action == "add":
            if triples is None and entities is None:
                raise InvalidInputError("graph add needs triples or entities")
            # Both lists are checked before either is written: a refused fact leaves no entity behind.
            services(ctx).graph.check_additions(
                [e.model_dump(exclude_none=True) for e in entities] if entities is not None else None,
                [t.model_dump(exclude_none=True) for t in triples] if triples is not None else None,
            )
            added = GraphAdded()
            if entities is not None:
                added.entities = add_entities(entities, ctx).entities
            if triples is not None:
                facts = add_triples(triples, ctx)
                added.triples, added.created_entities = facts.triples, facts.created_entities
            return added
        if action == "find":
            return find_entities(ctx, query or name, type, limit or 20)
        if action == "delete" and triple_id:
            if name:
                raise InvalidInputError("graph delete takes name (an entity and its facts) or triple_id, not both")
            return delete_triple(triple_id, ctx)
        if not name:
            needs = "name (or triple_id)" if action == "delete" else "name"
            raise InvalidInputError(f"graph {action} needs {needs}: an entity's name, alias or id")
        if action == "get":
            return get_entity(name, ctx)
        if action == "traverse":
            return traverse_graph(name, ctx, max_hops, limit or 15, min_confidence)
        if action == "delete":
            return delete_entity(name, ctx)
        if not merge:
            raise InvalidInputError("graph merge needs merge: the duplicate to fold into name")
        return merge_entities(name, merge, ctx)
