"""A day-by-day log in PostgreSQL: DailyLog's interface over the `daily_logs` table, for the conversation log that
replicas share (the dream reads every replica's turns). A record's position is its row's sequence number (a file
log's offset past its line); there is no inode (0), since a row is never rewritten in place."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import Generic

from pydantic import ValidationError

from rockmem_mcp.storage.daily_log import Record
from rockmem_mcp.storage.pg import Database

log = logging.getLogger(__name__)


class PgDailyLog(Generic[Record]):
    def __init__(self, db: Database, name: str, model: type[Record], directory: Path) -> None:
        self.db, self.name, self.model = db, name, model
        self.directory = directory  # audit lines and readers still name a day's log by its file path

    def path(self, day: date) -> Path:
        return self.directory / f"{day.isoformat()}.jsonl"

    def append(self, record: Record, day: date) -> None:
        with self.db.transaction() as cursor:
            cursor.execute(
                "INSERT INTO daily_logs (log, day, line) VALUES (%s, %s, %s)",
                (self.name, day, record.model_dump_json()),
            )

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

    def remove_where(self, day: date, drop: Callable[[Record], bool]) -> int:
        gone = []
        for record, seq in self.read_positions(day)[0]:
            if drop(record):
                gone.append(seq)
        if gone:
            with self.db.transaction() as cursor:
                cursor.execute("DELETE FROM daily_logs WHERE seq = ANY(%s)", (gone,))
        return len(gone)

    def remove(self, day: date) -> None:
        self.consume(day)
