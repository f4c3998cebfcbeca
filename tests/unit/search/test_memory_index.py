"""MemoryIndex: filters, listing, category counts and the on-disk snapshot."""

from __future__ import annotations

import io
import math
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from rockmem_mcp.models import EntryLocation, MemoryEntry
from rockmem_mcp.search.memory_index import MemoryIndex, SearchFilter
from rockmem_mcp.storage.changes import JournalPosition

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


def entry(
    entry_id: str,
    content: str = "shared words here",
    category: str | None = None,
    tags: tuple[str, ...] = (),
    minutes: int = 0,
    archived: bool = False,
) -> MemoryEntry:
    return MemoryEntry(
        id=entry_id,
        content=content,
        category=category,
        tags=list(tags),
        created_at=T0 + timedelta(minutes=minutes),
        archived_at=T0 if archived else None,
    )


def index_of(*entries: MemoryEntry) -> MemoryIndex:
    index = MemoryIndex()
    for e in entries:
        index.upsert(e)
    return index


def ids(index: MemoryIndex, query: str | None = "shared", limit: int = 100, **filters) -> list[str]:
    hits = index.search(query, SearchFilter(**filters), limit)
    return [index.bm25.keys[s] for s in hits.slots.tolist()]


def results(index: MemoryIndex, query: str | None, flt: SearchFilter, limit: int = 100) -> list[tuple[str, float]]:
    hits = index.search(query, flt, limit)
    return [(index.bm25.keys[s], float(v)) for s, v in zip(hits.slots.tolist(), hits.scores.tolist(), strict=True)]


# ---------------------------------------------------------------------- filters
@pytest.mark.parametrize("query", ["shared", None])
def test_category_filter_is_a_whole_segment_prefix(query: str | None) -> None:
    index = index_of(
        entry("e1", category="project"),
        entry("e2", category="project/x", minutes=1),
        entry("e3", category="project/x/deep", minutes=2),
        entry("e4", category="projects", minutes=3),
        entry("e5", category="other/project", minutes=4),
        entry("e6", minutes=5),
    )
    assert sorted(ids(index, query, category="project")) == ["e1", "e2", "e3"]
    assert sorted(ids(index, query, category="project/x")) == ["e2", "e3"]
    assert ids(index, query, category="projects") == ["e4"]
    assert ids(index, query, category="proj") == []
    assert ids(index, query, category="nothing") == []


def test_tags_filter_requires_all_tags_case_insensitively() -> None:
    index = index_of(
        entry("e1", tags=("Python", "Work")),
        entry("e2", tags=("python",), minutes=1),
        entry("e3", tags=("WORK", "PYTHON", "extra"), minutes=2),
        entry("e4", minutes=3),
    )
    assert sorted(ids(index, tags=("python",))) == ["e1", "e2", "e3"]
    assert sorted(ids(index, tags=("PYTHON", "work"))) == ["e1", "e3"]
    assert ids(index, tags=("python", "work", "extra")) == ["e3"]
    assert ids(index, tags=("python", "unknown")) == []
    assert sorted(ids(index, None, tags=("Work",))) == ["e1", "e3"]


def test_created_after_is_inclusive_and_created_before_exclusive() -> None:
    index = index_of(*(entry(f"e{m}", minutes=m) for m in range(5)))
    at = T0 + timedelta(minutes=2)
    assert sorted(ids(index, created_after=at)) == ["e2", "e3", "e4"]
    assert sorted(ids(index, created_before=at)) == ["e0", "e1"]
    assert ids(index, created_after=at, created_before=at + timedelta(minutes=1)) == ["e2"]
    assert ids(index, None, created_after=at, created_before=at) == []


def test_filters_combine() -> None:
    index = index_of(
        entry("e1", category="work", tags=("a1x",), minutes=0),
        entry("e2", category="work/sub", tags=("a1x",), minutes=10),
        entry("e3", category="work", tags=("b2y",), minutes=10),
        entry("e4", category="home", tags=("a1x",), minutes=10),
    )
    assert ids(index, category="work", tags=("A1X",), created_after=T0 + timedelta(minutes=5)) == ["e2"]


def test_filters_restrict_results_but_not_bm25_statistics() -> None:
    index = index_of(entry("e1", "rare word", category="a"), entry("e2", "common word", category="b"))
    unfiltered = dict(results(index, "word", SearchFilter()))
    filtered = dict(results(index, "word", SearchFilter(category="a")))
    assert filtered == {"e1": pytest.approx(unfiltered["e1"], rel=1e-12)}


# ---------------------------------------------------------------------- query forms
def test_query_of_only_stopwords_returns_nothing() -> None:
    index = index_of(entry("e1", "go to it"), entry("e2"))
    hits = index.search("to it", SearchFilter(), 10)
    assert (hits.total, len(hits.slots)) == (0, 0)


