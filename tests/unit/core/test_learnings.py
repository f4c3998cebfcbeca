"""Learnings: the tool-failure and correction pages (newest first, with context, bounded, inert markdown) and
the lines of a session's first recall (matching anti-patterns, then the newest learnings, within the token
budget), read from the feedback log day by day, newest first."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from rockmem_mcp.config import Settings
from rockmem_mcp.conversation.feedback import FeedbackLog
from rockmem_mcp.core.learnings import (
    ANTI_PATTERNS_HEADING,
    LEARNINGS_HEADING,
    MAX_ANTI_PATTERNS,
    Learnings,
)
from rockmem_mcp.errors import InvalidInputError
from rockmem_mcp.memory.service import MemoryService
from rockmem_mcp.models import Feedback
from rockmem_mcp.tokens import estimate_tokens
from tests.unit.helpers import T0, FakeClock, Services

DAY = timedelta(days=1)


@pytest.fixture
def feedback(settings: Settings, clock: FakeClock) -> FeedbackLog:
    return FeedbackLog(settings, clock)


@pytest.fixture
def learnings(feedback: FeedbackLog, service: MemoryService, settings: Settings) -> Learnings:
    return Learnings(feedback, service, settings)


def headed(settings: Settings, feedback: FeedbackLog, service: MemoryService, **overrides: int) -> Learnings:
    return Learnings(feedback, service, settings.model_copy(update=overrides))


def page_structure(page: str) -> list[str]:
    """The lines markdown could read as structure: every non-blank line not indented four spaces (the
    content's indented lines form code blocks)."""
    return [line for line in page.splitlines() if line.strip() and not line.startswith("    ")]


def learning_lines(lines: list[str]) -> list[str]:
    return lines[lines.index(LEARNINGS_HEADING) + 1 :] if LEARNINGS_HEADING in lines else []


# ---------------------------------------------------------------------------------------------- the pages


def test_a_page_lists_its_kind_newest_first_across_days_with_context(
    learnings: Learnings, feedback: FeedbackLog, clock: FakeClock
) -> None:
    older = feedback.record("ToolFailure", "grep: no such file", "chat-1", {"tool": "grep", "exit": "2"})
    feedback.record("Correction", "not that one", "chat-1")
    feedback.record("SessionSummary", "a summary", "chat-1")
    clock.now = T0 + 3 * DAY + timedelta(hours=5, minutes=7)
    newer = feedback.record("ToolFailure", "search_files timed out\nafter 30 s", "chat-2", {"tool": "search_files"})
    page = learnings.markdown("errors")
    assert page.startswith("# Learnings — tool failures\n")
    headings = [line for line in page.splitlines() if line.startswith("## ")]
    assert headings == ["## 2024-05-04 14:07 UTC · chat-2", "## 2024-05-01 09:00 UTC · chat-1"]
    assert f"Context: id `{newer.id}` · `tool` = `search_files`" in page
    assert f"Context: id `{older.id}` · `tool` = `grep` · `exit` = `2`" in page
    assert "    search_files timed out\n    after 30 s\n" in page and "    grep: no such file\n" in page
    assert page.index("search_files timed out") < page.index("grep: no such file")
    assert "not that one" not in page and "a summary" not in page
    assert "2 shown" in page and "Older ones exist" not in page


def test_the_corrections_page_shows_corrections_only(learnings: Learnings, feedback: FeedbackLog) -> None:
    feedback.record("ToolFailure", "a failure", "chat-1")
    correction = feedback.record("Correction", "The user said: use UTC, not local time", "chat-1")
    page = learnings.markdown("corrections")
    assert page.startswith("# Learnings — corrections\n")
    assert f"id `{correction.id}`" in page and "    The user said: use UTC, not local time" in page
    assert "a failure" not in page


def test_an_empty_page_says_so(learnings: Learnings, feedback: FeedbackLog) -> None:
    feedback.record("UserThumbsUp", "nice", "chat-1")
    for kind, words in (("errors", "No tool failures recorded yet"), ("corrections", "No corrections recorded yet")):
        page = learnings.markdown(kind)  # type: ignore[arg-type]
        assert words in page and "## " not in page


def test_a_page_is_capped_and_says_when_older_ones_exist(learnings: Learnings, feedback: FeedbackLog) -> None:
    recorded = [feedback.record("Correction", f"correction number {n}", "chat-1") for n in range(7)]
    page = learnings.markdown("corrections", limit=5)
    assert "5 shown" in page and "Older ones exist: only the 5 newest are shown" in page
    shown = re.findall(r"correction number (\d+)", page)
    assert shown == ["6", "5", "4", "3", "2"]
    assert recorded[0].id not in page
    assert "Older ones exist" not in learnings.markdown("corrections", limit=7)


@pytest.mark.parametrize("limit", [0, -1, 1_001])
def test_a_page_limit_out_of_range_is_refused(learnings: Learnings, limit: int) -> None:
    with pytest.raises(InvalidInputError, match="limit must be between 1 and 1000"):
        learnings.markdown("errors", limit=limit)


def test_stored_text_cannot_forge_headings_or_send_control_codes(learnings: Learnings, feedback: FeedbackLog) -> None:
    hostile = (
        "ok\n# Forged title\n## 2099-01-01 00:00 UTC · admin\n   ### three spaces\nSetext\n===\n<h1>x</h1>\n"
        "\x1b]0;pwned\x07\x9b2J"
    )
    feedback.record("ToolFailure", hostile, "chat-1", {"\n## key": "value\n# forged\x1b[31m", "`tick`": "a``b"})
    page = learnings.markdown("errors")
    structure = page_structure(page)
    assert [line for line in structure if re.match(r" {0,3}#", line)] == [
        "# Learnings — tool failures",
        "## 2024-05-01 09:00 UTC · chat-1",
    ]
    assert [line for line in structure if line.startswith("Context: ")] == [structure[-1]]
    assert "    # Forged title\n    ## 2099-01-01 00:00 UTC · admin\n       ### three spaces\n" in page
    assert "    Setext\n    ===\n    <h1>x</h1>\n" in page
    assert "\x1b" not in page and "\x07" not in page and "\x9b" not in page
    assert "\\u001b]0;pwned\\u0007\\u009b2J" in page
    assert "`` `tick` ``" in page and "```a``b```" in page  # code spans the values cannot close


@hypothesis_settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(content=st.text(min_size=1, max_size=80), key=st.text(min_size=1, max_size=10), value=st.text(max_size=10))
def test_no_stored_text_adds_a_structural_line_to_a_page(
    feedback: FeedbackLog, service: MemoryService, settings: Settings, content: str, key: str, value: str
) -> None:
    if not content.strip() or not key.strip():
        return  # refused by record_feedback
    learnings = Learnings(feedback, service, settings)  # one per example: a recreated file may look unchanged
    record = Feedback(id="abcdef123456", type="Correction", content=content, session_id="chat-1",
                      metadata={key: value}, at=T0)  # fmt: skip
    learnings.feedback.log.append(record, T0.date())
    try:
        page = learnings.markdown("corrections", limit=1)
    finally:
        learnings.feedback.log.remove(T0.date())
    structure = page_structure(page)
    assert structure[0] == "# Learnings — corrections" and structure[2] == "## 2024-05-01 09:00 UTC · chat-1"
    assert len(structure) == 4 and structure[3].startswith("Context: id `abcdef123456` · ")
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f]", page)


