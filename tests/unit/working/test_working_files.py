"""Working-memory files: read-modify-write under a lock, shared by instances (standing for processes)."""

from __future__ import annotations

import json
from pathlib import Path

from rockmem_mcp.working.files import WorkingFiles


def on_disk(directory: Path, root: str) -> dict:
    return json.loads((directory / f"{root}.json").read_text())["entries"]


def test_a_rewrite_keeps_what_another_instance_changed_meanwhile(tmp_path: Path) -> None:
    a, b = WorkingFiles(tmp_path), WorkingFiles(tmp_path)
    with a.changing("shared") as entries:
        entries["shared/x"] = {"data": "from a"}
        entries["shared/y"] = {"data": "kept"}
    with b.changing("shared") as entries:
        entries["shared/x"] = {"data": "from b"}  # the same key, changed by the other process
    with a.changing("shared") as entries:  # a's cached encoding of shared/x must not come back
        entries["shared/z"] = {"data": "new"}
    assert on_disk(tmp_path, "shared") == {
        "shared/x": {"data": "from b"},
        "shared/y": {"data": "kept"},
        "shared/z": {"data": "new"},
    }
    assert a.read("shared") == b.read("shared") == on_disk(tmp_path, "shared")


def test_the_file_is_plain_json_with_unicode_kept(tmp_path: Path) -> None:
    files = WorkingFiles(tmp_path)
    with files.changing("session") as entries:
        entries["session/s1/note"] = {"data": 'Zürich "quoted" \\ back\nslash'}
    assert on_disk(tmp_path, "session") == {"session/s1/note": {"data": 'Zürich "quoted" \\ back\nslash'}}
    assert "Zürich" in (tmp_path / "session.json").read_text(encoding="utf-8")


def test_a_failed_change_writes_nothing(tmp_path: Path) -> None:
    files = WorkingFiles(tmp_path)
    with files.changing("patrol") as entries:
        entries["patrol/disk/finding"] = {"data": "90%"}
    try:
        with files.changing("patrol") as entries:
            entries.clear()
            raise RuntimeError("the caller failed part-way")
    except RuntimeError:
        pass
    assert on_disk(tmp_path, "patrol") == {"patrol/disk/finding": {"data": "90%"}}
    assert files.read("patrol") == {"patrol/disk/finding": {"data": "90%"}}
