"""The audit log in PostgreSQL: AuditLog's interface over the `audit_lines` table, so the trail of a store several
replicas share is one trail — whichever replica made a change, every replica's audit tool and web page show it.

A line is a row holding the line's text (the format a file home's `meta/audit.log` holds), in sequence order. A
rewrite (retention folding old lines) replaces the rows in one transaction, under a table lock that appends wait
for, as a file home's rewrite holds the log's lock."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from rockmem_mcp.storage.audit_log import AuditLine
from rockmem_mcp.storage.pg import Database


class PgAuditLog:
    def __init__(self, db: Database, name: str) -> None:
        self.db = db
        self.path = name  # what messages call it (there is no file)

    def append(self, lines: list[AuditLine]) -> None:
        """One transaction: every line of a change, or none (StorageError, and the change is undone)."""
        if not lines:
            return
        with self.db.transaction() as cursor:
            cursor.executemany("INSERT INTO audit_lines (line) VALUES (%s)", [(line.format(),) for line in lines])

    def lines(self) -> Iterator[AuditLine]:
        for (text,) in self.db.all("SELECT line FROM audit_lines ORDER BY seq"):
            line = AuditLine.parse(text)
            if line is not None:
                yield line

    def rewrite(self, keep: Callable[[list[AuditLine]], list[AuditLine]]) -> int:
        with self.db.transaction() as cursor:
            cursor.execute("LOCK TABLE audit_lines IN EXCLUSIVE MODE")  # appends wait; reads go on
            cursor.execute("SELECT line FROM audit_lines ORDER BY seq")
            current = [line for (text,) in cursor.fetchall() if (line := AuditLine.parse(text)) is not None]
            kept = keep(current)
            if len(kept) == len(current):
                return 0
            cursor.execute("DELETE FROM audit_lines")
            cursor.executemany("INSERT INTO audit_lines (line) VALUES (%s)", [(line.format(),) for line in kept])
            return len(current) - len(kept)
