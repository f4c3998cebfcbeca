"""The pinned vault: pin and unpin through save and update (the index's salience follows), a delete of a pinned
memory only with confirm_pinned, and no dream action (merge, archive, update, purge) on a pinned memory, nor on
one used 5 times or more counting the uses in the access log."""

from __future__ import annotations

from datetime import timedelta

import pytest

from rockmem_mcp.config import Settings
from rockmem_mcp.consolidation.dream import Dreamer
from rockmem_mcp.consolidation.shapes import DreamPlan, PlanArchive, PlanMerge, PlanUpdate
from rockmem_mcp.consolidation.templates import Templates
from rockmem_mcp.errors import InvalidInputError, NotFoundError
from rockmem_mcp.graph.service import GraphService
from rockmem_mcp.memory.service import MemoryService
from tests.unit.helpers import T0, FakeClock

DAY = timedelta(days=1)


@pytest.fixture
def dreamer(service: MemoryService, settings: Settings, clock: FakeClock) -> Dreamer:
    graph = GraphService(settings, clock=clock)
    yield Dreamer(service, graph, settings, Templates(settings.prompts_dir), clock)
    graph.close()


def test_pin_and_unpin_through_save_and_update_reach_the_index(service: MemoryService, clock: FakeClock) -> None:
    pinned = service.save("The user's passport number is in the blue folder", pinned=True)
    plain = service.save("The user's passport expires in 2031")
    assert service.get(pinned.id).pinned and not service.get(plain.id).pinned
    clock.now = T0 + 400 * DAY  # long unused: the plain one is dormant, the pinned one stays at 1
    hits = {h.entry.id: h for h in service.search("passport", include_dormant=True).results}
    assert (hits[pinned.id].salience, hits[pinned.id].tier) == (1.0, "active")
    assert hits[plain.id].salience < 0.05
    assert service.update(plain.id, pinned=True).pinned
    assert service.update(pinned.id, pinned=False).pinned is False
    hits = {h.entry.id: h for h in service.search("passport", include_dormant=True).results}
    assert hits[plain.id].salience == 1.0 and hits[pinned.id].salience < 0.05
    assert [h.entry.id for h in service.search("passport").results] == [plain.id]  # the unpinned one is dormant


@pytest.mark.parametrize("permanent", [False, True])
def test_deleting_a_pinned_memory_needs_confirmation(service: MemoryService, permanent: bool) -> None:
    entry = service.save("The user's blood type is O negative", pinned=True)
    with pytest.raises(InvalidInputError, match=r"pinned.*confirm_pinned=true"):
        service.delete(entry.id, permanent=permanent)
    assert not service.get(entry.id).archived  # refused: nothing changed
    result = service.delete(entry.id, permanent=permanent, confirm_pinned=True)
    if permanent:
        with pytest.raises(NotFoundError):
            service.get(entry.id)
    else:
        assert result.entry is not None and service.get(entry.id).archived
        with pytest.raises(InvalidInputError, match="confirm_pinned"):  # erasing the archived one: asked again
            service.delete(entry.id, permanent=True)
    plain = service.save("a plain note")
    assert service.delete(plain.id).entry is not None  # no confirmation for an unpinned memory


def test_no_dream_plan_action_touches_a_pinned_memory(dreamer: Dreamer, service: MemoryService) -> None:
    pinned = service.save("The user is allergic to peanuts", pinned=True)
    twin = service.save("The user is allergic to peanuts!")
    other = service.save("The user edits in vim")
    before = service.get(pinned.id)
    plan = DreamPlan(
        merges=[PlanMerge(ids=[pinned.id, twin.id], content="The user is allergic to peanuts")],
        archives=[PlanArchive(id=pinned.id, reason="stale")],
        updates=[PlanUpdate(id=pinned.id, category="health")],
    )
    for mode in ("agent", "llm", "sampling", "plan"):  # every driver's plan goes through apply
        report = dreamer.apply(plan, "consolidation", mode)
        assert report.applied == []
        assert [r.action for r in report.rejected] == ["merge", "archive", "update"]
        assert all(f"{pinned.id} is pinned" in r.reason for r in report.rejected)
    assert service.get(pinned.id) == before and not service.get(twin.id).archived
    assert not service.get(other.id).archived


def test_the_deterministic_pass_neither_merges_nor_purges_a_pinned_memory(
    dreamer: Dreamer, service: MemoryService, clock: FakeClock
) -> None:
    pinned = service.save("The user is allergic to peanuts", pinned=True)
    twin = service.save("the user is allergic to peanuts")
    old = service.save("An old pinned note", pinned=True)
    service.delete(old.id, confirm_pinned=True)
    clock.now = T0 + 100 * DAY  # the archive is over 90 days old
    report = dreamer.run_deterministic()
    assert report.applied == [] or all(a.action == "decay" for a in report.applied)
    rejected = {r.action: r for r in report.rejected}
    assert pinned.id in rejected["merge"].reason and "pinned" in rejected["merge"].reason
    assert rejected["purge"].ids == [old.id] and "pinned" in rejected["purge"].reason
    assert service.get(old.id).archived and not service.get(twin.id).archived


def test_uses_in_the_access_log_protect_a_memory_its_file_counts_once(
    dreamer: Dreamer, service: MemoryService, clock: FakeClock
) -> None:
    used = service.save("The deploy runbook is in the ops wiki")
    for _ in range(5):
        clock.now += timedelta(minutes=2)  # reinforcement counts once a minute
        service.reinforce([used.id])
    assert service.get(used.id).reinforcement_count == 6
    report = dreamer.apply(DreamPlan(archives=[PlanArchive(id=used.id, reason="stale")]), "consolidation")
    assert report.applied == [] and f"{used.id} was used 6 times" in report.rejected[0].reason
    assert not service.get(used.id).archived
