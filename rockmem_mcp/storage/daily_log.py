"""Append-only JSON Lines logs, one file per UTC day: `{directory}/{YYYY-MM-DD}.jsonl`.

Used for the conversation log and the feedback log, which the dream pass reads. Each record is one
`write` of one line to a file opened for appending, under an exclusive lock, then fsync'd: processes
appending at once never interleave a line, a line torn by a crash does not swallow the next record, and an
acknowledged record is on disk. Unreadable lines are skipped when read.
"""

from __future__ import annotations

import logging
import os
import re
from datetime import date
from pathlib import Path
from typing import Generic, TypeVar

from pydantic import BaseModel, ValidationError

from rockmem_mcp.errors import RefusedFileError
from rockmem_mcp.storage.no_follow import make_folders, open_fd, read_bytes

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger(__name__)

Record = TypeVar("Record", bound=BaseModel)
_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")


class DailyLog(Generic[Record]):
    def __init__(self, directory: Path, model: type[Record]) -> None:
        self.directory = directory
        self.model = model

    def path(self, day: date) -> Path:
        return self.directory / f"{day.isoformat()}.jsonl"

    def append(self, record: Record, day: date) -> None:
        make_folders(self.directory)
        line = (record.model_dump_json() + "\n").encode("utf-8")
        fd = open_fd(self.path(day), os.O_RDWR | os.O_CREAT | os.O_APPEND)
        try:
            if fcntl is not None:  # the torn-line check and the write happen as one, among processes
                fcntl.flock(fd, fcntl.LOCK_EX)
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                line = b"\n" + line  # a crash left a torn last line: ours starts on a line of its own
            os.write(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)

    def days(self) -> list[date]:
        """The days that have a log, oldest first."""
        try:
            names = os.listdir(self.directory)
        except FileNotFoundError:
            return []
        found = []
        for name in names:
            if name.endswith(".jsonl") and _DAY.fullmatch(name[:-6]):
                try:
                    found.append(date.fromisoformat(name[:-6]))
                except ValueError:  # named like a day that does not exist: not a log of ours
                    continue
        return sorted(found)

    def read(self, day: date) -> list[Record]:
        """The records logged on `day`, in order; unreadable lines are skipped (with one warning per file)."""
        try:
            lines = read_bytes(self.path(day)).splitlines()
        except FileNotFoundError:
            return []
        except RefusedFileError as exc:  # a link, FIFO, socket or device there
            log.warning("skipped %s", exc)
            return []
        records, bad = [], 0
        for line in lines:
            try:
                records.append(self.model.model_validate_json(line))
            except (ValidationError, ValueError):
                bad += 1
        if bad:
            log.warning("skipped %d unreadable line(s) in %s", bad, self.path(day))
        return records

    def remove(self, day: date) -> None:
        self.path(day).unlink(missing_ok=True)