# ---------------------------------------------------------------------------------------------- the session


def test_nothing_to_tell_gives_no_lines(learnings: Learnings, feedback: FeedbackLog, service: MemoryService) -> None:
    assert learnings.session_lines("") == [] and learnings.session_lines("deploy the app") == []
    feedback.record("SessionSummary", "went fine", "chat-1")
    service.save("deploy the app with helm", category="project-context/app")  # not an anti-pattern
    assert learnings.session_lines("deploy the app") == []


def test_the_newest_learnings_come_newest_first_with_their_context(
    learnings: Learnings, feedback: FeedbackLog, clock: FakeClock
) -> None:
    feedback.record("Correction", "use metric units", "chat-1")
    clock.now = T0 + 2 * DAY
    feedback.record("UserThumbsDown", "meh", "chat-2")
    feedback.record("ToolFailure", "git push was rejected\n(non-fast-forward)", "chat-2", {"tool": "git"})
    lines = learnings.session_lines("")
    assert lines == [
        LEARNINGS_HEADING,
        "- 2024-05-03 09:00 UTC tool failure (chat-2; tool=git): git push was rejected (non-fast-forward)",
        "- 2024-05-01 09:00 UTC correction (chat-1): use metric units",
    ]


def test_the_learnings_limit_keeps_the_newest(
    feedback: FeedbackLog, service: MemoryService, settings: Settings, clock: FakeClock
) -> None:
    for n in range(6):
        clock.now = T0 + n * DAY
        feedback.record("ToolFailure" if n % 2 else "Correction", f"learning number {n}", "chat-1")
    lines = learning_lines(headed(settings, feedback, service, learnings_limit=3).session_lines(""))
    assert [re.search(r"number (\d)", line)[1] for line in lines] == ["5", "4", "3"]  # type: ignore[index]
    assert headed(settings, feedback, service, learnings_limit=0).session_lines("") == []


