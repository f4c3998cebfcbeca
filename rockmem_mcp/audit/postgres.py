"""The audit log in PostgreSQL: AuditLog's interface over the `audit_lines` table, so the trail of a store several
replicas share is one trail — whichever replica made a change, every replica's audit tool and web page show it.

A line is a row holding the line's text (the format a file home's `meta/audit.log` holds), in sequence order.
Retention reads only the lines past it (indexed by the time each line starts with) and deletes those it folded,
without stopping appends."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime

from rockmem_mcp.audit.log import AuditLine, format_time
from rockmem_mcp.audit.redaction import Redaction
from rockmem_mcp.storage.pg import AUDIT_FOLD_LOCK, Database


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

    def newest_first(self) -> Iterator[AuditLine]:
        for (text,) in self.db.all("SELECT line FROM audit_lines ORDER BY seq DESC"):
            line = AuditLine.parse(text)
            if line is not None:
                yield line

    def rewrite(self, keep: Callable[[list[AuditLine]], list[AuditLine]], older_than: datetime | None = None) -> int:
        """As AuditLog.rewrite, for the lines older than `older_than` only when it is given (retention: the rest
        stay as they are and are not read). No table lock: appends go on meanwhile; folds wait for each other (an
        advisory lock per schema), and what `keep` drops is deleted by row in the same transaction as the digest
        `keep` saves."""
        with self.db.transaction() as cursor:
            cursor.execute(f"SELECT pg_advisory_xact_lock({AUDIT_FOLD_LOCK}, hashtext(current_schema()))")
            if older_than is None:
                cursor.execute("SELECT seq, line FROM audit_lines ORDER BY seq")
            else:
                cursor.execute(
                    "SELECT seq, line FROM audit_lines WHERE left(line, 24) < %s ORDER BY seq",
                    (format_time(older_than),),
                )
            rows = [(seq, line) for seq, text in cursor.fetchall() if (line := AuditLine.parse(text)) is not None]
            kept = {id(line) for line in keep([line for _, line in rows])}
            gone = [seq for seq, line in rows if id(line) not in kept]
            if gone:
                cursor.execute("DELETE FROM audit_lines WHERE seq = ANY(%s)", (gone,))
            return len(gone)

    def redact(self, redaction: Redaction) -> int:
        """As AuditLog.redact: the rows holding one of the item's texts (found by the database, by the substrings
        every match holds) rewritten in one transaction, under the lock folds take; appends go on meanwhile."""
        needles = redaction.needles
        if not needles:
            return 0
        with self.db.transaction() as cursor:
            cursor.execute(f"SELECT pg_advisory_xact_lock({AUDIT_FOLD_LOCK}, hashtext(current_schema()))")
            cursor.execute(
                "SELECT seq, line FROM audit_lines WHERE "
                + " OR ".join(["strpos(line, %s) > 0"] * len(needles))
                + " ORDER BY seq",
                needles,
            )
            changed = [(new, seq) for seq, line in cursor.fetchall() if (new := redaction.audit_line(line)) != line]
            if changed:
                cursor.executemany("UPDATE audit_lines SET line = %s WHERE seq = %s", changed)
            return len(changed)
