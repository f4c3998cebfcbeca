"""One-time migration of a data home's memory files to the salience format (issue 18), run when the memory store
opens (MemoryService) on a writable home.

Format 2 maps what the old importance meant onto salience's base and the vault, in each memory file:
- the old half-life decay is undone: an `importance_before_decay` metadata value becomes the importance again,
  and the key goes (salience replaces that decay);
- importance >= 0.8 (the old dream protection) → pinned;
- importance exactly 0.5 (the old default of every save) → 0.7 (an agent's save now), unless the entry is
  derived (inferred, enriched, dream-made: see `derived`), which keeps 0.5.
Crash-safe and safe beside other processes: the marker (meta/format.json) says format 2 only after the last
file; each entry is mapped as it is now, under its id's lock (MemoryService.revise_many), and mapping a mapped
entry changes nothing, so a re-run after a crash, or two processes migrating at once, end as one run would.
Entries written after the migration first started (its start is kept in the marker) are the new code's, and
are left as they are.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterator, Sized
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from rockmem_mcp.config import Settings
from rockmem_mcp.models import MemoryEntry, utc_now
from rockmem_mcp.search.salience import BASE_AGENT
from rockmem_mcp.storage.atomic import atomic_write
from rockmem_mcp.storage.no_follow import read_bytes

log = logging.getLogger(__name__)

FORMAT = 2  # 1: before salience (no marker)
MARKER_NAME = "format.json"
OLD_DECAY_BASE_KEY = "importance_before_decay"  # the old dream decay's record of the importance before it
OLD_PROTECTED_IMPORTANCE = 0.8
OLD_DEFAULT_IMPORTANCE = 0.5
DERIVED_SOURCES = frozenset({"inferred", "enrichment", "enriched", "dream"})  # metadata "source" of derived
DERIVED_TAGS = frozenset({"inferred", "anti-pattern"})  # what the dream's preference and anti-pattern passes tag
BATCH = 500  # entries per durable batch (each holds the store's lock briefly)


def derived(entry: MemoryEntry) -> bool:
    """Made by rockmem rather than saved by an agent: enrichment (source=enrichment, derived_from), the dream's
    inferred preferences (source=inferred, tag inferred) and anti-patterns (source=dream, tag anti-pattern)."""
    return (
        entry.metadata.get("source") in DERIVED_SOURCES
        or "derived_from" in entry.metadata
        or bool(DERIVED_TAGS & set(entry.tags))
    )


def mapped(entry: MemoryEntry) -> dict[str, Any]:
    """The fields that bring `entry` to format 2 ({} when it is there already: idempotent)."""
    fields: dict[str, Any] = {}
    importance = entry.importance
    if OLD_DECAY_BASE_KEY in entry.metadata:
        metadata = dict(entry.metadata)
        raw = metadata.pop(OLD_DECAY_BASE_KEY)
        try:
            importance = min(1.0, max(0.0, float(raw)))
        except ValueError:
            log.warning("memory %s: unreadable %s %.40r; its importance stays", entry.id, OLD_DECAY_BASE_KEY, raw)
        fields["metadata"] = metadata
    if importance >= OLD_PROTECTED_IMPORTANCE and not entry.pinned:
        fields["pinned"] = True
    if importance == OLD_DEFAULT_IMPORTANCE and not derived(entry):
        importance = BASE_AGENT
    if importance != entry.importance:
        fields["importance"] = importance
    return fields


class MigratedStore(Protocol):
    """What the migration needs of MemoryService (named here, so this module does not import the service)."""

    settings: Settings
    read_only: str | None
    index: Sized

    def iter_entries(self) -> Iterator[MemoryEntry]: ...

    def revise_many(self, entry_ids: list[str], revise: Callable[[MemoryEntry], dict[str, Any] | None]) -> int: ...


def marker_path(memory: MigratedStore) -> Path:
    return memory.settings.meta_dir / MARKER_NAME


def read_marker(memory: MigratedStore) -> dict[str, Any]:
    try:
        found = json.loads(read_bytes(marker_path(memory)))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        log.warning("%s cannot be read (%s); the format migration runs again (it is idempotent)",
                    marker_path(memory), exc)  # fmt: skip
        return {}
    return found if isinstance(found, dict) else {}


def migrate(memory: MigratedStore, clock: Callable[[], datetime] = utc_now) -> int:
    """Bring the home's memory files to format 2 unless the marker says they are; returns how many changed.
    A read-only home is left as it is (logged once per open)."""
    marker = read_marker(memory)
    if int(marker.get("format", 1)) >= FORMAT:
        return 0
    if memory.read_only is not None:
        log.warning(
            "%s is read-only: its memories are not migrated to the salience format (old importance is read "
            "as the salience base as it is, nothing is pinned); open it writable once to migrate",
            memory.settings.home,
        )
        return 0
    if not marker and len(memory.index) == 0:  # a new home: nothing to map
        atomic_write(marker_path(memory), json.dumps({"format": FORMAT}).encode() + b"\n")
        return 0
    started_at = marker.get("migration_started_at")
    try:
        cutoff = datetime.fromisoformat(started_at) if isinstance(started_at, str) else None
    except ValueError:
        cutoff = None
    if cutoff is None:  # the first attempt: later writes are the new code's, a re-run after a crash leaves them
        cutoff = clock()
        atomic_write(marker_path(memory), _marker(1, cutoff))
    begun = time.perf_counter()
    wanted = [e.id for e in memory.iter_entries() if _before(e, cutoff) and mapped(e)]
    changed = 0
    for start in range(0, len(wanted), BATCH):
        batch = wanted[start : start + BATCH]
        changed += memory.revise_many(batch, lambda e: mapped(e) if _before(e, cutoff) else None)
    atomic_write(marker_path(memory), _marker(FORMAT, cutoff))
    log.info("migrated %s to format %d: %d memories changed in %.2f s", memory.settings.home, FORMAT, changed,
             time.perf_counter() - begun)  # fmt: skip
    return changed


def _before(entry: MemoryEntry, cutoff: datetime) -> bool:
    return (entry.updated_at or entry.created_at) <= cutoff


def _marker(form: int, started_at: datetime) -> bytes:
    return json.dumps({"format": form, "migration_started_at": started_at.isoformat()}).encode() + b"\n"
