"""Audit retention (seed 004 §12.6): lines of `meta/audit.log` older than `audit_retention_days` (90) fold into
monthly digests in `meta/audit-archive.md` and leave the log. Git history is never touched: it stays the
permanent record.

The digests' counts live in `meta/audit-archive.json` (the durable state); the markdown is rendered from it.
Folding runs inside `AuditLog.rewrite`, under the lock appenders take: the old lines are counted, the state
and the markdown are written, and only then is the log replaced without them. The state also records
`folded_before`, the cutoff up to which every line has been counted, so a run after a crash between the
digest and the log's replacement drops those lines without counting them again. (A line appended later with
a time before that cutoff, which no writer does, would be dropped uncounted.)
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta

from rockmem_mcp.audit.log import AuditLine, AuditLog, clean_field, format_time, parse_time
from rockmem_mcp.audit.redaction import Redaction
from rockmem_mcp.audit.service import current_actor
from rockmem_mcp.config import Settings
from rockmem_mcp.errors import CorruptEntryError, RockmemError
from rockmem_mcp.storage.atomic import atomic_write
from rockmem_mcp.storage.no_follow import read_bytes
from rockmem_mcp.storage.pg import is_database_url

log = logging.getLogger(__name__)

ARCHIVE_NAME = "audit-archive.md"
STATE_NAME = "audit-archive.json"
NOTABLE_PER_MONTH = 10
FILES_PER_MONTH = 50_000  # distinct files remembered per month for "across N files" (beyond: "N+ files")
NOT_MUTATIONS = ("ALERT", "REJECT")  # lines that changed no file
MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)


@dataclass
class MonthDigest:
    lines: int = 0
    mutations: int = 0
    files: set[str] = field(default_factory=set)  # at most FILES_PER_MONTH
    files_capped: bool = False
    reflections: dict[str, list[str]] = field(default_factory=dict)  # reflection:ID -> the approvals it had
    dream_runs: list[str] = field(default_factory=list)
    alerts: int = 0  # critical file changes
    decay: int = 0
    archive: int = 0
    notable: list[str] = field(default_factory=list)
    notable_more: int = 0

    def add(self, line: AuditLine) -> None:
        self.lines += 1
        if line.action not in NOT_MUTATIONS:
            self.mutations += 1
            if len(self.files) < FILES_PER_MONTH:
                self.files.add(line.file)
            elif line.file not in self.files:
                self.files_capped = True
        if line.actor.startswith("reflection:"):
            approvals = self.reflections.setdefault(line.actor, [])
            if line.approval not in approvals:
                approvals.append(line.approval)
        if line.actor.startswith("dream:") and line.actor not in self.dream_runs:
            self.dream_runs.append(line.actor)
        self.alerts += line.action == "ALERT"
        self.decay += line.action == "DECAY"
        self.archive += line.action == "ARCHIVE"
        if _notable(line):
            if len(self.notable) < NOTABLE_PER_MONTH:
                summary = clean_field(line.summary, 120)
                where = clean_field(line.file, 120)
                self.notable.append(f"{line.time.date().isoformat()}: {line.action} {where} — {summary}")
            else:
                self.notable_more += 1


def _notable(line: AuditLine) -> bool:
    """What a digest names one by one: new procedures, alerts, reverts, merges."""
    return line.action in ("ALERT", "REVERT", "MERGE") or (
        line.action == "CREATE" and line.file.startswith("procedures/")
    )


@dataclass
class ArchiveState:
    folded_before: datetime | None = None  # every line older than this has been counted
    months: dict[str, MonthDigest] = field(default_factory=dict)  # "2026-01" -> its digest


@dataclass(frozen=True)
class FoldResult:
    dropped: int  # lines removed from the log
    counted: int  # lines newly counted in the digests (fewer after a crash: those were counted before)
    months: list[str]  # the months they were counted in


RETENTION = "system:retention"


def fold_old_lines(settings: Settings, audit_log: AuditLog, now: datetime) -> FoldResult:
    """Fold the log's lines older than `audit_retention_days` into the monthly digests, then drop them from the
    log (see the module docstring); CorruptEntryError when the digests' state cannot be read (nothing is
    dropped then), OSError when a write fails."""
    cutoff = now - timedelta(days=settings.audit_retention_days)
    documents = DigestDocuments(settings)
    state = _load_state(documents)
    counted: list[AuditLine] = []

    def keep(lines: list[AuditLine]) -> list[AuditLine]:
        nonlocal state
        old = [line for line in lines if line.time < cutoff]
        if not old:
            return lines
        # Read again under the log's lock: another fold (a dream elsewhere, `audit prune`) may have saved since,
        # and saving the state read before would drop its counts along with the lines it already removed.
        state = _load_state(documents)
        known = state.folded_before
        new = [line for line in old if known is None or line.time >= known]
        counted.extend(new)
        for line in new:
            state.months.setdefault(line.time.strftime("%Y-%m"), MonthDigest()).add(line)
        state.folded_before = cutoff if known is None else max(known, cutoff)
        _save(state, documents, settings.audit_retention_days)  # before the lines leave the log
        return [line for line in lines if line.time >= cutoff]

    dropped = audit_log.rewrite(keep, older_than=cutoff)
    if dropped:  # the digest changed: its own line, so the history commits it (the state file is bookkeeping)
        summary = f"folded {dropped} line(s) older than {settings.audit_retention_days} days into the monthly digests"
        audit_log.append(
            [AuditLine(now, "EDIT", f"meta/{ARCHIVE_NAME}", current_actor() or RETENTION, "auto", summary)]
        )
    if not dropped and state.months:  # a crash between the state and the markdown: render it again
        _render_if_stale(state, documents, settings.audit_retention_days)
    months = sorted({line.time.strftime("%Y-%m") for line in counted})
    return FoldResult(dropped=dropped, counted=len(counted), months=months)


def fold_quietly(settings: Settings, audit_log: AuditLog, now: datetime) -> FoldResult | None:
    """`fold_old_lines` for maintenance (the dream): a failure is logged, and the next run tries again."""
    try:
        result = fold_old_lines(settings, audit_log, now)
    except (OSError, RockmemError) as exc:
        log.warning("audit retention: old lines were not folded (%s); the next run tries again", exc)
        return None
    if result.dropped:
        log.info("audit retention: %d old line(s) folded into %s", result.dropped, ARCHIVE_NAME)
    return result


_NOTABLE = re.compile(r"^\d{4}-\d{2}-\d{2}: [A-Z]+ (.+?) — ")  # "DAY: ACTION FILE — SUMMARY"


def redact_digests(settings: Settings, audit_log: AuditLog, redaction: Redaction) -> int:
    """A permanently removed item's text out of the digests' notable events too (they quote summaries, e.g. a
    procedure's name): the events about its files are redacted as its audit lines are. Done under the lock folds
    take (inside the log's `rewrite`, which keeps every line), so a fold meanwhile neither loses this nor is lost;
    returns how many events changed (none when there are no digests)."""
    documents = DigestDocuments(settings)
    changed = 0
    try:
        documents.read(STATE_NAME)
    except FileNotFoundError:  # no digests yet (most homes for 90 days): no lock, no read of the log
        return 0

    def keep(lines: list[AuditLine]) -> list[AuditLine]:
        nonlocal changed
        try:
            state = _load_state(documents)
        except CorruptEntryError as exc:  # retention says so itself; nothing here to redact then
            log.warning("audit digests not redacted: %s", exc)
            return lines
        for digest in state.months.values():
            for i, event in enumerate(digest.notable):
                about = _NOTABLE.match(event)
                if about is not None and redaction.covers(about.group(1)):
                    redacted = redaction.text(event)
                    changed += redacted != event
                    digest.notable[i] = redacted
        if changed:
            _save(state, documents, settings.audit_retention_days)
        return lines

    audit_log.rewrite(keep, older_than=datetime.fromtimestamp(0, UTC))  # a database's trail: no line read
    return changed


# ---------------------------------------------------------------------- the state and its markdown
class DigestDocuments:
    """Where the digests are kept: the home's meta folder, or rows of the database's `documents` table when the
    store is one (one trail, so one digest; written inside the trail's rewrite transaction: the same connection,
    a savepoint of it, so the digest and the lines it counted change together)."""

    def __init__(self, settings: Settings) -> None:
        self.meta = settings.meta_dir
        self.db = None
        if is_database_url(settings.store):
            from rockmem_mcp.storage.pg import shared_database

            self.db = shared_database(str(settings.store), "stores", settings.store_schema)

    def where(self, name: str) -> str:
        return f"meta/{name} in the store" if self.db is not None else str(self.meta / name)

    def read(self, name: str) -> bytes:
        """Its bytes; FileNotFoundError when there is none yet."""
        if self.db is None:
            return read_bytes(self.meta / name)
        rows = self.db.all("SELECT body FROM documents WHERE name = %s", (f"meta/{name}",))
        if not rows:
            raise FileNotFoundError(name)
        return bytes(rows[0][0])

    def write(self, name: str, data: bytes) -> None:
        if self.db is None:
            atomic_write(self.meta / name, data)
            return
        with self.db.transaction() as cursor:
            cursor.execute(
                "INSERT INTO documents (name, body, version) VALUES (%s, %s, 1) ON CONFLICT (name) DO UPDATE"
                " SET body = EXCLUDED.body, version = documents.version + 1",
                (f"meta/{name}", data),
            )


def _load_state(documents: DigestDocuments) -> ArchiveState:
    try:
        raw = json.loads(documents.read(STATE_NAME))
        months = {key: MonthDigest(**{**value, "files": set(value["files"])}) for key, value in raw["months"].items()}
        folded_before = parse_time(raw["folded_before"]) if raw.get("folded_before") else None
    except FileNotFoundError:
        return ArchiveState()
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise CorruptEntryError(
            f"{documents.where(STATE_NAME)} cannot be read ({type(exc).__name__}); audit lines are not folded until "
            "it is fixed or moved away (moving it away starts the digests anew)"
        ) from None
    return ArchiveState(folded_before, months)


def _save(state: ArchiveState, documents: DigestDocuments, days: int) -> None:
    raw = {
        "version": 1,
        "folded_before": format_time(state.folded_before) if state.folded_before else None,
        "months": {
            key: {**asdict(digest), "files": sorted(digest.files)} for key, digest in sorted(state.months.items())
        },
    }
    documents.write(STATE_NAME, (json.dumps(raw, ensure_ascii=False, indent=1) + "\n").encode("utf-8"))
    documents.write(ARCHIVE_NAME, render(state, days).encode("utf-8"))


def _render_if_stale(state: ArchiveState, documents: DigestDocuments, days: int) -> None:
    text = render(state, days).encode("utf-8")
    try:
        if documents.read(ARCHIVE_NAME) == text:
            return
    except FileNotFoundError:
        pass
    documents.write(ARCHIVE_NAME, text)


def _s(n: int) -> str:
    return "" if n == 1 else "s"


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}{_s(n)}"


def render(state: ArchiveState, days: int) -> str:
    """The digests in the seed's format, oldest month first."""
    parts = [
        f"<!-- Written by rockmem from {STATE_NAME}: audit lines older than {days} days, folded out of "
        "audit.log month by month. Edits here are overwritten; git keeps every change. -->\n"
    ]
    for key, digest in sorted(state.months.items()):
        year, month = key.split("-")
        files = f"{len(digest.files):,}{'+' if digest.files_capped else ''}"
        sessions = [set(approvals) for approvals in digest.reflections.values()]
        approved = sum(1 for s in sessions if s == {"approved"})
        rejected = sum(1 for s in sessions if s == {"rejected"})
        partial = len(sessions) - approved - rejected
        runs = len(digest.dream_runs)
        notable = [f"- {line}" for line in digest.notable] or ["- none"]
        if digest.notable_more:
            notable.append(f"- … and {digest.notable_more} more (see git history)")
        parts.append(
            "\n".join(
                [
                    f"# Audit Digest — {MONTHS[int(month) - 1]} {year}",
                    "",
                    "## Summary",
                    f"- {_count(digest.mutations, 'total mutation')} across {files} file{_s(len(digest.files))}",
                    f"- {_count(len(sessions), 'reflection session')} ({approved} approved, {partial} partial, "
                    f"{rejected} rejected), {_count(runs, 'dream run')}",
                    f"- {_count(digest.alerts, 'critical file change')}",
                    f"- {_count(digest.decay, 'decay transition')}, {_count(digest.archive, 'archival event')}",
                    "",
                    "## Notable Events",
                    *notable,
                    "",
                ]
            )
        )
    return "\n".join(parts)
