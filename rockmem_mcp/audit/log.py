"""The audit log (seed 004 §12.4): `meta/audit.log`, one line per durable change of any store.

    TIMESTAMP | ACTION | FILE | ACTOR | APPROVAL | SUMMARY

Lines are appended durably (one write and an fsync under the log's lock, like the daily logs), so a line
that was appended survives a crash. A line torn by a crash or a full disk is skipped when read and never
swallows the line after it. FILE is the changed file's path relative to the home, with `/` separators.
Every field is one line of printable text: what is written here comes from memory and stays data.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from rockmem_mcp.storage.atomic import atomic_write, remove_durably
from rockmem_mcp.storage.daily_log import Appender, still_at
from rockmem_mcp.storage.no_follow import open_fd, read_bytes

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

READ_BACK_BYTES = 64 * 1024  # a block of the log read at a time from its end

# The seed's action words (004 §12.4 and §13.7).
ACTIONS = (
    "CREATE",
    "EDIT",
    "APPEND",
    "DELETE",
    "ARCHIVE",
    "MERGE",
    "REVERT",
    "DECAY",
    "RENAME",
    "PROPOSE",
    "COMMIT",
    "REJECT",
    "ALERT",
)
NO_APPROVAL = "—"  # the seed's mark for "no approval applies" (a human's own edit)
SUMMARY_CHARS = 200
_FIELD_CHARS = 300
_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u200b-\u200f\u202a-\u202e\u2066-\u2069]+")
_TIME_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"


def clean_field(text: str, limit: int = _FIELD_CHARS, separator: bool = True) -> str:
    """One line of printable text: control and bidi characters become spaces, `|` (the separator) becomes
    `/` unless this is the last field, and text past `limit` is cut with an ellipsis."""
    text = _UNPRINTABLE.sub(" ", text).strip()
    if separator:
        text = text.replace("|", "/")
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def format_time(moment: datetime) -> str:
    """UTC with milliseconds: lines sort by their text, and a point in time falls between two lines."""
    return moment.astimezone(UTC).strftime(_TIME_FORMAT)[:-4] + "Z"


def parse_time(text: str) -> datetime | None:
    for pattern in ("%Y-%m-%dT%H:%M:%S.%fZ", "%Y-%m-%dT%H:%M:%SZ", "%Y-%m-%dT%H:%MZ"):
        try:
            return datetime.strptime(text, pattern).replace(tzinfo=UTC)
        except ValueError:
            continue
    return None


@dataclass(frozen=True)
class AuditLine:
    time: datetime
    action: str
    file: str  # relative to the home, `/` separated; a folder or a pattern for a change of many files
    actor: str  # main, subagent:NAME, patrol:NAME, dream:RUN, manual, system:…
    approval: str  # auto, approved, pending, rejected, or NO_APPROVAL
    summary: str

    def format(self) -> str:
        fields = (
            format_time(self.time),
            self.action,
            clean_field(self.file),
            clean_field(self.actor, 80),
            clean_field(self.approval, 40),
        )
        return " | ".join(fields) + " | " + clean_field(self.summary, SUMMARY_CHARS, separator=False)

    @classmethod
    def parse(cls, text: str) -> AuditLine | None:
        """The line, or None when it is not one (torn by a crash, or edited into another shape)."""
        parts = text.rstrip("\n").split(" | ", 5)
        if len(parts) != 6 or parts[1] not in ACTIONS:
            return None
        moment = parse_time(parts[0])
        if moment is None:
            return None
        return cls(moment, parts[1], parts[2], parts[3], parts[4], clean_field(parts[5], separator=False))


_MOVED_FROM = re.compile(r"moved from (\S+)")


def moved_from(line: AuditLine) -> str | None:
    """The old path of a RENAME line (its FILE is the new one; the summary says `moved from OLD`)."""
    if line.action != "RENAME":
        return None
    found = _MOVED_FROM.search(line.summary)
    return found.group(1) if found else None


class Redacts(Protocol):
    """What `AuditLog.redact` applies (audit/redaction.py's Redaction, which reads lines with this module)."""

    def log_bytes(self, data: bytes) -> tuple[bytes, int]:
        """The log's bytes with an item's text taken out of the lines about it, and how many lines changed."""
        ...


class AuditLog:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._appender = Appender(path)

    def append(self, lines: list[AuditLine]) -> None:
        """Append durably, in one write; raises OSError (ENOSPC for a write cut short) when that fails."""
        if not lines:
            return
        self._appender.append("".join(line.format() + "\n" for line in lines).encode("utf-8"))

    def lines(self) -> Iterator[AuditLine]:
        """Every whole line, oldest first; unreadable ones (torn by a crash, edited out of shape) are skipped,
        and a last line still being written is left for a later read."""
        try:
            data = read_bytes(self.path)
        except FileNotFoundError:
            return
        for raw in data.splitlines(keepends=True):
            if not raw.endswith(b"\n"):
                break
            line = AuditLine.parse(raw.decode("utf-8", "replace"))
            if line is not None:
                yield line

    def newest_first(self) -> Iterator[AuditLine]:
        """The whole lines, newest first, read backwards from the end a block at a time: a reader that stops after
        what it needs (the audit tool's latest lines) costs the same at 200 lines as at 200,000. As `lines`, a last
        line still being written is left out and unreadable lines are skipped."""
        try:
            fd = open_fd(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return
        try:
            position = os.fstat(fd).st_size
            pending = b""  # the start of a line whose beginning is in an earlier block
            at_end = True
            while position > 0:
                size = min(READ_BACK_BYTES, position)
                position -= size
                pieces = (os.pread(fd, size, position) + pending).split(b"\n")
                if at_end and len(pieces) == 1 and position > 0:  # no newline yet: all of it may be that line
                    pending = pieces[0]
                    continue
                pending = pieces[0] if position > 0 else b""
                whole = pieces[1:] if position > 0 else pieces
                if at_end:  # what follows the last newline is a line still being written
                    whole, at_end = whole[:-1], False
                for raw in reversed(whole):
                    if raw and (line := AuditLine.parse(raw.decode("utf-8", "replace") + "\n")) is not None:
                        yield line
        finally:
            os.close(fd)

    def rewrite(self, keep: Callable[[list[AuditLine]], list[AuditLine]], older_than: datetime | None = None) -> int:
        """Replace the log with `keep(lines)` atomically, under the lock appenders take (an append waiting
        meanwhile lands in the new file); returns how many lines went. Torn lines are dropped. `older_than`: a hint
        that `keep` changes nothing newer (a database's trail reads only those; a file is rewritten whole)."""
        with self._replacing() as held:
            if not held:
                return 0
            current = list(self.lines())
            kept = keep(current)
            if len(kept) == len(current):
                return 0
            if kept:
                atomic_write(self.path, "".join(line.format() + "\n" for line in kept).encode("utf-8"))
            else:
                with contextlib.suppress(FileNotFoundError):
                    remove_durably(self.path)
            return len(current) - len(kept)

    def redact(self, redaction: Redacts) -> int:
        """Take a permanently removed item's text out of the lines about it (audit/redaction.py: replaced by its
        hash), atomically, under the lock appenders take (an append waiting meanwhile lands in the new file); returns
        how many lines changed. Like `rewrite`, it replaces the file: a reader that indexed the old one by offset
        sees a new inode. Every other byte stays as it was, torn lines included, so the git history's copies of the
        log, rewritten by the same rules, stay its prefixes."""
        with self._replacing() as held:
            if not held:
                return 0
            data, changed = redaction.log_bytes(read_bytes(self.path))
            if changed:
                atomic_write(self.path, data)
            return changed

    @contextlib.contextmanager
    def _replacing(self) -> Iterator[bool]:
        """The lock appenders take, held on the file now at the log's path, for a body that replaces it (an append
        waiting meanwhile lands in the new file); False when there is no log."""
        while True:
            try:
                fd = open_fd(self.path, os.O_RDWR)
            except FileNotFoundError:
                yield False
                return
            try:
                if fcntl is not None:
                    fcntl.flock(fd, fcntl.LOCK_EX)
                    if not still_at(fd, self.path):
                        continue  # replaced while this waited: lock the file there now
                yield True
                return
            finally:
                os.close(fd)
