"""The episodic store: typed episodes appended per day, read in order, the seed's markdown view, time
queries, and a user's explicit delete."""

from __future__ import annotations

import shutil
import threading
import time
from datetime import UTC, date, datetime, timedelta

import pytest

from rockmem_mcp.config import Settings
from rockmem_mcp.episodes.service import Episodes
from rockmem_mcp.errors import InvalidInputError
from rockmem_mcp.storage.daily_log import DailyLog
from tests.unit.helpers import FakeClock

DAY = datetime(2026, 2, 2, 14, 30, tzinfo=UTC)


@pytest.fixture
def episodes(settings: Settings) -> Episodes:
    return Episodes(settings, clock=FakeClock(DAY, step=timedelta(minutes=75)))


def test_a_day_reads_back_in_order_as_the_seeds_markdown_log(episodes: Episodes, settings: Settings) -> None:
    episodes.record(
        "Discussed memory architecture directions with user.\nChose the hybrid approach.",
        type="decision", confidence="high", tags=["memory", "Architecture"],
    )  # fmt: skip
    episodes.record("User prefers brainstorming before implementation.", type="preference", tags=["workflow"])
    episodes.record("## Injected heading\n# and another", type="fact")
    assert [e.type for e in episodes.on(DAY.date())] == ["decision", "preference", "fact"]
    assert (settings.episodes_dir / "2026-02-02.jsonl").exists()
    assert episodes.markdown(DAY.date()) == (
        "# 2026-02-02 — Episode Log\n\n"
        "## 14:30 | decision | confidence:high | tags:[memory, Architecture]\n"
        "Discussed memory architecture directions with user.\nChose the hybrid approach.\n\n"
        "## 15:45 | preference | confidence:medium | tags:[workflow]\n"
        "User prefers brainstorming before implementation.\n\n"
        "## 17:00 | fact | confidence:medium | tags:[]\n"
        "\\## Injected heading\n\\# and another\n"
    )


def test_time_queries_read_the_days_in_range_in_order(episodes: Episodes) -> None:
    for n in range(10):
        episodes.record(f"deploy {'review' if n % 2 else 'rollback'} number {n}", at=DAY + timedelta(days=n))
    found = episodes.between(DAY + timedelta(days=2), DAY + timedelta(days=5))
    assert [e.content for e in found] == [f"deploy {'review' if n % 2 else 'rollback'} number {n}" for n in (2, 3, 4)]
    assert [e.content for e in episodes.between(DAY, DAY + timedelta(days=10), query="reviews")] == [
        f"deploy review number {n}" for n in (1, 3, 5, 7, 9)
    ]  # words as search stems them
    assert [e.content for e in episodes.between(DAY, DAY + timedelta(days=10), limit=2)] == [
        "deploy rollback number 0", "deploy review number 1",
    ]  # fmt: skip
    clock_now = DAY + timedelta(days=9, hours=1)
    recent = Episodes(episodes.settings, clock=lambda: clock_now).last(7)
    assert [e.content.rsplit(" ", 1)[1] for e in recent] == ["3", "4", "5", "6", "7", "8", "9"]
    with pytest.raises(InvalidInputError, match="end of the period"):
        episodes.between(DAY, DAY)


def test_bad_episodes_are_refused_with_what_to_send(episodes: Episodes) -> None:
    for kwargs, message in [
        ({"type": "rumour"}, "type must be one of decision, fact"),
        ({"confidence": "certain"}, "confidence must be one of high, medium, low"),
        ({"source": "guess"}, "source must be one of conversation, reflection, user-explicit"),
        ({"memory_id": "../x"}, "invalid memory id"),
    ]:
        with pytest.raises(InvalidInputError, match=message):
            episodes.record("something happened", **kwargs)
    with pytest.raises(InvalidInputError, match="content is empty"):
        episodes.record("  ")
    assert episodes.log.days() == []  # nothing written for a refused episode


def test_an_explicit_delete_removes_one_episode_and_keeps_the_rest(episodes: Episodes) -> None:
    kept = episodes.record("kept one")
    gone = episodes.record("deleted one")
    later = episodes.record("kept too")
    assert episodes.delete(gone.id, DAY.date()) is True
    assert [e.id for e in episodes.on(DAY.date())] == [kept.id, later.id]
    assert episodes.delete(gone.id, DAY.date()) is False
    assert episodes.delete(kept.id, date(2030, 1, 1)) is False


