"""Where in `meta/audit.log` an item's, a run's and a revert's lines are, so an item's history and a rollback read
those lines only (issue 45: each read the whole log, 5.7 s and +160 MB at 200k lines).

`index/audit-lines.sqlite` maps keys to the byte offsets of the lines that carry them:

- `f:NAME`: a line whose FILE (or a move's old path) is named NAME without folder or extension, as an item is
  looked up (`trail.names_item`); its files table lists the files those lines name, for `files_of`.
- `a:ACTOR`: a run's lines (actors with a `:` only: `dream:RUN`, `reflection:ID`, …; never `main`).
- `r:rv-…`: the REVERT lines of one revert. `g:FILE`: a delete for good of FILE. `p:`: lines naming a folder or
  a pattern (they stand for the files in it).

It is derived data (ids, paths and offsets only, never a summary), kept right without trusting it:
- each query first catches it up from the end it recorded (other processes append under the log's own lock: it
  may lag, never skip), in one write transaction, so two processes never index the same bytes twice;
- it is rebuilt when missing or unreadable, and when the log is another file (a rewrite replaces it: retention,
  a redaction), shorter than that end, or the bytes just before that end differ;
- every line read at an offset must start a line, parse and carry the key; one that does not makes it rebuild.
A home it cannot keep (read-only, a link where it should be) or a database's log (`PgAuditLog`) is scanned
newest first instead, as before.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Protocol

from rockmem_mcp.audit.log import ACTIONS, AuditLine, clean_field, moved_from, parse_time
from rockmem_mcp.storage.no_follow import make_folders, open_fd

log = logging.getLogger(__name__)

INDEX_NAME = "audit-lines.sqlite"  # in the home's index/ folder: derived, never in the git history
FORMAT = 1  # bumped when the keys change: an index of another format is rebuilt
READ_BYTES = 1 << 20  # the log read this much at a time while indexing
LINE_BYTES = 1024  # read at an offset, then more while no newline: most lines are 100-300 bytes
LONGEST_LINE = 8192  # more than a line's fields hold (cut to 300 + 80 + 40 + 200 characters, 4 bytes at most each)
TAIL_BYTES = 64  # the bytes before the indexed end that must still be there (kept as their hash)
INSERT_BATCH = 10_000
QUERY_KEYS = 500  # keys per SQL statement (SQLite allows 32,766 parameters)
ATTEMPTS = 3  # a query meeting a stale index rebuilds it and starts again; then it scans
BUSY_SECONDS = 30.0  # another process rebuilding the index of a long log

_GLOB = re.compile(r"[*?\[]")
_REVERT_ID = re.compile(r"^(rv-[^:\s]+):")
_STAMP = re.compile(rb"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{1,6}Z")  # what format_time writes

PATTERN_KEY = "p:"
_ACTIONS = {action.encode(): action for action in ACTIONS}
_READS_SUMMARY = frozenset({"RENAME", "REVERT", "DELETE"})  # the actions whose summary gives a key


def stem(path: str) -> str:
    """A path's last part without its extension: what an item id matches (`trail.names_item`)."""
    return path.rsplit("/", 1)[-1].rsplit(".", 1)[0]


def file_key(file: str) -> str:
    return "f:" + stem(file)


def item_keys(item: str) -> list[str]:
    """The keys of every line that may name `item` (a line names it by its file, or its file's stem)."""
    return list(dict.fromkeys(["f:" + item, file_key(item)]))


def actor_key(actor: str) -> str:
    return "a:" + actor


def revert_key(revert_id: str) -> str:
    return "r:" + revert_id.split(":", 1)[0]


def gone_key(file: str) -> str:
    return "g:" + file


def is_deleted_for_good(line: AuditLine) -> bool:
    """A permanent delete or forget's line (rollback never brings that file back)."""
    return line.action == "DELETE" and "for good" in line.summary


def keys_of(line: AuditLine) -> set[str]:
    return set(_keys(line.action, line.file, line.actor, line.summary, moved_from(line)))


def _keys(action: str, file: str, actor: str, summary: str, old: str | None) -> list[str]:
    """The keys of a line (`old`: the path a move came from), its file's first. Its summary is only read for a
    REVERT or a DELETE (and a RENAME's `old`), so indexing cleans no other summary."""
    name = file.rsplit("/", 1)[-1]
    keys = ["f:" + name.rsplit(".", 1)[0]]
    if old is not None:
        keys.append(file_key(old))
    if ":" in actor:
        keys.append("a:" + actor)
    if action == "REVERT" and (match := _REVERT_ID.match(summary)):
        keys.append(revert_key(match[1]))
    if action == "DELETE" and "for good" in summary:  # is_deleted_for_good
        keys.append(gone_key(file))
    if "." not in name or file == "." or _GLOB.search(file):
        keys.append(PATTERN_KEY)  # a folder or pattern: `history._names` matches the files in it
    return keys


