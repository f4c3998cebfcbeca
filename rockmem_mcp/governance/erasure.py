"""Forgotten means gone (issue 45): after a permanent delete or forget, the record keeps no copy of the item's text.

The stores remove the item itself (its file or row, its vector, the episodes that logged it) and the forget log
keeps a hash (governance/forgotten_files.py). What remains is the record of it, which `Erasure.erase` rewrites:
- the audit log's lines about it (audit/log.py, audit/postgres.py) and the retention digests' notable events
  (audit/retention.py): its text replaced by `[forgotten sha256:HASH]` (audit/redaction.py);
- the home's git history (governance/history.py `purge`): every commit rewritten without the item's own files
  and with its texts out of the other files that held it and of the messages; unreachable objects pruned;
- the index snapshots (memories, episodes, the graph) and the audit log's line index: written again now, without
  the words only it held.

`Traces` names what to look for: the item's texts (every earlier version found in its files' history and quoted
by its audit lines is added), its own files, and the shared files or folders that held it. A failure is logged
and returned (the item is gone already; what is left of its record is said, not hidden).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from rockmem_mcp.audit.line_index import file_key, item_keys
from rockmem_mcp.audit.log import moved_from
from rockmem_mcp.audit.redaction import Redaction, quoted_texts
from rockmem_mcp.audit.retention import redact_digests
from rockmem_mcp.audit.service import Audit
from rockmem_mcp.config import Settings
from rockmem_mcp.errors import RockmemError
from rockmem_mcp.governance.trail import names_item
from rockmem_mcp.memory.service import MemoryService
from rockmem_mcp.models import DeleteResult, MemoryEntry

if TYPE_CHECKING:
    from rockmem_mcp.episodes.service import Episodes
    from rockmem_mcp.governance.history import GitHistory
    from rockmem_mcp.graph.service import GraphService

log = logging.getLogger(__name__)

# The fields of a store's JSON that hold what the user said (a memory's content, a procedure's steps, an entity's
# names, what a soft forget kept): an earlier version's values are texts to take out too.
TEXT_FIELDS = frozenset({"content", "name", "aliases", "trigger", "steps", "notes", "line"})
MIN_FOUND_CHARS = 4  # an earlier text found in the record this short would take common words out of other lines


@dataclass
class Traces:
    """What a permanently removed item may have left in the record."""

    texts: list[str] = field(default_factory=list)  # what it held
    own_files: list[str] = field(default_factory=list)  # its files, relative to the home (`/`-separated)
    shared: list[str] = field(default_factory=list)  # files that held it among others; folders end with `/`
    ids: list[str] = field(default_factory=list)  # its file names (an id, a slug): every file so named is its own

    def add(self, other: Traces) -> None:
        self.texts += other.texts
        self.own_files += other.own_files
        self.shared += other.shared
        self.ids += other.ids

    def __bool__(self) -> bool:
        return any(text.strip() for text in self.texts)


class Erasure:
    def __init__(
        self,
        settings: Settings,
        audit: Audit,
        memory: MemoryService,
        episodes: Episodes | None = None,
        history: GitHistory | None = None,
        graph: Callable[[], GraphService] | None = None,
    ) -> None:
        """`graph` is called only for an item of the graph (a server opens it in the background)."""
        self.settings = settings
        self.audit = audit
        self.memory = memory
        self.episodes = episodes
        self.history = history
        self._graph = graph

    def relative(self, path: str | Path) -> str:
        """A path as the record names it: relative to the home, `/`-separated."""
        return self.audit.file(path)

    def memory_traces(self, entry: MemoryEntry) -> Traces:
        """A memory's: its content, its files (every folder it lived in, and what a soft forget kept of it: the
        files named by its id), and the day log its save was logged in."""
        own = [self.relative(self.memory.files.path_for(entry.id, entry.category))]
        shared = []
        if self.episodes is not None:
            shared.append(self.relative(self.episodes.log.path(entry.created_at.date())))
        return Traces([entry.content], own, shared, [entry.id])

    def delete_memory(
        self, entry_id: str, reason: str | None = None, confirm_pinned: bool = False
    ) -> tuple[DeleteResult, list[str]]:
        """delete_memory(permanent=true) as the tool, the page and the CLI do it: the memory, the episodes that logged
        it, then its traces. Returns the store's DeleteResult and what could not be erased (empty: all of it)."""
        entry = self.memory.get(entry_id)
        result = self.memory.delete(entry_id, True, reason, confirm_pinned=confirm_pinned)
        if self.episodes is not None:
            self.episodes.forget_memory(entry)
        return result, self.erase(self.memory_traces(entry))

    def erase(self, traces: Traces) -> list[str]:
        """Take the item out of the record (module docstring); returns what failed, each said once in the log."""
        if not traces:
            return []
        problems: list[str] = []
        redaction = self._redaction(traces, problems)
        try:
            if self.history is not None and self.history.available:
                report = self.history.purge(redaction)  # the audit log first, then every commit
                if report is not None:
                    log.info(
                        "forgotten for good: %d audit line(s) redacted, %d commit(s) read, %d file version(s) "
                        "rewritten and %d left out, in %.2f s",
                        report.audit_lines,
                        report.counts.commits,
                        report.counts.blobs_rewritten,
                        report.counts.files_dropped,
                        report.seconds,
                    )
            else:
                self.audit.log.redact(redaction)
                if self.audit.versions is not None:  # no history to take them: they would only keep the text
                    self.audit.versions.drop()
        except (RockmemError, OSError) as exc:
            problems.append(f"the git history still holds it ({exc})")
            try:  # the history failed before or after the log's turn: the log on its own (redacting twice is a no-op)
                self.audit.log.redact(redaction)
            except (RockmemError, OSError) as again:
                problems.append(f"the audit trail still holds it ({again})")
        graph_folder = self.relative(self.settings.graph_dir) + "/"
        of_the_graph = any(path.startswith(graph_folder) for path in [*traces.own_files, *traces.shared])
        for what, step in (
            # The line index keeps the log's last bytes to know it: built again now for the rewritten log.
            ("the audit line index", self.audit.index.catch_up),
            ("the audit digests", lambda: redact_digests(self.settings, self.audit.log, redaction)),
            ("the memory index snapshot", self.memory.write_snapshot),
            ("the episode index snapshot", self.episodes.save_index if self.episodes is not None else None),
            ("the graph snapshot", self._write_graph_snapshot if of_the_graph else None),
        ):
            if step is None:
                continue
            try:
                step()
            except (RockmemError, OSError) as exc:
                problems.append(f"{what} may still hold it ({exc})")
        for problem in problems:
            log.warning("forgotten for good, but %s", problem)
        return problems

    def _write_graph_snapshot(self) -> None:
        if self._graph is not None:
            self._graph().write_snapshot()

    def _redaction(self, traces: Traces, problems: list[str]) -> Redaction:
        """The item's texts with every earlier version the record holds: what its own files' audit lines quote,
        and its own files' versions in the history. Its own files: those given, and every file the audit log names
        that is named by one of its ids."""
        texts = [text for text in traces.texts if text.strip()]
        own = dict.fromkeys(traces.own_files)
        found: list[str] = []
        keys = {key for item in traces.ids for key in item_keys(item)} | {file_key(file) for file in own}
        try:
            for line in (hit.line for hit in self.audit.index.find(keys)):  # the lines naming them, not the log
                named = [name for name in (line.file, moved_from(line)) if name is not None]
                for name in named:
                    if any(names_item(name, item) for item in traces.ids):
                        own.setdefault(name, None)
                if any(name in own for name in named):
                    found += quoted_texts(line.summary)
            if self.history is not None and self.history.available:
                for data in self.history.file_blobs(sorted(own)):
                    found += _texts_of(data)
        except (RockmemError, OSError) as exc:
            problems.append(f"earlier versions of it may be left ({exc})")
        known = set(texts)
        texts += [text for text in dict.fromkeys(found) if len(text.strip()) >= MIN_FOUND_CHARS and text not in known]
        return Redaction(texts, own, traces.shared)


def user_texts(record: object) -> list[str]:
    """The user's words in a store's record as JSON holds it (TEXT_FIELDS, at any depth: a procedure's earlier
    versions, the episodes a soft forget kept)."""
    return list(_walk(record, False))


def _texts_of(data: bytes) -> list[str]:
    """`user_texts` of one version of a store's JSON file (nothing for any other file)."""
    try:
        body = json.loads(data)
    except ValueError:
        return []
    return user_texts(body)


def _walk(value: object, wanted: bool) -> Iterator[str]:
    if isinstance(value, str):
        if wanted:
            yield value
    elif isinstance(value, list):
        for item in value:
            yield from _walk(item, wanted)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _walk(item, wanted or key in TEXT_FIELDS)
