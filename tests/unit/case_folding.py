"""A case-insensitive, case-preserving folder for tests, like the default filesystems of macOS and Windows.

The real thing when this machine allows it: an ext4 image made with `-O casefold`, loop-mounted, with a folder
marked `chattr +F` (root, and a kernel built with CONFIG_UNICODE). Otherwise a faithful simulation: the `os`
functions and `open` are wrapped so that a path below the folder resolves each part to an existing name that
equals it ignoring case (as the filesystem's lookup would), and a new name keeps the case it was given. Both
answer the same calls the same way for everything rockmem does (open, stat, scandir, mkdir, rename, unlink).
"""

from __future__ import annotations

import builtins
import contextlib
import io
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

IMAGE_BYTES = 64 * 1024 * 1024


@contextlib.contextmanager
def case_insensitive_folder(base: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, str]]:
    """A new empty case-insensitive folder under `base`, and how it was made ('ext4 casefold' or
    'simulated')."""
    mounted = _casefold_mount(base)
    if mounted is not None:
        try:
            yield mounted, "ext4 casefold"
        finally:
            subprocess.run(["umount", str(mounted.parent)], check=False, capture_output=True)
        return
    folder = base / "case-insensitive"
    folder.mkdir()
    _simulate(folder, monkeypatch)
    yield folder, "simulated"


def _casefold_mount(base: Path) -> Path | None:
    """A casefolded folder on a loop-mounted ext4 image, or None where this kernel or sandbox cannot."""
    if os.geteuid() != 0 or not shutil.which("mkfs.ext4") or not Path("/sys/fs/ext4/features/casefold").exists():
        return None
    image, mount_point = base / "casefold.img", base / "casefold"
    mount_point.mkdir()
    with image.open("wb") as f:
        f.truncate(IMAGE_BYTES)
    made = subprocess.run(["mkfs.ext4", "-q", "-O", "casefold", "-E", "encoding=utf8", str(image)], check=False)
    if made.returncode != 0:
        return None
    if subprocess.run(["mount", "-o", "loop", str(image), str(mount_point)], check=False).returncode != 0:
        return None
    folder = mount_point / "home"
    folder.mkdir()
    if subprocess.run(["chattr", "+F", str(folder)], check=False).returncode != 0:
        subprocess.run(["umount", str(mount_point)], check=False)
        return None
    return folder


def _simulate(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = {name: getattr(os, name) for name in PATH_FUNCTIONS}
    real_open = builtins.open
    prefix = str(root) + os.sep

    def fold(path: Any) -> Any:
        if isinstance(path, int | bytes):
            return path
        text = os.fspath(path)
        if not isinstance(text, str) or not text.startswith(prefix):
            return path
        current = str(root)
        parts = [p for p in text[len(prefix) :].split(os.sep) if p not in ("", ".")]
        for i, part in enumerate(parts):
            candidate = os.path.join(current, part)
            try:
                real["lstat"](candidate)
            except OSError:
                try:
                    names = real["listdir"](current)
                except OSError:
                    names = []
                match = next((n for n in names if n.casefold() == part.casefold()), None)
                if match is None:  # nothing of that name: a new one keeps its case, and so does what is below
                    return os.path.join(candidate, *parts[i + 1 :])
                candidate = os.path.join(current, match)
            current = candidate
        return current

    def wrap(function: Callable[..., Any], paths: int) -> Callable[..., Any]:
        def folded(*args: Any, **kwargs: Any) -> Any:
            return function(*[fold(a) if i < paths else a for i, a in enumerate(args)], **kwargs)

        return folded

    for name, function in real.items():
        monkeypatch.setattr(os, name, wrap(function, PATH_FUNCTIONS[name]))
    folded_open = wrap(real_open, 1)
    monkeypatch.setattr(builtins, "open", folded_open)
    monkeypatch.setattr(io, "open", folded_open)


# os functions that take paths, and how many leading arguments are paths.
PATH_FUNCTIONS = {
    "open": 1,
    "stat": 1,
    "lstat": 1,
    "scandir": 1,
    "listdir": 1,
    "mkdir": 1,
    "rmdir": 1,
    "unlink": 1,
    "remove": 1,
    "utime": 1,
    "replace": 2,
    "rename": 2,
}
