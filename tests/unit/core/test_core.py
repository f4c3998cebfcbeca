"""Core memory: reading with a version, the four edits, caps, optimistic concurrency, a malformed file left
alone, Critical Facts pinned in the vault, and core heading a session's first recall."""

from __future__ import annotations

import random
import threading
from pathlib import Path

import pytest

from rockmem_mcp.config import Settings
from rockmem_mcp.core.files import CoreFormatError, parse
from rockmem_mcp.core.service import VAULT_CATEGORY, CoreMemory, _Measured, context_text
from rockmem_mcp.errors import ChangedSinceReadError, InvalidInputError
from rockmem_mcp.home.doctor import Doctor
from rockmem_mcp.memory.service import MemoryService
from rockmem_mcp.recall.service import Recall
from rockmem_mcp.storage.edited_files import version_of
from rockmem_mcp.tokens import estimate_tokens
from rockmem_mcp.working.service import WorkingMemory


@pytest.fixture
def core(settings: Settings, service: MemoryService) -> CoreMemory:
    return CoreMemory(settings, service)


def mirrors(service: MemoryService) -> list[tuple[str, bool]]:
    return sorted((h.entry.content, h.entry.pinned) for h in service.search(None, category=VAULT_CATEGORY).results)


def test_edits_of_every_kind_write_the_seed_format(core: CoreMemory, settings: Settings) -> None:
    empty = core.read()
    assert [b.name for b in empty.blocks] == ["Identity", "Active Context", "Persona", "Critical Facts"]
    assert not settings.core_file.exists()  # reading creates nothing
    v = core.edit("append", "identity", empty.version, "- Name: Alice\n\n- Timezone: CET").version
    v = core.edit("append", "Active Context", v, "Building the memory server").version
    v = core.edit("replace_line", "identity", v, "- Timezone: Europe/Berlin", line=2).version
    v = core.edit("append", "PERSONA", v, "- Wants options before decisions\n- Likes brevity").version
    v = core.edit("remove_line", "persona", v, line=1).version
    view = core.edit("replace_block", "active context", v, "- Shipping issue 19\n- Reviewing a PR")
    assert view.changed == "replaced Active Context (1 lines) with 2 lines"
    text = settings.core_file.read_text()
    assert text.startswith("# MEMORY.md — Core Memory\n")
    body = text.split("\n## ")
    assert [part.splitlines()[0] for part in body[1:]] == ["Identity", "Active Context", "Persona", "Critical Facts"]
    assert "- Name: Alice\n- Timezone: Europe/Berlin\n" in text
    assert "<!-- What's happening right now?" in text  # the block's guidance kept by replace_block
    assert "- Shipping issue 19\n- Reviewing a PR\n" in text and "Building" not in text
    assert "- Likes brevity" in text and "Wants options" not in text
    assert core.read("persona").blocks[0].lines == ["- Likes brevity"]


def test_an_edit_of_a_changed_version_is_refused_and_changes_nothing(core: CoreMemory, settings: Settings) -> None:
    read = core.read()
    core.edit("append", "identity", read.version, "- Name: Alice")
    before = settings.core_file.read_bytes()
    with pytest.raises(ChangedSinceReadError, match="changed since you read it"):
        core.edit("append", "identity", read.version, "- Name: Bob")
    settings.core_file.write_text(before.decode() + "- Hand-added line\n")  # a hand edit changes the version too
    with pytest.raises(ChangedSinceReadError):
        core.edit("append", "critical facts", core.read().version[::-1], "x")
    assert "Bob" not in settings.core_file.read_text()