@pytest.mark.parametrize("query", [None, "", "   "])
def test_no_query_lists_newest_first(query: str | None) -> None:
    index = index_of(entry("old", minutes=0), entry("new", minutes=20), entry("mid", minutes=10))
    hits = index.search(query, SearchFilter(), 2)
    assert [index.bm25.keys[s] for s in hits.slots] == ["new", "mid"]
    assert hits.total == 3
    assert all(math.isnan(s) for s in hits.scores)


def test_listing_limit_cut_respects_the_tie_order() -> None:
    """Equal creation times: newest slot first, and limit=k returns the first k of that order."""
    index = index_of(*(entry(f"e{i}") for i in range(10)))
    full = ids(index, None, limit=10)
    assert full == [f"e{i}" for i in reversed(range(10))]
    assert ids(index, None, limit=3) == full[:3]


def test_archived_entries_only_with_include_archived() -> None:
    index = index_of(entry("live"), entry("gone", archived=True, minutes=1))
    assert ids(index) == ["live"]
    assert ids(index, None) == ["live"]
    assert sorted(ids(index, include_archived=True)) == ["gone", "live"]
    assert ids(index, None, include_archived=True) == ["gone", "live"]


def test_document_text_covers_tags_and_category_words() -> None:
    index = index_of(
        entry("e1", "prefers mornings", category="user-preferences/timezone"),
        entry("e2", "other thing", tags=("gardening",)),
    )
    assert ids(index, "timezone") == ["e1"]
    assert ids(index, "preferences") == ["e1"]
    assert ids(index, "gardening") == ["e2"]


def test_upsert_replaces_and_remove_forgets() -> None:
    index = index_of(entry("e1", "first version", category="a"))
    index.upsert(entry("e1", "second version", category="b/c"))
    assert len(index) == 1
    assert ids(index, "first") == []
    assert ids(index, "second") == ["e1"]
    assert index.location("e1") == EntryLocation("e1", "b/c")
    assert index.ids_by_category() == {"b/c": {"e1"}}
    assert index.remove("e1") is True
    assert "e1" not in index and index.location("e1") is None
    assert index.remove("e1") is False


def test_category_counts_cover_active_entries_only() -> None:
    index = index_of(
        entry("e1", category="a"),
        entry("e2", category="a"),
        entry("e3", category="a/b"),
        entry("e4"),
        entry("e5", category="c", archived=True),
        entry("e6", category="d"),
    )
    index.remove("e6")
    assert index.category_counts() == ({"a": 2, "a/b": 1}, 1)


# ---------------------------------------------------------------------- snapshots
def sample_index() -> MemoryIndex:
    index = index_of(
        entry("e1", "python packaging tips", category="dev/python", tags=("Tools",), minutes=1),
        entry("e2", "rust borrow checker notes", category="dev/rust", minutes=2),
        entry("e3", "grocery list apples", tags=("home", "tools"), minutes=3),
        entry("e4", "old python note", category="dev/python", minutes=4, archived=True),
        entry("e5", "to be removed python", minutes=5),
        entry("e6", "python rewritten later", category="misc", minutes=6),
    )
    index.remove("e5")
    index.upsert(entry("e6", "python rewritten now", category="dev", tags=("tools",), minutes=6))
    return index


FILTERS = [
    SearchFilter(),
    SearchFilter(category="dev"),
    SearchFilter(tags=("TOOLS",)),
    SearchFilter(include_archived=True),
    SearchFilter(created_after=T0 + timedelta(minutes=3)),
]
QUERIES = [None, "python", "python packaging", "tools", "apples rust", "missing"]


def assert_same(a: MemoryIndex, b: MemoryIndex) -> None:
    for flt in FILTERS:
        for query in QUERIES:
            ra, rb = results(a, query, flt), results(b, query, flt)
            assert [k for k, _ in ra] == [k for k, _ in rb], (query, flt)
            assert np.allclose([s for _, s in ra], [s for _, s in rb], rtol=1e-12, equal_nan=True)
    assert a.category_counts() == b.category_counts()
    assert a.ids_by_category() == b.ids_by_category()


def test_snapshot_round_trip(tmp_path: Path) -> None:
    index = sample_index()
    path = tmp_path / "snap.npz"
    index.save(path, JournalPosition(3, 1234))
    loaded = MemoryIndex.load(path)
    assert loaded is not None
    restored, position = loaded
    assert position == JournalPosition(3, 1234)
    assert len(restored) == len(index) == 5
    assert restored.bm25.slot_count == 5  # dead slots dropped
    assert_same(index, restored)
    assert not list(tmp_path.glob(".*"))  # no temp file left behind


