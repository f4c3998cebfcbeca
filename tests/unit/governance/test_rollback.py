"""Rollback on the library: a run undone with what others changed since left alone, a failed log puts the files
back, the graph follows a revert, no git no rollback, and nothing outside the stores is ever written."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from rockmem_mcp.audit.log import AuditLog
from rockmem_mcp.audit.service import acting_as
from rockmem_mcp.config import Settings
from rockmem_mcp.errors import InvalidInputError, NotFoundError
from rockmem_mcp.governance.history import GitHistory
from rockmem_mcp.governance.rollback import Rollback
from rockmem_mcp.graph.service import GraphService
from rockmem_mcp.memory.service import MemoryService
from tests.unit.audit.test_line_index import SMALL_READ, LogReads
from tests.unit.governance.test_audit_trail import filler


class Home:
    def __init__(self, settings: Settings, first_commit: bool = True) -> None:
        self.settings = settings
        self.memory = MemoryService(settings, embed_in_background=False)
        self.graph = GraphService(settings)
        self.history = GitHistory(settings, self.memory.audit)
        self.history.settle_seconds = 0
        if first_commit:
            self.history.flush()  # the first commit: what the home held before the test
        self.rollback = Rollback(settings, self.memory.audit, self.history, self.memory, lambda: self.graph)

    def close(self) -> None:
        self.history.close()
        self.graph.close()
        self.memory.close()

    def found(self, query: str) -> list[str]:
        return [hit.entry.id for hit in self.memory.search(query).results]


@pytest.fixture
def home(tmp_path: Path):
    opened = Home(Settings.load({"home": tmp_path / "home"}, env={}))
    yield opened
    opened.close()


def test_a_run_is_undone_except_where_someone_changed_a_file_since(home: Home) -> None:
    memory = home.memory
    edited = memory.save("The deploy window is Thursday", category="work")
    archived = memory.save("The standup is at nine")
    touched_later = memory.save("The office is in Leeds")
    home.history.flush()
    with acting_as("dream:d-test"):
        memory.update(edited.id, content="The deploy window is Friday")
        memory.delete(archived.id, reason="noise")
        created = memory.save("A memory the dream made")
        memory.update(touched_later.id, content="The office is in York")
    memory.update(touched_later.id, content="The office is in Bristol")  # the user, after the run

    result = home.rollback.revert_run("dream:d-test")

    assert memory.get(edited.id).content == "The deploy window is Thursday"
    assert memory.get(archived.id).archived_at is None
    assert home.found("standup nine") == [archived.id]
    with pytest.raises(NotFoundError):
        memory.get(created.id)
    assert home.found("memory dream made") == []
    assert memory.get(touched_later.id).content == "The office is in Bristol"  # not undone under the user
    assert [s.file for s in result.skipped] == [f"memory/{touched_later.id}.json"]
    assert "changed since by main" in result.skipped[0].reason
    reverts = [line for line in memory.audit.log.lines() if line.action == "REVERT"]
    assert {line.file for line in reverts} == {f"memory/work/{edited.id}.json", f"memory/{archived.id}.json",
                                               f"memory/{created.id}.json"}  # fmt: skip
    assert all(line.summary.startswith(result.revert_id + ": restored as of ") for line in reverts)


def test_a_revert_whose_line_cannot_be_written_puts_every_file_back(home: Home, monkeypatch) -> None:
    memory = home.memory
    entry = memory.save("The deploy window is Thursday", category="work")
    memory.update(entry.id, content="The deploy window is Friday")
    home.history.flush()
    path = memory.files.path_for(entry.id, "work")
    before = path.read_bytes()

    def full_disk(self: AuditLog, lines: list) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(AuditLog, "append", full_disk)
    with pytest.raises(OSError):
        home.rollback.revert_item(entry.id)
    assert path.read_bytes() == before
    assert memory.get(entry.id).content == "The deploy window is Friday"
    assert home.found("Thursday") == []


def test_the_graph_follows_a_revert_of_an_entity(home: Home) -> None:
    graph = home.graph
    entity = graph.add_entities([{"name": "Alice", "type": "person"}]).entities[0].entity
    graph.add_entities([{"name": "Alice", "aliases": ["Al"]}])
    assert graph.resolve("Al").id == entity.id
    home.history.flush()

    home.rollback.revert_item(entity.id)

    with pytest.raises(NotFoundError):
        graph.resolve("Al")
    assert graph.resolve("Alice").id == entity.id


def test_an_unknown_commit_or_item_is_refused_and_nothing_is_removed(home: Home) -> None:
    entry = home.memory.save("Kept as it is")
    home.history.flush()
    with pytest.raises(InvalidInputError, match="not a commit"):
        home.rollback.revert_item(entry.id, to="deadbeefdeadbeef")
    with pytest.raises(InvalidInputError, match="only one version"):
        home.rollback.revert_item(entry.id)
    with pytest.raises(NotFoundError):
        home.rollback.revert_item("0123456789ab")
    with pytest.raises(NotFoundError):
        home.rollback.revert_run("dream:d-never")
    assert home.memory.get(entry.id).content == "Kept as it is"


def test_lines_naming_files_outside_the_stores_are_never_written(home: Home) -> None:
    """A hand-edited audit log cannot make a revert write outside the home, the log itself, or working memory."""
    memory = home.memory
    entry = memory.save("A note")
    home.history.flush()
    for forged in ("../outside.json", "meta/audit.log", "working-memory/session.json", "/etc/hostname"):
        memory.audit.log.append([memory.audit.line("EDIT", forged, "forged", actor="dream:d-forged")])
    memory.update(entry.id, content="A note, edited")
    result = home.rollback.revert_run("dream:d-forged")
    assert result.restored == result.removed == []
    assert not (home.settings.home.parent / "outside.json").exists()
    assert memory.get(entry.id).content == "A note, edited"


def test_without_git_rollback_says_what_it_needs(tmp_path: Path) -> None:
    settings = Settings.load({"home": tmp_path / "home", "audit_git": False}, env={})
    memory = MemoryService(settings, embed_in_background=False)
    try:
        history = GitHistory(settings, memory.audit)
        entry = memory.save("A note")
        with pytest.raises(InvalidInputError, match="needs the home's git history"):
            Rollback(settings, memory.audit, history, memory).revert_item(entry.id)
    finally:
        memory.close()


def test_a_run_does_not_undo_an_edit_someone_made_while_it_ran(home: Home) -> None:
    memory = home.memory
    z = memory.save("Z original")
    y = memory.save("Y original")
    home.history.flush()
    with acting_as("dream:d-interleaved"):
        memory.update(z.id, content="Z by the dream")
    memory.update(y.id, content="Y by the user")  # acknowledged while the dream ran
    with acting_as("dream:d-interleaved"):
        memory.update(y.id, content="Y by the dream")
    result = home.rollback.revert_run("dream:d-interleaved")
    assert memory.get(z.id).content == "Z original"
    assert memory.get(y.id).content == "Y by the dream"  # left: undoing it would undo the user's edit
    assert [s.file for s in result.skipped] == [f"memory/{y.id}.json"]


def test_reverts_read_the_items_and_the_runs_lines_not_the_whole_log(home: Home, monkeypatch) -> None:
    """Issue 45: a revert read the whole log (5.7 s at 200k lines), and each version's copy of it from git; now
    the item's and the run's lines are read by offset, and the versions' lines from the log as it is."""
    memory = home.memory
    kept = memory.save("The deploy window is Thursday", category="work")
    home.history.flush()
    memory.audit.log.append(filler(0, 3000))
    memory.update(kept.id, content="The deploy window is Friday")
    with acting_as("dream:d-long-log"):
        dreamt = memory.save("A memory the dream made")
    memory.audit.log.append(filler(3000, 3000))
    home.history.flush()
    memory.audit.index.catch_up()  # as the committer does after each commit
    size = memory.audit.log.path.stat().st_size
    reads = LogReads(memory.audit.log.path, monkeypatch)

    home.rollback.revert_item(kept.id)
    assert memory.get(kept.id).content == "The deploy window is Thursday"
    assert reads.bytes <= SMALL_READ < size // 20
    home.history.flush()  # commits the revert (the commit stages the log: that reads it)
    memory.audit.index.catch_up()
    reads.bytes = 0
    home.rollback.revert_run("dream:d-long-log")
    with pytest.raises(NotFoundError):
        memory.get(dreamt.id)
    assert reads.bytes <= SMALL_READ


