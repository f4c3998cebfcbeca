"""Domain exceptions. Each message says what went wrong and how to fix it.

They become MCP error results in one place (the tool boundary) and CLI error lines in another.
"""

from __future__ import annotations

import errno


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
