"""Per-turn recall: matches, delta injection, first-turn fallback, inventories, the text block."""

from __future__ import annotations

import re

from rockmem_mcp.config import Settings
from rockmem_mcp.services.memory import MemoryService
from rockmem_mcp.services.recall import CLOSE_TAG, OPEN_TAG, TOP_MATCHES, Recall
from rockmem_mcp.services.working import WorkingMemory


def test_matches_are_injected_once_per_session_until_reset(service: MemoryService, settings: Settings) -> None:
    tea = service.save("The user drinks green tea every morning", category="user-preferences/drinks")
    recall, working = Recall(service), WorkingMemory(settings, "session/s1")
    first = recall.build("what tea does the user drink", "s1", working)
    assert [m.id for m in first.memories] == [tea.id] and not first.first_turn_fallback
    assert f"- [{tea.id}] (user-preferences/drinks): The user drinks green tea every morning" in first.text
    assert first.text.startswith(OPEN_TAG) and first.text.endswith(CLOSE_TAG)
    again = recall.build("green tea again?", "s1", working)
    assert again.memories == [] and again.already_injected == 1 and again.text == ""
    assert [m.id for m in recall.build("green tea", "s2", working).memories] == [tea.id]  # another session
    assert recall.reset("s1").forgotten == 1
    assert [m.id for m in recall.build("green tea", "s1", working).memories] == [tea.id]


def test_later_matches_still_come_when_earlier_ones_were_injected(service: MemoryService, settings: Settings) -> None:
    saved = [service.save(f"deploy note number {i}") for i in range(TOP_MATCHES + 3)]
    recall, working = Recall(service), WorkingMemory(settings, "session/s1")
    first = recall.build("deploy note", "s1", working)
    second = recall.build("deploy note", "s1", working)
    assert len(first.memories) == TOP_MATCHES and len(second.memories) == 3
    assert {m.id for m in first.memories} | {m.id for m in second.memories} == {e.id for e in saved}


def test_first_turn_without_a_match_falls_back_to_the_newest(service: MemoryService, settings: Settings) -> None:
    saved = [service.save(f"fact {word}") for word in ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot")]
    recall, working = Recall(service), WorkingMemory(settings, "session/s1")
    block = recall.build("hello there", "s1", working)
    assert block.first_turn_fallback and len(block.memories) == 5
    assert {m.id for m in block.memories} == {e.id for e in saved[1:]}
    assert "Recent long-term memories (nothing matched this message):" in block.text
    later = recall.build("good morning", "s1", working)  # not the first turn: no fallback
    assert not later.first_turn_fallback and later.memories == []


def test_inventory_findings_and_outlines_without_values(service: MemoryService, settings: Settings) -> None:
    mine = WorkingMemory(settings, "session/s1")
    mine.save("big-result", "SECRET VALUE " * 50, category="tool-results", tags=["ci"])
    WorkingMemory(settings, "patrol/disk").save("finding", "disk 91% full on /var")
    WorkingMemory(settings, "subagent/t1").save("tests-index", "1. flaky: test_upload 2. slow: test_sync")
    WorkingMemory(settings, "subagent/t1").save("tests-raw", "raw output nobody should see here")
    block = Recall(service).build("anything", "s1", mine)
    assert [i.key for i in block.working] == ["session/s1/big-result"]
    assert re.search(r"- session/s1/big-result \(expires in (?:4m5\ds|5m00s)\) \[tool-results\] #ci", block.text)
    assert "SECRET VALUE" not in block.text  # inventories never carry values
    assert "- patrol/disk/finding: disk 91% full on /var" in block.text
    assert "- subagent/t1/tests-index: 1. flaky: test_upload 2. slow: test_sync" in block.text
    assert "tests-raw" not in block.text


def test_a_blank_message_matches_nothing(service: MemoryService, settings: Settings) -> None:
    service.save("The user drinks green tea")
    recall, working = Recall(service), WorkingMemory(settings, "session/s1")
    assert recall.build("   ", "s1", working, delta=False).memories == []
    assert recall.build("", "s1", working).first_turn_fallback  # the first turn still gets the newest
