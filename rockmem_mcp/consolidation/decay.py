"""The dream's decay pass, and the salience listing (least or most salient memories) built on the same rows.

The decay pass computes every live memory's salience and tier now (search/salience.py: the same model that
ranks searches) and compares the tier with the one the previous pass recorded in `meta/decay-scores.json`
(seed 004 §9.3's format). The report lists every tier change and every archive candidate (salience under
`salience_archive_threshold`, 0.05 by default) for review; nothing is archived and no memory is written:
importance is the model's base, so the pass never lowers it. Uses are only read here, as absolute values (the
memory's file merged by max with the access log), so a re-run right after records no change and counts no use
twice. Its DECAY line is `system:decay`'s (seed 004 §12.3), whichever run or reflection ran the pass.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from datetime import UTC, datetime
from typing import Any, Literal

import numpy as np

from rockmem_mcp.audit.service import DECAY
from rockmem_mcp.config import Settings
from rockmem_mcp.consolidation.shapes import DreamReport, SalienceListing, SalientMemory, TierChange
from rockmem_mcp.errors import InvalidInputError, RockmemError
from rockmem_mcp.memory.service import MemoryService, Saliences
from rockmem_mcp.search.salience import ARCHIVE_CANDIDATE, MEMORY_TYPE_WEIGHT, tier, tier_counts
from rockmem_mcp.storage.atomic import atomic_write, remove_durably
from rockmem_mcp.storage.no_follow import read_bytes

log = logging.getLogger(__name__)

SCORES_NAME = "decay-scores.json"
SCORES_VERSION = 1
KEY_PREFIX = "memory:"  # seed 004 keys entries by kind: "memory:ID" (graph items may join as "entity:ID")
STORE = "semantic"  # seed 004's store of plain memories (their type weight)
ARCHIVE_CANDIDATES_LISTED = 200  # least salient first; `tiers` in the report has the full count
PREVIEW_WORDS = 12


def decay_pass(memory: MemoryService, settings: Settings, report: DreamReport) -> None:
    """Fill the report's `tiers`, `tier_changes` and `archive_candidates`; record the tiers (not on a dry run)."""
    rows = memory.saliences()
    previous = _recorded_tiers(settings)
    archive_below = settings.salience_archive_threshold
    tiers = [tier(value, archive_below) for value in rows.salience.tolist()]
    report.tiers = tier_counts(rows.salience, archive_below)
    for i, entry_id in enumerate(rows.ids):
        before = previous.get(entry_id)
        if before is not None and before != tiers[i]:
            report.tier_changes.append(
                TierChange(id=entry_id, from_tier=before, to_tier=tiers[i], salience=round(float(rows.salience[i]), 4))
            )
    candidates = [i for i, found in enumerate(tiers) if found == ARCHIVE_CANDIDATE]
    candidates.sort(key=lambda i: (float(rows.salience[i]), rows.ids[i]))
    report.archive_candidates = _described(memory, rows, candidates[:ARCHIVE_CANDIDATES_LISTED])
    if not report.dry_run:
        _record_tiers(memory, settings, report, _scores_file(rows, tiers), len(rows.ids))


def _record_tiers(memory: MemoryService, settings: Settings, report: DreamReport, data: bytes, scored: int) -> None:
    """Write decay-scores.json and its DECAY audit line (the transitions counted); if the line cannot be
    written, the previous file is put back and the error raised."""
    path = settings.meta_dir / SCORES_NAME
    try:
        previous: bytes | None = read_bytes(path)
    except FileNotFoundError:
        previous = None
    except OSError:  # unreadable (the pass said so): replaced, as before
        previous = None
    atomic_write(path, data)
    moves = Counter(f"{c.from_tier}→{c.to_tier}" for c in report.tier_changes)
    said = ", ".join(f"{move} {n}" for move, n in sorted(moves.items()))
    summary = f"{len(report.tier_changes)} entries transitioned{': ' + said if said else ''}; {scored} scored"
    memory.audit.record(
        "DECAY",
        path,
        summary,
        actor=DECAY,  # a threshold transition is the decay system's, whichever run ran the pass
        undo=lambda: remove_durably(path) if previous is None else atomic_write(path, previous),
    )


def salience_listing(
    memory: MemoryService, order: Literal["least", "most"] = "least", limit: int = 20
) -> SalienceListing:
    """The `limit` least (or most) salient live memories, dormant and pinned ones included, with the count
    per tier: for a person reviewing what is fading (`rockmem-mcp salience`, `rockmem://salience`)."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= memory.settings.search_limit_max:
        raise InvalidInputError(f"limit must be an integer from 1 to {memory.settings.search_limit_max}")
    rows = memory.saliences()
    key = rows.salience if order == "least" else -rows.salience
    ranked = np.lexsort((-rows.created, key))  # ties: the newest first
    return SalienceListing(
        order=order,
        memories=_described(memory, rows, ranked[:limit].tolist()),
        tiers=tier_counts(rows.salience, memory.settings.salience_archive_threshold),
        pinned=int(rows.pinned.sum()),
    )


def _described(memory: MemoryService, rows: Saliences, positions: list[int]) -> list[SalientMemory]:
    """The rows at `positions` with their first words (a memory removed meanwhile is left out)."""
    found = []
    for i in positions:
        try:
            entry = memory.get(rows.ids[i])
        except RockmemError:
            continue
        words = entry.content.split()
        preview = " ".join(words[:PREVIEW_WORDS]) + (" …" if len(words) > PREVIEW_WORDS else "")
        value = float(rows.salience[i])
        found.append(
            SalientMemory(
                id=rows.ids[i],
                tier=tier(value, memory.settings.salience_archive_threshold),
                salience=round(value, 4),
                uses=int(rows.access_count[i]),
                last_use=_utc(float(rows.last_access[i])),
                pinned=bool(rows.pinned[i]),
                preview=preview,
            )
        )
    return found


def _recorded_tiers(settings: Settings) -> dict[str, str]:
    """Memory id -> the tier the previous pass recorded; empty when there is none (or it cannot be read: the
    pass then records afresh and reports no change)."""
    path = settings.meta_dir / SCORES_NAME
    try:
        data = json.loads(read_bytes(path))
        entries = data["entries"]
        return {
            key[len(KEY_PREFIX) :]: str(item["status"])
            for key, item in entries.items()
            if key.startswith(KEY_PREFIX) and isinstance(item, dict) and "status" in item
        }
    except FileNotFoundError:
        return {}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        log.warning("%s cannot be read (%s); the decay pass records the tiers afresh", path, exc)
        return {}


def _scores_file(rows: Saliences, tiers: list[str]) -> bytes:
    entries: dict[str, dict[str, Any]] = {}
    for i, entry_id in enumerate(rows.ids):
        entries[KEY_PREFIX + entry_id] = {
            "store": STORE,
            "base_relevance": round(float(rows.base[i]), 4),
            "created": _iso(float(rows.created[i])),
            "last_accessed": _iso(float(rows.last_access[i])),
            "access_count": int(rows.access_count[i]),
            "type_weight": MEMORY_TYPE_WEIGHT,
            "current_score": round(float(rows.salience[i]), 4),
            "status": tiers[i],
            "pinned": bool(rows.pinned[i]),
        }
    data = {"version": SCORES_VERSION, "last_updated": _iso(rows.now.timestamp()), "entries": entries}
    return json.dumps(data, indent=1, ensure_ascii=False).encode() + b"\n"


def _utc(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


def _iso(seconds: float) -> str:
    return _utc(seconds).isoformat().replace("+00:00", "Z")
