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
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

from rockmem_mcp.config import Settings
from rockmem_mcp.errors import InvalidInputError, NotFoundError
from rockmem_mcp.models import RevertResult, RevertSkip, utc_now
from rockmem_mcp.services.audit import Audit
from rockmem_mcp.services.audit_trail import AuditTrail, parse_moment
from rockmem_mcp.services.memory import MemoryService
from rockmem_mcp.storage.atomic import atomic_write_many, remove_durably
from rockmem_mcp.storage.audit_log import AuditLine
from rockmem_mcp.storage.no_follow import check_folders, read_bytes

if TYPE_CHECKING:
    from rockmem_mcp.services.graph import GraphService
    from rockmem_mcp.services.history import GitHistory

# The record of what happened is never rolled back.
NEVER_RESTORED = frozenset(
    {"meta/audit.log", "meta/audit-archive.md", "meta/alerts.json", "meta/critical-files.json", ".gitignore"}
)
_RESTORABLE_ROOTS = frozenset(
    {"memory", "knowledge-graph", "episodes", "procedures", "feedback", "forgotten", "dream-reports", "meta", "prompts"}
)
_REVERT_SUMMARY = re.compile(r"^(rv-[0-9a-z-]+): restored as of ([0-9a-f]{7,40}); before it ([0-9a-f]{7,40})")
_MOVED_FROM = re.compile(r"moved from (\S+)")
_COMMIT = re.compile(r"[0-9a-f]{7,40}")


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
    ) -> None:
        self.settings = settings
        self.audit = audit
        self.history = history
        self.trail = AuditTrail(audit, history)
        self.memory = memory
        self._graph = graph
        self._clock = clock

    def _git(self) -> GitHistory:
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
        if to and _COMMIT.fullmatch(to.strip().lower()):
            versions = [v for file in files for v in history.versions(file, 200)]
            known = [v.commit for v in versions if v.commit.startswith(to.strip().lower())]
            if not known:
                raise InvalidInputError(f"{to!r} is not a commit in {item!r}'s history: the audit tool lists them")
            commit = known[0]
        elif to:
            commit = self._commit_for(to)
        else:
            versions = history.versions(files[0], 2)
            if len(versions) < 2:
                raise InvalidInputError(f"{item!r} has only one version in the history: there is nothing to go back to")
            commit = versions[1].commit
        return self._restore(history.read_many(commit, files), commit, head, f"{item} as of {commit[:12]}")

    def revert_run(self, run: str) -> RevertResult:
        """Undo everything one run did: a dream (`dream:RUN` or `RUN`), a reflection (`reflection:ID`), or a
        revert (`rv-…`). A file someone else changed after the run is left as it is and listed as skipped."""
        history = self._git()
        head = history.flush()
        lines = list(self.audit.log.lines())
        run = run.strip()
        if run.startswith("rv-"):
            own = [line for line in lines if line.action == "REVERT" and line.summary.startswith(run + ":")]
            match = _REVERT_SUMMARY.match(own[0].summary) if own else None
            base = match.group(3) if match else None
        else:
            actor = run if ":" in run else f"dream:{run}"
            own = [line for line in lines if line.actor == actor]
            base = history.commit_at(own[0].time - timedelta(milliseconds=1)) if own else None
        if not own:
            raise NotFoundError(f"no changes by {run!r} in the audit trail: list runs with the audit tool (actor)")
        if base is None:
            raise InvalidInputError(f"the history has no version from before {run!r} (git came after it)")
        files, last_own = _files_of(own)
        skipped = _changed_since(lines, own, last_own)
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
        already as they were are left alone. A failure to log puts the files back and raises."""
        home = os.fspath(self.settings.home)
        revert_id = new_revert_id(self._clock())
        before: dict[str, bytes | None] = {}
        for file, data in contents.items():
            if not restorable(file):
                continue
            if "/" in file:
                check_folders(home, file.rsplit("/", 1)[0])  # never written through a link
            current = _read(os.path.join(home, file))
            if current != data:
                before[file] = current
        result = RevertResult(revert_id=revert_id, restored_to=commit)
        if not before:
            return result
        summary = f"{revert_id}: restored as of {commit[:12]}; before it {(head or '?')[:12]} ({label})"
        lines = [self.audit.line("REVERT", file, summary) for file in before]
        memory_ids = [file.rsplit("/", 1)[-1][: -len(".json")] for file in before if file.startswith("memory/")]
        with self.memory.locked(memory_ids):
            self._write({file: contents[file] for file in before})
            try:
                self.audit.record_many(lines)
            except OSError:
                with contextlib.suppress(OSError):
                    self._write(before)
                raise
            self._reindex(list(before))
        result.restored = [file for file in before if contents[file] is not None]
        result.removed = [file for file in before if contents[file] is None]
        return result

    def _write(self, contents: dict[str, bytes | None]) -> None:
        home = self.settings.home
        atomic_write_many((os.path.join(home, file), data) for file, data in contents.items() if data is not None)
        for file, data in contents.items():
            if data is None:
                remove_durably(home / file)

    def _reindex(self, files: list[str]) -> None:
        """Memories and the graph keep indexes: re-read what changed (other processes follow the journals).
        Episodes, procedures and core memory notice a changed file by itself."""
        self.memory.adopt_files(files)
        graph_files = [file.split("/") for file in files if file.startswith("knowledge-graph/")]
        if graph_files and self._graph is not None:
            entities = [parts[-1].removesuffix(".json") for parts in graph_files if parts[1] == "entities"]
            triples = [parts[-1].removesuffix(".json") for parts in graph_files if parts[1] == "triples"]
            self._graph().reread_files(entities, triples)


def _read(path: str) -> bytes | None:
    try:
        return read_bytes(path)
    except FileNotFoundError:
        return None


def _files_of(own: list[AuditLine]) -> tuple[list[str], dict[str, datetime]]:
    """The files a run changed (a move's old path too), and when it last changed each."""
    last: dict[str, datetime] = {}
    for line in own:
        last[line.file] = line.time
        if line.action == "RENAME" and (moved := _MOVED_FROM.search(line.summary)):
            last[moved.group(1)] = line.time
    return list(last), last


def _changed_since(lines: list[AuditLine], own: list[AuditLine], last_own: dict[str, datetime]) -> dict[str, str]:
    """Files of the run that someone else changed after the run last did: undoing the run would undo them."""
    mine = set(map(id, own))
    skipped: dict[str, str] = {}
    for line in lines:
        if id(line) in mine or line.action == "ALERT" or line.file not in last_own:
            continue
        if line.time > last_own[line.file] and line.file not in skipped:
            skipped[line.file] = f"changed since by {line.actor} ({line.action} at {line.time:%Y-%m-%d %H:%M}Z)"
    return skipped
