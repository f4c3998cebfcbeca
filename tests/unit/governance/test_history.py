"""The home's history in git (governance/history.py), with the real git program on tmp_path homes."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from rockmem_mcp.audit.log import NO_APPROVAL, AuditLine
from rockmem_mcp.audit.service import CAPTURE_BYTES, Audit
from rockmem_mcp.config import Settings
from rockmem_mcp.errors import InvalidInputError
from rockmem_mcp.governance import history as history_module
from rockmem_mcp.governance.history import FEW_PATHSPECS, GitHistory
from rockmem_mcp.memory.service import MemoryService
from tests.unit.helpers import T0, FakeClock, Services

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs the git program")


def git(home: Path, *args: str, stdin: bytes | None = None) -> bytes:
    """Plain git on the home's repository, for the assertions (no user configuration)."""
    env = {
        "PATH": os.environ["PATH"],
        "GIT_DIR": str(home / ".git"),
        "GIT_WORK_TREE": str(home),
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
    }
    return subprocess.run(["git", *args], input=stdin, capture_output=True, check=True, env=env, cwd=home).stdout


def head_log(home: Path) -> bytes:
    return git(home, "show", "HEAD:meta/audit.log")


def head_files(home: Path) -> set[str]:
    return set(git(home, "ls-tree", "-r", "--name-only", "HEAD").decode().splitlines())


def subjects(home: Path) -> list[str]:
    return git(home, "log", "--format=%s").decode().splitlines()


class Home:
    """A memory service and the histories opened on one home, closed at the end."""

    def __init__(self, settings: Settings, services: Services) -> None:
        self.settings, self.services = settings, services
        self.memory = services.open(clock=FakeClock(T0, timedelta(minutes=1)))
        # Audit lines a minute apart too (stores stamp theirs by the wall clock), so commits can be told apart.
        self.memory.audit = Audit(settings, FakeClock(T0, timedelta(minutes=1)))
        self.histories: list[GitHistory] = []

    def history(self, first_commit: bool = True) -> GitHistory:
        """A history on the home; with `first_commit`, the home as it is now is committed at once (a day
        before the service's clock starts)."""
        history = GitHistory(self.settings, self.memory.audit, clock=FakeClock(T0 - timedelta(days=1)))
        history.settle_seconds = 0
        self.histories.append(history)
        if first_commit:
            history.flush()
        return history

    def line_times(self) -> list[datetime]:
        return [line.time for line in self.memory.audit.log.lines()]

    def path(self, entry_id: str) -> str:
        entry = self.memory.get(entry_id)
        return self.memory.audit.file(self.memory.files.path_for(entry.id, entry.category))

    def close(self) -> None:
        for history in self.histories:
            history.close()


@pytest.fixture
def home(settings: Settings, services: Services) -> Iterator[Home]:
    opened = Home(settings, services)
    yield opened
    opened.close()


def test_every_audited_save_is_in_head_after_a_flush(home: Home) -> None:
    history = home.history()
    paths = [home.path(home.memory.save(f"note {i} about the deploy", "work/notes").id) for i in range(25)]
    head = history.flush()

    assert head == history.head()
    assert head_log(home.settings.home) == (home.settings.meta_dir / "audit.log").read_bytes()
    assert len(head_log(home.settings.home).splitlines()) == 25
    tree = head_files(home.settings.home)
    assert set(paths) <= tree
    assert "meta/audit.log" in tree and ".gitignore" in tree
    # Derived data and locks are ignored.
    assert not any(name.startswith(("index/", "meta/access/")) or name.endswith(".lock") for name in tree)
    # One commit for the (empty) home as it was, one for the batch; nothing pending makes no commit.
    assert len(subjects(home.settings.home)) == 2
    assert history.flush() == head