def test_a_moved_memory_goes_back_to_its_folder_and_git_matches_the_disk(home: Home) -> None:
    memory = home.memory
    entry = memory.save("Alice works on rockmem", category="people")
    home.history.flush()
    memory.update(entry.id, category="team")
    head = home.history.flush()
    assert head is not None
    tracked = set(home.history._run(["ls-tree", "-r", "--name-only", head]).decode().split())
    assert f"memory/team/{entry.id}.json" in tracked and f"memory/people/{entry.id}.json" not in tracked

    result = home.rollback.revert_item(entry.id)

    assert memory.get(entry.id).category == "people"
    assert result.removed == [f"memory/team/{entry.id}.json"]
    assert not memory.files.path_for(entry.id, "team").exists()


def test_a_revert_holds_the_day_log_lock_appenders_take(home: Home, monkeypatch) -> None:
    """An episode appended while a revert replaces its day's log waits for the lock and lands in the new file,
    instead of being written to the old one and lost."""
    import fcntl
    import os

    from rockmem_mcp.episodes.service import Episodes
    from rockmem_mcp.governance import rollback as rollback_module

    episodes = Episodes(home.settings)
    first = episodes.record("The deploy was rolled back")
    home.history.flush()
    episodes.record("The deploy went out again")
    day = f"episodes/{first.at.date().isoformat()}.jsonl"
    held_during_write: list[bool] = []
    write = rollback_module.atomic_write_many

    def checking(items):  # type: ignore[no-untyped-def]
        fd = os.open(home.settings.home / day, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            held_during_write.append(False)
        except BlockingIOError:
            held_during_write.append(True)
        finally:
            os.close(fd)
        return write(items)

    monkeypatch.setattr(rollback_module, "atomic_write_many", checking)
    home.rollback.revert_item(day)
    assert held_during_write == [True]


def test_a_bare_name_in_two_stores_must_be_named_by_its_path(home: Home) -> None:
    from rockmem_mcp.conversation.feedback import FeedbackLog
    from rockmem_mcp.episodes.service import Episodes

    episode = Episodes(home.settings).record("The review went well")
    FeedbackLog(home.settings).record("UserThumbsUp", "good answer", "s1")
    day = episode.at.date().isoformat()
    with pytest.raises(InvalidInputError, match="several stores"):
        home.rollback.revert_item(day)


def test_a_failed_batch_line_undoes_the_batch(home: Home, monkeypatch) -> None:
    memory = home.memory
    kept = memory.save("Kept as it was", category="a")
    replacing = memory.prepare_entry({"id": kept.id, "content": "Replaced", "category": "b"})
    new = memory.prepare_entry({"content": "Brand new"})

    def full_disk(self: AuditLog, lines: list) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(AuditLog, "append", full_disk)
    with pytest.raises(OSError):
        memory.save_many([replacing, new])
    with pytest.raises(OSError):
        memory.revise_many([kept.id], lambda entry: {"pinned": True})
    assert memory.get(kept.id).content == "Kept as it was" and memory.get(kept.id).category == "a"
    assert not memory.get(kept.id).pinned
    assert not memory.files.path_for(kept.id, "b").exists()
    with pytest.raises(NotFoundError):
        memory.get(new.id)
    assert home.found("Brand new") == []


def test_a_point_in_time_among_many_commits_of_one_second(home: Home) -> None:
    """One memory edited 120 times in one batch is 120 versions, most within a second: a time between two of
    them finds the right one (git's whole seconds alone could not)."""
    memory = home.memory
    entry = memory.save("version 0")
    for i in range(1, 121):
        memory.update(entry.id, content=f"version {i}")
    home.history.flush()
    lines = [line for line in memory.audit.log.lines() if entry.id in line.file]
    commit = home.history.commit_at(lines[20].time)
    assert commit is not None
    data = home.history.read(commit, lines[20].file)
    assert data is not None and b'"version 20"' in data


def test_a_critical_file_put_back_raises_no_alert_at_the_next_start(home: Home) -> None:
    from rockmem_mcp.core.service import CoreMemory
    from rockmem_mcp.governance.integrity import CriticalFiles

    critical = CriticalFiles(home.settings, home.memory.audit)
    critical.check()  # the first check records
    core = CoreMemory(home.settings, home.memory)
    core.file.on_write.append(critical.written)
    core.edit("append", "Identity", core.read().version, "The user is Ada")
    core.edit("append", "Identity", core.read().version, "The user lives in Leeds")
    home.history.flush()
    rollback = Rollback(home.settings, home.memory.audit, home.history, home.memory, critical=critical)
    rollback.revert_item("MEMORY.md")
    assert "Leeds" not in (home.settings.home / "MEMORY.md").read_text()
    assert CriticalFiles(home.settings, home.memory.audit).check() == []


def test_the_servers_own_bookkeeping_is_never_taken_for_a_hand_edit(home: Home) -> None:
    """Files the server writes without a line of their own (the critical files' checksums, the home's format
    marker, alerts) are left out of the history: a start never logs them as changed by hand."""
    from rockmem_mcp.governance.integrity import CriticalFiles

    CriticalFiles(home.settings, home.memory.audit).check()  # writes meta/critical-files.json
    home.memory.save("A note")
    home.history.flush()
    CriticalFiles(home.settings, home.memory.audit).check()
    again = GitHistory(home.settings, home.memory.audit)
    again.settle_seconds = 0
    again.start()
    assert again.ready.wait(60)
    again.close()
    manual = [line for line in home.memory.audit.log.lines() if line.actor == "manual"]
    assert [line.file for line in manual] == []


def test_a_revert_across_a_case_only_move_keeps_the_file_it_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 45: on a case-insensitive filesystem a memory moved `Work` -> `work` has two paths in the history that
    are one file: putting the old one back and removing the other removed the memory."""
    from tests.unit.case_folding import case_insensitive_folder

    with case_insensitive_folder(tmp_path, monkeypatch) as (folder, _how):
        settings = Settings(home=folder / "home", embedding_model="off", audit_git=False)
        memory = MemoryService(settings)
        try:
            saved = memory.save("Standup moved to ten", category="Work")
            rollback = Rollback(settings, memory.audit, None, memory)
            old, new = f"memory/Work/{saved.id}.json", f"memory/work/{saved.id}.json"
            before = (settings.home / old).read_bytes()
            rollback._write({old: before, new: None})  # as revert_item writes a case-only move back
            assert (settings.home / old).read_bytes() == before
            assert [p.name for p in (settings.memory_dir / "Work").iterdir()] == [f"{saved.id}.json"]
        finally:
            memory.close()
