"""Domain exceptions. Each message says what went wrong and how to fix it.

They become MCP error results in one place (the tool boundary) and CLI error lines in another.
"""

from __future__ import annotations

import contextlib
import errno
from collections.abc import Iterator


class RockmemError(Exception):
    """Base class for every error rockmem reports to a user or a model."""


class ConfigError(RockmemError):
    """Settings could not be read."""


class InvalidInputError(RockmemError, ValueError):
    """An argument was rejected; the message names the argument and the accepted form."""


class NotFoundError(RockmemError, LookupError):
    """No entry with the given id."""


class ChangedSinceReadError(RockmemError):
    """An edit named the version it read, and the file has changed since (optimistic concurrency)."""


class HomeInUseError(RockmemError):
    """An operation that needs the data home to itself (doctor --fix) found other processes using it."""


class CorruptEntryError(RockmemError):
    """An entry file exists but cannot be parsed."""


class EmbeddingError(RockmemError):
    """An embedding provider could not produce vectors (unreachable, refused, or answered wrongly)."""


class EmbeddingRefused(EmbeddingError):
    """The provider is working but refuses these inputs (HTTP 4xx, text the model cannot take): retrying the
    same input will not help, and the provider itself is fine."""


class LLMError(RockmemError):
    """The language model endpoint could not produce a usable answer (unreachable, refused, malformed)."""


class RefusedFileError(RockmemError, OSError):
    """A file inside the home that rockmem will not open (a link, a FIFO, a socket, a device). An OSError too,
    so a reader that skips unreadable files skips it; a tool reports it like any other refusal."""


# The filesystem refusing a write: a read-only mount, or files this process may not write.
READ_ONLY_ERRNOS = frozenset({errno.EROFS, errno.EACCES, errno.EPERM})


class StorageError(RockmemError):
    """The disk refused a read or write (full, read-only, failing): the message says which and while doing what."""

    @classmethod
    def of(cls, exc: OSError, doing: str) -> StorageError:
        """The one mapping of an OSError to what a user or model is told."""
        where = f" ({exc.filename})" if exc.filename else ""
        reason = exc.strerror or str(exc) or type(exc).__name__
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return cls(f"disk full while {doing}{where}: {reason}; free space and try again")
        if exc.errno == errno.EROFS:  # one wording with the stores' own refusals of a write
            return ReadOnlyHomeError(exc.filename or "the data home", f"{reason}, while {doing}")
        if exc.errno in (errno.EACCES, errno.EPERM):  # a read too: not necessarily a read-only home
            return cls(f"permission denied while {doing}{where}: {reason}; check the data home's owner and mode")
        return cls(f"I/O error while {doing}{where}: {reason}")


@contextlib.contextmanager
def reporting_io_errors(doing: str) -> Iterator[None]:
    """Turn an OSError from the body into a StorageError saying what was being done (domain errors pass)."""
    try:
        yield
    except RockmemError:
        raise
    except OSError as exc:
        raise StorageError.of(exc, doing) from exc


class HistoryError(StorageError):
    """A git command of the home's history failed (governance/history.py). The saves are not affected: the
    change is in its file and meta/audit.log, and the next round commits it."""


class LinkRefusedError(RefusedFileError):
    """A symbolic link inside the home where rockmem keeps a file or folder of its own."""

    def __init__(self, path: object) -> None:
        super().__init__(
            errno.ELOOP,
            f"{path} is a symbolic link; rockmem follows no links inside its data home "
            "(put the file or folder itself there, or point ROCKMEM_HOME at the real location)",
        )

    def __str__(self) -> str:
        return str(self.strerror)


class SpecialFileError(RefusedFileError):
    """A FIFO, socket or device where rockmem keeps a regular file: opening or reading it could block forever
    (a FIFO without a writer) or never end (a device), so it is refused before any read."""

    def __init__(self, path: object, kind: str) -> None:
        super().__init__(
            errno.EINVAL,
            f"{path} is a {kind}, not a regular file; rockmem neither reads nor writes it "
            "(`rockmem-mcp doctor --fix` moves it to quarantine/, or remove it by hand)",
        )

    def __str__(self) -> str:
        return str(self.strerror)


class ReadOnlyHomeError(StorageError, OSError):
    """The data home (or the part a write needs) cannot be written by this process: a read-only mount, or files
    owned by another user. Reads go on working; an OSError too, so code that tolerates a failed write of
    derived data tolerates this one."""

    def __init__(self, path: object, reason: str) -> None:
        self.reason = reason
        super().__init__(
            errno.EROFS,
            f"the home is read-only: cannot write {path} ({reason}); searches and reads still work. Make the "
            "home writable for this process, or point ROCKMEM_HOME at a writable copy",
        )

    def __str__(self) -> str:
        return str(self.strerror)


class WritesGatedError(RockmemError):
    """A gated sub-agent (ROCKMEM_GATED_WRITES, a subagent/… namespace) asked for a long-term write it may not
    make: its memories are proposals the main agent reviews."""
