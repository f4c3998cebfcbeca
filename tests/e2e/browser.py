"""A real headless browser for the web page's tests: Playwright driving Debian's Chromium.

Playwright's own browser download needs a network this machine does not have, so the tests use the distribution's
Chromium (.ci/run installs it; without it these tests are skipped, saying why)."""

from __future__ import annotations

import os

import pytest

CHROMIUM_PATHS = ("/usr/bin/chromium", "/usr/bin/chromium-browser")
# As root with no display and a closed network: no sandbox (root), no GPU, and none of Chromium's own background
# connections (each would be refused, many at a time).
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
]  # fmt: skip


def chromium() -> str:
    """The Chromium executable; the browser tests are skipped, saying how to get it, when this machine lacks it
    (tests never install system packages: `.ci/run` installs it for CI)."""
    found = next((path for path in CHROMIUM_PATHS if os.access(path, os.X_OK)), None)
    if found is None:
        pytest.skip("the web page's browser tests need Chromium: install Debian's package (apt-get install chromium)")
    return found
