"""The session-start budget the README states: a session's first recall with core memory, learnings and
workspace files each filled past their budgets, and long matching memories, stays within it."""

from __future__ import annotations

from datetime import timedelta

import pytest

from rockmem_mcp.config import Settings
from rockmem_mcp.conversation.feedback import FeedbackLog
from rockmem_mcp.core.files import BLOCKS
from rockmem_mcp.core.learnings import Learnings
from rockmem_mcp.core.service import CoreMemory
from rockmem_mcp.core.workspace import Workspace
from rockmem_mcp.memory.service import MemoryService
from rockmem_mcp.models import Feedback, new_entry_id, utc_now
from rockmem_mcp.recall.service import MAX_CONTENT_CHARS, TOP_MATCHES, Recall
from rockmem_mcp.tokens import estimate_tokens
from rockmem_mcp.working.service import WorkingMemory

# The README's statement: the session start costs at most its three budgets plus the core's heading line; the
# turn's memories at most 8 lines of 500 characters (about 135 tokens each in English prose).
CORE_HEADING = 30
MEMORY_LINE = 135
WRAPPER = 30

PROSE = "The team agreed that the staging deploy happens on Thursday mornings after the review of open tickets. "


def budget(settings: Settings) -> int:
    return CORE_HEADING + settings.core_total_tokens + settings.learnings_tokens + settings.workspace_tokens


def fill(settings: Settings, memory: MemoryService) -> Recall:
    """Every part past its budget: core to its caps, 60 learnings, 200 anti-patterns, four long workspace
    files, and 20 long memories matching the question."""
    core = CoreMemory(settings, memory)
    version = core.read().version
    for name in BLOCKS:
        lines = []
        while estimate_tokens("\n".join(lines)) < min(core.caps[name], settings.core_total_tokens // 4) - 25:
            lines.append(f"- {PROSE[:60]} {len(lines)}")
        version = core.edit("replace_block", name, version, "\n".join(lines)).version
    log = FeedbackLog(settings)
    now = utc_now()
    for i in range(60):
        at = now - timedelta(hours=i)
        kind = "ToolFailure" if i % 2 else "Correction"
        signal = Feedback(id=new_entry_id(), type=kind, content=PROSE * 3, session_id="s", at=at)  # type: ignore[arg-type]
        log.log.append(signal, at.date())
    for i in range(200):
        text = f"Don't deploy staging by hand, case {i} — instead run the pipeline"
        memory.save(text, category="anti-patterns/deploy")
    for name in ("AGENTS.md", "SOUL.md", "USER.md", "HEARTBEAT.md"):
        (settings.home / name).write_text(f"# {name}\n\n" + (PROSE + "\n") * 200)
    for i in range(20):
        memory.save(f"Deploy note {i}: " + PROSE * 10, category="notes")
    workspace = Workspace(settings)
    return Recall(
        memory,
        core=core,
        starters=[Learnings(log, memory, settings).session_lines, lambda _m: workspace.session_lines()],
    )


@pytest.mark.parametrize(
    "overrides",
    [{}, {"core_total_tokens": 1_200, "learnings_tokens": 100, "workspace_tokens": 300}],
    ids=["defaults", "smaller budgets"],
)
def test_a_sessions_first_recall_stays_within_the_stated_budget(settings: Settings, overrides: dict) -> None:
    settings = settings.model_copy(update=overrides)
    settings.home.mkdir(parents=True, exist_ok=True)
    memory = MemoryService(settings)
    try:
        recall = fill(settings, memory)
        block = recall.build("when does the staging deploy happen", "s1", WorkingMemory(settings, "session/s1"))
    finally:
        memory.close()
    start = estimate_tokens("\n".join(block.session_start))
    assert start <= budget(settings)
    assert start >= budget(settings) * 0.7  # every part was filled: the bound is what binds, not the content
    parts = ["Core memory (MEMORY.md", "Anti-patterns", "From AGENTS.md:"]
    parts += [] if overrides else ["Learnings (recent"]  # 100 tokens hold the anti-patterns alone
    for part in parts:
        assert any(line.startswith(part) for line in block.session_start), part
    assert len(block.memories) == TOP_MATCHES and all(len(m.content) > MAX_CONTENT_CHARS for m in block.memories)
    assert estimate_tokens(block.text) <= budget(settings) + TOP_MATCHES * MEMORY_LINE + WRAPPER
    later = recall.build("when does the staging deploy happen", "s1", WorkingMemory(settings, "session/s1"))
    assert later.session_start == []  # once per session