def test_a_commit_is_kept_as_the_pack_it_was_written_in(home: Home) -> None:
    """One file and one fsync per commit: git would otherwise unpack a small import into a loose file per object
    (the audit log compressed a second time); the packs are merged every REPACK_EVERY_COMMITS commits."""
    history = home.history()
    for i in range(3):
        home.memory.save(f"note {i} about the deploy", "work/notes")
        history.flush()
    counts = subprocess.run(
        ["git", "--git-dir", str(home.settings.home / ".git"), "count-objects", "-v"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    found = dict(line.split(": ") for line in counts.splitlines())
    assert found["count"] == "0" and int(found["packs"]) >= 3 and int(found["in-pack"]) > 0


def test_commit_message_follows_the_seed_format(home: Home) -> None:
    history = home.history()
    entry = home.memory.save("we chose the hybrid approach", "decisions")
    history.flush()
    path = home.path(entry.id)

    message = git(home.settings.home, "log", "-1", "--format=%B").decode()
    subject = f'[CREATE] {path} — saved "we chose the hybrid approach"'
    assert message.splitlines()[0] == subject
    assert f"{subject}\nActor: main\nApproval: auto\nTrigger: audit line\n" in message
    assert "Audit-Lines: 0-" in message
    author, when = git(home.settings.home, "log", "-1", "--format=%an|%ct").decode().strip().split("|")
    line = AuditLine.parse(head_log(home.settings.home).decode().splitlines()[-1])
    assert line is not None
    assert author == "main" and int(when) == int(line.time.timestamp())

    home.memory.update(entry.id, tags=["architecture"])
    other = home.memory.save("the review is on Thursday", "decisions")
    history.flush()
    message = git(home.settings.home, "log", "-1", "--format=%B").decode()
    assert message.splitlines()[0] == "[BATCH] 2 changes — changed tags…"
    assert f"[EDIT] {path} — changed tags\nActor: main" in message
    assert f"[CREATE] {home.path(other.id)} — saved" in message
    home.memory.delete(other.id, reason="user asked")
    history.flush()
    message = git(home.settings.home, "log", "-1", "--format=%B").decode()
    assert message.startswith(f"[ARCHIVE] {home.path(other.id)} — archived (user asked)")
    assert "Trigger: user asked" in message


def test_a_file_changed_twice_in_one_batch_keeps_both_versions(home: Home) -> None:
    """The batch is cut before the repeat: the middle version is a commit of its own, from the bytes captured
    when it was written, with its own line; the batch's last commit holds the file as it is now."""
    history = home.history()
    history.flush()
    entry = home.memory.save("the deploy window is Thursday", "decisions")
    home.memory.update(entry.id, content="the deploy window is Friday")
    home.memory.update(entry.id, content="the deploy window is Saturday")
    history.flush()
    versions = history.versions(home.path(entry.id))
    texts = [json.loads(history.read(v.commit, home.path(entry.id)) or b"{}")["content"] for v in versions]
    assert texts == [f"the deploy window is {day}" for day in ("Saturday", "Friday", "Thursday")]
    assert [[line.action for line in v.lines] for v in versions] == [["EDIT"], ["EDIT"], ["CREATE"]]
    assert history.commit_at(versions[1].lines[0].time) == versions[1].commit  # to the millisecond
    assert not (home.settings.home / ".git" / "rockmem-versions").exists()  # consumed once committed


def test_a_batch_lists_200_changes_then_points_at_the_log(home: Home) -> None:
    history = home.history()
    memory = home.memory
    memory.save_many([memory.prepare_entry({"content": f"fact {i}", "category": "facts"}) for i in range(205)])
    history.flush()

    message = git(home.settings.home, "log", "-1", "--format=%B").decode()
    assert message.startswith("[BATCH] 205 changes — ")
    assert message.count("\nActor: main\n") == 200
    assert "… and 5 more (meta/audit.log in this commit lists them all)" in message
    assert len(head_log(home.settings.home).splitlines()) == 205


def test_versions_of_a_memory_edited_three_times(home: Home) -> None:
    history = home.history()
    entry = home.memory.save("the meeting is on Monday", "work")
    path = home.path(entry.id)
    commits = [history.flush()]
    for change in ({"content": "the meeting is on Tuesday"}, {"tags": ["meeting"]}, {"metadata": {"room": "4"}}):
        home.memory.update(entry.id, **change)
        commits.append(history.flush())

    versions = history.versions(path)
    assert [v.commit for v in versions] == commits[::-1]
    assert [[line.summary for line in v.lines] for v in versions] == [
        ["changed metadata"],
        ["changed tags"],
        ["changed content"],
        ['saved "the meeting is on Monday"'],
    ]
    assert all(not v.deleted and all(line.file == path for line in v.lines) for v in versions)
    assert [v.time for v in versions] == sorted((v.time for v in versions), reverse=True)
    assert [v.time for v in versions] == [t.replace(microsecond=0) for t in home.line_times()[::-1]]
    assert history.versions(path, limit=2) == versions[:2]

    home.memory.delete(entry.id, permanent=True)
    newest = history.versions(path)[0]
    assert newest.deleted and newest.lines[0].action == "DELETE"


def edit_while_staging(history: GitHistory, monkeypatch: pytest.MonkeyPatch, edit: Callable[[], object]) -> None:
    """The history's next commit makes `edit` once it has read the log: the edit's file is on disk as the commit
    stages the files, its line waits for the next batch."""
    changed_paths = history._changed_paths

    def editing(paths: list[str]) -> tuple[list[str], list[str]]:
        monkeypatch.setattr(history, "_changed_paths", changed_paths)
        edit()
        return changed_paths(paths)

    monkeypatch.setattr(history, "_changed_paths", editing)


def test_a_change_staged_before_its_line_was_read_is_attributed_to_its_version(
    home: Home, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a captured version (a big file, or one that could not be read), the commit takes the file from
    disk, where a change whose line is not read yet may already be."""
    history = home.history()
    monkeypatch.setattr(home.memory.audit, "versions", None)  # nothing captured
    entry = home.memory.save("draft one", "notes")
    path = home.path(entry.id)
    history.flush()
    home.memory.update(entry.id, content="draft two")
    edit_while_staging(history, monkeypatch, lambda: home.memory.update(entry.id, content="draft three"))
    first = history.flush()
    assert b"draft three" in (history.read(first, path) or b"")
    assert head_log(home.settings.home).count(b"changed content") == 1  # the line is not in before its file

    second = history.flush()
    assert head_log(home.settings.home).count(b"changed content") == 2
    versions = history.versions(path)
    assert versions[0].commit == first  # the second commit did not change the file
    assert [line.summary for line in versions[0].lines] == ["changed content", "changed content"]
    assert second != first


def test_a_change_written_while_the_committer_stages_leaves_each_version_its_own_bytes(
    home: Home, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each file goes in as captured at its last line in the batch, not as it is on disk by then: the disk may
    hold a later change whose line the committer has not read, and the version between was then in no
    commit (seen in CI: a revert "before the latest change" went back two)."""
    history = home.history()
    entry = home.memory.save("the deploy window is Thursday", "work")
    path = home.path(entry.id)
    history.flush()
    home.memory.update(entry.id, content="the deploy window is Friday")
    edit_while_staging(
        history, monkeypatch, lambda: home.memory.update(entry.id, content="the deploy window is Saturday")
    )
    history.flush()
    history.flush()

    versions = history.versions(path)
    texts = [json.loads(history.read(v.commit, path) or b"{}")["content"] for v in versions]
    assert texts == [f"the deploy window is {day}" for day in ("Saturday", "Friday", "Thursday")]
    assert [[line.summary for line in v.lines] for v in versions] == [
        ["changed content"],
        ["changed content"],
        ['saved "the deploy window is Thursday"'],
    ]


def test_a_version_captured_just_after_the_committer_read_the_captures_is_still_its_own(
    home: Home, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A version is captured just after its line is written: the committer can read the captures without it and
    then the log with its line. By the time the files are read the next change may be on disk (its request came
    once the capture was written); the capture, read again after the files, keeps the version between (seen in
    the suite on a home that was a git repository already: a revert went back two)."""
    history = home.history()
    entry = home.memory.save("the deploy window is Thursday", "work")
    path = home.path(entry.id)
    history.flush()
    capture = Audit._capture
    late: list[Any] = []
    monkeypatch.setattr(Audit, "_capture", lambda audit, batch: late.append((audit, batch)))
    home.memory.update(entry.id, content="the deploy window is Friday")  # its line is written, its capture not yet
    monkeypatch.setattr(Audit, "_capture", capture)

    file_command = history._file_command

    def reading(path: str, *args: Any) -> bytes:  # the file is read: by then its capture landed, the next change too
        monkeypatch.setattr(history, "_file_command", file_command)
        for audit, batch in late:
            capture(audit, batch)
        home.memory.update(entry.id, content="the deploy window is Saturday")
        return file_command(path, *args)

    monkeypatch.setattr(history, "_file_command", reading)
    history.flush()
    history.flush()

    versions = history.versions(path)
    texts = [json.loads(history.read(v.commit, path) or b"{}")["content"] for v in versions]
    assert texts == [f"the deploy window is {day}" for day in ("Saturday", "Friday", "Thursday")]


def head_text(home: Home, history: GitHistory, path: str) -> str:
    return json.loads(history.read("HEAD", path) or b"{}")["content"]


def test_two_lines_of_a_file_in_one_millisecond_take_the_file_from_disk(
    home: Home, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A capture is matched to its line by time and file: two lines of one file in one millisecond could get
    each other's bytes, so HEAD stayed behind the disk with nothing pending (a late capture, or a file too big to
    capture). Such a file is read from disk."""
    history = home.history()
    home.memory.audit._clock = FakeClock(T0, timedelta(0))  # every line in the same millisecond
    entry = home.memory.save("version one", "notes")
    path = home.path(entry.id)
    big = "version two " + "x" * (CAPTURE_BYTES + 1)  # too big to capture
    home.memory.update(entry.id, content=big)
    history.flush()
    assert head_text(home, history, path) == big

    capture = Audit._capture
    late: list[Any] = []
    monkeypatch.setattr(Audit, "_capture", lambda audit, batch: late.append((audit, batch)))
    home.memory.update(entry.id, content="version three")  # its capture comes after the commit read them
    monkeypatch.setattr(Audit, "_capture", capture)
    history.flush()
    for audit, batch in late:
        capture(audit, batch)
    history.flush()
    assert head_text(home, history, path) == "version three"


def test_a_pattern_line_after_a_captured_change_takes_the_folder_from_disk(home: Home) -> None:
    history = home.history()
    audit = home.memory.audit
    notes = home.settings.home / "notes"
    notes.mkdir()
    (notes / "a.md").write_text("a one")
    audit.record("CREATE", notes / "a.md", "a")
    (notes / "a.md").write_text("a two")  # changed again, by a change of every note
    (notes / "b.md").write_text("b one")
    audit.record("EDIT", "notes/*", "every note")
    history.flush()
    assert git(home.settings.home, "show", "HEAD:notes/a.md") == b"a two"
    assert git(home.settings.home, "show", "HEAD:notes/b.md") == b"b one"


def test_read_and_read_many(home: Home) -> None:
    history = home.history()
    a = home.memory.save("alpha", "notes")
    b = home.memory.save("beta", "notes")
    first = history.flush()
    assert first is not None
    home.memory.update(a.id, content="alpha two")
    second = history.flush()
    assert second is not None
    pa, pb = home.path(a.id), home.path(b.id)

    old = history.read(first, pa)
    assert old is not None and json.loads(old)["content"] == "alpha"
    assert json.loads(history.read(second, pa) or b"{}")["content"] == "alpha two"
    both = history.read_many(first, [pa, pb, "memory/notes/nothing.json", "../outside", ".git/config"])
    assert json.loads(both[pb] or b"{}")["content"] == "beta"
    assert both[pa] == old
    assert both["memory/notes/nothing.json"] is None and both["../outside"] is None and both[".git/config"] is None
    assert history.read("0" * 40, pa) is None
    assert history.read("HEAD --output=/tmp/x", pa) is None  # not a commit name: never passed on to git
    assert history.read(first, "memory/notes") is None  # a folder is not a file


def test_commit_at_and_changed_between(home: Home) -> None:
    history = home.history()
    initial = history.head()
    a = home.memory.save("alpha", "notes")
    first = history.flush()
    b = home.memory.save("beta", "notes")  # a minute later
    home.memory.update(a.id, content="alpha two")  # two minutes later: the batch's time
    second = history.flush()
    assert first is not None and second is not None
    saved, _, edited = home.line_times()

    assert history.commit_at(saved) == first
    assert history.commit_at(saved + timedelta(seconds=90)) == first
    assert history.commit_at(edited - timedelta(seconds=1)) == first  # the batch is as late as its last line
    assert history.commit_at(edited) == second
    assert history.commit_at(saved - timedelta(hours=1)) == initial  # the first commit, a day before
    assert history.commit_at(T0 - timedelta(days=2)) is None

    assert sorted(history.changed_between(first)) == sorted([home.path(a.id), home.path(b.id)])
    assert history.changed_between(first, first) == []
    assert history.changed_between(second, first) == sorted([home.path(a.id), home.path(b.id)])
    with pytest.raises(InvalidInputError, match="unknown commit"):
        history.changed_between("deadbeef" * 5)


def test_changes_made_outside_the_server_are_logged_as_manual_at_start(home: Home) -> None:
    history = home.history()
    kept = home.memory.save("kept", "notes")
    gone = home.memory.save("gone", "notes")
    history.flush()
    history.close()
    root = home.settings.home
    kept_path, gone_path = home.path(kept.id), home.path(gone.id)
    (root / kept_path).write_text((root / kept_path).read_text().replace("kept", "edited by hand"))
    (root / gone_path).unlink()
    (root / "SOUL.md").write_text("# Soul\nBe kind.\n")
    (root / "index" / "scratch.bin").write_bytes(b"derived")  # ignored: never reported

    again = home.history(first_commit=False)
    again.start()
    assert again.ready.wait(60)

    manual = [line for line in home.memory.audit.log.lines() if line.actor == "manual"]
    assert sorted((line.action, line.file) for line in manual) == sorted(
        [("EDIT", kept_path), ("DELETE", gone_path), ("CREATE", "SOUL.md")]
    )
    assert all(line.approval == NO_APPROVAL and "found at start" in line.summary for line in manual)
    assert head_log(root) == (root / "meta" / "audit.log").read_bytes()
    assert git(root, "show", "HEAD:SOUL.md") == b"# Soul\nBe kind.\n"
    assert gone_path not in head_files(root)
    assert git(root, "log", "-1", "--format=%an").decode().strip() == "manual"
    assert "Trigger: found at start" in git(root, "log", "-1", "--format=%B").decode()
    assert git(root, "status", "--porcelain", "--untracked-files=all", "--", ".", ":!meta/audit.log") == b""


def test_a_file_the_server_keeps_changing_at_start_is_not_taken_for_a_hand_edit(
    home: Home, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Start-up looks twice for files that differ from HEAD. A commit takes each file as captured at its line,
    so a file changed again while it commits differs from HEAD at both looks, with a line explaining it: that is
    the server's change, not one made outside it (seen as a `manual` EDIT that a test's revert then skipped)."""
    history = home.history()
    entry = home.memory.save("draft one", "notes")
    history.flush()
    history.close()
    home.memory.update(entry.id, content="draft two")
    again = home.history(first_commit=False)
    changed_paths = again._changed_paths
    drafts = iter(["draft three", "draft four"])

    def edit_while_staging(paths: list[str]) -> tuple[list[str], list[str]]:
        draft = next(drafts, None)
        if draft is not None:  # the next change lands on disk before the commit takes the file as captured
            home.memory.update(entry.id, content=draft)
        return changed_paths(paths)

    monkeypatch.setattr(again, "_changed_paths", edit_while_staging)
    again.start()
    assert again.ready.wait(60)

    assert [line for line in home.memory.audit.log.lines() if line.actor == "manual"] == []
    again.flush()
    texts = [
        json.loads(again.read(v.commit, home.path(entry.id)) or b"{}")["content"]
        for v in again.versions(home.path(entry.id))
    ]
    assert texts[:3] == ["draft four", "draft three", "draft two"]


def test_start_commits_the_home_once_and_then_in_the_background(home: Home) -> None:
    entry = home.memory.save("before history", "notes")
    history = home.history(first_commit=False)
    committed = threading.Event()
    commit_pending = history._commit_pending

    def signalling() -> str | None:
        head = commit_pending()
        if b"after history" in (history.read(head or "HEAD", "meta/audit.log") or b""):
            committed.set()
        return head

    history._commit_pending = signalling  # type: ignore[method-assign]
    history.start()
    assert history.ready.wait(60)
    root = home.settings.home
    assert subjects(root) == ["[CREATE] . — the home as it was when its history began"]
    assert git(root, "log", "-1", "--format=%an").decode().strip() == "system:init"
    assert home.path(entry.id) in head_files(root)

    later = home.memory.save("after history", "notes")
    assert committed.wait(60)
    assert home.path(later.id) in head_files(root)


def test_a_new_home_s_first_commit_is_made_before_start_returns(home: Home, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a new home (no change logged yet) start() makes the first commit itself, so no write can race it: a
    first commit holding a file newer than its lines made the next commit's captured versions step back in
    time (seen in CI: history Thursday, Friday, Saturday, and a revert of the latest change gave Thursday)."""
    monkeypatch.setattr(GitHistory, "_loop", lambda self: self.ready.set())  # the thread does nothing
    history = home.history(first_commit=False)
    history.start()
    root = home.settings.home
    assert subjects(root) == ["[CREATE] . — the home as it was when its history began"]

    entry = home.memory.save("the deploy window is Thursday", "work")
    home.memory.update(entry.id, content="the deploy window is Friday")
    history.flush()
    versions = history.versions(home.path(entry.id))
    assert [[line.action for line in v.lines] for v in versions] == [["EDIT"], ["CREATE"]]


def test_a_home_with_changes_gets_its_first_commit_in_the_background(
    home: Home, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A home that is not new may be big: its first commit never delays the start. Nor does a home with many
    files and no log (its audit was off, or its files were copied in)."""
    home.memory.save("before history", "notes")
    monkeypatch.setattr(GitHistory, "_loop", lambda self: self.ready.set())
    history = home.history(first_commit=False)
    history.start()
    assert history.head() is None

    (home.settings.meta_dir / "audit.log").unlink()
    for i in range(history_module.FIRST_COMMIT_INLINE_FILES + 1):
        (home.settings.home / f"note-{i}.md").write_text(f"note {i}")
    history = home.history(first_commit=False)
    history.start()
    assert history.head() is None


def test_a_save_racing_the_first_commit_is_committed_by_the_next(home: Home) -> None:
    """A save lands while the first commit lists the home (seen in CI: a whole-home restore then removed it, as
    its line was in the first commit and its file in none). Its file and its line go into the same or a later
    commit, never the line alone."""
    history = home.history(first_commit=False)
    run = history._run
    racing: list[str] = []

    def save_during_listing(args: list[str], *rest: object, **kwargs: object) -> bytes:
        listed = run(args, *rest, **kwargs)  # type: ignore[arg-type]
        if args[0] == "ls-files" and not racing:
            racing.append(home.memory.save("saved while the first commit listed the home", "notes").id)
        return listed

    history._run = save_during_listing  # type: ignore[method-assign]
    history.flush()
    history._run = run  # type: ignore[method-assign]
    history.flush()

    assert racing and home.path(racing[0]) in head_files(home.settings.home)
    assert head_log(home.settings.home) == (home.settings.meta_dir / "audit.log").read_bytes()


def test_a_file_created_and_removed_in_one_batch(home: Home) -> None:
    history = home.history()
    history.flush()
    entry = home.memory.save("short-lived", "notes")
    path = home.path(entry.id)
    home.memory.delete(entry.id, permanent=True)
    audit = home.memory.audit
    audit.record_many(
        [
            audit.line("MERGE", "knowledge-graph/entities/*", "consolidated entities"),
            audit.line("EDIT", "/etc/hostname", "outside the home"),
            audit.line("EDIT", "../neighbour.txt", "outside the home"),
            audit.line("EDIT", ".git/config", "inside .git"),
            audit.line("EDIT", "index/memory-index.npz", "derived"),
        ]
    )
    head = history.flush()

    assert head is not None and head == history.head()
    tree = head_files(home.settings.home)
    assert path not in tree and not any(name.startswith("index/") for name in tree)
    log_text = head_log(home.settings.home).decode()
    assert "CREATE | " + path in log_text and "DELETE | " + path in log_text and "inside .git" in log_text


def test_a_folder_removed_as_a_whole_leaves_the_tree(home: Home) -> None:
    history = home.history()
    folder = home.settings.home / "dream-reports"
    folder.mkdir()
    (folder / "a.md").write_text("a")
    (folder / "b.md").write_text("b")
    home.memory.audit.record("CREATE", folder, "two reports")
    history.flush()
    assert {"dream-reports/a.md", "dream-reports/b.md"} <= head_files(home.settings.home)

    shutil.rmtree(folder)
    home.memory.audit.record("DELETE", folder, "reports cleared")
    history.flush()
    assert not any(name.startswith("dream-reports/") for name in head_files(home.settings.home))


def test_two_histories_on_one_home_commit_concurrently(home: Home) -> None:
    first, second = home.history(), home.history()
    first.flush()
    errors: list[BaseException] = []
    done = threading.Event()

    def keep_flushing(history: GitHistory) -> None:
        try:
            while not done.is_set():
                history.flush()
        except BaseException as exc:  # collected for the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=keep_flushing, args=(h,)) for h in (first, second)]
    for thread in threads:
        thread.start()
    paths = [home.path(home.memory.save(f"concurrent {i}", "notes").id) for i in range(60)]
    done.set()
    for thread in threads:
        thread.join()
    second.flush()

    assert errors == []
    root = home.settings.home
    assert head_log(root) == (root / "meta" / "audit.log").read_bytes()
    assert set(paths) <= head_files(root)
    assert git(root, "rev-list", "--min-parents=2", "HEAD") == b""  # linear history, nothing overwritten
    carried = sum(len(v.lines) for p in paths for v in first.versions(p))
    assert carried == 60


def test_a_log_rewritten_by_retention_is_committed_without_rewriting_history(home: Home) -> None:
    history = home.history()
    for i in range(6):
        home.memory.save(f"old {i}", "notes")
    before = history.flush()
    assert before is not None
    home.memory.audit.log.rewrite(lambda lines: lines[4:])
    newer = home.memory.save("after the rewrite", "notes")
    head = history.flush()

    root = home.settings.home
    assert head_log(root) == (root / "meta" / "audit.log").read_bytes()
    assert len(head_log(root).splitlines()) == 3
    assert git(root, "merge-base", "--is-ancestor", before, "HEAD") == b""  # history only grew
    assert home.path(newer.id) in head_files(root)
    assert git(root, "log", "-1", "--format=%s").decode().startswith(f"[CREATE] {home.path(newer.id)} — ")
    assert history.flush() == head


def test_the_home_is_its_own_repository_whatever_the_environment(
    tmp_path: Path, services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    parent = tmp_path  # the home lives inside another repository, and GIT_DIR names that one
    subprocess.run(["git", "init", "-q", str(parent)], check=True, capture_output=True)
    hook = parent / ".git" / "hooks" / "reference-transaction"
    hook.write_text(f"#!/bin/sh\ntouch {tmp_path / 'hook-ran'}\n")
    hook.chmod(0o755)
    monkeypatch.setenv("GIT_DIR", str(parent / ".git"))
    monkeypatch.setenv("GIT_INDEX_FILE", str(parent / "other-index"))
    settings = Settings(home=parent / "home", embedding_model="off")
    memory = services.open(settings)
    history = GitHistory(settings, memory.audit)
    memory.save("hermetic", "notes")
    try:
        assert history.flush() is not None
    finally:
        history.close()

    assert (settings.home / ".git" / "HEAD").exists()
    assert not (tmp_path / "hook-ran").exists()
    monkeypatch.delenv("GIT_DIR")
    monkeypatch.delenv("GIT_INDEX_FILE")
    parent_head = subprocess.run(["git", "-C", str(parent), "rev-parse", "-q", "--verify", "HEAD"], capture_output=True)
    assert parent_head.returncode != 0  # nothing was committed to the parent


def test_without_git_the_server_works_and_says_so_once(
    settings: Settings, services: Services, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("PATH", "")
    monkeypatch.setattr(history_module, "_missing_warned", False)
    memory: MemoryService = services.open()
    with caplog.at_level(logging.WARNING, logger="rockmem_mcp.governance.history"):
        histories = [GitHistory(settings, memory.audit) for _ in range(2)]
    assert [r.getMessage() for r in caplog.records].count(
        "git history is off: the git program was not found on PATH; changes are still logged in meta/audit.log"
    ) == 1
    history = histories[0]
    assert history.available is False
    history.start()
    assert history.ready.is_set()
    entry = memory.save("still saved", "notes")
    assert memory.get(entry.id).content == "still saved"
    assert history.flush() is None and history.head() is None
    assert history.versions("memory/notes/x.json") == [] and history.read_many("HEAD", ["a"]) == {}
    assert history.read("HEAD", "a") is None and history.commit_at(T0) is None
    assert history.changed_between("HEAD") == []
    history.close()
    assert not (settings.home / ".git").exists()


def test_history_off_in_settings(settings: Settings, services: Services) -> None:
    off = settings.model_copy(update={"audit_git": False})
    memory = services.open(off)
    history = GitHistory(off, memory.audit)
    memory.save("no history", "notes")
    assert history.available is False and history.flush() is None
    assert not (off.home / ".git").exists()


def test_odd_file_names_links_and_modes_are_committed_as_they_are(home: Home) -> None:
    history = home.history()
    root = home.settings.home
    names = ['"quoted" name.md', "with space.md", "notes/ünïcode.md"]
    (root / "notes").mkdir()
    for name in names:
        (root / name).write_text(f"text of {name}")
    (root / "run.sh").write_text("#!/bin/sh\n")
    (root / "run.sh").chmod(0o755)
    (root / "link.md").symlink_to("with space.md")
    audit = home.memory.audit
    audit.record_many(audit.line("CREATE", name, "by a tool") for name in [*names, "run.sh", "link.md"])
    head = history.flush()
    assert head is not None

    for name in names:
        assert history.read(head, name) == f"text of {name}".encode()
    entries = git(root, "ls-tree", "HEAD", "run.sh", "link.md").decode()
    assert "100755 blob" in entries and "120000 blob" in entries
    assert history.read(head, "link.md") == b"with space.md"  # the link itself, never its target


@pytest.mark.parametrize("padding", [0, FEW_PATHSPECS + 5], ids=["few paths", "many paths"])
def test_the_paths_left_out_are_those_git_itself_ignores(home: Home, padding: int) -> None:
    # Asked of check-ignore without the index, then the index consulted: the answer must be git's own, where a
    # tracked file, or a folder holding one, is never ignored whatever the patterns say.
    history = home.history()
    root = home.settings.home
    (root / "notes").mkdir()
    (root / "notes" / "kept.md").write_text("tracked before the pattern came")
    (root / "drafts").mkdir()
    (root / "drafts" / "old.md").write_text("tracked too")
    git(root, "add", "notes/kept.md", "drafts/old.md")
    git(root, "-c", "user.name=t", "-c", "user.email=t@localhost", "commit", "-q", "-m", "tracked")
    with (root / ".gitignore").open("a") as gitignore:
        gitignore.write("/notes/\n/drafts/\n*.scratch\n/cache-*\n")
    (root / "notes" / "new.md").write_text("untracked, under an ignored folder")
    (root / "index" / "scratch.bin").write_bytes(b"derived")
    paths = [
        *(f"cache-{n}" for n in range(padding)),  # ignored, never tracked
        "notes/kept.md",  # tracked, matches a pattern: not ignored
        "notes/new.md",  # untracked under an ignored folder: ignored
        "notes",  # a folder holding a tracked file: not ignored
        "drafts",
        "drafts/old.md",
        "drafts/gone.md",  # never existed, under an ignored folder: ignored
        "index/scratch.bin",
        "index",
        "a.scratch",
        "memory/work/x.json",  # not matched by any pattern
        ".",
    ]
    oracle = git(root, "check-ignore", "-z", "--stdin", stdin=b"".join(p.encode() + b"\0" for p in paths))
    expected = {p.decode() for p in oracle.split(b"\0") if p}
    assert "notes/new.md" in expected and "notes/kept.md" not in expected and "notes" not in expected  # the oracle
    assert history._ignored(paths) == expected
