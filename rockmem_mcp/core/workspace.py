"""Workspace files (seed 003 layer 3): the user's AGENTS.md, SOUL.md, USER.md and HEARTBEAT.md in the data home,
served as resources, searched with BM25 beside memories, and loaded at a session's start within a token budget.

Search covers MEMORY.md (core memory) too, as seed 003 searches every workspace file. Each file is cut into
sections at its markdown headings (long sections into parts of at most MAX_SECTION_CHARS), and the sections
of all files form one small BM25 index, rebuilt when a file's identity changed: a search costs one `lstat`
per file while nothing changed, and a hand edit is found by the next search.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass

from rockmem_mcp.audit.service import Audit, line_changes
from rockmem_mcp.config import Settings
from rockmem_mcp.core.shapes import WorkspaceFileInfo, WorkspaceListing
from rockmem_mcp.core.workspace_files import WORKSPACE_FILES, WorkspaceFile, WorkspaceFiles
from rockmem_mcp.errors import InvalidInputError, NotFoundError
from rockmem_mcp.models import WorkspaceHit, check_text
from rockmem_mcp.search.bm25 import BM25Index
from rockmem_mcp.search.tokenizer import tokenize
from rockmem_mcp.storage.pg import is_database_url
from rockmem_mcp.tokens import estimate_tokens

CORE_FILE = "MEMORY.md"  # searched with the workspace files; served and edited as core memory, not here
SEARCHED_FILES = (*WORKSPACE_FILES, CORE_FILE)
MAX_SECTION_CHARS = 1_500
SEARCH_HITS = 5  # sections a memory search adds to its reply (each up to MAX_SECTION_CHARS)
MIN_PIECE_CHARS = 200  # a long line starts in the current part when at least this much room is left
URI_PREFIX = "rockmem://workspace/"

_HEADING = re.compile(r" {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*")
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})(.*)")


def without_comments(text: str) -> str:
    """`text` without its HTML comments, `<!--` to the next `-->`; an unclosed `<!--` ends the text there.

    A scan with str.find, linear in the text: the regex `<!--.*?-->` retried every unclosed `<!--` to the end,
    so a 96 KB file of them took seconds."""
    kept: list[str] = []
    at = 0
    while (start := text.find("<!--", at)) != -1:
        kept.append(text[at:start])
        end = text.find("-->", start + 4)
        if end == -1:
            return "".join(kept)
        at = end + 3
    kept.append(text[at:])
    return "".join(kept)


@dataclass(frozen=True)
class Section:
    """A part of a workspace file: under one heading, at most MAX_SECTION_CHARS."""

    file: str
    heading: str
    line: int  # 1-based, of the part's first line
    text: str
    continued: bool = False  # a later part of a long section: its text does not start with the heading

    def document(self) -> str:
        """What the index reads: the text, and the heading for a part that does not show it."""
        return f"{self.heading}\n{self.text}" if self.continued else self.text


def sections(file: str, text: str, max_chars: int = MAX_SECTION_CHARS) -> list[Section]:
    """`text` cut at its ATX headings (`#` … `######`, not inside fenced code), each section into parts of at
    most `max_chars` at paragraph, then line, then word boundaries. Blank sections are left out."""
    found: list[Section] = []
    heading, body = "", []  # the current section's heading and its (line number, line) pairs
    fence: str | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        fenced = _FENCE.fullmatch(line)
        if fence is not None:
            if fenced and fenced.group(1)[0] == fence[0] and len(fenced.group(1)) >= len(fence):
                fence = None if not fenced.group(2).strip() else fence
        elif fenced:
            fence = fenced.group(1)
        elif match := _HEADING.fullmatch(line):
            found += _parts(file, heading, body, max_chars)
            heading, body = (match.group(2) or "").strip(), []
        body.append((number, line))
    return found + _parts(file, heading, body, max_chars)


def _parts(file: str, heading: str, body: list[tuple[int, str]], max_chars: int) -> list[Section]:
    """One section's lines packed into parts of at most `max_chars`: a part that must end is cut at its last
    paragraph break when that keeps at least half of it, else after its last line; a line too long for any part
    fills the rest of the current one and goes on in the next (cut after a space where there is one)."""
    parts: list[Section] = []
    current: list[tuple[int, str, str]] = []  # (line number, text, separator before it)

    def size(items: list[tuple[int, str, str]]) -> int:
        return sum(len(text) for _, text, _ in items) + sum(len(separator) for _, _, separator in items[1:])

    def close(items: list[tuple[int, str, str]]) -> None:
        text = items[0][1] + "".join(separator + text for _, text, separator in items[1:])
        parts.append(Section(file, heading, items[0][0], text, continued=bool(parts)))

    separator = "\n"
    for number, line in body:
        if not line.strip():
            separator = "\n\n"
            continue
        while True:
            room = max_chars - size(current) - (len(separator) if current else 0)
            if len(line) <= room:
                current.append((number, line, separator))
                break
            if len(line) > max_chars and room >= MIN_PIECE_CHARS:
                head, line = _cut_line(line, room)
                close([*current, (number, head, separator)])
                current, separator = [], "\n"
                continue
            breaks = [k for k in range(1, len(current)) if current[k][2] != "\n"]
            k = breaks[-1] if breaks and size(current[: breaks[-1]]) >= max_chars // 2 else len(current)
            close(current[:k])
            current = current[k:]
        separator = "\n"
    if current:
        close(current)
    return parts


def _cut_line(line: str, room: int) -> tuple[str, str]:
    """`line` cut in two, the first at most `room` characters, after the last space in it if there is one."""
    cut = line.rfind(" ", 0, room + 1)
    cut = cut + 1 if cut > 0 else room
    return line[:cut].rstrip(), line[cut:]


def _info(file: WorkspaceFile) -> WorkspaceFileInfo:
    return WorkspaceFileInfo(
        name=file.name,
        uri=URI_PREFIX + file.name,
        bytes=file.size,
        tokens=estimate_tokens(file.text),
        version=file.version,
    )


def _cost(lines: Sequence[str]) -> int:
    """Tokens of `lines` joined by line breaks, counted high: each line with its break, as a wrapper puts them."""
    return sum(estimate_tokens(line) + 1 for line in lines)


def _prefix_within(line: str, tokens: int) -> str:
    """The longest run of whole words from the start of `line` that costs at most `tokens`."""
    words = line.split(" ")
    low, high = 0, len(words)  # the cost of the first n words never falls as n grows: search for n
    while low < high:
        middle = (low + high + 1) // 2
        if estimate_tokens(" ".join(words[:middle])) <= tokens:
            low = middle
        else:
            high = middle - 1
    return " ".join(words[:low]).rstrip()


FilesSeen = tuple[tuple[str, tuple[int, int, int]], ...]


def _versions(files: Sequence[WorkspaceFile]) -> FilesSeen:
    """What a result derived from `files` depends on: which files, and each one's identity on disk."""
    return tuple((file.name, file.identity) for file in files)


