"""The filter between `git fast-export --no-data` and `git fast-import` that takes a permanently removed item out of the
home's history (governance/history.py, `GitHistory.purge`).

The export names every blob by its sha; the filter passes each command through as it is, except:
- a file command (`M`, `D`) for one of the item's own files is dropped, so no tree ever holds it again;
- `M` of a covered file (the audit log, a day log or MEMORY.md that held it) gets the file's bytes with the item's
  texts replaced (audit/redaction.py), written inline, when that changes them;
- a commit message's blocks about covered files are redacted, and its `Audit-Lines: START-END` trailer (bytes of
  the commit's own audit log) moved to where those lines now are in the rewritten log.
Commits are buffered one at a time (a message precedes the files it describes). Held besides: the last version of
the audit log read and its redaction (the next version is redacted from it), and the rewrites of other covered
files by blob (a file unchanged across commits is read once); never every version of the log.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import BinaryIO

from rockmem_mcp.audit.redaction import RedactedLog, Redaction

_TRAILER = re.compile(rb"^Audit-Lines: (\d+)-(\d+)[ \t]*$", re.MULTILINE)
_C_ESCAPES = {b"n": b"\n", b"t": b"\t", b'"': b'"', b"\\": b"\\", b"a": b"\a", b"b": b"\b", b"f": b"\f", b"r": b"\r"}
_C_ESCAPES[b"v"] = b"\v"


@dataclass
class Rewritten:
    """What a covered blob became: its new bytes, or None when unchanged; for an audit log, how its lines moved."""

    data: bytes | None
    log: RedactedLog | None = None


@dataclass
class FilterCounts:
    commits: int = 0
    blobs_rewritten: int = 0
    files_dropped: int = 0  # file commands of the item's own files left out
    messages_rewritten: int = 0


class HistoryFilter:
    def __init__(
        self,
        redaction: Redaction,
        audit_file: str,
        read_blob: Callable[[str], bytes],
        live_sha: Callable[[str], str | None],
    ) -> None:
        """`read_blob(sha)`: a blob's bytes; `live_sha(path)`: the blob sha of the file on disk now (None: there is
        none). That version of a covered file stays as it is (the last commit must keep matching the home), and an
        own file there now (a procedure of the same name saved since) keeps its history; `audit_file`: the audit
        log's path in the home (always covered: its copies are rewritten as the log itself was)."""
        self.redaction = redaction
        self.audit_file = audit_file
        self._read_blob = read_blob
        self._live_sha = live_sha
        self._rewritten: dict[str, Rewritten] = {}  # other covered files' by sha: one shared by commits read once
        self._last_log: tuple[str, bytes, Rewritten] | None = None  # the log version read last: sha, bytes, rewrite
        self.counts = FilterCounts()

    def run(self, export: BinaryIO, out: BinaryIO) -> None:
        """Read the export stream from `export` and write the import stream to `out`."""
        commit: list[bytes] | None = None  # the buffered commit's lines (a message as one element)
        while True:
            line = export.readline()
            if not line:
                break
            if line.startswith(b"data "):
                data = _read_data(export, line)
                if commit is not None:
                    commit.append(line)
                    commit.append(data)
                else:
                    out.write(line + data)
                continue
            if commit is not None and (line == b"\n" or not _starts_command(line)):
                if line != b"\n":
                    commit.append(line)
                continue
            if commit is not None:
                out.write(self._commit(commit))
                commit = None
            if line.startswith(b"commit "):
                commit = [line]
            else:
                out.write(line)
        if commit is not None:
            out.write(self._commit(commit))

    def _commit(self, lines: list[bytes]) -> bytes:
        """One commit: its own files left out, covered files redacted, its message and trailer made to agree."""
        self.counts.commits += 1
        message_at = next(i for i, line in enumerate(lines) if line.startswith(b"data ")) + 1
        head, message, rest = lines[: message_at - 1], lines[message_at], lines[message_at + 1 :]
        body: list[bytes] = []
        audit_moves: RedactedLog | None = None
        pending_data = False
        for line in rest:
            if pending_data:  # the bytes of an inline `M … inline PATH` (never written by fast-export --no-data)
                body.append(line)
                pending_data = False
                continue
            if line.startswith(b"data "):
                body.append(line)
                pending_data = True
                continue
            file_command = _file_command(line)
            if file_command is None:
                body.append(line)
                continue
            kind, mode, sha, path = file_command
            if self.redaction.owns(path) and self._live_sha(path) is None:
                self.counts.files_dropped += 1
                continue
            if kind != b"M" or sha is None or mode == b"160000" or not self._covered(path):
                body.append(line)
                continue
            rewritten = self._blob(path, sha)
            if path == self.audit_file and rewritten.data is not None:
                audit_moves = rewritten.log
            if rewritten.data is None:
                body.append(line)
            else:
                body.append(b"M " + mode + b" inline " + _path_field(line) + b"\n")
                body.append(b"data %d\n" % len(rewritten.data) + rewritten.data + b"\n")
        new_message = self._message(message, audit_moves)
        return b"".join([*head, b"data %d\n" % len(new_message), new_message, *body, b"\n"])

    def _covered(self, path: str) -> bool:
        return path == self.audit_file or self.redaction.covers(path)

    def _blob(self, path: str, sha: str) -> Rewritten:
        if path == self.audit_file:
            return self._log(sha)
        if self._live_sha(path) == sha:
            return Rewritten(None)
        known = self._rewritten.get(sha)
        if known is None:
            data = self._read_blob(sha)
            new = self.redaction.file_bytes(data)
            known = self._rewritten[sha] = self._counted(Rewritten(None if new == data else new))
        return known

    def _log(self, sha: str) -> Rewritten:
        """A version of the audit log rewritten. The log is appended to, so a commit's version is mostly the last
        one's plus new lines: the last version's redaction is reused when this one begins with it (at a line's
        end), and only the lines after it are redacted, so a purge reads each line once instead of once for every
        commit that holds it (that was most of a purge's time). Only the last version is kept: keeping them all
        would hold every version of the log in memory."""
        last = self._last_log
        if last is not None and last[0] == sha:
            return last[2]
        data = self._read_blob(sha)
        previous = last[2].log if last is not None else None
        if last is not None and previous is not None and last[1].endswith(b"\n") and data.startswith(last[1]):
            at = len(last[1])
            redacted = previous.followed_by(self.redaction.audit_log(data[at:]), at, data)
        else:
            redacted = self.redaction.audit_log(data)
        known = self._counted(Rewritten(redacted.data if redacted.changed else None, redacted))
        self._last_log = (sha, data, known)
        return known

    def _counted(self, known: Rewritten) -> Rewritten:
        if known.data is not None:
            self.counts.blobs_rewritten += 1
        return known

    def _message(self, message: bytes, audit_moves: RedactedLog | None) -> bytes:
        text = message.decode("utf-8", "surrogateescape")
        redacted = self.redaction.message(text)
        new = redacted.encode("utf-8", "surrogateescape") if redacted != text else message
        if audit_moves is not None:
            new = _TRAILER.sub(lambda m: _moved_span(m, audit_moves), new)
        if new != message:
            self.counts.messages_rewritten += 1
        return new


