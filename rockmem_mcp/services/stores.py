"""Opening a home's persistent stores (the server's and the CLI's one way to do it)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from functools import partial
from typing import TypeVar

from rockmem_mcp.config import Settings
from rockmem_mcp.services.graph import GraphService, NewEntries
from rockmem_mcp.services.memory import MemoryService

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


def open_stores(settings: Settings) -> tuple[MemoryService, Future[GraphService]]:
    """The long-term memory, opened now, and the knowledge graph, opening in the background: a large graph
    (about a second per 100,000 triples) then delays only the first call that needs it, not the start. Both
    share the memory store's reinforcement (one access log); a saved memory's text is queued for the graph,
    which reinforces the entities it names off the save path."""
    memory = MemoryService(settings)
    new_entries = NewEntries()
    memory.save_listeners.append(new_entries.saved)
    graph = partial(GraphService, settings, reinforcer=memory.reinforcer, new_entries=new_entries)
    return memory, in_background(graph, "rockmem-graph")
