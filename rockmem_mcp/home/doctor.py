"""`rockmem-mcp doctor`: check a data home and, with --fix, repair what can be repaired without losing data. Checks:
memory, graph and working-memory files that do not parse or sit where they should not; leftover temp files of
interrupted writes; stale or damaged derived indexes (snapshots, journals); embedding vectors whose memory is gone;
graph triples whose entities are gone; expired working-memory entries; unreadable dream reports; episode logs with
unreadable lines or not named as a day; symbolic links anywhere in the home (rockmem follows none); FIFOs, sockets
and devices anywhere in the home (rockmem opens none); a core memory (MEMORY.md) that is malformed or over a cap
(reported, never changed: only its owner can say what to keep). Fixing moves every bad user file to
`quarantine/{time}/…` (same relative path) — it never deletes a user's data — and symbolic links and special files
too (the link, never its target); removes temp files and orphaned derived data, rebuilds the indexes and sweeps
expired working memory. A store folder that is a link is reported and nothing else is checked: the home does not
open, and checking or fixing would go through the link. --fix needs the home to itself: it refuses, naming them,
while servers or commands have it open (a write in flight could look broken), and a store opened during the repair
waits for it. Without --fix the report says who has the home open.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from rockmem_mcp.audit.service import DOCTOR, Audit, acting_as
from rockmem_mcp.config import Settings
from rockmem_mcp.consolidation.shapes import DreamReport, Reflection
from rockmem_mcp.core.files import CoreUnreadableError
from rockmem_mcp.core.service import CoreMemory
from rockmem_mcp.errors import RefusedFileError
from rockmem_mcp.graph.shapes import Entity, Triple
from rockmem_mcp.memory.files import MemoryFiles
from rockmem_mcp.models import EntryLocation, Episode, MemoryEntry, normalize_category, utc_now, validate_entry_id
from rockmem_mcp.procedures.service import Procedures
from rockmem_mcp.proposals.shapes import Proposal
from rockmem_mcp.storage.atomic import TEMP_SUFFIX, atomic_write
from rockmem_mcp.storage.daily_log import DailyLog
from rockmem_mcp.storage.home_claim import home_to_itself, home_users, quarantine
from rockmem_mcp.storage.no_follow import linked_folders, read_bytes, special_kind
from rockmem_mcp.storage.pg import is_database_url

QUARANTINE = "quarantine"
DERIVED_SNAPSHOTS = ("memory-index.npz", "graph-snapshot.jsonl")


@dataclass
class Finding:
    kind: str  # malformed, misplaced, temp-file, stale-index, orphaned-vector, orphaned-triple, expired-working,
    # symlink, linked-folder, special-file, core-malformed, core-over-cap
    path: str  # relative to the home
    detail: str
    fixed: str = ""  # what --fix did


@dataclass
class DoctorReport:
    home: str
    findings: list[Finding] = field(default_factory=list)
    checked: dict[str, int] = field(default_factory=dict)
    quarantine: str | None = None
    in_use_by: list[str] = field(default_factory=list)  # processes with the home open (a report-only run)

    @property
    def healthy(self) -> bool:
        return not self.findings

    def as_json(self) -> str:
        return json.dumps(
            {
                "home": self.home,
                "healthy": self.healthy,
                "checked": self.checked,
                "quarantine": self.quarantine,
                "in_use_by": self.in_use_by,
                "findings": [f.__dict__ for f in self.findings],
            },
            indent=2,
        )


class Doctor:
    def __init__(self, settings: Settings, clock: Callable[[], datetime] = utc_now) -> None:
        self.settings = settings
        self.home = settings.home
        self._clock = clock
        self.audit = Audit(settings)  # stamped by the wall clock: a store's own clock is its records' time
        self._quarantine_dir: Path | None = None

    def run(self, fix: bool = False) -> DoctorReport:
        """Check the home; with `fix`, repair it, holding it exclusively (HomeInUseError while it is open)."""
        report = DoctorReport(home=str(self.home))
        self._started = self._clock()
        if not self.home.exists():
            if is_database_url(self.settings.store):  # a new replica's home: the store is checked all the same
                self._database(report, fix)
            return report
        if not fix:
            report.in_use_by = home_users(self.home)
            return self._run(report, fix)
        with home_to_itself(self.home), acting_as(DOCTOR):  # its repairs are audited as the doctor's
            return self._run(report, fix)

    def _run(self, report: DoctorReport, fix: bool) -> DoctorReport:
        linked = linked_folders(self.settings.store_dirs)
        for folder in linked:
            detail = f"a symbolic link to {os.readlink(folder)}: the home does not open; move the folder itself here"
            self._found(report, "linked-folder", folder, detail)
        if linked:
            return report  # checking or fixing would go through the link, out of the home
        self._odd_files(report, fix)
        shared = is_database_url(self.settings.store)
        memory_ids = self._database(report, fix) if shared else self._memory(report, fix)
        self._graph(report, fix)
        self._working(report, fix)
        self._vectors(report, fix, memory_ids)
        self._reports(report, fix)
        self._episodes(report, fix)
        self._procedures(report, fix)
        self._core(report)
        self._temp_files(report, fix)
        self._indexes(report, fix, memory_ids, shared)
        if self._quarantine_dir is not None:
            report.quarantine = str(self._quarantine_dir.relative_to(self.home))
        return report

    # ------------------------------------------------------------------ stores
    def _memory(self, report: DoctorReport, fix: bool) -> set[str]:
        root = self.settings.memory_dir
        files = MemoryFiles(root)
        ids: set[str] = set()
        count = 0
        for path in _files(root):
            relative = path.relative_to(root)
            if path.name.startswith("."):
                continue  # temp files: checked separately
            count += 1
            folder = "/".join(relative.parts[:-1]) or None
            problem = None
            try:
                if path.suffix != ".json":
                    raise ValueError("not an entry file (entries are {id}.json)")
                normalize_category(folder)
                validate_entry_id(path.stem)
                entry = MemoryEntry.model_validate_json(read_bytes(path))
                ids.add(path.stem)
                # On a case-insensitive filesystem a folder keeps its first spelling: the entry's case stands.
                read_as = files.true_category(EntryLocation(path.stem, folder), entry.category)
                if entry.id != path.stem or entry.category != read_as:
                    problem = (
                        "misplaced",
                        f"holds id {entry.id!r} / category {entry.category!r}; read as its place says",
                    )
            except (ValueError, ValidationError, OSError) as exc:
                problem = ("malformed", _first_line(exc))
            if problem is None:
                continue
            kind, detail = problem
            finding = self._found(report, kind, path, detail)
            if fix and kind == "malformed":
                finding.fixed = self._quarantine(path, finding.detail)
            elif kind == "misplaced":
                finding.fixed = "nothing needed: the file's place wins (its id and category are read from it)"
        report.checked["memory files"] = count
        return ids

    def _database(self, report: DoctorReport, fix: bool) -> set[str]:
        """A database store (ROCKMEM_STORE): reachable and at this code's schema (missing steps are applied, as a
        server would), every memory row parsing with the id and category of its row, every working-memory row
        parsing; --fix moves a broken memory row's text into the home's quarantine/ folder and deletes the row."""
        from rockmem_mcp.storage.pg import MIGRATIONS, Database

        store = str(self.settings.store)
        db = Database(store, self.settings.store_schema)
        try:
            (version,) = db.one("SELECT max(version) FROM rockmem_schema")
            report.checked["store schema"] = int(version)
            if version != MIGRATIONS[-1][0]:
                report.findings.append(Finding("store-schema", "store:rockmem_schema", f"at {version}"))
            ids: set[str] = set()
            count = 0
            for row_id, category, doc in _rows(db):
                count += 1
                try:
                    entry = MemoryEntry.model_validate_json(doc)
                    if entry.id != row_id or entry.category != category:
                        raise ValueError(f"holds id {entry.id!r} / category {entry.category!r}")
                    ids.add(row_id)
                except (ValueError, ValidationError) as exc:
                    finding = Finding("malformed", f"store:memories/{row_id}", _first_line(exc))
                    report.findings.append(finding)
                    if fix:
                        finding.fixed = self._quarantine_row(db, row_id, doc, finding.detail)
            report.checked["store memories"] = count
            working = db.all("SELECT root, entries FROM working")
            for root, body in working:
                try:
                    if not isinstance(json.loads(body), dict):
                        raise ValueError("not an object")
                except ValueError as exc:
                    report.findings.append(Finding("malformed", f"store:working/{root}", _first_line(exc)))
            report.checked["store working-memory roots"] = len(working)
            self._database_graph(db, report, fix)
            bad_lines = 0
            for (line,) in db.all("SELECT line FROM daily_logs WHERE log = 'episodes'"):
                try:
                    Episode.model_validate_json(line)
                except (ValueError, ValidationError):
                    bad_lines += 1
            if bad_lines:
                detail = f"{bad_lines} episode row(s) do not parse; searches skip them"
                report.findings.append(Finding("malformed", "store:daily_logs/episodes", detail))
            (changes,) = db.one("SELECT count(*) FROM changes")
            report.checked["store changes"] = int(changes)
            return ids
        finally:
            db.close()

    def _database_graph(self, db: Any, report: DoctorReport, fix: bool) -> None:
        """The graph's rows: each parses with its row's id, and each triple's ends exist; --fix quarantines a row
        that fails (its text kept in quarantine/, the row deleted with its change row, so every replica drops it)."""
        from rockmem_mcp.graph.postgres import ENTITY

        rows = db.all("SELECT kind, id, doc FROM graph_records ORDER BY kind, id")
        entities: set[str] = set()
        triples: list[tuple[str, str, Triple]] = []
        for kind, row_id, doc in rows:
            try:
                record = (Entity if kind == ENTITY else Triple).model_validate_json(doc)
                if record.id != row_id:
                    raise ValueError(f"holds id {record.id!r}")
            except (ValueError, ValidationError) as exc:
                self._database_finding(db, report, fix, "malformed", kind, row_id, doc, _first_line(exc))
                continue
            if isinstance(record, Entity):
                entities.add(row_id)
            else:
                triples.append((row_id, doc, record))
        for row_id, doc, triple in triples:
            missing = [end for end in (triple.subject, triple.object) if end not in entities]
            if missing:
                detail = f"entity {', '.join(missing)} is gone"
                self._database_finding(db, report, fix, "orphaned-triple", "t", row_id, doc, detail)
        report.checked["store graph records"] = len(rows)

    def _database_finding(
        self, db: Any, report: DoctorReport, fix: bool, kind: str, record_kind: str, row_id: str, doc: str, detail: str
    ) -> None:
        from rockmem_mcp.graph.postgres import STORE
        from rockmem_mcp.storage.pg_changes import append_changes
        from rockmem_mcp.storage.pg_id_locks import PgIdLocks

        folder = "entities" if record_kind == "e" else "triples"
        finding = Finding(kind, f"store:graph_records/{folder}/{row_id}", detail)
        report.findings.append(finding)
        if not fix:
            return
        kept = self._quarantine_text(f"store-graph-{folder}", row_id, doc)
        locks = PgIdLocks(db, STORE)  # the graph's write lock, as a replica's change holds it
        try:
            with locks.hold([STORE]), locks.writing([STORE]) as cursor:
                cursor.execute("SELECT doc FROM graph_records WHERE kind = %s AND id = %s", (record_kind, row_id))
                if cursor.fetchone() != (doc,):
                    return  # changed or gone since it was checked: left to the next run
                cursor.execute("DELETE FROM graph_records WHERE kind = %s AND id = %s", (record_kind, row_id))
                append_changes(cursor, db.writer_id, [{"s": STORE, "k": record_kind, "id": row_id}])
        finally:
            locks.close()
        moved = f"moved to {kept.relative_to(self.home)}"
        self.audit.record("RENAME", self.settings.graph_dir / folder / f"{row_id}.json", f"{moved}: {detail}")
        finding.fixed = moved

    def _quarantine_text(self, folder_name: str, row_id: str, doc: str) -> Path:
        """A row's text kept as a file under this run's quarantine/ folder (never lost)."""
        folder = self.home / QUARANTINE / self._started.strftime("%Y%m%dT%H%M%SZ") / folder_name
        folder.mkdir(parents=True, exist_ok=True)
        self._quarantine_dir = folder.parent
        kept = folder / f"{row_id}.json"
        atomic_write(kept, doc.encode())
        return kept

    def _quarantine_row(self, db: Any, row_id: str, doc: str, detail: str) -> str:
        """A broken row's text kept as a file in quarantine/ (never lost), then the row deleted, with an audit line."""
        kept = self._quarantine_text("store-memories", row_id, doc)
        from rockmem_mcp.storage.pg_changes import STORE, append_changes
        from rockmem_mcp.storage.pg_id_locks import PgIdLocks

        locks = PgIdLocks(db, STORE)  # the memory's write lock, as a replica's change of it holds it
        try:
            with locks.hold([row_id]), locks.writing([row_id]) as cursor:  # the row and its change together
                cursor.execute("SELECT category, doc FROM memories WHERE id = %s", (row_id,))
                found = cursor.fetchone()
                if found is None or found[1] != doc:
                    return "left as it is: it changed since it was checked (the next run looks again)"
                cursor.execute("DELETE FROM memories WHERE id = %s", (row_id,))
                append_changes(cursor, db.writer_id, [{"s": STORE, "op": "del", "id": row_id, "c": found[0]}])
        finally:
            locks.close()
        moved = f"moved to {kept.relative_to(self.home)}"
        self.audit.record("RENAME", self.settings.memory_dir / f"{row_id}.json", f"{moved}: {detail}")
        return moved

    def _graph(self, report: DoctorReport, fix: bool) -> None:
        entities: set[str] = set()
        triples: list[tuple[Path, Triple]] = []
        for kind, model in (("entities", Entity), ("triples", Triple)):
            folder = self.settings.graph_dir / kind
            count = 0
            for path in _files(folder):
                if path.name.startswith("."):
                    continue
                count += 1
                try:
                    validate_entry_id(path.stem)
                    if path.suffix != ".json" or path.parent != folder:
                        raise ValueError(f"not a {kind[:-1]} file ({kind}/{{id}}.json)")
                    record = model.model_validate_json(read_bytes(path))
                except (ValueError, ValidationError, OSError) as exc:
                    finding = self._found(report, "malformed", path, _first_line(exc))
                    if fix:
                        finding.fixed = self._quarantine(path, finding.detail)
                    continue
                if isinstance(record, Entity):
                    entities.add(path.stem)
                else:
                    triples.append((path, record))
            report.checked[f"graph {kind}"] = count
        for path, triple in triples:
            missing = [end for end in (triple.subject, triple.object) if end not in entities]
            if missing:
                finding = self._found(report, "orphaned-triple", path, f"entity {', '.join(missing)} is gone")
                if fix:
                    finding.fixed = self._quarantine(path, finding.detail)

    def _working(self, report: DoctorReport, fix: bool) -> None:
        folder = self.settings.working_dir
        now = self._clock()
        count = 0
        for path in _files(folder):
            if path.name.startswith("."):
                continue
            count += 1
            try:
                entries = json.loads(read_bytes(path))["entries"]
                if not isinstance(entries, dict):
                    raise ValueError("'entries' is not an object")
            except (ValueError, KeyError, TypeError, OSError) as exc:
                finding = self._found(
                    report, "malformed", path, f"{_first_line(exc)} (read as empty; the next write would replace it)"
                )
                if fix:
                    finding.fixed = self._quarantine(path, finding.detail)
                continue
            expired = 0
            for raw in entries.values():
                try:
                    if datetime.fromisoformat(raw["expires_at"]) <= now:
                        expired += 1
                except (KeyError, TypeError, ValueError):
                    expired += 1
            if expired:
                finding = self._found(report, "expired-working", path, f"{expired} expired or damaged entries")
                if fix:
                    from rockmem_mcp.working.service import sweep_expired

                    finding.fixed = f"swept ({sweep_expired(self.settings, self._clock)} dropped)"
        report.checked["working-memory files"] = count

    def _vectors(self, report: DoctorReport, fix: bool, memory_ids: set[str]) -> None:
        folder = self.settings.embeddings_dir
        count = 0
        for path in _files(folder):
            if path.suffix != ".bin" or path.name.startswith("."):
                continue
            count += 1
            if path.stem not in memory_ids:
                finding = self._found(report, "orphaned-vector", path, "its memory is gone (derived data)")
                if fix:
                    path.unlink(missing_ok=True)
                    finding.fixed = "removed (derived: re-made if the memory returns)"
        report.checked["vectors"] = count

    def _reports(self, report: DoctorReport, fix: bool) -> None:
        """Dream reports, reflections and sub-agents' proposals that cannot be read: quarantined with --fix (a
        reflection or proposal there is one the user can no longer resolve; the report says which)."""
        meta = self.settings.meta_dir
        kinds: tuple[tuple[Path, type[BaseModel], str], ...] = (
            (self.settings.dream_reports_dir, DreamReport, "dream reports"),
            (meta / "reflections", Reflection, "reflections"),
            (meta / "proposals", Proposal, "proposals"),
        )
        for folder, model, kind in kinds:
            checked = 0
            for path in _files(folder):
                if path.suffix != ".json" or path.name.startswith("."):
                    continue
                checked += 1
                try:
                    model.model_validate_json(read_bytes(path))
                except (ValueError, ValidationError, OSError) as exc:
                    finding = self._found(report, "malformed", path, _first_line(exc))
                    if fix:
                        finding.fixed = self._quarantine(path, finding.detail)
            report.checked[kind] = checked

    def _episodes(self, report: DoctorReport, fix: bool) -> None:
        """Episode logs: a file not named as a day is never read (misplaced); lines that do not parse are skipped
        when read (malformed). --fix moves the file to quarantine whole and writes back its good lines."""
        if not self._store_folder(report, fix, self.settings.episodes_dir, "the episode logs'"):
            return
        log = DailyLog(self.settings.episodes_dir, Episode)
        days = {log.path(day) for day in log.days()}
        for path in _files(self.settings.episodes_dir):
            if path.name.startswith("."):
                continue  # temp files: _temp_files
            if path not in days:
                finding = self._found(report, "misplaced", path, "not an episode log (YYYY-MM-DD.jsonl): never read")
                if fix:
                    finding.fixed = self._quarantine(path, finding.detail)
                continue
            report.checked["episodes"] = report.checked.get("episodes", 0) + 1
            try:
                lines = read_bytes(path).splitlines(keepends=True)
            except OSError as exc:
                self._found(report, "malformed", path, _first_line(exc))
                continue
            good, bad = [], []
            for number, line in enumerate(lines, start=1):
                if not line.strip():
                    continue
                try:
                    Episode.model_validate_json(line)
                except ValueError:
                    bad.append(number)
                else:
                    good.append(line if line.endswith(b"\n") else line + b"\n")
            if bad:
                detail = f"{len(bad)} unreadable line(s) of {len(good) + len(bad)} (first: line {bad[0]}), skipped"
                finding = self._found(report, "malformed", path, detail)
                if fix:
                    finding.fixed = self._quarantine(path, detail) + "; its readable lines written back"
                    if good:
                        atomic_write(path, b"".join(good))
                        said = f"its {len(good)} readable line(s) written back (the whole file is in quarantine)"
                        self.audit.record("CREATE", path, said, undo=partial(path.unlink, missing_ok=True))

    def _store_folder(self, report: DoctorReport, fix: bool, folder: Path, whose: str) -> bool:
        """Whether a store's folder can be checked: absent, or a folder. A regular file there is misplaced (the
        store cannot open; --fix moves it to quarantine); links and special files are _odd_files'."""
        if folder.is_symlink() or not folder.exists() or folder.is_dir():
            return not folder.is_symlink()
        if folder.is_file():
            finding = self._found(report, "misplaced", folder, f"a file where {whose} folder belongs: the store fails")
            if fix:
                finding.fixed = self._quarantine(folder, finding.detail)
        return False

    def _procedures(self, report: DoctorReport, fix: bool) -> None:
        """Procedure files that cannot be used (invalid JSON, wrong fields, a name that is not its slug): reported,
        left as they are (a person may be editing one; links and special files are _odd_files' to move)."""
        if not self._store_folder(report, fix, self.settings.procedures_dir, "the procedures'"):
            return
        procedures = Procedures(self.settings)
        try:
            unusable = procedures.unusable()
            report.checked["procedures"] = len(procedures.records()) + len(unusable)
        finally:
            procedures.close()
        for path, error in unusable:
            if not isinstance(error, RefusedFileError):  # links and special files: _odd_files reports and moves
                self._found(report, "malformed", path, f"{_first_line(error)}; left as it is")

    def _core(self, report: DoctorReport) -> None:
        """MEMORY.md malformed or over a cap: reported, never changed (it is the user's own text; only they, or
        an agent's edit that prunes it, can say what to keep)."""
        core = CoreMemory(self.settings)
        if self.settings.core_file.exists() or self.settings.core_file.is_symlink():
            report.checked["core"] = 1
        problems, error = core.problems(), core.read_error()
        if isinstance(error, CoreUnreadableError) and isinstance(error.cause, RefusedFileError):
            return  # a link, FIFO, socket or device named MEMORY.md: _odd_files reports (and fixes) it
        malformed = error is not None
        for problem in problems:
            kind = "core-malformed" if malformed else "core-over-cap"
            self._found(report, kind, self.settings.core_file, f"{problem}; left as it is: edit MEMORY.md by hand")

    def _temp_files(self, report: DoctorReport, fix: bool) -> None:
        for path in _files(self.home):
            if path.name.startswith(".") and path.name.endswith(TEMP_SUFFIX) and QUARANTINE not in path.parts:
                finding = self._found(report, "temp-file", path, "left by an interrupted write (never acknowledged)")
                if fix:
                    path.unlink(missing_ok=True)
                    finding.fixed = "removed"

    def _indexes(self, report: DoctorReport, fix: bool, memory_ids: set[str], shared: bool = False) -> None:
        """A snapshot that cannot be read, or disagrees with the files, makes a start slower or (edited files)
        stale; --fix deletes the derived indexes so they are rebuilt from the files. A database store's snapshot
        lags its rows by design (the change feed catches it up), so only its readability is checked."""
        index = self.settings.index_dir
        stale = []
        memory_snapshot = index / DERIVED_SNAPSHOTS[0]
        if memory_snapshot.exists() and shared:
            from rockmem_mcp.search.memory_index import MemoryIndex

            if MemoryIndex.load(memory_snapshot, with_vectors=False) is None:
                stale.append((memory_snapshot, "unreadable or from another version"))
        elif memory_snapshot.exists():
            from rockmem_mcp.search.memory_index import MemoryIndex

            loaded = MemoryIndex.load(memory_snapshot, with_vectors=False)
            if loaded is None:
                stale.append((memory_snapshot, "unreadable or from another version"))
            else:
                # The readable entry files (a malformed one is never indexed, so it does not count).
                indexed = {i for ids in loaded[0].ids_by_category().values() for i in ids}
                if indexed != memory_ids:
                    stale.append((memory_snapshot, "its entries differ from the files (caught up at each start)"))
        graph_snapshot = index / DERIVED_SNAPSHOTS[1]
        if graph_snapshot.exists():
            from rockmem_mcp.graph.files import read_snapshot

            snapshot = read_snapshot(graph_snapshot)
            if snapshot is None:
                stale.append((graph_snapshot, "unreadable"))
            else:
                on_disk = {p.stem for p in _files(self.settings.graph_dir / "triples") if p.suffix == ".json"}
                if on_disk != {t.id for t in snapshot.triples}:
                    stale.append((graph_snapshot, "its triples differ from the files (caught up at each start)"))
        for path, detail in stale:
            finding = self._found(report, "stale-index", path, detail)
            if fix:
                path.unlink(missing_ok=True)
                finding.fixed = "removed: rebuilt from the files at the next start"

    def _odd_files(self, report: DoctorReport, fix: bool) -> None:
        """Symbolic links, FIFOs, sockets and devices anywhere in the home: rockmem skips or refuses each (it
        never opens a special file, so none can hang it); --fix moves each to quarantine (a link, not its
        target)."""
        found, stack = [], [self.home]
        while stack:  # scandir's entries tell links, folders and files apart without a stat each (100k files)
            folder = stack.pop()
            with os.scandir(folder) as items:
                for item in items:
                    if item.is_symlink():
                        found.append((Path(item.path), "symlink", f"a symbolic link to {os.readlink(item.path)}"))
                    elif item.is_dir(follow_symlinks=False):
                        if not (folder == self.home and item.name == QUARANTINE):
                            stack.append(Path(item.path))
                    elif not item.is_file(follow_symlinks=False) and (kind := special_kind(item.path)):
                        found.append((Path(item.path), "special-file", f"a {kind}, not a regular file"))
        for path, kind, what in sorted(found):
            finding = self._found(report, kind, path, f"{what}: {'not followed' if kind == 'symlink' else 'skipped'}")
            if fix:
                finding.fixed = self._quarantine(path, finding.detail)

    # ------------------------------------------------------------------ helpers
    def _found(self, report: DoctorReport, kind: str, path: Path, detail: str) -> Finding:
        finding = Finding(kind, str(path.relative_to(self.home)), detail)
        report.findings.append(finding)
        return finding

    def _quarantine(self, path: Path, detail: str = "") -> str:
        """Move a file (a link, not its target) to quarantine, with a RENAME audit line; if the line cannot be
        written, the file is moved back and the error raised."""
        target = quarantine(self.home, path, self._started)
        self._quarantine_dir = self.home / QUARANTINE / self._started.strftime("%Y%m%dT%H%M%SZ")
        moved = f"moved to {target.relative_to(self.home)}"
        said = f"{moved}: {detail}" if detail else moved
        self.audit.record("RENAME", path, said, undo=lambda: os.replace(target, path))
        return moved


def _rows(db: Any, batch: int = 2_000) -> Iterator[tuple[str, str | None, str]]:
    """A database store's memory rows, a batch at a time (never all at once: 1M rows are GBs of text)."""
    last = ""
    while True:
        rows = db.all("SELECT id, category, doc FROM memories WHERE id > %s ORDER BY id LIMIT %s", (last, batch))
        if not rows:
            return
        yield from rows
        last = rows[-1][0]


def _files(root: Path) -> list[Path]:
    """Every regular file under `root` (links and special files are reported once, by _odd_files); [] if it is
    absent."""
    found = []
    for directory, folders, names in os.walk(root, followlinks=False):
        folders[:] = [f for f in folders if f != QUARANTINE]
        for name in names:
            path = Path(directory) / name
            with contextlib.suppress(OSError):
                if stat.S_ISREG(os.lstat(path).st_mode):
                    found.append(path)
    return sorted(found)


def _first_line(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        error = exc.errors()[0]
        return f"{'.'.join(map(str, error['loc'])) or 'file'}: {error['msg']}"
    return str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
