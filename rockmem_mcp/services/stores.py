"""Opening a home's persistent stores together (the server's and the CLI's one way to do it)."""

from __future__ import annotations

from rockmem_mcp.config import Settings
from rockmem_mcp.services.graph import GraphService
from rockmem_mcp.services.memory import MemoryService


def open_stores(settings: Settings) -> tuple[MemoryService, GraphService]:
    """The long-term memory and the knowledge graph of `settings.home`; nothing is left open on failure."""
    memory = MemoryService(settings)
    try:
        return memory, GraphService(settings)
    except BaseException:
        memory.close()
        raise