@dataclass(frozen=True)
class Found:
    at: int  # where the line starts in the log (bytes); a running number where the log is scanned
    line: AuditLine


class IndexStale(Exception):
    """The log is not what the index says (rewritten meanwhile): rebuild, then ask again."""


class LineIndex(Protocol):
    def find(
        self,
        keys: Iterable[str],
        keep: Callable[[AuditLine], bool] | None = None,
        limit: int | None = None,
        until: Callable[[AuditLine], bool] | None = None,
    ) -> list[Found]: ...

    def files(self, keys: Iterable[str]) -> list[tuple[str, str]]: ...

    def view(self) -> contextlib.AbstractContextManager[LogView | None]: ...

    def catch_up(self) -> None: ...


def _scan_find(
    newest_first: Iterable[AuditLine],
    keys: Iterable[str],
    keep: Callable[[AuditLine], bool] | None,
    limit: int | None,
    until: Callable[[AuditLine], bool] | None,
) -> list[Found]:
    wanted, found = set(keys), []
    if limit is not None and limit < 1:
        return found
    for number, line in enumerate(newest_first):
        if not wanted & keys_of(line):
            continue
        if until is not None and until(line):
            break
        if keep is None or keep(line):
            found.append(Found(-number, line))
            if limit is not None and len(found) >= limit:
                break
    return found


def _scan_files(newest_first: Iterable[AuditLine], keys: Iterable[str]) -> list[tuple[str, str]]:
    wanted, found = set(keys), {}
    for line in newest_first:
        if file_key(line.file) in wanted:
            found.setdefault((line.file, line.file), None)
            if (old := moved_from(line)) is not None:
                found.setdefault((old, line.file), None)
    return list(found)


class ScanIndex:
    """No index: the lines are scanned newest first (a database's log; a home that cannot keep the index)."""

    def __init__(self, log: _NewestFirst) -> None:
        self.log = log

    def find(
        self,
        keys: Iterable[str],
        keep: Callable[[AuditLine], bool] | None = None,
        limit: int | None = None,
        until: Callable[[AuditLine], bool] | None = None,
    ) -> list[Found]:
        """Lines carrying one of `keys` that `keep` accepts, newest first, at most `limit`; reading stops at the
        first one `until` is true of."""
        return _scan_find(self.log.newest_first(), keys, keep, limit, until)

    def files(self, keys: Iterable[str]) -> list[tuple[str, str]]:
        """(file, the FILE of the line naming it) for the lines keyed `f:…` in `keys`, newest first: a line's own
        file, then the path it moved from."""
        return _scan_files(self.log.newest_first(), keys)

    @contextlib.contextmanager
    def view(self) -> Iterator[LogView | None]:
        yield None  # no offsets to read by

    def catch_up(self) -> None:
        pass  # nothing kept


class _NewestFirst(Protocol):
    def newest_first(self) -> Iterator[AuditLine]: ...


