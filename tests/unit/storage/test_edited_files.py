"""The one cross-process lock: a second holder waits until the first lets go; a link is never opened."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from rockmem_mcp.errors import LinkRefusedError
from rockmem_mcp.storage.edited_files import held


def test_a_second_holder_waits_for_the_first(tmp_path: Path) -> None:
    lock = tmp_path / "meta" / "store.lock"
    order: list[str] = []
    inside = threading.Event()

    def second() -> None:
        inside.wait()
        with held(lock):  # its own descriptor, so flock makes it wait as another process would
            order.append("second")

    thread = threading.Thread(target=second)
    thread.start()
    with held(lock):  # makes the folder and the lock file
        inside.set()
        thread.join(timeout=0.3)  # it cannot get in while this body runs
        assert thread.is_alive() and order == []
        order.append("first")
    thread.join()
    assert order == ["first", "second"]


def test_a_link_in_place_of_the_lock_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").write_text("")
    (tmp_path / "store.lock").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(LinkRefusedError), held(tmp_path / "store.lock"):
        pass
