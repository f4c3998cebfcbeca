"""When a reflection starts (seed 004 §10.1): manual (the reflect tool, `rockmem-mcp reflect`), session end (the
reflect tool with trigger session-end, or the conversation quiet for `reflection_idle_minutes`), the schedule
(`reflection_at`, local time, 03:00 by default) and a threshold (`reflection_threshold` new memories and
episodes since the last reflection).

`ReflectionTriggers.tick` checks the automatic ones and runs a reflection when one is due; the CLI sidecar
(`rockmem-mcp reflect --every 10m`) calls it in a loop, and a serving process that opts in
(`reflection_in_server`) in a background thread. One reflection runs per home at a time (the reflection
lock): a tick that finds one running does nothing.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import datetime, timedelta

from rockmem_mcp.config import Settings
from rockmem_mcp.consolidation.reflection import Reflector
from rockmem_mcp.consolidation.reflection_files import ReflectionBusy
from rockmem_mcp.consolidation.schedule import last_scheduled
from rockmem_mcp.consolidation.shapes import Reflection
from rockmem_mcp.errors import RockmemError
from rockmem_mcp.llm import ChatLLM
from rockmem_mcp.models import utc_now

log = logging.getLogger(__name__)

TICK_SECONDS = 60.0


class ReflectionTriggers:
    def __init__(
        self,
        settings: Settings,
        reflector: Callable[[], Reflector],
        clock: Callable[[], datetime] = utc_now,
        last_turn: Callable[[], datetime | None] | None = None,
        llm: Callable[[], ChatLLM | None] | None = None,
    ) -> None:
        """`reflector`: makes the engine (first when a tick needs it: a server's graph may still be loading);
        `last_turn`: when the conversation last had a turn (the idle trigger); `llm`: a language model for a
        cycle (None: deterministic)."""
        self.settings = settings
        self._make_reflector = reflector
        self._reflector: Reflector | None = None
        self._clock = clock
        self._last_turn = last_turn
        self._llm = llm
        self._started = clock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def reflector(self) -> Reflector:
        if self._reflector is None:
            self._reflector = self._make_reflector()
        return self._reflector

    def due(self) -> str | None:
        """The automatic trigger due now, if any: schedule, idle or threshold. None while a reflection waits for
        the user: another would plan much the same again, and spend its budget doing so."""
        if self.reflector.pending():
            return None
        now = self._clock()
        last = self.reflector.last_started()
        since = last or self._started  # a home never reflected on waits for its first scheduled moment
        if last_scheduled(now, self.settings.reflection_at) > since:
            return "schedule"
        turn = self._last_turn() if self._last_turn is not None else None
        quiet = timedelta(minutes=self.settings.reflection_idle_minutes)
        if turn is not None and (last is None or turn > last) and now - turn >= quiet:
            return "idle"
        if self.reflector.new_since_last() >= self.settings.reflection_threshold:
            return "threshold"
        return None

    def tick(self) -> Reflection | None:
        """Run a reflection if one is due (and none is running); its result, or None."""
        trigger = self.due()
        if trigger is None:
            return None
        return self.run(trigger)

    def run(self, trigger: str) -> Reflection | None:
        llm = self._llm() if self._llm is not None else None
        try:
            reflection = self.reflector.run(trigger, llm)
        except ReflectionBusy:
            return None
        finally:
            if llm is not None:
                llm.close()
        log.info("reflection %s (%s): %s", reflection.id, trigger, reflection.status)
        return reflection

    # ------------------------------------------------------------------ in a serving process
    def start(self, interval: float = TICK_SECONDS) -> None:
        """Tick in a daemon thread every `interval` seconds until `close`."""

        def loop() -> None:
            while not self._stop.wait(interval):
                try:
                    self.tick()
                except (RockmemError, OSError) as exc:  # a failed cycle is logged; the next tick tries again
                    log.warning("reflection trigger: %s", exc)

        self._thread = threading.Thread(target=loop, name="rockmem-reflection", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
