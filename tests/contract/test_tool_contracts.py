"""The MCP tool surface as clients see it, pinned.

Agents are prompted with these names, parameters and hints; renaming a tool or a parameter, changing a
default or a hint must be a deliberate act that updates this file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp.types import Prompt, Tool
from mcp_types import INVALID_PARAMS

from rockmem_mcp.config import Settings
from rockmem_mcp.consolidation.shapes import DreamPlan
from rockmem_mcp.server import toolsets
from rockmem_mcp.server.app import build_server

REQUIRED = object()  # marks a parameter without a default

# tool -> {parameter: default (or REQUIRED)}
PARAMETERS: dict[str, dict[str, Any]] = {
    "save_memory": dict(content=REQUIRED, category=None, tags=None, metadata=None, importance=None, pinned=None),
    "search_memory": dict(
        query=None,
        category=None,
        tags=None,
        limit=20,
        created_after=None,
        created_before=None,
        include_archived=False,
        include_dormant=False,
        mode=None,
        stores=None,
    ),
    "get_memory": dict(id=REQUIRED),
    "update_memory": dict(
        id=REQUIRED, content=None, category=None, tags=None, metadata=None, importance=None, restore=False, pinned=None
    ),
    "delete_memory": dict(id=REQUIRED, permanent=False, reason=None, confirm_pinned=False),
    "list_memory_categories": {},
    "remember": dict(content=REQUIRED, route=None),
    "forget": dict(query="", ids=[], permanent=False, restore=False, reason=""),
    "audit": dict(item="", history=False, action="", actor="", since="", until="", limit=20, acknowledge=[]),
    "revert": dict(item="", to="", run="", home_as_of=""),
    "reflect": dict(action="show", id="", action_ids=[], edits={}, reason=""),
    "save_to_working_memory": dict(key=REQUIRED, data=REQUIRED, ttl_minutes=5, category=None, tags=None),
    "get_from_working_memory": dict(key=REQUIRED),
    "delete_from_working_memory": dict(key=REQUIRED),
    "list_working_memory": dict(namespace=None),
    "search_working_memory": dict(query=None, category=None, tags=None, namespace=None, limit=20),
    "record_turn": dict(role=REQUIRED, content=REQUIRED, session_id=None, tokens_used=0, token_limit=0),
    "get_conversation": dict(session_id=None, last_n=20),
    "recall": dict(message=REQUIRED, session_id=None),
    "reset_recall": dict(session_id=None),
    "core_memory": dict(action="read", block=None, text=None, line=None, version=None),
    "add_entities": dict(entities=REQUIRED),
    "add_triples": dict(triples=REQUIRED),
    "find_entities": dict(query=None, type=None, limit=20),
    "get_entity": dict(name_or_id=REQUIRED),
    "traverse_graph": dict(start=REQUIRED, max_hops=2, limit=15, min_confidence=0),
    "delete_entity": dict(name_or_id=REQUIRED),
    "delete_triple": dict(id=REQUIRED),
    "merge_entities": dict(keep=REQUIRED, merge=REQUIRED),
    "record_feedback": dict(type=REQUIRED, content=REQUIRED, session_id=None, metadata=None),
    "dream": dict(
        action="start", dream_pass="consolidation", mode="auto", dry_run=False, offset=0, plan=None, report_id=None
    ),
    "working_memory": dict(
        action=REQUIRED,
        key=None,
        data=None,
        ttl_minutes=5,
        query=None,
        category=None,
        tags=None,
        namespace=None,
        limit=20,
    ),
    "graph": dict(
        action=REQUIRED,
        triples=None,
        entities=None,
        name=None,
        merge=None,
        triple_id=None,
        query=None,
        type=None,
        max_hops=2,
        min_confidence=0,
        limit=None,
    ),
    "apply_dream": dict(plan=REQUIRED, dream_pass="consolidation", dry_run=False),
    "get_dream_report": dict(report_id=None),
    "review_proposals": dict(action="list", id="", store=None, reason="", user_confirmed=False),
}

# tool -> {parameter: JSON type ('a|b' for a union)}
PARAMETER_TYPES: dict[str, dict[str, str]] = {
    "save_memory": {
        "content": "string",
        "category": "string|null",
        "tags": "array|null",
        "metadata": "object|null",
        "importance": "number|null",
        "pinned": "boolean|null",
    },
    "search_memory": {
        "query": "string|null",
        "category": "string|null",
        "tags": "array|null",
        "limit": "integer",
        "created_after": "string|null",
        "created_before": "string|null",
        "include_archived": "boolean",
        "include_dormant": "boolean",
        "mode": "string|null",
        "stores": "array|null",
    },
    "get_memory": {"id": "string"},
    "forget": {"query": "string", "ids": "array", "permanent": "boolean", "restore": "boolean", "reason": "string"},
    "audit": {
        "item": "string",
        "history": "boolean",
        "action": "string",
        "actor": "string",
        "since": "string",
        "until": "string",
        "limit": "integer",
        "acknowledge": "array",
    },
    "revert": {"item": "string", "to": "string", "run": "string", "home_as_of": "string"},
    "reflect": {
        "action": "string",
        "id": "string",
        "action_ids": "array",
        "edits": "object",
        "reason": "string",
    },
    "review_proposals": {
        "action": "string",
        "id": "string",
        "store": "string|null",
        "reason": "string",
        "user_confirmed": "boolean",
    },
    "update_memory": {
        "id": "string",
        "content": "string|null",
        "category": "string|null",
        "tags": "array|null",
        "metadata": "object|null",
        "importance": "number|null",
        "restore": "boolean",
        "pinned": "boolean|null",
    },
    "delete_memory": {"id": "string", "permanent": "boolean", "reason": "string|null", "confirm_pinned": "boolean"},
    "list_memory_categories": {},
    "remember": {"content": "string", "route": "object|null"},
    "save_to_working_memory": {
        "key": "string",
        "data": "string",
        "ttl_minutes": "number",
        "category": "string|null",
        "tags": "array|null",
    },
    "list_working_memory": {"namespace": "string|null"},
    "add_entities": {"entities": "array"},
    "add_triples": {"triples": "array"},
    "find_entities": {"query": "string|null", "type": "string|null", "limit": "integer"},
    "get_entity": {"name_or_id": "string"},
    "traverse_graph": {"start": "string", "max_hops": "integer", "limit": "integer", "min_confidence": "number"},
    "delete_entity": {"name_or_id": "string"},
    "delete_triple": {"id": "string"},
    "merge_entities": {"keep": "string", "merge": "string"},
    "record_feedback": {
        "type": "string",
        "content": "string",
        "session_id": "string|null",
        "metadata": "object|null",
    },
    "dream": {
        "action": "string",
        "dream_pass": "string",
        "mode": "string",
        "dry_run": "boolean",
        "offset": "integer",
        "plan": "object|null",
        "report_id": "string|null",
    },
    "get_dream_report": {"report_id": "string|null"},
}

# tool -> the annotation hints that are set (every other hint is unset)
ANNOTATIONS: dict[str, dict[str, bool]] = {
    "save_memory": {"read_only_hint": False, "destructive_hint": False, "idempotent_hint": False},
    "search_memory": {"read_only_hint": True},
    "get_memory": {"read_only_hint": True},
    "update_memory": {"read_only_hint": False, "destructive_hint": False, "idempotent_hint": True},
    "delete_memory": {"read_only_hint": False, "destructive_hint": True, "idempotent_hint": True},
    "list_memory_categories": {"read_only_hint": True},
    "remember": {"read_only_hint": False, "destructive_hint": False, "idempotent_hint": False},
    "forget": {"read_only_hint": False, "destructive_hint": True, "idempotent_hint": True},
    "audit": {"read_only_hint": False, "destructive_hint": False, "idempotent_hint": True},
    "revert": {"read_only_hint": False, "destructive_hint": True, "idempotent_hint": False},
    "reflect": {"read_only_hint": False, "destructive_hint": True, "idempotent_hint": False},
    "save_to_working_memory": {"read_only_hint": False, "destructive_hint": False, "idempotent_hint": True},
    "get_from_working_memory": {"read_only_hint": True},
    "delete_from_working_memory": {"read_only_hint": False, "destructive_hint": True, "idempotent_hint": True},
    "list_working_memory": {"read_only_hint": True},
    "search_working_memory": {"read_only_hint": True},
    "working_memory": {"read_only_hint": False, "destructive_hint": True, "idempotent_hint": False},
    "graph": {"read_only_hint": False, "destructive_hint": True, "idempotent_hint": False},
    "record_turn": {"read_only_hint": False, "destructive_hint": False, "idempotent_hint": False},
    "get_conversation": {"read_only_hint": True},
    "recall": {"read_only_hint": False, "destructive_hint": False, "idempotent_hint": False},
    "reset_recall": {"read_only_hint": False, "destructive_hint": False, "idempotent_hint": True},
    "core_memory": {"read_only_hint": False, "destructive_hint": True, "idempotent_hint": False},
    "add_entities": {"read_only_hint": False, "destructive_hint": False, "idempotent_hint": True},
    "add_triples": {"read_only_hint": False, "destructive_hint": False, "idempotent_hint": True},
    "find_entities": {"read_only_hint": True},
    "get_entity": {"read_only_hint": True},
    "traverse_graph": {"read_only_hint": True},
    "delete_entity": {"read_only_hint": False, "destructive_hint": True, "idempotent_hint": False},
    "delete_triple": {"read_only_hint": False, "destructive_hint": True, "idempotent_hint": False},
    "merge_entities": {"read_only_hint": False, "destructive_hint": True, "idempotent_hint": False},
    "record_feedback": {"read_only_hint": False, "destructive_hint": False, "idempotent_hint": False},
    "dream": {"read_only_hint": False, "destructive_hint": True, "idempotent_hint": False},
    "apply_dream": {"read_only_hint": False, "destructive_hint": True, "idempotent_hint": False},
    "get_dream_report": {"read_only_hint": True},
    "review_proposals": {"read_only_hint": False, "destructive_hint": False, "idempotent_hint": False},
}

# Numeric bounds agents rely on.
BOUNDS = {
    ("search_memory", "limit"): {"minimum": 1, "maximum": 200},
    ("save_memory", "importance"): {"minimum": 0, "maximum": 1},
    ("update_memory", "importance"): {"minimum": 0, "maximum": 1},
    ("find_entities", "limit"): {"minimum": 1, "maximum": 200},
    ("traverse_graph", "max_hops"): {"minimum": 1, "maximum": 5},
    ("traverse_graph", "limit"): {"minimum": 1, "maximum": 200},
    ("traverse_graph", "min_confidence"): {"minimum": 0, "maximum": 1},
    ("dream", "offset"): {"minimum": 0, "maximum": None},
}


@pytest.fixture(scope="module")
def tools(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Tool]:
    """The default tools/list and the classic set (the one-tool-per-action names the general tools replaced)."""
    home = tmp_path_factory.mktemp("contract-home")
    settings = Settings.load({"home": home, "toolsets": "default,classic"}, env={})

    async def list_tools() -> list[Tool]:
        async with Client(build_server(settings)) as client:
            return (await client.list_tools()).tools

    return {tool.name: tool for tool in anyio.run(list_tools)}


def _json_type(schema: dict[str, Any]) -> str:
    if "anyOf" in schema:
        return "|".join(_json_type(option) for option in schema["anyOf"])
    return schema["type"]


def _advertised(spec: dict[str, Any], default: Any) -> dict[str, Any]:
    """An optional parameter whose default is null is advertised without the null (leaving it out means null;
    issue 43: ~11 tokens a parameter): put the null back to compare with the tables below."""
    if default is None and "anyOf" not in spec and "default" not in spec:
        return {"anyOf": [spec, {"type": "null"}], "default": None}
    return spec


def test_the_tool_names_are_exactly_these(tools: dict[str, Tool]) -> None:
    assert sorted(tools) == sorted(PARAMETERS)
    default = toolsets.tools_of(toolsets.DEFAULT)
    assert sorted(default) == sorted(set(PARAMETERS) - set(toolsets.TOOLSETS["classic"]))


TOOL_LIST_TOKEN_BUDGET = 4_000  # every tool lands in the client model's context: grow by parameters, not tools


def test_the_default_tool_list_fits_its_token_budget(tools: dict[str, Tool]) -> None:
    """Compact JSON of name + description + inputSchema, divided by 4 (a documented estimate); tools beyond
    the budget go into a toolset that is off by default (server/toolsets.py)."""
    default = [tools[name] for name in toolsets.tools_of(toolsets.DEFAULT)]
    surface = [
        {"name": tool.name, "description": tool.description, "inputSchema": tool.input_schema} for tool in default
    ]
    tokens = len(json.dumps(surface, separators=(",", ":"), ensure_ascii=False)) / 4
    assert tokens <= TOOL_LIST_TOKEN_BUDGET, f"tools/list is ~{tokens:.0f} tokens, over {TOOL_LIST_TOKEN_BUDGET}"
    assert toolsets.TOKEN_BUDGET == TOOL_LIST_TOKEN_BUDGET
    assert toolsets.tokens(default) == round(tokens)  # the measure `rockmem-mcp tools` and the README use


@pytest.mark.parametrize("name", sorted(PARAMETERS))
def test_parameter_names_required_set_and_defaults(tools: dict[str, Tool], name: str) -> None:
    schema = tools[name].input_schema
    properties = schema.get("properties", {})
    expected = PARAMETERS[name]

    assert set(properties) == set(expected), "parameters were added, removed or renamed"
    assert set(schema.get("required", [])) == {p for p, default in expected.items() if default is REQUIRED}
    for param, default in expected.items():
        if default is REQUIRED:
            assert "default" not in properties[param], param
        elif default is None:  # omitted means null: advertised without a default (drop_null_options)
            assert properties[param].get("default") is None and "anyOf" not in properties[param], param
        else:
            assert "default" in properties[param], f"{param} lost its default"
            assert properties[param]["default"] == default, param
    assert "ctx" not in properties  # the MCP context is injected, never a parameter


@pytest.mark.parametrize("name", sorted(PARAMETER_TYPES))
def test_parameter_types(tools: dict[str, Tool], name: str) -> None:
    properties = tools[name].input_schema.get("properties", {})
    defaults = PARAMETERS.get(name, {})
    advertised = {param: _advertised(spec, defaults.get(param, REQUIRED)) for param, spec in properties.items()}
    assert {param: _json_type(spec) for param, spec in advertised.items()} == PARAMETER_TYPES[name]


@pytest.mark.parametrize(("name", "param"), sorted(BOUNDS))
def test_numeric_bounds(tools: dict[str, Tool], name: str, param: str) -> None:
    spec = tools[name].input_schema["properties"][param]
    options = spec.get("anyOf", [spec])
    numeric = next(option for option in options if option["type"] in ("integer", "number"))
    assert {k: numeric.get(k) for k in ("minimum", "maximum")} == BOUNDS[(name, param)]


@pytest.mark.parametrize("name", sorted(ANNOTATIONS))
def test_annotations(tools: dict[str, Tool], name: str) -> None:
    annotations = tools[name].annotations
    assert annotations is not None
    assert annotations.model_dump(exclude_none=True) == ANNOTATIONS[name]


@pytest.mark.parametrize("name", sorted(PARAMETERS))
def test_every_tool_has_a_description_and_an_output_schema(tools: dict[str, Tool], name: str) -> None:
    tool = tools[name]
    assert tool.description and tool.description.strip()
    assert tool.output_schema, f"{name} has no output schema (structured content)"
    assert tool.output_schema.get("type") == "object"
    assert tool.output_schema.get("properties")


@pytest.mark.parametrize("name", sorted(PARAMETERS))
def test_every_parameter_is_described(tools: dict[str, Tool], name: str) -> None:
    for param, spec in tools[name].input_schema.get("properties", {}).items():
        assert spec.get("description", "").strip(), f"{name}.{param} has no description"


@pytest.mark.parametrize(
    ("names", "fields"),
    [
        (("save_memory", "get_memory", "update_memory"), {"id", "content", "category", "tags", "created_at"}),
        (("search_memory",), {"results", "total_matches", "mode", "unembedded", "workspace"}),
        (("delete_memory",), {"id", "permanent", "entry"}),
        (("list_memory_categories",), {"categories", "uncategorized", "total"}),
        (("forget",), {"candidates", "items"}),
        (("audit",), {"entries", "versions", "note"}),
        (("revert",), {"revert_id", "restored_to", "restored", "removed", "skipped"}),
        (("review_proposals",), {"proposals", "note"}),
        (("save_to_working_memory",), {"entry", "evicted"}),
        (("get_from_working_memory",), {"key", "data", "expires_at"}),
        (("list_working_memory",), {"namespace", "entries"}),
        (("search_working_memory",), {"namespace", "results"}),
        (("record_turn",), {"session_id", "role", "content", "at"}),
        (("get_conversation",), {"session_id", "turns", "kept"}),
        (
            ("recall",),
            {"text", "memories", "working", "first_turn_fallback", "already_injected", "entities", "graph"},
        ),
        (("add_entities",), {"entities"}),
        (("add_triples",), {"triples", "created_entities"}),
        (("find_entities",), {"results", "total_matches"}),
        (("get_entity",), {"entity", "facts"}),
        (("traverse_graph",), {"start", "facts", "entities_reached", "truncated"}),
        (("delete_entity",), {"entity", "triples_deleted"}),
        (("delete_triple",), {"fact"}),
        (("merge_entities",), {"entity", "merged_id", "triples_repointed", "duplicates_folded"}),
        (("record_feedback",), {"id", "type", "content", "session_id", "metadata", "at"}),
        (("dream",), {"mode", "report", "material", "next_step"}),
        (
            ("apply_dream", "get_dream_report"),
            {"id", "dream_pass", "mode", "dry_run", "started_at", "finished_at", "applied", "rejected", "summary"},
        ),
    ],
)
def test_output_schemas_carry_the_fields_clients_read(tools: dict[str, Tool], names: tuple[str, ...], fields) -> None:
    for name in names:
        assert fields <= set(tools[name].output_schema["properties"]), name


def test_search_modes_are_offered_as_an_enum(tools: dict[str, Tool]) -> None:
    spec = tools["search_memory"].input_schema["properties"]["mode"]
    assert spec["type"] == "string" and spec["enum"] == ["hybrid", "bm25", "vector", "rockbot"]


# Choices offered as enums: (tool, parameter) -> the values, in order.
ENUMS = {
    ("dream", "dream_pass"): ["consolidation", "preferences", "anti-patterns", "entities", "graph", "episodes"],
    ("apply_dream", "dream_pass"): ["consolidation", "preferences", "anti-patterns", "entities", "graph", "episodes"],
    ("dream", "mode"): ["auto", "agent", "deterministic"],
    ("dream", "action"): ["start", "apply", "report"],
    ("working_memory", "action"): ["save", "get", "delete", "list", "search"],
    ("graph", "action"): ["add", "find", "get", "traverse", "delete", "merge"],
    ("record_feedback", "type"): ["Correction", "ToolFailure", "SessionSummary", "UserThumbsUp", "UserThumbsDown"],
}


@pytest.mark.parametrize(("name", "param"), sorted(ENUMS))
def test_dream_choices_are_offered_as_enums(tools: dict[str, Tool], name: str, param: str) -> None:
    assert tools[name].input_schema["properties"][param]["enum"] == ENUMS[(name, param)]


# The objects inside the graph tools' lists: tool -> (list parameter, {field: default (or REQUIRED)}).
LIST_ITEMS = {
    "add_entities": ("entities", dict(name=REQUIRED, type=None, aliases=None, metadata=None)),
    "add_triples": (
        "triples",
        dict(subject=REQUIRED, predicate=REQUIRED, object=REQUIRED, confidence=None, source=None),
    ),
}


@pytest.mark.parametrize("name", sorted(LIST_ITEMS))
def test_list_items_name_their_fields(tools: dict[str, Tool], name: str) -> None:
    param, expected = LIST_ITEMS[name]
    schema = tools[name].input_schema
    ref = schema["properties"][param]["items"]["$ref"]
    item = schema["$defs"][ref.rsplit("/", 1)[-1]]
    assert set(item["properties"]) == set(expected)
    assert set(item.get("required", [])) == {f for f, default in expected.items() if default is REQUIRED}
    for field, default in expected.items():
        assert item["properties"][field].get("description", "").strip(), f"{name}.{param}[].{field} has no description"
        if default is not REQUIRED:
            assert item["properties"][field].get("default") == default, field  # a null default is left out


# apply_dream's plan: one object of lists; plan list -> {field: default (or REQUIRED)} of its items (None: strings).
PLAN_ITEMS: dict[str, dict[str, Any] | None] = {
    "merges": dict(ids=REQUIRED, content=REQUIRED, category=None, tags=None, reason=""),
    "archives": dict(id=REQUIRED, reason=""),
    "updates": dict(id=REQUIRED, category=None, tags=None, reason=""),
    "creates": dict(content=REQUIRED, category=None, tags=None, importance=None, source_episodes=[], reason=""),
    "entities": LIST_ITEMS["add_entities"][1],
    "triples": LIST_ITEMS["add_triples"][1],
    "entity_merges": dict(keep=REQUIRED, merge=REQUIRED, reason=""),
    "drop_triples": None,
    "procedures": dict(name=REQUIRED, trigger=REQUIRED, steps=REQUIRED, notes=[], learned_from=[], reason=""),
}


def _plan_schema(tools: dict[str, Tool]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The plan schema an agent writes to: the one dream's agent-mode reply carries (material.plan_schema), not
    tools/list, where apply_dream's `plan` is a plain object (issue 43: ~1,500 tokens a turn less)."""
    plan = tools["apply_dream"].input_schema["properties"]["plan"]
    assert plan["type"] == "object" and "plan_schema" in plan["description"] and "$ref" not in plan
    schema = DreamPlan.model_json_schema()
    return schema, schema


