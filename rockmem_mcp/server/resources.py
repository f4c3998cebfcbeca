"""MCP resources: session-start context, recall for a query, one memory, the categories, the least and most
salient memories, entity pages and the relation vocabulary, the learnings (tool failures, corrections), a
working entry, the workspace files, the episode logs, the procedures, what was forgotten, sub-agents' proposals."""

from __future__ import annotations

import json
from collections.abc import Callable

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from rockmem_mcp.consolidation.decay import salience_listing
from rockmem_mcp.episodes.service import parse_day
from rockmem_mcp.errors import InvalidInputError, NotFoundError, RockmemError
from rockmem_mcp.graph.pages import entity_page
from rockmem_mcp.graph.relations import vocabulary_markdown
from rockmem_mcp.proposals.service import markdown
from rockmem_mcp.server.context import Services, default_session_id, services, working_memory
from rockmem_mcp.server.requests import RESOURCE_NOT_FOUND
from rockmem_mcp.server.tools import translating
from rockmem_mcp.text import visible


def _resource_error(exc: RockmemError) -> Exception:
    """A read error with the message; a memory, entity, day or file that is not there is "Resource not found",
    a malformed address INVALID_PARAMS."""
    if isinstance(exc, NotFoundError):
        return MCPError(RESOURCE_NOT_FOUND, str(exc))
    if isinstance(exc, InvalidInputError):  # the address is malformed (a bad id, not a day): the caller's to fix
        return MCPError(INVALID_PARAMS, str(exc))
    return ResourceError(str(exc))


reports_resource_errors = translating(_resource_error)


