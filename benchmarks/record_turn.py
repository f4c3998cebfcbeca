"""What record_turn costs in process (issue 21, write-then-compact): the window append alone, and record_turn's
path through the compactor (usage checked, the window's fill looked at), by call; the calls that compact a full
window (rules: user turns logged as episodes, facts saved, a summary) are timed apart.

    python -m benchmarks.record_turn [calls]      # → benchmarks/results/record-turn.json

Run against an older checkout (PYTHONPATH=that/checkout) it times the window append alone: the before figure.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.speed import percentiles
from rockmem_mcp.config import Settings
from rockmem_mcp.conversation.service import ConversationMemory
from rockmem_mcp.episodes.service import Episodes
from rockmem_mcp.memory.service import MemoryService

RESULTS = Path(__file__).parent / "results"
TEXT = "Let us keep planning the vegetable garden: beans by the fence, tomatoes where the sun stays longest."


def turns(calls: int) -> list[tuple[str, str]]:
    return [("user" if i % 2 == 0 else "assistant", f"{i}. {TEXT}") for i in range(calls)]


def window_alone(home: Path, calls: int) -> dict[str, float]:
    conversation = ConversationMemory(Settings(home=home))
    samples = []
    for role, content in turns(calls):
        start = time.perf_counter()
        conversation.record("bench", role, content)
        samples.append(time.perf_counter() - start)
    return percentiles(samples)


def through_compactor(home: Path, calls: int) -> dict[str, Any]:
    from rockmem_mcp.consolidation.compaction import Compactor

    settings = Settings(home=home, encode_driver="rules")
    memory = MemoryService(settings)
    conversation = ConversationMemory(settings, compacted=True)
    compactor = Compactor(conversation, memory, Episodes(settings), settings)
    plain, compacting = [], []
    try:
        for role, content in turns(calls):
            start = time.perf_counter()
            _, compaction = compactor.record("bench", role, content, 1_000, 100_000)
            (plain if compaction is None else compacting).append(time.perf_counter() - start)
    finally:
        memory.close()
    return {"plain": percentiles(plain), "compacting": percentiles(compacting), "compactions": len(compacting)}


def run(calls: int, work: Path) -> dict[str, Any]:
    result: dict[str, Any] = {"calls": calls, "window_alone": window_alone(work / "a", calls)}
    try:
        result["record_turn"] = through_compactor(work / "b", calls)
    except ImportError:  # an older checkout: no compactor
        result["record_turn"] = None
    return result


def main() -> None:
    calls = int(sys.argv[1]) if len(sys.argv) > 1 else 5_000
    with tempfile.TemporaryDirectory() as work:
        result = run(calls, Path(work))
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "record-turn.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
