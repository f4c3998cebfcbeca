"""Proposals as JSON files: meta/proposals/{id}.json, one sub-agent proposal per file (seed 004 §13).

The JSON records are the truth; meta/pending-memories.md (the seed's readable staging file) is rendered from
them after each change and never read back. A record is written whole by the atomic writer, so a crash leaves
the old record or the new one, never a torn file. Writers hold an exclusive `flock` on
meta/proposals.lock around each read-modify-write (a proposal that marks a rival as a conflict changes two
records; the main agent and a sub-agent may be writing at once), and the markdown is rendered under it too, so
the last rendering is of the last state.

Ids are 13 lowercase hex digits: the creation time in milliseconds (11 digits, sortable until the year 5138)
and 2 random digits, so names sort by time and processes proposing in the same millisecond do not collide
(a name already taken is never overwritten: the creator picks another).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import secrets
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

from rockmem_mcp.errors import CorruptEntryError, InvalidInputError, RefusedFileError
from rockmem_mcp.proposals.shapes import Proposal
from rockmem_mcp.storage.atomic import atomic_create, atomic_write, remove_durably
from rockmem_mcp.storage.edited_files import held
from rockmem_mcp.storage.no_follow import read_bytes, real_folders, writing
from rockmem_mcp.storage.records import parse_record

log = logging.getLogger(__name__)

SUFFIX = ".json"
ID_PATTERN = re.compile(r"^[0-9a-f]{13}$")


def new_id(moment: datetime) -> str:
    return f"{int(moment.timestamp() * 1000):011x}{secrets.randbelow(256):02x}"


def checked_id(proposal_id: str) -> str:
    """`proposal_id` without a leading '#', refused unless it is a proposal id (never a path)."""
    proposal_id = proposal_id.strip().removeprefix("#")
    if not ID_PATTERN.match(proposal_id):
        raise InvalidInputError(f"{proposal_id!r} is not a proposal id: pass one review_proposals listed (13 hex)")
    return proposal_id


class ProposalFiles:
    def __init__(self, home: Path, root: Path, lock_file: Path, readable: Path) -> None:
        self.home = home
        self.root = root
        self.lock_file = lock_file
        self.readable = readable  # meta/pending-memories.md
        # Parsed records by id, with the file identity (inode, mtime_ns, size) they were read at: the atomic
        # writer gives every write a new inode, so a listing re-reads only what changed since (any process's).
        self._cache: dict[str, tuple[tuple[int, int, int], Proposal]] = {}

    def path_for(self, proposal_id: str) -> Path:
        return self.root / f"{proposal_id}{SUFFIX}"

    @staticmethod
    def encode(proposal: Proposal) -> bytes:
        return proposal.model_dump_json(indent=2, by_alias=True).encode() + b"\n"

    def read(self, proposal_id: str) -> Proposal:
        """One record; FileNotFoundError if absent, CorruptEntryError if it does not parse."""
        path = self.path_for(proposal_id)
        proposal = parse_record(Proposal, read_bytes(path), path, "proposal", "proposal")
        return proposal if proposal.id == proposal_id else proposal.model_copy(update={"id": proposal_id})

    def create(self, proposal: Proposal) -> bool:
        """Write a new record durably; False (nothing written) when its id is taken."""
        path = self.path_for(proposal.id)
        with writing(path):
            real_folders(self.home, self.root)
            return atomic_create(path, self.encode(proposal))

    def write(self, proposal: Proposal) -> None:
        """Replace a record atomically and durably."""
        path = self.path_for(proposal.id)
        with writing(path):
            real_folders(self.home, self.root)
            atomic_write(path, self.encode(proposal))

    def remove(self, proposal_id: str) -> None:
        """Only to undo a creation whose audit line could not be written."""
        path = self.path_for(proposal_id)
        with writing(path):
            remove_durably(path)

    def ids(self) -> list[str]:
        """Every record's id, oldest first (temp files and other names are left out)."""
        try:
            names = os.listdir(self.root)
        except FileNotFoundError:
            return []
        return sorted(n[: -len(SUFFIX)] for n in names if n.endswith(SUFFIX) and ID_PATTERN.match(n[: -len(SUFFIX)]))

    def all(self) -> list[Proposal]:
        """Every readable record, oldest first; one removed meanwhile is skipped, one that does not parse (or is
        a link or special file) is logged and left out (rockmem never deletes it). The records are shared with
        later listings: copy one before changing it (`read` gives a fresh one)."""
        try:
            items = list(os.scandir(self.root))
        except FileNotFoundError:
            return []
        found: dict[str, Proposal] = {}
        for item in items:
            proposal_id = item.name[: -len(SUFFIX)]
            if not item.name.endswith(SUFFIX) or not ID_PATTERN.match(proposal_id):
                continue
            try:
                info = item.stat(follow_symlinks=False)
                identity = (info.st_ino, info.st_mtime_ns, info.st_size)
                cached = self._cache.get(proposal_id)
                if cached is None or cached[0] != identity:
                    cached = self._cache[proposal_id] = (identity, self.read(proposal_id))
                found[proposal_id] = cached[1]
            except FileNotFoundError:  # removed since the listing
                continue
            except (CorruptEntryError, RefusedFileError) as exc:  # one bad file costs the others nothing
                log.warning("proposal left out: %s", exc)
        for gone in set(self._cache) - set(found):
            del self._cache[gone]
        return [found[i] for i in sorted(found)]

    def render(self, text: str) -> None:
        """Replace meta/pending-memories.md (a view: never read back)."""
        with writing(self.readable):
            real_folders(self.home, self.readable.parent)
            atomic_write(self.readable, text.encode())

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the store's cross-process write lock for the body."""
        with held(self.lock_file):
            yield