def register(server: MCPServer, current: Callable[[], Services]) -> None:
    """`current` gives the running server's services: static resources get no request context in this SDK,
    so they read the process's own working-memory namespace."""

    @server.resource("rockmem://recall", mime_type="text/markdown", title="Session-start context")
    @reports_resource_errors
    def session_start() -> str:
        """What to know at the start of a session: pinned and most salient memories, categories, working memory."""
        svc = current()
        return svc.recall.session_start(svc.working(None))

    @server.resource("rockmem://core", mime_type="text/markdown", title="Core memory (MEMORY.md)")
    @reports_resource_errors
    def core() -> str:
        """Core memory, always loaded: its four blocks with numbered lines, sizes against caps, and the version
        an edit (the core_memory tool) names."""
        view = current().core.read()
        notes = "".join(f"\n> Over its cap: {problem}" for problem in view.over_cap)
        return (
            f"# Core memory (MEMORY.md, version {view.version}, {view.tokens:,}/{view.cap:,} tokens)\n{notes}\n\n"
            + visible(view.text)
        )

    @server.resource("rockmem://recall/{query}", mime_type="text/plain", title="Recall for a query")
    @reports_resource_errors
    def recall_for(query: str, ctx: Context) -> str:
        """The recall block for `query`, without delta injection (reading it marks nothing as seen)."""
        return services(ctx).recall.build(query, default_session_id(ctx), working_memory(ctx), delta=False).text

    @server.resource("rockmem://memory/{id}", mime_type="application/json", title="One memory")
    @reports_resource_errors
    def memory_entry(id: str, ctx: Context) -> str:
        return services(ctx).memory.get(id).model_dump_json(indent=2)

    @server.resource("rockmem://proposals", mime_type="text/markdown", title="Sub-agents' memory proposals")
    @reports_resource_errors
    def proposals() -> str:
        """Open proposals of sub-agents with gated writes (seed 004 §13.2's pending-memories.md): each with who,
        when, suggested store, content, confidence and status; conflicting ones name each other."""
        found = current().proposals
        assert found is not None  # the lifespan builds it
        return visible(markdown([*found.pending(), *found.deferred()]))

    @server.resource("rockmem://categories", mime_type="application/json", title="Memory categories")
    @reports_resource_errors
    def categories() -> str:
        return current().memory.categories().model_dump_json(indent=2)

    @server.resource("rockmem://categories/{+path}", mime_type="application/json", title="Memories in a category")
    @reports_resource_errors
    def category_entries(path: str) -> str:
        """The newest live memories filed under `path` and its subcategories (up to the search limit), with the
        count in all."""
        memory = current().memory
        return memory.search(None, category=path, limit=memory.settings.search_limit_max).model_dump_json(indent=2)

    @server.resource("rockmem://tags/{tag}", mime_type="application/json", title="Memories with a tag")
    @reports_resource_errors
    def tag_entries(tag: str) -> str:
        """The newest live memories carrying `tag` (up to the search limit), with the count in all."""
        memory = current().memory
        return memory.search(None, tags=[tag], limit=memory.settings.search_limit_max).model_dump_json(indent=2)

    @server.resource("rockmem://salience", mime_type="application/json", title="Least and most salient memories")
    @reports_resource_errors
    def salience() -> str:
        """The 20 least and 20 most salient memories (id, tier, salience, uses, last use, first words) and the
        count per tier, and the episodes' and procedures' counts per tier: what is fading and what is alive."""
        svc = current()
        least, most = salience_listing(svc.memory, "least"), salience_listing(svc.memory, "most")
        return json.dumps(
            {"tiers": least.tiers, "pinned": least.pinned, "least": least.model_dump(mode="json")["memories"],
             "most": most.model_dump(mode="json")["memories"],
             "episodes": {"tiers": svc.episodes.tier_counts()}, "procedures": {"tiers": svc.procedures.tier_counts()}},
            indent=2, ensure_ascii=False,
        )  # fmt: skip

    @server.resource("rockmem://graph/{entity}", mime_type="text/markdown", title="An entity and its neighbourhood")
    @reports_resource_errors
    def graph_entity(entity: str, ctx: Context) -> str:
        """An entity (by name, alias or id) with the triples within 2 hops, as recall shows them."""
        walk = services(ctx).graph.traverse(entity, max_hops=2, limit=50)
        found = walk.start
        lines = [f"# {found.name} ({found.type}) [{found.id}]"]
        if found.aliases:
            lines.append(f"Aliases: {', '.join(found.aliases)}")
        lines += [f"{key}: {value}" for key, value in found.metadata.items()]
        lines += ["", f"Within 2 hops ({len(walk.facts)} triples{', truncated' if walk.truncated else ''}):"]
        lines += [fact.line() for fact in walk.facts] or ["(no triples yet)"]
        return "\n".join(lines)

    @server.resource("rockmem://episodes", mime_type="application/json", title="Episode logs by day")
    @reports_resource_errors
    def episode_days() -> str:
        """Every day with an episode log, newest first: its resource and how many episodes it holds."""
        days = current().episodes.days()
        return json.dumps(
            [{"day": d.isoformat(), "episodes": n, "resource": f"rockmem://episodes/{d.isoformat()}"}
             for d, n in reversed(days)],
            indent=2,
        )  # fmt: skip

    @server.resource("rockmem://episodes/{day}", mime_type="text/markdown", title="A day's episode log")
    @reports_resource_errors
    def episode_log(day: str, ctx: Context) -> str:
        """A day's episodes (UTC, YYYY-MM-DD) as the seed's markdown log: `## HH:MM | type | confidence | tags`."""
        return visible(services(ctx).episodes.markdown(parse_day(day)))

    @server.resource("rockmem://entities/{name}", mime_type="text/markdown", title="An entity's page")
    @reports_resource_errors
    def entity_page_for(name: str, ctx: Context) -> str:
        """An entity's page (by name, alias or id): summary, facts, timeline, open questions and relations, built
        from the graph and the memories that name it; about 4,000 tokens at most."""
        svc = services(ctx)
        return entity_page(svc.graph, svc.memory, name)

    @server.resource("rockmem://graph-relations", mime_type="text/markdown", title="The relation vocabulary")
    @reports_resource_errors
    def graph_relations() -> str:
        """The documented predicates (structural, temporal, qualitative) with their meaning, inverse and how
        many triples use each here, then the free predicates in use."""
        return vocabulary_markdown(current().graph.predicate_counts())

    @server.resource("rockmem://dream/latest", mime_type="application/json", title="The latest dream report")
    @reports_resource_errors
    def latest_dream() -> str:
        return current().dreamer().report().model_dump_json(indent=2)

    @server.resource("rockmem://learnings/errors", mime_type="text/markdown", title="Learnings: tool failures")
    @reports_resource_errors
    def learnings_errors() -> str:
        """Tool failures recorded with record_feedback (type ToolFailure), newest first (the 200 newest), each
        with its time, session and metadata: what went wrong before, so you do not repeat it."""
        return current().learnings.markdown("errors")

    @server.resource("rockmem://learnings/corrections", mime_type="text/markdown", title="Learnings: corrections")
    @reports_resource_errors
    def learnings_corrections() -> str:
        """User corrections recorded with record_feedback (type Correction), newest first (the 200 newest),
        each with its time, session and metadata."""
        return current().learnings.markdown("corrections")

    @server.resource("rockmem://working/{+key}", mime_type="application/json", title="A working-memory entry")
    @reports_resource_errors
    def working_entry(key: str, ctx: Context) -> str:
        """A working-memory entry by its full path, e.g. rockmem://working/shared/plan/steps."""
        return working_memory(ctx).get(key).model_dump_json(indent=2)

    @server.resource("rockmem://workspace", mime_type="application/json", title="Workspace files")
    @reports_resource_errors
    def workspace_files() -> str:
        """Which of AGENTS.md, SOUL.md, USER.md, HEARTBEAT.md are in the data home: each file's resource, size in
        bytes and tokens, and version (what write_workspace_file takes)."""
        return current().workspace.files().model_dump_json(indent=2)

    @server.resource("rockmem://workspace/{name}", mime_type="text/markdown", title="A workspace file")
    @reports_resource_errors
    def workspace_file(name: str, ctx: Context) -> str:
        """A workspace file's text as it is in the data home, e.g. rockmem://workspace/SOUL.md (terminal control
        characters shown as \\u escapes, as in rockmem://core)."""
        return visible(services(ctx).workspace.read(name).text)

    @server.resource("rockmem://forgotten", mime_type="application/json", title="Forgotten items")
    @reports_resource_errors
    def forgotten() -> str:
        """What was soft-forgotten (the 100 newest first): id, store, text, when and why; the forget tool with
        restore=true and these ids brings them back."""
        forgetting = current().forgetting
        items = forgetting.forgotten() if forgetting is not None else []
        return json.dumps([item.model_dump(mode="json") for item in items], indent=2, ensure_ascii=False)

    @server.resource("rockmem://procedures", mime_type="application/json", title="Procedures")
    @reports_resource_errors
    def procedures() -> str:
        """Every learned procedure (archived ones marked): name, trigger phrases, version, last update and the
        resource to read it by."""
        store = current().procedures
        listing = [store.info(p).model_dump(mode="json", exclude={"done"}) for p in store.list(include_archived=True)]
        return json.dumps(listing, indent=2, ensure_ascii=False)

    @server.resource("rockmem://procedures/{name}", mime_type="text/markdown", title="A procedure")
    @reports_resource_errors
    def procedure(name: str, ctx: Context) -> str:
        """A procedure as markdown: trigger, numbered steps, notes, where it was learned, and its history (one
        line per version); its version is what save_procedure takes to update it."""
        return services(ctx).procedures.markdown(name)

    @server.resource("rockmem://audit", mime_type="text/plain", title="The audit trail")
    @reports_resource_errors
    def audit_trail() -> str:
        """The 100 newest audit lines, newest first: TIMESTAMP | ACTION | FILE | ACTOR | APPROVAL | SUMMARY (the
        audit tool filters them and shows an item's versions; revert puts things back)."""
        trail = current().audit_trail
        entries = trail.entries(limit=100) if trail is not None else []
        return visible(
            "\n".join(
                f"{e.time:%Y-%m-%dT%H:%M:%S}Z | {e.action} | {e.file} | {e.actor} | {e.approval} | {e.summary}"
                for e in entries
            )
        )

    @server.resource("rockmem://reflections", mime_type="text/markdown", title="Pending reflections")
    @reports_resource_errors
    def pending_reflections() -> str:
        """The reflections waiting for the user's approval, as meta/pending-reflection.md shows them (the
        reflect tool resolves one)."""
        reflections = current().reflector().pending()
        return visible("\n\n---\n\n".join(r.summary for r in reflections) or "No reflection is waiting for approval.\n")

    @server.resource("rockmem://history/{item}", mime_type="application/json", title="An item's history")
    @reports_resource_errors
    def item_history(item: str, ctx: Context) -> str:
        """Every version of a memory (by id), entity, procedure or file, newest first, with who changed it, when,
        with what approval and why; a version's commit is what revert takes as `to`."""
        trail = services(ctx).audit_trail
        assert trail is not None  # the lifespan builds it
        return trail.item_history(item).model_dump_json(indent=2)
