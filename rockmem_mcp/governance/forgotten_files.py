"""What a soft forget keeps, and the log of permanent deletes.

`forgotten/{store}/{key}.json` holds one forgotten item each: for an episode the episode itself (it left its day
log), for an entity the entity with the triples that touched it (they left the graph), for a core line its block
and text (it left MEMORY.md), for a memory the episodes that logged it (the memory itself stays in its file,
archived), for a procedure nothing more (it stays in its file, archived). A restore puts the kept records back
with their ids and times and removes the file. Files are written by the atomic writer; `locked` is the
cross-process lock a forget or restore holds, so two processes never forget and restore one item at once.

`meta/forget.log` is append-only JSON Lines, one line per permanently deleted item (at, store, id, summary,
reason): one `write` of a whole line with O_APPEND under an exclusive lock, then fsync, as the day logs are.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from rockmem_mcp.audit.redaction import text_digest
from rockmem_mcp.graph.shapes import Entity, Triple
from rockmem_mcp.models import Episode, ForgetStore, UtcDatetime
from rockmem_mcp.storage.atomic import atomic_write, remove_durably
from rockmem_mcp.storage.edited_files import held
from rockmem_mcp.storage.no_follow import make_folders, open_fd, read_bytes, real_folders, writing

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger(__name__)

SUFFIX = ".json"
FOLDERS = {"memory": "memory", "episode": "episodes", "procedure": "procedures", "entity": "graph", "core": "core"}
LOG_NAME = "forget.log"


def deleted_line(at: datetime, store: str, item_id: str, summary: str, reason: str | None) -> dict[str, object]:
    """The permanent-delete log's record of one item: when, which, why, and a hash of what it held, never the text
    (a log that kept it would be a copy of what the user asked to be gone)."""
    digest = text_digest(summary)  # the hash the audit trail's and history's placeholders name (audit/redaction.py)
    return {"at": at.isoformat(), "store": store, "id": item_id, "sha256": digest, "reason": reason}


class ForgottenRecord(BaseModel):
    """One soft-forgotten item as kept on disk."""

    id: str = Field(description="The id forget was given, e.g. episode:3f9a0c1b2d4e")
    store: ForgetStore
    at: UtcDatetime
    text: str
    reason: str | None = None
    pinned: bool = False  # a memory from the vault: forgotten because the user confirmed it
    episodes: list[Episode] = Field(default_factory=list)
    entity: Entity | None = None
    triples: list[Triple] = Field(default_factory=list)
    block: str | None = None
    line: str | None = None


def line_hash(line: str) -> str:
    """A core line's id part: 8 hex digits of its text's SHA-256 (its place in the block does not matter)."""
    return hashlib.sha256(line.strip().encode("utf-8")).hexdigest()[:8]


def file_key(store: str, key: str) -> str:
    """A file name (without suffix) for an item's key: ids and slugs as they are; a core key 'Block:hash' as
    'block-hash' (no spaces or colons in a file name)."""
    if store == "core":
        block, _, digest = key.rpartition(":")
        return f"{'-'.join(block.lower().split())}-{digest}"
    return key


class ForgottenFiles:
    def __init__(self, home: Path, root: Path, meta_dir: Path) -> None:
        self.home = home
        self.root = root
        self.lock_file = meta_dir / "forget.lock"
        self.log_path = meta_dir / LOG_NAME

    def path_for(self, store: str, key: str) -> Path:
        return self.root / FOLDERS[store] / f"{file_key(store, key)}{SUFFIX}"

    def read(self, store: str, key: str) -> ForgottenRecord | None:
        """The kept item, or None if it is not forgotten (an unreadable file is logged and counts as absent)."""
        path = self.path_for(store, key)
        try:
            return ForgottenRecord.model_validate_json(read_bytes(path))
        except FileNotFoundError:
            return None
        except (OSError, ValidationError, ValueError) as exc:
            log.warning("skipped forgotten item %s (%s)", path, exc)
            return None

    def write(self, record: ForgottenRecord, key: str) -> None:
        path = self.path_for(record.store, key)
        with writing(path):
            real_folders(self.home, path.parent)
            atomic_write(path, record.model_dump_json(indent=2).encode() + b"\n")

    def remove(self, store: str, key: str) -> bool:
        path = self.path_for(store, key)
        with writing(path):
            return remove_durably(path)

    def all(self) -> list[ForgottenRecord]:
        """Every kept item (unreadable files skipped with a warning), in no particular order."""
        found = []
        for folder in FOLDERS.values():
            try:
                names = os.listdir(self.root / folder)
            except FileNotFoundError:
                continue
            for name in names:
                if name.startswith(".") or not name.endswith(SUFFIX):
                    continue
                path = self.root / folder / name
                try:
                    found.append(ForgottenRecord.model_validate_json(read_bytes(path)))
                except FileNotFoundError:  # restored since the listing
                    continue
                except (OSError, ValidationError, ValueError) as exc:
                    log.warning("skipped forgotten item %s (%s)", path, exc)
        return found

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        with held(self.lock_file):
            yield

    def log_deleted(self, at: datetime, store: str, item_id: str, summary: str, reason: str | None) -> None:
        """One line for a permanently deleted item, appended durably."""
        record = deleted_line(at, store, item_id, summary, reason)
        line = (json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8")
        make_folders(self.log_path.parent)
        fd = open_fd(self.log_path, os.O_RDWR | os.O_CREAT | os.O_APPEND)
        try:
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_EX)
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                line = b"\n" + line  # a crash left a torn last line: ours starts on a line of its own
            os.write(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)

    def deleted(self) -> list[dict[str, object]]:
        """The permanent-delete log's lines, oldest first (unreadable lines skipped)."""
        try:
            data = read_bytes(self.log_path)
        except FileNotFoundError:
            return []
        lines = []
        for raw in data.splitlines():
            with contextlib.suppress(ValueError):
                lines.append(json.loads(raw))
        return lines
