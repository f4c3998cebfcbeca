"""A real full disk under real server processes (issue 17, item 6): the home is a small tmpfs the test mounts and
fills. A save the full disk refuses answers "disk full while saving memory …" and leaves nothing; after space is
freed the retry is acknowledged once and another server process finds it. A torn line in the change journal
(a write cut short) does not hide the records written after it from the other process."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import AsyncExitStack
from pathlib import Path

import pytest

from tests.e2e.disk_checks import temp_files

pytestmark = pytest.mark.anyio


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 4 MiB tmpfs (the tests run as root, as the CI container does)."""
    mount_point = tmp_path / "small-disk"
    mount_point.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount_point)], check=True)
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=True)


def fill(disk: Path) -> Path:
    """Write a file until the disk refuses another byte."""
    filler = disk / "filler.bin"
    with filler.open("wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 4096)
        except OSError:
            pass
    return filler


def files_named(home: Path, entry_id: str) -> list[Path]:
    return list((home / "memory").rglob(f"{entry_id}.json"))


async def test_a_save_on_a_full_disk_says_so_leaves_nothing_and_the_retry_is_seen_by_others(
    stdio_server, small_disk, call
) -> None:
    home = small_disk / "home"
    async with AsyncExitStack() as stack:
        a = await stack.enter_async_context(stdio_server(home))
        b = await stack.enter_async_context(stdio_server(home))
        first = await call(a, "save_memory", content="written while there was room", category="notes")
        filler = fill(small_disk)
        before = sorted((home / "memory").rglob("*"))

        refused = await a.call_tool("save_memory", {"content": "the lease ends in March", "category": "notes"})
        assert refused.is_error
        message = refused.content[0].text
        assert "disk full while saving memory" in message and "No space left on device" in message
        assert sorted((home / "memory").rglob("*")) == before
        assert temp_files(home) == []

        filler.unlink()
        again = await call(a, "save_memory", content="the lease ends in March", category="notes")
        for client in (a, b):
            found = await call(client, "search_memory", query="lease March")
            assert [hit["entry"]["id"] for hit in found["results"]] == [again["id"]]
        assert [len(files_named(home, i)) for i in (first["id"], again["id"])] == [1, 1]
        assert len(list((home / "memory" / "notes").glob("*.json"))) == 2


async def test_a_torn_journal_line_does_not_hide_a_later_save_from_another_process(stdio_server, home, call) -> None:
    async with AsyncExitStack() as stack:
        a = await stack.enter_async_context(stdio_server(home))
        b = await stack.enter_async_context(stdio_server(home))
        await call(b, "search_memory", query="anything")  # B has read the journal up to here
        [journal] = sorted((home / "index").glob("changes-*.jsonl"))
        with journal.open("ab") as f:
            f.write(b'{"w":"deadbeef0000","s":"memory","op":"put","id":"abc')  # a write cut short
        saved = await call(a, "save_memory", content="the spare key is under the blue pot")
        found = await call(b, "search_memory", query="spare key blue pot")
        assert [hit["entry"]["id"] for hit in found["results"]] == [saved["id"]]
