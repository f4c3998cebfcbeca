from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import pytest

from rockmem_mcp.storage import atomic
from rockmem_mcp.storage.atomic import TEMP_SUFFIX, atomic_write, atomic_write_many, remove_durably, temp_path_for


def all_files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def fail_on_call(monkeypatch: pytest.MonkeyPatch, name: str, call: int) -> None:
    """Make os.<name> raise OSError on its `call`-th use (1-based); other calls go through."""
    real = getattr(os, name)
    calls = 0

    def flaky(*args, **kwargs):
        nonlocal calls
        calls += 1
        if calls == call:
            raise OSError(f"simulated failure of os.{name}")
        return real(*args, **kwargs)

    monkeypatch.setattr(atomic.os, name, flaky)


def test_temp_names_are_hidden_and_marked() -> None:
    tmp = Path(temp_path_for(Path("/some/dir/entry.json")))
    assert tmp.parent == Path("/some/dir")
    assert tmp.name.startswith(".entry.json.") and tmp.name.endswith(TEMP_SUFFIX)
    assert temp_path_for(Path("/x/a.json")) != temp_path_for(Path("/x/a.json"))


@pytest.mark.parametrize("durable", [True, False])
def test_atomic_write_creates_and_replaces(tmp_path: Path, durable: bool) -> None:
    target = tmp_path / "deep" / "dir" / "file.json"
    atomic_write(target, b"first", durable=durable)
    assert target.read_bytes() == b"first"
    atomic_write(target, b"second, longer content", durable=durable)
    atomic_write(target, b"3rd", durable=durable)
    assert target.read_bytes() == b"3rd"
    assert all_files(tmp_path) == ["deep/dir/file.json"]


def test_atomic_write_of_empty_and_large_data(tmp_path: Path) -> None:
    big = os.urandom(3 * 1024 * 1024 + 17)
    atomic_write(tmp_path / "big", big)
    atomic_write(tmp_path / "empty", b"")
    assert (tmp_path / "big").read_bytes() == big
    assert (tmp_path / "empty").read_bytes() == b""


def test_failed_rename_keeps_the_old_file_and_leaves_no_temp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "file.json"
    atomic_write(target, b"old")
    fail_on_call(monkeypatch, "replace", 1)
    with pytest.raises(OSError, match="simulated"):
        atomic_write(target, b"new")
    assert target.read_bytes() == b"old"
    assert all_files(tmp_path) == ["file.json"]


def test_failed_content_writer_keeps_the_old_file_and_leaves_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "file.json"
    atomic_write(target, b"old")

    def writer(f: BinaryIO) -> None:
        f.write(b"partial new conte")
        raise RuntimeError("the writer failed")

    with pytest.raises(RuntimeError):
        atomic_write(target, writer)
    assert target.read_bytes() == b"old"
    assert all_files(tmp_path) == ["file.json"]


def test_content_may_be_a_writer_function(tmp_path: Path) -> None:
    atomic_write(tmp_path / "f", lambda f: f.write(b"streamed"), durable=False)
    assert (tmp_path / "f").read_bytes() == b"streamed"


def test_atomic_write_many_writes_every_file(tmp_path: Path) -> None:
    items = [(tmp_path / "a.json", b"A"), (tmp_path / "sub" / "b.json", b"B"), (tmp_path / "c.json", b"C")]
    assert atomic_write_many(items) == 3
    assert {p.name: p.read_bytes() for p, _ in items} == {"a.json": b"A", "b.json": b"B", "c.json": b"C"}
    assert all_files(tmp_path) == ["a.json", "c.json", "sub/b.json"]


def test_atomic_write_many_later_duplicate_wins(tmp_path: Path) -> None:
    target = tmp_path / "same.json"
    atomic_write_many([(target, b"first"), (tmp_path / "other.json", b"x"), (target, b"second")])
    assert target.read_bytes() == b"second"
    assert all_files(tmp_path) == ["other.json", "same.json"]


def test_atomic_write_many_of_nothing(tmp_path: Path) -> None:
    assert atomic_write_many([]) == 0
    assert all_files(tmp_path) == []


def test_atomic_write_many_rename_failure_midway_leaves_no_temp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "b.json").write_bytes(b"old b")
    fail_on_call(monkeypatch, "replace", 2)
    items = [(tmp_path / name, name.encode()) for name in ("a.json", "b.json", "c.json")]
    with pytest.raises(OSError, match="simulated"):
        atomic_write_many(items)
    # The first rename happened (a complete file); the rest never appeared, and no temp file remains.
    assert (tmp_path / "a.json").read_bytes() == b"a.json"
    assert (tmp_path / "b.json").read_bytes() == b"old b"
    assert all_files(tmp_path) == ["a.json", "b.json"]


def test_atomic_write_many_staging_failure_writes_nothing(tmp_path: Path) -> None:
    def items() -> Iterator[tuple[Path, bytes]]:
        yield tmp_path / "a.json", b"A"
        yield tmp_path / "b.json", b"B"
        raise RuntimeError("the producer failed")

    with pytest.raises(RuntimeError):
        atomic_write_many(items())
    assert all_files(tmp_path) == []


def test_remove_durably(tmp_path: Path) -> None:
    target = tmp_path / "x.json"
    target.write_bytes(b"x")
    assert remove_durably(target) is True
    assert not target.exists()
    assert remove_durably(target) is False


@pytest.mark.parametrize("mode", [0o600, 0o640, 0o444])
def test_a_rewrite_keeps_the_files_permission_bits(tmp_path: Path, mode: int) -> None:
    target = tmp_path / "MEMORY.md"
    target.write_bytes(b"private")
    target.chmod(mode)
    atomic_write(target, b"still private")
    assert target.read_bytes() == b"still private"
    assert target.stat().st_mode & 0o7777 == mode


def test_a_new_file_gets_the_default_mode(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.write_bytes(b"")  # what open() gives under this process's umask
    atomic_write(tmp_path / "new.json", b"{}")
    assert (tmp_path / "new.json").stat().st_mode & 0o7777 == plain.stat().st_mode & 0o7777
