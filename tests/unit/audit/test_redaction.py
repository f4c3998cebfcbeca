"""Redaction (issue 45): a permanently removed item's text out of the audit lines and files about it, whole or cut,
raw or JSON-escaped, and nowhere else; the log redacted in place keeps every other byte."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from rockmem_mcp.audit.log import AuditLine, AuditLog
from rockmem_mcp.audit.redaction import Redaction, quoted_texts, text_digest
from rockmem_mcp.audit.service import quoted

TEXT = "My sister Anna lives at 12 Elm Street, Lisbon, since the spring of 2019 and works nearby"
MEMORY_FILE = "memory/family/3f9a0c1b2d4e.json"
DAY_LOG = "episodes/2026-11-24.jsonl"
PLACEHOLDER = f"[forgotten sha256:{text_digest(TEXT)}]"
AT = datetime(2026, 11, 24, 9, 0, tzinfo=UTC)


def line(file: str, summary: str, action: str = "CREATE") -> str:
    return AuditLine(AT, action, file, "main", "auto", summary).format()


def redaction() -> Redaction:
    return Redaction([TEXT], own_files=[MEMORY_FILE], shared=[DAY_LOG])


def test_a_quote_of_the_text_whole_or_cut_becomes_its_hash_in_the_lines_about_the_item() -> None:
    gone = redaction()
    whole = gone.audit_line(line(MEMORY_FILE, f"saved {quoted(TEXT, 200)}"))
    assert TEXT not in whole and whole.endswith(f'saved "{PLACEHOLDER}"')
    cut = gone.audit_line(line(DAY_LOG, f"fact [a1] {quoted(TEXT)}", "APPEND"))  # cut at 60 with an ellipsis
    assert "Anna" not in cut and cut.endswith(f'fact [a1] "{PLACEHOLDER}"')
    core = gone.audit_line(line(MEMORY_FILE, f"forgotten for good; removed line 1 of Identity: {TEXT}", "DELETE"))
    assert core.endswith(f"removed line 1 of Identity: {PLACEHOLDER}") and "for good" in core  # revert still refuses
    # The summary's own limit (200 characters) cut inside the quote: still a cut of the text.
    long = gone.audit_line(line(MEMORY_FILE, "x" * 120 + f" saved {quoted(TEXT, 500)}"))
    assert "Elm" not in long and "Anna" not in long


def test_a_line_run_into_one_a_crash_tore_is_redacted_whole_when_a_field_names_the_item() -> None:
    """Its fields are one place off (FILE holds the action), so FILE cannot be trusted: any field will do."""
    gone = redaction()
    torn = "2026-11-24T09:00:00.00Z | CREA"
    assert "Anna" not in gone.audit_line(torn + line(MEMORY_FILE, f"saved {quoted(TEXT)}"))
    other = torn + line("memory/family/aaaaaaaaaaaa.json", f"saved {quoted(TEXT)}")
    assert gone.audit_line(other) == other


def test_lines_about_other_files_and_other_words_stay_as_they_are() -> None:
    gone = redaction()
    other = line("memory/family/aaaaaaaaaaaa.json", f"saved {quoted(TEXT)}")
    assert gone.audit_line(other) == other  # another memory that says the same words keeps them
    near = line(DAY_LOG, 'fact [b2] "My sister Anna lives at 14 Oak Road"', "APPEND")
    assert gone.audit_line(near) == near  # shares the first words only, and is not cut: another episode
    inside = Redaction(["Anna"], shared=[DAY_LOG])
    assert inside.audit_line(line(DAY_LOG, '"Annabel called"')) == line(DAY_LOG, '"Annabel called"')  # not in a word


def test_files_lose_the_text_raw_and_json_escaped() -> None:
    text = 'He said "meet at 5"\nthen left'
    gone = Redaction([text], shared=[DAY_LOG])
    record = json.dumps({"id": "e1", "content": text}) + "\n" + json.dumps({"id": "e2", "content": "kept"}) + "\n"
    redacted = gone.file_bytes(record.encode())
    assert b"meet at 5" not in redacted and b'"kept"' in redacted
    assert [json.loads(row)["id"] for row in redacted.splitlines()] == ["e1", "e2"]  # still JSON lines
    assert gone.file_bytes(b"nothing of it here") == b"nothing of it here"


def test_a_commit_message_loses_it_in_the_blocks_about_covered_files_and_in_a_batch_subject() -> None:
    gone = redaction()
    summary = f"saved {quoted(TEXT)}"
    message = (
        f"[BATCH] 2 changes — {summary[:59]}…\n\n"
        f"[CREATE] {MEMORY_FILE} — {summary}\nActor: main\nApproval: auto\nTrigger: audit line\n\n"
        f"[CREATE] memory/b.json — {summary}\nActor: main\nApproval: auto\nTrigger: audit line\n\n"
        "Audit-Lines: 0-400\n"
    )
    subject, own, other, trailer = gone.message(message).split("\n\n")
    assert "Anna" not in subject and "Anna" not in own
    assert other == message.split("\n\n")[2] and trailer == "Audit-Lines: 0-400\n"


def test_the_log_is_redacted_in_place_keeping_every_other_byte(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "audit.log")
    lines = [
        AuditLine(AT, "CREATE", MEMORY_FILE, "main", "auto", f"saved {quoted(TEXT)}"),
        AuditLine(AT, "CREATE", "memory/b.json", "main", "auto", 'saved "The gym opens at six"'),
        AuditLine(AT, "DELETE", MEMORY_FILE, "main", "auto", f"deleted for good {quoted(TEXT)}"),
    ]
    log.append(lines)
    with open(log.path, "ab") as torn:
        torn.write(b"2026-11-24T09:00:00.00Z | APP")  # a crash's torn last line stays
    before = log.path.read_bytes()
    inode = log.path.stat().st_ino

    assert log.redact(redaction()) == 2
    after = log.path.read_bytes()
    assert b"Anna" not in after and after.endswith(b" | APP") and log.path.stat().st_ino != inode
    assert after.splitlines()[1] == before.splitlines()[1]
    assert [entry.action for entry in log.lines()] == ["CREATE", "CREATE", "DELETE"]
    assert log.redact(redaction()) == 0  # nothing left to take out: the file is not replaced again


def test_what_a_summary_quotes_is_found_for_earlier_versions() -> None:
    assert quoted_texts('saved "The locker code is 4471"') == ["The locker code is 4471"]
    assert quoted_texts('entity "Anna" (person)') == ["Anna"]
    assert quoted_texts('archived (moved) "A long text cut by the limit…') == ["A long text cut by the limit"]
    assert quoted_texts("changed content") == []


def test_the_retention_digests_lose_it_in_the_events_about_the_item(tmp_path: Path) -> None:
    from rockmem_mcp.audit.retention import ARCHIVE_NAME, STATE_NAME, fold_old_lines, redact_digests
    from rockmem_mcp.config import Settings

    settings = Settings(home=tmp_path / "home", embedding_model="off")
    log = AuditLog(settings.meta_dir / "audit.log")
    log.append(
        [
            AuditLine(
                AT, "CREATE", "procedures/evening.json", "main", "auto", 'procedure "Lock the zqdrawer", 2 steps'
            ),
            AuditLine(AT, "CREATE", "procedures/morning.json", "main", "auto", 'procedure "Open the zqdrawer", 1 step'),
        ]
    )
    assert redact_digests(settings, log, Redaction(["Lock the zqdrawer"], own_files=["procedures/evening.json"])) == 0
    fold_old_lines(settings, log, datetime(2027, 6, 1, tzinfo=UTC))  # both lines now only in the digests
    gone = Redaction(["Lock the zqdrawer"], own_files=["procedures/evening.json"])

    assert redact_digests(settings, log, gone) == 1
    for name in (ARCHIVE_NAME, STATE_NAME):
        text = (settings.meta_dir / name).read_text()
        assert "Lock the" not in text and "Open the zqdrawer" in text and "[forgotten sha256:" in text


def test_a_shared_file_keeps_another_items_words_that_a_cut_would_have_matched() -> None:
    """Review finding: a file's own text is never a summary's cut. Another episode in the same day log that starts
    with the forgotten text's first words and goes on after a `…` keeps its words; a torn audit line about another
    file stays as it is."""
    gone = redaction()
    other = json.dumps({"content": "My sister Anna lives at… well, somewhere near the sea"}) + "\n"
    assert gone.file_bytes(other.encode()) == other.encode()
    whole = json.dumps({"content": TEXT}) + "\n"
    assert TEXT.encode() not in gone.file_bytes(whole.encode())  # the text itself still goes
    torn = f'2026-11-24T09:00:00Z | CREATE | memory/work/bbbbbbbbbbbb.json | main | saved "{TEXT[:20]}…'
    assert gone.audit_line(torn) == torn
