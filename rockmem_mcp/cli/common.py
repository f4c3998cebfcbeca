"""What the command groups share: the one writer of stdout (`say`), opening a home's stores, files in and out."""

from __future__ import annotations

import contextlib
import json
import os
import stat
import sys
import time
from collections.abc import Iterator
from typing import Any, BinaryIO, TextIO

from rockmem_mcp.config import Settings
from rockmem_mcp.errors import EmbeddingError, RockmemError


def say(text: object = "") -> None:
    """A command's output line on stdout (through the visible filter `main` puts there): the one place the CLI's
    other modules write, so only this module prints (over stdio, stdout is the protocol's)."""
    print(text)


@contextlib.contextmanager
def memory_service(settings: Settings) -> Iterator[Any]:
    from rockmem_mcp.memory.service import MemoryService

    service = MemoryService(settings, embed_in_background=False)
    try:
        yield service
    finally:
        service.close()


@contextlib.contextmanager
def graph_service(settings: Settings) -> Iterator[Any]:
    from rockmem_mcp.graph.service import GraphService

    graph = GraphService(settings)
    try:
        yield graph
    finally:
        graph.close()


def audit_service(settings: Settings) -> Any:
    from rockmem_mcp.audit.service import Audit

    return Audit(settings)


def open_output(path: str) -> TextIO:
    if path == "-":
        return sys.stdout
    return open(path, "w", encoding="utf-8")


def open_input(path: str) -> BinaryIO:
    # Bytes, decoded line by line by the importer, so one bad line is reported instead of ending the import.
    if path == "-":
        return sys.stdin.buffer
    return open(path, "rb")


def file_size(source: BinaryIO) -> int | None:
    """A regular file's size in bytes; None for a pipe or a terminal (or an empty file)."""
    try:
        info = os.fstat(source.fileno())
    except (OSError, ValueError):
        return None
    return info.st_size if stat.S_ISREG(info.st_mode) and info.st_size else None


def report_bad_lines(errors: list[Any]) -> None:
    for err in errors[:50]:
        print(f"line {err.line}: {err.error}", file=sys.stderr)
    if len(errors) > 50:
        print(f"... and {len(errors) - 50} more bad lines", file=sys.stderr)


def json_argument(text: str, name: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise RockmemError(f"{name} is not JSON: {exc}") from None


def start_summary(settings: Settings, memory: Any) -> str:
    """Home, ranking and size, for the start line."""
    ranking = settings.search_mode if memory.embedder.configured else "bm25 (embeddings off)"
    state = "; read-only: writes are refused" if memory.read_only is not None else ""
    count = len(memory.index)
    return f"home {settings.home}; {count:,} {'memory' if count == 1 else 'memories'}; ranking {ranking}{state}"


def embed_missing(memory: Any) -> dict[str, int]:
    """Give every memory without a vector its vector now, with a progress bar; the counts, for --json. The
    server's own worker does the same steps (`VectorWorker.step`), so the vectors are stored as it stores them."""
    from rockmem_mcp.cli.progress import Meter

    started = time.monotonic()
    worker = memory.vector_worker
    with Meter("embedding", "memories") as meter:
        done = worker.drain(meter.update)
    print(
        f"vectors for {done} {'memory' if done == 1 else 'memories'} ({worker.embedded} embedded with "
        f"{memory.embedder.model_id}, {worker.reused} from the cache) in {time.monotonic() - started:.1f}s",
        file=sys.stderr,
    )
    return {"vectors": done, "embedded": worker.embedded, "from_cache": worker.reused}


def embed_written(memory: Any) -> dict[str, int]:
    """After a command wrote memories (`add`, `import`, `migrate-store`): their vectors now, made once here, so
    no server started afterwards has to backfill them while it serves (any others still waiting come along).
    Nothing with embeddings off. The memories are saved already: a provider that fails, or a cache file that
    cannot be written, only defers their vectors, said in one line; the write stands."""
    if not memory.embedder.configured:
        return {}
    try:
        return embed_missing(memory)
    except (EmbeddingError, OSError) as exc:
        print(f"vectors later: {exc} (`rockmem-mcp reindex --embeddings` or the next server start will embed "
              "them)", file=sys.stderr)  # fmt: skip
        return {"vectors": 0}
