"""What the web page shows and does, as plain functions over a running server's Services: each returns JSON-ready
data and changes memory only through the same services (and so the same checks, locks and audit lines) as the
MCP tools. The page's own changes are logged as `manual`: the user, by hand."""

from __future__ import annotations

import os
from datetime import datetime
from typing import Any

from rockmem_mcp.errors import InvalidInputError
from rockmem_mcp.models import ROOTS, CoreMemoryView, DreamReport, MemoryEntry
from rockmem_mcp.server.context import Services
from rockmem_mcp.services.audit import MANUAL, acting_as
from rockmem_mcp.services.decay import salience_listing
from rockmem_mcp.services.working import WorkingMemory
from rockmem_mcp.tokens import estimate_tokens

TIERS = ("active", "fading", "dormant", "archive_candidate")
STORES = ("memories", "episodes", "procedures")
UI_NAMESPACE = "session/ui"  # whose working memory the page is; it lists every namespace by root
MAX_LIMIT = 200
HISTORY_REPORTS = 60  # the decay passes the salience picture goes back over


def dump(model: Any) -> Any:
    return model.model_dump(mode="json", by_alias=True)


def _date(text: str | None, name: str) -> datetime | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        raise InvalidInputError(f"{name} must be a date such as 2026-11-28; got {text!r}") from None


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
    """Search or list one store by words, category, tag, tier and date (`params` as the page's query string). A tier
    is not an index column: its filter keeps the matching ones among the best (or newest) `search_limit_max`."""
    store = params.get("store") or "memories"
    if store not in STORES:
        raise InvalidInputError(f"store must be one of {', '.join(STORES)}; got {store!r}")
    query = (params.get("q") or "").strip() or None
    limit = _limit(params.get("limit"))
    after, before = _date(params.get("after"), "after"), _date(params.get("before"), "before")
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
    tier = params.get("tier") or None
    if tier is not None and tier not in TIERS:
        raise InvalidInputError(f"tier must be one of {', '.join(TIERS)}; got {tier!r}")
    archived = params.get("archived") == "true"
    scanned = svc.settings.search_limit_max if tier else limit
    found = svc.memory.search(query, params.get("category") or None, tags, scanned, after, before, archived, None, True)
    hits = [hit for hit in found.results if tier is None or hit.tier == tier]
    return {"store": store, "results": [dump(hit) for hit in hits[:limit]], "total": found.total_matches,
            "shown": min(len(hits), limit), "mode": found.mode}  # fmt: skip


def memory(svc: Services, entry_id: str) -> dict[str, Any]:
    """One memory with its history (every version with who changed it and why; without git, its audit lines)."""
    entry = svc.memory.get(entry_id)
    assert svc.audit_trail is not None
    try:
        history = dump(svc.audit_trail.item_history(entry_id, limit=20))
    except InvalidInputError as exc:  # e.g. an entry imported before the audit trail: no history to show
        history = {"entries": [], "versions": [], "note": str(exc)}
    except LookupError as exc:
        history = {"entries": [], "versions": [], "note": str(exc)}
    return {"entry": dump(entry), "history": history}


def edit_memory(svc: Services, entry_id: str, body: dict[str, Any]) -> MemoryEntry:
    """Change what `body` names: content, category, tags (a list or a comma-separated string), importance, pinned;
    `restore` brings an archived memory back first."""
    unknown = set(body) - {"content", "category", "tags", "importance", "pinned", "restore"}
    if unknown:
        raise InvalidInputError(f"unknown fields {', '.join(sorted(unknown))}")
    tags = body.get("tags")
    if isinstance(tags, str):
        tags = [t.strip() for t in tags.split(",") if t.strip()]
    with acting_as(MANUAL):
        return svc.memory.update(
            entry_id, body.get("content"), body.get("category"), tags, None, body.get("importance"),
            bool(body.get("restore")), body.get("pinned"),
        )  # fmt: skip


def archive_memory(svc: Services, entry_id: str, body: dict[str, Any]) -> Any:
    with acting_as(MANUAL):
        return svc.memory.delete(
            entry_id, False, body.get("reason") or "archived from the web page", confirm_pinned=bool(body.get("pinned"))
        )


def categories(svc: Services) -> Any:
    return svc.memory.categories()