def test_the_dream_plan_is_an_object_of_optional_lists(tools: dict[str, Tool]) -> None:
    _, plan = _plan_schema(tools)
    assert plan["type"] == "object"
    assert set(plan["properties"]) == set(PLAN_ITEMS)
    assert plan.get("required", []) == []  # an empty plan is a valid answer
    assert all(spec["type"] == "array" for spec in plan["properties"].values())
    assert plan["properties"]["drop_triples"]["items"] == {"type": "string"}


@pytest.mark.parametrize("field", sorted(f for f, items in PLAN_ITEMS.items() if items is not None))
def test_dream_plan_items_name_their_fields(tools: dict[str, Tool], field: str) -> None:
    schema, plan = _plan_schema(tools)
    expected = PLAN_ITEMS[field]
    assert expected is not None
    item = schema["$defs"][plan["properties"][field]["items"]["$ref"].rsplit("/", 1)[-1]]
    assert set(item["properties"]) == set(expected)
    assert set(item.get("required", [])) == {f for f, default in expected.items() if default is REQUIRED}
    for name, default in expected.items():
        if default is not REQUIRED:
            assert item["properties"][name]["default"] == default, name


@pytest.mark.parametrize("field", sorted(PLAN_ITEMS))
def test_dream_plan_fields_are_described(tools: dict[str, Tool], field: str) -> None:
    """As for every parameter and list item: the agent writing a plan reads what each field is for."""
    schema, plan = _plan_schema(tools)
    spec = plan["properties"][field]
    undescribed = [] if spec.get("description", "").strip() else [f"plan.{field}"]
    if PLAN_ITEMS[field] is not None:
        item = schema["$defs"][spec["items"]["$ref"].rsplit("/", 1)[-1]]
        undescribed += [f"plan.{field}[].{n}" for n, s in item["properties"].items() if not s.get("description")]
    assert not undescribed, f"no description: {undescribed}"