class AuditLineIndex:
    """The index of a home's `meta/audit.log`, kept at `index_path` (see the module docstring)."""

    def __init__(self, log: _NewestFirst, log_path: Path, index_path: Path) -> None:
        self.log = log
        self.log_path = log_path
        self.index_path = index_path

    def find(
        self,
        keys: Iterable[str],
        keep: Callable[[AuditLine], bool] | None = None,
        limit: int | None = None,
        until: Callable[[AuditLine], bool] | None = None,
    ) -> list[Found]:
        """As `ScanIndex.find`, reading only the lines carrying the keys."""
        keys = list(keys)
        for _ in range(ATTEMPTS):
            try:
                with self.view() as view:
                    if view is None:
                        break
                    return view.find(keys, keep, limit, until)
            except IndexStale:
                continue
        return _scan_find(self.log.newest_first(), keys, keep, limit, until)

    def files(self, keys: Iterable[str]) -> list[tuple[str, str]]:
        """As `ScanIndex.files`, from the index's table of files."""
        keys = list(keys)
        for _ in range(ATTEMPTS):
            try:
                with self.view() as view:
                    if view is None:
                        break
                    return view.files(keys)
            except IndexStale:
                continue
        return _scan_files(self.log.newest_first(), keys)

    def catch_up(self) -> None:
        """Index what was appended (or everything, if the log was rewritten) now, so a query does not have to:
        the git history's committer calls it in the background after each commit."""
        with self.view():
            pass

    @contextlib.contextmanager
    def view(self) -> Iterator[LogView | None]:
        """The log as it is now, caught up in the index, read consistently until the block ends (one open file
        and one read transaction); None when there is no log or no index can be kept. IndexStale from inside
        means the index was found wrong and marked for a rebuild."""
        try:
            fd = open_fd(self.log_path, os.O_RDONLY)
        except FileNotFoundError:
            yield None
            return
        except OSError as exc:  # a link or a special file where the log should be: the scan reports nothing
            log.debug("audit index: %s", exc)
            yield None
            return
        db = None
        try:
            try:
                db = self._connect()
                info = _caught_up(db, fd)
            except OSError as exc:  # a read-only home, a link where the index goes: said at debug level
                log.debug("audit index not kept (%s): the log is scanned instead", exc)
                yield None
                return
            except sqlite3.Error as exc:
                log.warning("audit index unusable (%s): the log is scanned instead", exc)
                if isinstance(exc, sqlite3.DatabaseError) and not isinstance(exc, sqlite3.OperationalError):
                    self._remove()  # corrupt: the next query builds it again
                yield None
                return
            view = LogView(db, fd, info)
            try:
                yield view
            except IndexStale:
                with contextlib.suppress(sqlite3.Error):
                    db.execute("ROLLBACK")
                    db.execute("DELETE FROM state")  # rebuilt by the next query
                raise
        finally:
            if db is not None:
                with contextlib.suppress(sqlite3.Error):
                    db.close()
            os.close(fd)

    def _connect(self) -> sqlite3.Connection:
        folder = self.index_path.parent
        make_folders(folder)
        for path in (self.index_path, Path(f"{self.index_path}-wal"), Path(f"{self.index_path}-shm")):
            if path.is_symlink():  # never write through a link out of the home
                raise OSError(f"{path} is a symbolic link")
        db = sqlite3.connect(self.index_path, timeout=BUSY_SECONDS, isolation_level=None)
        try:
            db.execute("PRAGMA journal_mode=WAL")  # readers never wait for a process catching the index up
            db.execute("PRAGMA synchronous=NORMAL")  # derived data: a crash may lose the last catch-up, not more
            db.execute("PRAGMA journal_size_limit=4194304")  # a rebuild's WAL is not kept at its size
            db.executescript(
                """
                CREATE TABLE IF NOT EXISTS state (
                    one INTEGER PRIMARY KEY CHECK (one = 1), format INTEGER, device INTEGER, inode INTEGER,
                    indexed_to INTEGER, tail BLOB);
                CREATE TABLE IF NOT EXISTS postings (key TEXT, at INTEGER, PRIMARY KEY (key, at)) WITHOUT ROWID;
                CREATE TABLE IF NOT EXISTS files (
                    key TEXT, file TEXT, moved_to TEXT, at INTEGER, PRIMARY KEY (key, file, moved_to)) WITHOUT ROWID;
                """
            )
        except BaseException:
            db.close()
            raise
        return db

    def _remove(self) -> None:
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(OSError):
                os.unlink(f"{self.index_path}{suffix}")


@dataclass(frozen=True)
class _State:
    device: int
    inode: int
    indexed_to: int
    tail: bytes


def _state(db: sqlite3.Connection) -> _State | None:
    row = db.execute("SELECT format, device, inode, indexed_to, tail FROM state WHERE one = 1").fetchone()
    if row is None or row[0] != FORMAT:
        return None
    return _State(row[1], row[2], row[3], bytes(row[4]))


def _holds(state: _State | None, fd: int, info: os.stat_result) -> bool:
    """Whether `state` describes the open log: the same file, at least as long, the same bytes before its end."""
    if state is None or (state.device, state.inode) != (info.st_dev, info.st_ino) or state.indexed_to > info.st_size:
        return False
    return _tail_digest(fd, state.indexed_to) == state.tail


def _tail_digest(fd: int, end: int) -> bytes:
    """A hash of the TAIL_BYTES before `end`: the index keeps this, never the log's bytes (they may quote what a
    permanent delete then takes out of the log, issue 45)."""
    return hashlib.sha256(os.pread(fd, min(TAIL_BYTES, end), end - min(TAIL_BYTES, end))).digest()


