"""Procedures as JSON files: procedures/{slug}.json, one learned workflow per file.

A file is written whole by the atomic writer and read without following links: a link, FIFO or other special
file named like a procedure is refused (an OSError the caller reports), never followed or waited on. Writers
hold an exclusive `flock` on `meta/procedures.lock` around each read-modify-write, so two processes saving one
procedure cannot lose each other's update. A reader notices another process's write by the file's identity
(inode, mtime_ns, size): the atomic writer gives every write a new inode, which a directory's coarse mtime
(one clock tick on Linux) or an in-place hand edit would not show.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from rockmem_mcp.procedures.shapes import Procedure
from rockmem_mcp.storage.atomic import atomic_write, remove_durably
from rockmem_mcp.storage.edited_files import held
from rockmem_mcp.storage.no_follow import read_bytes, real_folders, writing
from rockmem_mcp.storage.records import parse_record

SUFFIX = ".json"
Identity = tuple[int, int, int]  # (inode, mtime_ns, size)


class ProcedureFiles:
    def __init__(self, home: Path, root: Path, lock_file: Path) -> None:
        self.home = home
        self.root = root
        self.lock_file = lock_file

    def path_for(self, slug: str) -> Path:
        return self.root / f"{slug}{SUFFIX}"

    @staticmethod
    def encode(procedure: Procedure) -> bytes:
        return procedure.model_dump_json(indent=2).encode() + b"\n"

    def read(self, slug: str) -> Procedure:
        """Parse one procedure; FileNotFoundError if absent, CorruptEntryError if not a valid procedure, the
        refusal (LinkRefusedError, SpecialFileError) for a link or special file. The file name is the truth
        about its slug."""
        path = self.path_for(slug)
        data = read_bytes(path)
        procedure = parse_record(Procedure, data, path, "procedure", "procedure")
        return procedure if procedure.slug == slug else procedure.model_copy(update={"slug": slug})

    def write(self, procedure: Procedure) -> None:
        """Replace the procedure's file atomically and durably (a link there is replaced, never its target)."""
        path = self.path_for(procedure.slug)
        with writing(path):
            real_folders(self.home, self.root)
            atomic_write(path, self.encode(procedure))

    def remove(self, slug: str) -> bool:
        path = self.path_for(slug)
        with writing(path):
            return remove_durably(path)

    def identity(self, slug: str) -> Identity:
        info = os.lstat(self.path_for(slug))
        return (info.st_ino, info.st_mtime_ns, info.st_size)

    def identities(self) -> dict[str, Identity]:
        """Every procedure file's stem (not yet checked to be a slug) and identity; one lstat per file. Temp
        files (dot names) and other names are left out."""
        found: dict[str, Identity] = {}
        try:
            items = list(os.scandir(self.root))
        except FileNotFoundError:
            return found
        for item in items:
            name = item.name
            if name.startswith(".") or not name.endswith(SUFFIX):
                continue
            with contextlib.suppress(FileNotFoundError):  # removed since the listing
                info = item.stat(follow_symlinks=False)
                found[name[: -len(SUFFIX)]] = (info.st_ino, info.st_mtime_ns, info.st_size)
        return found

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the store's cross-process write lock for the body."""
        with held(self.lock_file):
            yield
