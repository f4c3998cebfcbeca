"""Context from neighbours (issue 24): conversation memories (metadata `session`) borrow from their turns."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from rockmem_mcp.models import MemoryEntry
from rockmem_mcp.search.memory_index import MemoryIndex, SearchFilter, turn_number
from rockmem_mcp.search.rank import NEIGHBOUR_WEIGHTS, Neighbours, Ranking, borrow_from_neighbours, rank
from rockmem_mcp.storage.changes import JournalPosition

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
ON = Ranking("bm25", neighbours=True)
OFF = Ranking("bm25", neighbours=False)


def turn(
    entry_id: str, content: str, session: str | None = None, minutes: int = 0, place: str | None = None, **kw
) -> MemoryEntry:
    metadata = {} if session is None else {"session": session}
    if place is not None:
        metadata["turn"] = place
    return MemoryEntry(
        id=entry_id, content=content, metadata=metadata, created_at=T0 + timedelta(minutes=minutes), **kw
    )


def index_of(*entries: MemoryEntry) -> MemoryIndex:
    index = MemoryIndex()
    index.upsert_many(entries)
    return index


def found(index: MemoryIndex, query: str, ranking: Ranking = ON, **filters) -> dict[str, float]:
    hits = index.search(query, SearchFilter(**filters), 100, ranking)
    return {index.bm25.keys[s]: float(v) for s, v in zip(hits.slots.tolist(), hits.scores.tolist(), strict=True)}


def conversation() -> list[MemoryEntry]:
    return [
        turn("a1", "Mel: How did the kids handle the accident?", "s1", 0),
        turn("a2", "Caroline: They were scared but we reassured them", "s1", 1),
        turn("a3", "Mel: Glad they are fine", "s1", 2),
        turn("b1", "Caroline: Went hiking on Sunday", "s2", 3),
    ]


def test_an_answer_sharing_no_word_is_found_through_its_question() -> None:
    index = index_of(*conversation())
    assert "a2" not in found(index, "kids accident", OFF)
    with_context = found(index, "kids accident")
    top = with_context["a1"]
    assert with_context["a2"] == pytest.approx(NEIGHBOUR_WEIGHTS["bm25"] * top)
    assert with_context["a3"] == pytest.approx(NEIGHBOUR_WEIGHTS["bm25"] * top)  # within two turns


def test_neighbours_never_cross_sessions() -> None:
    # b1 follows a3 in slot and time order, but belongs to another session
    index = index_of(*conversation())
    assert set(found(index, "glad fine")) == {"a3", "a1", "a2"}
    assert "a3" not in found(index, "hiking sunday")
    assert set(found(index, "hiking sunday")) == {"b1"}


def test_memories_without_a_session_rank_exactly_as_before() -> None:
    # Plain memories interleaved (in slot and time order) with a session's turns: none lends or borrows.
    entries = [
        turn("a1", "alpha project deadline", "s1", 0),
        turn("x1", "unrelated gardening note", None, 1),
        turn("a2", "beta review tomorrow", "s1", 2),
        turn("x2", "alpha gardening tools", None, 3),
        turn("a3", "gamma release", "s1", 4),
    ]
    plain_only = index_of(*[e for e in entries if not e.metadata])
    mixed = index_of(*entries)
    for query in ("alpha", "gardening", "alpha gardening", "beta"):
        on, off = found(mixed, query), found(mixed, query, OFF)
        plain_on = {k: v for k, v in on.items() if k.startswith("x")}
        assert plain_on == {k: v for k, v in off.items() if k.startswith("x")}, query
    # and an index without any session is searched exactly as with the lever off
    for query in ("alpha", "gardening tools"):
        assert found(plain_only, query) == found(plain_only, query, OFF)
    assert plain_only.neighbours(np.ones(2, dtype=bool)) is None


def test_session_order_is_creation_time_then_turn_number_then_import_order() -> None:
    # Imported out of order, all at one instant: the turn numbers order them (2 before 10).
    entries = [
        turn("t10", "closing words", "s1", 0, "10"),
        turn("t1", "first question about the violin", "s1", 0, "1"),
        turn("t2", "plain answer", "s1", 0, "2"),
        turn("t3", "another plain line", "s1", 0, "3"),
        turn("t4", "fourth line", "s1", 0, "4"),
    ]
    index = index_of(*entries)
    assert set(found(index, "violin")) == {"t1", "t2", "t3"}
    # creation time comes first: a turn created earlier leads whatever its number
    index = index_of(turn("late", "violin lesson", "s1", 5, "1"), turn("early", "some reply", "s1", 0, "9"))
    order = index.neighbours(np.ones(2, dtype=bool))
    assert order is not None
    assert [index.bm25.keys[s] for s in order.slots.tolist()] == ["early", "late"]
    assert turn_number("12") == 12.0 and turn_number(" 3.5 ") == 3.5 and turn_number(None) == 0.0
    assert turn_number("x") == 0.0 and turn_number("nan") == 0.0 and turn_number("D3:12") == 0.0  # a number only


def test_filtered_out_and_removed_turns_neither_lend_nor_borrow() -> None:
    entries = conversation()
    entries[1] = turn("a2", "Caroline: They were scared but we reassured them", "s1", 1, category="private")
    index = index_of(*entries)
    assert "a2" not in found(index, "kids accident", category="public")
    index.remove("a1")
    assert found(index, "kids accident") == {}
    assert set(found(index, "glad fine")) == {"a3", "a2"}  # a2 and a3 are now adjacent


def test_updates_keep_the_turn_in_its_place() -> None:
    index = index_of(*conversation())
    index.upsert(turn("a1", "Mel: How did the kids handle the car accident?", "s1", 0))
    assert set(found(index, "accident")) == {"a1", "a2", "a3"}


def test_neighbours_survive_a_snapshot(tmp_path: Path) -> None:
    index = index_of(*conversation(), turn("x", "kids playing outside", None, 9))
    path = tmp_path / "index.npz"
    index.save(path, JournalPosition(1, 0))
    loaded = MemoryIndex.load(path)
    assert loaded is not None
    assert found(loaded[0], "kids accident") == found(index, "kids accident")
    assert found(loaded[0], "hiking") == found(index, "hiking")


def test_hybrid_lends_the_best_neighbours_fused_score_and_other_modes_none() -> None:
    lexical = np.array([2.0, 0.0, 0.0, 1.0])
    similarity = np.array([0.5, 0.1, 0.2, 0.4])
    with_vector = np.ones(4, dtype=bool)
    same = Neighbours.within_sessions(np.zeros(3, dtype=np.int32), 2)  # slots 0-2 one session, 3 none
    neighbours = Neighbours(np.array([0, 1, 2]), same, np.array([0, 1, 2, -1]), with_vector)
    hybrid = Ranking("hybrid", 3.0, 0.3, neighbours=True)
    hits = rank(hybrid, lexical, similarity, with_vector, 10, None, neighbours)
    fused = {0: 1.0 + 1.5, 3: 0.5 + 1.2}
    got = dict(zip(hits.slots.tolist(), hits.scores.tolist(), strict=True))
    assert got[3] == pytest.approx(fused[3])  # no session: untouched
    assert got[1] == pytest.approx(NEIGHBOUR_WEIGHTS["hybrid"] * fused[0])  # not a candidate: only what it borrows
    assert got[0] == pytest.approx(fused[0])  # its neighbours are not candidates: nothing to borrow
    for mode in ("vector", "rockbot"):
        ranking = Ranking(mode, neighbours=True)
        lent, alone = (
            rank(ranking, lexical, similarity, with_vector, 10, None, neighbours),
            rank(ranking, lexical, similarity, with_vector, 10),
        )
        assert lent.slots.tolist() == alone.slots.tolist() and lent.scores.tolist() == alone.scores.tolist()


def test_only_turns_within_the_window_of_the_same_session_lend() -> None:
    # rows in session order: sessions 0,0,0,0 then 1,1; slot k sits at row k
    same = Neighbours.within_sessions(np.array([0, 0, 0, 0, 1, 1]), 2)
    assert same.tolist() == [
        [False, False, True, True, False, False],  # two rows back
        [False, True, True, True, False, True],  # one row back
        [True, True, True, False, True, False],  # one row ahead
        [True, True, False, False, False, False],  # two rows ahead
    ]
    scores = np.array([0.0, 0.0, 0.0, 0.0, 4.0, 0.0, 0.0])
    candidate = scores > 0
    eligible = np.ones(7, dtype=bool)
    neighbours = Neighbours(np.arange(6), same, np.array([0, 1, 2, 3, 4, 5, -1]), eligible)
    got, now = borrow_from_neighbours(scores, candidate, neighbours, 0.5)
    assert got.tolist() == [0.0, 0.0, 0.0, 0.0, 4.0, 2.0, 0.0]  # session 1's other turn only; 2, 3 are session 0
    assert now.tolist() == [False, False, False, False, True, True, False]
    scores[1] = 6.0  # lends to rows 0, 2 and 3 (within two), not across into session 1
    got, _ = borrow_from_neighbours(scores, scores > 0, neighbours, 0.5)
    assert got.tolist() == [3.0, 6.0, 3.0, 3.0, 4.0, 2.0, 0.0]
    eligible[3] = False  # filtered out: borrows nothing, so it stays out
    got, now = borrow_from_neighbours(scores, scores > 0, neighbours, 0.5)
    assert got[3] == 0.0 and not now[3]


def test_without_neighbours_the_inputs_come_back_unchanged() -> None:
    scores, candidate = np.array([1.0, 0.0]), np.array([True, False])
    empty = Neighbours(np.zeros(0, dtype=np.int64), np.zeros((4, 0), dtype=bool), np.full(2, -1), candidate)
    for neighbours in (None, empty):
        got_scores, got_candidate = borrow_from_neighbours(scores, candidate, neighbours, 0.5)
        assert got_scores is scores and got_candidate is candidate