# Prompts clients show to users: name -> (argument, required) pairs.
PROMPTS = {"recall": [("message", True)], "remember": [("category", False)], "memory-rules": []}


def test_the_prompts_their_arguments_and_descriptions(tmp_path: Path) -> None:
    settings = Settings.load({"home": tmp_path}, env={})

    async def list_prompts() -> list[Prompt]:
        async with Client(build_server(settings)) as client:
            return (await client.list_prompts()).prompts

    prompts = {prompt.name: prompt for prompt in anyio.run(list_prompts)}
    assert {name: [(a.name, a.required) for a in p.arguments or []] for name, p in prompts.items()} == PROMPTS
    for prompt in prompts.values():
        assert prompt.title and prompt.description and prompt.description.strip()
        assert all(a.description for a in prompt.arguments or [])


@pytest.mark.parametrize("arguments", [{}, {"msg": "a misspelt argument"}])
def test_a_prompt_without_its_required_argument_is_refused_naming_it(tmp_path: Path, arguments: dict) -> None:
    settings = Settings.load({"home": tmp_path}, env={})

    async def ask() -> MCPError:
        async with Client(build_server(settings)) as client:
            with pytest.raises(MCPError) as refused:
                await client.get_prompt("recall", arguments)
            await client.get_prompt("recall", {"message": ""})  # an empty message is an argument given
            return refused.value

    refused = anyio.run(ask)
    assert refused.error.code == INVALID_PARAMS  # not the SDK's bare "Internal server error"
    assert refused.error.message == "the prompt 'recall' needs the argument 'message' (The user's message this turn)"


