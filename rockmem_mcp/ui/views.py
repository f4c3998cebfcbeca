"""What the web page shows and does, as plain functions over a running server's Services: each returns JSON-ready
data and changes memory only through the same services (and so the same checks, locks and audit lines) as the
MCP tools. The page's own changes are logged as `manual`: the user, by hand."""

from __future__ import annotations

import contextlib
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from rockmem_mcp.audit.service import MANUAL, acting_as
from rockmem_mcp.consolidation.decay import salience_listing
from rockmem_mcp.consolidation.dream_reports import report_store
from rockmem_mcp.consolidation.shapes import DreamAction
from rockmem_mcp.core.shapes import CoreMemoryView
from rockmem_mcp.errors import ChangedSinceReadError, InvalidInputError, NotFoundError, RockmemError
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
OVERVIEW_ENTITIES = 15  # the graph tab opens on the busiest entities, and the facts between them
RUN_LINES = 500  # the changes of one run a confirmation lists, at most
MAX_CONTRADICTIONS_SHOWN = 50  # as many as a reflection lists


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
    if moment.tzinfo is None:  # a date or time without a zone is UTC, as stored times are
        moment = moment.replace(tzinfo=UTC)
    return moment + timedelta(days=1) if through_the_day and len(text) == len("2026-11-28") else moment


def _limit(text: str | None) -> int:
    try:
        limit = int(text or 50)
    except ValueError:
        raise InvalidInputError(f"limit must be a whole number; got {text!r}") from None
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidInputError(f"limit must be from 1 to {MAX_LIMIT}; got {limit}")
    return limit


def _offset(text: str | None) -> int:
    try:
        offset = int(text or 0)
    except ValueError:
        raise InvalidInputError(f"offset must be a whole number; got {text!r}") from None
    if offset < 0:
        raise InvalidInputError(f"offset must be 0 or more; got {offset}")
    return offset


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
    limit, offset = _limit(params.get("limit")), _offset(params.get("offset"))
    after, before = _date(params.get("after"), "after"), _date(params.get("before"), "before", through_the_day=True)
    tags = [params["tag"]] if params.get("tag") else None
    if store == "episodes":
        # One more than the page: whether there is a next one (episodes are found up to a limit, not counted).
        found, _route = svc.episodes.find(query, offset + limit + 1, after, before, tags, set(), logged_too=True)
        page = found[offset : offset + limit]
        more = len(found) > offset + limit
        return {"store": store, "episodes": [dump(hit) for hit in page], "offset": offset,
                "total": offset + len(page) + (1 if more else 0), "more": more}  # fmt: skip
    if store == "procedures":
        listed = svc.procedures.list(include_archived=params.get("archived") == "true")
        if query:
            listed = [p for _score, p in svc.procedures.search(query, offset + limit)]
        page = listed[offset : offset + limit]
        return {"store": store, "procedures": [dump(svc.procedures.info(p)) for p in page], "offset": offset,
                "total": len(listed), "more": offset + len(page) < len(listed)}  # fmt: skip
    archived = params.get("archived") == "true"
    # A person browsing is not the agent using a memory: no reinforcement (salience stays the agent's).
    found = svc.memory.search(query, params.get("category") or None, tags, limit, after, before, archived,
                              tier=params.get("tier") or None, offset=offset)  # fmt: skip
    return {"store": store, "results": [dump(hit) for hit in found.results], "total": found.total_matches,
            "shown": len(found.results), "offset": offset, "mode": found.mode,
            "more": offset + len(found.results) < found.total_matches}  # fmt: skip


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


class NewMemory(Body):
    content: str
    category: str | None = None
    tags: list[str] = Field(default_factory=list)
    importance: float | None = Field(None, ge=0, le=1)
    pinned: bool = False


class Erase(Body):
    confirm_pinned: bool = False


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


def create_memory(svc: Services, body: NewMemory) -> MemoryEntry:
    """A new memory typed on the page, saved as save_memory saves one (and logged in the day's episodes)."""
    with acting_as(MANUAL):
        entry = svc.memory.save(body.content, body.category or None, body.tags, None, body.importance, body.pinned)
        svc.episodes.log_save(entry)
    return entry