def _moved_span(match: re.Match[bytes], moves: RedactedLog) -> bytes:
    start, end = moves.moved(int(match[1])), moves.moved(int(match[2]))
    if start is None or end is None:  # not at line ends: as it was (versions() then finds fewer lines)
        return match[0]
    return b"Audit-Lines: %d-%d" % (start, end)


def _read_data(stream: BinaryIO, header: bytes) -> bytes:
    """The bytes a `data N` command announces (fast-export writes exact counts, never `data <<DELIM`)."""
    size = int(header[5:].strip())
    data = stream.read(size)
    if len(data) != size:
        raise ValueError("the fast-export stream ended inside a data block")
    return data


_COMMANDS = (b"commit ", b"reset ", b"tag ", b"blob", b"done", b"feature ", b"progress ", b"checkpoint", b"option ")


def _starts_command(line: bytes) -> bool:
    return line.startswith(_COMMANDS)


def _file_command(line: bytes) -> tuple[bytes, bytes, str | None, str] | None:
    """(kind, mode, sha or None, path) of an `M MODE SHA PATH` or `D PATH` line; None for anything else."""
    if line.startswith(b"M "):
        parts = line[2:].rstrip(b"\n").split(b" ", 2)
        if len(parts) != 3:
            return None
        mode, ref, raw = parts
        sha = ref.decode("ascii", "replace") if ref != b"inline" and not ref.startswith(b":") else None
        return b"M", mode, sha, _unquote(raw)
    if line.startswith(b"D "):
        return b"D", b"", None, _unquote(line[2:].rstrip(b"\n"))
    return None


def _path_field(line: bytes) -> bytes:
    """The path of an `M MODE SHA PATH` line, as written (quoted or not)."""
    return line[2:].rstrip(b"\n").split(b" ", 2)[2]


def _unquote(raw: bytes) -> str:
    """A path as fast-export writes it: C-quoted when it holds a quote, a backslash or a control character."""
    if not raw.startswith(b'"') or not raw.endswith(b'"') or len(raw) < 2:
        return raw.decode("utf-8", "surrogateescape")
    body, out, i = raw[1:-1], bytearray(), 0
    while i < len(body):
        char = body[i : i + 1]
        if char == b"\\" and i + 1 < len(body):
            following = body[i + 1 : i + 2]
            if following.isdigit() and i + 3 < len(body):  # \ooo: an octal byte
                out += bytes([int(body[i + 1 : i + 4], 8)])
                i += 4
                continue
            out += _C_ESCAPES.get(following, following)
            i += 2
            continue
        out += char
        i += 1
    return out.decode("utf-8", "surrogateescape")
