"""Who changed what, when, why and with what approval (seed 004 §12): the one place stores report a change.

Each store's service calls `Audit.record` after its file is durably in place and before the change is
acknowledged, inside the step that undoes the file when something after it fails: an acknowledged change
always has its line, and a change that failed has none. (A crash between the file and its line leaves a
change without a line, never acknowledged; the git history's start-up check finds it — governance/history.py.)

The actor is the process's own (main, subagent:NAME, patrol:NAME from its namespace), or what a caller set
for a stretch of work with `acting_as` (dream:RUN, manual for the CLI, system:…). What the main agent's server
saves on its own is tagged as seed 004 §12.3 says: bot:trigger-remember (a trigger phrase it acted on),
bot:auto-detect (facts a compaction picked out), system:decay (the decay pass).
"""

from __future__ import annotations

import contextlib
import contextvars
import difflib
import logging
import os
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from pathlib import Path

from rockmem_mcp.audit.line_index import LineIndex, line_index
from rockmem_mcp.audit.log import NO_APPROVAL, AuditLine, AuditLog, format_time
from rockmem_mcp.audit.versions import FileVersion, VersionLog
from rockmem_mcp.config import Settings
from rockmem_mcp.errors import RockmemError
from rockmem_mcp.models import utc_now
from rockmem_mcp.storage.no_follow import is_real_folder, read_bytes
from rockmem_mcp.storage.pg import is_database_url

log = logging.getLogger(__name__)

AUDIT_NAME = "audit.log"
VERSIONS_NAME = "rockmem-versions"  # inside .git: never part of the history itself
CAPTURE_BYTES = 64 * 1024
MANUAL = "manual"
DOCTOR = "system:doctor"
# Seed 004 §12.3's tags for what the main agent's server wrote on its own: a "remember that …" it acted on, a
# fact it picked out of a conversation, and the decay pass's tier transitions.
TRIGGER_REMEMBER = "bot:trigger-remember"
AUTO_DETECT = "bot:auto-detect"
DECAY = "system:decay"

_actor: contextvars.ContextVar[str | None] = contextvars.ContextVar("rockmem_audit_actor", default=None)
_approval: contextvars.ContextVar[str | None] = contextvars.ContextVar("rockmem_audit_approval", default=None)


@contextlib.contextmanager
def acting_as(actor: str, approval: str | None = None) -> Iterator[None]:
    """Changes made inside (in this thread or task) are logged as `actor`'s, with `approval` if given."""
    actor_token = _actor.set(actor)
    approval_token = _approval.set(approval)
    try:
        yield
    finally:
        _actor.reset(actor_token)
        _approval.reset(approval_token)


def current_actor() -> str | None:
    return _actor.get()


def process_actor(namespace: str | None) -> str:
    """main for a process of its own; subagent:NAME or patrol:NAME for one started in such a namespace."""
    if namespace:
        root, _, name = namespace.partition("/")
        if root in ("subagent", "patrol"):
            return f"{root}:{name}"
    return "main"


def bot_actor(tag: str, namespace: str | None) -> str:
    """`tag` for the main agent's process; a sub-agent's or patrol's keeps its own name (whose write it was)."""
    own = process_actor(namespace)
    return tag if own == "main" else own


def quoted(text: str, limit: int = 60) -> str:
    """A short quote of stored text for a summary (the log cleans it to one printable line)."""
    text = " ".join(text.split())
    return '"' + (text if len(text) <= limit else text[: limit - 1].rstrip() + "…") + '"'


def audit_log(settings: Settings) -> AuditLog:
    """The audit log: the home's `meta/audit.log`, or the table of the database replicas share (one trail)."""
    if is_database_url(settings.store):
        from rockmem_mcp.audit.postgres import PgAuditLog
        from rockmem_mcp.storage.pg import shared_database

        db = shared_database(str(settings.store), "stores", settings.store_schema)
        return PgAuditLog(db, "the store's audit_lines table")  # type: ignore[return-value]
    return AuditLog(settings.meta_dir / AUDIT_NAME)


