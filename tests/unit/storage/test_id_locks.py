"""IdLocks: per-id write locks shared by processes (here: instances, each with its own open files)."""

from __future__ import annotations

from pathlib import Path

from rockmem_mcp.storage.id_locks import IdLocks


def test_an_id_held_by_another_process_is_not_granted_until_released(tmp_path: Path) -> None:
    mine, theirs = IdLocks(tmp_path, "memory"), IdLocks(tmp_path, "memory")
    with theirs.hold(["abc123abc123"]) as held:
        assert held
        with mine.hold(["abc123abc123"], wait=False) as got:
            assert not got
    with mine.hold(["abc123abc123"], wait=False) as got:
        assert got


def test_holding_an_id_again_inside_a_hold_does_not_wait_for_itself(tmp_path: Path) -> None:
    locks, other = IdLocks(tmp_path, "memory"), IdLocks(tmp_path, "memory")
    with locks.hold(["abc123abc123", "def456def456"]), locks.hold(["abc123abc123"]) as again:
        assert again
    with other.hold(["abc123abc123"], wait=False) as got:  # everything was released
        assert got
