"""A real headless browser for the web page's tests: Playwright driving Debian's Chromium.

Playwright's own browser download needs a network this machine does not have, so the tests use the distribution's
Chromium, installed by the test set-up (apt-get, as root) when it is missing."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

CHROMIUM_PATHS = ("/usr/bin/chromium", "/usr/bin/chromium-browser")
# As root with no display and a closed network: no sandbox (root), no GPU, and none of Chromium's own background
# connections (each would be refused, many at a time).
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
]  # fmt: skip
LOCK = Path(tempfile.gettempdir()) / "rockmem-chromium-install.lock"  # test workers install it once


def chromium() -> str:
    """The Chromium executable, installed from Debian's packages first if this machine lacks it."""
    with LOCK.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        found = next((path for path in CHROMIUM_PATHS if os.access(path, os.X_OK)), None)
        if found:
            return found
        if shutil.which("apt-get") is None or os.geteuid() != 0:
            raise RuntimeError(
                "the web page's browser tests need Chromium: install Debian's package (apt-get install chromium)"
            )
        env = os.environ | {"DEBIAN_FRONTEND": "noninteractive"}
        installed = subprocess.run(["apt-get", "install", "-y", "-q", "chromium"], env=env, capture_output=True)
        if installed.returncode != 0:  # the package lists may be missing on a fresh machine
            subprocess.run(["apt-get", "update", "-q"], env=env, capture_output=True, check=True)
            subprocess.run(["apt-get", "install", "-y", "-q", "chromium"], env=env, capture_output=True, check=True)
        return next(path for path in CHROMIUM_PATHS if os.access(path, os.X_OK))
