"""A home's repository is data (governance/history.py): nothing its configuration or attributes name is run,
and a `.git` that git cannot use does not make `.git/rockmem-versions` grow without bound."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from rockmem_mcp.audit.service import VERSIONS_NAME
from rockmem_mcp.config import Settings
from rockmem_mcp.errors import HistoryError
from rockmem_mcp.governance import history as history_module
from rockmem_mcp.governance.history import INFO_ATTRIBUTES, VERSIONS_KEEP_BYTES, _versions_cut
from tests.unit.governance.test_rollback import Home

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs the git program")


def git(root: Path, *args: str) -> str:
    env = {"PATH": os.environ["PATH"], "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    done = subprocess.run(
        ["git", f"--git-dir={root / '.git'}", f"--work-tree={root}", "-c", "core.hooksPath=/dev/null", *args],
        env=env,
        cwd=root,
        check=True,
        capture_output=True,
        text=True,
    )
    return done.stdout


def leaves(markers: Path, name: str) -> str:
    """A config value: a command that leaves a marker (then passes its input on, as a filter would)."""
    command = f"sh -c {shlex.quote(f'touch {markers / name}; cat')}"
    return '"' + command.replace("\\", "\\\\").replace('"', '\\"') + '"'


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Home]:
    opened = Home(Settings.load({"home": tmp_path / "home"}, env={}), first_commit=False)
    yield opened
    opened.close()


def copied_home(tmp_path: Path, config: str, attributes: str = "* filter=evil diff=evil merge=evil\n") -> Path:
    """Someone else's home: a repository with a commit, `config` added to its .git/config, then copied (so git
    must read every tracked file again, through whatever filter its attributes select)."""
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "notes.md").write_text("a note that came with the home\n")
    (theirs / ".gitattributes").write_text(attributes)
    git(theirs, "init", "-q", "--initial-branch=main")
    git(theirs, "add", "-A")
    git(theirs, "-c", "user.name=x", "-c", "user.email=x@x", "commit", "-q", "-m", "theirs")
    with (theirs / ".git" / "config").open("a") as file:
        file.write(config)
    shutil.copytree(theirs, tmp_path / "home", symlinks=True)
    return tmp_path / "home"


def test_the_attributes_select_no_driver_and_the_drivers_commands_are_emptied(tmp_path: Path) -> None:
    markers = tmp_path / "markers"
    markers.mkdir()
    copied_home(
        tmp_path,
        f'[filter "evil"]\n\tprocess = {leaves(markers, "process")}\n\tclean = {leaves(markers, "clean")}\n'
        f"\trequired = true\n"
        f'[diff "evil"]\n\ttextconv = {leaves(markers, "textconv")}\n\tcommand = {leaves(markers, "command")}\n'
        f'[merge "evil"]\n\tdriver = {leaves(markers, "driver")}\n'
        f"[diff]\n\texternal = {leaves(markers, 'external')}\n",
    )
    opened = Home(Settings.load({"home": tmp_path / "home"}, env={}), first_commit=False)
    try:
        opened.history.start()
        assert opened.history.ready.wait(30)
        entry = opened.memory.save("The deploy window is Thursday", category="work")
        opened.memory.update(entry.id, content="The deploy window is Friday")
        versions = opened.history.versions(f"memory/work/{entry.id}.json")
        assert len(versions) == 2
        assert opened.history.changed_between(versions[1].commit, versions[0].commit) == [
            f"memory/work/{entry.id}.json"
        ]
    finally:
        opened.close()
    assert os.listdir(markers) == []
    home = tmp_path / "home"
    assert (home / ".git" / "info" / "attributes").read_text() == INFO_ATTRIBUTES
    # What came with the home is unchanged: read as it is (no filter), not as a filter would have made it (the
    # filter said `required`: selected and left empty, it would have stopped `git status`).
    outside = [line for line in (home / "meta" / "audit.log").read_text().splitlines() if "outside" in line]
    assert [line.split(" | ")[2] for line in outside] == [".gitignore"]  # written by the server at start


def test_the_driver_overrides_alone_keep_a_selected_filter_from_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Second line of defence: were the attributes to select a driver anyway, its commands are empty.
    monkeypatch.setattr(history_module, "INFO_ATTRIBUTES", "# nothing\n")
    markers = tmp_path / "markers"
    markers.mkdir()
    (tmp_path / "included.config").write_text(f'[filter "inc"]\n\tprocess = {leaves(markers, "inc-process")}\n')
    copied_home(
        tmp_path,
        f'[filter "evil"]\n\tprocess = {leaves(markers, "process")}\n\tclean = {leaves(markers, "clean")}\n'
        f"\trequired = true\n[include]\n\tpath = {tmp_path / 'included.config'}\n",
        attributes="* filter=evil\n*.md filter=inc\n",
    )
    opened = Home(Settings.load({"home": tmp_path / "home"}, env={}), first_commit=False)
    try:
        opened.history.start()
        assert opened.history.ready.wait(30)
        assert opened.history.flush() is not None
        drivers = opened.history._drivers
        overridden = {drivers[k]: drivers[k.replace("KEY", "VALUE")] for k in drivers if "_KEY_" in k}
        assert overridden == {
            "filter.evil.process": "",
            "filter.evil.clean": "",
            "filter.evil.required": "false",
            "filter.inc.process": "",
            "filter.inc.required": "false",
        }
    finally:
        opened.close()
    assert os.listdir(markers) == []


def test_a_partial_clone_never_fetches_what_it_lacks(tmp_path: Path) -> None:
    """A missing object in a partial clone makes git fetch it from the home's remote: an `ext::` remote is a
    command. No transport is allowed, so the history fails for that home rather than run it."""
    markers = tmp_path / "markers"
    markers.mkdir()
    home = copied_home(
        tmp_path,
        "[core]\n\trepositoryformatversion = 1\n[extensions]\n\tpartialClone = origin\n"
        f'[remote "origin"]\n\turl = "ext::sh -c touch% {markers / "fetched"}"\n\tpromisor = true\n'
        '[protocol "ext"]\n\tallow = always\n[protocol]\n\tallow = always\n',
        attributes="",
    )
    tree = git(home, "rev-parse", "HEAD^{tree}").strip()
    (home / ".git" / "objects" / tree[:2] / tree[2:]).unlink()
    opened = Home(Settings.load({"home": home}, env={}), first_commit=False)
    try:
        opened.memory.save("The deploy window is Thursday", category="work")
        with pytest.raises(HistoryError):
            opened.history.flush()
    finally:
        opened.history.available = False  # nothing to commit at close
        opened.close()
    assert os.listdir(markers) == []


def test_links_in_the_way_of_the_attributes_are_replaced_never_followed(home: Home, tmp_path: Path) -> None:
    home.history.flush()
    info = home.settings.home / ".git" / "info"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "attributes").write_text("* filter=evil\n")
    shutil.rmtree(info)
    info.symlink_to(elsewhere)
    home.memory.save("one", category="work")
    home.history.flush()
    assert not info.is_symlink() and (info / "attributes").read_text() == INFO_ATTRIBUTES
    assert (elsewhere / "attributes").read_text() == "* filter=evil\n"

    (info / "attributes").unlink()
    (info / "attributes").symlink_to(elsewhere / "attributes")
    home.memory.save("two", category="work")
    home.history.flush()
    assert not (info / "attributes").is_symlink() and (info / "attributes").read_text() == INFO_ATTRIBUTES
    assert (elsewhere / "attributes").read_text() == "* filter=evil\n"


def test_a_linked_worktree_s_git_folder_turns_the_history_off(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".git").mkdir(parents=True)
    (home / ".git" / "commondir").write_text(str(tmp_path / "elsewhere"))
    opened = Home(Settings.load({"home": home}, env={}), first_commit=False)
    try:
        assert opened.history.available is False
    finally:
        opened.close()


def test_versions_cut_walks_whole_records() -> None:
    records = b'{"t":"a","f":"x","n":3}\nabc\n{"t":"b","f":"x","n":-1}\n\n{"t":"c","f":"x","n":2}\n{"\n'
    first = len(b'{"t":"a","f":"x","n":3}\nabc\n')
    second = first + len(b'{"t":"b","f":"x","n":-1}\n\n')
    assert _versions_cut(records, 1) == first
    assert _versions_cut(records, first) == first
    assert _versions_cut(records, first + 1) == second
    assert _versions_cut(records, second + 1) == len(records)  # a body that looks like a header is not one
    assert _versions_cut(b'{"t":"a","f":"x","n":30}\nabc\n', 1) == len(b'{"t":"a","f":"x","n":30}\nabc\n')


def test_with_git_unusable_the_captured_versions_stay_bounded_and_the_newest_are_kept(home: Home) -> None:
    memory, history = home.memory, home.history
    history.flush()
    entry = memory.save("version 0 " + "x" * 54_000, category="work")
    history.flush()
    file = f"memory/work/{entry.id}.json"
    head = home.settings.home / ".git" / "HEAD"
    kept_head = head.read_bytes()
    head.write_text("not a ref\n")  # git no longer takes this folder for a repository
    versions_file = home.settings.home / ".git" / VERSIONS_NAME
    largest = 0
    for i in range(1, 201):
        memory.update(entry.id, content=f"version {i} " + "x" * 54_000)
        if i % 10 == 0:  # the background committer's round: about a second's saves
            with pytest.raises(HistoryError):
                history.flush()
        largest = max(largest, versions_file.stat().st_size)
    # The newest 10 versions (captured since the last failed round) plus at most VERSIONS_KEEP_BYTES.
    assert largest <= VERSIONS_KEEP_BYTES + 10 * 56_000
    assert versions_file.stat().st_size <= VERSIONS_KEEP_BYTES
    captured = memory.audit.versions.read().versions
    assert len(captured) >= 10 and b"version 200 " in captured[-1].data

    head.write_bytes(kept_head)  # repaired: the next commit takes the newest versions one by one
    history.flush()
    texts = [(history.read(v.commit, file) or b"")[:80] for v in history.versions(file)]
    assert b"version 200 " in texts[0] and b"version 199 " in texts[1] and b"version 190 " in texts[10]
    assert not versions_file.exists()  # consumed by that commit

    history.settle_seconds = 0
    home.rollback.revert_item(entry.id)  # to before the last change
    assert memory.get(entry.id).content.startswith("version 199 ")