def _caught_up(db: sqlite3.Connection, fd: int) -> _State:
    """Bring the index up to the log's last whole line, then open the read transaction queries use. Once caught
    up, lines appended meanwhile by another process wait for the next query: it lags, never loops."""
    caught = False
    for _ in range(ATTEMPTS):
        db.execute("BEGIN")
        state = _state(db)
        info = os.fstat(fd)  # after the snapshot: the same file only grew past what it says it indexed
        if state is not None and _holds(state, fd, info) and (caught or state.indexed_to == info.st_size):
            return state
        db.execute("ROLLBACK")
        db.execute("BEGIN IMMEDIATE")  # one process indexes a stretch; the others wait, then find it done
        try:
            state = _state(db)
            info = os.fstat(fd)
            start = state.indexed_to if state is not None and _holds(state, fd, info) else 0
            if start == 0:
                db.execute("DELETE FROM postings")
                db.execute("DELETE FROM files")
            end = _index_lines(db, fd, start, info.st_size)
            db.execute(
                "INSERT OR REPLACE INTO state VALUES (1, ?, ?, ?, ?, ?)",
                (FORMAT, info.st_dev, info.st_ino, end, _tail_digest(fd, end)),
            )
            db.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                db.execute("ROLLBACK")
            raise
        caught = True
    raise sqlite3.OperationalError("the audit log kept being replaced while it was indexed")


def _index_lines(db: sqlite3.Connection, fd: int, start: int, size: int) -> int:
    """Index the whole lines in [start, size); returns the end of the last one."""
    postings: list[tuple[str, int]] = []
    files: dict[tuple[str, str, str], int] = {}  # (key, file, "" or the path it moved to) -> the newest line so far

    def flush() -> None:
        postings.sort()  # inserted in the b-tree's order
        db.executemany("INSERT OR IGNORE INTO postings VALUES (?, ?)", postings)
        upsert = (
            "INSERT INTO files VALUES (?, ?, ?, ?) ON CONFLICT (key, file, moved_to) DO UPDATE SET at = excluded.at"
        )
        db.executemany(upsert, [(*row, at) for row, at in sorted(files.items())])  # indexed in order: newest last
        postings.clear()
        files.clear()

    position, pending = start, b""
    while position < size:
        block = os.pread(fd, min(READ_BYTES, size - position), position)
        if not block:
            break
        data = pending + block
        at = position - len(pending)
        position += len(block)
        cut = data.rfind(b"\n") + 1
        pending = data[cut:]
        for raw in data[:cut].split(b"\n")[:-1]:
            fields = _fields(raw)
            if fields is not None:
                action, file, actor, summary = fields
                old = (
                    moved_from(AuditLine(datetime.min, action, file, actor, "", summary))
                    if action == "RENAME"
                    else None
                )
                keys = _keys(action, file, actor, summary, old)
                postings.extend((key, at) for key in keys)
                files[(keys[0], file, "")] = at
                if old is not None:
                    files[(keys[0], old, file)] = at
            at += len(raw) + 1
        if len(postings) >= INSERT_BATCH:
            flush()
    flush()
    return position - len(pending)


def _fields(raw: bytes) -> tuple[str, str, str, str] | None:
    """ACTION, FILE, ACTOR and SUMMARY of a line as `AuditLine.parse` reads them, or None where it reads none: the
    same lines, the same keys, at a fraction of the cost (no strptime for the times the log writes, the time only
    checked; no summary cleaned that `_keys` does not read). Split before decoding: ` | ` is ASCII, so the parts
    decode as they do cut from the decoded line."""
    parts = raw.split(b" | ", 5)
    if len(parts) != 6 or (action := _ACTIONS.get(parts[1])) is None:
        return None
    try:
        if not _STAMP.fullmatch(parts[0]):
            raise ValueError
        datetime.fromisoformat(parts[0].decode())
    except ValueError:
        if parse_time(parts[0].decode("utf-8", "replace")) is None:
            return None
    summary = ""
    if action in _READS_SUMMARY:
        summary = clean_field(parts[5].decode("utf-8", "replace"), separator=False)
    return action, parts[2].decode("utf-8", "replace"), parts[3].decode("utf-8", "replace"), summary


