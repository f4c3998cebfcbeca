"""The decay pass (issue 45): its DECAY line is `system:decay`'s (seed 004 §12.3), and the archive threshold
(seed 004 §9.2, 0.05) is the setting's."""

from __future__ import annotations

from rockmem_mcp.audit.log import AuditLog
from rockmem_mcp.audit.service import DECAY
from rockmem_mcp.config import Settings
from rockmem_mcp.consolidation.dream import Dreamer
from rockmem_mcp.consolidation.templates import Templates
from rockmem_mcp.graph.service import GraphService
from tests.unit.consolidation.test_dream import idle, seed
from tests.unit.helpers import FakeClock, Services

# Importance 0.7, one use, type weight 1.2: 0.84 · e^(−0.03 · 71) ≈ 0.0998, dormant by the seed's threshold.
IDLE_DAYS_FOR_SALIENCE_0_1 = 71


def dream(services: Services, graph: GraphService, settings: Settings, clock: FakeClock) -> Dreamer:
    return Dreamer(services.open(settings, clock=clock), graph, settings, Templates(settings.prompts_dir), clock)


def test_the_decay_passs_line_is_system_decay_within_a_dream_run(
    services: Services, graph: GraphService, settings: Settings, clock: FakeClock
) -> None:
    dreamer = dream(services, graph, settings, clock)
    seed(dreamer.memory, "a note that ages", **idle(10))
    audit_log = AuditLog(settings.meta_dir / "audit.log")
    before = len(list(audit_log.lines()))
    report = dreamer.run_deterministic()
    lines = list(audit_log.lines())[before:]
    [decay] = [line for line in lines if line.action == "DECAY"]
    assert (decay.file, decay.actor, decay.approval) == ("meta/decay-scores.json", DECAY, "auto")
    assert {line.actor for line in lines if line.action != "DECAY"} == {f"dream:{report.run_id}"}


def test_a_memory_at_salience_0_1_is_an_archive_candidate_under_a_0_2_threshold_only(
    services: Services, graph: GraphService, settings: Settings, clock: FakeClock
) -> None:
    default = dream(services, graph, settings, clock)
    entry = seed(default.memory, "the old build server was called hermes", **idle(IDLE_DAYS_FOR_SALIENCE_0_1))
    report = default.run_deterministic()
    assert report.archive_candidates == [] and report.tiers["dormant"] == 1
    assert default.memory.search(tier="archive_candidate").results == []

    raised = settings.model_copy(update={"salience_archive_threshold": 0.2})
    strict = dream(services, graph, raised, clock)
    report = strict.run_deterministic()
    [candidate] = report.archive_candidates
    assert candidate.id == entry.id and candidate.tier == "archive_candidate" and 0.09 < candidate.salience < 0.11
    assert report.tiers == {"active": 0, "fading": 0, "dormant": 0, "archive_candidate": 1}
    assert [c.to_tier for c in report.tier_changes] == ["archive_candidate"]  # dormant → archive_candidate
    assert [hit.entry.id for hit in strict.memory.search(tier="archive_candidate").results] == [entry.id]
    assert not strict.memory.get(entry.id).archived  # listed for review, never archived by the pass
