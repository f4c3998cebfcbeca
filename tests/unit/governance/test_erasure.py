"""Erasing a permanently deleted memory's traces (governance/erasure.py, GitHistory.purge): no git object holds its
text afterwards, yet the history still works: other items' versions and their audit lines, the next commit, a
concurrent save, and a revert naming a commit the rewrite renamed is refused instead of deleting files."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from rockmem_mcp.config import Settings
from rockmem_mcp.errors import HistoryError, InvalidInputError
from rockmem_mcp.governance.erasure import Erasure
from rockmem_mcp.governance.rollback import Rollback
from tests.unit.governance.test_history import Home, git, head_log, subjects
from tests.unit.helpers import Services

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs the git program")

SECRET = "zqlockercode4471"


@pytest.fixture
def home(settings: Settings, services: Services) -> Iterator[Home]:
    opened = Home(settings, services)
    yield opened
    opened.close()


def objects_holding(home: Path, text: str) -> list[str]:
    out = git(home, "cat-file", "--batch-all-objects", "--batch", "--unordered")
    found, pos = [], 0
    while pos < len(out):
        end = out.index(b"\n", pos)
        sha, kind, size = out[pos:end].split()
        if text.encode() in out[end + 1 : end + 1 + int(size)]:
            found.append(f"{kind.decode()} {sha.decode()}")
        pos = end + 2 + int(size)
    return found


def test_no_object_holds_the_text_and_the_history_still_answers(home: Home) -> None:
    history = home.history()
    memory = home.memory
    kept = memory.save("The gym opens at six", "health")
    gone = memory.save(f"The locker code is {SECRET} one", "private")
    memory.update(gone.id, content=f"The locker code is {SECRET} two")
    history.flush()
    memory.update(kept.id, content="The gym opens at seven")
    history.flush()
    root = home.settings.home
    assert objects_holding(root, SECRET)

    _, left = Erasure(home.settings, memory.audit, memory, history=history).delete_memory(gone.id)

    assert left == [] and objects_holding(root, SECRET) == []
    assert SECRET not in (home.settings.meta_dir / "audit.log").read_text()
    assert head_log(root) == (home.settings.meta_dir / "audit.log").read_bytes()  # the log and HEAD's agree
    assert git(root, "status", "--porcelain") == b""  # HEAD is still the home as it is
    # Another memory's versions, each with the lines that made it: the rewritten logs' spans moved with them.
    versions = history.versions(home.path(kept.id))
    assert [[line.action for line in version.lines] for version in versions] == [["EDIT"], ["CREATE"]]
    assert [history.read(v.commit, home.path(kept.id)) is not None for v in versions] == [True, True]
    assert history.versions(f"memory/private/{gone.id}.json") == []  # its file is in no commit
    # The next save is one commit of its own, as ever (not the redacted lines taken for new ones).
    memory.save("The pool opens at eight", "health")
    history.flush()
    assert subjects(root)[0].startswith("[CREATE] memory/health/")


def test_a_save_while_the_history_is_rewritten_is_committed_after_it(home: Home, monkeypatch) -> None:
    history = home.history()
    memory = home.memory
    gone = memory.save(f"The locker code is {SECRET}", "private")
    history.flush()
    redact = memory.audit.log.redact
    racing: list[str] = []

    def save_then_redact(redaction):  # another process saves between the last commit and the log's redaction
        racing.append(memory.save("The pool opens at eight", "health").id)
        return redact(redaction)

    monkeypatch.setattr(memory.audit.log, "redact", save_then_redact)
    Erasure(home.settings, memory.audit, memory, history=history).delete_memory(gone.id)
    history.flush()

    root = home.settings.home
    assert home.path(racing[0]) in git(root, "ls-tree", "-r", "--name-only", "HEAD").decode().splitlines()
    assert objects_holding(root, SECRET) == []


def test_a_revert_naming_a_commit_the_rewrite_renamed_is_refused(home: Home) -> None:
    """Commits before the text's first one keep their names (the same objects are imported again); those after it
    are renamed, and a revert that names one is refused instead of reading every file as missing there."""
    history = home.history()
    memory = home.memory
    note = memory.save("The standup is at nine", "work")
    before = history.flush()
    gone = memory.save(f"The locker code is {SECRET}", "private")
    memory.update(note.id, content="The standup is at ten")
    history.flush()
    rollback = Rollback(home.settings, memory.audit, history, memory)
    reverted = rollback.revert_item(note.id)
    assert memory.get(note.id).content == "The standup is at nine"
    history.flush()

    Erasure(home.settings, memory.audit, memory, history=history).delete_memory(gone.id)

    assert history.resolve(before) == before
    with pytest.raises(InvalidInputError, match="no longer has"):
        rollback.revert_run(reverted.revert_id)
    assert memory.get(note.id).content == "The standup is at nine"  # nothing was removed for it


def test_a_purge_cut_short_is_finished_by_the_next_start(home: Home, monkeypatch) -> None:
    """Review finding: a process that dies after redacting the log but before rewriting the commits left the text in
    git for good (deleting the id again finds nothing). The purge's record stays in .git until it is done, and the
    history's start finishes it."""
    history = home.history()
    memory = home.memory
    gone = memory.save(f"The locker code is {SECRET}", "private")
    history.flush()
    root = home.settings.home

    def dies(redaction):  # as a kill between the log's redaction and the rewrite would leave it
        raise HistoryError("killed")

    monkeypatch.setattr(history, "_rewrite", dies)
    _, left = Erasure(home.settings, memory.audit, memory, history=history).delete_memory(gone.id)
    assert left and objects_holding(root, SECRET)  # said, and still there
    pending = list((root / ".git" / "rockmem-purges").iterdir())
    assert len(pending) == 1
    monkeypatch.undo()

    assert home.history(first_commit=False).resume_purges() == 1  # what the next start does first
    assert objects_holding(root, SECRET) == []
    assert list((root / ".git" / "rockmem-purges").iterdir()) == []
    assert SECRET not in (home.settings.meta_dir / "audit.log").read_text()


def test_without_a_usable_history_the_versions_kept_for_it_go_too(home: Home) -> None:
    """Review finding: with git unusable, .git/rockmem-versions (middle versions kept for the next commit) still
    held the memory's JSON after a permanent delete. They go: no history will take them."""
    memory = home.memory
    (home.settings.home / ".git").mkdir(exist_ok=True)  # a home whose history is kept, git or not
    gone = memory.save(f"The locker code is {SECRET}", "private")
    versions = home.settings.home / ".git" / "rockmem-versions"
    assert memory.audit.versions is not None and SECRET.encode() in versions.read_bytes()
    _, left = Erasure(home.settings, memory.audit, memory, history=None).delete_memory(gone.id)
    assert left == [] and (not versions.exists() or SECRET.encode() not in versions.read_bytes())
    assert SECRET not in (home.settings.meta_dir / "audit.log").read_text()