class LogView:
    """The log (one open file) and its caught-up index (one read transaction): offsets read here are checked
    against the very file they index."""

    def __init__(self, db: sqlite3.Connection, fd: int, state: _State) -> None:
        self._db = db
        self._fd = fd
        self.indexed_to = state.indexed_to  # the end of the last whole line indexed

    def offsets(self, keys: Iterable[str], start: int = 0, end: int | None = None) -> list[int]:
        """Where the lines carrying one of `keys` start, in [start, end), newest first."""
        end = self.indexed_to if end is None else min(end, self.indexed_to)
        wanted = sorted(set(keys))
        found: set[int] = set()
        for i in range(0, len(wanted), QUERY_KEYS):
            chunk = wanted[i : i + QUERY_KEYS]
            marks = ",".join("?" * len(chunk))
            rows = self._db.execute(
                f"SELECT at FROM postings WHERE key IN ({marks}) AND at >= ? AND at < ?", (*chunk, start, end)
            )
            found.update(at for (at,) in rows)
        return sorted(found, reverse=True)

    def chunks(self, start: int, end: int) -> Iterator[bytes]:
        """The log's bytes [start, end) a block at a time (within what is indexed)."""
        end = min(end, self.indexed_to)
        while start < end:
            block = os.pread(self._fd, min(READ_BYTES, end - start), start)
            if not block:
                return
            start += len(block)
            yield block

    def line_at(self, at: int) -> AuditLine | None:
        """The line starting at `at`; None when no whole line starts there or it is not one."""
        if at < 0 or at >= self.indexed_to:
            return None
        before = 1 if at else 0
        data = os.pread(self._fd, LINE_BYTES + before, at - before)
        if before and data[:1] != b"\n":
            return None
        data = data[before:]
        while b"\n" not in data and at + len(data) < self.indexed_to:  # a line longer than a block (edited in)
            more = os.pread(self._fd, LINE_BYTES, at + len(data))
            if not more:
                break
            data += more
        end = data.find(b"\n")
        if end < 0:
            return None
        return AuditLine.parse(data[:end].decode("utf-8", "replace"))

    def line_ending_at(self, end: int) -> AuditLine | None:
        """The whole line ending just before `end` (its newline at end - 1); None when there is none."""
        if end <= 0 or end > self.indexed_to:
            return None
        start = max(0, end - LONGEST_LINE)
        data = os.pread(self._fd, end - start, start)
        if not data.endswith(b"\n"):
            return None
        cut = data.rfind(b"\n", 0, len(data) - 1)
        if cut < 0 and start > 0:
            return None  # longer than a block: not a line the log writes
        return self.line_at(start + cut + 1)

    def find(
        self,
        keys: Sequence[str],
        keep: Callable[[AuditLine], bool] | None = None,
        limit: int | None = None,
        until: Callable[[AuditLine], bool] | None = None,
        start: int = 0,
        end: int | None = None,
    ) -> list[Found]:
        """As `AuditLineIndex.find`, within the bytes [start, end); IndexStale when a line is not what the index
        says it is."""
        wanted = set(keys)
        found: list[Found] = []
        if limit is not None and limit < 1:
            return found
        for at in self.offsets(keys, start, end):
            line = self.line_at(at)
            if line is None or not wanted & keys_of(line):
                raise IndexStale(f"no line with one of {sorted(wanted)[:3]} at byte {at}")
            if until is not None and until(line):
                break
            if keep is None or keep(line):
                found.append(Found(at, line))
                if limit is not None and len(found) >= limit:
                    break
        return found

    def files(self, keys: Iterable[str]) -> list[tuple[str, str]]:
        """As `ScanIndex.files`; IndexStale when a line is not what the index says it is."""
        wanted = sorted({key for key in keys if key.startswith("f:")})
        rows: list[tuple[str, str, int]] = []
        for i in range(0, len(wanted), QUERY_KEYS):
            chunk = wanted[i : i + QUERY_KEYS]
            marks = ",".join("?" * len(chunk))
            rows += self._db.execute(
                f"SELECT file, moved_to, at FROM files WHERE key IN ({marks}) AND at < ?", (*chunk, self.indexed_to)
            ).fetchall()
        rows = [(file, moved_to or file, at) for file, moved_to, at in rows]  # (file, the line's FILE, where)
        rows.sort(key=lambda row: (-row[2], row[0] != row[1]))  # newest first; a line's own file before its old
        for file, via, at in rows:
            line = self.line_at(at)
            if line is None or line.file != via or (file != via and moved_from(line) != file):
                raise IndexStale(f"no line naming {file} at byte {at}")
        return [(file, via) for file, via, _ in rows]


def line_index(log: _NewestFirst, log_path: Path | None, index_folder: Path) -> LineIndex:
    """The index of a home's log, or a scan of a database's (`log_path` None)."""
    if log_path is None:
        return ScanIndex(log)
    return AuditLineIndex(log, log_path, index_folder / INDEX_NAME)