def erase_memory(svc: Services, entry_id: str, body: Erase) -> Any:
    """Delete a memory for good (its file, vector, the episode that logged it and the record's copies of its text),
    as delete_memory permanent does; the page has asked the user first, naming its text."""
    with acting_as(MANUAL):
        reason = "deleted for good from the web page"
        return svc.erasure().delete_memory(entry_id, reason, confirm_pinned=body.confirm_pinned)[0]


def archive_memory(svc: Services, entry_id: str, body: Archive) -> Any:
    with acting_as(MANUAL):
        reason = body.reason or "archived from the web page"
        return svc.memory.delete(entry_id, False, reason, confirm_pinned=body.confirm_pinned)


def categories(svc: Services) -> Any:
    return svc.memory.categories()


def graph(svc: Services, params: dict[str, str]) -> dict[str, Any]:
    """An entity and its neighbourhood as nodes and edges; without one, an overview: the busiest entities (most
    facts) and the facts between them, with the graph's newest entities to start from."""
    name = (params.get("entity") or "").strip()
    if not name:
        found = svc.graph.find_entities(params.get("q") or None, limit=30)
        return {"entities": [dump(hit) for hit in found.results], "stats": svc.graph.stats(), **_overview(svc)}
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


def _overview(svc: Services) -> dict[str, Any]:
    entities, triples = svc.graph.records()
    degree: Counter[str] = Counter()
    for triple in triples:
        degree.update({triple.subject, triple.object})
    busiest = {entity_id for entity_id, _ in degree.most_common(OVERVIEW_ENTITIES)}
    nodes = [{"id": e.id, "name": e.name, "type": e.type, "facts": degree[e.id]} for e in entities if e.id in busiest]
    nodes.sort(key=lambda node: (-node["facts"], node["name"]))
    edges = [
        {"id": t.id, "from": t.subject, "to": t.object, "predicate": t.predicate, "confidence": t.confidence}
        for t in triples
        if t.subject in busiest and t.object in busiest
    ]
    return {"nodes": nodes, "edges": edges}


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
    """Every live working-memory entry with its value, by namespace, soonest to expire first (an entry that
    expires between the listing and its read is left out)."""
    view = WorkingMemory(svc.settings, UI_NAMESPACE)
    entries = []
    for root in ROOTS:
        for info in view.list(root):
            try:
                value = view.get(info.key).data
            except NotFoundError:
                continue
            entries.append({**dump(info), "data": value})
    entries.sort(key=lambda info: info["expires_at"])
    return {"entries": entries}


def review(svc: Services) -> dict[str, Any]:
    """Reflections waiting for approval, contradictions waiting for the user, and sub-agents' open proposals."""
    assert svc.proposals is not None
    reflections = []
    for reflection in svc.reflector().pending():
        shown = dump(reflection)
        for action in shown["actions"]:
            action["before"] = [_memory_text(svc, entry_id) for entry_id in _named_ids(action)]
            if action["kind"] == "core":  # a block rewritten (Critical Facts: lines added): the block as it is now
                action["before"] = [_core_block(svc, str(action["item"].get("block", "")))]
        reflections.append(shown)
    open_ = [*svc.proposals.pending(), *svc.proposals.deferred()]
    contents = {p.id: p.content for p in open_}
    proposals = []
    for proposal in open_:
        shown = dump(proposal)
        shown["before"] = [
            {"id": i, "text": contents.get(i), "missing": i not in contents} for i in proposal.conflict_with
        ]
        proposals.append(shown)
    return {
        "reflections": reflections,
        "contradictions": _open_contradictions(svc),
        "proposals": proposals,
        "review_mode": svc.settings.proposal_review,
    }


