"""Taking a permanently removed item's text out of the record (issue 45: forgotten means gone).

A permanent delete or forget removes the item; what the record kept of it (audit lines quoting it, the versions of
its files in the git history, commit messages naming it) is rewritten with a `Redaction`: every place that held one
of its texts holds `[forgotten sha256:HASH]` instead (HASH: 16 hex digits of the text's SHA-256, as meta/forget.log
keeps it), so the record still says that something was there, when and by whom, never what.

The scope is the item's, not every occurrence of its words: an audit line (or a commit message's block) is rewritten
only when its FILE is one of the item's own files or a shared file that held it (its day log, MEMORY.md, a folder
such as the graph's triples), and a blob only at such a path. Another memory that says the same words keeps them,
and so does its history: a revert of it never writes a placeholder back.

A text matches as stored (raw, and as JSON escapes it) and as a summary quotes it (whitespace collapsed), whole and
not inside a longer word; and a summary's cut of it (`quoted`, or a field's length limit): a prefix of at least
MIN_CUT_CHARS characters followed by `…`. Every rule works line by line on an audit log, so the history's copies of
the log are rewritten to exactly the bytes the log itself is rewritten to.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from rockmem_mcp.audit.log import AuditLine, moved_from

PLACEHOLDER = "[forgotten sha256:{}]"
MIN_CUT_CHARS = 8  # a shorter cut (a field cut a few characters into a quote) names nothing
ELLIPSIS = "…"
_SEPARATOR = " | "
_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u200b-\u200f\u202a-\u202e\u2066-\u2069]+")  # as clean_field
_BLOCK = re.compile(r"^\[[A-Z]+\] (.+?) — ", re.MULTILINE)  # a commit message's `[ACTION] FILE — SUMMARY`


def text_digest(text: str) -> str:
    """16 hex digits of the SHA-256 of `text` with its whitespace collapsed: what the record keeps instead of it."""
    return hashlib.sha256(" ".join(text.split()).encode("utf-8")).hexdigest()[:16]


def quoted_texts(summary: str) -> list[str]:
    """What a summary quotes (`saved "…"`, `entity "…" (concept)`): from its first `"` to its last, or to its end
    when a field's limit cut the closing one away; a trailing `…` (a cut) left out."""
    first = summary.find('"')
    if first < 0:
        return []
    last = summary.rfind('"')
    inside = summary[first + 1 : last] if last > first else summary[first + 1 :]
    inside = inside.removesuffix(ELLIPSIS).strip()
    return [inside] if inside else []


@dataclass(frozen=True)
class RedactedLog:
    data: bytes
    changed: int  # lines rewritten
    spans: list[tuple[int, int, int]] = field(default_factory=list)  # each changed line: old start, old end, and
    # the bytes the log gained (or lost, < 0) up to that end

    def moved(self, offset: int) -> int | None:
        """Where a line boundary of the old log (a commit's `Audit-Lines` span) is in the new one; None for an
        offset inside a changed line."""
        at = bisect.bisect_right(self.spans, offset, key=lambda span: span[0])
        if at and offset < self.spans[at - 1][1]:
            return None if offset > self.spans[at - 1][0] else offset + (self.spans[at - 2][2] if at > 1 else 0)
        return offset + (self.spans[at - 1][2] if at else 0)

    def followed_by(self, tail: RedactedLog, at: int, whole: bytes) -> RedactedLog:
        """The redaction of `whole`, made of this one (of `whole[:at]`) and `tail` (of `whole[at:]`): the same as
        `Redaction.audit_log(whole)` when `whole[:at]` ends a line, since each line is redacted on its own."""
        if not self.changed and not tail.changed:
            return RedactedLog(whole, 0)
        shift = self.spans[-1][2] if self.spans else 0
        spans = self.spans + [(start + at, end + at, gained + shift) for start, end, gained in tail.spans]
        return RedactedLog(self.data + tail.data, self.changed + tail.changed, spans)


