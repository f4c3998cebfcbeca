"""Save-time enrichment: with a language model configured, a saved memory is expanded in the background into
focused entries (content, category, tags, importance). The original is saved first and never changed;
the model has no tools in that call; a failure is logged and loses nothing."""

from __future__ import annotations

import logging
import queue
import threading

from pydantic import BaseModel, Field

from rockmem_mcp.config import Settings
from rockmem_mcp.consolidation.templates import Templates
from rockmem_mcp.errors import RockmemError
from rockmem_mcp.llm import ChatLLM
from rockmem_mcp.memory.service import MemoryService
from rockmem_mcp.models import MemoryEntry
from rockmem_mcp.search.salience import derived_importance

log = logging.getLogger(__name__)

MAX_ENRICHED = 5
QUEUE_LIMIT = 1000  # saves waiting for enrichment; beyond this they are saved without it (logged)


class EnrichedEntry(BaseModel):
    content: str
    category: str | None = None
    tags: list[str] = Field(default_factory=list)
    importance: float | None = Field(None, ge=0, le=1)


class Enrichment(BaseModel):
    entries: list[EnrichedEntry] = Field(default_factory=list, max_length=MAX_ENRICHED)


class Enricher:
    """A worker thread that expands saved memories; `submit` never blocks a save."""

    def __init__(self, memory: MemoryService, settings: Settings, templates: Templates) -> None:
        self.memory = memory
        self.settings = settings
        self.templates = templates
        self._queue: queue.Queue[MemoryEntry | None] = queue.Queue(QUEUE_LIMIT)
        self.idle = threading.Event()
        self.idle.set()
        self.enriched = 0
        self._thread = threading.Thread(target=self._run, name="rockmem-enrich", daemon=True)
        self._thread.start()

    @staticmethod
    def wanted(settings: Settings) -> bool:
        return bool(settings.llm_endpoint and settings.llm_model)

    def submit(self, entry: MemoryEntry) -> None:
        try:
            self.idle.clear()
            self._queue.put_nowait(entry)
        except queue.Full:
            log.warning("enrichment queue full: memory %s is kept as saved, without enrichment", entry.id)

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join(timeout=5)

    def _run(self) -> None:
        llm = ChatLLM(self.settings)
        try:
            while (entry := self._queue.get()) is not None:
                try:
                    self._enrich(llm, entry)
                except Exception as exc:  # a failed enrichment loses nothing: the original is saved
                    log.warning("could not enrich memory %s (%s); it is kept as saved", entry.id, exc)
                if self._queue.empty():
                    self.idle.set()
        finally:
            llm.close()
            self.idle.set()

    def _enrich(self, llm: ChatLLM, entry: MemoryEntry) -> None:
        system = self.templates.render("enrich", rules=self.templates.text("memory-rules"))
        answer = llm.complete_json(system, entry.content, Enrichment)
        original = " ".join(entry.content.casefold().split())
        made = []
        for item in answer.entries[:MAX_ENRICHED]:
            if " ".join(item.content.casefold().split()) == original:
                continue  # the memory was already one focused fact
            fields = {
                **item.model_dump(),
                "importance": derived_importance(item.importance),
                "metadata": {"source": "enrichment", "derived_from": entry.id},
            }
            try:
                made.append(self.memory.prepare_entry(fields))
            except RockmemError as exc:
                log.info("enrichment of %s proposed an invalid entry (%s); skipped", entry.id, exc)
        if made:
            self.memory.save_many(made)
            self.enriched += len(made)
            log.info("memory %s enriched into %d entries", entry.id, len(made))
