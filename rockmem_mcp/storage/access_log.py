"""The access log: when each memory, entity and triple was last used and how often (salience's input).

Reinforcement happens on reads (a search, a recall), far more often than writes, so it is not written into
the item files: every few seconds a background flush appends the new totals to `meta/access/` — the shared
change journal's files, appended durably — and now and then the journal is compacted into `state.json`.

Records hold absolute values (`count` and `last` access, seconds since the epoch), never increments, and
are merged by taking the larger of each: replaying a record twice, reading the state and then a log that
overlaps it, or a dream re-run can never count an access twice. Every process on the home follows the log
(one stat when idle), so reinforcement seen by one process ranks in all of them within a flush.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple, Protocol, TypeVar

from rockmem_mcp.storage.atomic import atomic_write
from rockmem_mcp.storage.changes import ChangeJournal, JournalPosition
from rockmem_mcp.storage.no_follow import open_fd

log = logging.getLogger(__name__)

STATE_NAME = "state.json"
STATE_FORMAT = 1


class Access(NamedTuple):
    count: int  # times used (a save counts as the first)
    last: float  # last use, seconds since the epoch

    def merged(self, other: Access | None) -> Access:
        if other is None:
            return self
        return Access(max(self.count, other.count), max(self.last, other.last))


class Used(Protocol):
    """What carries uses in its file: memories, entities, triples."""

    reinforcement_count: int
    last_seen_at: datetime | None
    created_at: datetime


U = TypeVar("U", bound=Used)


def uses_of(record: Used) -> Access:
    """The uses a record's file holds (its last use: its creation until it is used)."""
    return Access(record.reinforcement_count, (record.last_seen_at or record.created_at).timestamp())


def with_uses(record: U, access: Access | None) -> U:
    """`record` with `access` merged in (each field the larger), copied only when that changes it."""
    own = uses_of(record)
    known = own.merged(access)
    if known == own:
        return record
    update = {"reinforcement_count": known.count, "last_seen_at": datetime.fromtimestamp(known.last, UTC)}
    return record.model_copy(update=update)  # type: ignore[attr-defined]


Table = dict[str, dict[str, Access]]  # kind ("memory", "entity", "triple") -> id -> access
Record = tuple[str, str, Access]  # kind, id, access


def merge_into(table: Table, kind: str, item_id: str, access: Access) -> Access | None:
    """Merge one record; the new value when it changed anything, else None."""
    items = table.setdefault(kind, {})
    old = items.get(item_id)
    new = access.merged(old)
    if new == old:
        return None
    items[item_id] = new
    return new


def parsed_records(records: list[dict[str, Any]]) -> list[Record]:
    """Journal (or change-feed) records as (kind, id, access); a malformed one is warned about and left out."""
    found: list[Record] = []
    for record in records:
        try:
            found.append((str(record["k"]), str(record["i"]), Access(int(record["n"]), float(record["t"]))))
        except (KeyError, TypeError, ValueError):
            log.warning("ignoring a malformed access record: %.200r", record)
    return found


class AccessLog:
    """Not thread-safe: one caller at a time (the reinforcer serialises its reads and writes)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.journal = ChangeJournal(directory)
        self.read_only = self.journal.read_only
        self._state_path = directory / STATE_NAME
        self._position = JournalPosition(0, 0)
        # A state file that exists but cannot be read holds uses found nowhere else: never compacted over.
        self.state_damaged = False

    def close(self) -> None:
        self.journal.close()

    def load(self) -> list[Record]:
        """Everything known: the compacted state, then every record after it."""
        records: list[Record] = []
        generation = 1
        state = self._read_state()
        if state is not None:
            generation = int(state.get("generation", 1))
            for kind, items in state.get("items", {}).items():
                for item_id, (count, last) in items.items():
                    records.append((kind, item_id, Access(int(count), float(last))))
        self._position = JournalPosition(generation, 0)
        return records + self.read_new()

    def _read_state(self) -> dict[str, Any] | None:
        try:
            with os.fdopen(open_fd(self._state_path, os.O_RDONLY), "rb") as f:
                state = json.loads(f.read())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            self.state_damaged = True
            log.warning("the access state %s is unreadable (%s); salience starts from the log and the log is not "
                        "compacted until it is repaired or removed", self._state_path, exc)  # fmt: skip
            return None
        if not isinstance(state, dict) or state.get("format") != STATE_FORMAT:
            self.state_damaged = True
            log.warning("the access state %s is from another version; salience starts from the log and the log "
                        "is not compacted while it is there", self._state_path)  # fmt: skip
            return None
        self.state_damaged = False
        return state

    def read_new(self) -> list[Record]:
        """Records other processes appended since the last call (one stat when there are none); after falling
        behind a compaction, everything again (merging is idempotent)."""
        read = self.journal.read_since(self._position)
        if read.gap:
            return self.load()
        self._position = read.position
        return parsed_records(read.records)

    def append(self, items: dict[tuple[str, str], Access]) -> None:
        """Append new totals durably (one write, one fsync for the batch)."""
        records = [
            {"k": kind, "i": item_id, "n": a.count, "t": round(a.last, 3)} for (kind, item_id), a in items.items()
        ]
        self.journal.append(records, durable=True)

    def needs_compaction(self, limit_bytes: int) -> bool:
        return not self.state_damaged and self.journal.end().offset > limit_bytes

    def compact(self, complete_table: Callable[[list[Record]], Table]) -> None:
        """Write the whole table as the state, then start a new log generation (older ones are dropped).

        Under the journal's exclusive lock (no append meanwhile): the records not yet read go to
        `complete_table`, which merges them and returns the table, now holding everything any process
        appended; it is written durably, and only then do old records go."""

        def write_state() -> None:
            table = complete_table(self.read_new())
            state = {
                "format": STATE_FORMAT,
                "generation": self.journal.end().generation,
                "items": {kind: {i: [a.count, a.last] for i, a in items.items()} for kind, items in table.items()},
            }
            atomic_write(self._state_path, json.dumps(state, separators=(",", ":")).encode())

        self.journal.rotate(before=write_state)
