"""The access log: absolute totals merged by max, shared between processes, compacted without loss."""

from __future__ import annotations

from pathlib import Path

from rockmem_mcp.storage.access_log import Access, AccessLog, Table, merge_into


def table_of(records: list[tuple[str, str, Access]]) -> Table:
    table: Table = {}
    for kind, item_id, access in records:
        merge_into(table, kind, item_id, access)
    return table


def test_another_process_reads_what_one_appended(tmp_path: Path) -> None:
    writer, reader = AccessLog(tmp_path), AccessLog(tmp_path)
    assert reader.load() == []
    writer.append({("memory", "a1"): Access(3, 100.0), ("entity", "e1"): Access(2, 50.0)})
    assert sorted(reader.read_new()) == [("entity", "e1", Access(2, 50.0)), ("memory", "a1", Access(3, 100.0))]
    assert reader.read_new() == []  # nothing new: nothing again
    assert writer.read_new() == []  # its own records are not news to the writer


def test_replaying_records_never_counts_twice() -> None:
    table: Table = {}
    assert merge_into(table, "memory", "a1", Access(3, 100.0)) == Access(3, 100.0)
    assert merge_into(table, "memory", "a1", Access(3, 100.0)) is None
    assert merge_into(table, "memory", "a1", Access(2, 200.0)) == Access(3, 200.0)  # each field by max


def test_compaction_keeps_everything_and_a_late_reader_reloads(tmp_path: Path) -> None:
    writer, late = AccessLog(tmp_path), AccessLog(tmp_path)
    late.load()
    table: Table = {}
    for round_ in range(3):
        batch = {("memory", f"m{i}"): Access(round_ + 1, 1000.0 + round_) for i in range(50)}
        writer.append(batch)
        for (kind, item_id), access in batch.items():
            merge_into(table, kind, item_id, access)
        writer.compact(lambda records: (table_of(records), table)[1])
    # Two compactions dropped the first generations: a reader that never caught up reloads the state.
    reloaded = table_of(late.read_new())
    assert reloaded["memory"] == {f"m{i}": Access(3, 1002.0) for i in range(50)}
    fresh = table_of(AccessLog(tmp_path).load())
    assert fresh == table


def test_a_compaction_includes_records_another_process_appended(tmp_path: Path) -> None:
    mine, other = AccessLog(tmp_path), AccessLog(tmp_path)
    mine.load()
    other.append({("memory", "theirs"): Access(7, 70.0)})
    table: Table = {"memory": {"mine": Access(2, 20.0)}}

    def complete(records: list[tuple[str, str, Access]]) -> Table:
        for kind, item_id, access in records:
            merge_into(table, kind, item_id, access)
        return table

    mine.compact(complete)
    mine.compact(complete)  # the generation holding "theirs" is gone now: only the state has it
    assert table_of(AccessLog(tmp_path).load())["memory"] == {"mine": Access(2, 20.0), "theirs": Access(7, 70.0)}


def test_a_damaged_state_file_falls_back_to_the_log(tmp_path: Path) -> None:
    log = AccessLog(tmp_path)
    log.append({("memory", "a1"): Access(2, 10.0)})
    (tmp_path / "state.json").write_text("{not json")
    assert table_of(AccessLog(tmp_path).load()) == {"memory": {"a1": Access(2, 10.0)}}


def test_a_state_file_that_cannot_be_read_is_never_compacted_over(tmp_path: Path) -> None:
    (tmp_path / "state.json").write_text('{"format": 99, "items": {"memory": {"a1": [9, 90.0]}}}')
    log = AccessLog(tmp_path)
    log.load()
    log.append({("memory", f"m{i}"): Access(2, 10.0) for i in range(100)})
    assert not log.needs_compaction(1000)  # its uses are found nowhere else: keep it until repaired
    (tmp_path / "state.json").unlink()
    fresh = AccessLog(tmp_path)
    fresh.load()
    assert fresh.needs_compaction(1000)
