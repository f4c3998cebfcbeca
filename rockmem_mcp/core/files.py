"""MEMORY.md, the core memory file: its format (seed 004 §4), and reading and changing it safely.

The file is markdown a person edits by hand: a preamble (title, comments), then `## ` blocks, each one of
BLOCKS at most once, in any order. Inside a block, lines are kept exactly as written; HTML comments (the
seed's `<!-- ~500 tokens … -->` guidance) and blank lines are layout, every other line is content. Critical
Facts holds list lines only (`- fact` or `* fact`). Anything else is malformed: `parse` raises CoreFormatError
naming each problem and its line, and nothing here ever rewrites a file it could not parse.

A change is read-modify-write under an exclusive `flock` on `meta/core.lock`, replacing the file atomically and
durably, so two processes never interleave; the version a reader was given (a hash of the bytes) tells whether
the file changed since.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from rockmem_mcp.errors import RockmemError
from rockmem_mcp.storage.atomic import atomic_write, remove_durably
from rockmem_mcp.storage.edited_files import held
from rockmem_mcp.storage.no_follow import read_bytes_and_stat

BLOCKS = ("Identity", "Active Context", "Persona", "Critical Facts")
LIST_BLOCK = "Critical Facts"
_BLOCK_KEYS = {" ".join(name.lower().split()): name for name in BLOCKS}
_LIST_LINE = re.compile(r"^\s*[-*] +\S")
_HEADING = re.compile(r"^##(?!#)\s*(.*?)\s*#*\s*$")

# What a new MEMORY.md starts as: the seed's layout, its guidance kept as comments (they cost no tokens: the
# context an agent is given leaves comments out).
TEMPLATE = """\
# MEMORY.md — Core Memory
<!-- Always loaded at the start of a session. Keep each block within its token cap; summarise or prune first. -->

## Identity
<!-- Who is the user? What matters most about them? -->

## Active Context
<!-- What's happening right now? Current projects, open decisions. -->

## Persona
<!-- How should I behave with this user? -->

## Critical Facts
<!-- Things I must never forget; one "- " line each. These are pinned. -->
"""


class CoreFormatError(RockmemError):
    """MEMORY.md cannot be read as core memory: the message lists each problem with its line number."""

    SHOWN = 5  # problems named in the message (a pasted file could have thousands)

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        about_blocks = any("block" in problem for problem in problems)
        blocks = f". The blocks are {', '.join(f'## {b}' for b in BLOCKS)} (each at most once)" if about_blocks else ""
        named = "; ".join(problems[: self.SHOWN])
        more = f"; and {len(problems) - self.SHOWN:,} more" if len(problems) > self.SHOWN else ""
        super().__init__(f"MEMORY.md is malformed and was left as it is: {named}{more}{blocks}; fix it by hand")


class CoreUnreadableError(CoreFormatError):
    """MEMORY.md exists but cannot be opened as a file (a link, a folder, a FIFO, no permission)."""

    def __init__(self, cause: OSError) -> None:
        self.cause = cause
        self.problems = [str(cause)]
        RockmemError.__init__(self, f"MEMORY.md cannot be read and was left as it is: {cause}")


def is_layout(line: str) -> bool:
    """A blank line or a whole-line HTML comment: kept in the file, no content, no tokens."""
    text = line.strip()
    return not text or (text.startswith("<!--") and text.endswith("-->"))


def block_name(text: str) -> str | None:
    """The block `text` names (any case and spacing), or None."""
    return _BLOCK_KEYS.get(" ".join(text.lower().split()))


def is_heading(line: str) -> bool:
    """A `## ` heading line: it starts a block."""
    return _HEADING.match(line) is not None


def is_list_line(line: str) -> bool:
    return _LIST_LINE.match(line) is not None


def list_item(line: str) -> str:
    """The text of a list line without its marker."""
    return re.sub(r"^\s*[-*] +", "", line).strip()


@dataclass
class Block:
    name: str
    heading: str  # the heading line as written
    lines: list[str] = field(default_factory=list)  # as written, layout included

    @property
    def content(self) -> list[str]:
        """The block's content lines (no blank lines, no comments): what recall shows and edits address."""
        return [line for line in self.lines if not is_layout(line)]


@dataclass
class CoreDocument:
    preamble: list[str] = field(default_factory=list)
    blocks: list[Block] = field(default_factory=list)  # in file order

    def copy(self) -> CoreDocument:
        """A copy an edit may change (lines are strings: copying the lists is enough)."""
        return CoreDocument(list(self.preamble), [Block(b.name, b.heading, list(b.lines)) for b in self.blocks])

    def block(self, name: str) -> Block | None:
        return next((b for b in self.blocks if b.name == name), None)

    def render(self) -> str:
        lines = list(self.preamble)
        for block in self.blocks:
            lines += [block.heading, *block.lines]
        return "\n".join(lines).rstrip("\n") + "\n"


