"""Rollback (seed 004 §12.8): put files back as the home's git history holds them, through the same writer,
audit log and indexes as every other change.

Three scopes: one item (a memory, entity, procedure or file) to an earlier version; everything one run did
(a dream run `dream:…`, a reflection, or an earlier revert `rv-…`); the whole home as it was at a point in
time. Each logs one REVERT line per file, naming its revert id and the commit it came back from, so a revert
is itself revertable. Working memory is never in the history and never touched; the audit log and alert
records are never rolled back (they are the record of what happened).
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from rockmem_mcp.audit.line_index import (
    Found,
    LineIndex,
    actor_key,
    file_key,
    gone_key,
    is_deleted_for_good,
    revert_key,
)
from rockmem_mcp.audit.log import moved_from
from rockmem_mcp.audit.service import Audit
from rockmem_mcp.config import Settings
from rockmem_mcp.errors import InvalidInputError, NotFoundError
from rockmem_mcp.governance.shapes import RevertResult, RevertSkip
from rockmem_mcp.governance.trail import AuditTrail, names_item, parse_moment
from rockmem_mcp.memory.service import MemoryService
from rockmem_mcp.models import utc_now
from rockmem_mcp.storage.atomic import atomic_write_many, remove_durably
from rockmem_mcp.storage.daily_log import still_at
from rockmem_mcp.storage.edited_files import held
from rockmem_mcp.storage.no_follow import check_folders, open_fd, read_bytes
from rockmem_mcp.storage.pg import is_database_url

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from rockmem_mcp.governance.history import GitHistory
    from rockmem_mcp.governance.integrity import CriticalFiles
    from rockmem_mcp.graph.service import GraphService

# The record of what happened is never rolled back.
NEVER_RESTORED = frozenset(
    {"meta/audit.log", "meta/audit-archive.md", "meta/alerts.json", "meta/critical-files.json", ".gitignore"}
)
_RESTORABLE_ROOTS = frozenset(
    {"memory", "knowledge-graph", "episodes", "procedures", "feedback", "forgotten", "dream-reports", "meta", "prompts"}
)
_REVERT_SUMMARY = re.compile(r"^(rv-[0-9a-z-]+): restored as of ([0-9a-f]{7,40}); before it ([0-9a-f]{7,40})")
_COMMIT = re.compile(r"[0-9a-f]{7,40}")
# How far an appender's clock may run behind the line order: reading an item's lines back from the newest, the
# first one this much older than a run's start ends the search for changes made since the run.
CLOCK_SKEW = timedelta(minutes=10)


def restorable(file: str) -> bool:
    """A file of a store, inside the home: never the audit record, working memory, indexes or vectors."""
    if file in NEVER_RESTORED or "\\" in file or file.startswith("/"):
        return False
    parts = PurePosixPath(file).parts
    if not parts or any(part in ("", ".", "..") or part.startswith(".") for part in parts):
        return False
    if len(parts) == 1:  # MEMORY.md, SOUL.md, … and the trigger phrases
        return file.endswith(".md") or file == "triggers.json"
    return parts[0] in _RESTORABLE_ROOTS and not file.startswith("meta/access/")


def new_revert_id(moment: datetime) -> str:
    return f"rv-{moment:%Y%m%d-%H%M%S}-{secrets.token_hex(2)}"


class Rollback:
    def __init__(
        self,
        settings: Settings,
        audit: Audit,
        history: GitHistory | None,
        memory: MemoryService,
        graph: Callable[[], GraphService] | None = None,
        clock: Callable[[], datetime] = utc_now,
        critical: CriticalFiles | None = None,
    ) -> None:
        self.settings = settings
        self.audit = audit
        self.history = history
        self.trail = AuditTrail(audit, history)
        self.memory = memory
        self._graph = graph
        self._clock = clock
        self.critical = critical  # a critical file put back keeps its checksum (no false alert)

    def _git(self) -> GitHistory:
        if is_database_url(self.settings.store):
            raise InvalidInputError(
                "rollback puts back a home's files from its git history; this server's store is a database, whose "
                "history is the database's own backups (point-in-time recovery). The audit trail still says who "
                "changed what and when; to undo one change, write the old value back with the store's own tool"
            )
        if self.history is None or not self.history.available:
            raise InvalidInputError(
                "rollback needs the home's git history, and git is not available here (install git, keep "
                "ROCKMEM_AUDIT_GIT on, and restart the server; history starts from then)"
            )
        return self.history

    # ------------------------------------------------------------------ the three scopes
    def revert_item(self, item: str, to: str | None = None) -> RevertResult:
        """Put an item's files back as they were at `to` (a commit from its history, or an ISO time); by
        default as they were before its latest change."""
        history = self._git()
        head = history.flush()
        files = [file for file in self.trail.files_of(item) if restorable(file)]
        if not files:
            raise NotFoundError(f"nothing in the history names {item!r}: use an id from search_memory or a file path")
        refuse_if_deleted_for_good(item, files, self.audit.index)
        if to and _COMMIT.fullmatch(to.strip().lower()):
            versions = [v for file in files for v in history.versions(file, 200)]
            known = [v.commit for v in versions if v.commit.startswith(to.strip().lower())]
            if not known:
                raise InvalidInputError(f"{to!r} is not a commit in {item!r}'s history: the audit tool lists them")
            commit = known[0]
        elif to:
            commit = self._commit_for(to)
        else:  # before its latest change: a moved memory's versions are in both its files
            found = sorted((v for file in files for v in history.versions(file, 2)), key=lambda v: v.time)
            commits = list(dict.fromkeys(v.commit for v in reversed(found)))
            if len(commits) < 2:
                raise InvalidInputError(f"{item!r} has only one version in the history: there is nothing to go back to")
            commit = commits[1]
        return self._restore(history.read_many(commit, files), commit, head, f"{item} as of {commit[:12]}")

    def revert_run(self, run: str) -> RevertResult:
        """Undo everything one run did: a dream (`dream:RUN` or `RUN`), a reflection (`reflection:ID`), or a
        revert (`rv-…`). A file someone else changed after the run is left as it is and listed as skipped."""
        history = self._git()
        head = history.flush()
        index = self.audit.index
        run = run.strip()
        if run.startswith("rv-"):
            found = index.find(
                [revert_key(run)], lambda line: line.action == "REVERT" and line.summary.startswith(run + ":")
            )
            own = found[::-1]  # oldest first
            match = _REVERT_SUMMARY.match(own[0].line.summary) if own else None
            base = match.group(3) if match else None
        else:
            actor = run if ":" in run else f"dream:{run}"
            own = index.find([actor_key(actor)], lambda line: line.actor == actor)[::-1]
            base = history.commit_at(own[0].line.time - timedelta(milliseconds=1)) if own else None
        if not own:
            raise NotFoundError(f"no changes by {run!r} in the audit trail: list runs with the audit tool (actor)")
        if base is None:
            raise InvalidInputError(f"the history has no version from before {run!r} (git came after it)")
        if history.resolve(base) is None:  # read from a missing commit, every file would look deleted
            raise InvalidInputError(
                f"{run!r} came back from commit {base}, which the history no longer has: a permanent delete or forget "
                "rewrote the history since, renaming every commit. Put the files back as of a time instead "
                "(revert with to=ISO time, or the whole home as of that time)"
            )
        files = _files_of(own)
        skipped = _changed_since(index, own, files)
        wanted = [file for file in files if file not in skipped and restorable(file)]
        result = self._restore(history.read_many(base, wanted), base, head, f"undo {run}")
        result.skipped += [RevertSkip(file=file, reason=reason) for file, reason in skipped.items()]
        return result

    def restore_home(self, moment: datetime) -> RevertResult:
        """Put every store's files back as they were at `moment` (the last commit at or before it)."""
        history = self._git()
        head = history.flush()
        commit = history.commit_at(moment)
        if commit is None:
            raise InvalidInputError(f"the history starts after {moment.isoformat()}: nothing to restore to")
        files = [file for file in history.changed_between(commit, head) if restorable(file)]
        return self._restore(history.read_many(commit, files), commit, head, f"home as of {moment.isoformat()}")

    def _commit_for(self, to: str) -> str:
        history = self._git()
        moment = parse_moment(to, self._clock(), "to")
        commit = history.commit_at(moment)
        if commit is None:
            raise InvalidInputError(f"the history starts after {to}: nothing to go back to")
        return commit

    # ------------------------------------------------------------------ writing
    def _restore(self, contents: dict[str, bytes | None], commit: str, head: str | None, label: str) -> RevertResult:
        """Write what changed (files then, missing files removed), log REVERT per file, then reindex. Files
        already as they were are left alone. Every store's own lock is held meanwhile, so no write of theirs
        lands between reading a file and replacing it; a failure to log puts the files back and raises."""
        home = os.fspath(self.settings.home)
        wanted = {file: data for file, data in contents.items() if restorable(file)}
        result = RevertResult(revert_id=new_revert_id(self._clock()), restored_to=commit)
        # A permanent delete or forget is final in every scope (an item, a run, the whole home): what it removed
        # is never written back from the history.
        gone = deleted_for_good(self.audit.index, [file for file, data in wanted.items() if data is not None])
        for file in [f for f, data in wanted.items() if data is not None and f in gone]:
            del wanted[file]
            result.skipped.append(RevertSkip(file=file, reason="deleted or forgotten for good: not brought back"))
        for file in wanted:
            if "/" in file:
                check_folders(home, file.rsplit("/", 1)[0])  # never written through a link
        with self._store_locks(list(wanted)):
            before: dict[str, bytes | None] = {}
            for file, data in wanted.items():
                current = _read(os.path.join(home, file))
                if current != data:
                    before[file] = current
            if not before:
                return result
            summary = f"{result.revert_id}: restored as of {commit[:12]}; before it {(head or '?')[:12]} ({label})"
            self._write({file: wanted[file] for file in before})
            try:
                self.audit.record_many([self.audit.line("REVERT", file, summary) for file in before])
            except OSError:
                with contextlib.suppress(OSError):
                    self._write(before)
                self.memory.adopt_files(list(before))
                raise
            self.memory.adopt_files(list(before))
        self._reindex_graph(list(before))
        for file in before:
            if self.critical is not None:
                self.critical.written(self.settings.home / file, wanted[file])
        result.restored = [file for file in before if wanted[file] is not None]
        result.removed = [file for file in before if wanted[file] is None]
        return result

    @contextlib.contextmanager
    def _store_locks(self, files: list[str]) -> Iterator[None]:
        """The locks the stores of `files` write under, in the order their own writers nest them (forget, core,
        procedures, workspace, graph, day logs, then the memories' ids last)."""
        meta = self.settings.meta_dir
        roots = {file.split("/", 1)[0] if "/" in file else file for file in files}
        with contextlib.ExitStack() as stack:
            if "forgotten" in roots:
                stack.enter_context(held(meta / "forget.lock"))
            if "MEMORY.md" in roots:
                stack.enter_context(held(meta / "core.lock"))
            if "procedures" in roots:
                stack.enter_context(held(meta / "procedures.lock"))
            if any(root.endswith(".md") and root != "MEMORY.md" for root in roots):
                stack.enter_context(held(meta / "workspace.lock"))
            if "knowledge-graph" in roots:
                stack.enter_context(held(self.settings.graph_dir / ".lock"))
            for file in sorted(f for f in files if f.startswith(("episodes/", "feedback/"))):
                stack.enter_context(_day_log_held(self.settings.home / file))
            ids = [f.rsplit("/", 1)[-1].removesuffix(".json") for f in files if f.startswith("memory/")]
            stack.enter_context(self.memory.locked(ids))
            yield

    def _write(self, contents: dict[str, bytes | None]) -> None:
        home = self.settings.home
        written = [file for file, data in contents.items() if data is not None]
        atomic_write_many((os.path.join(home, file), contents[file]) for file in written)
        kept = [_stat(home / file) for file in written]
        for file, data in contents.items():
            # On a case-insensitive filesystem a memory's two folders (`Work`, `work`) can be one file: the path
            # to remove may be the file just written (issue 45). Never remove that one.
            if data is None and not any(s is not None and s == _stat(home / file) for s in kept):
                remove_durably(home / file)

    def _reindex_graph(self, files: list[str]) -> None:
        """The graph keeps indexes: re-read what changed (other processes follow its journal). Memories were
        re-read under their locks; episodes, procedures and core memory notice a changed file by itself."""
        graph_files = [file.split("/") for file in files if file.startswith("knowledge-graph/")]
        if graph_files and self._graph is not None:
            entities = [parts[-1].removesuffix(".json") for parts in graph_files if parts[1] == "entities"]
            triples = [parts[-1].removesuffix(".json") for parts in graph_files if parts[1] == "triples"]
            self._graph().reread_files(entities, triples)


