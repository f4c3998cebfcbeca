"""Core memory (seed 004 §4): MEMORY.md in the home, always loaded, edited by the agent and by hand.

Four blocks — Identity, Active Context, Persona, Critical Facts — each capped in tokens (500, 1,000, 500, 1,000)
and 3,000 in all, as `rockmem_mcp.tokens.estimate_tokens` counts them. A block's size is its content lines'; the
whole is the context a session is given (the four headings and their content; comments and the title cost
nothing because they are left out). An edit that would take a block or the whole over its cap is refused with
the overflow, unless it makes the core no larger (so an over-cap file can always be pruned). Edits name the
version they read: a file changed since (by another agent, another process or a hand edit) refuses the edit.

Critical Facts lines are pinned: each is mirrored by a pinned memory (category `core/critical-facts`, the vault
of the salience model), so search finds it and nothing decays, archives or merges it; a line removed from the
block archives its mirror. The mirror follows the file after every edit, at start and when a hand edit is first
read. Recall leaves out memories core already quotes (a mirror, a memory whose text is a core line, or one whose
`[id]` a core line names).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import re
import threading
from dataclasses import dataclass
from typing import Literal, get_args

from rockmem_mcp.audit.service import Audit, quoted
from rockmem_mcp.config import Settings
from rockmem_mcp.core.files import (
    BLOCKS,
    LIST_BLOCK,
    TEMPLATE,
    Block,
    CoreDocument,
    CoreFile,
    CoreFormatError,
    CoreUnreadableError,
    block_name,
    is_heading,
    is_layout,
    is_list_line,
    list_item,
    parse,
    split_lines,
)
from rockmem_mcp.core.shapes import CoreBlock, CoreMemoryView
from rockmem_mcp.errors import ChangedSinceReadError, InvalidInputError, RockmemError
from rockmem_mcp.memory.service import MemoryService
from rockmem_mcp.models import MemoryEntry, check_text
from rockmem_mcp.storage.edited_files import version_of
from rockmem_mcp.storage.pg import is_database_url
from rockmem_mcp.text import fold
from rockmem_mcp.tokens import estimate_tokens

log = logging.getLogger(__name__)

EditAction = Literal["append", "replace_line", "remove_line", "replace_block"]
EDIT_ACTIONS: tuple[str, ...] = get_args(EditAction)
VAULT_CATEGORY = "core/critical-facts"
VAULT_SOURCE = {"source": "MEMORY.md"}  # the metadata that marks a mirror
QUOTED_ID = re.compile(r"\[([0-9a-f]{12})\]")  # how a line names a memory: "- [id] (category): …"


@dataclass(frozen=True)
class _Measured:
    """A document's content lines and sizes, counted once per version (counting is most of a read's cost)."""

    content: dict[str, list[str]]  # block -> content lines, stripped
    tokens: dict[str, int]  # block -> its content's tokens
    total: int  # the context a session is given: headings and content

    @classmethod
    def of(cls, doc: CoreDocument, known: _Measured | None = None, changed: str | None = None) -> _Measured:
        """`known`: the same document's sizes before `changed` (the one block an edit touched) changed."""
        content = {name: _content(doc, name) for name in BLOCKS}
        tokens = {
            name: known.tokens[name]
            if known is not None and name != changed
            else estimate_tokens("\n".join(content[name]))
            for name in BLOCKS
        }
        # Stripped, non-blank lines joined by line breaks: each break is one token and merges with nothing, so
        # the context's estimate is its parts' (tested equal to estimating context_text).
        filled = [name for name in BLOCKS if content[name]]
        total = sum(estimate_tokens(f"## {name}") + 1 + tokens[name] for name in filled) + max(len(filled) - 1, 0)
        return cls(content, tokens, total)


@dataclass(frozen=True)
class _Parsed:
    version: str
    doc: CoreDocument | None  # None: malformed
    error: CoreFormatError | None
    crlf: bool = False
    bom: bool = False
    measured: _Measured | None = None
    data: bytes = b""  # the bytes parsed (identity tells the file is unchanged)

    # What core quotes, worked out on first use (by recall), not by every edit.
    @functools.cached_property
    def _lines(self) -> list[str]:
        measured = self.measured
        return [line for name in BLOCKS for line in measured.content[name]] if measured is not None else []

    @functools.cached_property
    def quoted_ids(self) -> frozenset[str]:
        return frozenset(m for line in self._lines for m in QUOTED_ID.findall(line))

    @functools.cached_property
    def quoted_texts(self) -> frozenset[str]:
        return frozenset(_key(list_item(line) if is_list_line(line) else line) for line in self._lines)