def test_snapshot_keeps_working_after_more_writes(tmp_path: Path) -> None:
    index = sample_index()
    path = tmp_path / "snap.npz"
    index.save(path, JournalPosition(1, 0))
    restored = MemoryIndex.load(path)[0]  # type: ignore[index]
    for target in (index, restored):
        target.upsert(entry("e7", "python after load", category="dev/new", tags=("tools",), minutes=7))
        target.upsert(entry("e1", "python packaging revised", category="dev/python", minutes=1))
        target.remove("e2")
        target.bm25.set_archived("e3", True)
    assert_same(index, restored)
    restored.save(path, JournalPosition(1, 10))
    again = MemoryIndex.load(path)[0]  # type: ignore[index]
    assert_same(index, again)


def test_empty_index_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "snap.npz"
    MemoryIndex().save(path, JournalPosition(1, 0))
    restored, _ = MemoryIndex.load(path)  # type: ignore[misc]
    assert len(restored) == 0
    assert ids(restored, None) == []
    restored.upsert(entry("e1"))
    assert ids(restored) == ["e1"]


def test_load_missing_snapshot_returns_none(tmp_path: Path) -> None:
    assert MemoryIndex.load(tmp_path / "absent.npz") is None


def saved_bytes(tmp_path: Path) -> bytes:
    path = tmp_path / "good.npz"
    sample_index().save(path, JournalPosition(1, 0))
    return path.read_bytes()


