"""Core memory (MEMORY.md) in PostgreSQL: CoreFile's interface over a row of the `documents` table, so every
replica loads and edits the one core. Its identity is the row's version (bumped by every write); the edit lock is
store-wide (an advisory lock). There is no file to edit by hand: the core is changed through the server."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

from rockmem_mcp.storage.pg import CORE_LOCK, Database, store_lock

NAME = "MEMORY.md"


class PgCoreDocument:
    on_disk = False

    def __init__(self, db: Database, path: Path) -> None:
        self.db = db
        self.path = path  # what audit lines and listeners call it
        self.on_write: list[Callable[[Path, bytes | None], None]] = []

    def identity(self) -> tuple[int, int, int, int] | None:
        rows = self.db.all("SELECT version FROM documents WHERE name = %s", (NAME,))
        return (int(rows[0][0]), 0, 0, 0) if rows else None

    def read(self, fresh: bool = False) -> bytes:
        rows = self.db.all("SELECT body FROM documents WHERE name = %s", (NAME,))
        return bytes(rows[0][0]) if rows else b""

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        with store_lock(self.db, CORE_LOCK):
            yield

    def write(self, data: bytes) -> None:
        with self.db.transaction() as cursor:
            cursor.execute(
                "INSERT INTO documents (name, body, version) VALUES (%s, %s, 1) ON CONFLICT (name) DO UPDATE"
                " SET body = EXCLUDED.body, version = documents.version + 1",
                (NAME, data),
            )
        for listener in self.on_write:
            listener(self.path, data)

    def remove(self) -> None:
        with self.db.transaction() as cursor:
            cursor.execute("DELETE FROM documents WHERE name = %s", (NAME,))
        for listener in self.on_write:
            listener(self.path, None)
