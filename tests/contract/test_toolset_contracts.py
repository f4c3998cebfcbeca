"""Named toolsets: every tool in exactly one set, the selection is what clients list, the docs' costs are
measured ones."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.types import Tool

from rockmem_mcp.config import Settings
from rockmem_mcp.errors import ConfigError
from rockmem_mcp.server import toolsets
from rockmem_mcp.server.app import build_server

TOOLSETS_PAGE = Path(__file__).resolve().parents[2] / "docs" / "toolsets.md"


def listed(home: Path, selection: str | None) -> tuple[list[Tool], str | None]:
    """tools/list and the instructions a client sees from a server with toolsets `selection` (None: unset)."""
    settings = Settings.load({"home": home, "toolsets": selection}, env={})

    async def connect() -> tuple[list[Tool], str | None]:
        async with Client(build_server(settings)) as client:
            return (await client.list_tools()).tools, client.instructions

    return anyio.run(connect)


@pytest.fixture(scope="module")
def every_tool(tmp_path_factory: pytest.TempPathFactory) -> list[Tool]:
    return listed(tmp_path_factory.mktemp("all-home"), "all")[0]


def test_every_registered_tool_belongs_to_exactly_one_toolset(every_tool: list[Tool]) -> None:
    memberships = Counter(name for names in toolsets.TOOLSETS.values() for name in names)
    assert sorted(tool.name for tool in every_tool) == sorted(memberships), "a tool is in no set, or a set names none"
    assert [name for name, count in memberships.items() if count > 1] == []


def test_every_toolset_says_when_to_turn_it_on() -> None:
    assert set(toolsets.WHEN) == set(toolsets.TOOLSETS) and all(toolsets.WHEN.values())


def test_every_tool_has_a_human_title(every_tool: list[Tool]) -> None:
    """Clients show `title` to people (tool pickers, approval prompts); the name is for the model."""
    titles = {tool.name: tool.title for tool in every_tool}
    assert [name for name, title in titles.items() if not title or title == name] == []
    assert len(set(titles.values())) == len(titles)  # no two tools look alike


def test_all_exposes_every_toolset(every_tool: list[Tool]) -> None:
    assert {tool.name for tool in every_tool} == set(toolsets.tools_of(toolsets.TOOLSETS))


def test_the_default_fits_the_budget_and_every_tool_clients_had_is_one_setting_away(
    tmp_path: Path, every_tool: list[Tool]
) -> None:
    tools, instructions = listed(tmp_path, None)
    assert sorted(tool.name for tool in tools) == sorted(toolsets.tools_of(toolsets.DEFAULT))
    assert toolsets.tokens(tools) <= toolsets.TOKEN_BUDGET
    assert instructions is not None and "call recall" in instructions and "graph add" in instructions
    assert "apply_dream" not in instructions  # not listed by default: never asked for
    # What the general tools replaced stays in the classic set (default,classic lists it again)
    before = {"save_to_working_memory", "add_triples", "traverse_graph", "apply_dream", "get_dream_report"}
    assert before <= set(toolsets.TOOLSETS["classic"]) and before <= {tool.name for tool in every_tool}


def test_graph_alone_lists_only_the_graph_tools_and_refuses_the_others(tmp_path: Path) -> None:
    settings = Settings.load({"home": tmp_path, "toolsets": "graph"}, env={})

    async def use() -> tuple[list[str], list[str], list[str], str | None]:
        async with Client(build_server(settings)) as client:
            names = [tool.name for tool in (await client.list_tools()).tools]
            refused = []
            for name in ("save_memory", "no_such_tool"):  # a switched-off tool is as unknown as a made-up one
                result = await client.call_tool(name, {"content": "x"})
                assert result.is_error
                refused.append(result.content[0].text)
            resources = [str(r.uri) for r in (await client.list_resources()).resources]
            prompts = [p.name for p in (await client.list_prompts()).prompts]
            return names, refused, resources + prompts, client.instructions

    names, refused, always_on, instructions = anyio.run(use)
    assert sorted(names) == sorted(toolsets.TOOLSETS["graph"])
    assert refused == ["Unknown tool: save_memory", "Unknown tool: no_such_tool"]
    assert {"rockmem://recall", "recall", "remember", "memory-rules"} <= set(always_on)
    assert instructions is not None and "graph add" in instructions
    switched_off = set(toolsets.tools_of(toolsets.TOOLSETS)) - set(names)
    # Names of one word ('recall', 'dream') are also plain words; the instructions must not ask for the tool.
    assert [name for name in switched_off if "_" in name and name in instructions] == []
    assert "call recall" not in instructions and "dream:" not in instructions


def test_the_workspace_toolset_is_off_by_default_and_adds_only_its_write_tool(tmp_path: Path) -> None:
    """The server writes the user's workspace files only through a tool the user turned on."""
    assert "workspace" not in toolsets.DEFAULT
    default, default_instructions = listed(tmp_path, None)
    tools, instructions = listed(tmp_path, "default,workspace")
    assert "write_workspace_file" not in {tool.name for tool in default}
    assert default_instructions is not None and "write_workspace_file" not in default_instructions
    assert sorted(tool.name for tool in tools) == sorted([*toolsets.tools_of(toolsets.DEFAULT), "write_workspace_file"])
    assert instructions is not None and "write_workspace_file" in instructions
    [write] = [tool for tool in tools if tool.name == "write_workspace_file"]
    schema = write.input_schema
    assert set(schema["properties"]) == {"name", "content", "version"}
    assert set(schema["required"]) == {"name", "content"} and "default" not in schema["properties"]["version"]
    assert write.annotations is not None
    assert write.annotations.model_dump(exclude_none=True) == {
        "read_only_hint": False,
        "destructive_hint": True,
        "idempotent_hint": True,
    }
    assert {"version", "uri", "tokens"} <= set((write.output_schema or {})["properties"])


