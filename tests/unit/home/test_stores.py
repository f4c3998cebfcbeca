"""Opening a home's stores: Deferred (a store opened in the background when started or first wanted, handed out
only whole), and what open_stores begins at once."""

from __future__ import annotations

import platform
import threading

import pytest

from rockmem_mcp.config import Settings
from rockmem_mcp.home.stores import Deferred, open_stores, release_freed_memory


def test_nothing_opens_until_started_or_wanted_and_it_opens_once() -> None:
    made: list[int] = []
    deferred = Deferred(lambda: made.append(1) or len(made), "test")
    assert not deferred.started and not made
    deferred.start()
    assert deferred.result() == 1
    deferred.start()
    assert deferred.result() == 1 and made == [1]


def test_result_starts_it_and_waits_for_all_of_it() -> None:
    half, release = threading.Event(), threading.Event()

    def slow() -> list[str]:
        store = ["first half"]
        half.set()
        release.wait()
        return [*store, "second half"]

    deferred = Deferred(slow, "test")
    got: list[list[str]] = []
    waiter = threading.Thread(target=lambda: got.append(deferred.result()))
    waiter.start()
    assert half.wait(10)
    assert not got  # still loading: the caller waits
    release.set()
    waiter.join(10)
    assert got == [["first half", "second half"]]


def test_a_failed_open_raises_for_whoever_wants_it() -> None:
    def broken() -> None:
        raise OSError("disk gone")

    deferred = Deferred(broken, "test")
    with pytest.raises(OSError, match="disk gone"):
        deferred.result()


def test_the_episode_index_starts_loading_with_the_stores_before_any_search(settings: Settings) -> None:
    """A server's first search waits for the episode index: begun with the stores, in a thread of its own, its
    load overlaps the server's own start (importing the SDK) instead of following it."""
    first = open_stores(settings)
    first.episodes.record("the team chose Postgres for the ledger")
    first.episodes.close()
    first.memory.close()

    stores = open_stores(settings)
    try:
        stores.episodes_warmed.result(timeout=30)
        assert stores.episodes.index.built  # loaded by the stores' own thread: nothing searched yet
        assert [hit.episode.content for hit in stores.episodes.search("Postgres ledger").hits] == [
            "the team chose Postgres for the ledger"
        ]
    finally:
        stores.episodes.close()
        stores.memory.close()


def test_memory_freed_but_kept_by_the_allocator_goes_back_to_the_system() -> None:
    """glibc keeps freed heap pages below a live allocation; a server's start leaves such pages (its loads
    interleave with the SDK's imports), and this is called after its first answer. Elsewhere it does nothing."""
    chunks = [bytes(1024) + bytes([i % 256]) for i in range(60_000)]  # ~60 MB of malloc'd (not pymalloc) blocks
    pin = bytes(2048)  # allocated after them: the heap cannot shrink past it
    del chunks
    before = _rss_mb()
    release_freed_memory()
    if platform.libc_ver()[0] == "glibc":
        assert before - _rss_mb() > 30, (before, _rss_mb())
    assert pin


def _rss_mb() -> float:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS")) / 1024