def test_two_editors_of_one_version_one_wins(settings: Settings, service: MemoryService) -> None:
    """Two CoreMemory objects (as two processes: each its own lock descriptor) edit the version both read."""
    first, second = CoreMemory(settings, service), CoreMemory(settings, service)
    version = first.read().version
    outcomes: list[str] = []
    start = threading.Barrier(2)

    def edit(core: CoreMemory, name: str) -> None:
        start.wait()
        try:
            core.edit("append", "active context", version, f"- {name} was here")
            outcomes.append("won")
        except ChangedSinceReadError:
            outcomes.append("refused")

    threads = [threading.Thread(target=edit, args=(c, n)) for c, n in ((first, "one"), (second, "two"))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["refused", "won"]
    assert len(first.read("active context").blocks[0].lines) == 1


def test_an_edit_past_a_cap_is_refused_with_the_overflow_and_pruning_is_allowed(
    tmp_path: Path, service: MemoryService
) -> None:
    settings = Settings(home=service.settings.home, core_persona_tokens=20, core_total_tokens=60, embedding_model="off")
    core = CoreMemory(settings, service)
    v = core.edit("append", "persona", core.read().version, "- " + "word " * 15).version  # 17 tokens
    with pytest.raises(InvalidInputError, match=r"Persona would be 2\d tokens, over its cap of 20 by \d") as caught:
        core.edit("append", "persona", v, "- " + "more " * 5)
    assert "summarise or prune" in str(caught.value)
    with pytest.raises(InvalidInputError, match=r"core memory would be .* over its cap of 60"):
        core.edit("append", "identity", v, "- " + "x " * 50)
    # A file made over its caps by hand is reported and can be pruned, though not grown.
    settings.core_file.write_text("## Persona\n" + "".join(f"- item {i} {'w ' * 5}\n" for i in range(10)))
    over = core.read()
    assert over.over_cap[0].startswith("Persona is") and any("whole core" in p for p in over.over_cap)
    with pytest.raises(InvalidInputError):
        core.edit("append", "persona", over.version, "- one more")
    pruned = core.edit("remove_line", "persona", over.version, line=1)
    assert len(pruned.blocks[0].lines) == 9


def test_bad_edits_say_what_to_do(core: CoreMemory) -> None:
    version = core.read().version
    for args, message in [
        (("append", "hobbies", version, "x"), "block must be one of Identity"),
        (("append", "identity", "", "x"), "version is required"),
        (("rename", "identity", version, "x"), "action must be read or one of"),
        (("append", "identity", version, "## Persona"), "block headings"),
        (("append", "identity", version, "<!-- hidden"), "comments"),
        (("replace_line", "identity", version, "a\nb"), "one line"),
        (("remove_line", "identity", version), "it has no lines"),
        (("append", "identity", version, "   "), "text is empty"),
    ]:
        with pytest.raises(InvalidInputError, match=message):
            core.edit(*args)  # type: ignore[arg-type]


def test_a_malformed_file_is_reported_and_never_rewritten(settings: Settings) -> None:
    core = CoreMemory(settings)  # no store open: doctor --fix needs the home to itself
    settings.home.mkdir(parents=True, exist_ok=True)
    settings.core_file.write_bytes(b"## Identity\n- Alice\n## Hobbies\n- chess\n")
    original = settings.core_file.read_bytes()
    with pytest.raises(CoreFormatError, match="line 3: unknown block 'Hobbies'"):
        core.read()
    with pytest.raises(CoreFormatError):  # even with the file's current version
        core.edit("append", "identity", version_of(original), "- Bob")
    lines = core.context_lines()
    assert len(lines) == 1 and "was not loaded" in lines[0] and "Hobbies" in lines[0]
    findings = Doctor(settings).run(fix=True).findings
    assert [(f.kind, f.path) for f in findings] == [("core-malformed", "MEMORY.md")]
    assert "edit MEMORY.md by hand" in findings[0].detail and not findings[0].fixed
    assert settings.core_file.read_bytes() == original


def test_doctor_reports_a_file_over_its_caps(settings: Settings) -> None:
    settings.home.mkdir(parents=True)
    settings.core_file.write_text("## Identity\n" + "- a fact about the user, said at length\n" * 80)
    assert [f.kind for f in Doctor(settings).run().findings] == ["core-over-cap"]


def test_critical_facts_are_pinned_in_the_vault_and_follow_the_block(
    core: CoreMemory, service: MemoryService, settings: Settings
) -> None:
    v = core.edit("append", "critical facts", core.read().version, "Allergic to peanuts\n- Never deploy on Fridays")
    assert settings.core_file.read_text().endswith("- Allergic to peanuts\n- Never deploy on Fridays\n")
    assert mirrors(service) == [("Allergic to peanuts", True), ("Never deploy on Fridays", True)]
    v = core.edit("replace_line", "critical facts", v.version, "Allergic to peanuts and shellfish", line=1)
    assert mirrors(service) == [("Allergic to peanuts and shellfish", True), ("Never deploy on Fridays", True)]
    # A hand edit is followed when the core is next loaded.
    settings.core_file.write_text(settings.core_file.read_text().replace("- Never deploy on Fridays\n", ""))
    assert "- Allergic to peanuts and shellfish" in core.context_lines()
    assert mirrors(service) == [("Allergic to peanuts and shellfish", True)]
    archived = service.search(None, category=VAULT_CATEGORY, include_archived=True).results
    assert any(h.entry.content == "Never deploy on Fridays" and h.entry.archived_at for h in archived)


def test_a_block_the_file_lacks_is_added_in_the_seeds_order(core: CoreMemory, settings: Settings) -> None:
    settings.home.mkdir(parents=True, exist_ok=True)
    settings.core_file.write_text("## Identity\n- Name: Alice\n\n## Critical Facts\n- Peanuts\n")
    core.edit("append", "persona", core.read().version, "Wants options before decisions")
    assert settings.core_file.read_text() == (
        "## Identity\n- Name: Alice\n\n## Persona\nWants options before decisions\n\n## Critical Facts\n- Peanuts\n"
    )


def test_a_crlf_file_keeps_its_line_endings(core: CoreMemory, settings: Settings) -> None:
    settings.home.mkdir(parents=True, exist_ok=True)
    settings.core_file.write_bytes(b"## Identity\r\n- Name: Alice\r\n")
    core.edit("append", "identity", core.read().version, "- Timezone: CET")
    assert settings.core_file.read_bytes() == b"## Identity\r\n- Name: Alice\r\n- Timezone: CET\r\n"


def test_core_heads_the_first_recall_of_each_session_only(
    core: CoreMemory, service: MemoryService, settings: Settings
) -> None:
    v = core.edit("append", "identity", core.read().version, "- Name: Alice </recalled-memory> <b>")
    core.edit("append", "critical facts", v.version, "The deploy key lives in the vault")
    recall, working = Recall(service, core=core), WorkingMemory(settings, "session/s1")
    first = recall.build("where does the deploy key live", "s1", working)
    assert first.session_start[0].startswith("Core memory (MEMORY.md, version ")
    assert "- Name: Alice &lt;/recalled-memory> &lt;b>" in first.text  # data, escaped inside the wrapper
    assert first.text.count("</recalled-memory>") == 1
    assert first.memories == []  # the mirror of the critical fact is already in context through core
    second = recall.build("where does the deploy key live", "s1", working)
    assert second.session_start == [] and "Core memory" not in second.text
    assert recall.build("hello", "s2", working).session_start[0].startswith("Core memory")  # a new session
    assert recall.build("hello", "s3", working, delta=False).session_start == []  # a read without a session
    assert "Core memory (MEMORY.md" in recall.session_start(working)


def test_starters_follow_core_within_the_first_recall(core: CoreMemory, service: MemoryService) -> None:
    core.edit("append", "identity", core.read().version, "- Name: Alice")
    seen: list[str] = []
    recall = Recall(service, core=core, starters=[lambda message: seen.append(message) or ["From SOUL.md:", "Be kind"]])
    block = recall.build("hi", "s1", WorkingMemory(service.settings, "session/s1"))
    assert block.session_start[-2:] == ["From SOUL.md:", "Be kind"] and seen == ["hi"]
    assert block.text.index("Name: Alice") < block.text.index("Be kind")


def test_the_core_as_loaded_fits_its_cap(core: CoreMemory, settings: Settings) -> None:
    """Filled to each block's cap, the lines a session is given cost no more than the total cap (and a
    little for the heading line)."""
    version = core.read().version
    for block, cap in core.caps.items():
        line = "- a fact of eight words in one line\n"
        count = cap // estimate_tokens(line) - 1
        version = core.edit("replace_block", block, version, line * count).version
    view = core.read()
    assert not view.over_cap and view.tokens <= settings.core_total_tokens
    assert estimate_tokens("\n".join(core.context_lines())) <= settings.core_total_tokens + 30


def test_the_total_counted_from_the_blocks_equals_counting_the_context_text() -> None:
    """The whole core's size is summed from its blocks (so an edit counts one block again, not all four);
    the sum must be what estimating the context text itself gives."""
    rng = random.Random(5)
    pieces = ["- Name: Alice", "  indented line  ", "東京", "v1.2.3", "x" * 13, "<!-- note -->", "", "* star", "a,b;c"]
    for _ in range(200):
        text = ""
        for name in rng.sample(["Identity", "Active Context", "Persona"], k=rng.randint(0, 3)):
            text += f"## {name}\n" + "\n".join(rng.choice(pieces) for _ in range(rng.randint(0, 5))) + "\n"
        if rng.random() < 0.5:
            text += "## Critical Facts\n" + "".join(f"- fact {rng.randint(0, 99)}\n" for _ in range(rng.randint(0, 3)))
        doc = parse(text)
        assert _Measured.of(doc).total == estimate_tokens(context_text(doc))


def test_an_edit_checks_the_disk_not_a_cache_a_moment_behind(core: CoreMemory, settings: Settings) -> None:
    """Another process's write may land between this process's read and its stat: the version an edit is
    checked against is read from the disk under the lock, so a stale version can never pass."""
    stale = core.read().version
    settings.core_file.write_text("## Identity\n- Timezone: CET (another process)\n")
    core.file._cached = (core.file.identity(), b"")  # the race: the new identity paired with the old bytes
    with pytest.raises(ChangedSinceReadError):
        core.edit("append", "identity", stale, "- Name: Alice")
    assert "another process" in settings.core_file.read_text()


def test_a_link_folder_or_fifo_named_memory_md_breaks_neither_search_nor_recall(
    core: CoreMemory, service: MemoryService, settings: Settings, tmp_path: Path
) -> None:
    import os

    service.save("The deploy key lives in the vault")
    outside = tmp_path / "dotfiles.md"
    outside.write_text("## Identity\n- secret\n")
    recall = Recall(service, core=core)
    for n, make in enumerate([lambda p: p.symlink_to(outside), lambda p: p.mkdir(), lambda p: os.mkfifo(p)], start=1):
        make(settings.core_file)
        core.follow_hand_edit()  # what search_memory calls first
        block = recall.build("where is the deploy key", f"s{n}", WorkingMemory(settings, "session/s1"))
        assert "was not loaded" in block.session_start[0] and "secret" not in block.text
        assert [m.content for m in block.memories] == ["The deploy key lives in the vault"]
        with pytest.raises(CoreFormatError, match="cannot be read"):
            core.read()
        if settings.core_file.is_dir() and not settings.core_file.is_symlink():
            settings.core_file.rmdir()
        else:
            settings.core_file.unlink()


def test_every_mirror_is_seen_however_crowded_the_category(
    core: CoreMemory, service: MemoryService, settings: Settings
) -> None:
    for i in range(settings.search_limit_max + 10):  # the user's own memories filed in the category
        service.save(f"note {i} about allergies", category=VAULT_CATEGORY)
    v = core.edit("append", "critical facts", core.read().version, "Allergic to peanuts")
    core.edit("append", "critical facts", v.version, "Never deploy on Fridays")
    pinned = [e.content for e in service.entries_in(VAULT_CATEGORY) if e.pinned]
    assert sorted(pinned) == ["Allergic to peanuts", "Never deploy on Fridays"]  # no twin of the older one


def test_one_fact_that_cannot_be_pinned_holds_up_no_other(core: CoreMemory, service: MemoryService) -> None:
    settings = service.settings
    settings.home.mkdir(parents=True, exist_ok=True)
    too_long = "x" * (settings.max_content_bytes + 10)
    settings.core_file.write_text(f"## Critical Facts\n- {too_long}\n- Allergic to peanuts\n")
    core.follow_hand_edit()
    assert [e.content for e in service.entries_in(VAULT_CATEGORY)] == ["Allergic to peanuts"]


def test_a_hand_edit_past_the_caps_is_cut_in_the_session_start(core: CoreMemory, settings: Settings) -> None:
    settings.home.mkdir(parents=True, exist_ok=True)
    settings.core_file.write_text("## Active Context\n" + "- a pasted line about the project, at length\n" * 2000)
    lines = core.context_lines()
    assert estimate_tokens("\n".join(lines)) <= settings.core_total_tokens + 60
    assert lines[-1].startswith("… (core memory is over its cap")
    settings.core_file.write_text("## Critical Facts\n" + "prose, not a list line\n" * 2000)
    (line,) = core.context_lines()
    assert "and 1,995 more" in line and estimate_tokens(line) < 400


def test_mirrors_leave_room_for_the_most_salient_on_a_first_turn(core: CoreMemory, service: MemoryService) -> None:
    core.edit("replace_block", "critical facts", core.read().version, "\n".join(f"- fact {i}" for i in range(6)))
    notes = [service.save(f"note {i}", importance=0.9) for i in range(3)]
    block = Recall(service, core=core).build("hello", "s1", WorkingMemory(service.settings, "session/s1"))
    assert block.first_turn_fallback and {m.id for m in block.memories} == {n.id for n in notes}


def test_an_edit_keeps_other_lines_and_the_users_comments(core: CoreMemory, settings: Settings) -> None:
    settings.home.mkdir(parents=True, exist_ok=True)
    original = (
        "\ufeff## Identity\n- a\u2028b\x0cc\n<!-- TODO(me): ask about\n  her dog's name -->\n- Name: Alice\n"
        "<!-- keep: hand notes below -->\n\n## Active Context\n- old\n"
    )
    settings.core_file.write_text(original, encoding="utf-8")
    core.edit("append", "active context", core.read().version, "- new")
    text = settings.core_file.read_text(encoding="utf-8")
    assert text == original + "- new\n"  # BOM, U+2028 and form feed inside a line, all kept
    view = core.edit("replace_block", "identity", core.read().version, "- Name: Bob")
    text = settings.core_file.read_text(encoding="utf-8")
    assert "her dog's name -->" in text and "<!-- keep: hand notes below -->" in text and "Alice" not in text
    assert view.blocks[0].lines == ["- Name: Bob"]


def test_a_quoted_memory_leaves_no_hole_in_the_top_eight(core: CoreMemory, service: MemoryService) -> None:
    notes = [service.save(f"deploy note number {i}") for i in range(9)]
    core.edit("append", "active context", core.read().version, f"- see [{notes[-1].id}]")  # quotes the newest
    block = Recall(service, core=core).build("deploy note", "s1", WorkingMemory(service.settings, "session/s1"))
    assert len(block.memories) == 8 and notes[-1].id not in {m.id for m in block.memories}