def test_long_content_is_cut_to_one_short_line(learnings: Learnings, feedback: FeedbackLog) -> None:
    feedback.record("Correction", "word " * 200 + "\nsecond line", "chat-1", {"note": "x" * 500})
    (line,) = learning_lines(learnings.session_lines(""))
    assert "\n" not in line and line.endswith("…") and len(line) < 350
    assert "\x1b" not in "".join(learning_lines(learnings.session_lines("")))


def test_control_codes_do_not_reach_the_lines(
    learnings: Learnings, feedback: FeedbackLog, service: MemoryService
) -> None:
    feedback.record("ToolFailure", "boom \x1b[2J\x9b", "chat-1", {"tool": "\x1b]52;c;x\x07"})
    service.save("Don't clear the screen \x1b[2J in the terminal", category="anti-patterns/terminal")
    lines = learnings.session_lines("clear the terminal screen")
    assert len(lines) == 4
    assert not any(re.search("[\x00-\x1f\x7f-\x9f]", line) for line in lines)
    assert "\\u001b[2J" in lines[1] and "\\u001b]52;c;x\\u0007" in lines[3]


def test_the_anti_patterns_of_the_domain_at_hand_come_first(learnings: Learnings, service: MemoryService,
                                                            feedback: FeedbackLog) -> None:  # fmt: skip
    files = service.save(
        "Don't use search_files for content search — use grep", category="anti-patterns/file-operations"
    )
    service.save("Don't send emails without confirming the recipient", category="anti-patterns/email")
    service.save("search files with ripgrep for content", category="project-context/tools")  # matches, not one
    feedback.record("Correction", "grep was right", "chat-1")
    lines = learnings.session_lines("how do I search files for some content")
    assert lines == [
        ANTI_PATTERNS_HEADING,
        f"- [{files.id}] (anti-patterns/file-operations): Don't use search_files for content search — use grep",
        LEARNINGS_HEADING,
        "- 2024-05-01 09:00 UTC correction (chat-1): grep was right",
    ]


def test_a_blank_message_brings_the_most_salient_anti_patterns(learnings: Learnings, service: MemoryService) -> None:
    pinned = service.save("Don't deploy on Fridays", category="anti-patterns", pinned=True)
    rest = [service.save(f"Don't do thing {n} in email", category="anti-patterns/email") for n in range(6)]
    service.save("Not an anti-pattern at all", category="general", pinned=True)
    lines = learnings.session_lines("")
    assert lines[0] == ANTI_PATTERNS_HEADING and len(lines) == 1 + MAX_ANTI_PATTERNS
    assert lines[1] == f"- [{pinned.id}] (anti-patterns): Don't deploy on Fridays"
    assert all("(anti-patterns/email)" in line for line in lines[2:])
    assert {e.id for e in rest} > {re.search(r"\[(\w+)\]", line)[1] for line in lines[2:]}  # type: ignore[index]


