"""The home's history in git (seed 004 §12.3): the ground truth that rollback and "who changed what" read.

The home is a git repository (derived indexes, vectors and scratch stores ignored). Saves never wait on it:
they append their line to `meta/audit.log` (audit/service.py) and carry on. A background thread commits
what the log gained since HEAD, in batches, with the seed's message format:

    [ACTION] FILE — SUMMARY            (one change; `[BATCH] N changes — first summary…` for more)

    [ACTION] FILE — SUMMARY            (one block per change, at most 200)
    Actor: ACTOR
    Approval: APPROVAL
    Trigger: TRIGGER

    Audit-Lines: START-END             (the bytes of this commit's meta/audit.log its changes were logged in)

The log itself is part of every commit, staged as exactly the bytes read before the files it names were
staged: a line is in HEAD only once its file's change is (a change can be in a commit before its line, never
after; `versions` attributes such a late line to the version that holds the change).

git is run as a program, hermetically: GIT_DIR and GIT_WORK_TREE name the home (a parent repository is never
discovered), no global or system configuration, no hooks, no signing, our own identity. A commit is written
by `git fast-import` (every blob, tree and the commit in one pack, one fsync) and HEAD moved by update-ref:
fast, and nothing a user's configuration can hook into.
A home copied from someone else is data, not code: its own `.git/config` (and the files it includes) and its
`.gitattributes` cannot be switched off, so nothing they name is ever run. `.git/info/attributes`, rewritten
before every commit, outranks every attributes file and selects no filter, diff or merge driver (`git status`
would otherwise run a filter's `clean` or `process` command); each such driver's commands are also overridden
empty by name; the settings that name a program (fsmonitor, hooks, pager, signatures) are overridden on every
call; and no transport is allowed, so no fetch (a partial clone's lazy one) can run `core.sshCommand`, a
credential helper or an `ext::` command. A linked worktree's `.git` (a `commondir` file: the repository is
elsewhere) turns the history off, as a `.git` that is a link or a file does.
Several processes share a home: committers take an flock inside `.git`; one that finds nothing pending does
nothing. History is only appended to, except by a permanent delete or forget: `purge` then rewrites every commit
so no object holds the removed item's text (issue 45). Without git the server works and says so once.
"""

from __future__ import annotations

import bisect
import contextlib
import fnmatch
import hashlib
import json
import logging
import os
import posixpath
import re
import shutil
import stat
import subprocess
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO

from rockmem_mcp.audit.line_index import PATTERN_KEY, IndexStale, LogView, file_key
from rockmem_mcp.audit.log import NO_APPROVAL, AuditLine, format_time, moved_from, parse_time
from rockmem_mcp.audit.redaction import Redaction
from rockmem_mcp.audit.service import AUDIT_NAME, CAPTURE_BYTES, MANUAL, Audit
from rockmem_mcp.audit.versions import VersionRead
from rockmem_mcp.config import Settings
from rockmem_mcp.errors import HistoryError, InvalidInputError, RefusedFileError
from rockmem_mcp.governance.history_filter import FilterCounts, HistoryFilter
from rockmem_mcp.models import utc_now
from rockmem_mcp.storage.atomic import atomic_write, remove_durably
from rockmem_mcp.storage.edited_files import held
from rockmem_mcp.storage.no_follow import read_bytes, read_bytes_and_stat
from rockmem_mcp.storage.pg import is_database_url

log = logging.getLogger(__name__)

GITIGNORE = """\
# rockmem: what the history leaves out (derived data, scratch stores, locks and temp files).
/index/
/.embeddings/
/working-memory/
/conversations/
/quarantine/
/meta/access/
# The server's own bookkeeping, written without an audit line of its own (the changes it records have theirs).
/meta/format.json
/meta/dream-episodes.json
/meta/critical-files.json
/meta/alerts.json
/meta/audit-archive.json
/meta/forget.log
/dream-reports/.merges.jsonl
*.lock
.*.tmp
"""
LOCK_NAME = "rockmem-commit.lock"  # inside .git: serializes committers across processes
PURGES_FOLDER = "rockmem-purges"  # inside .git: a permanent delete's purge until it is done (GitHistory.purge)
EMAIL = "rockmem@localhost"
COMMITTER = "rockmem"
INIT_ACTOR = "system:init"
MAX_BLOCKS = 200
REPACK_EVERY_COMMITS = 25  # each commit is a small pack: merge them this often
FEW_PATHSPECS = 32  # ignored paths looked up in the index by name; more: the whole index listed (`_ignored`)
WORK_REF = "refs/rockmem/last"  # where fast-import writes a commit before update-ref moves HEAD to it
OUTSIDE_SUMMARY = "changed outside the server (found at start)"
ZERO_SHA = "0" * 40
# Every git call: no hooks (update-ref runs reference-transaction hooks), no signing or signature checks, no
# line-ending or filesystem-monitor magic, no pager, no credential helper, no attributes file but the home's,
# packs, objects, refs and the index fsync'd (a crash leaves no corrupt repository), and no gc. These outrank
# whatever the home's .git/config (or a file it includes) says: a home is data, never code to run.
GIT_CONFIG = (
    "core.hooksPath=/dev/null",
    "commit.gpgSign=false",
    "log.showSignature=false",
    "log.follow=false",
    "core.autocrlf=false",
    "core.safecrlf=false",
    "core.quotePath=false",
    "core.fsmonitor=false",
    "core.pager=cat",
    "core.attributesFile=/dev/null",
    "credential.helper=",
    "core.fsync=committed,index",
    "core.fsyncMethod=batch",
    # A commit's pack is kept as written (one file and one fsync): git's default unpacks an import of fewer than 100
    # objects into loose files, one `unpack-objects` run and a file per object (the audit log compressed again).
    "fastimport.unpackLimit=1",
    "gc.auto=0",
    "gc.autoDetach=false",
    "maintenance.auto=false",
)
# Outranks every .gitattributes (git reads $GIT_DIR/info/attributes first): no filter, diff or merge driver is
# ever selected, so none of the commands the home's configuration gives one runs; no line-ending, ident or
# encoding conversion either, so `git status` compares the bytes fast-import committed. `!` leaves the attribute
# unspecified (a hand-run `git diff` still tells text from binary), `-` unsets it.
INFO_ATTRIBUTES = """\
# Written by rockmem before every commit (the home's history is data: no filter, diff or merge driver runs).
* !filter !diff !merge -text !eol -ident !working-tree-encoding
"""
# A driver's settings that name a command (filter.NAME.process, diff.NAME.textconv, merge.NAME.driver, …):
# found by `git config --get-regexp` and overridden empty, in case an attribute still selects one.
_DRIVER_COMMAND = re.compile(r"^(filter\..+\.(process|clean|smudge)|diff\..+\.(textconv|command)|merge\..+\.driver)$")
FIRST_COMMIT_INLINE_FILES = 200  # a new home's first commit, made before the first request: a few git runs
VERSIONS_KEEP_BYTES = 1 << 20  # .git/rockmem-versions while commits fail: the newest captured versions, 1 MiB
_TRAILER = re.compile(r"^Audit-Lines: (\d+)-(\d+)\s*$", re.MULTILINE)
_TIME_TRAILER = re.compile(r"^Audit-Time: (\S+)\s*$", re.MULTILINE)
_NO_PROGRAMS = ("--no-ext-diff", "--no-textconv")  # for log and diff, whatever they are asked to show
_LOG_FORMAT = "--format=%H%x1f%ct%x1f%B%x1e"
_COMMIT_NAME = re.compile(r"[0-9a-fA-F]{4,64}|HEAD")
_QUOTED = re.compile(r'"[^"]*"?')
_CONTEXT = re.compile(r"\(([^()]{1,120})\)")
_GLOB = re.compile(r"[*?\[]")
_ON_DISK = object()  # a file committed as it is on disk, not as a captured version holds it

_missing_warned = False
_missing_lock = threading.Lock()


def _warn_missing(reason: str) -> None:
    """Once per process: the server works without history, and says so."""
    global _missing_warned
    with _missing_lock:
        if _missing_warned:
            return
        _missing_warned = True
    log.warning("git history is off: %s; changes are still logged in meta/audit.log", reason)


