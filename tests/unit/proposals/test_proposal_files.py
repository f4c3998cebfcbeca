"""Proposal records: one JSON file each, written whole, listed oldest first, ids never reused."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from rockmem_mcp.errors import CorruptEntryError, InvalidInputError, LinkRefusedError
from rockmem_mcp.proposals.files import ProposalFiles, checked_id, new_id
from rockmem_mcp.proposals.shapes import Proposal

MOMENT = datetime(2026, 2, 3, 10, 0, tzinfo=UTC)


def files(tmp_path: Path) -> ProposalFiles:
    meta = tmp_path / "meta"
    return ProposalFiles(tmp_path, meta / "proposals", meta / "proposals.lock", meta / "pending-memories.md")


def proposal(proposal_id: str, **fields: object) -> Proposal:
    values: dict[str, object] = {"from": "researcher", "time": MOMENT, "trigger": "save_memory", "store": "semantic"}
    values.update({"content": "User prefers academic sources", "entities": ["preference--source-quality"]})
    values.update(fields)
    return Proposal.model_validate({"id": proposal_id, **values})


def test_a_record_round_trips_with_every_field(tmp_path: Path) -> None:
    store = files(tmp_path)
    original = proposal(new_id(MOMENT), confidence="high", core_worthy=True, conflict_with=["0" * 13], tags=["x"])
    assert store.create(original)
    assert store.read(original.id) == original
    raw = store.path_for(original.id).read_text()
    assert '"from": "researcher"' in raw  # the seed's field name on disk


def test_a_taken_id_is_never_overwritten(tmp_path: Path) -> None:
    store = files(tmp_path)
    first = proposal("0123456789abc")
    assert store.create(first)
    assert not store.create(proposal("0123456789abc", content="something else"))
    assert store.read(first.id).content == first.content


def test_ids_sort_by_time_and_only_records_are_listed(tmp_path: Path) -> None:
    store = files(tmp_path)
    later, earlier = new_id(datetime(2026, 3, 1, tzinfo=UTC)), new_id(datetime(2026, 2, 1, tzinfo=UTC))
    for proposal_id in (later, earlier):
        store.create(proposal(proposal_id))
    (store.root / ".tmp-x.json").write_text("{}")
    (store.root / "notes.txt").write_text("hi")
    assert store.ids() == [earlier, later]
    assert [p.id for p in store.all()] == [earlier, later]


def test_a_torn_record_is_reported_with_how_to_fix_it(tmp_path: Path) -> None:
    store = files(tmp_path)
    store.create(proposal("0123456789abc"))
    store.path_for("0123456789abc").write_text('{"id": "0123')
    with pytest.raises(CorruptEntryError, match="fix or move it away"):
        store.read("0123456789abc")


@pytest.mark.parametrize("bad", ["../etc/passwd", "0123", "0123456789ABZ", ""])
def test_an_id_that_is_no_proposal_id_is_refused(bad: str) -> None:
    with pytest.raises(InvalidInputError, match="not a proposal id"):
        checked_id(bad)


def test_a_hash_before_the_id_is_accepted() -> None:
    assert checked_id("#0123456789abc") == "0123456789abc"


def test_a_listing_sees_what_another_process_changed_or_removed(tmp_path: Path) -> None:
    mine, theirs = files(tmp_path), files(tmp_path)  # two processes' views of one folder
    kept, gone = proposal("0123456789abc"), proposal("0123456789abd")
    mine.create(kept)
    mine.create(gone)
    assert [p.status for p in mine.all()] == ["pending", "pending"]
    theirs.write(kept.model_copy(update={"status": "committed"}))
    theirs.remove(gone.id)
    assert [(p.id, p.status) for p in mine.all()] == [(kept.id, "committed")]


def test_a_listing_leaves_out_a_record_that_does_not_parse(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store = files(tmp_path)
    store.create(proposal("0123456789abc"))
    store.create(proposal("0123456789abd"))
    store.path_for("0123456789abc").write_text("{torn")
    assert [p.id for p in store.all()] == ["0123456789abd"]
    assert "proposal left out" in caplog.text


def test_a_linked_proposals_folder_is_never_written_through(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "meta").mkdir()
    (tmp_path / "meta" / "proposals").symlink_to(outside)
    with pytest.raises(LinkRefusedError):
        files(tmp_path).create(proposal("0123456789abc"))
    assert list(outside.iterdir()) == []
