"""ProcedureFiles: one JSON file per procedure, procedures/{slug}.json, never read through a link or a FIFO; and
the slug that names the file."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from rockmem_mcp.errors import CorruptEntryError, InvalidInputError, LinkRefusedError, SpecialFileError
from rockmem_mcp.procedures.files import ProcedureFiles
from rockmem_mcp.procedures.shapes import Procedure, procedure_slug

T0 = datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def files(home: Path) -> ProcedureFiles:
    return ProcedureFiles(home, home / "procedures", home / "meta" / "procedures.lock")


def procedure(name: str = "How to deploy", steps: list[str] | None = None) -> Procedure:
    return Procedure(
        name=name,
        slug=procedure_slug(name),
        trigger=["deploy"],
        steps=steps or ["Run the tests", "Tag the release"],
        created_at=T0,
        updated_at=T0,
    )


@pytest.mark.parametrize(
    ("name", "slug"),
    [
        ("How to deploy", "how-to-deploy"),
        ("  HOW_TO  deploy!! ", "how-to-deploy"),
        ("Déployer l'app", "deployer-l-app"),  # accents dropped, not the letter
        ("v2.1 release", "v2-1-release"),
        ("a" * 79 + "-b" + "c" * 50, "a" * 79),  # cut at 80 characters, no trailing '-'
    ],
)
def test_a_slug_is_the_lower_case_name_with_runs_of_other_characters_as_one_dash(name: str, slug: str) -> None:
    assert procedure_slug(name) == slug


@pytest.mark.parametrize("name", ["日本語の手順", "!!!", "   "])
def test_a_name_with_no_latin_letter_or_digit_is_refused(name: str) -> None:
    with pytest.raises(InvalidInputError, match="no Latin letter or digit"):
        procedure_slug(name)


def test_write_then_read_round_trip(files: ProcedureFiles, home: Path) -> None:
    files.write(procedure())
    raw = (home / "procedures" / "how-to-deploy.json").read_bytes()
    assert raw.endswith(b"\n") and json.loads(raw)["steps"] == ["Run the tests", "Tag the release"]
    assert files.read("how-to-deploy") == procedure()
    assert files.remove("how-to-deploy") is True and files.remove("how-to-deploy") is False
    with pytest.raises(FileNotFoundError):
        files.read("how-to-deploy")


def test_the_file_name_is_the_truth_about_the_slug(files: ProcedureFiles, home: Path) -> None:
    files.write(procedure())
    os.rename(home / "procedures" / "how-to-deploy.json", home / "procedures" / "deploying.json")
    assert files.read("deploying").slug == "deploying"


def test_an_invalid_file_is_named_in_the_error(files: ProcedureFiles, home: Path) -> None:
    (home / "procedures").mkdir(parents=True)
    (home / "procedures" / "broken.json").write_text('{"name": "x"}')
    with pytest.raises(CorruptEntryError, match=r"broken\.json is not a valid procedure.*never deletes it"):
        files.read("broken")


def test_a_link_is_refused_on_read_and_replaced_on_write(files: ProcedureFiles, home: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.json"
    outside.write_bytes(procedure("outside").model_dump_json().encode())
    (home / "procedures").mkdir(parents=True)
    link = home / "procedures" / "how-to-deploy.json"
    link.symlink_to(outside)
    with pytest.raises(LinkRefusedError):
        files.read("how-to-deploy")
    files.write(procedure())
    assert not link.is_symlink() and files.read("how-to-deploy").name == "How to deploy"
    assert json.loads(outside.read_bytes())["name"] == "outside"


def test_a_fifo_is_refused_without_waiting_on_it(files: ProcedureFiles, home: Path) -> None:
    (home / "procedures").mkdir(parents=True)
    os.mkfifo(home / "procedures" / "how-to-deploy.json")
    with pytest.raises(SpecialFileError, match="FIFO"):
        files.read("how-to-deploy")  # a plain open would block forever


def test_a_linked_procedures_folder_is_never_written_through(files: ProcedureFiles, home: Path, tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    home.mkdir()
    (home / "procedures").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(LinkRefusedError):
        files.write(procedure())
    assert list((tmp_path / "elsewhere").iterdir()) == []


def test_identities_list_procedure_files_only_and_change_with_every_write(files: ProcedureFiles, home: Path) -> None:
    assert files.identities() == {}  # no folder yet
    files.write(procedure())
    (home / "procedures" / ".how-to-deploy.json.1a2b3c4d.tmp").write_text("{")  # a write in progress
    (home / "procedures" / "README.md").write_text("notes")
    first = files.identities()
    assert list(first) == ["how-to-deploy"] and first["how-to-deploy"] == files.identity("how-to-deploy")
    files.write(procedure())  # the same bytes: a coarse mtime and the size could not tell
    assert files.identities()["how-to-deploy"] != first["how-to-deploy"]
