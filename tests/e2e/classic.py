"""The one-tool-per-action names (the `classic` toolset) as calls of the general tools that replaced them in the
default surface (working_memory, graph, dream): tests written for either reach the default tools, so every one of
them exercises those."""

from __future__ import annotations

from typing import Any

GENERAL: dict[str, tuple[str, dict[str, str], dict[str, Any]]] = {
    "save_to_working_memory": ("working_memory", {}, {"action": "save"}),
    "get_from_working_memory": ("working_memory", {}, {"action": "get"}),
    "delete_from_working_memory": ("working_memory", {}, {"action": "delete"}),
    "list_working_memory": ("working_memory", {}, {"action": "list"}),
    "search_working_memory": ("working_memory", {}, {"action": "search"}),
    "add_entities": ("graph", {}, {"action": "add"}),
    "add_triples": ("graph", {}, {"action": "add"}),
    "find_entities": ("graph", {}, {"action": "find"}),
    "get_entity": ("graph", {"name_or_id": "name"}, {"action": "get"}),
    "traverse_graph": ("graph", {"start": "name"}, {"action": "traverse"}),
    "delete_entity": ("graph", {"name_or_id": "name"}, {"action": "delete"}),
    "delete_triple": ("graph", {"id": "triple_id"}, {"action": "delete"}),
    "merge_entities": ("graph", {"keep": "name"}, {"action": "merge"}),
    "apply_dream": ("dream", {}, {"action": "apply"}),
    "get_dream_report": ("dream", {}, {"action": "report"}),
}


def general(tool: str, arguments: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The default surface's call for `tool` (a classic name) with `arguments`; other tools as they are."""
    if tool not in GENERAL:
        return tool, arguments
    name, renamed, fixed = GENERAL[tool]
    return name, {**fixed, **{renamed.get(key, key): value for key, value in arguments.items()}}


def unwrapped(tool: str, structured: dict[str, Any]) -> dict[str, Any]:
    """What the classic `tool` returned, from its general tool's structured result: without the SDK's
    {"result": …} around a union of shapes, and a dream's report as apply_dream and get_dream_report gave it."""
    if tool in ("apply_dream", "get_dream_report"):
        return structured["report"]
    return structured["result"] if tool in GENERAL else structured
