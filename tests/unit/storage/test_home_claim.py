"""Temp files of interrupted writes are removed by the first store to open a home, never under another, and only
when a process ended without closing (the home is not walked after clean closes); a repair that needs the home to
itself is refused while a store has it open."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rockmem_mcp.errors import HomeInUseError
from rockmem_mcp.storage.home_claim import OPEN_FOLDER, HomeClaim, home_to_itself, home_users


def claim_and_die(home: Path) -> None:
    """A process that claims the home and ends without closing (as a kill or a crash would)."""
    code = "import os, sys; from pathlib import Path; from rockmem_mcp.storage.home_claim import HomeClaim; "
    code += "HomeClaim(Path(sys.argv[1])); os._exit(0)"
    subprocess.run([sys.executable, "-c", code, str(home)], check=True, timeout=60)


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
    second.close()
    claim_and_die(home)  # beside `first`: its temp files could be anyone's
    assert all(p.exists() for p in temps)
    first.close()
    third = HomeClaim(home)  # alone again, and a process before it never closed
    assert third.swept and third.cleaned == 2
    third.close()


def test_after_clean_closes_the_home_is_not_walked(tmp_path: Path) -> None:
    home = tmp_path / "home"
    HomeClaim(home).close()
    first, second = HomeClaim(home), HomeClaim(home)
    assert not first.swept and not second.swept
    assert len(os.listdir(home / OPEN_FOLDER)) == 2  # one marker per open claim
    first.close()
    second.close()
    assert os.listdir(home / OPEN_FOLDER) == []
    again = HomeClaim(home)
    assert not again.swept
    again.close()


def test_a_process_that_never_closed_makes_the_next_claim_walk(tmp_path: Path) -> None:
    home = tmp_path / "home"
    HomeClaim(home).close()
    claim_and_die(home)
    temps = plant(home)  # what the dead process's interrupted writes would have left
    claim = HomeClaim(home)
    assert claim.swept and claim.cleaned == 2 and not any(p.exists() for p in temps)
    assert len(os.listdir(home / OPEN_FOLDER)) == 1  # the dead process's marker went; this claim's is there
    claim.close()
    HomeClaim(home).close()
    assert not HomeClaim(home).swept  # cleaned up once, clean since


@pytest.mark.parametrize("tampered", ["missing", "link"])
def test_a_missing_or_linked_marker_folder_means_a_walk(tmp_path: Path, tampered: str) -> None:
    home = tmp_path / "home"
    HomeClaim(home).close()
    os.rmdir(home / OPEN_FOLDER)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    if tampered == "link":
        os.symlink(elsewhere, home / OPEN_FOLDER)
    temps = plant(home)
    claim = HomeClaim(home)
    assert claim.swept and claim.cleaned == 2 and not any(p.exists() for p in temps)
    assert os.listdir(elsewhere) == []  # no marker carried out of the home through the link
    claim.close()


def test_the_home_to_itself_is_refused_while_a_store_has_it_open(tmp_path: Path) -> None:
    home = tmp_path / "home"
    claim = HomeClaim(home)
    with pytest.raises(HomeInUseError, match=r"in use by another process"), home_to_itself(home):
        pass  # (this process is not named)
    claim.close()
    with home_to_itself(home):  # alone: granted
        assert home_users(home) == []
