"""The forget tool (seed 004 §8.3): find what to forget, then forget, restore or delete for good what the user
confirmed, across memories, episodes, procedures, graph entities and core memory lines."""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations
from pydantic import Field

from rockmem_mcp.errors import InvalidInputError
from rockmem_mcp.governance.shapes import ForgetResult
from rockmem_mcp.server.context import services
from rockmem_mcp.server.tools import reports_errors


def register(server: MCPServer) -> None:
    @server.tool(
        title="Forget everywhere",
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True),
    )
    @reports_errors
    def forget(
        ctx: Context,
        query: Annotated[str, Field(description="Lists candidates only")] = "",
        ids: Annotated[list[str], Field(description="Ids the user confirmed")] = [],  # noqa: B006 - never mutated
        permanent: Annotated[bool, Field(description="Delete for good")] = False,
        restore: Annotated[bool, Field(description="Bring ids back")] = False,
        reason: Annotated[str, Field(description="Why")] = "",
    ) -> ForgetResult:
        """Find what to forget in all stores (query), show the user, forget only the ids they confirm."""
        if bool(query) == bool(ids):
            raise InvalidInputError("pass either query (to find candidates) or ids (the ones the user confirmed)")
        forgetting = services(ctx).forgetting
        assert forgetting is not None  # the lifespan builds it
        if query:
            return ForgetResult(candidates=forgetting.find(query))
        if restore:
            if permanent:
                raise InvalidInputError("restore brings forgotten items back; it cannot be permanent")
            return forgetting.restore(ids)
        return forgetting.forget(ids, permanent, reason or None)