def test_descriptions_carry_no_source_indentation(tools: dict[str, Tool], tmp_path: Path) -> None:
    settings = Settings.load({"home": tmp_path}, env={})

    async def prompt_descriptions() -> list[str]:
        async with Client(build_server(settings)) as client:
            return [p.description or "" for p in (await client.list_prompts()).prompts]

    for text in [t.description or "" for t in tools.values()] + anyio.run(prompt_descriptions):
        assert "\n " not in text, text[:80]


def test_a_gated_subagents_save_memory_takes_the_same_parameters(
    tools: dict[str, Tool], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Its reply is a proposal (it is filed for the main agent), its parameters are save_memory's."""
    home = tmp_path_factory.mktemp("gated-home")
    settings = Settings.load({"home": home, "namespace": "subagent/x", "gated_writes": True}, env={})

    async def list_tools() -> list[Tool]:
        async with Client(build_server(settings)) as client:
            return (await client.list_tools()).tools

    gated = {tool.name: tool for tool in anyio.run(list_tools)}["save_memory"]
    assert gated.input_schema == tools["save_memory"].input_schema
    assert gated.annotations == tools["save_memory"].annotations
    assert gated.output_schema and {"id", "from", "status", "store"} <= set(gated.output_schema["properties"])
    assert "proposal" in (gated.description or "")
