"""The procedural store: learned workflows saved with their history, found by search and by trigger, shown as the
seed's markdown, and shared safely between processes."""

from __future__ import annotations

import json
import multiprocessing
import os
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from rockmem_mcp.config import Settings
from rockmem_mcp.errors import ChangedSinceReadError, CorruptEntryError, InvalidInputError, NotFoundError
from rockmem_mcp.procedures import service as procedures_module
from rockmem_mcp.procedures.service import PROCEDURE, Procedures
from tests.unit.helpers import T0, FakeClock

DEPLOY: dict[str, Any] = {
    "name": "How to deploy",
    "trigger": ["deploy", "push to production", "ship"],
    "steps": ["Run the test suite first", "Check for uncommitted changes", "Deploy to staging before prod"],
    "notes": ["User prefers verbose deploy logs"],
    "learned_from": ["Episode 2026-01-25 14:30", "3fa2b1c4d5e6"],
}
REVIEW: dict[str, Any] = {
    "name": "Code review",
    "trigger": ["review a pull request", "code review"],
    "steps": ["Read the description", "Run the branch locally", "Comment on naming"],
}


@pytest.fixture
def store(settings: Settings, clock: FakeClock) -> Iterator[Procedures]:
    opened = Procedures(settings, clock=clock)
    yield opened
    opened.close()


def on_disk(settings: Settings, slug: str) -> dict[str, Any]:
    return json.loads((settings.procedures_dir / f"{slug}.json").read_bytes())


# ---------------------------------------------------------------------------------------------- saving
def test_a_new_procedure_is_version_1_in_its_own_file(store: Procedures, settings: Settings) -> None:
    saved = store.save(**DEPLOY)
    assert (saved.slug, saved.version, saved.history, saved.created_at) == ("how-to-deploy", 1, [], T0)
    assert [p.name for p in settings.procedures_dir.iterdir()] == ["how-to-deploy.json"]
    assert on_disk(settings, "how-to-deploy")["steps"] == DEPLOY["steps"]
    assert store.get("how-to-deploy") == saved


def test_an_update_keeps_the_version_it_replaces_in_the_history(store: Procedures, settings: Settings) -> None:
    first = store.save(**DEPLOY, reason="first deployment discussion")
    second = store.save(
        "How to deploy", ["deploy"], ["Run the tests", "Tag it", "Deploy"], reason="refined after a staging incident"
    )
    assert (second.version, second.created_at, second.updated_at > first.updated_at) == (2, first.created_at, True)
    assert (second.notes, second.learned_from) == ([], [])  # an update replaces every part it is given
    [earlier] = second.history
    assert earlier.model_dump() == {
        "version": 1,
        "updated_at": first.updated_at,
        "trigger": DEPLOY["trigger"],
        "steps": DEPLOY["steps"],
        "notes": DEPLOY["notes"],
        "learned_from": DEPLOY["learned_from"],
        "reason": "first deployment discussion",
    }
    assert store.save(**DEPLOY, version=2).version == 3
    assert [v["version"] for v in on_disk(settings, "how-to-deploy")["history"]] == [1, 2]


def test_an_update_from_an_older_version_is_refused_and_changes_nothing(store: Procedures, settings: Settings) -> None:
    store.save(**DEPLOY)
    store.save(**DEPLOY, reason="someone else's update", version=1)
    before = on_disk(settings, "how-to-deploy")
    with pytest.raises(ChangedSinceReadError, match=r"you had version 1; it is at version 2.*procedures/how-to-deploy"):
        store.save(**DEPLOY, version=1)
    with pytest.raises(ChangedSinceReadError, match="it is at version 2"):
        store.save(**DEPLOY, version=0)  # 0: create only
    with pytest.raises(ChangedSinceReadError, match="it does not exist now"):
        store.save(**REVIEW, version=1)
    assert on_disk(settings, "how-to-deploy") == before
    assert not (settings.procedures_dir / "code-review.json").exists()
    assert store.save(**REVIEW, version=0).version == 1