@contextlib.contextmanager
def _day_log_held(path: Path) -> Iterator[None]:
    """A day log's own lock (storage/daily_log.py: appenders flock the file): held on the file now at
    `path`, so an append waiting meanwhile lands in the file that replaces it."""
    while True:
        try:
            fd = open_fd(path, os.O_RDWR)
        except FileNotFoundError:
            yield
            return
        try:
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_EX)
                if not still_at(fd, path):
                    continue
            yield
            return
        finally:
            os.close(fd)


def _stat(path: Path) -> tuple[int, int] | None:
    """The (device, inode) of `path`, to tell two names of one file apart from two files; None if absent."""
    try:
        found = os.lstat(path)
    except OSError:
        return None
    return found.st_dev, found.st_ino


def _read(path: str) -> bytes | None:
    try:
        return read_bytes(path)
    except FileNotFoundError:
        return None


def _files_of(own: list[Found]) -> list[str]:
    """The files a run changed (a move's old path too)."""
    files: dict[str, None] = {}
    for line in (hit.line for hit in own):
        files.setdefault(line.file, None)
        if (old := moved_from(line)) is not None:
            files.setdefault(old, None)
    return list(files)


def _changed_since(index: LineIndex, own: list[Found], files: list[str]) -> dict[str, str]:
    """Files of the run that someone else changed after the run began (while it ran, or after): they go back
    to the state before the run, so undoing the run would undo those changes too. Only those files' lines are
    read, newest first, back to the run's start."""
    mine, began, wanted = {hit.at for hit in own}, own[0].line.time, set(files)
    since = index.find(
        {file_key(file) for file in files},
        lambda line: line.time >= began and (line.file in wanted or moved_from(line) in wanted),
        until=lambda line: line.time < began - CLOCK_SKEW,
    )
    skipped: dict[str, str] = {}
    for at, line in ((hit.at, hit.line) for hit in reversed(since)):  # oldest first: the first change says why
        if at in mine or line.action == "ALERT":
            continue
        for file in (line.file, moved_from(line)):
            if file in wanted and file not in skipped:
                skipped[file] = f"changed since by {line.actor} ({line.action} at {line.time:%Y-%m-%d %H:%M}Z)"
    return skipped


def deleted_for_good(index: LineIndex, files: list[str]) -> set[str]:
    """Which of `files` a permanent delete or forget removed (a DELETE line that says so), whatever came after."""
    wanted = set(files)
    found = index.find(
        {gone_key(file) for file in files}, lambda line: is_deleted_for_good(line) and line.file in wanted
    )
    return {hit.line.file for hit in found}


def refuse_if_deleted_for_good(item: str, files: list[str], index: LineIndex) -> None:
    """A permanent delete or forget is final: the user asked for the text to be gone, so no revert brings it back
    (issue 45). The latest line naming the item's files says whether it was."""
    latest = index.find({file_key(f) for f in files}, lambda line: any(names_item(line.file, f) for f in files), 1)
    last = latest[0].line if latest else None
    if last is not None and is_deleted_for_good(last):
        raise InvalidInputError(
            f"{item!r} was deleted for good on {last.time:%Y-%m-%d %H:%M} UTC ({last.actor}): a permanent delete is "
            "final and is not reverted. Save it again if it should come back."
        )
