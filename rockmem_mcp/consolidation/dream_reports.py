"""Dream reports: `dream-reports/{id}.json` in a home, or rows of `dream_reports` in a database several replicas
share (then every replica knows when the store last dreamed, and schedules from that). Ids sort by time."""

from __future__ import annotations

import os
from pathlib import Path

from rockmem_mcp.config import Settings
from rockmem_mcp.consolidation.shapes import DreamReport
from rockmem_mcp.storage.atomic import atomic_write, remove_durably
from rockmem_mcp.storage.no_follow import read_bytes
from rockmem_mcp.storage.pg import is_database_url


class ReportFiles:
    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def path(self, report_id: str) -> Path:
        return self.directory / f"{report_id}.json"

    def ids(self) -> list[str]:
        """Report ids, oldest first."""
        try:
            names = os.listdir(self.directory)
        except FileNotFoundError:
            return []
        return sorted(n[:-5] for n in names if n.endswith(".json") and not n.startswith("."))

    def read(self, report_id: str) -> DreamReport:
        """The report; OSError or ValueError when it cannot be read."""
        return DreamReport.model_validate_json(read_bytes(self.path(report_id)))

    def write(self, report: DreamReport) -> None:
        atomic_write(self.path(report.id), report.model_dump_json(indent=2).encode() + b"\n")

    def remove(self, report_id: str) -> None:
        remove_durably(self.path(report_id))


class ReportRows(ReportFiles):
    """The same over the `dream_reports` table; `path` still names the file the audit trail speaks of. (`db` is a
    storage.pg.Database: typed loosely, as psycopg is only imported where a database is named.)"""

    def __init__(self, directory: Path, db: object) -> None:
        super().__init__(directory)
        self.db = db

    def ids(self) -> list[str]:
        return [row[0] for row in self.db.all("SELECT id FROM dream_reports ORDER BY id")]  # type: ignore[attr-defined]

    def read(self, report_id: str) -> DreamReport:
        rows = self.db.all("SELECT doc FROM dream_reports WHERE id = %s", (report_id,))  # type: ignore[attr-defined]
        if not rows:
            raise FileNotFoundError(f"no dream report {report_id}")
        return DreamReport.model_validate_json(rows[0][0])

    def write(self, report: DreamReport) -> None:
        with self.db.transaction() as cursor:  # type: ignore[attr-defined]
            cursor.execute(
                "INSERT INTO dream_reports (id, doc) VALUES (%s, %s) ON CONFLICT (id) DO UPDATE SET doc = EXCLUDED.doc",
                (report.id, report.model_dump_json(indent=2)),
            )

    def remove(self, report_id: str) -> None:
        with self.db.transaction() as cursor:  # type: ignore[attr-defined]
            cursor.execute("DELETE FROM dream_reports WHERE id = %s", (report_id,))


def report_store(settings: Settings) -> ReportFiles:
    if is_database_url(settings.store):
        from rockmem_mcp.storage.pg import shared_database

        return ReportRows(
            settings.dream_reports_dir, shared_database(str(settings.store), "stores", settings.store_schema)
        )
    return ReportFiles(settings.dream_reports_dir)