def split_lines(text: str) -> list[str]:
    """Lines split at line feeds only, a CR before one dropped: form feeds, U+2028 and the like stay inside
    their line (str.splitlines would break it in two, and the next write would keep it broken)."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def parse(text: str) -> CoreDocument:
    """The document in `text`; CoreFormatError listing every problem (unknown or repeated block, a Critical
    Facts line that is not a list line, an unclosed comment)."""
    doc = CoreDocument()
    problems: list[str] = []
    current: Block | None = None
    in_comment = 0  # the line an open comment started on
    for number, line in enumerate(split_lines(text), start=1):
        if in_comment:
            in_comment = 0 if "-->" in line else in_comment
        elif line.lstrip().startswith("<!--") and "-->" not in line:
            in_comment = number  # a comment over several lines: layout, kept as written
        elif heading := _HEADING.match(line):
            name = block_name(heading.group(1))
            if name is None:
                problems.append(f"line {number}: unknown block {heading.group(1)!r}")
                current = Block("", line)  # its lines are reported with it, not checked as another block's
            elif doc.block(name) is not None:
                problems.append(f"line {number}: block {name!r} appears a second time")
            else:
                current = Block(name, line)
                doc.blocks.append(current)
                continue
        elif current is not None and current.name == LIST_BLOCK and not is_layout(line) and not is_list_line(line):
            problems.append(f"line {number}: Critical Facts holds list lines ('- fact') only, got {line[:60]!r}")
        (current.lines if current is not None else doc.preamble).append(line)
    if in_comment:
        problems.append(f"line {in_comment}: an HTML comment (<!--) is never closed (-->)")
    if problems:
        raise CoreFormatError(problems)
    # Comments spanning lines are layout too, but a line of one is not a comment by itself: keep them out of
    # the content by folding each into one logical layout line.
    for block in doc.blocks:
        block.lines = _fold_comments(block.lines)
    return doc


def _fold_comments(lines: list[str]) -> list[str]:
    folded: list[str] = []
    pending: list[str] = []
    for line in lines:
        if pending or (line.lstrip().startswith("<!--") and "-->" not in line):
            pending.append(line)
            if "-->" in line:
                folded.append("\n".join(pending))
                pending = []
        else:
            folded.append(line)
    return folded


Identity = tuple[int, int, int, int]  # inode, mtime, ctime, size


def _identity(info: os.stat_result) -> Identity:
    # ctime too: a hand edit in place that keeps the size and sets the old mtime back still changes it.
    return (info.st_ino, info.st_mtime_ns, info.st_ctime_ns, info.st_size)


class CoreFile:
    """MEMORY.md on disk: read by identity (a hand edit is seen on the next read), changed under a lock."""

    on_disk = True

    def __init__(self, path: Path, lock_dir: Path) -> None:
        self.path = path
        self._lock_path = lock_dir / "core.lock"
        self._cached: tuple[Identity | None, bytes] | None = None
        self.on_write: list[Callable[[Path, bytes | None], None]] = []  # told of each write (critical-file checksums)

    def identity(self) -> Identity | None:
        """None when there is no file: a changed identity means a changed file."""
        try:
            return _identity(os.stat(self.path, follow_symlinks=False))
        except FileNotFoundError:
            return None

    def read(self, fresh: bool = False) -> bytes:
        """The file's bytes (b"" when there is none); re-read only when its identity changed, or with `fresh`
        (an edit under the lock reads the disk itself). A link, folder or FIFO by its name raises OSError."""
        if not fresh:
            identity = self.identity()
            if self._cached is not None and self._cached[0] == identity:
                return self._cached[1]
        try:
            data, info = read_bytes_and_stat(self.path)
        except FileNotFoundError:
            self._cached = (None, b"")
            return b""
        self._cached = (_identity(info), data)  # the identity of the file these bytes came from
        return data

    def locked(self) -> contextlib.AbstractContextManager[None]:
        """Hold the core lock (other processes' changes wait)."""
        return held(self._lock_path)

    def write(self, data: bytes) -> None:
        """Replace the file atomically and durably (call under `locked`). The next read reads it again: a hand
        edit may land right after the rename, and a stat now could not tell it from ours."""
        atomic_write(self.path, data)
        self._cached = None
        for listener in self.on_write:
            listener(self.path, data)

    def remove(self) -> None:
        """Remove the file durably (call under `locked`): undoes the write that created it."""
        remove_durably(self.path)
        self._cached = None
        for listener in self.on_write:
            listener(self.path, None)
