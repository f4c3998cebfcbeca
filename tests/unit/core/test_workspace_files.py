"""Workspace files on disk: read again only when changed, never through a link or a FIFO, written atomically
under a lock with optimistic concurrency."""

from __future__ import annotations

import fcntl
import logging
import os
import threading
from pathlib import Path

import pytest

from rockmem_mcp.core import workspace_files
from rockmem_mcp.core.workspace_files import WORKSPACE_FILES, TooLargeFileError, WorkspaceFiles
from rockmem_mcp.errors import ChangedSinceReadError, LinkRefusedError, SpecialFileError
from rockmem_mcp.storage.edited_files import version_of


@pytest.fixture
def home(tmp_path: Path) -> Path:
    folder = tmp_path / "home"
    folder.mkdir()
    return folder


def files_in(home: Path) -> WorkspaceFiles:
    return WorkspaceFiles({name: home / name for name in WORKSPACE_FILES}, home / "meta" / "workspace.lock")


def test_a_file_is_read_with_its_version_and_an_absent_one_is_none(home: Path) -> None:
    (home / "SOUL.md").write_bytes(b"# Persona\nTerse.\n")
    files = files_in(home)
    soul = files.read("SOUL.md")
    assert soul is not None
    assert (soul.name, soul.text, soul.size) == ("SOUL.md", "# Persona\nTerse.\n", 17)
    assert soul.version == version_of(b"# Persona\nTerse.\n") and len(soul.version) == 12
    assert files.read("USER.md") is None


def test_an_unchanged_file_is_not_read_again_and_a_hand_edit_is(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = home / "USER.md"
    path.write_text("Likes tea.\n")
    files = files_in(home)
    first = files.read("USER.md")
    reads: list[Path] = []
    real_read = workspace_files.read_bytes
    monkeypatch.setattr(workspace_files, "read_bytes", lambda p: reads.append(p) or real_read(p))
    assert files.read("USER.md") is first and reads == []  # one lstat, no open
    path.write_text("Likes coffee now.\n")  # a hand edit: another size, another mtime
    edited = files.read("USER.md")
    assert edited is not None and edited.text == "Likes coffee now.\n" and reads == [path]
    path.unlink()
    assert files.read("USER.md") is None


def test_a_symbolic_link_is_refused_never_followed_and_logged_once(
    home: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    secret = tmp_path / "secret.md"
    secret.write_text("outside the home")
    (home / "AGENTS.md").symlink_to(secret)
    files = files_in(home)
    caplog.set_level(logging.WARNING)
    for _ in range(3):
        with pytest.raises(LinkRefusedError, match="symbolic link"):
            files.read("AGENTS.md")
        assert files.readable("AGENTS.md") is None
    assert sum("AGENTS.md" in record.getMessage() for record in caplog.records) == 1


def test_a_fifo_is_refused_without_waiting_for_a_writer(home: Path) -> None:
    os.mkfifo(home / "HEARTBEAT.md")
    with pytest.raises(SpecialFileError, match="FIFO"):
        files_in(home).read("HEARTBEAT.md")  # would block forever if it were opened for a plain read


def test_a_file_that_is_too_large_is_skipped(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(workspace_files, "MAX_FILE_BYTES", 10)
    (home / "SOUL.md").write_text("more than ten bytes")
    with pytest.raises(TooLargeFileError, match="19 bytes, more than the 10"):
        files_in(home).read("SOUL.md")


def test_bytes_that_are_not_utf8_are_replaced_with_a_warning(home: Path, caplog: pytest.LogCaptureFixture) -> None:
    data = "Café ".encode() + b"\xff\xfe latin-1: caf\xe9\n"
    (home / "USER.md").write_bytes(data)
    caplog.set_level(logging.WARNING)
    user = files_in(home).read("USER.md")
    assert user is not None
    assert user.text == "Café \ufffd\ufffd latin-1: caf\ufffd\n"
    assert user.version == version_of(data)  # the version is of the bytes as they are
    assert any("not valid UTF-8" in record.getMessage() for record in caplog.records)


def test_a_byte_order_mark_is_not_part_of_the_text(home: Path) -> None:
    (home / "SOUL.md").write_bytes(b"\xef\xbb\xbf# Persona\n")
    soul = files_in(home).read("SOUL.md")
    assert soul is not None and soul.text == "# Persona\n"


def test_a_write_replaces_the_file_and_leaves_no_temp_file(home: Path) -> None:
    files = files_in(home)
    written = files.write("SOUL.md", b"# Persona\nWarm.\n")
    assert (home / "SOUL.md").read_bytes() == b"# Persona\nWarm.\n"
    assert written.version == version_of(b"# Persona\nWarm.\n")
    assert files.read("SOUL.md") == written
    assert [p.name for p in home.iterdir() if p.name.endswith(".tmp")] == []


def test_a_write_with_a_stale_version_is_refused_and_changes_nothing(home: Path) -> None:
    a, b = files_in(home), files_in(home)  # two processes
    first = a.write("USER.md", b"v1\n")
    b.write("USER.md", b"v2 by b\n", version=first.version)
    with pytest.raises(ChangedSinceReadError, match=r"USER.md changed since you read it .*version"):
        a.write("USER.md", b"v2 by a\n", version=first.version)
    assert (home / "USER.md").read_bytes() == b"v2 by b\n"
    current = a.read("USER.md")
    assert current is not None and current.text == "v2 by b\n"
    a.write("USER.md", b"v3 by a\n", version=current.version)  # with the version read now it goes through
    assert (home / "USER.md").read_bytes() == b"v3 by a\n"


def test_a_version_for_a_file_that_is_gone_is_refused(home: Path) -> None:
    files = files_in(home)
    written = files.write("AGENTS.md", b"fleet\n")
    (home / "AGENTS.md").unlink()
    with pytest.raises(ChangedSinceReadError, match="gone or unreadable"):
        files.write("AGENTS.md", b"again\n", version=written.version)
    assert not (home / "AGENTS.md").exists()


def test_a_write_replaces_a_link_itself_never_its_target(home: Path, tmp_path: Path) -> None:
    target = tmp_path / "target.md"
    target.write_text("outside")
    (home / "SOUL.md").symlink_to(target)
    files_in(home).write("SOUL.md", b"inside\n")
    assert target.read_text() == "outside"
    assert not (home / "SOUL.md").is_symlink() and (home / "SOUL.md").read_bytes() == b"inside\n"


def test_a_write_waits_for_the_lock_another_process_holds(home: Path) -> None:
    files = files_in(home)
    first = files.write("USER.md", b"v1\n")
    fd = os.open(files.lock_file, os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)  # another process in the middle of its write
    writer = threading.Thread(target=files_in(home).write, args=("USER.md", b"v2\n", first.version))
    try:
        writer.start()
        writer.join(timeout=0.3)
        assert writer.is_alive() and (home / "USER.md").read_bytes() == b"v1\n"
    finally:
        os.close(fd)
    writer.join()
    assert (home / "USER.md").read_bytes() == b"v2\n"
