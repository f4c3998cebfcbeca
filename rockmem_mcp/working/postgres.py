"""Working memory in PostgreSQL: WorkingFiles' interface over the `working` table, a row per root (session,
patrol, subagent, shared) holding its entries as JSON. A change is read-modify-write in one transaction with the
row locked (`SELECT … FOR UPDATE`), so replicas never lose each other's entries, and the namespace rules, caps
and time-to-live the service applies inside `changing` hold across all of them. Time-to-live is measured by
the database server's clock (StoreClock), so a replica whose clock runs ahead expires nothing early."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager

from rockmem_mcp.storage.pg import Database, StoreClock
from rockmem_mcp.working.files import Entries

log = logging.getLogger(__name__)


class PgWorkingRows:
    def __init__(self, db: Database) -> None:
        self.db = db
        self.clock = StoreClock(db)  # entries expire by the database's time: one deadline for every replica

    def read(self, root: str) -> Entries:
        rows = self.db.all("SELECT entries FROM working WHERE root = %s", (root,))
        return _parsed(root, rows[0][0]) if rows else {}

    @contextmanager
    def changing(self, root: str) -> Iterator[Entries]:
        """Lock `root`'s row, yield its entries to change in place, then write them back (one transaction)."""
        with self.db.transaction() as cursor:
            cursor.execute("INSERT INTO working (root, entries) VALUES (%s, '{}') ON CONFLICT DO NOTHING", (root,))
            cursor.execute("SELECT entries FROM working WHERE root = %s FOR UPDATE", (root,))
            row = cursor.fetchone()
            entries = dict(_parsed(root, row[0])) if row else {}
            yield entries
            body = json.dumps(entries, ensure_ascii=False, separators=(",", ":"))
            cursor.execute("UPDATE working SET entries = %s WHERE root = %s", (body, root))


def _parsed(root: str, text: str) -> Entries:
    try:
        entries = json.loads(text)
        if not isinstance(entries, dict):
            raise ValueError("not an object")
        return entries
    except ValueError as exc:
        log.warning(
            "working memory %r in the store is unreadable (%s); treating it as empty until rewritten", root, exc
        )
        return {}