def damaged_variants(data: bytes) -> dict[str, bytes]:
    directory = data.rfind(b"PK\x01\x02")  # the last central-directory record
    assert directory > 0
    flipped_data = bytearray(data)
    npy = data.find(b"\x93NUMPY", data.find(b"doc_len.npy"))  # npy v1: magic, version, 2-byte header length
    array_start = npy + 10 + int.from_bytes(data[npy + 8 : npy + 10], "little")
    flipped_data[array_start + 1] ^= 0xFF  # inside doc_len's values: the member's CRC no longer matches
    bad_method = bytearray(data)
    bad_method[directory + 10 : directory + 12] = (99).to_bytes(2, "little")  # unknown compression method
    bad_version = bytearray(data)
    bad_version[directory + 6 : directory + 8] = (0xFF).to_bytes(2, "little")  # "needs zip version 25.5"
    return {
        "empty": b"",
        "garbage": b"this is not a snapshot\x00\xff" * 50,
        "truncated-10": data[:10],
        "truncated-half": data[: len(data) // 2],
        "truncated-last-byte": data[:-1],
        "crc-mismatch": bytes(flipped_data),
        "central-directory-compression-method": bytes(bad_method),
        "central-directory-version": bytes(bad_version),
    }


@pytest.mark.parametrize(
    "variant",
    [
        "empty",
        "garbage",
        "truncated-10",
        "truncated-half",
        "truncated-last-byte",
        "crc-mismatch",
        "central-directory-compression-method",
        "central-directory-version",
    ],
)
def test_load_of_a_damaged_snapshot_returns_none(tmp_path: Path, variant: str) -> None:
    path = tmp_path / "snap.npz"
    path.write_bytes(damaged_variants(saved_bytes(tmp_path))[variant])
    assert MemoryIndex.load(path) is None


def rewrite_header(path: Path, column: int, value: int) -> None:
    with np.load(path) as data:
        arrays = {name: data[name] for name in data.files}
    arrays["header"] = arrays["header"].copy()
    arrays["header"][column] = value
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    path.write_bytes(buffer.getvalue())


@pytest.mark.parametrize(("column", "value"), [(0, 999), (1, 999), (4, 77)], ids=["format", "tokenizer", "count"])
def test_load_rejects_other_versions_and_inconsistent_headers(tmp_path: Path, column: int, value: int) -> None:
    path = tmp_path / "snap.npz"
    sample_index().save(path, JournalPosition(1, 0))
    rewrite_header(path, column, value)
    assert MemoryIndex.load(path) is None


def test_load_rejects_a_snapshot_missing_an_array(tmp_path: Path) -> None:
    path = tmp_path / "snap.npz"
    sample_index().save(path, JournalPosition(1, 0))
    with np.load(path) as data:
        arrays = {name: data[name] for name in data.files if name != "created"}
    np.savez(path, **arrays)
    assert MemoryIndex.load(path) is None


def test_a_format_6_snapshot_with_float32_vectors_loads_without_a_rebuild(tmp_path: Path) -> None:
    """Format 7 only changed the vectors to int8 rows with a scale; a format-6 snapshot (float32 rows, no
    scales) written before the upgrade is still loaded, vectors included, rather than rebuilt from 100k files."""
    index = sample_index()
    index.vectors.adopt("m1", 3)
    index.vectors.match_slots(index.bm25.slot_count)
    unit = np.array([0.6, 0.8, 0.0], dtype=np.float32)
    index.vectors.put(np.array([0]), unit[None, :])
    path = tmp_path / "snap.npz"
    index.save(path, JournalPosition(1, 0))
    with np.load(path) as data:
        arrays = {name: data[name] for name in data.files if name != "vector_scale"}
    live_rows = len(arrays["vectors"])
    arrays["vectors"] = np.zeros((live_rows, 3), dtype=np.float32)
    arrays["vectors"][0] = unit
    arrays["header"] = arrays["header"].copy()
    arrays["header"][0] = 6
    np.savez(path, **arrays)
    loaded = MemoryIndex.load(path)
    assert loaded is not None
    restored = loaded[0]
    assert_same(index, restored)
    assert restored.vectors.matrix.view.dtype == np.int8
    assert restored.vectors.similarities(np.array([0.0, 1.0, 0.0], dtype=np.float32))[0] == pytest.approx(
        0.8, abs=0.005
    )


@pytest.mark.parametrize("fmt", [7, 8])
def test_turns_in_a_snapshot_from_before_the_turn_key_are_dropped(tmp_path: Path, fmt: int) -> None:
    """Before format 8 the turn column came from another metadata key, which nothing reads now: an older
    snapshot's turns are zeroed on load (ties fall back to creation and import order); format 8 keeps them."""
    index = MemoryIndex()
    index.upsert_many([
        MemoryEntry(id=f"t{n}", content=f"turn {n}", metadata={"session": "s", "turn": str(n)},
                    created_at=datetime(2026, 1, 1, tzinfo=UTC))
        for n in (2, 1)
    ])  # fmt: skip
    path = tmp_path / "snap.npz"
    index.save(path, JournalPosition(1, 0))
    with np.load(path) as data:
        arrays = {name: data[name] for name in data.files}
    arrays["header"] = arrays["header"].copy()
    arrays["header"][0] = fmt
    np.savez(path, **arrays)
    loaded = MemoryIndex.load(path)
    assert loaded is not None
    assert loaded[0].turn.view.tolist() == ([2.0, 1.0] if fmt == 8 else [0.0, 0.0])


# ---------------------------------------------------------------------- pruned search
@pytest.mark.parametrize("category", [None, "work"])
def test_a_pruned_search_ranks_as_scoring_every_memory(category: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    """MaxScore (`BM25Index.best`) behind `MemoryIndex.search`, with salience fading old memories out and a
    filter: the same hits, scores and totals as scoring every slot."""
    from rockmem_mcp.search import bm25
    from rockmem_mcp.search.memory_index import SalienceView

    rng = np.random.default_rng(3)
    common = ["project", "meeting", "notes", "team", "update"]
    entries = []
    for i in range(800):
        words = [str(w) for w in rng.choice(common, size=int(rng.integers(2, 6)))] + [f"topic{i % 97}"]
        # Spread over 400 days: the old ones fade (a smaller factor) or go dormant (left out).
        entries.append(entry(f"m{i}", " ".join(words), category=["work", "home"][i % 2], minutes=-int(i * 720)))
    index = index_of(*entries)
    view = SalienceView(now=T0.timestamp(), lam=0.01, floor=0.4)
    flt = SearchFilter(category=category)

    def searched(prune_from: int, query: str, salience: SalienceView | None) -> tuple[list[int], list[float], int]:
        monkeypatch.setattr(bm25, "PRUNE_FROM", prune_from)
        hits = index.search(query, flt, 7, salience=salience)
        return hits.slots.tolist(), hits.scores.tolist(), hits.total

    for query in ["topic5 project meeting", "team update topic40 notes", "meeting topic96", "project team"]:
        for salience in (view, None):
            assert searched(0, query, salience) == searched(10**12, query, salience), (query, salience)
    _, _, total = searched(0, "topic5 project meeting", view)
    assert 0 < total < searched(0, "topic5 project meeting", None)[2]  # dormant memories are not counted

    # Dormant memories used again wake up: the next pruned search finds and counts them as the full one does.
    from rockmem_mcp.storage.access_log import Access

    slots, _, total_before_waking = searched(0, "topic40 team", view)
    woken = [e.id for e in entries if "topic40" in e.content and index.bm25.slot_of[e.id] not in slots]
    assert woken
    for entry_id in woken:
        index.set_access(entry_id, Access(20, T0.timestamp()))
    after = searched(0, "topic40 team", view)
    assert after == searched(10**12, "topic40 team", view)
    assert {index.bm25.slot_of[i] for i in woken} & set(after[0]) and after[2] > total_before_waking
