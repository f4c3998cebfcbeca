"""Temp files of interrupted writes are removed by the first store to open a home, never under another; a
repair that needs the home to itself is refused while a store has it open."""

from __future__ import annotations

from pathlib import Path

import pytest

from rockmem_mcp.errors import HomeInUseError
from rockmem_mcp.storage.home_claim import HomeClaim, home_to_itself, home_users


def plant(home: Path) -> list[Path]:
    temps = [home / "memory" / "notes" / ".a.json.1234.tmp", home / "working-memory" / ".shared.json.99.tmp"]
    for path in temps:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"half a write")
    (home / "quarantine").mkdir(parents=True)
    (home / "quarantine" / ".kept.tmp").write_bytes(b"not ours to touch")
    (home / "memory" / "notes" / "abc.json").write_bytes(b"{}")
    return temps


def test_the_first_claim_removes_leftover_temp_files(tmp_path: Path) -> None:
    home = tmp_path / "home"
    temps = plant(home)
    claim = HomeClaim(home)
    assert claim.cleaned == 2 and not any(p.exists() for p in temps)
    assert (home / "quarantine" / ".kept.tmp").exists() and (home / "memory" / "notes" / "abc.json").exists()
    claim.close()


def test_a_claim_beside_another_leaves_temp_files_alone(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    first = HomeClaim(home)  # another process mid-write could own these
    temps = plant(home)
    second = HomeClaim(home)
    assert second.cleaned == 0 and all(p.exists() for p in temps)
    first.close()
    second.close()
    third = HomeClaim(home)  # alone again
    assert third.cleaned == 2
    third.close()


def test_the_home_to_itself_is_refused_while_a_store_has_it_open(tmp_path: Path) -> None:
    home = tmp_path / "home"
    claim = HomeClaim(home)
    with pytest.raises(HomeInUseError, match=r"in use by another process"), home_to_itself(home):
        pass  # (this process is not named)
    claim.close()
    with home_to_itself(home):  # alone: granted
        assert home_users(home) == []
