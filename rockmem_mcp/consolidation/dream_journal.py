"""The dream's merge journal, so a dream killed half-way and run again ends as one clean run would.

A merge writes its merged memory first and then archives its sources (a crash between leaves a duplicate,
never a loss). Killed in between, both would stay live and the next dream would merge them again, summing
their reinforcement twice. So every merge is journalled, durably, before its first write: the merged id and
each source's version (a hash of the entry as the dream read it). The next dream, before it plans, finishes
what the journal holds: where the merged memory was written, each source still as journalled is archived,
superseded by it (a source changed since is left alone). A dream that finishes clears the journal.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from rockmem_mcp.models import MemoryEntry
from rockmem_mcp.storage.no_follow import make_folders, open_fd, read_bytes

JOURNAL_NAME = ".merges.jsonl"


def version(entry: MemoryEntry) -> str:
    return hashlib.sha256(entry.model_dump_json().encode()).hexdigest()[:32]


@dataclass(frozen=True)
class PendingMerge:
    merged_id: str
    sources: dict[str, str]  # source id -> version


class MergeJournal:
    def __init__(self, directory: Path) -> None:
        self.path = directory / JOURNAL_NAME

    def add(self, merged_id: str, sources: list[MemoryEntry]) -> None:
        self.add_many([(merged_id, sources)])

    def add_many(self, merges: list[tuple[str, list[MemoryEntry]]]) -> None:
        """Journal merges durably, in one write and one fsync."""
        lines = "".join(
            json.dumps({"merged": merged_id, "sources": {e.id: version(e) for e in sources}}) + "\n"
            for merged_id, sources in merges
        )
        make_folders(self.path.parent)
        fd = open_fd(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        try:
            data = memoryview(b"\n" + lines.encode())  # lines of their own even after a torn one
            while data:
                data = data[os.write(fd, data) :]
            os.fsync(fd)
        finally:
            os.close(fd)

    def pending(self) -> list[PendingMerge]:
        try:
            lines = read_bytes(self.path).splitlines()
        except FileNotFoundError:
            return []
        found = []
        for line in lines:
            try:
                record = json.loads(line)
                sources = {str(k): str(v) for k, v in record["sources"].items()}
                found.append(PendingMerge(str(record["merged"]), sources))
            except (ValueError, KeyError, TypeError, AttributeError):
                continue  # blank, or torn by the kill: that merge had not written anything yet
        return found

    def clear(self) -> None:
        self.path.unlink(missing_ok=True)