def graph(svc: Services, params: dict[str, str]) -> dict[str, Any]:
    """An entity and its neighbourhood as nodes and edges; without one, the graph's newest entities to start from."""
    name = (params.get("entity") or "").strip()
    if not name:
        found = svc.graph.find_entities(params.get("q") or None, limit=30)
        return {"entities": [dump(hit) for hit in found.results], "stats": svc.graph.stats()}
    hops = int(params.get("hops") or 1)
    if not 1 <= hops <= 3:
        raise InvalidInputError("hops must be 1, 2 or 3")
    walk = svc.graph.traverse(name, max_hops=hops, limit=60)
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


def edit_core(svc: Services, body: dict[str, Any]) -> CoreMemoryView:
    """Replace one block's text, as read at `version` (an edit of a file changed since is refused)."""
    with acting_as(MANUAL):
        return svc.core.edit("replace_block", str(body.get("block", "")), str(body.get("version", "")),
                             text=str(body.get("text", "")))  # fmt: skip


def tokens(body: dict[str, Any]) -> dict[str, int]:
    """The token estimate core memory's caps are measured with, for the page's live counts."""
    return {"tokens": estimate_tokens(str(body.get("text", "")))}


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


def resolve_reflection(svc: Services, reflection_id: str, body: dict[str, Any]) -> Any:
    """approve, approve_with_changes (`edits`: action id -> fields), partial (`actions`), reject (`reason`)."""
    actions = body.get("actions") or None
    if actions is not None and not (isinstance(actions, list) and all(isinstance(a, str) for a in actions)):
        raise InvalidInputError("actions must be a list of action ids such as ['a1', 'a3']")
    edits = body.get("edits") or None
    if edits is not None and not isinstance(edits, dict):
        raise InvalidInputError("edits must map an action id to the fields to change")
    with acting_as(MANUAL):
        return svc.reflector().resolve(
            reflection_id, str(body.get("decision", "")), actions, edits, str(body.get("reason", ""))
        )


def decide_proposal(svc: Services, proposal_id: str, body: dict[str, Any]) -> Any:
    """commit (to its store, or `store`: approving with a change of store), reject (`reason`), defer."""
    proposals = svc.proposals
    assert proposals is not None
    action = body.get("action")
    with acting_as(MANUAL):
        if action == "commit":  # the user clicked it: their confirmation, whatever the review mode
            return proposals.commit(proposal_id, body.get("store") or None, user_confirmed=True)
        if action == "reject":
            return proposals.reject(proposal_id, str(body.get("reason") or ""))
        if action == "defer":
            return proposals.defer(proposal_id, str(body.get("reason") or ""))
    raise InvalidInputError(f"action must be commit, reject or defer; got {action!r}")


def audit(svc: Services, params: dict[str, str]) -> Any:
    assert svc.audit_trail is not None
    return svc.audit_trail.entries(
        file=params.get("item") or None, action=params.get("action") or None, actor=params.get("actor") or None,
        limit=_limit(params.get("limit") or "100"),
    )  # fmt: skip


def revert(svc: Services, body: dict[str, Any]) -> Any:
    """Put one item back (`item`, optionally `to` a version), or undo a whole run (`run`)."""
    rollback = svc.rollback
    assert rollback is not None
    item, run = body.get("item"), body.get("run")
    if bool(item) == bool(run):
        raise InvalidInputError("name exactly one of item or run")
    with acting_as(MANUAL):
        result = rollback.revert_item(str(item), body.get("to") or None) if item else rollback.revert_run(str(run))
    if svc.history is not None:
        svc.history.flush()
    return result


def salience(svc: Services) -> dict[str, Any]:
    """Memories per salience tier now, and as each decay pass (a dream's) recorded them before."""
    listing = salience_listing(svc.memory, "least", 10)
    folder = svc.settings.dream_reports_dir
    listed = os.listdir(folder) if folder.is_dir() else []
    names = sorted(n for n in listed if n.endswith(".json") and not n.startswith("."))
    past = []
    for name in names[-HISTORY_REPORTS:]:
        try:
            report = DreamReport.model_validate_json((folder / name).read_bytes())
        except (OSError, ValueError):  # a damaged report is left out of the picture
            continue
        if report.tiers and not report.dry_run:
            past.append({"at": report.started_at.isoformat(), "tiers": report.tiers})
    now = {name: listing.tiers.get(name, 0) for name in TIERS}
    return {"now": now, "pinned": listing.pinned, "least": dump(listing)["memories"], "history": past}
