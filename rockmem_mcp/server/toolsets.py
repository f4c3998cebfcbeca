"""Named toolsets: the one place that says which set each MCP tool belongs to, and which sets are on by default.

MCP clients put every listed tool's name, description and input schema into their model's context, so the
default surface stays under TOKEN_BUDGET; tools beyond it go into sets a user turns on with `--toolsets` /
`ROCKMEM_TOOLSETS`. A tool is written in its module (server/tools/*) and named here, in exactly one set: a new
tool in an existing set is one name in its tuple, a new set is one line (and is off unless added to DEFAULT).
Resources and prompts are always on.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from rockmem_mcp.errors import ConfigError

if TYPE_CHECKING:  # the CLI checks a selection before it pays for the MCP SDK (cli._main)
    from mcp.types import Tool

CLASSIC_WORKING = (
    *("save_to_working_memory", "get_from_working_memory", "delete_from_working_memory"),
    *("list_working_memory", "search_working_memory"),
)

TOOLSETS: dict[str, tuple[str, ...]] = {
    "memory": (
        *("save_memory", "search_memory", "get_memory", "update_memory", "delete_memory"),
        *("list_memory_categories", "remember", "forget"),
    ),
    "recall": ("recall", "reset_recall"),
    "core": ("core_memory",),
    "working": ("working_memory",),
    "conversation": ("record_turn", "get_conversation"),
    "graph": ("graph",),
    "dream": ("record_feedback", "dream"),
    "workspace": ("write_workspace_file",),
    "episodes": ("record_episode", "delete_episode"),
    "procedures": ("save_procedure", "delete_procedure"),
    "audit": ("audit", "revert"),
    "review": ("reflect", "review_proposals"),
    # One tool per action, as every set had before the general tools above (working_memory, graph, dream) took
    # their place in the default surface: for clients and prompts written for these names.
    "classic": (
        *CLASSIC_WORKING,
        *("add_entities", "add_triples", "find_entities", "get_entity", "traverse_graph"),
        *("delete_entity", "delete_triple", "merge_entities"),
        *("apply_dream", "get_dream_report"),
    ),
}

# When a set earns its tokens: what docs/toolsets.md's table and `rockmem-mcp tools` say beside each.
WHEN: dict[str, str] = {
    "memory": "always: long-term memory itself",
    "recall": "an agent that recalls before each answer (the recall prompt or resource is the tool-free way)",
    "core": "the agent keeps MEMORY.md current itself",
    "working": "multi-step tasks and sub-agents sharing scratch notes",
    "conversation": "a client that records turns for compaction and neighbours",
    "graph": "people, projects and how they relate matter to the agent",
    "dream": "the agent runs consolidation itself (the CLI's `dream` needs no tool)",
    "workspace": "the agent edits AGENTS.md, SOUL.md, USER.md or HEARTBEAT.md",
    "episodes": "the agent logs events beyond what saves log (a save logs its own)",
    "procedures": "the agent learns and keeps workflows",
    "audit": "the agent answers who changed what, and reverts",
    "review": "reflection with the user's approval, and sub-agents' proposals",
    "classic": "a client or prompt written for the one-tool-per-action names of 0.x",
}

# Every tool a client had before toolsets existed stays on by default, and core memory (always loaded, so the
# agent needs its one tool to keep it current).
DEFAULT: tuple[str, ...] = (
    *("memory", "recall", "core", "working", "conversation", "graph", "dream", "audit", "review"),
)

# What a gated sub-agent (ROCKMEM_GATED_WRITES, a subagent/… namespace) may call besides read-only tools: its
# working memory and conversation, recall, the audit (whose acknowledge refuses sub-agents), save_memory and
# remember (they file proposals) and review_proposals (it lists; deciding refuses sub-agents). Every other tool,
# a new one too, is refused (server/tools/review.py).
UNGATED: frozenset[str] = frozenset((*TOOLSETS["working"], *TOOLSETS["conversation"], *TOOLSETS["recall"])) | {
    *CLASSIC_WORKING,
    "audit",
    "save_memory",
    "remember",
    "review_proposals",
    "reflect",  # shows; running and resolving refuse sub-agents (server/tools/reflection.py)
}

# Names that stand for several sets in a selection ("default,audit" = the default sets plus audit).
GROUPS: dict[str, tuple[str, ...]] = {"default": DEFAULT, "all": tuple(TOOLSETS)}

TOKEN_BUDGET = 4_000  # for the default tools/list: grow by parameters, resources and prompts, not tools


def selected(names: Iterable[str]) -> tuple[str, ...]:
    """The toolsets `names` select, in TOOLSETS order ('default' and 'all' expand); unknown names are refused."""
    names = list(names)
    valid = [*TOOLSETS, *GROUPS]
    unknown = [name for name in names if name not in valid]
    if unknown or not names:
        problem = f"unknown toolset {', '.join(map(repr, unknown))}" if unknown else "no toolset selected"
        raise ConfigError(
            f"{problem} (ROCKMEM_TOOLSETS or --toolsets): name one or more of {', '.join(valid)}, comma-separated"
        )
    chosen = {toolset for name in names for toolset in GROUPS.get(name, (name,))}
    return tuple(toolset for toolset in TOOLSETS if toolset in chosen)


def tools_of(toolsets: Iterable[str]) -> list[str]:
    """The tool names of `toolsets` (valid set names)."""
    return [tool for toolset in toolsets for tool in TOOLSETS[toolset]]


def tokens(tools: Iterable[Tool]) -> int:
    """An estimate of what `tools` cost a model's context: compact JSON of name + description + inputSchema,
    divided by 4 (the measure the budget and docs/toolsets.md's table use)."""
    surface = [{"name": t.name, "description": t.description, "inputSchema": t.input_schema} for t in tools]
    return round(len(json.dumps(surface, separators=(",", ":"), ensure_ascii=False)) / 4)


def drop_titles(schema: object) -> None:
    """Remove the `title` annotations pydantic writes into every schema node (in place): "Content" beside the
    property `content` tells a model nothing, and they were about a tenth of the tool list's tokens. A property
    named `title` is a schema (a dict), never a string, so it stays."""
    if isinstance(schema, dict):
        if isinstance(schema.get("title"), str):
            del schema["title"]
        for value in schema.values():
            drop_titles(value)
    elif isinstance(schema, list):
        for value in schema:
            drop_titles(value)


def drop_def_descriptions(schema: dict[str, object]) -> None:
    """Remove the description of each shape under `$defs` (in place): it is the class's docstring, written for
    the code's readers ("A fact to add, as tools take it"); the parameter that uses the shape says what it is
    for, and each field says what it holds."""
    definitions = schema.get("$defs")
    if isinstance(definitions, dict):
        for definition in definitions.values():
            if isinstance(definition, dict):
                definition.pop("description", None)


def drop_null_options(schema: object) -> None:
    """An optional parameter's `anyOf: [X, {"type": "null"}]` with `default: null` becomes X (in place): leaving
    it out already means null, and the pair cost ~11 tokens a parameter. Arguments are still checked against
    the function's own signature, so a client that sends an explicit null is served as before. A required
    parameter that may be null keeps its null."""
    if isinstance(schema, dict):
        properties = schema.get("properties")
        if isinstance(properties, dict):
            required = set(schema.get("required", ()))
            for name, spec in properties.items():
                options = spec.get("anyOf") if isinstance(spec, dict) and name not in required else None
                if spec.get("default", ...) is None and isinstance(options, list) and len(options) == 2:
                    kept = [option for option in options if option != {"type": "null"}]
                    if len(kept) == 1:
                        del spec["anyOf"], spec["default"]
                        spec.update({k: v for k, v in kept[0].items() if k not in spec})
        for value in schema.values():
            drop_null_options(value)
    elif isinstance(schema, list):
        for value in schema:
            drop_null_options(value)


def table(tools: Sequence[Tool]) -> str:
    """docs/toolsets.md's toolset table (markdown) for `tools`, the full tools/list (`all`)."""
    by_name = {tool.name: tool for tool in tools}

    def row(label: str, default: str, names: list[str], listed: str, when: str) -> str:
        return f"| {label} | {default} | {listed} | {tokens(by_name[n] for n in names):,} | {when} |"

    rows = ["| toolset | on by default | tools | ≈ tokens | turn it on when |", "|---|---|---|---|---|"]
    for toolset, names in TOOLSETS.items():
        listed = ", ".join(f"`{name}`" for name in names)
        rows.append(row(f"`{toolset}`", "yes" if toolset in DEFAULT else "no", list(names), listed, WHEN[toolset]))
    for group, toolsets in GROUPS.items():
        names = tools_of(toolsets)
        rows.append(row(f"`{group}`", "", names, f"{len(names)} tools", ""))
    return "\n".join(rows) + "\n"
