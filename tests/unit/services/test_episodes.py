"""The episodic store: typed episodes appended per day, read in order, the seed's markdown view, time
queries, and a user's explicit delete."""

from __future__ import annotations

import threading
from datetime import UTC, date, datetime, timedelta

import pytest

from rockmem_mcp.config import Settings
from rockmem_mcp.errors import InvalidInputError
from rockmem_mcp.services.episodes import Episodes

from .helpers import FakeClock

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
