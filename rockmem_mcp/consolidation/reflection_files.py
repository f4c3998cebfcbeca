"""Reflections on disk (seed 004 §10): one JSON record per cycle in meta/reflections/r-NNN.json (the truth:
its plan, status and resolution), the readable proposal of the pending ones in meta/pending-reflection.md,
and two append-only markdown files: meta/reflection-log.md (one entry per resolved cycle) and
meta/evolution.md (the insights of approved cycles).

Records are written atomically and durably; the log and evolution files are appended durably in one write
each. The lock file keeps one reflection per home at a time (`claim`), across processes.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator
from pathlib import Path

from rockmem_mcp.config import Settings
from rockmem_mcp.consolidation.shapes import Reflection
from rockmem_mcp.errors import CorruptEntryError, NotFoundError, RockmemError
from rockmem_mcp.storage.atomic import atomic_create, atomic_write
from rockmem_mcp.storage.daily_log import append_line
from rockmem_mcp.storage.no_follow import make_folders, open_fd, read_bytes

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no cross-process lock
    fcntl = None  # type: ignore[assignment]

RECORD_NAME = re.compile(r"r-(\d{3,9})\.json")
HEAD_BYTES = 1_024  # a record's status is within its first bytes


def _head(path: Path) -> bytes:
    fd = open_fd(path, os.O_RDONLY)
    try:
        return os.read(fd, HEAD_BYTES)
    finally:
        os.close(fd)


class ReflectionBusy(RockmemError):
    """Another reflection is running on this home."""


class ReflectionFiles:
    def __init__(self, settings: Settings) -> None:
        self.directory = settings.meta_dir / "reflections"
        self.pending_file = settings.meta_dir / "pending-reflection.md"
        self.log_file = settings.meta_dir / "reflection-log.md"
        self.evolution_file = settings.meta_dir / "evolution.md"

    # ------------------------------------------------------------------ records
    def path(self, reflection_id: str) -> Path:
        if not RECORD_NAME.fullmatch(f"{reflection_id}.json"):
            raise NotFoundError(f"no reflection {reflection_id!r}: ids look like r-001")
        return self.directory / f"{reflection_id}.json"

    def numbers(self) -> list[int]:
        """Every recorded reflection's number, in order."""
        try:
            names = os.listdir(self.directory)
        except FileNotFoundError:
            return []
        return sorted(int(m.group(1)) for n in names if (m := RECORD_NAME.fullmatch(n)))

    def read(self, reflection_id: str) -> Reflection:
        path = self.path(reflection_id)
        try:
            return Reflection.model_validate_json(read_bytes(path))
        except FileNotFoundError:
            raise NotFoundError(f"no reflection {reflection_id!r}; see the pending ones with reflect") from None
        except (OSError, ValueError) as exc:
            problem = str(exc).splitlines()[0][:200]
            raise CorruptEntryError(
                f"reflection {reflection_id} cannot be read ({problem}); fix or move {path}"
            ) from None

    def with_status(self, status: str) -> Iterator[Reflection]:
        """The readable records in `status`, oldest first. A record's status is near its start (the fields are
        written in order), so the others are not parsed whole: a first recall lists the pending ones among a
        year of reflections cheaply."""
        wanted = f'"status": "{status}"'.encode()
        for number in self.numbers():
            path = self.directory / f"r-{number:03d}.json"
            try:
                head = _head(path)
            except OSError:
                continue
            if wanted in head or b'"status"' not in head:  # not where we write it: parse it to know
                with contextlib.suppress(CorruptEntryError, NotFoundError):
                    found = self.read(f"r-{number:03d}")
                    if found.status == status:
                        yield found

    def all(self) -> Iterator[Reflection]:
        """Every readable record, oldest first (an unreadable one is skipped: `read` names it)."""
        for number in self.numbers():
            with contextlib.suppress(CorruptEntryError, NotFoundError):
                yield self.read(f"r-{number:03d}")

    def write(self, reflection: Reflection) -> Path:
        path = self.path(reflection.id)
        make_folders(self.directory)
        atomic_write(path, reflection.model_dump_json(indent=2).encode() + b"\n")
        return path

    def write_pending(self, text: str) -> None:
        """The readable proposal of every pending reflection (the file goes when none is pending)."""
        if text:
            make_folders(self.pending_file.parent)
            atomic_write(self.pending_file, text.encode())
        else:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.pending_file)

    # ------------------------------------------------------------------ the log and the evolution file
    def append_log(self, text: str, heading: str = "# Reflection Log\n") -> None:
        self._append(self.log_file, heading, text)

    def append_evolution(self, text: str) -> None:
        self._append(self.evolution_file, "# Evolution\n<!-- How understanding of the user has evolved. -->\n", text)

    def read_text(self, path: Path, limit: int) -> str:
        """The file's last `limit` characters (the newest part of a log), or '' when there is none."""
        try:
            text = read_bytes(path).decode("utf-8", errors="replace")
        except FileNotFoundError:
            return ""
        return text[-limit:]

    def put_text(self, path: Path, text: str) -> bool:
        """The whole log or evolution file, where there is none yet (a store moved here); False if there is one."""
        make_folders(path.parent)
        return atomic_create(path, text.encode("utf-8"))

    def _append(self, path: Path, heading: str, text: str) -> None:
        make_folders(path.parent)
        first = not path.exists()
        append_line(path, ((heading + "\n") if first else "").encode() + text.rstrip("\n").encode() + b"\n\n")

    # ------------------------------------------------------------------ one at a time
    @contextlib.contextmanager
    def claim(self) -> Iterator[None]:
        """Hold the home's reflection lock, or raise ReflectionBusy at once if another process holds it."""
        make_folders(self.directory)
        fd = open_fd(self.directory / ".reflection.lock", os.O_RDWR | os.O_CREAT)
        try:
            if fcntl is not None:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    raise ReflectionBusy(
                        "another reflection is running on this home; try again when it has finished"
                    ) from None
            yield
        finally:
            os.close(fd)
