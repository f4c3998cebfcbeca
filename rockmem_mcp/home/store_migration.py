"""`migrate-store`'s last part: the stores a backup does not carry, copied from one home or database to another —
the conversation log awaiting a dream, sub-agents' proposals, reflections with their log and evolution file,
dream reports, what soft forgets keep and the permanent-delete log, salience's uses, and the audit trail with its
retention digests.

Each is copied record by record where the target lacks it (a record the target already holds is left as it is, and
listed when the source's differs: a reflection r-001 of each, say),
through the same store interfaces the services use, so either side may be a file home or a database; then it is
read back from the target, which must hold every source record. Long-term memories and the stores a backup
carries are moved before (home/transfer.py).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from rockmem_mcp.audit.retention import ARCHIVE_NAME, STATE_NAME, DigestDocuments
from rockmem_mcp.audit.service import audit_log
from rockmem_mcp.config import Settings
from rockmem_mcp.consolidation.dream_reports import report_store
from rockmem_mcp.consolidation.reflection import reflection_store
from rockmem_mcp.conversation.service import conversation_log
from rockmem_mcp.errors import CorruptEntryError, NotFoundError
from rockmem_mcp.governance.forgetting import forgotten_store
from rockmem_mcp.models import ConversationTurn
from rockmem_mcp.proposals.service import proposal_store
from rockmem_mcp.reinforcement import Reinforcer
from rockmem_mcp.storage.access_log import Access

Records = dict[Hashable, Any]  # a store's records by what identifies them on both sides


@dataclass
class RecordsMoved:
    moved: dict[str, int] = field(default_factory=dict)  # per store: records written to the target
    differing: list[str] = field(default_factory=list)  # "store key": a source record the target does not hold
    kept: list[str] = field(default_factory=list)  # "store key: why": the target's own record of that key, kept


def migrate_records(
    source: Settings, target: Settings, source_uses: Reinforcer, target_uses: Reinforcer
) -> RecordsMoved:
    """Copy each store of STORES, then salience's uses (held by each side's memory store's reinforcer), from
    `source` to `target`; then check the target holds every source record."""
    result = RecordsMoved()
    for name, read, write in STORES:
        held, records = read(target), read(source)
        missing = [record for key, record in records.items() if key not in held]
        result.kept += [f"{name} {key}: the target has its own, kept" for key in records
                        if key in held and held[key] != records[key]]  # fmt: skip
        if missing:
            write(target, missing)
        result.moved[name] = len(missing)
        now = read(target)
        result.differing += [f"{name} {key}" for key in read(source) if key not in now]
    result.moved["uses"] = _move_uses(source_uses, target_uses, result.differing)
    return result


# ------------------------------------------------------------------------------------------- the stores
def _turns(settings: Settings) -> Records:
    log = conversation_log(settings)
    return {(t.session_id, t.role, t.at.isoformat(), t.content): t for day in log.days() for t in log.read(day)}


def _write_turns(settings: Settings, turns: list[ConversationTurn]) -> None:
    log = conversation_log(settings)
    for turn in sorted(turns, key=lambda t: t.at):
        log.append(turn, turn.at.date())


def _proposals(settings: Settings) -> Records:
    return {proposal.id: proposal for proposal in proposal_store(settings).all()}


def _write_proposals(settings: Settings, proposals: list[Any]) -> None:
    store = proposal_store(settings)
    with store.locked():
        for proposal in proposals:
            store.create(proposal)


def _reflections(settings: Settings) -> Records:
    store = reflection_store(settings)
    found: Records = {reflection.id: reflection for reflection in store.all()}
    for path in (store.log_file, store.evolution_file):  # the log and the evolution file, whole
        text = store.read_text(path, 1 << 30)
        if text:
            found[path.name] = (path.name, text)
    return found


def _write_reflections(settings: Settings, records: list[Any]) -> None:
    store = reflection_store(settings)
    paths = {store.log_file.name: store.log_file, store.evolution_file.name: store.evolution_file}
    for record in records:
        if isinstance(record, tuple):
            name, text = record
            store.put_text(paths[name], text)
        else:
            store.write(record)


def _dream_reports(settings: Settings) -> Records:
    store = report_store(settings)
    found: Records = {}
    for report_id in store.ids():
        with contextlib.suppress(NotFoundError, CorruptEntryError, OSError, ValueError):
            found[report_id] = store.read(report_id)
    return found


def _write_dream_reports(settings: Settings, reports: list[Any]) -> None:
    store = report_store(settings)
    for report in reports:
        store.write(report)


def _forgotten(settings: Settings) -> Records:
    return {record.id: record for record in forgotten_store(settings).all()}


def _write_forgotten(settings: Settings, records: list[Any]) -> None:
    store = forgotten_store(settings)
    with store.locked():
        for record in records:
            store.write(record, record.id.partition(":")[2])  # "episode:ID" is kept under its key, "ID"


def _deletes(settings: Settings) -> Records:
    return {(str(line.get("at")), str(line.get("id"))): line for line in forgotten_store(settings).deleted()}


def _write_deletes(settings: Settings, lines: list[dict[str, Any]]) -> None:
    store = forgotten_store(settings)
    for line in lines:
        at = datetime.fromisoformat(str(line["at"]))
        store.log_deleted(at, str(line["store"]), str(line["id"]), str(line.get("summary", "")), line.get("reason"))


def _audit(settings: Settings) -> Records:
    found: Records = {line.format(): line for line in audit_log(settings).lines()}
    documents = DigestDocuments(settings)
    for name in (STATE_NAME, ARCHIVE_NAME):  # the retention digests of lines folded out of the trail
        with contextlib.suppress(FileNotFoundError):
            found[f"meta/{name}"] = (name, documents.read(name))
    return found


def _write_audit(settings: Settings, records: list[Any]) -> None:
    """The lines in their order, after the target's own (a trail is read in order; its own lines of this migration
    come first); a digest only where the target has none."""
    documents = DigestDocuments(settings)
    for record in records:
        if isinstance(record, tuple) and not _exists(documents, record[0]):
            documents.write(*record)
    audit_log(settings).append(sorted((r for r in records if not isinstance(r, tuple)), key=lambda line: line.time))


def _exists(documents: DigestDocuments, name: str) -> bool:
    try:
        documents.read(name)
    except FileNotFoundError:
        return False
    return True


STORES: list[tuple[str, Callable[[Settings], Records], Callable[[Settings, list[Any]], None]]] = [
    ("conversation turns", _turns, _write_turns),
    ("proposals", _proposals, _write_proposals),
    ("reflections", _reflections, _write_reflections),
    ("dream reports", _dream_reports, _write_dream_reports),
    ("forgotten items", _forgotten, _write_forgotten),
    ("permanent deletes", _deletes, _write_deletes),
    ("audit lines", _audit, _write_audit),
]


def _move_uses(source: Reinforcer, target: Reinforcer, differing: list[str]) -> int:
    """Every use count and last use the source knows, merged into the target's (each the larger) and written;
    the target must then know at least as much of each."""
    records = [(kind, item_id, access) for kind in source.table for item_id, access in source.copy(kind).items()]
    changed = target.adopt(records)
    target.flush()
    for kind, item_id, access in records:
        known = target.copy(kind).get(item_id)
        if known is None or Access(*known).merged(access) != known:
            differing.append(f"uses {kind}:{item_id}")
    return changed
