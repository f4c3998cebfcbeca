"""What the README, the server's MCP instructions and tool descriptions, and the prompts say about
working-memory eviction and memory decay is what the code does."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

from rockmem_mcp.config import Settings
from rockmem_mcp.services.dream import Dreamer
from rockmem_mcp.services.graph import GraphService
from rockmem_mcp.services.memory import MemoryService
from rockmem_mcp.services.recall import Recall
from rockmem_mcp.services.templates import Templates
from rockmem_mcp.services.working import WorkingMemory

ROOT = Path(__file__).resolve().parents[1]
DOCS = [
    ROOT / "README.md",
    *sorted((ROOT / "prompts").glob("*.md")),
    *sorted((ROOT / "rockmem_mcp" / "server").rglob("*.py")),
]
NOW = datetime(2024, 5, 1, 9, 0, tzinfo=UTC)


def statements(word: str) -> list[tuple[str, str]]:
    """(file, sentence or table cell) for every mention of `word` in the docs a user or a model reads."""
    found = []
    for path in DOCS:
        for sentence in re.split(r"(?<=[.!?|])\s+", " ".join(path.read_text(encoding="utf-8").split())):
            if re.search(word, sentence, re.IGNORECASE):
                found.append((path.name, sentence))
    return found


def test_eviction_is_described_as_the_code_does_it(tmp_path: Path) -> None:
    working = WorkingMemory(Settings(home=tmp_path, working_max_entries=2), "session/s1", lambda: NOW)
    working.save("saved-first", "lives an hour", ttl_minutes=60)
    working.save("saved-last", "lives a minute", ttl_minutes=1)
    assert working.save("one-more", "x").evicted == "session/s1/saved-last"  # closest to expiry, not the oldest
    mentions = statements(r"\bevict")
    assert {name for name, _ in mentions} >= {"README.md", "working.py"}
    for name, sentence in mentions:
        assert "closest to expiry" in sentence, f"{name}: {sentence}"


def test_decay_is_described_as_the_code_does_it(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path)
    memory, graph = MemoryService(settings, clock=lambda: NOW), GraphService(settings, clock=lambda: NOW)
    try:
        seen = NOW - timedelta(days=30 + 45)
        entry = memory.prepare_entry({"content": "The staging VPN lives on port 1194", "importance": 0.6,
                                      "created_at": seen, "last_seen_at": seen})  # fmt: skip
        memory.save_many([entry])
        memory.get(entry.id)  # reads, searches and recalls do not count as seeing it
        assert [h.entry.id for h in memory.search("staging VPN").results] == [entry.id]
        Recall(memory).build("which port for the staging VPN?", "s1", WorkingMemory(settings, "session/s1"))
        Dreamer(memory, graph, settings, Templates(settings.prompts_dir), lambda: NOW).run_deterministic()
        decayed = memory.get(entry.id)
        assert round(decayed.importance, 2) == 0.3 and not decayed.archived  # 0.6 × 0.5^((75 − 30)/45)
    finally:
        graph.close()
        memory.close()
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    assert "importance = the importance before decay × 0.5^((days − 30)/45), floor 0.1" in readme
    assert "reads, updates, searches and recalls do not move it" in readme and "it archives nothing" in readme
    mentions = statements(r"\bdecay")
    assert {name for name, _ in mentions} >= {"README.md", "dream.py"}
    for name, sentence in mentions:
        assert not re.search(r"\bun(used|seen)\b", sentence), f"{name}: {sentence}"
