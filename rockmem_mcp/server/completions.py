"""Completions (`completion/complete`): what a client offers as a user types a resource template's argument.

Memory ids, category paths, tags, entity names (and aliases), episode days, working-memory keys, workspace files
and procedure names complete from what exists, matched from the start of what was typed (names in any case), for
resource templates and for the `remember` prompt's category. Free text (a recall query, a prompt's message) and an
unknown reference complete to an empty list.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp_types import Completion, CompletionArgument, PromptReference, ResourceTemplateReference

from rockmem_mcp.models import ROOTS
from rockmem_mcp.server.context import Services

MAX_VALUES = 100  # the most the protocol lets one completion carry


def register(server: MCPServer, current: Callable[[], Services]) -> None:
    @server.completion()
    async def complete(
        ref: PromptReference | ResourceTemplateReference, argument: CompletionArgument, context: Any
    ) -> Completion | None:
        key = (ref.uri, argument.name) if isinstance(ref, ResourceTemplateReference) else (ref.name, argument.name)
        source = SOURCES.get(key)  # a prompt's free text (a recall message) completes to nothing
        if source is None:
            return None
        values, total = source(current(), argument.value)
        return Completion(values=values, total=total, has_more=total > len(values))


def _starting(values: list[str], prefix: str, fold: bool = False) -> tuple[list[str], int]:
    wanted = prefix.casefold() if fold else prefix
    found = [v for v in values if (v.casefold() if fold else v).startswith(wanted)]
    return found[:MAX_VALUES], len(found)


def _working_keys(svc: Services, prefix: str) -> tuple[list[str], int]:
    working = svc.working(None)
    return _starting(sorted(info.key for root in ROOTS for info in working.list(root)), prefix)


def _categories(svc: Services, prefix: str) -> tuple[list[str], int]:
    return _starting([c.category for c in svc.memory.categories().categories], prefix, fold=True)


# (resource template or prompt name, argument) -> what completes it
SOURCES: dict[tuple[str, str], Callable[[Services, str], tuple[list[str], int]]] = {
    ("rockmem://categories/{+path}", "path"): _categories,
    ("rockmem://tags/{tag}", "tag"): lambda svc, typed: svc.memory.tags_starting(typed, MAX_VALUES),
    ("remember", "category"): _categories,
    ("rockmem://memory/{id}", "id"): lambda svc, typed: svc.memory.ids_starting(typed, MAX_VALUES),
    ("rockmem://graph/{entity}", "entity"): lambda svc, typed: svc.graph.names_starting(typed, MAX_VALUES),
    ("rockmem://entities/{name}", "name"): lambda svc, typed: svc.graph.names_starting(typed, MAX_VALUES),
    ("rockmem://episodes/{day}", "day"): lambda svc, typed: _starting(
        [day.isoformat() for day, _ in reversed(svc.episodes.days())], typed
    ),
    ("rockmem://working/{+key}", "key"): _working_keys,
    ("rockmem://workspace/{name}", "name"): lambda svc, typed: _starting(
        [f.name for f in svc.workspace.files().files], typed, fold=True
    ),
    ("rockmem://procedures/{name}", "name"): lambda svc, typed: _starting(
        sorted(p.name for p in svc.procedures.list()), typed, fold=True
    ),
}
