"""MEMORY.md's format: what parses, what is malformed (with its line), and that rendering keeps the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from rockmem_mcp.core.files import TEMPLATE, CoreFile, CoreFormatError, parse
from rockmem_mcp.errors import LinkRefusedError
from rockmem_mcp.storage.edited_files import version_of

SEED_STYLE = """\
# MEMORY.md — Core Memory
<!-- TOKEN BUDGET: ~3,000 tokens. Rewritten during reflection. -->

## Identity
<!-- ~500 tokens — Who is the user? -->
- Name: Alice
- Timezone: CET

## active   context
Currently working on the memory project.
<!--
  a comment over
  several lines
-->

## Critical Facts
- Allergic to peanuts
* Never deploy on Fridays
"""


def test_a_seed_style_file_parses_into_its_blocks_and_renders_back_unchanged() -> None:
    doc = parse(SEED_STYLE)
    assert [b.name for b in doc.blocks] == ["Identity", "Active Context", "Critical Facts"]
    assert doc.block("Identity").content == ["- Name: Alice", "- Timezone: CET"]  # type: ignore[union-attr]
    assert doc.block("Active Context").content == ["Currently working on the memory project."]  # type: ignore[union-attr]
    assert doc.block("Critical Facts").content == ["- Allergic to peanuts", "* Never deploy on Fridays"]  # type: ignore[union-attr]
    assert doc.render() == SEED_STYLE


def test_the_template_parses_with_four_empty_blocks() -> None:
    doc = parse(TEMPLATE)
    assert [b.name for b in doc.blocks] == ["Identity", "Active Context", "Persona", "Critical Facts"]
    assert all(b.content == [] for b in doc.blocks)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("## Identity\n- a\n## Hobbies\n- b\n", "line 3: unknown block 'Hobbies'"),
        ("## Persona\n- a\n## persona\n- b\n", "line 3: block 'Persona' appears a second time"),
        ("## Critical Facts\n- fine\nnot a list line\n", "line 3: Critical Facts holds list lines"),
        ("## Identity\n<!-- never closed\n- a\n", "never closed"),
    ],
)
def test_a_malformed_file_names_the_problem_and_its_line(text: str, problem: str) -> None:
    with pytest.raises(CoreFormatError) as caught:
        parse(text)
    assert problem in str(caught.value)


def test_a_heading_inside_a_comment_is_layout_not_a_block() -> None:
    doc = parse("## Identity\n<!--\n## Not a block\n-->\n- a\n")
    assert [b.name for b in doc.blocks] == ["Identity"]
    assert doc.block("Identity").content == ["- a"]  # type: ignore[union-attr]


def test_the_file_is_reread_when_changed_by_hand_and_a_link_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "MEMORY.md"
    core = CoreFile(path, tmp_path / "meta")
    assert core.read() == b""
    path.write_text("## Identity\n- a\n")
    assert core.read() == b"## Identity\n- a\n"
    path.write_text("## Identity\n- b, longer\n")
    assert core.read() == b"## Identity\n- b, longer\n"
    with core.locked():
        core.write(b"## Persona\n- c\n")
    assert path.read_bytes() == b"## Persona\n- c\n" and version_of(core.read()) == version_of(b"## Persona\n- c\n")
    path.unlink()
    (tmp_path / "elsewhere.md").write_text("## Identity\n- secret\n")
    path.symlink_to(tmp_path / "elsewhere.md")
    with pytest.raises(LinkRefusedError):
        core.read()
