"""Python's cyclic garbage collector during a process's start.

A start imports ~600 modules and builds ~650 pydantic models (most of them the MCP SDK's), and loading a big
home makes hundreds of thousands of containers: each of those allocations counts toward the collector's next
pass, and its passes over the growing heap find almost nothing to free (reference counting frees the rest).
Paused for the start, importing the server took 0.67 s instead of 0.84 s (BENCHMARKS.md, issue 46).

The command line pauses it before anything else loads (`pause`); a command resumes it before it runs
(`resume`), a server once no call has been in flight for 2 s after its first answer (`server/app.py`: a process
that ends sooner never makes the pass below), or `PAUSE_LIMIT_S` after the pause, whichever comes first. Resumed,
the collector's first pass walks all the start built (0.14 s at 100k memories, holding the interpreter): a server
makes that pass itself when idle, and so does the time limit (`settle`), so that it does not fall on whichever
request allocates next. It collects the start's ~10,000 objects
of cyclic garbage (pydantic's schema building, ~3 MB). Nothing is frozen (`gc.freeze`): an object the start made
that later became cyclic garbage (a closed store, a tenant's services) would never be freed.

The pause is the process's, not its caller's: a program that turned the collector off before the command line ran
keeps it off, one that turns it off during a pause has it turned back on when the pause ends.
"""

from __future__ import annotations

import gc
import logging
import threading
import time

log = logging.getLogger(__name__)

PAUSE_LIMIT_S = 60.0

_lock = threading.Lock()
_paused = False
_timer: threading.Timer | None = None


def pause(limit_s: float = PAUSE_LIMIT_S) -> threading.Timer | None:
    """Turn the collector off until `resume`, or `limit_s` from now at the latest (the daemon timer returned;
    None when the collector was off already)."""
    global _paused, _timer
    with _lock:
        if _paused or not gc.isenabled():
            return None
        gc.disable()
        _paused = True
        _timer = threading.Timer(limit_s, resume, kwargs={"settle": True})
        _timer.daemon = True
        _timer.start()
        return _timer


def is_paused() -> bool:
    return _paused


def resume(settle: bool = False) -> None:
    """Turn the collector back on if `pause` turned it off; `settle` first collects what the start left, now."""
    global _paused, _timer
    with _lock:
        if not _paused:
            return
        _paused = False
        timer, _timer = _timer, None
    try:
        if timer is not None:
            timer.cancel()  # (from the timer's own thread: nothing)
        if settle:  # outside the lock: finalizers run here
            started = time.perf_counter()
            collected = gc.collect()
            log.debug("garbage collector resumed: %d objects of the start collected in %.3f s", collected,
                      time.perf_counter() - started)  # fmt: skip
    finally:
        gc.enable()
