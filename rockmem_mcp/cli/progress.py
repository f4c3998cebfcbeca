"""Progress of a long command on stderr: on a terminal, a bar with its rate and the time left (rich); otherwise a
plain line now and then, for a log. Only the CLI's own words and numbers are shown, never stored text, and
colour and cursor escapes go only to a terminal (rich writes to the real stderr, past the CLI's filter that
shows control characters as escapes: the escapes here are the CLI's own)."""

from __future__ import annotations

import sys
import time
from types import TracebackType
from typing import Any, TextIO

PLAIN_EVERY_S = 10.0  # a plain progress line at most this often (short runs print none)


def _raw(stream: TextIO) -> TextIO:
    return getattr(stream, "raw", stream)


class Meter:
    """`with Meter("importing", "lines") as meter: meter.update(done, total)`; `total` None: counted, not barred."""

    def __init__(self, what: str, unit: str, total: int | None = None, stream: TextIO | None = None) -> None:
        self.what, self.unit, self.total = what, unit, total
        self.stream = stream or sys.stderr
        self.started = self._said = time.monotonic()
        self.done = 0
        self._bar: Any = None
        self._task: Any = None

    def __enter__(self) -> Meter:
        if self.stream.isatty():
            from rich.console import Console
            from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

            console = Console(file=_raw(self.stream), stderr=True)
            self._bar = Progress(  # what, bar, how far, how fast, time left
                TextColumn("{task.description}", markup=False),  # brackets in a note are text
                BarColumn(),
                TextColumn("{task.fields[count]}"),
                TextColumn("{task.fields[rate]}"),
                TimeRemainingColumn(),
                console=console,
                transient=False,
            )
            self._bar.start()
            self._task = self._bar.add_task(self.what, total=self.total, count="", rate="")
        return self

    def update(self, done: int, total: int | None = None, note: str = "") -> None:
        self.done, self.total = done, total if total is not None else self.total
        elapsed = max(time.monotonic() - self.started, 1e-9)
        if self.unit == "bytes":
            rate = f"{done / elapsed / 1e6:,.1f} MB/s"
            count = f"{done / 1e6:,.1f}" + (f"/{self.total / 1e6:,.1f}" if self.total is not None else "") + " MB"
        else:
            rate = f"{done / elapsed:,.0f} {self.unit}/s"
            count = f"{done:,}" + (f"/{self.total:,}" if self.total is not None else "") + f" {self.unit}"
        if self._bar is not None:
            note = "".join(ch for ch in note if ch.isprintable())  # a note never moves the cursor
            description = f"{self.what}: {note}" if note else self.what
            self._bar.update(self._task, completed=done, total=self.total, count=count, rate=rate,
                             description=description)  # fmt: skip
            return
        now = time.monotonic()
        if now - self._said >= PLAIN_EVERY_S:
            self._said = now
            left = ""
            if self.total and done:
                left = f", about {(self.total - done) * elapsed / done:,.0f}s left"
            self.stream.write(f"{self.what}: {count} ({rate}{left})\n")  # stderr: never stdout, the protocol's
            self.stream.flush()

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        if self._bar is not None:
            self._bar.stop()


class Pulse:
    """Work that cannot count its progress (rebuilding an index from every file), from its first moment: on a
    terminal a pulsing bar with the time so far (rich redraws it from its own thread); otherwise one line at once,
    for a log. `with Pulse("reindexing", "reading every memory file"): ...`"""

    def __init__(self, what: str, doing: str, stream: TextIO | None = None) -> None:
        self.what, self.doing = what, doing
        self.stream = stream or sys.stderr
        self._bar: Any = None

    def __enter__(self) -> Pulse:
        if self.stream.isatty():
            from rich.console import Console
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

            console = Console(file=_raw(self.stream), stderr=True)
            self._bar = Progress(
                TextColumn("{task.description}", markup=False), BarColumn(), TimeElapsedColumn(), console=console
            )
            self._bar.start()
            self._bar.add_task(f"{self.what}: {self.doing}", total=None)  # no total: the bar pulses
        else:
            self.stream.write(f"{self.what}: {self.doing} ...\n")
            self.stream.flush()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        if self._bar is not None:
            self._bar.stop()