def test_appends_from_many_threads_while_deleting_lose_nothing(settings: Settings) -> None:
    """Each writer its own Episodes (as processes each have theirs): appends and a delete's rewrite of the day
    share the day file's lock, so no acknowledged append is lost to the rewrite."""
    target = Episodes(settings).record("to delete", at=DAY)
    written: list[str] = []
    lock = threading.Lock()

    def writer(n: int) -> None:
        mine = Episodes(settings)
        for i in range(25):
            episode = mine.record(f"writer {n} episode {i}", at=DAY + timedelta(seconds=n * 100 + i))
            with lock:
                written.append(episode.id)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    assert Episodes(settings).delete(target.id, DAY.date())
    for thread in threads:
        thread.join()
    ids = [e.id for e in Episodes(settings).on(DAY.date())]
    assert sorted(ids) == sorted(written) and target.id not in ids


def test_search_finds_episodes_by_keywords_best_first_and_lists_a_period_in_order(episodes: Episodes) -> None:
    episodes.record("We chose PostgreSQL for the billing service", type="decision", confidence="high")
    episodes.record("Lunch was late", type="event")
    episodes.record("PostgreSQL upgrade postponed; PostgreSQL 17 later", type="task", tags=["db"])
    found = episodes.search("postgresql billing")
    assert found.hits[0].episode.content == "We chose PostgreSQL for the billing service"
    assert found.total_matches == 2 and all(h.store == "episodes" for h in found.hits)
    assert found.hits[0].resource == "rockmem://episodes/2026-02-02"
    assert [h.episode.type for h in episodes.search("postgresql", types=["task"]).hits] == ["task"]
    assert [h.episode.type for h in episodes.search("postgresql", tags=["DB"]).hits] == ["task"]
    listed = episodes.search(since=DAY, until=DAY + timedelta(days=1))
    assert [h.episode.content.split()[0] for h in listed.hits] == ["We", "Lunch", "PostgreSQL"]
    assert all(h.score is None for h in listed.hits) and listed.total_matches == 3
    assert episodes.search(since=DAY + timedelta(hours=1), until=DAY + timedelta(hours=3), limit=1).total_matches == 2


def test_search_follows_other_processes_appends_deletes_and_old_days(settings: Settings) -> None:
    clock = lambda: DAY  # noqa: E731
    reader, writer = Episodes(settings, clock=clock), Episodes(settings, clock=clock)
    assert reader.search("kiwi").hits == []  # the index is built (empty) before the other writes
    first = writer.record("kiwi harvest started", at=DAY)
    assert [h.episode.id for h in reader.search("kiwi").hits] == [first.id]  # an append to today's file
    old = writer.record("kiwi seeds planted", at=DAY - timedelta(days=30))  # a day beyond the newest two
    assert {h.episode.id for h in reader.search("kiwi").hits} == {first.id, old.id}
    assert writer.delete(first.id, DAY.date())
    assert [h.episode.id for h in reader.search("kiwi").hits] == [old.id]


def test_old_unused_low_confidence_episodes_rank_lower_but_are_not_hidden(settings: Settings) -> None:
    now = DAY + timedelta(days=200)
    episodes = Episodes(settings, clock=lambda: now)
    old = episodes.record("espresso machine descaled", confidence="low", at=DAY)
    new = episodes.record("espresso machine descaled", confidence="high", at=now)
    hits = episodes.search("espresso descaled").hits
    assert [h.episode.id for h in hits] == [new.id, old.id]
    assert hits[1].score < hits[0].score and hits[1].salience < 0.05


def test_a_search_that_need_not_wait_skips_episodes_while_another_thread_builds_the_index(settings: Settings) -> None:
    episodes = Episodes(settings)
    episodes.record("kiwi harvest started", at=DAY)
    building = threading.Event()
    release = threading.Event()
    real_sync = episodes.index.sync

    def slow_sync() -> None:
        building.set()
        release.wait()
        real_sync()

    episodes.index.sync = slow_sync  # type: ignore[method-assign]
    warm = threading.Thread(target=episodes.warm)
    warm.start()
    building.wait()
    assert episodes.search("kiwi", wait=False).hits == []  # not waited for
    release.set()
    warm.join()
    episodes.index.sync = real_sync  # type: ignore[method-assign]
    assert [h.episode.content for h in episodes.search("kiwi", wait=False).hits] == ["kiwi harvest started"]
    fresh = Episodes(settings)  # nobody building: a search that need not wait builds it itself
    assert [h.episode.content for h in fresh.search("kiwi", wait=False).hits] == ["kiwi harvest started"]


