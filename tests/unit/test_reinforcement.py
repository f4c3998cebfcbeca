"""Reinforcement on use and how salience shapes what search and recall return."""

from __future__ import annotations

import io
import json
import threading
from datetime import timedelta
from pathlib import Path
from unittest import mock

from rockmem_mcp.config import Settings
from rockmem_mcp.home.transfer import export_jsonl, import_jsonl
from rockmem_mcp.memory.service import MemoryService
from rockmem_mcp.recall.service import Recall
from rockmem_mcp.reinforcement import MEMORY, Reinforcer
from rockmem_mcp.storage.access_log import Access, AccessLog
from rockmem_mcp.working.service import WorkingMemory
from tests.unit.helpers import T0, FakeClock, Services

DAY = timedelta(days=1)


def uses(service: MemoryService, entry_id: str) -> int:
    return service.get(entry_id).reinforcement_count


def found(service: MemoryService, query: str | None, **kwargs) -> list[str]:
    return [h.entry.id for h in service.search(query, **kwargs).results]


# ---------------------------------------------------------------------- reinforcement
def test_search_hits_get_and_recall_count_as_uses_listings_do_not(service: MemoryService, settings: Settings,
                                                                  clock: FakeClock) -> None:  # fmt: skip
    entry = service.save("The staging VPN listens on port 1194", category="ops")
    clock.now += timedelta(minutes=2)
    service.search("staging VPN", reinforce=True)
    assert uses(service, entry.id) == 2
    clock.now += timedelta(minutes=2)
    service.search(None, reinforce=True)  # a listing is not a use
    service.search("staging VPN")  # nor a search that does not ask
    assert uses(service, entry.id) == 2
    service.get(entry.id, reinforce=True)
    assert uses(service, entry.id) == 3
    clock.now += timedelta(minutes=2)
    Recall(service).build("which port does the staging VPN use?", "s1", WorkingMemory(settings, "session/s1"))
    got = service.get(entry.id)
    assert got.reinforcement_count == 4 and got.last_seen_at is not None and got.last_seen_at > T0


def test_an_item_is_reinforced_at_most_once_a_minute(service: MemoryService, clock: FakeClock) -> None:
    entry = service.save("Alice prefers tea")
    clock.now += timedelta(minutes=5)
    for _ in range(10):  # the fake clock moves a second per call: all within one minute
        service.get(entry.id, reinforce=True)
    assert uses(service, entry.id) == 2
    clock.now += timedelta(minutes=1)
    service.get(entry.id, reinforce=True)
    assert uses(service, entry.id) == 3


def test_the_first_turn_fallback_is_not_a_use(service: MemoryService, settings: Settings, clock: FakeClock) -> None:
    entry = service.save("Alice prefers tea")
    clock.now += timedelta(minutes=5)
    block = Recall(service).build("hello", "s1", WorkingMemory(settings, "session/s1"))
    assert block.first_turn_fallback and [m.id for m in block.memories] == [entry.id]
    assert uses(service, entry.id) == 1


def test_uses_survive_a_restart_and_are_not_written_into_the_memory_file(services: Services,
                                                                          settings: Settings) -> None:  # fmt: skip
    clock = FakeClock()
    first = services.open(clock=clock)
    entry = first.save("Alice prefers tea")
    before = first.files.path_for(entry.id, None).read_bytes()
    clock.now += timedelta(minutes=5)
    first.get(entry.id, reinforce=True)
    assert first.files.path_for(entry.id, None).read_bytes() == before  # a read never rewrites the memory
    services.close(first)
    again = services.open(clock=FakeClock(T0 + DAY))
    got = again.get(entry.id)
    assert got.reinforcement_count == 2 and got.last_seen_at == T0 + timedelta(minutes=5, seconds=1)


def test_an_export_carries_the_uses_and_an_import_keeps_them(services: Services, tmp_path: Path) -> None:
    clock = FakeClock()
    source = services.open(clock=clock)
    entry = source.save("Alice prefers tea")
    clock.now += timedelta(minutes=5)
    source.get(entry.id, reinforce=True)
    out = io.StringIO()
    export_jsonl(source, out)
    target = services.open(Settings(home=tmp_path / "restored", embedding_model="off"), clock=FakeClock(T0 + DAY))
    import_jsonl(target, out.getvalue().splitlines())
    restored = target.get(entry.id)
    assert (restored.reinforcement_count, restored.last_seen_at) == (2, T0 + timedelta(minutes=5, seconds=1))


