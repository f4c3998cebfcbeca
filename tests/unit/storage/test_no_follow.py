"""No symbolic link inside the home is followed: reads and appends refuse a linked file, writes refuse a
linked folder, and a store folder that is a link stops the home from opening at all."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from rockmem_mcp.config import Settings
from rockmem_mcp.errors import ConfigError, LinkRefusedError, RockmemError
from rockmem_mcp.memory.files import MemoryFiles
from rockmem_mcp.models import EntryLocation, MemoryEntry
from rockmem_mcp.storage.atomic import atomic_write
from rockmem_mcp.storage.home_claim import HomeClaim
from rockmem_mcp.storage.no_follow import open_fd, read_bytes, real_folders


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "secret.json").write_bytes(b'{"secret": true}')
    return folder


def test_a_linked_file_is_refused_not_read(tmp_path: Path, outside: Path) -> None:
    link = tmp_path / "link.json"
    os.symlink(outside / "secret.json", link)
    with pytest.raises(LinkRefusedError) as refused:
        read_bytes(link)
    # Both a domain error (tools report it) and an OSError (readers skip it like an unreadable file).
    assert isinstance(refused.value, RockmemError) and isinstance(refused.value, OSError)
    assert str(link) in str(refused.value) and "symbolic link" in str(refused.value)


def test_a_linked_file_is_not_appended_to(tmp_path: Path, outside: Path) -> None:
    link = tmp_path / "day.jsonl"
    os.symlink(outside / "secret.json", link)
    with pytest.raises(LinkRefusedError):
        open_fd(link, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    assert (outside / "secret.json").read_bytes() == b'{"secret": true}'


def test_a_dangling_link_is_not_created_through(tmp_path: Path, outside: Path) -> None:
    link = tmp_path / ".lock"
    os.symlink(outside / "made-by-rockmem", link)
    with pytest.raises(LinkRefusedError):
        open_fd(link, os.O_RDWR | os.O_CREAT)
    assert not (outside / "made-by-rockmem").exists()


def test_a_plain_file_reads_and_a_missing_one_is_not_found(tmp_path: Path) -> None:
    (tmp_path / "plain.json").write_bytes(b"{}")
    assert read_bytes(tmp_path / "plain.json") == b"{}"
    with pytest.raises(FileNotFoundError):
        read_bytes(tmp_path / "absent.json")


def test_real_folders_makes_missing_folders_and_refuses_a_linked_one(tmp_path: Path, outside: Path) -> None:
    root = tmp_path / "memory"
    root.mkdir()
    real_folders(root, root / "a" / "b")
    assert (root / "a" / "b").is_dir()
    os.symlink(outside, root / "a" / "evil")
    with pytest.raises(LinkRefusedError):
        real_folders(root, root / "a" / "evil" / "deeper")
    assert sorted(p.name for p in outside.iterdir()) == ["secret.json"]
    (root / "a" / "file").write_bytes(b"")
    with pytest.raises(NotADirectoryError):
        real_folders(root, root / "a" / "file")


def test_memory_files_do_not_write_through_a_linked_category_folder(tmp_path: Path, outside: Path) -> None:
    files = MemoryFiles(tmp_path / "memory")
    (tmp_path / "memory").mkdir()
    os.symlink(outside, tmp_path / "memory" / "evil")
    entry = MemoryEntry(id="a1b2c3d4e5f6", content="x", category="evil/sub", created_at=datetime.now(UTC))
    with pytest.raises(LinkRefusedError):
        files.write(entry)
    with pytest.raises(LinkRefusedError):
        files.write_many([entry.model_copy(update={"category": "evil"})])
    assert sorted(p.name for p in outside.iterdir()) == ["secret.json"]


def test_memory_files_refuse_a_linked_entry_file(tmp_path: Path, outside: Path) -> None:
    (tmp_path / "memory").mkdir()
    os.symlink(outside / "secret.json", tmp_path / "memory" / "a1b2c3d4e5f6.json")
    with pytest.raises(LinkRefusedError):
        MemoryFiles(tmp_path / "memory").read(EntryLocation("a1b2c3d4e5f6", None))


def test_a_write_replaces_a_linked_file_and_leaves_its_target_alone(tmp_path: Path, outside: Path) -> None:
    link = tmp_path / "shared.json"
    os.symlink(outside / "secret.json", link)
    atomic_write(link, b"ours")
    assert not link.is_symlink() and link.read_bytes() == b"ours"
    assert (outside / "secret.json").read_bytes() == b'{"secret": true}'


@pytest.mark.parametrize("folder", ["memory", "knowledge-graph", "knowledge-graph/entities", "index/graph"])
def test_a_home_whose_store_folder_is_a_link_does_not_open(tmp_path: Path, outside: Path, folder: str) -> None:
    settings = Settings.load({"home": tmp_path / "home"}, env={})
    link = settings.home / folder
    link.parent.mkdir(parents=True)
    os.symlink(outside, link)
    with pytest.raises(ConfigError, match=f"{folder} is a symbolic link.*ROCKMEM_HOME"):
        HomeClaim(settings.home, settings.store_dirs)


def test_a_home_that_is_itself_a_link_opens(tmp_path: Path, outside: Path) -> None:
    # A home kept on another disk: the settings resolve it once, and nothing inside it is a link.
    os.symlink(outside, tmp_path / "home")
    settings = Settings.load({"home": tmp_path / "home"}, env={})
    assert settings.home == outside
    HomeClaim(settings.home, settings.store_dirs).close()
