"""What the web page shows and does, as plain functions over a running server's Services: each returns JSON-ready
data and changes memory only through the same services (and so the same checks, locks and audit lines) as the
MCP tools. The page's own changes are logged as `manual`: the user, by hand."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from rockmem_mcp.audit.service import MANUAL, acting_as
from rockmem_mcp.consolidation.decay import salience_listing
from rockmem_mcp.consolidation.dream_reports import report_store
from rockmem_mcp.core.shapes import CoreMemoryView
from rockmem_mcp.errors import ChangedSinceReadError, InvalidInputError
from rockmem_mcp.models import ROOTS, MemoryEntry
from rockmem_mcp.proposals.shapes import ProposalStore
from rockmem_mcp.server.context import Services
from rockmem_mcp.tokens import estimate_tokens
from rockmem_mcp.working.service import WorkingMemory

TIERS = ("active", "fading", "dormant", "archive_candidate")
STORES = ("memories", "episodes", "procedures")
UI_NAMESPACE = "session/ui"  # whose working memory the page is; it lists every namespace by root
MAX_LIMIT = 200
HISTORY_REPORTS = 60  # the decay passes the salience picture goes back over


def dump(model: Any) -> Any:
    return model.model_dump(mode="json", by_alias=True)


def _date(text: str | None, name: str, through_the_day: bool = False) -> datetime | None:
    """A date or a time; with `through_the_day`, a bare date means the end of that day (a range "to" a day the
    user picked includes it)."""
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidInputError(f"{name} must be a date such as 2026-11-28; got {text!r}") from None
    return moment + timedelta(days=1) if through_the_day and len(text) == len("2026-11-28") else moment


def _limit(text: str | None) -> int:
    try:
        limit = int(text or 50)
    except ValueError:
        raise InvalidInputError(f"limit must be a whole number; got {text!r}") from None
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidInputError(f"limit must be from 1 to {MAX_LIMIT}; got {limit}")
    return limit


def status(svc: Services) -> dict[str, Any]:
    read_only = svc.memory.read_only is not None
    return {"home": str(svc.settings.home), "memories": len(svc.memory.index), "read_only": read_only}


def memories(svc: Services, params: dict[str, str]) -> dict[str, Any]:
    """Search or list one store (`params` as the page's query string): memories by words, category, tag, salience
    tier, dates and archived; episodes by words, tag and dates; procedures by words and archived."""
    store = params.get("store") or "memories"
    if store not in STORES:
        raise InvalidInputError(f"store must be one of {', '.join(STORES)}; got {store!r}")
    query = (params.get("q") or "").strip() or None
    limit = _limit(params.get("limit"))
    after, before = _date(params.get("after"), "after"), _date(params.get("before"), "before", through_the_day=True)
    tags = [params["tag"]] if params.get("tag") else None
    if store == "episodes":
        found, _route = svc.episodes.find(query, limit, after, before, tags, set(), logged_too=True)
        return {"store": store, "episodes": [dump(hit) for hit in found], "total": len(found)}
    if store == "procedures":
        listed = svc.procedures.list(include_archived=params.get("archived") == "true")
        if query:
            listed = [p for _score, p in svc.procedures.search(query, limit)]
        return {"store": store, "procedures": [dump(svc.procedures.info(p)) for p in listed[:limit]],
                "total": len(listed)}  # fmt: skip
    archived = params.get("archived") == "true"
    # A person browsing is not the agent using a memory: no reinforcement (salience stays the agent's).
    found = svc.memory.search(query, params.get("category") or None, tags, limit, after, before, archived,
                              tier=params.get("tier") or None)  # fmt: skip
    return {"store": store, "results": [dump(hit) for hit in found.results], "total": found.total_matches,
            "shown": len(found.results), "mode": found.mode}  # fmt: skip


def memory(svc: Services, entry_id: str) -> dict[str, Any]:
    """One memory with its history (every version with who changed it and why; without git, its audit lines)."""
    entry = svc.memory.get(entry_id)
    assert svc.audit_trail is not None
    try:
        history = dump(svc.audit_trail.item_history(entry_id, limit=20))
    except (InvalidInputError, LookupError) as exc:  # e.g. imported before the audit trail: no history to show
        history = {"entries": [], "versions": [], "note": str(exc)}
    return {"entry": dump(entry), "history": history}


class Body(BaseModel):
    """A change the page sends: exactly these fields, each of its own JSON type (no "false" read as true)."""

    model_config = ConfigDict(extra="forbid", strict=True)


class MemoryEdit(Body):
    content: str | None = None
    category: str | None = None
    tags: list[str] | None = None
    importance: float | None = Field(None, ge=0, le=1)
    pinned: bool | None = None
    restore: bool = False
    read_version: str | None = Field(None, description="The entry's updated_at (else created_at) as the page read it")


class Archive(Body):
    reason: str | None = None
    confirm_pinned: bool = False


class CoreEdit(Body):
    block: str
    version: str
    text: str


class Tokens(Body):
    text: str


class ReflectionDecision(Body):
    decision: Literal["approve", "approve_with_changes", "partial", "reject"]
    actions: list[str] | None = None
    edits: dict[str, dict[str, Any]] | None = None
    reason: str = ""


class ProposalDecision(Body):
    action: Literal["commit", "reject", "defer"]
    store: ProposalStore | None = None  # commit: another store than suggested (the review tool's choices)
    reason: str = ""


class Revert(Body):
    item: str | None = None
    to: str | None = None
    run: str | None = None


def _same_version(entry: MemoryEntry, read_version: str) -> bool:
    """Whether `entry` is as the page read it (its updated_at, else created_at, as the page got it in JSON)."""
    try:
        return (entry.updated_at or entry.created_at) == datetime.fromisoformat(read_version)
    except ValueError:
        raise InvalidInputError(f"read_version must be the time the page read; got {read_version!r}") from None


def edit_memory(svc: Services, entry_id: str, body: MemoryEdit) -> MemoryEntry:
    """Change the fields `body` names; `restore` brings an archived memory back first. With `read_version`, a
    memory changed since the page read it (by an agent, say) is refused rather than overwritten."""
    with svc.memory.locked([entry_id]), acting_as(MANUAL):  # the check and the change, one step for other writers
        if body.read_version is not None and not _same_version(svc.memory.get(entry_id), body.read_version):
            raise ChangedSinceReadError(
                f"memory {entry_id} changed since you opened it; open it again to see the change, then edit"
            )
        return svc.memory.update(
            entry_id, body.content, body.category, body.tags, None, body.importance, body.restore, body.pinned
        )


def archive_memory(svc: Services, entry_id: str, body: Archive) -> Any:
    with acting_as(MANUAL):
        reason = body.reason or "archived from the web page"
        return svc.memory.delete(entry_id, False, reason, confirm_pinned=body.confirm_pinned)


def categories(svc: Services) -> Any:
    return svc.memory.categories()


def graph(svc: Services, params: dict[str, str]) -> dict[str, Any]:
    """An entity and its neighbourhood as nodes and edges; without one, the graph's newest entities to start from."""
    name = (params.get("entity") or "").strip()
    if not name:
        found = svc.graph.find_entities(params.get("q") or None, limit=30)
        return {"entities": [dump(hit) for hit in found.results], "stats": svc.graph.stats()}
    hops = params.get("hops") or "1"
    if hops not in ("1", "2", "3"):
        raise InvalidInputError(f"hops must be 1, 2 or 3; got {hops!r}")
    walk = svc.graph.traverse(name, max_hops=int(hops), limit=60)
    nodes = {walk.start.id: {"id": walk.start.id, "name": walk.start.name, "type": walk.start.type, "hop": 0}}
    for fact in walk.facts:
        for entity_id, entity_name in ((fact.subject_id, fact.subject), (fact.object_id, fact.object)):
            nodes.setdefault(entity_id, {"id": entity_id, "name": entity_name, "hop": fact.hop})
    edges = [
        {"id": f.id, "from": f.subject_id, "to": f.object_id, "predicate": f.predicate, "confidence": f.confidence}
        for f in walk.facts
    ]
    return {"start": walk.start.id, "nodes": list(nodes.values()), "edges": edges, "truncated": walk.truncated}


def core(svc: Services) -> CoreMemoryView:
    return svc.core.read()


def edit_core(svc: Services, body: CoreEdit) -> CoreMemoryView:
    """Replace one block's text, as read at `version` (an edit of a file changed since is refused)."""
    with acting_as(MANUAL):
        return svc.core.edit("replace_block", body.block, body.version, text=body.text)


def tokens(body: Tokens) -> dict[str, int]:
    """The token estimate core memory's caps are measured with, for the page's live counts."""
    return {"tokens": estimate_tokens(body.text)}


def working(svc: Services) -> dict[str, Any]:
    """Every live working-memory entry (no values), by namespace, soonest to expire first."""
    view = WorkingMemory(svc.settings, UI_NAMESPACE)
    entries = [dump(info) for root in ROOTS for info in view.list(root)]
    entries.sort(key=lambda info: info["expires_at"])
    return {"entries": entries}


def review(svc: Services) -> dict[str, Any]:
    """Reflections waiting for approval and sub-agents' open proposals."""
    assert svc.proposals is not None
    return {
        "reflections": [dump(r) for r in svc.reflector().pending()],
        "proposals": [dump(p) for p in [*svc.proposals.pending(), *svc.proposals.deferred()]],
        "review_mode": svc.settings.proposal_review,
    }


def resolve_reflection(svc: Services, reflection_id: str, body: ReflectionDecision) -> Any:
    """approve, approve_with_changes (`edits`: action id -> fields), partial (`actions`), reject (`reason`)."""
    with acting_as(MANUAL):
        return svc.reflector().resolve(reflection_id, body.decision, body.actions, body.edits, body.reason)


def decide_proposal(svc: Services, proposal_id: str, body: ProposalDecision) -> Any:
    """commit (to its store, or `store`: approving with a change of store), reject (`reason`), defer."""
    proposals = svc.proposals
    assert proposals is not None
    with acting_as(MANUAL):
        if body.action == "commit":  # the user clicked it: their confirmation, whatever the review mode
            return proposals.commit(proposal_id, body.store, user_confirmed=True)
        if body.action == "reject":
            return proposals.reject(proposal_id, body.reason)
        return proposals.defer(proposal_id, body.reason)


def audit(svc: Services, params: dict[str, str]) -> Any:
    assert svc.audit_trail is not None
    return svc.audit_trail.entries(
        file=params.get("item") or None, action=params.get("action") or None, actor=params.get("actor") or None,
        limit=_limit(params.get("limit") or "100"),
    )  # fmt: skip


def revert(svc: Services, body: Revert) -> Any:
    """Put one item back (`item`, optionally `to` a version or a time), or undo a whole run (`run`)."""
    rollback = svc.rollback
    assert rollback is not None
    if bool(body.item) == bool(body.run):
        raise InvalidInputError("name exactly one of item or run")
    with acting_as(MANUAL):
        result = rollback.revert_item(body.item, body.to) if body.item else rollback.revert_run(str(body.run))
    if svc.history is not None:
        svc.history.flush()
    return result


def salience(svc: Services) -> dict[str, Any]:
    """Memories per salience tier now, and as each decay pass (a dream's) recorded them before."""
    listing = salience_listing(svc.memory, "least", 10)
    reports = report_store(svc.settings)
    past = []
    for report_id in reports.ids()[-HISTORY_REPORTS:]:
        try:
            report = reports.read(report_id)
        except (OSError, ValueError):  # a damaged report is left out of the picture
            continue
        if report.tiers and not report.dry_run:
            past.append({"at": report.started_at.isoformat(), "tiers": report.tiers})
    now = {name: listing.tiers.get(name, 0) for name in TIERS}
    return {"now": now, "pinned": listing.pinned, "least": dump(listing)["memories"], "history": past}
