"""A day-by-day log in PostgreSQL: DailyLog's interface over the `daily_logs` table, for the logs replicas share
(conversation turns, feedback, episodes). A record's position is its row's sequence number (a file log's offset
past its line); there is no inode (0), since a row is never rewritten in place.

A log that replicas index (episodes: `feed_store`) writes a change row with every append and removal, in the same
transaction (`{"s": store, "op": "put", "row": seq}` or `{"op": "drop", "day": ...}`): the change feed is ordered
where row numbers are not (two appends may commit in either order), so an index following it misses nothing."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import Generic

from pydantic import ValidationError

from rockmem_mcp.storage.daily_log import Record
from rockmem_mcp.storage.pg import LOGS_LOCK, Database
from rockmem_mcp.storage.pg_changes import append_changes

log = logging.getLogger(__name__)


class PgDailyLog(Generic[Record]):
    on_disk = False

    def __init__(
        self, db: Database, name: str, model: type[Record], directory: Path, feed_store: str | None = None
    ) -> None:
        self.db, self.name, self.model = db, name, model
        self.directory = directory  # audit lines and readers still name a day's log by its file path
        self.feed_store = feed_store

    def path(self, day: date) -> Path:
        return self.directory / f"{day.isoformat()}.jsonl"

    def append(self, record: Record, day: date) -> None:
        with self.db.transaction() as cursor:
            # Appends to one log commit in the order of their row numbers (the lock is held to the commit), so a
            # reader that consumed up to a row never skips one that committed later with a smaller number.
            cursor.execute(
                f"SELECT pg_advisory_xact_lock({LOGS_LOCK}, hashtext(current_schema() || ':' || %s))", (self.name,)
            )
            cursor.execute(
                "INSERT INTO daily_logs (log, day, line) VALUES (%s, %s, %s) RETURNING seq",
                (self.name, day, record.model_dump_json()),
            )
            (seq,) = cursor.fetchone()
            self._changed(cursor, {"op": "put", "row": int(seq)})

    def _changed(self, cursor: object, change: dict[str, object]) -> None:
        if self.feed_store is not None:
            append_changes(cursor, self.db.writer_id, [{"s": self.feed_store, **change}])

    def read_rows(self, seqs: list[int]) -> list[tuple[int, date, Record]]:
        """The records at these positions that are still there, with their days, in position order."""
        rows = self.db.all("SELECT seq, day, line FROM daily_logs WHERE seq = ANY(%s) ORDER BY seq", (seqs,))
        found = []
        for seq, day, line in rows:
            try:
                found.append((int(seq), day, self.model.model_validate_json(line)))
            except (ValidationError, ValueError):
                log.warning("skipped an unreadable record of the %s log of %s", self.name, day)
        return found

    def days(self) -> list[date]:
        rows = self.db.all("SELECT DISTINCT day FROM daily_logs WHERE log = %s ORDER BY day", (self.name,))
        return [row[0] for row in rows]

    def identity(self, day: date) -> tuple[int, ...] | None:
        """What changes whenever `day`'s log does: how many records, and the newest's position; None if none."""
        rows = self.db.all(
            "SELECT count(*), coalesce(max(seq), 0) FROM daily_logs WHERE log = %s AND day = %s", (self.name, day)
        )
        count, newest = rows[0]
        return (int(count), int(newest)) if count else None

    def read(self, day: date) -> list[Record]:
        return [record for record, _ in self.read_positions(day)[0]]

    def read_positions(self, day: date) -> tuple[list[tuple[Record, int]], int]:
        rows = self.db.all(
            "SELECT seq, line FROM daily_logs WHERE log = %s AND day = %s ORDER BY seq", (self.name, day)
        )
        found, bad = [], 0
        for seq, line in rows:
            try:
                found.append((self.model.model_validate_json(line), int(seq)))
            except (ValidationError, ValueError):
                bad += 1
        if bad:
            log.warning("skipped %d unreadable record(s) of the %s log of %s", bad, self.name, day)
        return found, 0

    def consume(self, day: date, through: int | None = None, inode: int | None = None) -> None:
        """Drop `day`'s records up to position `through` (all when None); what came after stays."""
        with self.db.transaction() as cursor:
            if through is None:
                cursor.execute("DELETE FROM daily_logs WHERE log = %s AND day = %s", (self.name, day))
            else:
                cursor.execute(
                    "DELETE FROM daily_logs WHERE log = %s AND day = %s AND seq <= %s", (self.name, day, through)
                )
            self._changed(cursor, {"op": "drop", "day": day.isoformat()})

    def remove_where(self, day: date, drop: Callable[[Record], bool]) -> int:
        gone = []
        for record, seq in self.read_positions(day)[0]:
            if drop(record):
                gone.append(seq)
        if gone:
            with self.db.transaction() as cursor:
                cursor.execute("DELETE FROM daily_logs WHERE seq = ANY(%s)", (gone,))
                self._changed(cursor, {"op": "drop", "day": day.isoformat()})
        return len(gone)

    def remove(self, day: date) -> None:
        self.consume(day)
