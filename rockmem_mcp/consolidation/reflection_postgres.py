"""Reflections in PostgreSQL: ReflectionFiles' interface over the `reflections` table (numbered records) and two
rows of `documents` (the reflection log and the evolution file), so the user approves a reflection from any
replica and every replica numbers them alike. One reflection runs on the store at a time (an advisory lock); the
readable pending proposal (meta/pending-reflection.md) is still rendered in each home."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from rockmem_mcp.config import Settings
from rockmem_mcp.consolidation.reflection_files import ReflectionBusy, ReflectionFiles
from rockmem_mcp.consolidation.shapes import Reflection
from rockmem_mcp.errors import CorruptEntryError, NotFoundError
from rockmem_mcp.storage.pg import REFLECTION_LOCK, Database, store_lock


class PgReflectionRows(ReflectionFiles):
    def __init__(self, settings: Settings, db: Database) -> None:
        super().__init__(settings)
        self.db = db
        self._documents = {self.log_file: "reflection-log.md", self.evolution_file: "evolution.md"}

    def numbers(self) -> list[int]:
        return [int(row[0]) for row in self.db.all("SELECT number FROM reflections ORDER BY number")]

    def read(self, reflection_id: str) -> Reflection:
        self.path(reflection_id)  # checks the id's form
        rows = self.db.all("SELECT doc FROM reflections WHERE number = %s", (int(reflection_id[2:]),))
        if not rows:
            raise NotFoundError(f"no reflection {reflection_id!r}; see the pending ones with reflect")
        try:
            return Reflection.model_validate_json(rows[0][0])
        except ValueError as exc:
            raise CorruptEntryError(f"reflection {reflection_id} in the store cannot be read ({exc})") from None

    def with_status(self, status: str) -> Iterator[Reflection]:
        for reflection in self.all():
            if reflection.status == status:
                yield reflection

    def write(self, reflection: Reflection) -> Path:
        with self.db.transaction() as cursor:
            cursor.execute(
                "INSERT INTO reflections (number, doc) VALUES (%s, %s) ON CONFLICT (number) DO UPDATE"
                " SET doc = EXCLUDED.doc",
                (reflection.number, reflection.model_dump_json(indent=2)),
            )
        return self.path(reflection.id)

    def read_text(self, path: Path, limit: int) -> str:
        name = self._documents.get(path)
        if name is None:
            return super().read_text(path, limit)
        rows = self.db.all("SELECT body FROM documents WHERE name = %s", (name,))
        return bytes(rows[0][0]).decode("utf-8", errors="replace")[-limit:] if rows else ""

    def put_text(self, path: Path, text: str) -> bool:
        name = self._documents.get(path)
        if name is None:
            return super().put_text(path, text)
        with self.db.transaction() as cursor:
            cursor.execute(
                "INSERT INTO documents (name, body, version) VALUES (%s, %s, 1) ON CONFLICT (name) DO NOTHING",
                (name, text.encode("utf-8")),
            )
            return bool(cursor.rowcount)

    def _append(self, path: Path, heading: str, text: str) -> None:
        name = self._documents.get(path)
        if name is None:
            super()._append(path, heading, text)
            return
        addition = (text.rstrip("\n") + "\n\n").encode()
        with self.db.transaction() as cursor:
            cursor.execute(
                "INSERT INTO documents (name, body, version) VALUES (%s, %s, 1) ON CONFLICT (name) DO UPDATE"
                " SET body = documents.body || %s, version = documents.version + 1",
                (name, (heading + "\n").encode() + addition, addition),
            )

    @contextlib.contextmanager
    def claim(self) -> Iterator[None]:
        with store_lock(self.db, REFLECTION_LOCK, wait=False) as had:
            if not had:
                raise ReflectionBusy("another reflection is running on this store; try again when it has finished")
            yield