def _open_contradictions(svc: Services) -> list[dict[str, Any]]:
    """The contradictions the latest reflection and the latest dream found whose memories are all still live,
    each with their texts: a dream merges none of them, the user decides which is right (seed 004: detected,
    never resolved silently). Archiving one of a pair takes it off this list."""
    found: list[DreamAction] = []
    with contextlib.suppress(RockmemError):  # an unreadable record: the other's still show
        if (latest := svc.reflector().latest()) is not None:
            found += latest.conflicts
    with contextlib.suppress(RockmemError):  # no dream yet, or its report unreadable
        found += svc.dreamer().report().contradictions
    shown: dict[frozenset[str], dict[str, Any]] = {}
    for conflict in found:
        key = frozenset(conflict.ids)
        if key in shown or len(shown) >= MAX_CONTRADICTIONS_SHOWN:
            continue
        memories = [_memory_text(svc, entry_id) for entry_id in conflict.ids]
        if all(not m["missing"] and not m["archived"] for m in memories):
            shown[key] = {"ids": conflict.ids, "reason": conflict.reason, "memories": memories}
    return list(shown.values())


def _named_ids(action: dict[str, Any]) -> list[str]:
    """The memories a reflection's action changes: a merge's sources, an archive's or an update's memory."""
    item = action["item"]
    if action["kind"] == "merge":
        return [str(i) for i in item.get("ids", [])]
    if action["kind"] in ("archive", "update") and item.get("id"):
        return [str(item["id"])]
    return []


def _core_block(svc: Services, block: str) -> dict[str, Any]:
    """A core-memory block as it is now, for a rewrite's "before" side."""
    try:
        view = svc.core.read(block)
    except (RockmemError, OSError):
        return {"id": block, "text": None, "missing": True}
    return {"id": block, "text": "\n".join(view.blocks[0].lines) if view.blocks else "", "missing": False}


def _memory_text(svc: Services, entry_id: str) -> dict[str, Any]:
    """A memory as it is now, for a change's "before" side; one gone since says so."""
    try:
        entry = svc.memory.get(entry_id)
    except (NotFoundError, InvalidInputError):
        return {"id": entry_id, "text": None, "missing": True}
    return {
        "id": entry_id,
        "text": entry.content,
        "category": entry.category,
        "tags": entry.tags,
        "missing": False,
        "archived": entry.archived,
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


def audit(svc: Services, params: dict[str, str]) -> dict[str, Any]:
    """A page of audit lines, newest first; `until` (the newest line's time, as the first page gave it) keeps
    the pages that follow from shifting when new lines come in meanwhile."""
    assert svc.audit_trail is not None
    limit, offset = _limit(params.get("limit") or "100"), _offset(params.get("offset"))
    until = _date(params.get("until"), "until")
    found = svc.audit_trail.entries(
        file=params.get("item") or None, action=params.get("action") or None, actor=params.get("actor") or None,
        until=until, limit=offset + limit + 1,
    )  # fmt: skip
    page = found[offset : offset + limit]
    newest = until.isoformat() if until else (dump(found[0])["time"] if found else None)
    return {"entries": [dump(e) for e in page], "offset": offset, "more": len(found) > offset + limit, "until": newest}


def revert_preview(svc: Services, params: dict[str, str]) -> dict[str, Any]:
    """What a revert would change, for the page's confirmation: an item's text now and the text it goes back to
    (`item`, `to`), or every change a run made (`run`)."""
    assert svc.audit_trail is not None
    if params.get("run"):
        run = params["run"]
        lines = svc.audit_trail.entries(actor=run, limit=RUN_LINES + 1)
        exact = [dump(line) for line in lines if line.actor == run]
        return {"run": run, "changes": exact[:RUN_LINES], "more": len(exact) > RUN_LINES}
    item = (params.get("item") or "").strip()
    if not item:
        raise InvalidInputError("name an item or a run")
    moment = _date(params.get("to"), "to")
    history = svc.audit_trail.item_history(item, limit=50)
    versions = sorted(history.versions, key=lambda v: v.time, reverse=True)
    now = versions[0] if versions else None
    then = next((v for v in versions if moment is None or v.time <= moment), None)
    return {
        "item": item,
        "now": None if now is None or now.deleted else now.text,
        "then": None if then is None or then.deleted else then.text,
        "versions_known": bool(versions),
    }


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
