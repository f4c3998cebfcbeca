"""What a soft forget keeps, and the log of permanent deletes, in PostgreSQL: ForgottenFiles' interface over the
`forgotten` and `forget_log` tables, so an item forgotten through one replica is listed and restored through any.
`path_for` still names a file (audit lines name items by path, the same on every replica); the lock a forget or
restore holds is store-wide (an advisory lock)."""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

from pydantic import ValidationError

from rockmem_mcp.governance.forgotten_files import ForgottenFiles, ForgottenRecord, deleted_line
from rockmem_mcp.storage.pg import FORGET_LOCK, Database, store_lock

log = logging.getLogger(__name__)


class PgForgottenRows(ForgottenFiles):
    def __init__(self, db: Database, home: Path, root: Path, meta_dir: Path) -> None:
        super().__init__(home, root, meta_dir)
        self.db = db

    def read(self, store: str, key: str) -> ForgottenRecord | None:
        rows = self.db.all("SELECT doc FROM forgotten WHERE store = %s AND key = %s", (store, key))
        return self._parsed(store, key, rows[0][0]) if rows else None

    def write(self, record: ForgottenRecord, key: str) -> None:
        with self.db.transaction() as cursor:
            cursor.execute(
                "INSERT INTO forgotten (store, key, doc) VALUES (%s, %s, %s)"
                " ON CONFLICT (store, key) DO UPDATE SET doc = EXCLUDED.doc",
                (record.store, key, record.model_dump_json()),
            )

    def remove(self, store: str, key: str) -> bool:
        with self.db.transaction() as cursor:
            cursor.execute("DELETE FROM forgotten WHERE store = %s AND key = %s", (store, key))
            return bool(cursor.rowcount)

    def all(self) -> list[ForgottenRecord]:
        rows = self.db.all("SELECT store, key, doc FROM forgotten")
        return [record for store, key, doc in rows if (record := self._parsed(store, key, doc)) is not None]

    def _parsed(self, store: str, key: str, doc: str) -> ForgottenRecord | None:
        try:
            return ForgottenRecord.model_validate_json(doc)
        except (ValidationError, ValueError) as exc:
            log.warning("skipped forgotten item %s:%s in the store (%s)", store, key, exc)
            return None

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        with store_lock(self.db, FORGET_LOCK):
            yield

    def log_deleted(self, at: datetime, store: str, item_id: str, summary: str, reason: str | None) -> None:
        record = deleted_line(at, store, item_id, summary, reason)
        with self.db.transaction() as cursor:
            cursor.execute("INSERT INTO forget_log (line) VALUES (%s)", (json.dumps(record, ensure_ascii=False),))

    def deleted(self) -> list[dict[str, object]]:
        lines = []
        for (text,) in self.db.all("SELECT line FROM forget_log ORDER BY seq"):
            with contextlib.suppress(ValueError):
                lines.append(json.loads(text))
        return lines