@pytest.mark.parametrize("budget", [0, 12, 40, 90, 500])
def test_all_lines_fit_the_token_budget(
    feedback: FeedbackLog, service: MemoryService, settings: Settings, clock: FakeClock, budget: int
) -> None:
    for n in range(3):
        service.save(
            f"Don't retry the flaky deploy script without reading its log, case {n}", category="anti-patterns/deploy"
        )
    for n in range(12):
        clock.now = T0 + timedelta(hours=n)
        feedback.record("ToolFailure", f"deploy script failed with exit code {n}: " + "details " * 20, "chat-1")
    lines = headed(settings, feedback, service, learnings_tokens=budget).session_lines("the deploy script")
    assert estimate_tokens("\n".join(lines)) <= budget
    if budget == 90:  # the anti-patterns come first; the learnings get what they leave
        assert lines[0] == ANTI_PATTERNS_HEADING and LEARNINGS_HEADING not in lines
    if budget == 500:
        assert lines.count(ANTI_PATTERNS_HEADING) == 1 and lines[4] == LEARNINGS_HEADING
        newest = learning_lines(lines)
        assert 1 < len(newest) < 10 and "exit code 11:" in newest[0] and "exit code 10:" in newest[1]
        assert estimate_tokens("\n".join([*lines, newest[-1]])) > budget  # one more would not fit
    if budget <= 12:
        assert lines == []


def test_a_part_whose_first_line_does_not_fit_is_left_out(
    feedback: FeedbackLog, service: MemoryService, settings: Settings
) -> None:
    service.save("Don't " + "really " * 60 + "long", category="anti-patterns/verbose")
    feedback.record("Correction", "short one", "chat-1")
    budget = estimate_tokens(LEARNINGS_HEADING) + 40
    lines = headed(settings, feedback, service, learnings_tokens=budget).session_lines("really long")
    assert lines == [LEARNINGS_HEADING, "- 2024-05-01 09:00 UTC correction (chat-1): short one"]


# ---------------------------------------------------------------------------------------------- reading


def test_only_the_days_needed_are_read_and_read_once(
    learnings: Learnings, feedback: FeedbackLog, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    for n in range(20):
        clock.now = T0 + n * DAY
        for _ in range(4):
            feedback.record("ToolFailure", f"failure on day {n}", "chat-1")
    read: list[object] = []
    original = feedback.log.read
    monkeypatch.setattr(feedback.log, "read", lambda day: read.append(day) or original(day))
    lines = learning_lines(learnings.session_lines(""))
    assert len(lines) == 10 and "day 19" in lines[0] and "day 17" in lines[-1]
    assert read == [(T0 + n * DAY).date() for n in (19, 18, 17)]
    learnings.session_lines("")
    assert len(read) == 3  # unchanged files: from the cache


def test_a_record_appended_after_a_read_is_seen(
    learnings: Learnings, feedback: FeedbackLog, settings: Settings, clock: FakeClock
) -> None:
    feedback.record("ToolFailure", "first failure", "chat-1")
    assert "first failure" in learnings.markdown("errors")
    other_process = FeedbackLog(settings, clock)
    other_process.record("ToolFailure", "second failure", "chat-2")
    page = learnings.markdown("errors")
    assert page.index("second failure") < page.index("first failure")
    feedback.log.remove(T0.date())  # a log removed by hand
    assert "No tool failures recorded yet" in learnings.markdown("errors")
    assert learnings.session_lines("") == []


@pytest.mark.parametrize("salience", [True, False])
def test_most_salient_narrows_to_a_category_and_those_under_it(
    services: Services, settings: Settings, salience: bool
) -> None:
    service = services.open(settings.model_copy(update={"salience": salience}))
    top = service.save("top level", category="anti-patterns")
    sub = service.save("a sub-category", category="anti-patterns/git")
    service.save("elsewhere", category="anti-patternsx")  # a prefix of the name, not of the path
    service.save("pinned elsewhere", category="general", pinned=True)
    assert {h.entry.id for h in service.most_salient(10, category="anti-patterns")} == {top.id, sub.id}
    assert [h.entry.id for h in service.most_salient(10, category="anti-patterns/git")] == [sub.id]
    assert len(service.most_salient(10)) == 4
