"""The purge's filter (governance/history_filter.py) on the audit log's versions: each commit's copy redacted exactly
as the whole log would be, with each line read once however many commits hold it."""

from __future__ import annotations

import hashlib
import io
import re
from datetime import UTC, datetime

import pytest

from rockmem_mcp.audit.log import AuditLine
from rockmem_mcp.audit.redaction import Redaction
from rockmem_mcp.audit.service import quoted
from rockmem_mcp.governance.history_filter import HistoryFilter

LOG = "meta/audit.log"
TEXT = "The user keeps the spare key to the Lisbon flat under the blue flowerpot"
OTHER = "The user keeps a running log of every half marathon since 2019"  # the same first words: a needle's hit
OWN = "memory/home/3f9a0c1b2d4e.json"
AT = datetime(2026, 11, 24, 9, 0, tzinfo=UTC)


def line(file: str, summary: str, action: str = "CREATE") -> bytes:
    return (AuditLine(AT, action, file, "main", "auto", summary).format() + "\n").encode()


def versions() -> list[bytes]:
    """The log as commit after commit held it: appended to, with the item saved early, renamed and deleted late;
    one version ends in a torn line that the next one's line completes, and one is the log redacted by hand."""
    lines = [line(f"memory/n/{i:012x}.json", f"saved {quoted(f'{OTHER} #{i}')}") for i in range(40)]
    lines.insert(3, line(OWN, f"saved {quoted(TEXT)}"))
    lines.insert(20, line("memory/away/3f9a0c1b2d4e.json", f"moved from {OWN} {quoted(TEXT)}", "RENAME"))
    lines.insert(21, line("memory/n/000000000001.json", f"edited: moved from {OWN} {quoted(TEXT)}", "EDIT"))
    lines.append(line(OWN, f"deleted for good {quoted(TEXT)}", "DELETE"))
    lines.insert(30, b"2026-11-24T09:00:00.00Z | CREA")  # torn by a crash, and the next line run into it: its
    lines.insert(31, line(OWN, f"edited {quoted(TEXT)}", "EDIT"))  # fields are one place off, FILE is EDIT
    out = [b"".join(lines[:n]) for n in range(1, len(lines) + 1)]
    out.insert(10, out[9].replace(b"spare key", b"[gone]"))  # not an extension of the one before
    return out


def appended() -> list[bytes]:
    """The versions that each extend the one before: a plain run of appends."""
    run: list[bytes] = []
    for blob in versions():
        if blob.endswith(b"\n") and (not run or blob.startswith(run[-1])):
            run.append(blob)
    return run


def stream(blobs: list[bytes]) -> bytes:
    """A fast-export --no-data stream of one commit per version of the log."""
    out = []
    for number, blob in enumerate(blobs, start=1):
        message = f"commit {number}\n".encode()
        out += [
            b"commit refs/heads/main\n",
            b"mark :%d\n" % number,
            b"committer rockmem <rockmem@localhost> %d +0000\n" % (1_700_000_000 + number),
            b"data %d\n" % len(message) + message,
            b"M 100644 " + sha(blob).encode() + b" " + LOG.encode() + b"\n",
            b"\n",
        ]
    return b"".join(out) + b"done\n"


def sha(blob: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(blob) + blob).hexdigest()


def imported_logs(output: bytes, blobs: list[bytes]) -> list[bytes]:
    """Each commit's log as the filter hands it on: inline bytes when rewritten, else the blob it names."""
    by_sha = {sha(blob): blob for blob in blobs}
    logs, at = [], 0
    command = re.compile(rb"M 100644 (inline|[0-9a-f]{40}) " + LOG.encode() + rb"\n")
    while (found := command.search(output, at)) is not None:
        if found[1] == b"inline":
            header_end = output.index(b"\n", found.end())
            size = int(output[found.end() + len(b"data ") : header_end])
            logs.append(output[header_end + 1 : header_end + 1 + size])
            at = header_end + 1 + size
        else:
            logs.append(by_sha[found[1].decode()])
            at = found.end()
    return logs


