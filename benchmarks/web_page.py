"""The web page's speed in a real browser (Playwright, Debian's Chromium) on a home of N memories.

    python -m benchmarks.search_stdio --build /tmp/stdio-100k --size 100k   # make the home once
    python -m benchmarks.web_page --home /tmp/stdio-100k/rockmem-home        # measure

Starts `rockmem-mcp ui --port 0` with this interpreter, then measures in the browser:
- first contentful paint of /ui/ (the browser's own `paint` entry), and the page ready (first listing rendered),
  each in a fresh browser context (no cache), `--loads` times;
- a search typed into the box, from the request leaving to the results rendered (the page's own `searchMs`), and
  from the keystroke to the results rendered (`sinceInputMs`: the page's 50 ms typing pause included), over
  `--queries` corpus queries;
- the same searches as plain HTTP calls to the page's API from Python (httpx), after the browser's, the same-run
  baseline: the difference is what the browser adds (fetch, JSON, rendering).
The first `WARM_UP` queries are sent once before anything is timed (what the server loads on first use).
Prints one JSON line (percentiles in milliseconds).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from benchmarks import speed
from benchmarks.corpus import Corpus

STARTUP_TIMEOUT = 600.0
WARM_UP = 10


def start(home: Path, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("ROCKMEM_")}
    command = [sys.executable, "-m", "rockmem_mcp", "--home", str(home), "ui", "--port", "0"]
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   env=environment)  # fmt: skip
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while not (found := re.search(r"web page at (http://\S+/ui/)", log.read_text())):
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(log.read_text())
        time.sleep(0.05)
    return process, found.group(1)


def measure(home: Path, queries: list[str], loads: int) -> dict[str, Any]:
    from playwright.sync_api import sync_playwright

    from tests.e2e.browser import CHROMIUM_ARGS, chromium

    process, url = start(home, home.parent / "web-page-bench.log")
    try:
        with httpx.Client(timeout=60) as http:  # one connection, as the browser keeps one
            count = http.get(url + "api/status").json()["memories"]
            for query in queries[:WARM_UP]:  # the first calls pay for what the server loads once
                http.get(url + "api/memories", params={"q": query})
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=chromium(), args=CHROMIUM_ARGS)
            paints, ready = [], []
            for _ in range(loads):
                context = browser.new_context()
                page = context.new_page()
                started = time.perf_counter()
                page.goto(url)
                page.wait_for_selector("body[data-ready='1']")
                ready.append(time.perf_counter() - started)
                paints.append(page.evaluate(
                    "performance.getEntriesByType('paint').find(e => e.name === 'first-contentful-paint').startTime"
                ) / 1000)  # fmt: skip
                context.close()
            page = browser.new_page()
            page.goto(url)
            page.wait_for_selector("body[data-ready='1']")
            searches, typed = [], []
            for query in queries:
                serial = page.evaluate("document.body.dataset.searchSerial")
                page.fill("#q", query)
                page.wait_for_function("(s) => document.body.dataset.searchSerial !== s", arg=serial)
                searches.append(float(page.evaluate("document.body.dataset.searchMs")) / 1000)
                typed.append(float(page.evaluate("document.body.dataset.sinceInputMs")) / 1000)
            browser.close()
        with httpx.Client(timeout=60) as http:  # the same searches, after the browser's: both warm
            api = [_timed_get(http, url + "api/memories", {"q": query}) for query in queries]
        rss = speed.server_rss_mb(process.pid)
    finally:
        process.terminate()
        process.wait(timeout=60)
    return {
        "memories": count,
        "first_contentful_paint_ms": speed.percentiles(paints),
        "page_ready_ms": speed.percentiles(ready),
        "search_in_browser_ms": speed.percentiles(searches),
        "keystroke_to_results_ms": speed.percentiles(typed),
        "search_api_only_ms": speed.percentiles(api),
        "server_rss_mb": rss,
        "loads": loads,
        "queries": len(queries),
    }


def _timed_get(http: httpx.Client, url: str, params: dict[str, str]) -> float:
    started = time.perf_counter()
    http.get(url, params=params).raise_for_status()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--home", type=Path, required=True)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--loads", type=int, default=10)
    args = parser.parse_args()
    print(json.dumps(measure(args.home, Corpus(seed=speed.QUERY_SEED).queries(args.queries), args.loads)))


if __name__ == "__main__":
    main()