def test_a_day_rewritten_in_place_is_read_again_from_its_start(settings: Settings) -> None:
    """A delete's rewrite can get the old inode back (ext4 reuses freed ones): the index must not read on from
    its old offset in what is now another file."""
    reader, writer = Episodes(settings, clock=lambda: DAY), Episodes(settings, clock=lambda: DAY)
    old = [writer.record(f"walrus census {n}", at=DAY) for n in range(3)]
    assert len(reader.search("walrus").hits) == 3
    path = settings.episodes_dir / f"{DAY.date().isoformat()}.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    new = writer.record("walrus census moved", at=DAY)
    newest = path.read_bytes().splitlines(keepends=True)[-1]
    with path.open("r+b") as f:  # the same inode, other bytes before the reader's offset, and longer
        f.write(lines[2] + newest + lines[0] + lines[1])
    assert sorted(h.episode.id for h in reader.search("walrus").hits) == sorted([new.id, *(e.id for e in old)])
    with path.open("r+b") as f:  # the same inode, shorter
        f.write(lines[1])
        f.truncate()
    assert [h.episode.id for h in reader.search("walrus").hits] == [old[1].id]


def test_appends_to_today_are_seen_though_later_days_have_logs(settings: Settings) -> None:
    now = datetime.now(UTC)
    reader, writer = Episodes(settings), Episodes(settings)
    writer.record("kiwi planted", at=now)
    writer.record("kiwi planned", at=now + timedelta(days=30))  # a later day (an import, a clock ahead)
    writer.record("kiwi planned again", at=now + timedelta(days=31))
    assert len(reader.search("kiwi").hits) == 3
    writer.record("kiwi watered", at=now)  # today's log grows; no listing changes
    assert len(reader.search("kiwi").hits) == 4


def test_episode_times_are_kept_in_utc_whatever_they_came_with() -> None:
    from rockmem_mcp.models import Episode

    naive = Episode.model_validate({"id": "a" * 12, "at": "2026-01-05T10:00:00", "content": "x"})
    shifted = Episode.model_validate({"id": "b" * 12, "at": "2026-01-07T02:00:00+05:00", "content": "x"})
    assert naive.at == datetime(2026, 1, 5, 10, tzinfo=UTC) and naive.at.tzinfo is UTC
    assert shifted.at == datetime(2026, 1, 6, 21, tzinfo=UTC) and shifted.at.date() == date(2026, 1, 6)


def test_a_days_markdown_reads_the_same_through_plain_json_and_through_the_model(settings: Settings) -> None:
    episodes = Episodes(settings, clock=FakeClock(DAY, step=timedelta(minutes=10)))
    for n in range(3):
        episodes.record(f"step {n}", type="task", tags=["a:b", "c"])
    plain = episodes.markdown(DAY.date())
    assert plain.count("## ") == 3 and "tags:[a\\:b, c]" in plain
    path = settings.episodes_dir / f"{DAY.date().isoformat()}.jsonl"
    line = b'{"id": "dddddddddddd", "at": "2026-02-02T19:25:00+05:00", "type": "event", "content": "early"}\n'
    path.write_bytes(path.read_bytes() + line)  # an offset time, as an old import wrote: the model reads this day
    checked = episodes.markdown(DAY.date())
    assert checked.split("\n")[2] == "## 14:25 | event | confidence:medium | tags:[]"  # 19:25+05:00, first
    assert checked.replace("## 14:25 | event | confidence:medium | tags:[]\nearly\n\n", "") == plain


def _found(episodes: Episodes, query: str) -> list[str]:
    return sorted(hit.episode.id for hit in episodes.search(query, limit=100).hits)