def core_document(settings: Settings) -> CoreFile:
    """MEMORY.md: the home's file, or a row of the database replicas share (no file to edit by hand)."""
    if is_database_url(settings.store):
        from rockmem_mcp.core.postgres import PgCoreDocument
        from rockmem_mcp.storage.pg import shared_database

        db = shared_database(str(settings.store), "stores", settings.store_schema)
        return PgCoreDocument(db, settings.core_file)  # type: ignore[return-value]
    return CoreFile(settings.core_file, settings.meta_dir)


class CoreMemory:
    def __init__(self, settings: Settings, memory: MemoryService | None = None) -> None:
        """`memory`: the store Critical Facts are pinned in (None: no mirror, e.g. a read-only tool)."""
        self.settings = settings
        self.memory = memory
        self.file = core_document(settings)
        self.audit = Audit(settings)
        self.caps = {
            "Identity": settings.core_identity_tokens,
            "Active Context": settings.core_active_context_tokens,
            "Persona": settings.core_persona_tokens,
            "Critical Facts": settings.core_critical_facts_tokens,
        }
        self._parsed: _Parsed | None = None
        self._synced_version: str | None = None
        self._lock = threading.Lock()

    # Reading

    def _current(self) -> _Parsed:
        try:
            data = self.file.read()  # the same bytes object while the file is unchanged: no hashing then
        except OSError as exc:  # a link, folder or FIFO named MEMORY.md: reported like a malformed file
            return _Parsed("", None, CoreUnreadableError(exc))
        known = self._parsed
        if known is not None and known.data is data:
            return known
        if known is not None and known.version == version_of(data):  # the same bytes, read again
            self._parsed = known = dataclasses.replace(known, data=data)  # so the next read need not hash
            return known
        parsed = _parse_bytes(data)
        self._parsed = parsed
        return parsed

    def follow_hand_edit(self) -> None:
        """Pin a hand edit's Critical Facts now (search calls it: a line typed into the file is found)."""
        parsed = self._current()
        if parsed.doc is not None:
            self._follow_hand_edit(parsed)

    def read(self, block: str | None = None) -> CoreMemoryView:
        """The core (or one block) with its version; a malformed file raises CoreFormatError."""
        parsed = self._current()
        if parsed.doc is None:
            assert parsed.error is not None
            raise parsed.error
        self._follow_hand_edit(parsed)
        only = _block_argument(block) if block else None
        assert parsed.measured is not None
        return self._view(parsed.version, parsed.measured, only)

    def _view(self, version: str, measured: _Measured, only: str | None = None) -> CoreMemoryView:
        blocks = [
            CoreBlock(name=name, tokens=measured.tokens[name], cap=self.caps[name], lines=measured.content[name])
            for name in BLOCKS
            if only in (None, name)
        ]
        total = measured.total
        over = [f"{b.name} is {b.tokens:,} tokens, over its cap of {b.cap:,}" for b in blocks if b.tokens > b.cap]
        if total > self.settings.core_total_tokens and only is None:
            over.append(f"the whole core is {total:,} tokens, over its cap of {self.settings.core_total_tokens:,}")
        text = "\n".join(
            f"## {b.name} ({b.tokens:,}/{b.cap:,} tokens)\n"
            + ("\n".join(f"{n}. {line.strip()}" for n, line in enumerate(b.lines, start=1)) or "(empty)")
            for b in blocks
        )
        return CoreMemoryView(
            version=version,
            blocks=blocks,
            tokens=total,
            cap=self.settings.core_total_tokens,
            over_cap=over,
            text=text,
        )

    def context_lines(self) -> list[str]:
        """What a session starts with: a heading line, then each non-empty block's heading and content lines
        (comments left out); a malformed file becomes one line saying so. [] when there is no content."""
        parsed = self._current()
        if parsed.doc is None:
            assert parsed.error is not None
            return [f"Core memory (MEMORY.md) was not loaded: {parsed.error} (rockmem-mcp doctor shows it)."]
        self._follow_hand_edit(parsed)
        assert parsed.measured is not None
        content = parsed.measured.content
        body = [line for name in BLOCKS if content[name] for line in (f"## {name}", *content[name])]
        if not body:
            return []
        if parsed.measured.total > self.settings.core_total_tokens:  # a hand edit past the cap: cut to it
            body = _within(body, self.settings.core_total_tokens)
            body.append("… (core memory is over its cap and was cut here: read the rest in rockmem://core)")
        return [f"Core memory (MEMORY.md, version {parsed.version}; always loaded, edit it with core_memory):", *body]

    def quoted_count(self) -> int:
        """At most how many memories core quotes (recall asks for that many more, so quoted ones leave room)."""
        parsed = self._current()
        return len(parsed.quoted_ids) + len(parsed.quoted_texts)

    def quotes(self, entry_id: str, content: str) -> bool:
        """Whether core already shows this memory: its `[id]` in a line, or its text as a line."""
        parsed = self._current()
        return entry_id in parsed.quoted_ids or _key(content) in parsed.quoted_texts

    def read_error(self) -> CoreFormatError | None:
        """Why the file cannot be read as core memory, or None."""
        return self._current().error

    def problems(self) -> list[str]:
        """Why the file is malformed or over a cap ([] when fine): for doctor."""
        parsed = self._current()
        if parsed.doc is None:
            assert parsed.error is not None
            return list(parsed.error.problems)
        assert parsed.measured is not None
        return self._view(parsed.version, parsed.measured).over_cap

    # Editing

    def edit(
        self,
        action: str,
        block: str,
        version: str,
        text: str | None = None,
        line: int | None = None,
        audit_as: tuple[str, str] | None = None,
    ) -> CoreMemoryView:
        """Change one block (`action`: append, replace_line, remove_line, replace_block) of the core read at
        `version`; refused if the file changed since, if the result would pass a cap, or if it is malformed.
        `audit_as`: the audit line's action and what it says first (a forget's ARCHIVE or DELETE), instead of
        EDIT."""
        if action not in EDIT_ACTIONS:
            raise InvalidInputError(f"action must be read or one of {', '.join(EDIT_ACTIONS)}; got {action!r}")
        name = _block_argument(block)
        if not version:
            raise InvalidInputError("version is required: read core memory first and pass the version it gives")
        new_lines = _edit_lines(name, action, text, self.settings.max_content_bytes)
        with self._lock, self.file.locked():
            data = self.file.read(fresh=True)  # the disk itself: a cache could be a moment behind another writer
            current = version_of(data)
            if version.strip() != current:
                raise ChangedSinceReadError(
                    f"core memory changed since you read it (you read version {version!r}, it is now {current!r}): "
                    "read it again and redo your edit on what it says now"
                )
            known = self._parsed
            if not data:  # no file yet: the first edit writes the seed's layout
                known = _parse_bytes(TEMPLATE.encode())
            elif known is None or known.version != current:
                known = _parse_bytes(data)
            if known.doc is None:
                assert known.error is not None
                raise known.error
            doc = known.doc.copy()  # the cached one stays as read until the write succeeds
            assert known.measured is not None
            before = self._view(current, known.measured)
            target = doc.block(name)
            if target is None:  # a block the file lacks is added in the seed's order
                target = Block(name, f"## {name}", [""])  # a blank line before the next block's heading
                doc.blocks.append(target)
                doc.blocks.sort(key=lambda b: BLOCKS.index(b.name))
            changed = _apply(target, action, new_lines, line)
            measured = _Measured.of(doc, known.measured, name)
            self._check_caps(name, before, self._view("", measured))
            out = doc.render()
            previous, existed = data, self.file.identity() is not None
            data = (("\ufeff" if known.bom else "") + (out.replace("\n", "\r\n") if known.crlf else out)).encode()
            self.file.write(data)
            self._audited(changed, new_lines, audit_as, previous, existed)
            fresh = _Parsed(version_of(data), doc, None, known.crlf, known.bom, measured, data)
            self._parsed = fresh
            if name == LIST_BLOCK:
                self._sync_vault(fresh)
            elif self._synced_version == current:  # Critical Facts unchanged: the mirrors still follow the file
                self._synced_version = fresh.version
        view = self._view(fresh.version, measured, name)
        view.changed = changed
        return view

    def _audited(
        self, changed: str, new_lines: list[str], audit_as: tuple[str, str] | None, previous: bytes, existed: bool
    ) -> None:
        """The edit's audit line, right after the write (under the core lock); if it cannot be written, the file
        goes back to `previous` (removed if there was none) and the error is raised."""
        action, said = audit_as or ("EDIT" if existed else "CREATE", "")
        summary = f"{said}{'; ' if said else ''}{changed}"
        if new_lines:
            summary += f": {quoted(' / '.join(line.strip() for line in new_lines))}"

        def undo() -> None:
            if existed:
                self.file.write(previous)
            else:
                self.file.remove()

        self.audit.record(action, self.settings.core_file, summary, undo=undo)

    def _check_caps(self, name: str, before: CoreMemoryView, after: CoreMemoryView) -> None:
        old = next(b for b in before.blocks if b.name == name)
        new = next(b for b in after.blocks if b.name == name)
        advice = "summarise or prune it first (replace_block with a shorter text, or remove_line), then try again"
        if new.tokens > new.cap and new.tokens > old.tokens:
            raise InvalidInputError(
                f"refused: {name} would be {new.tokens:,} tokens, over its cap of {new.cap:,} by "
                f"{new.tokens - new.cap:,}; {advice}"
            )
        if after.tokens > after.cap and after.tokens > before.tokens:
            raise InvalidInputError(
                f"refused: core memory would be {after.tokens:,} tokens, over its cap of {after.cap:,} by "
                f"{after.tokens - after.cap:,}; {advice.replace('it first', 'a block first')}"
            )

    # The vault mirror of Critical Facts

    def sync_vault(self) -> None:
        """Make the pinned mirrors follow Critical Facts now (at start); a failure is logged, not raised."""
        try:
            if self._current().doc is not None:
                with self._lock, self.file.locked():
                    self._sync_vault(self._current())
        except (RockmemError, OSError) as exc:
            log.warning("core memory: Critical Facts could not be pinned in the vault (%s)", exc)

    def _follow_hand_edit(self, parsed: _Parsed) -> None:
        memory = self.memory
        if memory is None or memory.read_only is not None or parsed.version == self._synced_version:
            return
        if self._lock.acquire(blocking=False):  # an edit in progress syncs anyway
            try:
                with self.file.locked():
                    self._sync_vault(self._current())
            except (RockmemError, OSError) as exc:
                log.warning("core memory: Critical Facts could not be pinned in the vault (%s)", exc)
                self._synced_version = parsed.version  # said once; the next edit or start tries again
            finally:
                self._lock.release()

    def _sync_vault(self, parsed: _Parsed) -> None:
        """Under the core lock: a pinned mirror for each Critical Facts line, none for lines gone."""
        memory = self.memory
        if memory is None or parsed.doc is None:
            return
        wanted = {_key(item): item for item in (list_item(line) for line in _content(parsed.doc, LIST_BLOCK)) if item}
        failed: list[str] = []
        try:
            # Every mirror, however many memories share the category (a limit would leave some unseen: twins).
            mirrors = [
                e for e in memory.entries_in(VAULT_CATEGORY) if e.metadata.get("source") == VAULT_SOURCE["source"]
            ]
        except (RockmemError, OSError) as exc:
            mirrors, failed = [], [str(exc)]
            wanted = {}
        have: dict[str, str] = {}
        for entry in mirrors:
            key = _key(entry.content)
            if key in wanted and key not in have:
                have[key] = entry.id
                continue
            try:  # a line gone (or a twin): its mirror is archived, unpinned by the confirmation
                memory.delete(
                    entry.id, reason="no longer in MEMORY.md's Critical Facts", confirm_pinned=True, unpin=True
                )
            except (RockmemError, OSError) as exc:
                failed.append(str(exc))
        for key, item in wanted.items():
            if key not in have:
                try:  # each on its own: one line that cannot be saved (say, too long) holds up no other
                    memory.save(item, category=VAULT_CATEGORY, tags=["core-memory"], metadata=VAULT_SOURCE, pinned=True)
                except (RockmemError, OSError) as exc:
                    failed.append(str(exc))
        if failed:  # said once per version of the file; the next edit, hand edit or start tries again
            log.warning(
                "core memory: %d Critical Facts change(s) not mirrored in the vault: %s", len(failed), failed[0]
            )
        self._synced_version = parsed.version