def test_another_process_sees_the_uses_after_a_flush(services: Services) -> None:
    clock = FakeClock()
    mine, theirs = services.open(clock=clock), services.open(clock=FakeClock())
    entry = mine.save("Alice prefers tea")
    clock.now += timedelta(minutes=5)
    mine.get(entry.id, reinforce=True)
    assert theirs.get(entry.id).reinforcement_count == 1  # not flushed yet (every 2 s in the background)
    mine.reinforcer.flush()
    assert theirs.get(entry.id).reinforcement_count == 2


def test_a_search_never_waits_for_the_reinforcement_write(service: MemoryService, clock: FakeClock) -> None:
    entry = service.save("Alice prefers tea")
    clock.now += timedelta(minutes=5)
    writing, release = threading.Event(), threading.Event()
    real_append = AccessLog.append

    def slow_append(self: AccessLog, items: dict) -> None:
        writing.set()
        release.wait(10)
        real_append(self, items)

    with mock.patch.object(AccessLog, "append", slow_append):
        service.search("tea", reinforce=True)
        flusher = threading.Thread(target=service.reinforcer.flush)
        flusher.start()
        assert writing.wait(10)  # the write is in progress (stuck on a slow disk) ...
        clock.now += timedelta(minutes=5)
        assert found(service, "tea", reinforce=True) == [entry.id]  # ... and searches still answer
        assert service.get(entry.id).reinforcement_count == 3
        release.set()
        flusher.join()


def test_a_failed_write_keeps_the_uses_for_the_next_flush(settings: Settings) -> None:
    clock = FakeClock()
    reinforcer = Reinforcer(settings, AccessLog(settings.access_dir), clock)
    reinforcer.use(MEMORY, {"m1": Access(1, 0.0)})
    with mock.patch.object(AccessLog, "append", side_effect=OSError(28, "No space left on device")):
        assert reinforcer.flush() == 0
    assert reinforcer.flush() == 1
    reinforcer.close()
    assert AccessLog(settings.access_dir).load()[0][:2] == (MEMORY, "m1")


# ---------------------------------------------------------------------- ranking
def test_dormant_memories_leave_search_and_recall_but_not_reads_by_id(services: Services, settings: Settings) -> None:
    clock = FakeClock()
    service = services.open(clock=clock)
    old = service.save("The old build server is called hopper")
    clock.now += 90 * DAY  # 0.84 × e^(−2.7) ≈ 0.06: dormant
    fresh = service.save("The new build server is called grace")
    assert found(service, "build server") == [fresh.id]
    assert found(service, None) == [fresh.id]
    hits = service.search("build server", include_dormant=True).results
    assert [(h.entry.id, h.tier) for h in hits] == [(fresh.id, "active"), (old.id, "dormant")]
    assert service.get(old.id).id == old.id
    block = Recall(service).build("which build server do we use?", "s1", WorkingMemory(settings, "session/s1"))
    assert [m.id for m in block.memories] == [fresh.id]
    assert found(service, "build server", mode="rockbot") == [fresh.id, old.id]  # RockBot's ranking, exactly
    off = services.open(settings.model_copy(update={"salience": False}), clock=FakeClock(clock.now))
    assert set(found(off, "build server")) == {fresh.id, old.id}


def test_a_used_memory_outranks_an_equally_relevant_unused_one(services: Services) -> None:
    clock = FakeClock()
    service = services.open(clock=clock)
    unused = service.save("deploy checklist for the web app")
    used = service.save("deploy checklist for the web api")
    for _ in range(6):  # read every five days for a month: the other one fades
        clock.now += 5 * DAY
        service.get(used.id, reinforce=True)
    hits = service.search("deploy checklist").results
    assert [h.entry.id for h in hits] == [used.id, unused.id]
    assert (hits[0].tier, hits[1].tier) == ("active", "fading")
    assert hits[0].score > hits[1].score