@dataclass(frozen=True)
class Version:
    commit: str  # full sha
    time: datetime  # the time of the last audit line the commit carries (UTC, to the millisecond)
    lines: list[AuditLine]  # the audit lines for this file this version answers for; may be empty
    deleted: bool  # the file does not exist in this commit


@dataclass(frozen=True)
class PurgeReport:
    audit_lines: int  # lines of meta/audit.log redacted
    counts: FilterCounts  # commits read, blobs rewritten, file versions and messages changed
    seconds: float


@dataclass
class _Middle:
    lines: list[AuditLine]  # a stretch of a batch in which no file changed twice
    start: int  # its bytes in meta/audit.log
    end: int
    files: dict[str, bytes | None]  # each file's bytes right after its last change in the stretch (None: gone)


@dataclass
class _Pending:
    data: bytes  # meta/audit.log up to its last whole line: staged as is
    stat: os.stat_result | None  # None: there is no audit.log
    start: int  # where the lines not yet in HEAD begin
    lines: list[AuditLine]  # those lines
    rewritten: bool = False  # the log no longer starts with HEAD's (retention folded older lines away)


class GitHistory:
    def __init__(self, settings: Settings, audit: Audit, clock: Callable[[], datetime] = utc_now) -> None:
        self.settings, self.audit, self._clock = settings, audit, clock
        self.home = settings.home
        self.git_dir = self.home / ".git"
        self.audit_path = settings.meta_dir / AUDIT_NAME
        self.audit_file = audit.file(self.audit_path)  # meta/audit.log
        # A database store's records are rows, not the home's files: its history is the database's own backups.
        self.shared = is_database_url(settings.store)
        wanted = settings.audit_git and settings.audit and not self.shared
        self._git = shutil.which("git") if wanted else None
        # History is driven by the audit lines: with the audit log off there is nothing to commit.
        self.available = self._git is not None
        if wanted and self._git is None:
            _warn_missing("the git program was not found on PATH")
        elif (
            self.available
            and os.path.lexists(self.git_dir)
            and not (self.git_dir.is_dir() and not self.git_dir.is_symlink())
        ):  # a link or a gitfile would send the history's writes out of the home
            self.available = False
            _warn_missing(f"{self.git_dir} is not a folder of the home (a link or a file)")
        elif self.available and os.path.lexists(self.git_dir / "commondir"):
            self.available = False  # its config, objects and attributes would be read from elsewhere
            _warn_missing(f"{self.git_dir} is a linked worktree's (its commondir file names another repository)")
        no_home = str(self.git_dir / "rockmem-no-home")  # no ~/.config/git/{ignore,attributes} either
        self._env = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": no_home,
            "XDG_CONFIG_HOME": no_home,
            "GIT_DIR": str(self.git_dir),
            "GIT_WORK_TREE": str(self.home),
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_LITERAL_PATHSPECS": "1",  # a file named `*.md` is that file, not a pattern
            "LC_ALL": "C",
            # No transport at all (this list outranks every protocol.*.allow): nothing here fetches, and a
            # partial clone's lazy fetch of a missing object would run the home's remote (`ext::` commands,
            # core.sshCommand, credential helpers). GIT_NO_LAZY_FETCH says the same to git 2.44 and later.
            "GIT_ALLOW_PROTOCOL": "none",
            "GIT_NO_LAZY_FETCH": "1",
            "GIT_ATTR_NOSYSTEM": "1",
            "GIT_NO_REPLACE_OBJECTS": "1",  # the history read is the one committed, not a replacement
            "GIT_PAGER": "cat",
            "GIT_EDITOR": ":",
        }
        self._drivers: dict[str, str] = {}  # GIT_CONFIG_* variables: the home's driver commands, made empty
        self._config_seen: object = object()  # .git/config's stat when they were found
        self.settle_seconds = 0.5  # start-up check: a change still being saved gets its line meanwhile
        self.ready = threading.Event()  # set when start()'s repository set-up and start-up check are done
        self._lock = threading.Lock()  # one committer per instance (the flock is per open file, not thread)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._repo_ready = False
        self._seen: object = object()  # audit.log's stat when all of it was known committed
        self._known: tuple[str, int, int] | None = None  # (HEAD, committed bytes, inode) this instance made
        self._commits = 0
        self._last_error: str | None = None

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        """Set up the repository, check for changes made outside the server and commit in the background."""
        if not self.available or self._thread is not None:
            self.ready.set()
            return
        try:  # here, not in the thread: a write in progress is never mistaken for one a crash left behind
            self._write_gitignore()
        except OSError as exc:
            log.warning("git history: could not write .gitignore (%s); the history starts without it", exc)
        if not (self.git_dir / "HEAD").exists() and not os.path.lexists(self.audit_path) and self._few_files():
            # A new home's first commit (a few git runs) before any change: made beside the server's first
            # writes, it could hold a file newer than its lines, and the next commit's captured versions of
            # that file would then step back in time. A home with many files is committed in the thread.
            try:
                with self._exclusive():
                    self._ensure_repo()
            except (HistoryError, OSError) as exc:
                log.warning("git history: the first commit failed (retried in the background): %s", exc)
        self._thread = threading.Thread(target=self._loop, name="rockmem-git-history", daemon=True)
        self._thread.start()

    def _few_files(self) -> bool:
        """Whether the home holds at most FIRST_COMMIT_INLINE_FILES files (counted until there are more)."""
        count = 0
        for _, folders, files in os.walk(self.home):
            folders[:] = [folder for folder in folders if folder != ".git"]
            count += len(files)
            if count > FIRST_COMMIT_INLINE_FILES:
                return False
        return True

    def close(self) -> None:
        """Stop the background thread and commit what is pending."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self.available:
            try:
                self.flush()
            except (HistoryError, OSError) as exc:
                log.warning("git history: the final commit failed: %s", exc)

    def _loop(self) -> None:
        try:
            self._start_up()
        except (HistoryError, OSError) as exc:
            log.warning("git history: start-up failed (retried each round): %s", exc)
        except Exception:  # a background thread must not die: history is retried next round
            log.exception("git history: start-up failed")
        finally:
            self.ready.set()
        while not self._stop.wait(self.settings.audit_commit_seconds):
            try:
                self._round()
            except (HistoryError, OSError) as exc:
                if str(exc) != self._last_error:  # a lasting failure is said once, not every second
                    log.warning("git history: commit failed (retried next round): %s", exc)
                self._last_error = str(exc)
            except Exception:  # as above: never crash the committer
                log.exception("git history: commit failed")
            else:
                self._last_error = None

    def _round(self) -> None:
        """One os.stat when nothing was appended to the log since everything in it was committed."""
        try:
            info = os.stat(self.audit_path)
            key: object = (info.st_ino, info.st_size, info.st_mtime_ns)
        except FileNotFoundError:
            key = None
        if key != self._seen:
            self.flush()
            # Off the request path: the trail's next query finds the audit index current (a log rewritten by
            # retention or a redaction is indexed again here, not by the user's next `audit`).
            self.audit.index.catch_up()

    # ------------------------------------------------------------------ committing
    def flush(self) -> str | None:
        """Commit everything pending now; the HEAD commit (None when history is off)."""
        if not self.available:
            return None
        try:
            with self._exclusive():
                self._ensure_repo()
                return self._commit_pending()
        except (HistoryError, OSError):
            self._bound_versions()  # nothing consumes the captured versions while commits fail
            raise

    def head(self) -> str | None:
        if not self.available:
            return None
        try:
            return self._head()
        except HistoryError as exc:
            log.warning("git history: %s", exc)
            return None

    @contextlib.contextmanager
    def _exclusive(self) -> Iterator[None]:
        with self._lock, held(self.git_dir / LOCK_NAME):
            yield

    def _ensure_repo(self) -> None:
        """git init, .gitignore, and a first commit of what is there (under the commit lock). Before any
        command that reads the work tree: the attributes that select no driver, and the drivers' commands
        overridden (the home's configuration may have changed since the last commit)."""
        if os.path.lexists(self.git_dir / "commondir"):
            raise HistoryError(
                f"{self.git_dir} is now a linked worktree's (its commondir file names another repository): the "
                "history is paused; remove that file, or set ROCKMEM_AUDIT_GIT=false"
            )
        if not (self.git_dir / "HEAD").exists():
            self._run(["init", "-q", "--initial-branch=main"])
            self._repo_ready = False
        self._write_info_attributes()
        try:  # a git process per commit costs ~8 ms: the overrides are found again when the config file changed
            info = os.stat(self.git_dir / "config")
            config: object = (info.st_ino, info.st_size, info.st_mtime_ns)
        except FileNotFoundError:
            config = None
        if config != self._config_seen:
            self._drivers = self._driver_overrides()
            self._config_seen = config
        if self._repo_ready:
            return
        self._write_gitignore()
        if self._head() is None:
            self._first_commit()
        self._repo_ready = True

    def _write_info_attributes(self) -> None:
        """`.git/info/attributes` as INFO_ATTRIBUTES (a link or file in the way of it is replaced, never
        followed): it outranks the home's .gitattributes, so no filter, diff or merge driver is selected."""
        info = self.git_dir / "info"
        if os.path.islink(info) or (os.path.lexists(info) and not info.is_dir()):
            os.unlink(info)
        os.makedirs(info, exist_ok=True)
        path = info / "attributes"
        with contextlib.suppress(FileNotFoundError, RefusedFileError):  # absent, a link, a FIFO: replaced
            if read_bytes(path) == INFO_ATTRIBUTES.encode():
                return
        atomic_write(path, INFO_ATTRIBUTES.encode())

    def _driver_overrides(self) -> dict[str, str]:
        """GIT_CONFIG_* variables that make every driver command the home's configuration (with its includes)
        names empty, which git reads as no command; a filter is no longer required either."""
        self._drivers = {}  # the home's settings, not the last overrides
        out = self._run(["config", "-z", "--get-regexp", r"^(filter|diff|merge)\."], ok=(0, 1))
        names: dict[str, str] = {}
        for entry in out.split(b"\0"):
            key = entry.split(b"\n", 1)[0].decode("utf-8", "surrogateescape")
            if _DRIVER_COMMAND.match(key):
                names[key] = ""
                if key.startswith("filter."):
                    names[key.rsplit(".", 1)[0] + ".required"] = "false"
        env = {"GIT_CONFIG_COUNT": str(len(names))}
        for i, (key, value) in enumerate(names.items()):
            env[f"GIT_CONFIG_KEY_{i}"], env[f"GIT_CONFIG_VALUE_{i}"] = key, value
        return env if names else {}

    def _write_gitignore(self) -> None:
        """What the history leaves out, written once: a user's own .gitignore is kept."""
        gitignore = self.home / ".gitignore"
        if not os.path.lexists(gitignore):
            atomic_write(gitignore, GITIGNORE.encode())

    def _bound_versions(self) -> None:
        """While commits fail (a `.git` git cannot use) nothing consumes `.git/rockmem-versions`: keep its newest
        VERSIONS_KEEP_BYTES of whole records, dropping the oldest (their middle versions would be lost anyway
        if the history never recovers; each file's latest state is on disk, where the next commit reads a file
        whose capture was dropped)."""
        versions = self.audit.versions
        if versions is None:
            return
        try:
            if os.lstat(versions.path).st_size <= VERSIONS_KEEP_BYTES:
                return
            data, info = read_bytes_and_stat(versions.path)
            versions.consume(_versions_cut(data, len(data) - VERSIONS_KEEP_BYTES), info.st_ino)
        except (OSError, RefusedFileError) as exc:
            log.debug("git history: %s not trimmed: %s", versions.path, exc)

    def _first_commit(self) -> None:
        """The home as it is: every file .gitignore leaves in (the log as its whole lines)."""
        # The log before the listing, as in every commit: a line read here names a file written before the line,
        # so the listing holds it; a file written meanwhile has its line after this read, and the next commit
        # stages it by that line. (Read the other way round, a save racing the first commit could leave its
        # line in this commit and its file in none.)
        pending = self._read_audit(None, None, 0)
        listed = self._run(["ls-files", "-z", "--cached", "--others", "--exclude-standard"])
        block = _block(
            "CREATE", ".", "the home as it was when its history began", INIT_ACTOR, "auto", "first start with git"
        )
        message = f"{block.splitlines()[0]}\n\n{block}\n\nAudit-Lines: 0-{len(pending.data)}\n"
        files = [name for name in _names_of(listed) if name != self.audit_file]
        audit = pending.data if pending.stat is not None else None
        commit = self._commit(message, None, INIT_ACTOR, self._clock(), [], files, audit)
        if pending.stat is not None:
            self._known = (commit, len(pending.data), pending.stat.st_ino)

    def _commit_pending(self) -> str | None:
        # Read before the log: every version read then has its line in the log read after, so all of it is
        # consumed by this commit. A version is captured just after its line is written: one whose line is in
        # the log read below may be missing here, and is looked for again once the files are read (below).
        captured = self.audit.versions.read() if self.audit.versions is not None else None
        head, blob, size = self._head_audit()
        if self._nothing_new(head, size):
            return head
        pending = self._pending(head, blob, size)
        if pending.stat is None and blob is None:
            self._seen = None
            return head
        if pending.stat is not None and not pending.lines and pending.start == len(pending.data) == size:
            self._seen = _key(pending.stat)
            self._known = (head, size, pending.stat.st_ino) if head else None
            return head
        folders, files = self._changed_paths(self._paths_of(pending.lines))
        if pending.stat is None:
            empty = f"[DELETE] {self.audit_file} — the log was removed (retention kept no line)"
        elif pending.rewritten:
            empty = f"[EDIT] {self.audit_file} — rewritten by retention (older lines folded away)"
        else:
            empty = f"[EDIT] {self.audit_file} — {len(pending.data) - pending.start} bytes without a readable line"
        message = _message(pending.lines, pending.start, len(pending.data), self.settings.critical_files, empty)
        actors = {line.actor for line in pending.lines}
        author = actors.pop() if len(actors) == 1 else COMMITTER
        moment = pending.lines[-1].time if pending.lines else self._clock()
        audit = pending.data if pending.stat is not None else None
        # The files whose line's capture is not read yet, as they are now, then the captured versions again: a file
        # changed again after its line was read holds the next change by now, but then the version of the line
        # read was captured before that change was written, so it is in the second read.
        on_disk, matched = {}, captured
        if captured is not None and audit is not None:
            on_disk = {path: self._file_command(path) for path in self._capturable_uncaptured(pending, captured)}
            again = self.audit.versions.read()
            # Not when the file was trimmed in between (by a process whose commits fail): its oldest versions are gone.
            if not captured.end or (again.inode == captured.inode and again.end >= captured.end):
                matched = again
        middle, last = self._captured_stretches(pending, matched) if audit is not None and matched else ([], {})
        if middle:  # the batch's last stretch: from its first line after the middle versions
            tail_start, lines_after = middle[-1].end, pending.lines[sum(len(m.lines) for m in middle) :]
            message = _message(lines_after, tail_start, len(pending.data), self.settings.critical_files, empty)
        commit = self._commit(message, head, author, moment, folders, files, audit, middle, last, on_disk)
        if captured is not None and captured.end:  # not the second read's: its last versions may be of later lines
            self.audit.versions.consume(captured.end, captured.inode)
        if pending.stat is not None:
            self._seen = _key(pending.stat)
            self._known = (commit, len(pending.data), pending.stat.st_ino)
        else:
            self._seen, self._known = None, None
        return commit

    def _nothing_new(self, head: str | None, size: int) -> bool:
        """Whether the log is still the file this instance last committed, at the size committed: nothing is
        pending, and the log is not read (issue 45: every history and revert flushes first; 26 MB at 200k lines)."""
        try:
            info = os.lstat(self.audit_path)
        except FileNotFoundError:
            return False
        if head is None or self._known != (head, size, info.st_ino) or info.st_size != size:
            return False
        self._seen = _key(info)
        return True

    def _capturable_uncaptured(self, pending: _Pending, captured: VersionRead) -> list[str]:
        """The files the batch's lines name whose capture may still come (audit/service.py captures every change
        but an append, a pattern's or folder's, and a file over CAPTURE_BYTES) and is not in `captured`."""
        have = {version.file for version in captured.versions}
        paths = []
        for line in pending.lines:
            path = _relative(line.file)
            uncapturable = line.action == "APPEND" or _GLOB.search(line.file) or line.file.endswith("/")
            if path is None or path in have or uncapturable:
                continue
            try:
                if os.lstat(self.home / path).st_size > CAPTURE_BYTES:
                    continue
            except OSError:
                pass  # gone: a delete, whose capture says so
            have.add(path)
            paths.append(path)
        return paths

    def _captured_stretches(
        self, pending: _Pending, captured: VersionRead
    ) -> tuple[list[_Middle], dict[str, bytes | None]]:
        """A batch where a file changed more than once, cut before each repeat: every stretch but the last
        becomes a commit of its own, of the files' bytes captured at their change (audit/service.py), so
        every version is in the history. Also the last stretch's captured files: each as its last line in the
        batch left it. Read from disk instead, a file may already hold a later change whose line is not read
        yet, and the version between would be in no commit (a revert "before the latest change" then went
        two back). Nothing when nothing was captured; disk for a stretch that names a folder or pattern."""
        # A capture is matched to its line by (time to the millisecond, file): where two lines or two captures
        # share that, which bytes are whose is not known, and the file is read from disk.
        counts = Counter((version.time, version.file) for version in captured.versions)
        kept = {(v.time, v.file): v.data for v in captured.versions if counts[(v.time, v.file)] == 1}
        lines = Counter((format_time(line.time), line.file) for line in pending.lines)
        if not kept:
            return [], {}
        ends = _line_ends(pending.data, pending.start)
        if len(ends) != len(pending.lines):
            return [], {}  # lines that do not parse: one commit, as the files are now
        middle: list[_Middle] = []
        stretch: list[AuditLine] = []
        named: set[str] = set()
        files: dict[str, bytes | None] = {}
        start = pending.start
        for i, line in enumerate(pending.lines):
            old = moved_from(line)
            if line.file in named or (old is not None and old in named):
                middle.append(_Middle(stretch, start, ends[i - 1], files))
                stretch, named, files, start = [], set(), {}, ends[i - 1]
            stretch.append(line)
            named.add(line.file)
            key = (format_time(line.time), line.file)
            if key in kept and lines[key] == 1:
                files[line.file] = kept[key]
            else:
                files.pop(line.file, None)  # not captured: its state comes with the batch's last commit
            if old is not None and _relative(old) is not None:
                named.add(old)
                files[old] = None  # moved away
        folders = {path.rsplit("/", i)[0] for path in files for i in range(1, path.count("/") + 1)}
        if any(_GLOB.search(line.file) or line.file.rstrip("/") in folders for line in stretch):
            files = {}  # a folder's or a pattern's change: its files go in as they are now, with it
        return middle, files

    def _commit(
        self,
        message: str,
        parent: str | None,
        author: str,
        moment: datetime,
        folders: Sequence[str],
        files: Sequence[str],
        audit: bytes | None,
        middle: Sequence[_Middle] = (),
        captured: dict[str, bytes | None] | None = None,
        on_disk: dict[str, bytes] | None = None,
    ) -> str:
        """One commit on `parent`: `folders` replaced by what is in them now, `files` as `captured` holds them or
        else as they were on disk when `on_disk` was read (else now; gone: removed), the log as `audit` (None:
        removed). `git fast-import` writes the blobs, trees and commit as one pack with one fsync (thousands of
        loose objects would cost a flush each); update-ref then moves HEAD with a compare-and-swap on `parent`, so
        a commit made meanwhile is never overwritten."""

        def header(message: str, author: str, moment: datetime, first: bool) -> bytes:
            stamp = f"{int(moment.timestamp())} +0000"
            return b"".join(
                [
                    f"commit {WORK_REF}\n".encode(),
                    f"author {_ident(author)} <{EMAIL}> {stamp}\n".encode(),
                    f"committer {COMMITTER} <{EMAIL}> {stamp}\n".encode(),
                    _data(message.encode()),
                    f"from {parent}\n".encode() if parent and first else b"",  # later ones follow the ref
                ]
            )

        def stream(out: BinaryIO) -> None:
            out.write(b"feature done\n")
            critical = self.settings.critical_files
            for i, version in enumerate(middle):
                assert audit is not None  # middle versions are only made with the log
                actors = {line.actor for line in version.lines}
                who = actors.pop() if len(actors) == 1 else COMMITTER
                text = _message(version.lines, version.start, version.end, critical, "")
                out.write(header(text, who, version.lines[-1].time, i == 0))
                out.writelines(self._file_command(path, data) for path, data in version.files.items())
                out.write(b"M 100644 inline " + _quote(self.audit_file) + b"\n" + _data(audit[: version.end]))
                out.write(b"\n")
            out.write(header(message, author, moment, not middle))
            if "." in folders:
                out.write(b"deleteall\n")
            else:
                out.writelines(b"D " + _quote(folder) + b"\n" for folder in folders)
            kept, read = captured or {}, on_disk or {}
            for path in files:
                if path in kept:
                    out.write(self._file_command(path, kept[path]))
                else:
                    out.write(read[path] if path in read else self._file_command(path))
            if audit is None:
                out.write(b"D " + _quote(self.audit_file) + b"\n")
            else:
                out.write(b"M 100644 inline " + _quote(self.audit_file) + b"\n" + _data(audit))
            out.write(b"\ndone\n")

        self._run(["fast-import", "--quiet", "--force"], stream)
        commit = self._run(["rev-parse", "--verify", f"{WORK_REF}^{{commit}}"]).strip().decode()
        self._run(["update-ref", "-m", "rockmem: history", "HEAD", commit, parent or ZERO_SHA])
        # The index follows HEAD (stat data of unchanged files kept), for `git status` here and by hand.
        self._run(["read-tree", "--reset", commit], check=False)
        self._commits += 1
        if self._commits % REPACK_EVERY_COMMITS == 0:
            # A pack per commit: merge the small ones (geometric: amortized, never the whole history each time).
            self._run(["repack", "-d", "-q", "--geometric=2"], check=False)
        return commit

    def _file_command(self, path: str, captured: bytes | object | None = _ON_DISK) -> bytes:
        """The fast-import command that makes `path` what it is on disk (a link as a link; never followed), or
        what `captured` holds (None: gone) with the mode it has on disk."""
        full = self.home / path
        try:
            info = os.lstat(full)
        except (FileNotFoundError, NotADirectoryError):
            info = None
        if captured is None or (info is None and captured is _ON_DISK):
            return b"D " + _quote(path) + b"\n"
        executable = info is not None and stat.S_ISREG(info.st_mode) and info.st_mode & 0o111
        if isinstance(captured, bytes):
            mode = b"100755" if executable else b"100644"
            return b"M " + mode + b" inline " + _quote(path) + b"\n" + _data(captured)
        assert info is not None
        try:
            if stat.S_ISLNK(info.st_mode):
                return b"M 120000 inline " + _quote(path) + b"\n" + _data(os.fsencode(os.readlink(full)))
            if stat.S_ISREG(info.st_mode):
                mode = b"100755" if executable else b"100644"
                return b"M " + mode + b" inline " + _quote(path) + b"\n" + _data(read_bytes(full))
        except (OSError, RefusedFileError) as exc:
            log.warning("git history: %s left as it was committed: %s", path, exc)
        return b""  # a folder or a special file: nothing to commit for it

    def _head(self) -> str | None:
        out = self._run(["rev-parse", "-q", "--verify", "HEAD^{commit}"], check=False)
        return out.strip().decode() or None

    def _head_audit(self) -> tuple[str | None, str | None, int]:
        """HEAD, and the sha and size of its meta/audit.log (None, 0 when it has none)."""
        out = self._run(["cat-file", "--batch-check"], f"HEAD\nHEAD:{self.audit_file}\n".encode()).decode()
        first, second = out.splitlines()[:2]
        head = first.split()[0] if not first.endswith(" missing") else None
        if head is None or second.endswith(" missing"):
            return head, None, 0
        sha, _, size = second.split()
        return head, sha, int(size)

    def _pending(self, head: str | None, blob: str | None, size: int) -> _Pending:
        """The audit lines past what HEAD holds. Appends keep the file (inode) and grow it: what this instance
        committed is trusted; otherwise the committed bytes are compared by their git hash; a log rewritten by
        retention (not starting with HEAD's) counts the lines HEAD's log does not have."""
        try:
            data, info = read_bytes_and_stat(self.audit_path)
        except FileNotFoundError:
            return _Pending(b"", None, 0, [])
        data = data[: data.rfind(b"\n") + 1]  # a line still being written waits for the next round
        if blob is None:
            return self._read_audit(data, info, 0)
        if (self._known == (head, size, info.st_ino) and len(data) >= size) or _blob_sha(data[:size]) == blob:
            return self._read_audit(data, info, size)
        known = set(self._run(["cat-file", "blob", blob]).splitlines())
        offset, start, lines = 0, None, []
        for raw in data.splitlines(keepends=True):
            if raw.rstrip(b"\n") not in known:
                start = offset if start is None else start
                line = AuditLine.parse(raw.decode("utf-8", "replace"))
                if line is not None:
                    lines.append(line)
            offset += len(raw)
        return _Pending(data, info, len(data) if start is None else start, lines, rewritten=True)

    def _read_audit(self, data: bytes | None, info: os.stat_result | None, start: int) -> _Pending:
        if data is None:
            try:
                data, info = read_bytes_and_stat(self.audit_path)
            except FileNotFoundError:
                return _Pending(b"", None, 0, [])
            data = data[: data.rfind(b"\n") + 1]
        return _Pending(data, info, start, _parse(data[start:]))

    def _paths_of(self, lines: Iterable[AuditLine]) -> list[str]:
        """The files the lines name, relative to the home; a pattern or folder stands for its folder; paths
        outside the home, inside .git and the log itself (staged on its own) are left out."""
        paths: dict[str, None] = {}
        for line in lines:
            for name in (line.file, moved_from(line)):  # a move also removes its old path
                if name is None:
                    continue
                if _GLOB.search(name):
                    parts = name.split("/")
                    name = "/".join(parts[: next(i for i, p in enumerate(parts) if _GLOB.search(p))]) or "."
                name = _relative(name)
                if name is not None and name != self.audit_file:
                    paths[name] = None
        return list(paths)

    def _changed_paths(self, paths: Sequence[str]) -> tuple[list[str], list[str]]:
        """The folders (replaced whole) and files to commit for these paths: ignored ones and paths under a
        symbolic link are left out; a folder stands for the files git would track in it now."""
        if not paths:
            return [], []
        ignored = self._ignored(paths)
        links: dict[str, bool] = {}
        folders, files = [], []
        for path in paths:
            if path in ignored or self._beyond_link(path, links):
                continue
            full = self.home / path
            (folders if path == "." or (full.is_dir() and not full.is_symlink()) else files).append(path)
        if folders:
            listed = self._run(["ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", *folders])
            files += [name for name in _names_of(listed) if name != self.audit_file]
        return folders, list(dict.fromkeys(files))

    def _ignored(self, paths: Sequence[str]) -> set[str]:
        """The paths .gitignore leaves out, but for files the history tracks (git's rule: a tracked file's changes
        are committed whatever the patterns say). Asked with --no-index, then the few paths named are looked up in
        the index: check-ignore reading the index walks all of it for every path it is given (git 2.39: 4.4 ms a
        path at 100k tracked files, so a commit of 100k changed paths spent about 8 minutes there)."""
        # check-ignore takes paths, not pathspecs, and refuses the literal-pathspec switch.
        out = self._run(
            ["check-ignore", "--no-index", "-z", "--stdin"], _nul(paths), {"GIT_LITERAL_PATHSPECS": "0"}, ok=(0, 1)
        )
        ignored = set(_names_of(out))
        if not ignored:
            return ignored
        # Each pathspec is matched against every index entry: past a few, listing the whole index is cheaper.
        few = sorted(ignored) if len(ignored) <= FEW_PATHSPECS else []
        tracked = sorted(_names_of(self._run(["ls-files", "-z", "--cached", "--", *few])))
        return {path for path in ignored if not _holds(tracked, path)}

    def _beyond_link(self, path: str, links: dict[str, bool]) -> bool:
        """A path under a symbolic link (git refuses it; the stores never write through one)."""
        folder = posixpath.dirname(path)
        if not folder:
            return False
        if folder not in links:
            links[folder] = os.path.islink(self.home / folder) or self._beyond_link(folder, links)
        return links[folder]

    # ------------------------------------------------------------------ start-up check
    def _start_up(self) -> None:
        """Repository, pending lines committed, then changes made outside the server (hand edits, or a crash
        between a file and its line) are logged as `manual` and committed."""
        try:
            self.resume_purges()
        except (HistoryError, OSError) as exc:  # its record stays: the next start tries again
            log.warning("git history: a permanent delete left half done could not be finished (%s)", exc)
        with self._exclusive():
            self._ensure_repo()
            self._commit_pending()
            committed = self._known[1] if self._known else 0
            first = self._outside_changes()
        if not first or self._stop.wait(self.settle_seconds):
            return
        with self._exclusive():
            self._commit_pending()  # a save still in progress at the first look has its line (and commit) now
            second = self._outside_changes()
            # A file the server changed since the first look is explained by its line, committed or not yet
            # (a commit takes a file as captured at its line: the disk may be a change ahead of HEAD).
            explained = self._named_from(committed)
            found = [
                (path, action) for path, action in second.items() if path in first and not _under_any(path, explained)
            ]
            if not found:
                return
            self.audit.record_many(
                self.audit.line(action, path, OUTSIDE_SUMMARY, approval=NO_APPROVAL, actor=MANUAL)
                for path, action in sorted(found)
            )
            self._commit_pending()
        log.warning("git history: %d file(s) changed outside the server were logged and committed", len(found))

    def _named_from(self, offset: int) -> set[str]:
        """The paths the log's lines from byte `offset` on name (a folder or "." for a pattern's)."""
        try:
            data, _ = read_bytes_and_stat(self.audit_path)
        except FileNotFoundError:
            return set()
        return set(self._paths_of(_parse(data[offset : data.rfind(b"\n") + 1])))

    def _outside_changes(self) -> dict[str, str]:
        """Tracked or trackable files that differ from HEAD, with the action that describes the change."""
        head = self._head()
        if head is not None:
            self._run(["read-tree", "--reset", head])  # an index a crash left behind HEAD would show false changes
        out = self._run(
            ["status", "--porcelain=v1", "-z", "--untracked-files=all", "--no-renames", "--ignore-submodules"]
        )
        changes: dict[str, str] = {}
        for entry in out.split(b"\0"):
            if len(entry) < 4:
                continue
            code, path = entry[:2].decode(), entry[3:].decode("utf-8", "surrogateescape")
            if path == self.audit_file or _relative(path) is None:
                continue
            if not os.path.lexists(self.home / path):
                changes[path] = "DELETE"
            elif code == "??" or code[0] == "A":
                changes[path] = "CREATE"
            else:
                changes[path] = "EDIT"
        return changes

    # ------------------------------------------------------------------ reading history
    def resolve(self, commit: str) -> str | None:
        """The full sha of a commit name (a sha, a prefix of one, or HEAD); None if there is no such commit."""
        if not self.available or not _COMMIT_NAME.fullmatch(commit):
            return None
        out = self._run(["rev-parse", "-q", "--verify", f"{commit}^{{commit}}"], check=False)
        return out.strip().decode() or None

    def versions(self, file: str, limit: int = 50) -> list[Version]:
        """The commits that changed `file`, newest first, each with the audit lines that say who and why."""
        if not self.available or limit < 1:
            return []
        name = _relative(file)
        head = self.flush()
        if name is None or head is None:
            return []
        out = self._run(["log", f"-n{limit}", *_NO_PROGRAMS, "--no-renames", _LOG_FORMAT, head, "--", name])
        commits: list[tuple[str, int, tuple[int, int] | None]] = []
        moments: dict[str, datetime] = {}
        messages: dict[str, str] = {}
        for record in out.decode("utf-8", "replace").split("\x1e"):
            fields = record.strip("\n").split("\x1f")
            if len(fields) == 3:
                match = _TRAILER.search(fields[2])
                span = (int(match[1]), int(match[2])) if match else None
                exact = _TIME_TRAILER.search(fields[2])
                moments[fields[0]] = (parse_time(exact[1]) if exact else None) or datetime.fromtimestamp(
                    int(fields[1]), UTC
                )  # to the millisecond where the commit says
                messages[fields[0]] = fields[2]
                commits.append((fields[0], int(fields[1]), span))
        if not commits:
            return []
        present = self._cat([f"{sha}:{name}" for sha, _, _ in commits], contents=False)
        found = self._lines_in_log(name, commits, messages)
        if found is None:
            found = self._lines_in_commits(name, commits, head)
        return [Version(sha, moments[sha], found[i], present[i] is None) for i, (sha, _, _) in enumerate(commits)]

    def _lines_in_log(
        self, name: str, commits: list[tuple[str, int, tuple[int, int] | None]], messages: dict[str, str]
    ) -> list[list[AuditLine]] | None:
        """Each version's lines naming `name`, read from meta/audit.log as it is now through the audit index, at
        the bytes each commit's trailer names (issue 45: every version's whole copy of the log was read, 3 s for 20
        versions at 200k lines). None, for `_lines_in_commits`, unless every span is still where its commit says:
        its first line the message's first block and its last one stamped with the commit's Audit-Time, or (a
        commit without lines, such as the first) the log's bytes up to its end hashing to the commit's copy."""
        _, _, head_size = self._head_audit()
        hashed = [i for i, (sha, _, span) in enumerate(commits) if span and not _TIME_TRAILER.search(messages[sha])]
        blobs = dict(zip(hashed, self._blob_ids([f"{commits[i][0]}:{self.audit_file}" for i in hashed]), strict=True))
        try:
            with self.audit.index.view() as view:
                if view is None or head_size > view.indexed_to:
                    return None
                for i, (sha, _, span) in enumerate(commits):
                    held = span is None or (
                        _same_bytes(view, span[1], blobs[i]) if i in blobs else _span_held(view, span, messages[sha])
                    )
                    if not held:
                        return None
                keys = [file_key(name), PATTERN_KEY]
                found = []
                for i, (_, _, span) in enumerate(commits):
                    if span is None:
                        found.append([])
                        continue
                    # As `_lines_in_commits`: lines logged after this version, before the next one, are this one's.
                    newer_start = (commits[i - 1][2] or (0, 0))[0] if i else head_size
                    hits = view.find(
                        keys, lambda line: _names(line.file, name), start=span[0], end=max(span[1], newer_start)
                    )
                    found.append([hit.line for hit in reversed(hits)])
                return found
        except IndexStale:  # rewritten meanwhile: the index is rebuilt next time
            return None

    def _lines_in_commits(
        self, name: str, commits: list[tuple[str, int, tuple[int, int] | None]], head: str
    ) -> list[list[AuditLine]]:
        """Each version's lines naming `name`, from its own copy of the log (and the next version's)."""
        logs = self._cat([f"{sha}:{self.audit_file}" for sha, _, _ in commits] + [f"{head}:{self.audit_file}"])
        found = []
        for i, (_, _, span) in enumerate(commits):
            lines: list[AuditLine] = []
            data = logs[i]
            if span is not None and data is not None:
                start, end = span
                lines = [line for line in _parse(data[start:end]) if _names(line.file, name)]
                # Lines committed after this version, before the next one changed the file, describe this
                # content: the file was staged before their line was read.
                newer = logs[i - 1] if i else logs[-1]
                newer_start = (commits[i - 1][2] or (0, 0))[0] if i else len(newer or b"")
                tail = slice(max(0, end - 512), end)  # the newer log still starts with this one
                if newer is not None and newer_start > end and newer[tail] == data[tail]:
                    lines += [line for line in _parse(newer[end:newer_start]) if _names(line.file, name)]
            found.append(lines)
        return found

    def _blob_ids(self, specs: Sequence[str]) -> list[tuple[str, int] | None]:
        """`git cat-file --batch-check` for each `commit:path`: the blob's name and size, None if absent."""
        if not specs:
            return []
        out = self._run(["cat-file", "--batch-check"], "".join(spec + "\n" for spec in specs).encode())
        ids: list[tuple[str, int] | None] = []
        for row in out.decode("utf-8", "replace").splitlines()[: len(specs)]:
            parts = row.split()
            ids.append((parts[0], int(parts[2])) if len(parts) == 3 and parts[1] == "blob" else None)
        return ids

    def read(self, commit: str, file: str) -> bytes | None:
        """The file's bytes at `commit`; None if it is absent there (or there is no such commit)."""
        return self.read_many(commit, [file]).get(file)

    def read_many(self, commit: str, files: list[str]) -> dict[str, bytes | None]:
        """Each file's bytes at `commit` (None where absent), read by one `git cat-file --batch`."""
        if not self.available or not files:
            return {}
        if not _COMMIT_NAME.fullmatch(commit):
            return dict.fromkeys(files)
        names = {file: _relative(file) for file in files}
        asked = [file for file, name in names.items() if name is not None and "\n" not in name]
        found = self._cat([f"{commit}:{names[file]}" for file in asked])
        result: dict[str, bytes | None] = dict.fromkeys(files)
        result.update(zip(asked, found, strict=True))
        return result

    def commit_at(self, moment: datetime) -> str | None:
        """The last commit at or before `moment` (commit times are whole seconds: git's resolution)."""
        if not self.available:
            return None
        head = self.flush()
        if head is None:
            return None
        # git keeps whole seconds; the Audit-Time trailer has the last line's time to the millisecond, so
        # commits of the same second as `moment` are told apart by it.
        stamp = int(moment.timestamp() // 1)
        out = self._run(["log", *_NO_PROGRAMS, f"--since=@{stamp - 1}", f"--until=@{stamp + 1}", _LOG_FORMAT, head])
        for record in out.decode("utf-8", "replace").split("\x1e"):
            fields = record.strip("\n").split("\x1f")
            if len(fields) != 3:
                continue
            match = _TIME_TRAILER.search(fields[2])
            exact = parse_time(match[1]) if match else None
            if (exact or datetime.fromtimestamp(int(fields[1]), UTC)) <= moment:
                return fields[0]
        out = self._run(["rev-list", "-n", "1", f"--before=@{stamp - 2}", head])  # older than those looked at
        return out.strip().decode() or None

    def changed_between(self, older: str, newer: str | None = None) -> list[str]:
        """Tracked files that differ between two commits (newer None: HEAD, after a flush). The audit log is
        left out: it is the record of changes, never rolled back."""
        if not self.available:
            return []
        old = self.resolve(older)
        new = self.flush() if newer is None else self.resolve(newer)
        if old is None or new is None:
            unknown = older if old is None else newer
            raise InvalidInputError(f"unknown commit {unknown!r}: name one that versions() or commit_at() gave")
        out = self._run(["diff", *_NO_PROGRAMS, "--name-only", "-z", "--no-renames", old, new, "--"])
        names = (p.decode("utf-8", "surrogateescape") for p in out.split(b"\0") if p)
        return [name for name in names if name != self.audit_file]

    def _cat(self, specs: Sequence[str], contents: bool = True) -> list[bytes | None]:
        """`git cat-file --batch` (or --batch-check) for each `commit:path`: the blob's bytes (b"" when only
        checking) or None when it is absent or not a file."""
        if not specs:
            return []
        asked = "".join(spec + "\n" for spec in specs).encode()
        out = self._run(["cat-file", "--batch" if contents else "--batch-check"], asked)
        found: list[bytes | None] = []
        pos = 0
        for _ in specs:
            end = out.index(b"\n", pos)
            header = out[pos:end].split()
            pos = end + 1
            if len(header) != 3 or not header[2].isdigit():  # "missing", "ambiguous"
                found.append(None)
                continue
            size = int(header[2])
            if contents:
                data, pos = out[pos : pos + size], pos + size + 1
                found.append(data if header[1] == b"blob" else None)
            else:
                found.append(b"" if header[1] == b"blob" else None)
        return found

    # ------------------------------------------------------------------ forgetting for good
    def file_blobs(self, files: Sequence[str]) -> list[bytes]:
        """Every version any commit holds of `files` (paths in the home), oldest first, each once: what a permanently
        removed item held before its last version (its texts then are taken out too)."""
        names = [name for name in map(_relative, files) if name is not None]
        if not self.available or not names or self.flush() is None:
            return []
        out = self._run(
            ["log", "--all", "--reverse", "--format=", "--raw", "--no-abbrev", "--no-renames", "--", *names]
        )
        shas: dict[str, None] = {}
        for line in out.decode("ascii", "replace").splitlines():
            fields = line.split()
            if line.startswith(":") and len(fields) >= 5:  # :OLDMODE NEWMODE OLD NEW STATUS\tPATH
                for sha in fields[2:4]:
                    if sha.strip("0"):
                        shas.setdefault(sha, None)
        return [data for data in self._cat(list(shas)) if data is not None]

    def purge(self, redaction: Redaction) -> PurgeReport | None:
        """Take a permanently removed item out of the history (issue 45: forgotten means gone): commit what is
        pending (the removal, and every change before it), redact the audit log (audit/log.py), then rewrite every
        commit (fast-export, governance/history_filter.py, fast-import) so that no tree holds the item's own files
        and no version of a covered file, no copy of the log and no message holds its texts; refs move to the
        rewritten commits, reflogs expire, and `repack -a -d` and `prune` delete every object no ref reaches.

        Under the commit lock, so no commit lands meanwhile; saves go on (they append to the log, which the next
        commit takes as usual: the rewritten log is the old one's prefix, redacted the same way). Commits before
        the first that held a text are imported as they were and keep their names; later ones get new names, and
        a revert naming one of those is refused as unknown. None when there is no history."""
        if not self.available or not redaction:
            return None
        started = time.monotonic()
        with self._exclusive():
            self._ensure_repo()
            pending = self._purge_pending(redaction)
            report = self._purge(redaction, started)
            remove_durably(pending)
        return report

    def _purge_pending(self, redaction: Redaction) -> Path:
        """A purge's inputs, kept inside .git (never in a commit) until it is done: a process that dies midway (the
        log redacted, the commits not yet) leaves it, and the next start finishes the purge (`resume_purges`)."""
        folder = self.git_dir / PURGES_FOLDER
        folder.mkdir(exist_ok=True)
        path = folder / f"{time.time_ns()}-{os.getpid()}.json"
        atomic_write(path, redaction.to_json())
        return path

    def resume_purges(self) -> int:
        """Finish the purges a process left half done (the history's start does it first); returns how many."""
        folder = self.git_dir / PURGES_FOLDER
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            return 0
        done = 0
        for name in names:
            with self._exclusive():
                done += self._resume(folder / name)
        return done

    def _resume(self, path: Path) -> int:
        """One unfinished purge, under the commit lock: 1 when it was finished."""
        try:
            redaction = Redaction.from_json(read_bytes(path))
        except FileNotFoundError:  # another process finished it meanwhile
            return 0
        except (OSError, ValueError, KeyError, TypeError, RefusedFileError) as exc:
            log.warning("git history: an unfinished purge's record %s is unreadable (%s); left", path, exc)
            return 0
        self._ensure_repo()
        report = self._purge(redaction, time.monotonic())
        remove_durably(path)
        log.warning("git history: finished a permanent delete a process left half done (%d commit(s) read)",
                    report.counts.commits)  # fmt: skip
        return 1

    def _purge(self, redaction: Redaction, started: float) -> PurgeReport:
        """`purge`'s work, under the commit lock."""
        self._commit_pending()
        lines = self.audit.log.redact(redaction)
        if self._head() is None:
            return PurgeReport(lines, FilterCounts(), time.monotonic() - started)
        if not self._run(["symbolic-ref", "-q", "HEAD"], check=False).strip():
            raise HistoryError(
                f"the history's HEAD is detached (not on a branch): check out its branch (`git --git-dir "
                f"{self.git_dir} checkout main`) and forget again; nothing in the history was rewritten"
            )
        try:
            counts = self._rewrite(redaction)
        finally:
            self._known, self._seen = None, object()  # HEAD and the log's bytes are not what this instance made
            for crash in self.git_dir.glob("fast_import_crash_*"):  # its report quotes the last commands
                with contextlib.suppress(OSError):
                    crash.unlink()
        self._run(["read-tree", "--reset", "HEAD"])  # the index held the old blobs: repack would keep them
        self._run(["reflog", "expire", "--expire=now", "--expire-unreachable=now", "--all"])
        self._run(["repack", "-a", "-d", "-q"])  # unreachable objects in packs are left out of the new pack
        self._run(["prune", "--expire=now"])  # and loose ones deleted
        return PurgeReport(lines, counts, time.monotonic() - started)

    def _rewrite(self, redaction: Redaction) -> FilterCounts:
        """Every ref's commits through the filter, imported again in place (`--force`: the refs move to them)."""
        live: dict[str, str | None] = {}

        def live_sha(path: str) -> str | None:
            if path not in live:
                try:
                    live[path] = _blob_sha(read_bytes(self.home / path))
                except (OSError, RefusedFileError):  # absent, or not a plain file: no version of it is kept as is
                    live[path] = None
            return live[path]

        with (
            self._process(["cat-file", "--batch"], feed=True) as blobs,
            self._process(
                ["fast-export", "--all", "--no-data", "--use-done-feature", "--signed-tags=strip", "--reencode=no"]
            ) as export,
        ):
            assert blobs.stdin is not None and blobs.stdout is not None and export.stdout is not None
            reader, writer = blobs.stdout, blobs.stdin

            def read_blob(sha: str) -> bytes:
                writer.write(sha.encode() + b"\n")
                writer.flush()
                header = reader.readline().split()
                if len(header) != 3 or header[1] != b"blob":
                    raise HistoryError(f"git history: blob {sha} cannot be read ({b' '.join(header).decode()})")
                data = reader.read(int(header[2]))
                reader.read(1)  # the newline after it
                return data

            rewrite = HistoryFilter(redaction, self.audit_file, read_blob, live_sha)
            self._run(["fast-import", "--quiet", "--force"], lambda out: rewrite.run(export.stdout, out))  # type: ignore[arg-type]
        return rewrite.counts

    # ------------------------------------------------------------------ running git
    def _run(
        self,
        args: list[str],
        stdin: bytes | Callable[[BinaryIO], None] | None = None,
        env: dict[str, str] | None = None,
        check: bool = True,
        ok: tuple[int, ...] = (0,),
    ) -> bytes:
        """stdout of `git ARGS`; stderr is logged. HistoryError when it fails (unless check=False)."""
        command, env = self._command(args), self._environment(env)
        try:
            if callable(stdin):
                proc = self._run_streaming(command, stdin, env)
            else:
                proc = subprocess.run(
                    command,
                    input=stdin if stdin is not None else b"",
                    capture_output=True,
                    cwd=self.home,
                    env=env,
                    timeout=600,
                )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise HistoryError(f"git {args[0]}: {exc}") from exc
        stderr = proc.stderr.decode("utf-8", "replace").strip()
        if proc.returncode not in ok:
            if check:
                raise HistoryError(
                    f"git history: git {args[0]} exited {proc.returncode}: {stderr[:2000]} (the repository is "
                    f"{self.git_dir}; `git --git-dir {self.git_dir} fsck` checks it)"
                )
            if stderr:
                log.warning("git history: git %s exited %d: %s", args[0], proc.returncode, stderr[:2000])
        elif stderr:
            log.debug("git %s: %s", args[0], stderr[:2000])
        return proc.stdout

    def _command(self, args: list[str]) -> list[str]:
        """`git ARGS` with the settings every call runs under (GIT_CONFIG: no hooks, no programs the home names)."""
        if self._git is None:
            raise HistoryError("git is not available")
        command = [self._git, "--no-pager"]
        for setting in GIT_CONFIG:
            command += ["-c", setting]
        return command + args

    def _environment(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        """The hermetic environment (module docstring) with the home's driver commands overridden empty."""
        return {**self._env, **self._drivers, **(extra or {})}

    @contextlib.contextmanager
    def _process(self, args: list[str], feed: bool = False) -> Iterator[subprocess.Popen[bytes]]:
        """`git ARGS` running while the block reads its stdout (and writes its stdin when `feed`); HistoryError when
        it exits non-zero. Leaving early (an error) ends it."""
        with tempfile.TemporaryFile() as err:
            try:
                proc = subprocess.Popen(
                    self._command(args),
                    stdin=subprocess.PIPE if feed else subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=err,
                    cwd=self.home,
                    env=self._environment(),
                )
            except OSError as exc:
                raise HistoryError(f"git {args[0]}: {exc}") from exc
            finished = False
            try:
                yield proc
                finished = True
            finally:
                if proc.stdin is not None:
                    with contextlib.suppress(BrokenPipeError):
                        proc.stdin.close()
                if not finished:
                    proc.kill()
                assert proc.stdout is not None
                proc.stdout.close()
                code = proc.wait()
            if code != 0:
                err.seek(0)
                stderr = err.read().decode("utf-8", "replace").strip()
                raise HistoryError(f"git history: git {args[0]} exited {code}: {stderr[:2000]}")

    def _run_streaming(
        self, command: list[str], write: Callable[[BinaryIO], None], env: dict[str, str]
    ) -> subprocess.CompletedProcess[bytes]:
        """Run `command` with `write` producing its stdin bit by bit (a large import is never held whole);
        its output goes to temp files, so a full pipe can never stall either side."""
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=out, stderr=err, cwd=self.home, env=env)
            assert proc.stdin is not None
            try:
                with contextlib.suppress(BrokenPipeError):  # git stopped reading: its exit code says why
                    write(proc.stdin)  # type: ignore[arg-type]
                    proc.stdin.close()
            finally:
                with contextlib.suppress(BrokenPipeError):
                    proc.stdin.close()
                code = proc.wait()
            out.seek(0)
            err.seek(0)
            return subprocess.CompletedProcess(command, code, out.read(), err.read())


# ---------------------------------------------------------------------- helpers
def _key(info: os.stat_result) -> tuple[int, int, int]:
    return (info.st_ino, info.st_size, info.st_mtime_ns)


def _versions_cut(data: bytes, least: int) -> int:
    """Where to cut `.git/rockmem-versions` (audit/versions.py's records: a JSON header line with the body's
    size `n`, the body, a newline) so that at least `least` bytes go: the end of the first whole record at or
    past `least`, found by walking the headers from the start (a body is never taken for a header). A torn
    record before that point: everything read goes."""
    offset = 0
    while offset < least:
        newline = data.find(b"\n", offset)
        try:
            size = int(json.loads(data[offset:newline])["n"]) if newline >= 0 else None
        except (ValueError, KeyError, TypeError):
            size = None
        end = newline + 1 + max(size or 0, 0)
        if size is None or data[end : end + 1] != b"\n":
            return len(data)
        offset = end + 1
    return offset


def _blob_sha(data: bytes) -> str:
    """git's object name for a blob of `data` (sha-1 repositories, git's default)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def _span_held(view: LogView, span: tuple[int, int], message: str) -> bool:
    """Whether the log read now holds a commit's lines at the bytes its trailer names: the first is the message's
    first block, the last ends there with the message's Audit-Time (a rewrite since moved them, or changed them)."""
    start, end = span
    first, last, stamp = view.line_at(start), view.line_ending_at(end), _TIME_TRAILER.search(message)
    if first is None or last is None or stamp is None:
        return False
    block = f"[{first.action}] {first.file} — {first.summary}\nActor: {first.actor}\n"
    return block in message and format_time(last.time) == stamp[1]


def _same_bytes(view: LogView, end: int, blob: tuple[str, int] | None) -> bool:
    """Whether the log read now starts with the commit's copy of it (`blob`: its name and size)."""
    if blob is None or blob[1] != end or end > view.indexed_to:
        return False
    digest = hashlib.sha1(b"blob %d\0" % end, usedforsecurity=False)
    for chunk in view.chunks(0, end):
        digest.update(chunk)
    return digest.hexdigest() == blob[0]


def _data(data: bytes) -> bytes:
    """A fast-import `data` command with exact byte count."""
    return b"data %d\n" % len(data) + data + b"\n"


def _quote(path: str) -> bytes:
    """A path for a fast-import command: C-quoted when it starts with a quote (newlines never get this far)."""
    raw = path.encode("utf-8", "surrogateescape")
    if not raw.startswith(b'"'):
        return raw
    return b'"' + raw.replace(b"\\", b"\\\\").replace(b'"', b'\\"') + b'"'


def _names_of(listed: bytes) -> list[str]:
    return [name.decode("utf-8", "surrogateescape") for name in listed.split(b"\0") if name]


def _holds(names: list[str], path: str) -> bool:
    """Whether the sorted file names hold `path` or a file under it: git's test of a path against the index (a
    folder with a tracked file in it is not ignored either)."""
    if path == ".":
        return bool(names)
    at = bisect.bisect_left(names, path)
    if at < len(names) and names[at] == path:
        return True
    at = bisect.bisect_left(names, path + "/")
    return at < len(names) and names[at].startswith(path + "/")


def _nul(paths: Iterable[str]) -> bytes:
    return b"".join(p.encode("utf-8", "surrogateescape") + b"\0" for p in paths)


def _line_ends(data: bytes, start: int) -> list[int]:
    """The offset just past each line of the log from `start` that parses (as `_parse` reads them)."""
    ends, offset = [], start
    for raw in data[start:].splitlines(keepends=True):
        offset += len(raw)
        if raw.endswith(b"\n") and AuditLine.parse(raw.decode("utf-8", "replace")) is not None:
            ends.append(offset)
    return ends


def _parse(data: bytes) -> list[AuditLine]:
    lines = []
    for raw in data.splitlines(keepends=True):
        if raw.endswith(b"\n"):
            line = AuditLine.parse(raw.decode("utf-8", "replace"))
            if line is not None:
                lines.append(line)
    return lines


def _relative(name: str) -> str | None:
    """A path inside the home, normalized, `/` separated; None for one outside it or inside .git."""
    name = name.replace(os.sep, "/")
    if not name or name.startswith("/") or "\0" in name or "\n" in name:
        return None
    name = posixpath.normpath(name)
    if name == ".." or name.startswith("../") or name.split("/")[0] == ".git":
        return None
    return name


def _under_any(path: str, named: set[str]) -> bool:
    """Whether `path` is one of `named` or inside one of them."""
    if "." in named:
        return True
    parts = path.split("/")
    return any("/".join(parts[:i]) in named for i in range(1, len(parts) + 1))


def _names(logged: str, file: str) -> bool:
    """Whether an audit line's FILE (a file, a folder, or a pattern such as memory/graph/entities/*) is `file`."""
    if logged == file or file.startswith(logged.rstrip("/") + "/"):
        return True
    return bool(_GLOB.search(logged)) and fnmatch.fnmatchcase(file, logged)


def _ident(name: str) -> str:
    """A name git accepts as an identity (no <, >, newline; not only punctuation)."""
    name = re.sub(r"[<>\n]", "", name).strip()
    return name if any(c.isalnum() for c in name) else COMMITTER


def _trigger(summary: str) -> str:
    """The summary's context (a reason in parentheses, outside quoted text), else `audit line`."""
    match = _CONTEXT.search(_QUOTED.sub("", summary))
    return match[1].strip() if match else "audit line"


def _block(action: str, file: str, summary: str, actor: str, approval: str, trigger: str) -> str:
    return f"[{action}] {file} — {summary}\nActor: {actor}\nApproval: {approval}\nTrigger: {trigger}"


def _message(lines: Sequence[AuditLine], start: int, end: int, critical: Sequence[str], empty: str) -> str:
    """The commit message: a subject, a block per change (the seed's format, 200 at most), the trailer."""
    blocks = []
    for line in lines[:MAX_BLOCKS]:
        block = _block(line.action, line.file, line.summary, line.actor, line.approval, _trigger(line.summary))
        if line.file in critical:
            block += "\n⚠️ CRITICAL FILE CHANGED"
        blocks.append(block)
    if len(lines) > MAX_BLOCKS:
        blocks.append(f"… and {len(lines) - MAX_BLOCKS} more (meta/audit.log in this commit lists them all)")
    if len(lines) == 1:
        subject = blocks[0].splitlines()[0]
    elif lines:
        first = lines[0].summary
        subject = f"[BATCH] {len(lines)} changes — {first if len(first) <= 60 else first[:59].rstrip()}…"
    else:
        subject = empty  # no line: the log alone changed
    trailers = f"Audit-Lines: {start}-{end}" + (f"\nAudit-Time: {format_time(lines[-1].time)}" if lines else "")
    parts = [subject, *(["\n\n".join(blocks)] if blocks else []), trailers]
    return "\n\n".join(parts) + "\n"


__all__ = ["GITIGNORE", "GitHistory", "HistoryError", "PurgeReport", "Version"]