def _within(lines: list[str], budget: int) -> list[str]:
    """The first of `lines` whose estimate, with a line break each, stays within `budget`."""
    kept, used = [], 0
    for line in lines:
        used += estimate_tokens(line) + 1
        if used > budget:
            break
        kept.append(line)
    return kept


def context_text(doc: CoreDocument) -> str:
    """The core as a session is given it (headings and content, no comments): what the total cap counts."""
    return "\n".join(line for name in BLOCKS if (c := _content(doc, name)) for line in (f"## {name}", *c))


def _content(doc: CoreDocument, name: str) -> list[str]:
    block = doc.block(name)
    return [line.strip() for line in block.content] if block is not None else []


def _key(text: str) -> str:
    return fold(" ".join(text.split()))


def is_mirror_of(entry: MemoryEntry, line: str) -> bool:
    """Whether `entry` is the vault mirror of the Critical Facts line `line` (as the file holds it)."""
    item = list_item(line) if is_list_line(line) else line
    is_mirror = entry.category == VAULT_CATEGORY and entry.metadata.get("source") == VAULT_SOURCE["source"]
    return is_mirror and _key(entry.content) == _key(item or "")


def _parse_bytes(data: bytes) -> _Parsed:
    version = version_of(data)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        error = CoreFormatError([f"line {line}: not UTF-8 text (byte {exc.start} of the file)"])
        return _Parsed(version, None, error, data=data)
    bom = text.startswith("\ufeff")
    if bom:
        text = text[1:]
    try:
        doc = parse(text)
    except CoreFormatError as error:
        return _Parsed(version, None, error, data=data)
    return _Parsed(version, doc, None, "\r\n" in text, bom, _Measured.of(doc), data)