def test_salience_never_buries_a_much_stronger_match(services: Services) -> None:
    clock = FakeClock()
    service = services.open(clock=clock)
    strong = service.save("kubernetes ingress certificate renewal kubernetes ingress certificate")
    clock.now += 40 * DAY  # fading (0.84 × e^(−1.2) ≈ 0.25: factor 0.5)
    weak = service.save("a note that mentions kubernetes once among many other unrelated words here")
    hits = service.search("kubernetes ingress certificate").results
    assert [h.entry.id for h in hits] == [strong.id, weak.id]
    assert hits[0].tier == "fading"


def test_what_the_user_asked_to_remember_opens_the_session(services: Services, settings: Settings) -> None:
    clock = FakeClock()
    service = services.open(clock=clock)
    asked = service.save("Call me Sam", importance=1.0)
    clock.now += 10 * DAY  # 1.0 × e^(−0.3) × 1.2 ≈ 0.89: above the newer notes' 0.84
    newer = [service.save(f"note number {i}") for i in range(6)]
    text = Recall(service).session_start(WorkingMemory(settings, "session/s1"))
    listed = text.split("Pinned and most salient memories:\n", 1)[1].split("Categories", 1)[0]
    ids = [line.split("]")[0].removeprefix("- [") for line in listed.splitlines()]
    assert ids == [asked.id, *(e.id for e in reversed(newer[2:]))]  # then the newest of equals


def test_pinned_memories_open_the_session_even_among_others_at_the_cap(services: Services, settings: Settings) -> None:
    clock = FakeClock()
    service = services.open(clock=clock)
    pinned = service.save("The user's partner is called Carol", pinned=True)
    clock.now += DAY
    for i in range(6):  # asked for by the user: 1.0 × 1.2, capped at 1 like the pinned one
        service.save(f"remember widget fact number {i}", importance=1.0)
    assert service.most_salient(5)[0].entry.id == pinned.id
    text = Recall(service).session_start(WorkingMemory(settings, "session/s1"))
    assert f"[{pinned.id}] (uncategorized) (pinned): The user's partner" in text


def test_uses_another_process_wrote_are_reported_when_a_compaction_read_them(settings: Settings) -> None:
    small = settings.model_copy(update={"journal_rotate_bytes": 1000})
    mine = Reinforcer(small, AccessLog(small.access_dir), FakeClock())
    theirs = Reinforcer(small, AccessLog(small.access_dir), FakeClock())
    theirs.use(MEMORY, {"shared": Access(1, 0.0)})
    theirs.flush()
    mine.use(MEMORY, {f"m{i}": Access(1, 0.0) for i in range(40)})  # over 1,000 bytes: this flush compacts
    mine.flush()
    assert (small.access_dir / "state.json").exists()
    # the compaction read their record; the memory store learns of it from catch_up, as of any other
    assert mine.catch_up() == {(MEMORY, "shared"): Access(2, T0.timestamp())}
    mine.close()
    theirs.close()


def test_with_salience_off_the_session_opens_with_the_newest(services: Services, settings: Settings) -> None:
    off = settings.model_copy(update={"salience": False})
    clock = FakeClock()
    service = services.open(off, clock=clock)
    asked = service.save("Call me Sam", importance=1.0)
    clock.now += 200 * DAY  # long unused: dormant, yet salience is off
    newer = service.save("A later note")
    assert [h.entry.id for h in service.most_salient(5)] == [newer.id, asked.id]


def test_an_export_from_before_salience_is_mapped_on_import(service: MemoryService) -> None:
    old = {"id": "oldexport0001", "content": "Backups are encrypted with age", "importance": 0.9,
           "reinforcement_count": 1, "created_at": T0.isoformat(), "last_seen_at": T0.isoformat()}  # fmt: skip
    plain = {"id": "oldexport0002", "content": "The user likes tea", "importance": 0.5, "reinforcement_count": 1,
             "created_at": T0.isoformat()}  # fmt: skip
    written_now = {"id": "newline000001", "content": "Written by hand today", "importance": 0.5}
    import_jsonl(service, [json.dumps(line) for line in (old, plain, written_now)])
    assert service.get("oldexport0001").pinned  # the old protection (importance >= 0.8) is a pin now
    assert service.get("oldexport0002").importance == 0.7  # the old save default is an agent's save now
    assert service.get("newline000001").importance == 0.5  # not an old export: taken as written