def test_a_restart_restores_the_index_and_reads_only_what_the_day_files_gained(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The index is saved at close and restored by the next start, which checks each day file against it: an
    unchanged day is not parsed again, a changed one (grown, or rewritten by a delete) is read again from its
    start, a removed one dropped and a new one read; the answers are those of a full rebuild."""
    clock = lambda: DAY  # noqa: E731
    first = Episodes(settings, clock=clock)
    first.index.clock = _later
    days = [DAY - timedelta(days=d) for d in (40, 30, 20, 10)]
    made = {d: [first.record(f"otter sighting {n} on day {i}", at=d) for n in range(3)] for i, d in enumerate(days)}
    first.warm()
    first.close()
    assert (settings.index_dir / "episode-index.npz").is_file()

    writer = Episodes(settings, clock=clock)  # what happens while no server runs
    grown = writer.record("otter sighting late on day 1", at=days[1])
    assert writer.delete(made[days[2]][0].id, days[2].date())  # the day is rewritten
    (settings.episodes_dir / f"{days[3].date().isoformat()}.jsonl").unlink()
    new_day = writer.record("otter sighting on a new day", at=DAY - timedelta(days=5))

    parsed: list[tuple[date, int]] = []
    read_from = DailyLog.read_from

    def counting(self: DailyLog, day: date, offset: int, *args: object) -> object:
        result = read_from(self, day, offset, *args)  # type: ignore[arg-type]
        parsed.append((day, len(result[0])))
        return result

    monkeypatch.setattr(DailyLog, "read_from", counting)
    restarted = Episodes(settings, clock=clock)
    restarted.warm()
    expected = sorted(
        [*(e.id for e in made[days[0]]), *(e.id for e in made[days[1]]), grown.id, *(e.id for e in made[days[2]][1:]),
         new_day.id]
    )  # fmt: skip
    assert _found(restarted, "otter") == expected
    lines_read = dict(parsed)
    assert days[0].date() not in lines_read  # unchanged: compared, not read
    assert lines_read[days[1].date()] == 4  # grown: read again from its start
    assert lines_read[days[2].date()] == 2  # rewritten
    monkeypatch.undo()
    (settings.index_dir / "episode-index.npz").unlink()
    assert _found(Episodes(settings, clock=clock), "otter") == expected  # a full rebuild agrees


def _later() -> int:
    """The index's clock 10 s on: the days the test just wrote count as settled, so the snapshot keeps them."""
    return time.time_ns() + 10_000_000_000


def test_a_day_rewritten_in_place_to_the_same_size_and_ending_is_read_again_after_a_restart(
    settings: Settings,
) -> None:
    """A rewrite that keeps the inode, the size and the last bytes (a delete, then an append of a line of the
    same length and ending) passes a tail check; across a restart the file's times tell it changed."""
    clock = lambda: DAY  # noqa: E731
    first = Episodes(settings, clock=clock)
    first.index.clock = _later
    made = [first.record(f"weather forecast {n} for tomorrow morning", at=DAY) for n in range(3)]
    first.warm()
    first.close()
    path = settings.episodes_dir / f"{DAY.date().isoformat()}.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    replacement = lines[1].replace(made[1].id.encode(), b"0123456789ab")
    with path.open("r+b") as f:  # same inode, same size, same last bytes; the middle episode is another one
        f.write(lines[0] + replacement + lines[2])
    found = _found(Episodes(settings, clock=clock), "weather")
    assert found == sorted([made[0].id, "0123456789ab", made[2].id])


def test_restored_days_whose_folder_is_gone_are_dropped(settings: Settings) -> None:
    clock = lambda: DAY  # noqa: E731
    first = Episodes(settings, clock=clock)
    first.index.clock = _later
    for d in range(5):
        first.record(f"otter sighting {d}", at=DAY - timedelta(days=10 * d))
    first.warm()
    first.close()
    shutil.rmtree(settings.episodes_dir)
    restarted = Episodes(settings, clock=clock)
    found = restarted.search("otter")
    assert (found.total_matches, found.hits) == (0, [])
    assert restarted.days() == []


@pytest.mark.parametrize("damage", [b"", b"not a snapshot", None], ids=["empty", "garbage", "truncated"])
def test_a_damaged_episode_index_snapshot_is_rebuilt_from_the_day_files(
    settings: Settings, damage: bytes | None
) -> None:
    clock = lambda: DAY  # noqa: E731
    first = Episodes(settings, clock=clock)
    first.index.clock = _later
    saved = [first.record(f"heron nest {n}", at=DAY - timedelta(days=n)) for n in range(4)]
    first.warm()
    first.close()
    path = settings.index_dir / "episode-index.npz"
    path.write_bytes(path.read_bytes()[:-20] if damage is None else damage)
    assert _found(Episodes(settings, clock=clock), "heron") == sorted(e.id for e in saved)


def test_removing_a_day_keeps_an_episode_whose_line_was_copied_into_another_day(settings: Settings) -> None:
    """An id in two day files (a line copied by hand) is indexed once, from the later file; dropping the other
    day must not take it out of the index."""
    clock = lambda: DAY  # noqa: E731
    writer = Episodes(settings, clock=clock)
    early = writer.record("badger sett found", at=DAY - timedelta(days=3))
    writer.record("badger tracks", at=DAY - timedelta(days=3))
    early_file = settings.episodes_dir / f"{(DAY - timedelta(days=3)).date().isoformat()}.jsonl"
    later_file = settings.episodes_dir / f"{(DAY - timedelta(days=1)).date().isoformat()}.jsonl"
    later_file.write_bytes(early_file.read_bytes().splitlines(keepends=True)[0])  # the copy, in a later day
    reader = Episodes(settings, clock=clock)
    assert early.id in _found(reader, "badger")
    early_file.unlink()
    assert _found(reader, "badger") == [early.id]  # still found, from the later day's copy