def run_filter(redaction: Redaction, blobs: list[bytes]) -> bytes:
    by_sha = {sha(blob): blob for blob in blobs}
    history_filter = HistoryFilter(redaction, LOG, by_sha.__getitem__, lambda _path: None)
    out = io.BytesIO()
    history_filter.run(io.BytesIO(stream(blobs)), out)
    return out.getvalue()


def test_every_version_of_the_log_is_redacted_as_the_whole_log_would_be() -> None:
    gone = Redaction([TEXT], own_files=[OWN])
    blobs = versions()

    logs = imported_logs(run_filter(gone, blobs), blobs)

    assert len(logs) == len(blobs)
    for blob, log in zip(blobs, logs, strict=True):
        assert log == gone.audit_log(blob).data
    last = logs[-1].decode().splitlines()
    other = [text for text in last if "| EDIT | memory/n/" in text]  # another memory's line: not about the item
    assert len(other) == 1 and quoted(TEXT) in other[0]
    assert "Lisbon" not in "".join(text for text in last if text not in other)
    assert sum("forgotten sha256" in text for text in last) == 4  # saved, renamed, the run-on line, deleted


def test_a_commit_message_trailer_moves_with_the_lines_before_it() -> None:
    """Audit-Lines spans are bytes of the rewritten log: each commit's own lines (from where the version before it
    ended to where it ends) move as they would in that version's log redacted whole."""
    gone = Redaction([TEXT], own_files=[OWN])
    blobs = [blob for blob in versions() if blob.endswith(b"\n")]
    spans = [(len(before), len(blob)) for before, blob in zip([b"", *blobs], blobs, strict=False)]
    export = stream(blobs)
    for number, (start, end) in enumerate(spans, start=1):
        old, message = f"commit {number}\n".encode(), f"commit {number}\n\nAudit-Lines: {start}-{end}\n".encode()
        export = export.replace(b"data %d\n" % len(old) + old, b"data %d\n" % len(message) + message, 1)
    by_sha = {sha(blob): blob for blob in blobs}
    out = io.BytesIO()
    HistoryFilter(gone, LOG, by_sha.__getitem__, lambda _path: None).run(io.BytesIO(export), out)

    moved = [(int(a), int(b)) for a, b in re.findall(rb"Audit-Lines: (\d+)-(\d+)", out.getvalue())]
    expected = []
    for blob, (start, end) in zip(blobs, spans, strict=True):
        whole = gone.audit_log(blob)
        expected.append((whole.moved(start), whole.moved(end)) if whole.changed else (start, end))
    assert moved == expected and moved != spans  # and the lines after the item's did move


def test_each_line_is_redacted_once_however_many_commits_hold_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """A purge reads every commit's log; re-reading each version whole cost commits x lines (most of a purge's
    time when the item's first words begin many other memories, as "The user ..." does)."""
    gone = Redaction([TEXT], own_files=[OWN])
    blobs = appended()
    read: list[str] = []
    real = Redaction.audit_line
    monkeypatch.setattr(Redaction, "audit_line", lambda self, text: read.append(text) or real(self, text))

    run_filter(gone, blobs)

    assert len(read) == len(set(read)) <= blobs[-1].count(b"\n")


def test_a_version_several_commits_hold_in_a_row_is_read_once() -> None:
    """Commits that changed other files hold the same log: read and redacted once, as when every rewrite was kept
    (now only the last is, so the filter never holds every version of the log at once)."""
    gone = Redaction([TEXT], own_files=[OWN])
    blobs = appended()[:12]
    held = [blob for blob in blobs for _ in range(3)]  # each version in three commits in a row
    by_sha = {sha(blob): blob for blob in blobs}
    read: list[str] = []
    history_filter = HistoryFilter(gone, LOG, lambda s: read.append(s) or by_sha[s], lambda _path: None)
    out = io.BytesIO()

    history_filter.run(io.BytesIO(stream(held)), out)

    assert read == [sha(blob) for blob in blobs]
    assert imported_logs(out.getvalue(), blobs) == [gone.audit_log(blob).data for blob in held]