@pytest.mark.parametrize(
    ("selection", "expected"),
    [("default", toolsets.DEFAULT), ("graph,memory", ("memory", "graph")), ("default,graph", toolsets.DEFAULT)],
)
def test_a_selection_names_sets_and_groups(selection: str, expected: tuple[str, ...]) -> None:
    assert toolsets.selected(Settings.load({"toolsets": selection}, env={}).toolsets) == expected


@pytest.mark.parametrize(("selection", "problem"), [("memory,bogus", "unknown toolset 'bogus'"), (",", "no toolset")])
def test_an_unknown_or_empty_selection_is_refused_naming_the_valid_sets(
    tmp_path: Path, selection: str, problem: str
) -> None:
    settings = Settings.load({"home": tmp_path, "toolsets": selection}, env={})
    with pytest.raises(ConfigError) as refused:
        build_server(settings)
    message = str(refused.value)
    assert problem in message and "ROCKMEM_TOOLSETS" in message
    assert all(name in message for name in [*toolsets.TOOLSETS, "default", "all"])


def test_the_readme_table_is_the_measured_one(every_tool: list[Tool]) -> None:
    """Docs cannot drift: paste the output of `rockmem-mcp tools` into docs/toolsets.md's Toolsets section."""
    page = TOOLSETS_PAGE.read_text(encoding="utf-8")
    section = re.search(r"^## Toolsets\n(.*?)^## ", page, re.MULTILINE | re.DOTALL)
    assert section is not None, "docs/toolsets.md has no '## Toolsets' section"
    stale = "docs/toolsets.md's toolset table is stale: run `rockmem-mcp tools`"
    assert toolsets.table(every_tool) in section.group(1), stale


def test_input_schemas_carry_no_title_annotations(every_tool: list[Tool]) -> None:
    """pydantic's per-node titles ("Content" beside `content`) cost a tenth of the list's tokens and say nothing."""

    def titles(node: object) -> int:
        if isinstance(node, dict):
            return int(isinstance(node.get("title"), str)) + sum(titles(value) for value in node.values())
        return sum(titles(value) for value in node) if isinstance(node, list) else 0

    assert {tool.name: titles(tool.input_schema) for tool in every_tool if titles(tool.input_schema)} == {}


def test_drop_titles_keeps_a_property_named_title() -> None:
    schema = {"title": "Args", "properties": {"title": {"title": "Title", "type": "string"}}, "required": ["title"]}
    toolsets.drop_titles(schema)
    assert schema == {"properties": {"title": {"type": "string"}}, "required": ["title"]}


def test_the_readme_names_every_default_tool_and_their_measured_cost(every_tool: list[Tool]) -> None:
    """The README's tool table has a row for each default tool (by the name a row starts with) and states the
    default surface's cost as `rockmem-mcp tools` measures it."""
    readme = (TOOLSETS_PAGE.parents[1] / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Tools\n") : readme.index("\n## ", readme.index("## Tools\n") + 1)]
    named = set(re.findall(r"`([a-z_]+)\(", section))
    assert named == set(toolsets.tools_of(toolsets.DEFAULT))
    default = [tool for tool in every_tool if tool.name in named]
    assert f"about {toolsets.tokens(default):,} tokens" in " ".join(section.split())
    assert f"allows {toolsets.TOKEN_BUDGET:,}" in section