def _block_argument(block: str) -> str:
    name = block_name(block or "")
    if name is None:
        raise InvalidInputError(f"block must be one of {', '.join(BLOCKS)}; got {block!r}")
    return name


def _edit_lines(name: str, action: str, text: str | None, limit: int) -> list[str]:
    """The lines `text` adds, checked: no block headings or comments (they would change the file's shape);
    in Critical Facts each one a list line."""
    if action == "remove_line":
        return []
    if text is None:
        raise InvalidInputError(f"{action} needs text: the {'block' if action == 'replace_block' else 'line'}")
    check_text(text, "text", limit, "ROCKMEM_MAX_CONTENT_BYTES", "Core memory is for short lines.")
    lines = [line.rstrip() for line in split_lines(text) if line.strip()]
    if action != "replace_block" and not lines:
        raise InvalidInputError("text is empty: give the line to write")
    if action == "replace_line" and len(lines) > 1:
        raise InvalidInputError("replace_line replaces one line: give text without line breaks")
    for line in lines:
        if is_heading(line) or "<!--" in line or "-->" in line:
            raise InvalidInputError(f"text may not hold block headings ('## …') or comments ('<!--'): {line[:60]!r}")
    if name == LIST_BLOCK:
        lines = [line if is_list_line(line) else f"- {line.strip()}" for line in lines]
    return lines


