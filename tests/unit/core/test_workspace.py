"""The workspace service: sections, BM25 search over the files (MEMORY.md too), the session-start lines within
their token budget, and writes limited to the four files."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from rockmem_mcp.config import Settings
from rockmem_mcp.core.workspace import MAX_SECTION_CHARS, Workspace, sections, without_comments
from rockmem_mcp.errors import ChangedSinceReadError, InvalidInputError, LinkRefusedError, NotFoundError
from rockmem_mcp.tokens import estimate_tokens

SOUL = """\
You are the house assistant.

# Persona
Warm, direct, a little dry.

## Tone
Never sarcastic with the user.
```
# Not a heading: code
```

## Boundaries
Ask before spending money.
"""


@pytest.fixture
def home(tmp_path: Path) -> Path:
    folder = tmp_path / "home"
    folder.mkdir()
    return folder


def workspace(home: Path, **settings: object) -> Workspace:
    return Workspace(Settings(home=home, **settings, embedding_model="off"))


# ---------------------------------------------------------------------------------------------- sections
def test_sections_follow_the_headings_with_their_first_line_numbers() -> None:
    found = sections("SOUL.md", SOUL)
    assert [(s.heading, s.line) for s in found] == [("", 1), ("Persona", 3), ("Tone", 6), ("Boundaries", 12)]
    assert found[1].text == "# Persona\nWarm, direct, a little dry."
    assert "# Not a heading: code" in found[2].text  # a '#' line inside a fenced block stays in its section
    assert {s.file for s in found} == {"SOUL.md"}


def test_a_long_section_is_cut_into_parts_at_paragraphs_each_within_the_limit() -> None:
    paragraphs = [f"Paragraph {i}: " + " ".join(["rule"] * 60) for i in range(20)]  # ~320 characters each
    text = "# Rules\n" + "\n\n".join(paragraphs) + "\n\n" + "x" * 4_000 + "\n"
    parts = sections("AGENTS.md", text)
    assert len(parts) > 4
    assert all(len(part.text) <= MAX_SECTION_CHARS for part in parts)
    assert all(part.heading == "Rules" for part in parts)
    assert [part.continued for part in parts] == [False] + [True] * (len(parts) - 1)
    assert parts[0].text.startswith("# Rules\nParagraph 0")
    lines = text.splitlines()
    for part in parts:  # each part's line number is where its first line is
        assert lines[part.line - 1].startswith(part.text.split("\n")[0])
    # whole paragraphs: no part starts or ends inside one (the 4,000-character line aside)
    assert all(p.text.split("\n")[0].startswith(("# Rules", "Paragraph", "x")) for p in parts)
    assert "".join(p.text for p in parts).count("x") == 4_000  # nothing lost in the cut line


def test_blank_sections_are_left_out() -> None:
    assert sections("USER.md", "\n\n   \n") == []
    assert [s.heading for s in sections("USER.md", "# Empty\n\n# Full\nTea.\n")] == ["Empty", "Full"]


# ---------------------------------------------------------------------------------------------- search
def test_search_finds_the_matching_section_of_a_file(home: Path) -> None:
    (home / "SOUL.md").write_text(SOUL)
    (home / "USER.md").write_text("# Drinks\nThe user likes green tea.\n# Work\nThe user deploys on Fridays.\n")
    hits = workspace(home).search("sarcastic tone")
    assert (hits[0].file, hits[0].heading, hits[0].line) == ("SOUL.md", "Tone", 6)
    assert hits[0].text.startswith("## Tone\nNever sarcastic") and hits[0].score > 0
    assert [(h.file, h.heading) for h in workspace(home).search("deploys")] == [("USER.md", "Work")]


def test_search_covers_core_memory_but_nothing_else_in_the_home(home: Path) -> None:
    (home / "MEMORY.md").write_text("## Critical Facts\n- The staging VPN is on port 1194\n")
    (home / "NOTES.md").write_text("The staging VPN password is in the safe\n")
    hits = workspace(home).search("staging VPN")
    assert [(h.file, h.heading) for h in hits] == [("MEMORY.md", "Critical Facts")]


def test_a_hand_edit_is_found_by_the_next_search(home: Path) -> None:
    path = home / "HEARTBEAT.md"
    path.write_text("# Checks\nWatch the disk usage.\n")
    ws = workspace(home)
    assert ws.search("certificate expiry") == []
    path.write_text("# Checks\nWatch the disk usage.\n# Certificates\nWarn a week before a certificate expiry.\n")
    assert [h.heading for h in ws.search("certificate expiry")] == ["Certificates"]
    path.unlink()
    assert ws.search("certificate expiry") == []


def test_a_linked_file_is_not_searched(home: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.md"
    outside.write_text("# Secret\nThe launch codes are 0000.\n")
    (home / "AGENTS.md").symlink_to(outside)
    ws = workspace(home)
    assert ws.search("launch codes") == []
    with pytest.raises(LinkRefusedError):
        ws.read("AGENTS.md")
    assert ws.files().missing == ["AGENTS.md", "SOUL.md", "USER.md", "HEARTBEAT.md"]


def test_a_query_of_stopwords_or_a_limit_of_none_finds_nothing(home: Path) -> None:
    (home / "SOUL.md").write_text(SOUL)
    assert workspace(home).search("the and of") == []
    assert workspace(home).search("sarcastic", limit=0) == []


# ---------------------------------------------------------------------------------------------- listing, reading
def test_the_listing_names_the_files_in_the_home_with_tokens_and_versions(home: Path) -> None:
    (home / "USER.md").write_text("Likes tea.\n")
    (home / "SOUL.md").write_text(SOUL)
    (home / "MEMORY.md").write_text("## Identity\nrockmem\n")  # core memory: not a workspace file
    listing = workspace(home).files()
    assert [f.name for f in listing.files] == ["SOUL.md", "USER.md"]
    assert listing.missing == ["AGENTS.md", "HEARTBEAT.md"]
    soul = listing.files[0]
    assert soul.uri == "rockmem://workspace/SOUL.md"
    assert soul.tokens == estimate_tokens(SOUL) and soul.bytes == len(SOUL.encode())


@pytest.mark.parametrize("name", ["MEMORY.md", "NOTES.md", "../SOUL.md", "soul.md"])
def test_only_the_four_files_are_read(home: Path, name: str) -> None:
    (home / "MEMORY.md").write_text("## Identity\n")
    with pytest.raises(NotFoundError, match="not a workspace file"):
        workspace(home).read(name)


def test_reading_a_file_not_in_the_home_says_where_to_put_it(home: Path) -> None:
    with pytest.raises(NotFoundError, match=f"place it at {home / 'USER.md'}"):
        workspace(home).read("USER.md")


# ---------------------------------------------------------------------------------------------- session start
def test_session_lines_give_the_files_in_order_without_comments_or_blank_lines(home: Path) -> None:
    (home / "HEARTBEAT.md").write_text("Check the backups.\n")
    (home / "USER.md").write_text("<!-- a note for me,\nnot the agent -->\nLikes tea.\n\n")
    (home / "AGENTS.md").write_text("# Fleet\n\nThree agents.\n")
    (home / "MEMORY.md").write_text("## Identity\ncore, loaded elsewhere\n")
    assert workspace(home).session_lines() == [
        "From AGENTS.md:",
        "# Fleet",
        "Three agents.",
        "From USER.md:",
        "Likes tea.",
        "From HEARTBEAT.md:",
        "Check the backups.",
    ]


@pytest.mark.parametrize("budget", [0, 5, 20, 40, 60, 100, 250, 1_000])
def test_session_lines_stay_within_the_budget(home: Path, budget: int) -> None:
    (home / "AGENTS.md").write_text("# Fleet\n" + "The planner hands work to the coder and the reviewer.\n" * 10)
    (home / "SOUL.md").write_text(SOUL * 3)
    (home / "USER.md").write_text("Likes tea. " * 200 + "\n")  # one long line
    (home / "HEARTBEAT.md").write_text("Check the backups every night.\n")
    lines = workspace(home, workspace_tokens=budget).session_lines()
    assert estimate_tokens("\n".join(lines)) <= budget
    assert sum(estimate_tokens(line) + 1 for line in lines) <= budget  # with a line break after each line too
    headings = [line for line in lines if line.startswith("From ")]
    everything = ["From AGENTS.md:", "From SOUL.md:", "From USER.md:", "From HEARTBEAT.md:"]
    assert headings == everything[: len(headings)]  # a later file never takes the place of an earlier one
    if budget >= 100:  # room for every file's heading line, and a cut note for the three long ones
        assert headings == everything
    starts = [i for i, line in enumerate(lines) if line.startswith("From ")]
    for start, end in zip(starts, [*starts[1:], len(lines)][: len(starts)], strict=True):
        name = lines[start].removeprefix("From ").removesuffix(":")
        whole = [line.rstrip() for line in (home / name).read_text().splitlines() if line.strip()]
        # each file loaded is there whole, or says it was cut and where the rest is
        assert lines[start + 1 : end] == whole or lines[end - 1] == f"… (cut: read rockmem://workspace/{name})"


def test_a_file_that_does_not_fit_is_cut_and_says_where_the_rest_is(home: Path) -> None:
    (home / "AGENTS.md").write_text("# Fleet\nThree agents.\n")
    (home / "SOUL.md").write_text("\n".join(f"Rule {i}: be kind and brief." for i in range(100)) + "\n")
    (home / "USER.md").write_text("Likes tea.\n")
    lines = workspace(home, workspace_tokens=120).session_lines()
    assert lines[:3] == ["From AGENTS.md:", "# Fleet", "Three agents."]
    soul = lines[3 : lines.index("From USER.md:")]
    assert soul[0] == "From SOUL.md:" and soul[1] == "Rule 0: be kind and brief."
    assert soul[-1] == "… (cut: read rockmem://workspace/SOUL.md)"
    assert 3 < len(soul) < 100
    assert lines[lines.index("From USER.md:") :] in (
        ["From USER.md:", "Likes tea."],
        ["From USER.md:", "… (cut: read rockmem://workspace/USER.md)"],
    )


def test_a_long_line_is_cut_at_a_word(home: Path) -> None:
    (home / "USER.md").write_text("Likes green tea. " * 300 + "\n")
    lines = workspace(home, workspace_tokens=60).session_lines()
    assert lines[0] == "From USER.md:" and lines[-1] == "… (cut: read rockmem://workspace/USER.md)"
    assert lines[1].startswith("Likes green tea.") and lines[1].endswith(" …")
    assert all(word in ("Likes", "green", "tea.", "…") for word in lines[1].split())


def test_session_lines_follow_a_hand_edit(home: Path) -> None:
    path = home / "SOUL.md"
    path.write_text("Be terse.\n")
    ws = workspace(home)
    assert ws.session_lines() == ["From SOUL.md:", "Be terse."]
    path.write_text("Be thorough.\n")
    assert ws.session_lines() == ["From SOUL.md:", "Be thorough."]


# ---------------------------------------------------------------------------------------------- writing
def test_a_write_creates_the_file_and_reports_its_version(home: Path) -> None:
    ws = workspace(home)
    info = ws.write("USER.md", "# User\nLikes tea.\n")
    assert (home / "USER.md").read_text() == "# User\nLikes tea.\n"
    assert info.version == ws.files().files[0].version and info.tokens == estimate_tokens("# User\nLikes tea.\n")
    assert [h.heading for h in ws.search("tea")] == ["User"]


def test_a_write_with_the_version_read_goes_through_and_a_stale_one_is_refused(home: Path) -> None:
    (home / "SOUL.md").write_text("Be terse.\n")
    ws = workspace(home)
    read = ws.files().files[0].version
    written = ws.write("SOUL.md", "Be warm.\n", version=read)
    with pytest.raises(ChangedSinceReadError, match="changed since you read it"):
        ws.write("SOUL.md", "Be cold.\n", version=read)
    assert (home / "SOUL.md").read_text() == "Be warm.\n"
    assert written.version != read


@pytest.mark.parametrize("name", ["MEMORY.md", "NOTES.md", "../USER.md", "meta/USER.md", ""])
def test_a_write_to_another_name_is_refused(home: Path, name: str) -> None:
    with pytest.raises(InvalidInputError, match=r"AGENTS\.md, SOUL\.md, USER\.md, HEARTBEAT\.md"):
        workspace(home).write(name, "x")
    assert sorted(os.listdir(home)) == []


def test_a_write_over_the_content_cap_is_refused(home: Path) -> None:
    with pytest.raises(InvalidInputError, match="ROCKMEM_MAX_CONTENT_BYTES"):
        workspace(home, max_content_bytes=100).write("AGENTS.md", "x" * 101)
    assert not (home / "AGENTS.md").exists()


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("Likes tea.<!-- private -->\nHikes.", "Likes tea.\nHikes."),
        ("a<!-- one -->b<!-- two\nlines -->c", "abc"),
        ("<!-->still a comment-->shown", "shown"),
        ("shown<!-- never closed\nhidden", "shown"),
        ("no comments --> here", "no comments --> here"),
    ],
)
def test_without_comments_drops_each_comment_and_an_unclosed_one_ends_the_text(text: str, kept: str) -> None:
    assert without_comments(text) == kept


def test_a_file_of_unclosed_comment_openers_is_read_in_linear_time(home: Path) -> None:
    # "<!--" * 24,000 (96 KB) took about 15 s with the regex `<!--.*?-->`; the scan is instant. A thread with a
    # generous join bound keeps a regression from hanging the suite.
    (home / "SOUL.md").write_text("Be brief.\n" + "<!--" * 24_000)
    (home / "USER.md").write_text("Likes tea.\n")
    found: list[list[str]] = []
    reader = threading.Thread(target=lambda: found.append(workspace(home).session_lines()), daemon=True)
    reader.start()
    reader.join(timeout=5)
    assert found == [["From SOUL.md:", "Be brief.", "From USER.md:", "Likes tea."]]