class Workspace:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        paths = {name: settings.home / name for name in WORKSPACE_FILES}
        if not is_database_url(settings.store):  # a shared core is a row in the store, reached as core memory
            paths[CORE_FILE] = settings.core_file
        self.files_on_disk = WorkspaceFiles(paths, settings.meta_dir / "workspace.lock")
        self.audit = Audit(settings)
        self._lock = threading.Lock()
        self._indexed: FilesSeen | None = None  # the files the index was built from
        self._index = BM25Index()
        self._sections: list[Section] = []
        self._session: tuple[FilesSeen, list[str]] | None = None  # session_lines() and the files they are of

    # ------------------------------------------------------------------ reading
    def _present(self, names: Sequence[str]) -> list[WorkspaceFile]:
        """The files of `names` that exist and can be read, in that order (a refused one is logged, left out)."""
        return [
            file
            for name in names
            if name in self.files_on_disk.paths and (file := self.files_on_disk.readable(name)) is not None
        ]  # a shared core is not among the files (it is a row in the store)

    def files(self) -> WorkspaceListing:
        """Which workspace files are in the home, with their size in tokens and their version."""
        present = self._present(WORKSPACE_FILES)
        names = {file.name for file in present}
        return WorkspaceListing(
            files=[_info(file) for file in present], missing=[name for name in WORKSPACE_FILES if name not in names]
        )

    def read(self, name: str) -> WorkspaceFile:
        """One workspace file as it is now; NotFoundError for another name or a file not in the home."""
        self._check_name(name, NotFoundError)
        file = self.files_on_disk.read(name)  # a link or FIFO raises its refusal, which says what it is
        if file is None:
            raise NotFoundError(
                f"{name} is not in the data home; place it at {self.files_on_disk.paths[name]} "
                "(or write it with write_workspace_file, in the 'workspace' toolset)"
            )
        return file

    @staticmethod
    def _check_name(name: str, error: type[Exception]) -> None:
        if name not in WORKSPACE_FILES:
            core = f" ({CORE_FILE} is core memory: rockmem://core)" if name == CORE_FILE else ""
            raise error(f"{name!r} is not a workspace file{core}; the workspace files are {', '.join(WORKSPACE_FILES)}")

    # ------------------------------------------------------------------ search
    def search(self, query: str, limit: int = SEARCH_HITS) -> list[WorkspaceHit]:
        """The sections of the workspace files and MEMORY.md best matching `query` (BM25), at most `limit`."""
        tokens = tokenize(query)
        if not tokens or limit < 1:
            return []
        present = self._present(SEARCHED_FILES)
        with self._lock:
            key = _versions(present)
            if key != self._indexed:
                self._sections = [part for file in present for part in sections(file.name, file.text)]
                index = BM25Index()
                index.add_many([(str(slot), tokenize(s.document()), False) for slot, s in enumerate(self._sections)])
                self._index, self._indexed = index, key
            hits = self._index.search(tokens, limit=limit)
            found = [self._sections[slot] for slot in hits.slots.tolist()]
        return [
            WorkspaceHit(file=s.file, heading=s.heading, line=s.line, text=s.text, score=round(score, 4))
            for s, score in zip(found, hits.scores.tolist(), strict=True)
        ]

    # ------------------------------------------------------------------ session start
    def session_lines(self) -> list[str]:
        """The workspace files for a session's start, AGENTS.md, SOUL.md, USER.md, HEARTBEAT.md in that order,
        each under "From NAME:", HTML comments and blank lines left out, within `workspace_tokens` in all (as
        estimate_tokens counts the lines joined by line breaks). A file that does not fit whole is cut and says
        so. Lines are raw text: wrap them before use."""
        present = self._present(WORKSPACE_FILES)
        key = _versions(present)
        cached = self._session
        if cached is not None and cached[0] == key:
            return list(cached[1])
        bodies = []
        for file in present:
            body = [line.rstrip() for line in without_comments(file.text).splitlines() if line.strip()]
            if body:
                bodies.append((file.name, body))
        # The least each file can take: whole, or its heading line and cut note. The first files whose least
        # fits are loaded (a budget too small for the notes leaves the last files out), each keeping room for
        # the least of those after it, so earlier files come first and a cut is always said.
        least = [min(_cost(_cut_file(name, [])), _cost(_whole_file(name, body))) for name, body in bodies]
        loaded, left = 0, self.settings.workspace_tokens
        while loaded < len(bodies) and sum(least[: loaded + 1]) <= left:
            loaded += 1
        lines: list[str] = []
        for i, (name, body) in enumerate(bodies[:loaded]):
            taken = _fit_file(name, body, left - sum(least[i + 1 : loaded]))
            lines += taken
            left -= _cost(taken)
        self._session = (key, lines)
        return list(lines)

    # ------------------------------------------------------------------ writing
    def write(self, name: str, content: str, version: str | None = None) -> WorkspaceFileInfo:
        """Write one workspace file (atomic, durable); with `version`, only if it is still the one read."""
        self._check_name(name, InvalidInputError)
        check_text(
            content,
            "content",
            self.settings.max_content_bytes,
            "ROCKMEM_MAX_CONTENT_BYTES",
            "Workspace files are read at every session start: keep them short.",
        )
        if version is not None and not isinstance(version, str):
            raise InvalidInputError(f"version must be text, got {type(version).__name__}")
        data = content.encode("utf-8")
        path = self.files_on_disk.paths[name]

        def audited(previous: bytes | None) -> None:  # under the file's lock, once it is in place
            if previous is None:
                self.audit.record("CREATE", path, f"{name} written ({len(data):,} bytes)")
            else:
                old = previous.decode("utf-8-sig", errors="replace")
                self.audit.record("EDIT", path, f"{name} rewritten: {line_changes(old, content)}, {len(data):,} bytes")

        return _info(self.files_on_disk.write(name, data, version or None, then=audited))


def _whole_file(name: str, body: list[str]) -> list[str]:
    return [f"From {name}:", *body]


def _cut_file(name: str, taken: list[str]) -> list[str]:
    return [f"From {name}:", *taken, f"… (cut: read {URI_PREFIX}{name})"]


def _fit_file(name: str, body: list[str], tokens: int) -> list[str]:
    """The file's lines under its heading line within `tokens`: whole, or as many lines as fit (the last one
    cut at a word) and a note saying where the rest is, or nothing when not even the note fits."""
    whole = _whole_file(name, body)
    if _cost(whole) <= tokens:
        return whole
    room = tokens - _cost(_cut_file(name, []))
    if room < 0:
        return []
    taken: list[str] = []
    for line in body:
        cost = _cost([line])
        if cost > room:
            prefix = _prefix_within(line, room - 2)  # and " …" (1) and its line break (1)
            if prefix:
                taken.append(prefix + " …")
            break
        taken.append(line)
        room -= cost
    return _cut_file(name, taken)