def test_names_with_one_slug_are_one_procedure(store: Procedures, settings: Settings) -> None:
    store.save(**DEPLOY)
    updated = store.save("HOW_TO  deploy!", ["deploy"], ["Run the tests"])
    assert (updated.name, updated.version) == ("How to deploy", 2)  # the first spelling stays
    assert [p.name for p in settings.procedures_dir.iterdir()] == ["how-to-deploy.json"]
    assert store.get("how to DEPLOY").version == 2
    with pytest.raises(InvalidInputError, match="no Latin letter or digit"):
        store.save("デプロイ", ["deploy"], ["Run the tests"])


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"trigger": []}, "trigger must name at least one"),
        ({"trigger": ["how to"]}, "has no word to match"),
        ({"trigger": ["deploy"] * 21}, "at most 20"),
        ({"trigger": ["x" * 201]}, "1-200 characters"),
        ({"steps": []}, "steps must name at least one"),
        ({"steps": ["  "]}, "steps item 1 is blank"),
        ({"steps": ["ok", "a" * 2001]}, "steps item 2 is 2001 characters"),
        ({"steps": ["ok"] * 51}, "at most 50"),
        ({"steps": "Run the tests"}, "must be a list of strings"),
        ({"notes": ["ring the \x07 bell"]}, "control character"),
        ({"learned_from": ["x\x07y"]}, "no control characters"),
        ({"reason": "r" * 5000}, "reason is 5000 bytes"),
        ({"version": -1}, "version must be the whole number"),
        ({"version": True}, "version must be the whole number"),
    ],
)
def test_bad_input_is_refused_with_what_to_do(store: Procedures, change: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        store.save(**{**DEPLOY, **change})
    assert store.list() == []


def test_a_procedure_over_the_content_cap_is_refused(tmp_path: Path) -> None:
    store = Procedures(Settings(home=tmp_path / "home", max_content_bytes=1_000, embedding_model="off"))
    try:
        with pytest.raises(InvalidInputError, match="ROCKMEM_MAX_CONTENT_BYTES"):
            store.save("Long one", ["deploy"], ["a" * 600, "b" * 600])
    finally:
        store.close()


def test_the_history_keeps_the_newest_versions_within_its_cap(
    store: Procedures, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(procedures_module, "MAX_HISTORY_BYTES", 3_000)
    for n in range(12):
        saved = store.save("Big", ["deploy"], [f"version {n + 1} " + "x" * 500])
    kept = [v.version for v in saved.history]
    assert kept == list(range(12 - len(kept), 12)) and 1 < len(kept) < 11  # the newest, in order
    assert saved.history_dropped == 11 - len(kept)
    assert sum(len(v.model_dump_json()) for v in saved.history) <= 3_000
    assert f"- {saved.history_dropped} older version(s) dropped" in store.markdown("Big")


# ---------------------------------------------------------------------------------------------- archive, delete
def test_archive_hides_a_procedure_and_restore_brings_it_back(store: Procedures) -> None:
    store.save(**DEPLOY)
    archived = store.archive("how-to-deploy", "we moved to continuous delivery")
    assert archived.archived and archived.archive_reason == "we moved to continuous delivery"
    assert store.archive("how-to-deploy").archived_at == archived.archived_at  # already archived: as it was
    assert (store.list(), store.search("staging"), store.matching("deploy it")) == ([], [], [])
    assert [p.name for p in store.list(include_archived=True)] == ["How to deploy"]
    assert [p.name for _, p in store.search("staging", include_archived=True)] == ["How to deploy"]
    assert "> Archived on 2024-05-01: we moved to continuous delivery" in store.markdown("how-to-deploy")
    restored = store.restore("how-to-deploy")
    assert not restored.archived and restored.version == 1
    assert [p.name for p in store.matching("deploy it")] == ["How to deploy"]
    store.archive("how-to-deploy")
    assert not store.save(**DEPLOY).archived  # saving it again brings it back


def test_delete_removes_the_procedure_and_its_history(store: Procedures, settings: Settings) -> None:
    store.save(**DEPLOY)
    store.save(**DEPLOY)
    assert store.delete("How to deploy").version == 2
    assert list(settings.procedures_dir.iterdir()) == []
    with pytest.raises(NotFoundError):
        store.delete("How to deploy")
    assert store.save(**DEPLOY).version == 1  # a new procedure, no history


def test_a_missing_procedure_is_not_found_with_the_near_names(store: Procedures) -> None:
    store.save(**DEPLOY)
    store.save(**REVIEW)
    with pytest.raises(NotFoundError, match=r"no procedure named 'deploy'; near: 'How to deploy'\. rockmem://proc"):
        store.get("deploy")
    with pytest.raises(NotFoundError, match=r"no procedure named 'how-to-deplyo'; near: 'How to deploy'"):
        store.markdown("how-to-deplyo")
    with pytest.raises(NotFoundError, match=r"no procedure named 'gardening'\. rockmem://procedures lists them all"):
        store.archive("gardening")


# ---------------------------------------------------------------------------------------------- finding
def test_search_finds_words_of_the_name_trigger_steps_and_notes(store: Procedures) -> None:
    store.save(**DEPLOY)
    store.save(**REVIEW)
    for query, expected in [
        ("uncommitted", ["How to deploy"]),  # a step
        ("verbose logs", ["How to deploy"]),  # a note
        ("pull request", ["Code review"]),  # a trigger
        ("review naming", ["Code review"]),
        ("run", ["How to deploy", "Code review"]),
    ]:
        assert sorted(p.name for _, p in store.search(query)) == sorted(expected), query
    scored = store.search("deploy staging")
    assert [p.name for _, p in scored] == ["How to deploy"] and scored[0][0] > 0
    assert store.search("gardening") == [] and store.search("the") == [] and store.search("run", limit=1)[0][0] > 0


def test_search_leaves_a_dormant_procedure_out_unless_asked(store: Procedures, clock: FakeClock) -> None:
    store.save(**DEPLOY)
    clock.now += timedelta(days=60)  # unused for 60 days: 0.7 · e^(-0.03 · 60) ≈ 0.12, dormant
    store.save(**REVIEW)
    assert [p.name for _, p in store.search("run")] == ["Code review"]
    assert [p.name for _, p in store.search("run", include_archived=True)] == ["Code review", "How to deploy"]


def test_matching_needs_every_word_of_one_trigger_phrase(store: Procedures) -> None:
    store.save(**DEPLOY)
    assert [p.name for p in store.matching("Can you deploy the new build?")] == ["How to deploy"]
    assert [p.name for p in store.matching("we are shipping today")] == ["How to deploy"]  # stems meet
    assert [p.name for p in store.matching("push this to production")] == ["How to deploy"]
    assert store.matching("push the branch") == []  # half of 'push to production'
    assert store.matching("production is down") == []
    assert store.matching("") == []


def test_matching_ranks_the_longer_phrase_first_and_keeps_to_the_limit(store: Procedures) -> None:
    store.save("Release notes", ["release"], ["Collect the merged changes"])
    store.save("Production release", ["production release"], ["Freeze the branch"])
    store.save("Release checklist", ["release"], ["Check the list"])
    found = store.matching("time for the production release")
    assert [p.name for p in found] == ["Production release", "Release checklist"]  # 2 words, then by name
    assert len(store.matching("release", limit=5)) == 2 and store.matching("release", limit=0) == []


def test_what_matching_offers_is_reinforced(store: Procedures, settings: Settings, clock: FakeClock) -> None:
    store.save(**DEPLOY)
    store.save(**REVIEW)
    store.matching("deploy it")  # within a minute of its save: not a second use yet
    assert store.get("How to deploy").reinforcement_count == 1
    clock.now += timedelta(minutes=2)
    store.matching("deploy it")
    assert store.get("How to deploy").reinforcement_count == 2
    assert store.get("Code review").reinforcement_count == 1
    assert set(store.reinforcer.accesses(PROCEDURE)) == {"how-to-deploy"}
    assert store.save(**DEPLOY).reinforcement_count == 3  # the file takes the uses in at its next write
    assert on_disk(settings, "how-to-deploy")["reinforcement_count"] == 3


def test_matching_offers_a_dormant_procedure_but_not_an_archive_candidate(store: Procedures, clock: FakeClock) -> None:
    store.save(**DEPLOY)
    clock.now += timedelta(days=60)  # dormant: a trigger match is an explicit ask
    assert [p.name for p in store.matching("deploy")] == ["How to deploy"]
    clock.now += timedelta(days=200)  # unused since: 0.7 · e^(-0.03 · 200) · log2(3) ≈ 0.003, an archive candidate
    assert store.matching("deploy") == []


def test_offer_lines_name_the_procedure_its_first_steps_and_where_to_read_it(store: Procedures) -> None:
    store.save(**DEPLOY)
    store.save("Long one", ["migrate database"], [f"Step {n} " + "y" * 60 for n in range(1, 20)])
    assert store.offer_lines("deploy please") == [
        'Procedure "How to deploy" (trigger: deploy, push to production, ship): 1. Run the test suite first '
        "2. Check for uncommitted changes 3. Deploy to staging before prod (read rockmem://procedures/how-to-deploy)"
    ]
    [line] = store.offer_lines("migrate the database")
    steps = line.split("): ", 1)[1].split(" (read ")[0]
    assert len(steps) == 300 and steps.endswith("…") and steps.startswith("1. Step 1 yyy")
    assert line.endswith("(read rockmem://procedures/long-one)")
    assert store.offer_lines("nothing relevant") == []


# ---------------------------------------------------------------------------------------------- the markdown view
def test_markdown_is_the_seeds_layout_with_the_version_and_history(store: Procedures, clock: FakeClock) -> None:
    store.save(**{**DEPLOY, "steps": DEPLOY["steps"][:2]}, reason="first deployment discussion")
    clock.now += timedelta(days=5)
    store.save(**DEPLOY, reason="refined after\na staging incident")
    assert store.markdown("How to deploy") == (
        "# How to deploy\n"
        "<!-- Type: procedure | Learned: 2024-05-01 | Last used: 2024-05-06 | Version: 2 -->\n"
        "\n## Trigger\n- deploy\n- push to production\n- ship\n"
        "\n## Steps\n1. Run the test suite first\n2. Check for uncommitted changes\n3. Deploy to staging before prod\n"
        "\n## Notes\n- User prefers verbose deploy logs\n"
        "\n## Learned From\n- Episode 2026-01-25 14:30\n- 3fa2b1c4d5e6\n"
        "\n## History\n- v2 (current, 2024-05-06): refined after a staging incident\n"
        "- v1 (2024-05-01): first deployment discussion\n"
    )


def test_stored_text_cannot_forge_a_heading_or_a_control_code(store: Procedures, settings: Settings) -> None:
    store.save(
        "Escaping",
        ["escape"],
        ["Run it\n# Steps\n  ## Evil", "Looks fine\n===", "Also\n---"],
        notes=["# Notes\nfine line"],
        learned_from=["#hashtag"],
    )
    raw = on_disk(settings, "escaping")
    raw["notes"].append("\x1b]0;pwned\x07 title")  # a hand edit: control codes never pass save
    (settings.procedures_dir / "escaping.json").write_text(json.dumps(raw))
    shown = store.markdown("escaping")
    headings = [line for line in shown.split("\n") if line.lstrip().startswith("#")]
    assert headings == ["# Escaping", "## Trigger", "## Steps", "## Notes", "## Learned From", "## History"]
    assert "1. Run it\n   \\# Steps\n   \\  ## Evil\n2. Looks fine\n   \\===\n3. Also\n   \\---\n" in shown
    assert "- \\# Notes\n  fine line\n" in shown and "- \\#hashtag\n" in shown
    assert "- \\u001b]0;pwned\\u0007 title" in shown and "\x1b" not in shown


# ---------------------------------------------------------------------------------------------- files on disk
def test_records_and_restore_records_write_only_what_is_missing(
    store: Procedures, settings: Settings, tmp_path: Path
) -> None:
    store.save(**DEPLOY)
    store.save(**DEPLOY)
    store.save(**REVIEW)
    store.archive("Code review")
    backup = store.records()
    assert [(p.name, p.version, p.archived) for p in backup] == [("Code review", 1, True), ("How to deploy", 2, False)]
    other = Procedures(Settings(home=tmp_path / "other", embedding_model="off"))
    try:
        other.save("How to deploy", ["deploy"], ["Their own steps"])
        assert other.restore_records(backup) == ["Code review"]  # theirs is kept
        assert other.get("How to deploy").steps == ["Their own steps"]
        assert other.get("Code review") == backup[0]
        bad = backup[1].model_copy(update={"name": "Bad one", "slug": "bad-one", "trigger": ["the"]})
        with pytest.raises(InvalidInputError, match="has no word to match"):
            other.restore_records([backup[1].model_copy(update={"name": "Fine one"}), bad])
        assert [p.name for p in other.records()] == ["Code review", "How to deploy"]  # checked before any write
    finally:
        other.close()


def test_problems_name_unusable_files_and_the_others_still_work(store: Procedures, settings: Settings) -> None:
    store.save(**DEPLOY)
    folder = settings.procedures_dir
    (folder / "broken.json").write_text("{")
    (folder / "Upper.json").write_text("{}")
    (folder / "fifo.json").touch()
    os.unlink(folder / "fifo.json")
    os.mkfifo(folder / "fifo.json")
    problems = store.problems()
    assert len(problems) == 3
    assert any("Upper.json: 'Upper' is not a procedure slug" in p for p in problems)
    assert any("broken.json is not a valid procedure" in p for p in problems)
    assert any("fifo.json is a FIFO" in p for p in problems)
    assert [p.name for p in store.list()] == ["How to deploy"]
    assert [p.name for p in store.matching("deploy")] == ["How to deploy"]
    with pytest.raises(CorruptEntryError):
        store.get("broken")
    with pytest.raises(CorruptEntryError):
        store.save("broken", ["deploy"], ["overwrite it"])  # an invalid file is never written over
    assert (folder / "broken.json").read_text() == "{"


def test_a_hand_edit_and_a_removal_are_seen_by_the_next_read(store: Procedures, settings: Settings) -> None:
    store.save(**DEPLOY)
    assert store.search("canary") == []
    raw = on_disk(settings, "how-to-deploy")
    raw["steps"].append("Watch the canary")
    (settings.procedures_dir / "how-to-deploy.json").write_text(json.dumps(raw))  # in place, not renamed
    assert [p.name for _, p in store.search("canary")] == ["How to deploy"]
    (settings.procedures_dir / "how-to-deploy.json").unlink()
    assert store.search("canary") == [] and store.list() == []


# ---------------------------------------------------------------------------------------------- two processes
def _save_in_another_process(home: str, name: str, count: int, start: Any) -> None:
    store = Procedures(Settings(home=Path(home), embedding_model="off"))
    try:
        start.wait(10)
        for n in range(count):
            store.save(name, ["deploy"], [f"process {os.getpid()} update {n}"])
    finally:
        store.close()


def test_another_process_save_is_seen_by_the_next_search(store: Procedures, settings: Settings) -> None:
    store.save(**DEPLOY)
    assert store.search("rollback") == []  # the index is built and cached
    context = multiprocessing.get_context("fork")
    start = context.Event()
    start.set()
    for name in ("Rollback plan", "How to deploy"):  # a new one, and an update of one this process has read
        child = context.Process(target=_save_in_another_process, args=(str(settings.home), name, 1, start))
        child.start()
        child.join(60)
        assert child.exitcode == 0
    assert [p.name for _, p in store.search("rollback")] == ["Rollback plan"]
    assert store.get("How to deploy").version == 2
    assert [p.name for _, p in store.search("process update")] == ["How to deploy", "Rollback plan"]


def test_two_processes_updating_one_procedure_lose_no_update(settings: Settings) -> None:
    context = multiprocessing.get_context("fork")
    start = context.Event()
    count = 15
    writers = [
        context.Process(target=_save_in_another_process, args=(str(settings.home), "How to deploy", count, start))
        for _ in range(2)
    ]
    for writer in writers:
        writer.start()
    start.set()
    for writer in writers:
        writer.join(60)
        assert writer.exitcode == 0
    final = on_disk(settings, "how-to-deploy")
    assert final["version"] == 2 * count
    assert [v["version"] for v in final["history"]] == list(range(1, 2 * count))
    steps = [v["steps"][0] for v in final["history"]] + final["steps"]
    assert len(set(steps)) == 2 * count  # every update is one version: none overwrote another