class Redaction:
    def __init__(self, texts: Iterable[str], own_files: Iterable[str] = (), shared: Iterable[str] = ()) -> None:
        """`texts`: what the item held (every version known); `own_files`: its files, relative to the home
        (`/`-separated); `shared`: files that held it among others, or folders (ending in `/`)."""
        self.texts = [text for text in texts if text.strip()]  # kept for a purge to resume after a crash
        self.own_files = frozenset(own_files)
        self.shared = frozenset(shared)
        self._folders = tuple(path for path in self.shared if path.endswith("/"))
        placeholders: dict[str, str] = {}  # form -> placeholder (a form of two texts: the first's)
        cuts: dict[str, str] = {}  # a quoted form a summary may cut -> placeholder
        for text in self.texts:
            placeholder = PLACEHOLDER.format(text_digest(text))
            for form in _forms(text):
                placeholders.setdefault(form, placeholder)
            for form in _quoted_forms(text):
                if len(form) > MIN_CUT_CHARS:
                    cuts.setdefault(form, placeholder)
        self._placeholders = placeholders
        self._cuts = cuts
        forms = sorted(placeholders, key=len, reverse=True)  # the longest first: a text inside another is not cut
        self._forms = forms
        self._pattern = re.compile("|".join(f"({_bounded(form)})" for form in forms)) if forms else None
        self._needles = sorted({form[:MIN_CUT_CHARS] for form in [*forms, *cuts]}, key=len)
        self._needle_bytes = [needle.encode("utf-8") for needle in self._needles]

    def __bool__(self) -> bool:
        return bool(self._forms)

    def to_json(self) -> bytes:
        return json.dumps({"texts": self.texts, "own": sorted(self.own_files), "shared": sorted(self.shared)}).encode()

    @classmethod
    def from_json(cls, data: bytes) -> Redaction:
        body = json.loads(data)
        return cls(body["texts"], body["own"], body["shared"])

    @property
    def needles(self) -> list[str]:
        """Substrings one of which every match holds: a cheap test before the rules run (or a database's filter)."""
        return list(self._needles)

    def covers(self, file: str) -> bool:
        """Whether `file` (relative to the home) is one of the item's own files or a shared one that held it."""
        return file in self.own_files or file in self.shared or file.startswith(self._folders)

    def owns(self, file: str) -> bool:
        return file in self.own_files

    # ------------------------------------------------------------------ text
    def text(self, text: str, cuts: bool = True) -> str:
        """`text` with every whole form of the item's texts replaced by its placeholder, and with `cuts` (a summary:
        the record cut quotes short) every cut of one too. A file's own text is never a cut: another item's
        words that happen to be followed by `…` stay."""
        if self._pattern is None or not any(needle in text for needle in self._needles):
            return text
        groups = self._forms
        placeholders = self._placeholders
        text = self._pattern.sub(lambda m: placeholders[groups[(m.lastindex or 1) - 1]], text)
        return self._cut(text) if cuts and ELLIPSIS in text else text

    def _cut(self, text: str) -> str:
        """A summary's cut of a text: a prefix of at least MIN_CUT_CHARS characters, at a word's start, then `…`."""
        end = text.find(ELLIPSIS)
        while end >= 0:
            found = self._cut_start(text, end)
            if found is None:
                end = text.find(ELLIPSIS, end + 1)
                continue
            placeholder, start = found
            text = text[:start] + placeholder + text[end + 1 :]
            end = text.find(ELLIPSIS, start + len(placeholder))
        return text

    def _cut_start(self, text: str, end: int) -> tuple[str, int] | None:
        best: tuple[str, int] | None = None
        for form, placeholder in self._cuts.items():
            needle = form[:MIN_CUT_CHARS]
            start = text.find(needle, max(0, end - len(form)), end)
            while start >= 0:
                if text[start:end] == form[: end - start] and not (start and _is_word(text[start - 1])):
                    if best is None or start < best[1]:
                        best = (placeholder, start)
                    break
                start = text.find(needle, start + 1, end)
        return best

    # ------------------------------------------------------------------ the audit log's lines
    def audit_line(self, line: str) -> str:
        """An audit log line (with or without its newline): its summary redacted when its FILE (or the file it
        moved from) is covered; any other line as it is. A line that does not parse is redacted whole when one of
        its fields names a covered file (a torn line's FILE cannot be trusted, nor that of a line run into the
        one a crash tore, whose fields have moved), else left as it is."""
        parts = line.split(_SEPARATOR, 5)
        parsed = AuditLine.parse(line if line.endswith("\n") else line + "\n") if len(parts) == 6 else None
        if parsed is None:
            return self.text(line) if any(self.covers(part) for part in parts) else line
        old = moved_from(parsed)
        if not (self.covers(parts[2]) or (old is not None and self.covers(old))):
            return line
        return _SEPARATOR.join([*parts[:5], self.text(parts[5])])

    def audit_log(self, data: bytes) -> RedactedLog:
        """The bytes of an audit log with `audit_line` applied to each line that holds a needle (found by a bytes
        search: a long log costs a scan, not a loop over its lines); every other byte as it was."""
        if not self:
            return RedactedLog(data, 0)
        starts: set[int] = set()
        for needle in self._needle_bytes:
            found = data.find(needle)
            while found >= 0:
                starts.add(data.rfind(b"\n", 0, found) + 1)
                found = data.find(needle, found + len(needle))
        if not starts:
            return RedactedLog(data, 0)
        out: list[bytes] = []
        spans: list[tuple[int, int, int]] = []
        done = gained = 0
        for start in sorted(starts):
            end = data.find(b"\n", start) + 1 or len(data)
            line = data[start:end].decode("utf-8", "surrogateescape")
            redacted = self.audit_line(line).encode("utf-8", "surrogateescape")
            if redacted == data[start:end]:
                continue
            out += [data[done:start], redacted]
            gained += len(redacted) - (end - start)
            spans.append((start, end, gained))
            done = end
        if not spans:
            return RedactedLog(data, 0)
        out.append(data[done:])
        return RedactedLog(b"".join(out), len(spans), spans)

    def log_bytes(self, data: bytes) -> tuple[bytes, int]:
        """`audit_log` as AuditLog.redact takes it: the new bytes, and how many lines changed."""
        redacted = self.audit_log(data)
        return redacted.data, redacted.changed

    # ------------------------------------------------------------------ other files and commit messages
    def file_bytes(self, data: bytes) -> bytes:
        """A covered file's bytes (a day log, MEMORY.md, a memory's JSON) with the item's texts replaced."""
        if not self or not any(needle in data for needle in self._needle_bytes):
            return data
        text = data.decode("utf-8", "surrogateescape")
        redacted = self.text(text, cuts=False)
        return data if redacted == text else redacted.encode("utf-8", "surrogateescape")

    def message(self, message: str) -> str:
        """A commit message (governance/history.py's format): each block about a covered file redacted whole (its
        summary, and the trigger taken from it), and the subject too when it is the first block's summary."""
        paragraphs = message.split("\n\n")
        covered = [bool((m := _BLOCK.match(p)) and self.covers(m.group(1))) for p in paragraphs]
        if len(paragraphs) > 1 and paragraphs[0].startswith("[BATCH] "):
            covered[0] = covered[1]  # `[BATCH] N changes — ` the first block's summary, cut
        if not any(covered):
            return message
        return "\n\n".join(self.text(p) if hit else p for p, hit in zip(paragraphs, covered, strict=True))


def _forms(text: str) -> set[str]:
    """A text as files and summaries hold it: raw, JSON-escaped (as pydantic and json.dumps write it), quoted."""
    raw = text.strip()
    forms = {raw, *_quoted_forms(text)}
    for escaped in (json.dumps(raw, ensure_ascii=False)[1:-1], json.dumps(raw)[1:-1]):
        forms.add(escaped)
    return {form for form in forms if form}


def _quoted_forms(text: str) -> set[str]:
    """As `quoted` (audit/service.py) writes it into a summary, and as the log's field cleaning leaves it."""
    flat = " ".join(text.split())
    return {form for form in (flat, _UNPRINTABLE.sub(" ", flat).strip()) if form}


def _bounded(form: str) -> str:
    """A form as a pattern that does not match inside a longer word."""
    pattern = re.escape(form)
    if _is_word(form[0]):
        pattern = r"(?<!\w)" + pattern
    if _is_word(form[-1]):
        pattern += r"(?!\w)"
    return pattern


def _is_word(char: str) -> bool:
    return char.isalnum() or char == "_"
