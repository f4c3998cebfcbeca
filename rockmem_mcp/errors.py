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


class StorageError(RockmemError):
    """The disk refused a read or write (full, read-only, failing): the message says which and while doing what."""

    @classmethod
    def of(cls, exc: OSError, doing: str) -> StorageError:
        """The one mapping of an OSError to what a user or model is told."""
        where = f" ({exc.filename})" if exc.filename else ""
        reason = exc.strerror or str(exc) or type(exc).__name__
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return cls(f"disk full while {doing}{where}: {reason}; free space and try again")
        if exc.errno == errno.EROFS:
            return cls(f"read-only filesystem while {doing}{where}: {reason}")
        if exc.errno in (errno.EACCES, errno.EPERM):
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


class LinkRefusedError(RockmemError, OSError):
    """A symbolic link inside the home where rockmem keeps a file or folder of its own. An OSError too, so a
    reader that skips unreadable files skips it; a tool reports it like any other refusal."""

    def __init__(self, path: object) -> None:
        super().__init__(
            errno.ELOOP,
            f"{path} is a symbolic link; rockmem follows no links inside its data home "
            "(put the file or folder itself there, or point ROCKMEM_HOME at the real location)",
        )

    def __str__(self) -> str:
        return str(self.strerror)
