"""Two MemoryService instances on one home (as two processes would be), with the exact interleaving forced:
one instance's write lands right after the other's update read the entry (issue 17, item 5)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from rockmem_mcp.errors import NotFoundError
from rockmem_mcp.memory.files import MemoryFiles
from rockmem_mcp.memory.service import MemoryService
from rockmem_mcp.models import EntryLocation
from rockmem_mcp.storage.id_locks import IdLocks
from tests.unit.helpers import Services, entry_files

LOCKS_LOGGER = "rockmem_mcp.storage.id_locks"


class _EventHandler(logging.Handler):
    def __init__(self, event: threading.Event) -> None:
        super().__init__(logging.DEBUG)
        self.event = event

    def emit(self, record: logging.LogRecord) -> None:
        if "waiting for another process's write" in record.getMessage():
            self.event.set()


@contextmanager
def after_first_read(service: MemoryService, other_write: Callable[[], Any]) -> Iterator[list[BaseException]]:
    """Right after `service` next reads an entry file, `other_write` runs in another thread; `service` goes on
    once that write has finished or is waiting for `service`'s lock. Yields the errors of the other write."""
    progressed = threading.Event()
    errors: list[BaseException] = []
    handler = _EventHandler(progressed)
    logger = logging.getLogger(LOCKS_LOGGER)
    old_level = logger.level
    logger.setLevel(logging.DEBUG)
    logger.addHandler(handler)
    threads: list[threading.Thread] = []
    read = service.files.read

    def run_other() -> None:
        try:
            other_write()
        except BaseException as exc:
            errors.append(exc)
        finally:
            progressed.set()

    def read_then_interleave(location: Any, fresh: bool = False) -> Any:
        entry = read(location, fresh)
        if not threads:
            threads.append(threading.Thread(target=run_other))
            threads[0].start()
            progressed.wait()
        return entry

    service.files.read = read_then_interleave  # type: ignore[method-assign]
    try:
        yield errors
    finally:
        service.files.read = read  # type: ignore[method-assign]
        for thread in threads:
            thread.join()
        logger.removeHandler(handler)
        logger.setLevel(old_level)
    assert threads, "the interleaved write never ran"


def test_an_update_racing_a_permanent_delete_never_brings_the_memory_back(services: Services) -> None:
    a, b = services.open(), services.open()
    entry = a.save("The staging database is at db-7", category="infra")
    assert b.get(entry.id).content == entry.content  # B knows the entry
    with after_first_read(b, lambda: a.delete(entry.id, permanent=True)) as errors:
        b.update(entry.id, content="The staging database moved to db-9")
    assert errors == []  # the delete was acknowledged
    assert entry_files(services.settings) == []
    for service in (a, b, services.open()):
        with pytest.raises(NotFoundError):
            service.get(entry.id)
        assert service.search("staging database").results == []


def test_an_update_racing_an_archive_leaves_the_memory_archived(services: Services) -> None:
    a, b = services.open(), services.open()
    entry = a.save("Deploys happen on Thursdays", category="ops")
    b.get(entry.id)
    with after_first_read(b, lambda: a.delete(entry.id, reason="outdated")) as errors:
        b.update(entry.id, tags=["deploy"])
    assert errors == []
    for service in (a, b, services.open()):
        assert service.get(entry.id).archived
        assert service.search("Deploys Thursdays").results == []


def test_two_racing_moves_of_one_memory_leave_exactly_one_file(services: Services) -> None:
    a, b = services.open(), services.open()
    entry = a.save("The office wifi password rotates monthly", category="office")
    b.get(entry.id)
    with after_first_read(b, lambda: a.update(entry.id, category="it/network")) as errors:
        b.update(entry.id, category="facilities")
    assert errors == []
    files = entry_files(services.settings)
    assert len(files) == 1, files
    final = services.open().get(entry.id)
    assert files == [f"{final.category}/{entry.id}.json"]
    assert a.get(entry.id).category == b.get(entry.id).category == final.category


def test_a_move_in_flight_in_another_process_is_not_taken_for_a_duplicate(services: Services) -> None:
    """A store opening between a move's write of the new file and its removal of the old one (the mover holds
    the id's lock) leaves both files alone; two files with nobody holding the lock (a crash) are settled."""
    a = services.open()
    entry = a.save("The build server is ci-3", category="infra")
    services.close(a)
    settings = services.settings
    moved = entry.model_copy(update={"category": "ops"})
    mover = MemoryFiles(settings.memory_dir)
    with IdLocks(settings.index_dir, "memory").hold([entry.id]):
        mover.write(moved)  # the other process is half-way through update(category="ops")
        services.close(services.open())
        assert not (settings.home / "quarantine").exists()
        mover.remove(EntryLocation(entry.id, "infra"))
    assert entry_files(settings) == [f"ops/{entry.id}.json"]
    assert services.open().get(entry.id).category == "ops"

    mover.write(entry)  # now a copy nobody is moving: settled at the next open
    services.open()
    assert len(entry_files(settings)) == 1 and (settings.home / "quarantine").exists()


def test_an_entry_to_be_created_is_locked_with_the_ones_checked_unchanged(services: Services) -> None:
    """The dream's merge checks its sources unchanged and writes the merged entry under one sorted acquisition
    of their locks: taking the new id's lock later, out of order, could deadlock with an import locking in order."""
    service = services.open()
    source = service.save("The user prefers dark mode")
    other_process = IdLocks(services.settings.index_dir, "memory")
    new_id = next(
        f"{n:012x}" for n in range(1, 10_000) if other_process._stripe(f"{n:012x}") != other_process._stripe(source.id)
    )
    with service.unchanged([source], [new_id]) as changed:
        assert changed == []
        with other_process.hold([new_id], wait=False) as got:
            assert not got  # already held: the merged entry's lock came with the sources'
    with other_process.hold([new_id], wait=False) as got:
        assert got
