"""What the README, the server's MCP instructions and tool descriptions, and the prompts say about
working-memory eviction and memory salience and decay is what the code does."""

from __future__ import annotations

import importlib.util
import math
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from rockmem_mcp.config import Settings
from rockmem_mcp.consolidation.dream import Dreamer
from rockmem_mcp.consolidation.templates import Templates
from rockmem_mcp.graph.service import GraphService
from rockmem_mcp.memory.service import MemoryService
from rockmem_mcp.recall.service import Recall
from rockmem_mcp.search.salience import (
    ACTIVE_MIN,
    BASE_AGENT,
    BASE_DERIVED,
    BASE_EXPLICIT,
    DORMANT_MIN,
    FADING_MIN,
    RANKING_FLOOR,
    TYPE_WEIGHTS,
)
from rockmem_mcp.working.service import WorkingMemory

ROOT = Path(__file__).resolve().parents[1]
DOCS = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").rglob("*.md")),
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
    working = WorkingMemory(
        Settings(home=tmp_path, working_max_entries=2, embedding_model="off"), "session/s1", lambda: NOW
    )
    working.save("saved-first", "lives an hour", ttl_minutes=60)
    working.save("saved-last", "lives a minute", ttl_minutes=1)
    assert working.save("one-more", "x").evicted == "session/s1/saved-last"  # closest to expiry, not the oldest
    mentions = statements(r"\bevict")
    assert {name for name, _ in mentions} >= {"tools.md", "working.py"}
    for name, sentence in mentions:
        assert "closest to expiry" in sentence, f"{name}: {sentence}"


def test_decay_is_described_as_the_code_does_it(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, embedding_model="off")
    now = [NOW]
    memory = MemoryService(settings, clock=lambda: now[0])
    graph = GraphService(settings, clock=lambda: now[0])
    try:
        unused = NOW - timedelta(days=120)
        entry = memory.prepare_entry({"content": "The staging VPN lives on port 1194", "created_at": unused,
                                      "last_seen_at": unused})  # fmt: skip
        other = memory.prepare_entry({"content": "The office wifi is called Tardis", "last_seen_at": unused})
        memory.save_many([entry, other])
        memory.get(entry.id)  # the library's get (and the CLI's search, and the dream) are no use
        memory.search(limit=5, reinforce=True)  # a listing is no use
        Recall(memory).build("what is on port 8080?", "s1", WorkingMemory(settings, "session/s1"))  # fallback
        dreamer = Dreamer(memory, graph, settings, Templates(settings.prompts_dir), lambda: now[0])
        report = dreamer.run_deterministic()
        # base 0.7 · e^(−0.03 · 120) · log2(1 + 1) · 1.2: an archive candidate, listed, not archived
        expected = 0.7 * math.exp(-0.03 * 120) * math.log2(1 + 1) * 1.2
        listed = {c.id: c for c in report.archive_candidates}
        assert set(listed) == {entry.id, other.id} and expected < 0.05
        assert listed[entry.id].salience == pytest.approx(expected, abs=1e-4) and listed[entry.id].uses == 1
        after = memory.get(entry.id)
        assert (after.importance, after.archived, after.reinforcement_count) == (0.7, False, 1)
        assert report.applied == [] and report.tier_changes == []
        memory.search("staging VPN", include_dormant=True, reinforce=True)  # a query's results: a use
        memory.search("staging VPN", include_dormant=True, reinforce=True)  # at most once a minute
        assert memory.get(entry.id).reinforcement_count == 2
        now[0] = NOW + timedelta(seconds=61)
        memory.reinforce([entry.id])
        assert memory.get(entry.id).reinforcement_count == 3
        changes = dreamer.run_deterministic().tier_changes
        assert [(c.id, c.from_tier, c.to_tier) for c in changes] == [(entry.id, "archive_candidate", "active")]
        assert dreamer.run_deterministic().tier_changes == []  # a re-run right after: no change
    finally:
        graph.close()
        memory.close()
    defaults = Settings(home=tmp_path)  # embeddings: the default
    assert (defaults.salience_lambda, defaults.salience_floor, defaults.salience_flush_s) == (0.03, 0.4, 2.0)
    assert defaults.reinforce_interval_s == 60 and (ACTIVE_MIN, FADING_MIN, DORMANT_MIN) == (0.5, 0.2, 0.05)
    assert (BASE_EXPLICIT, BASE_AGENT, BASE_DERIVED) == (1.0, 0.7, 0.5) and RANKING_FLOOR == 0.4
    assert TYPE_WEIGHTS == {"core": 1.5, "semantic": 1.2, "procedural": 1.0, "episodic": 0.8}
    readme = " ".join((ROOT / "docs" / "salience.md").read_text(encoding="utf-8").split())
    for statement in (
        "salience = base · e^(−λ · days since last use) · log2(uses + 1) · type_weight, capped at 1",
        "1.0 for what the user asked to remember explicitly, 0.7 for what an agent saved on its own",
        "0.5 for what was inferred or derived",
        "**λ** = 0.03 per day",
        "core 1.5, semantic 1.2, procedural 1.0, episodic 0.8",
        "active ≥ 0.5, fading 0.2–0.5, dormant 0.05–0.2, archive candidate < 0.05",
        "min(1, max(floor, salience / 0.5)), floor 0.4 by default",
        "Each counts at most once a minute per memory",
        "a crash may lose the last ~2 s of reinforcement",
        "a listing without one is no use",
        "Not a use: the first-turn fallback",
        "nor the CLI's `search`",
        "An imported memory without `last_seen_at` starts its life at the import",
        "The pass archives nothing and writes no memory: importance is the salience base, never lowered.",
        "a re-run right after reports no change and counts no use twice",
    ):
        assert statement in readme, statement
    mentions = statements(r"\bdecay")
    assert {name for name, _ in mentions} >= {"salience.md", "dream.py"}
    for name, sentence in mentions:
        assert not re.search(r"lower\w* (the )?importance|importance (halves|is lowered)|0\.5\^", sentence), (
            f"{name}: {sentence}"
        )


def test_the_readme_fits_on_a_screen_and_links_only_to_what_exists() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 250
    for target in re.findall(r"\]\(((?!https?:)[^)#]+)", readme):
        assert (ROOT / target).exists(), f"README links to {target}, which does not exist"


def test_the_generated_reference_pages_are_current() -> None:
    """docs/reference/ is written by scripts/docs_reference.py from the settings object and the parser: a setting
    or a flag added without running it fails here."""
    spec = importlib.util.spec_from_file_location("docs_reference", ROOT / "scripts" / "docs_reference.py")
    assert spec is not None and spec.loader is not None
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    for relative, make in generator.PAGES.items():
        page = ROOT / "docs" / relative
        assert page.read_text(encoding="utf-8") == make(), f"{relative} is stale: run python scripts/docs_reference.py"


def test_the_docs_site_builds_strictly(tmp_path: Path) -> None:
    """mkdocs --strict: a broken link, a missing anchor or a page left out of the navigation fails the build."""
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    assert (tmp_path / "site" / "reference" / "settings" / "index.html").exists()
