"""Import and export of long-term memory as JSON Lines (one entry object per line)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TextIO

from rockmem_mcp.errors import RockmemError
from rockmem_mcp.models import MemoryEntry
from rockmem_mcp.services.memory import MemoryService

IMPORT_BATCH = 2_000


@dataclass(frozen=True)
class LineError:
    line: int
    error: str


@dataclass
class ImportReport:
    imported: int = 0
    replaced: int = 0  # of `imported`, how many overwrote an entry with the same id
    errors: list[LineError] = field(default_factory=list)


def import_jsonl(
    memory: MemoryService,
    lines: Iterable[str | bytes],
    progress: Callable[[int], None] | None = None,
    batch_size: int = IMPORT_BATCH,
) -> ImportReport:
    """Read `{content, category?, tags?, metadata?, importance?, created_at?, id?, ...}` per line.

    Bad lines are reported by number and skipped; good ones are written in batches (one durable flush
    and one index update per batch). An id that already exists is replaced.
    """
    report = ImportReport()
    batch: list[MemoryEntry] = []

    def flush() -> None:
        if batch:
            report.replaced += memory.save_many(batch)
            report.imported += len(batch)
            batch.clear()

    number = 0
    for number, line in enumerate(lines, start=1):
        try:
            text = line.decode("utf-8") if isinstance(line, bytes) else line
            if not text.strip():
                continue
            record = json.loads(text)
            if not isinstance(record, dict):
                raise ValueError('expected a JSON object like {"content": "..."}')
            batch.append(memory.prepare_entry(record))
        except (ValueError, RockmemError) as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
            report.errors.append(LineError(number, str(exc).splitlines()[0][:300]))
        if len(batch) >= batch_size:
            flush()
            if progress:
                progress(number)
    flush()
    if progress:
        progress(number)
    return report


def export_jsonl(memory: MemoryService, out: TextIO) -> int:
    """Write every entry (archived ones too), oldest first, in the format import reads."""
    count = 0
    for entry in memory.iter_entries():
        out.write(entry.model_dump_json() + "\n")
        count += 1
    return count
