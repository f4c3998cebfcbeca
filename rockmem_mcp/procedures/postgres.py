"""Procedures in PostgreSQL: ProcedureFiles' interface over the `procedures` table, so a workflow learned through
one replica is offered by all. A row's identity is its version (bumped by every write), as a file's is its inode
and times; the store's write lock is store-wide (an advisory lock)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from rockmem_mcp.errors import CorruptEntryError
from rockmem_mcp.procedures.files import SUFFIX, Identity, ProcedureFiles
from rockmem_mcp.procedures.shapes import Procedure
from rockmem_mcp.storage.pg import PROCEDURES_LOCK, Database, store_lock


class PgProcedureRows(ProcedureFiles):
    def __init__(self, db: Database, home: Path, root: Path, lock_file: Path) -> None:
        super().__init__(home, root, lock_file)
        self.db = db

    def read(self, slug: str) -> Procedure:
        rows = self.db.all("SELECT doc FROM procedures WHERE slug = %s", (slug,))
        if not rows:
            raise FileNotFoundError(f"no procedure {slug}{SUFFIX}")
        try:
            procedure = Procedure.model_validate_json(rows[0][0])
        except ValueError as exc:
            raise CorruptEntryError(f"procedure {slug} in the store does not parse: {exc}") from None
        return procedure if procedure.slug == slug else procedure.model_copy(update={"slug": slug})

    def write(self, procedure: Procedure) -> None:
        with self.db.transaction() as cursor:
            cursor.execute(
                "INSERT INTO procedures (slug, doc, version) VALUES (%s, %s, 1) ON CONFLICT (slug) DO UPDATE"
                " SET doc = EXCLUDED.doc, version = procedures.version + 1",
                (procedure.slug, self.encode(procedure).decode()),
            )

    def remove(self, slug: str) -> bool:
        with self.db.transaction() as cursor:
            cursor.execute("DELETE FROM procedures WHERE slug = %s", (slug,))
            return bool(cursor.rowcount)

    def identity(self, slug: str) -> Identity:
        rows = self.db.all("SELECT version FROM procedures WHERE slug = %s", (slug,))
        if not rows:
            raise FileNotFoundError(f"no procedure {slug}{SUFFIX}")
        return (int(rows[0][0]), 0, 0)

    def identities(self) -> dict[str, Identity]:
        return {slug: (int(version), 0, 0) for slug, version in self.db.all("SELECT slug, version FROM procedures")}

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        with store_lock(self.db, PROCEDURES_LOCK):
            yield