class Audit:
    def __init__(self, settings: Settings, clock: Callable[[], datetime] = utc_now) -> None:
        self.enabled = settings.audit
        self.home = settings.home
        self.log = audit_log(settings)
        # Where an item's or a run's lines are (a database's log is scanned): the trail reads those lines only.
        log_path = self.log.path if isinstance(self.log, AuditLog) else None
        self.index: LineIndex = line_index(self.log, log_path, settings.index_dir)
        self._clock = clock
        self._process_actor = process_actor(settings.namespace)
        # Each change's new bytes, for the git history to keep every version (audit/versions.py): a home's
        # files only (a database store's records are rows; its history is the database's own backups).
        self._git_dir = settings.home / ".git"
        keeps_git = settings.audit_git and not is_database_url(settings.store)
        self.versions = VersionLog(self._git_dir / VERSIONS_NAME) if keeps_git else None
        self._capturing = False  # the home is a git repository (checked until it is)

    def actor(self) -> str:
        return _actor.get() or self._process_actor

    def file(self, path: str | Path) -> str:
        """`path` as the log names it: relative to the home, `/` separated (a path outside is kept whole)."""
        text = os.fspath(path)
        home = os.fspath(self.home)
        if text.startswith(home + os.sep):
            text = text[len(home) + 1 :]
        return text.replace(os.sep, "/")

    def line(
        self, action: str, path: str | Path, summary: str, approval: str | None = None, actor: str | None = None
    ) -> AuditLine:
        actor = actor or self.actor()
        approval = approval or _approval.get() or (NO_APPROVAL if actor == MANUAL else "auto")
        return AuditLine(self._clock(), action, self.file(path), actor, approval, summary)

    def record(
        self,
        action: str,
        path: str | Path,
        summary: str,
        approval: str | None = None,
        actor: str | None = None,
        undo: Callable[[], object] | None = None,
    ) -> None:
        """Append one line durably; raises OSError when it cannot, after running `undo` (the change's own undo,
        for a store that has one: the change then did not happen, and the error says so)."""
        if self.enabled:
            self.record_many([self.line(action, path, summary, approval, actor)], undo)

    def record_many(self, lines: Iterable[AuditLine], undo: Callable[[], object] | None = None) -> None:
        """Append the lines of one change (a batch: one write, one fsync); on failure as `record`."""
        if not self.enabled:
            return
        batch = list(lines)
        try:
            self.log.append(batch)
        except BaseException:
            if undo is not None and batch:
                undone(undo, "a change whose audit line could not be written")
            raise
        self._capture(batch)

    def _capture(self, batch: list[AuditLine]) -> None:
        """Keep what each changed file holds now, for the history (best effort: the change is done and logged;
        without this the history keeps the file's state at its next commit)."""
        if self.versions is None or not (self._capturing or is_real_folder(self._git_dir)):
            return
        self._capturing = True
        versions = []
        for line in batch:
            if line.action == "APPEND" or "*" in line.file or line.file.endswith("/"):
                # An append-only log's earlier states are prefixes of its later ones; a change of many files:
                # their commit reads them from disk.
                continue
            try:
                data: bytes | None = read_bytes(os.path.join(self.home, line.file))
            except FileNotFoundError:
                data = None
            except (OSError, RockmemError):  # a folder, a link, unreadable: its commit reads it from disk
                continue
            if data is not None and len(data) > CAPTURE_BYTES:
                continue  # a big file (a long day's episode log): its commit reads it from disk
            versions.append(FileVersion(format_time(line.time), line.file, data))
        try:
            self.versions.append(versions)
        except OSError as exc:
            log.debug("version capture skipped: %s", exc)


def line_changes(before: str, after: str) -> str:
    """How a text file's lines changed, for a summary: "+3 -1 lines" (difflib over its lines)."""
    added = removed = 0
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, before.splitlines(), after.splitlines()).get_opcodes():
        if op != "equal":
            removed += i2 - i1
            added += j2 - j1
    return f"+{added} -{removed} lines"


def undone(undo: Callable[[], object], what: str) -> None:
    """Run an undo step; its own failure is logged (the error that called for it is the one reported)."""
    try:
        undo()
    except (RockmemError, OSError) as exc:
        log.warning("could not undo %s: %s", what, exc)
