"""What tools reach through the server's lifespan context."""

from __future__ import annotations

from dataclasses import dataclass

from mcp.server.mcpserver import Context

from rockmem_mcp.services.memory import MemoryService


@dataclass
class Services:
    memory: MemoryService


def services(ctx: Context) -> Services:
    return ctx.request_context.lifespan_context
