"""Temp files of interrupted writes are removed by the first store to open a home, never under another."""

from __future__ import annotations

from pathlib import Path

from rockmem_mcp.storage.home_claim import HomeClaim


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
