"""Opening a home's persistent stores (the server's and the CLI's one way to do it)."""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable
from concurrent.futures import Future
from functools import partial
from typing import Generic, NamedTuple, TypeVar

from rockmem_mcp.config import Settings
from rockmem_mcp.episodes.service import Episodes
from rockmem_mcp.graph.service import GraphService, NewEntries
from rockmem_mcp.memory.service import MemoryService

T = TypeVar("T")


def in_background(make: Callable[[], T], name: str) -> Future[T]:
    """Run `make` in a daemon thread; its result (or exception) arrives through the future."""
    opening: Future[T] = Future()

    def run() -> None:
        try:
            opening.set_result(make())
        except BaseException as exc:  # handed to whoever waits, as if it had been raised there
            opening.set_exception(exc)

    threading.Thread(target=run, name=name, daemon=True).start()
    return opening


class Deferred(Generic[T]):
    """A store opened in a background thread once `start()` is called or the first caller wants it; `result()`
    waits until it is whole (a half-loaded store is never handed out) and raises what opening it raised."""

    def __init__(self, make: Callable[[], T], name: str) -> None:
        self._make, self._name = make, name
        self._opening: Future[T] | None = None
        self._lock = threading.Lock()

    def start(self) -> None:
        """Begin opening now, in the background (again: nothing)."""
        with self._lock:
            if self._opening is None:
                self._opening = in_background(self._make, self._name)

    @property
    def started(self) -> bool:
        return self._opening is not None

    def result(self) -> T:
        self.start()
        assert self._opening is not None
        return self._opening.result()


class Stores(NamedTuple):
    memory: MemoryService
    graph: Deferred[GraphService]
    episodes: Episodes
    episodes_warmed: Future[None]  # the episode index loaded (a search waits for it anyway, under its lock)


def open_stores(settings: Settings) -> Stores:
    """The long-term memory, opened now; the episodes, whose index starts loading now in a thread of its own (a
    first search waits for it: begun here, it overlaps the server's start rather than following it); and the
    knowledge graph, opened in the background once started (the server starts it after its first answer, so
    loading a large graph — about a second of Python per 100,000 triples — does not compete with the first
    search) or when a call first needs it, which then waits for all of it. All share the memory store's
    reinforcement (one access log); a saved memory's text is queued for the graph, which reinforces the
    entities it names off the save path."""
    memory = MemoryService(settings)
    episodes = Episodes(settings, reinforcer=memory.reinforcer)
    warming = in_background(episodes.warm, "rockmem-episodes")
    new_entries = NewEntries()
    memory.save_listeners.append(new_entries.saved)
    graph = partial(GraphService, settings, reinforcer=memory.reinforcer, new_entries=new_entries)
    return Stores(memory, Deferred(graph, "rockmem-graph"), episodes, warming)


def release_freed_memory() -> None:
    """Hand the system back the memory the start freed but the C allocator kept: glibc keeps freed heap pages for
    reuse, and loading the snapshots while the SDK imports left ~40 MB of them at 100k memories (BENCHMARKS.md,
    issue 46). A server calls this once its first answer is out. Without glibc's malloc_trim: nothing."""
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError, TypeError):  # (Windows: CDLL(None) is a TypeError)
        return
    trim(0)