def _apply(block: Block, action: str, new_lines: list[str], line: int | None) -> str:
    """Change `block` in place; returns what was done."""
    positions = [i for i, text in enumerate(block.lines) if not is_layout(text)]
    if action == "append":
        at = positions[-1] + 1 if positions else _content_start(block)
        block.lines[at:at] = new_lines
        return f"appended {len(new_lines)} line{'s' * (len(new_lines) != 1)} to {block.name}"
    if action == "replace_block":
        start = _content_start(block)
        end = len(block.lines)
        while end > start and not block.lines[end - 1].strip():
            end -= 1
        # The content goes; comments (a person's notes, invisible to the model) stay, after the new lines.
        comments = [line for line in block.lines[start:end] if is_layout(line) and line.strip()]
        block.lines = [*block.lines[:start], *new_lines, *comments, *block.lines[end:]]
        return f"replaced {block.name} ({len(positions)} lines) with {len(new_lines)} lines"
    if line is None or not 1 <= line <= len(positions):
        have = f"lines 1–{len(positions)}" if positions else "no lines"
        raise InvalidInputError(f"line must be the number of one of {block.name}'s lines: it has {have}")
    at = positions[line - 1]
    old = block.lines[at].strip()
    if action == "remove_line":
        del block.lines[at]
        return f"removed line {line} of {block.name}: {old[:80]}"
    block.lines[at] = new_lines[0]
    return f"replaced line {line} of {block.name}: {old[:80]}"


def _content_start(block: Block) -> int:
    """Where a block's content starts: after the comments that lead it (the seed's guidance)."""
    at = start = 0
    while at < len(block.lines) and is_layout(block.lines[at]):
        at += 1
        if block.lines[at - 1].strip():
            start = at
    return start
