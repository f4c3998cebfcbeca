"""Prompt templates: shipped files, data-home overrides, one-pass rendering."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from rockmem_mcp.consolidation.templates import MAX_TEMPLATE_BYTES, Templates
from rockmem_mcp.errors import NotFoundError


@pytest.fixture
def overrides(tmp_path: Path) -> Path:
    folder = tmp_path / "home" / "prompts"
    folder.mkdir(parents=True)
    return folder


def test_the_shipped_templates_are_found(overrides: Path) -> None:
    templates = Templates(overrides)
    assert {"recall", "remember", "memory-rules"} <= set(templates.names())
    assert "Don't X for Y — instead Z" in templates.text("remember")
    assert "{{message}}" in templates.text("recall") and "{{recall}}" in templates.text("recall")


def test_rendering_fills_placeholders_once_and_leaves_unknown_ones(overrides: Path) -> None:
    (overrides / "recall.md").write_text("A {{recall}} B {{ message }} C {{other}}")
    rendered = Templates(overrides).render("recall", recall="{{message}}", message="hi")
    assert rendered == "A {{message}} B hi C {{other}}"  # a value is not expanded again


def test_an_override_in_the_home_wins_and_edits_apply_at_once(overrides: Path) -> None:
    templates = Templates(overrides)
    shipped = templates.text("memory-rules")
    path = overrides / "memory-rules.md"
    path.write_text("Our rules: save everything about the Falcon project.")
    assert templates.text("memory-rules") == "Our rules: save everything about the Falcon project."
    path.unlink()
    assert templates.text("memory-rules") == shipped


@pytest.mark.parametrize("name", ["nope", "../recall", "README", "Recall", ""])
def test_unknown_names_are_refused(overrides: Path, name: str) -> None:
    (overrides / "nope.md").write_text("an override alone does not make a template")
    with pytest.raises(
        NotFoundError,
        match=r"templates: anti-pattern-dream, dream, .*, recall, reflection-core, reflection-meta, remember",
    ):
        Templates(overrides).text(name)


def test_unusable_overrides_are_ignored_with_one_warning(
    overrides: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    templates = Templates(overrides)
    shipped = templates.text("remember")
    outside = tmp_path / "outside.md"
    outside.write_text("secret from outside the home")
    os.symlink(outside, overrides / "remember.md")
    (overrides / "recall.md").write_bytes(b"\xff\xfe not utf-8")
    (overrides / "memory-rules.md").write_text("x" * (MAX_TEMPLATE_BYTES + 1))
    with caplog.at_level(logging.WARNING):
        for _ in range(2):
            assert templates.text("remember") == shipped
            assert "{{message}}" in templates.text("recall")
            assert "Rules for using rockmem" in templates.text("memory-rules")
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 3
    assert any("symbolic link" in w for w in warnings) and any("256,000 bytes" in w for w in warnings)


def test_a_symlink_is_not_followed_even_to_a_file_inside_the_home(overrides: Path) -> None:
    # One rule for every store: no link inside the home is followed (a link's target can be swapped later).
    target = overrides.parent / "team-rules.md"
    target.write_text("team rules")
    os.symlink(target, overrides / "memory-rules.md")
    assert "team rules" not in Templates(overrides).text("memory-rules")
