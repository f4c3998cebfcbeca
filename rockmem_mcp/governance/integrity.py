"""Critical-file alerts (seed 004 §12.5): SOUL.md, IDENTITY.md, MEMORY.md, AGENTS.md, triggers.json (the setting
`critical_files`, relative to the home) are watched by checksum.

`meta/critical-files.json` keeps each file's SHA-256 as the server last knew it (a file that is not there is a
state of its own), with its text when small, so a change can be summarised in lines added and removed. At the
server's start `check` compares: a file created, edited or removed since (by hand, by another program) logs
an EDIT/CREATE/DELETE line with actor `manual` and an ALERT line, and becomes a pending alert in
`meta/alerts.json`. The server's own writes (core memory, workspace files) call `written`, which records the
new checksum; a write by an actor that may not change critical files (anything but main and its bot:… tags,
manual and an approved reflection) raises an alert at once. Pending alerts head every session's first recall until
acknowledged (`rockmem-mcp alerts --ack`, or the audit tool's `acknowledge` on the user's answer): only the
main agent may acknowledge, so a sub-agent cannot clear the alert its own write raised.

The first check of a home records without alerting (nothing is known to compare with). Every read-modify-write
of the record and the alerts is under `meta/critical-files.lock` (processes and threads alike).
"""

from __future__ import annotations

import difflib
import hashlib
import json
import logging
import secrets
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path, PurePosixPath
from typing import Literal

from rockmem_mcp.audit.log import NO_APPROVAL, AuditLine, clean_field, format_time, parse_time
from rockmem_mcp.audit.service import AUTO_DETECT, MANUAL, TRIGGER_REMEMBER, Audit
from rockmem_mcp.config import Settings
from rockmem_mcp.errors import CorruptEntryError, LinkRefusedError, NotFoundError, RefusedFileError, RockmemError
from rockmem_mcp.models import utc_now
from rockmem_mcp.storage.atomic import atomic_write
from rockmem_mcp.storage.edited_files import held
from rockmem_mcp.storage.no_follow import read_bytes
from rockmem_mcp.storage.pg import is_database_url

log = logging.getLogger(__name__)

RECORD_NAME = "critical-files.json"
ALERTS_NAME = "alerts.json"
LOCK_NAME = "critical-files.lock"
AUDIT_ACTOR = "system:audit"
OUTSIDE_SUMMARY = "⚠️ CRITICAL: changed outside the server"
ALERT_SUMMARY = "Critical file change detected. Pending user acknowledgment."
ACKNOWLEDGE = "rockmem-mcp alerts --ack"
SNAPSHOT_BYTES = 64_000  # a file's text is kept for the diff summary up to this size (SOUL.md is a few kB)
CHECK_WAIT_SECONDS = 5.0  # how long a first recall waits for the start's check (it takes milliseconds)
SHOWN_ALERTS = 5  # in a recall; the rest are counted
KEPT_ACKNOWLEDGED = 50  # acknowledged alerts kept in alerts.json as history (pending ones are never dropped)


@dataclass(frozen=True)
class FileState:
    sha256: str | None  # None: no file there; "refused: …" for a link or special file in its place
    text: str | None = None  # the text for the diff summary (None when too large or not UTF-8)


@dataclass
class Alert:
    id: str
    time: datetime
    file: str  # relative to the home
    summary: str  # what happened, after "FILE was": "changed outside the server", "written by subagent:x, …"
    change: str = ""  # "3 lines added, 1 removed"
    acknowledged: bool = False
    sha256: str | None = None  # the state the alert is about (a check re-run after a crash adds it once)

    def line(self) -> str:
        """The recall's line: short, every field from the disk or a namespace cleaned to printable text."""
        change = f" ({clean_field(self.change, 80)})" if self.change else ""
        return (
            f"⚠️ Heads up — {clean_field(self.file, 80)} was {clean_field(self.summary, 120)} on "
            f"{self.time.date().isoformat()}{change}. Was this intentional? Ask the user; on their answer, "
            f'acknowledge it: audit(acknowledge=["{self.id}"]) or `{ACKNOWLEDGE} {self.id}`.'
        )


def allowed(actor: str, approval: str) -> bool:
    """Who may change a critical file (seed 004 §12.5): the main agent (its bot:… tags too: only its process
    writes them), a person, an approved reflection."""
    main_agent = ("main", TRIGGER_REMEMBER, AUTO_DETECT)
    return actor in (*main_agent, MANUAL) or (actor.startswith("reflection:") and approval == "approved")


def _lines(n: int) -> str:
    return f"{n} line{'' if n == 1 else 's'}"


def change_summary(before: FileState, after: FileState) -> str:
    """A short account of the change: lines added and removed when both texts are known."""
    if before.sha256 is None:
        return "new file" + (f", {_lines(len(after.text.splitlines()))}" if after.text is not None else "")
    if after.sha256 is None:
        return "removed" + (f"; it had {_lines(len(before.text.splitlines()))}" if before.text is not None else "")
    if after.sha256.startswith("refused:"):
        return "now " + after.sha256.removeprefix("refused: ")
    if before.text is None or after.text is None:
        return "content changed (too large or not text to compare by line)"
    added = removed = 0
    old, new = before.text.splitlines(), after.text.splitlines()
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if tag != "equal":
            removed += i2 - i1
            added += j2 - j1
    if not added and not removed:
        return "no line changed (spacing or line endings)"
    return f"{_lines(added)} added, {removed} removed"


def state_of(data: bytes) -> FileState:
    text = None
    if len(data) <= SNAPSHOT_BYTES:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            text = None
    return FileState(hashlib.sha256(data).hexdigest(), text)


class CriticalFiles:
    def __init__(self, settings: Settings, audit: Audit, clock: Callable[[], datetime] = utc_now) -> None:
        self.settings = settings
        self.audit = audit
        self._clock = clock
        self.record_path = settings.meta_dir / RECORD_NAME
        self.alerts_path = settings.meta_dir / ALERTS_NAME
        self._lock_path = settings.meta_dir / LOCK_NAME
        self.paths: dict[str, Path] = {}
        shared_core = is_database_url(settings.store)  # MEMORY.md is a row: nothing on disk to change by hand
        for name in settings.critical_files:
            if shared_core and name == "MEMORY.md":
                continue
            parts = PurePosixPath(name.replace("\\", "/")).parts
            if not parts or parts[0] == "/" or ".." in parts:
                log.warning("critical file %r is not a path inside the home; it is not watched", name)
                continue
            self.paths["/".join(parts)] = settings.home.joinpath(*parts)
        self._by_path = {path: name for name, path in self.paths.items()}
        self._checked = threading.Event()
        self._checked.set()  # no check under way: a recall does not wait

    # ------------------------------------------------------------------ the start's check
    def start_check(self) -> threading.Thread:
        """Run `check` in a background thread; a session's first recall waits for it (CHECK_WAIT_SECONDS at
        most), so an alert found at start heads it. A check that fails is logged, never raised."""
        self._checked.clear()  # before the thread starts: a recall right after this already waits

        def run() -> None:
            try:
                found = self.check()
                if found:
                    log.warning("critical files changed outside the server: %s", ", ".join(a.file for a in found))
            except (OSError, RockmemError) as exc:
                log.warning("critical-file check failed (%s); it runs again at the next start", exc)
            finally:
                self._checked.set()

        thread = threading.Thread(target=run, name="rockmem-critical-files", daemon=True)
        thread.start()
        return thread

    def check(self) -> list[Alert]:
        """Compare every critical file with the record; each change since becomes an audit EDIT/CREATE/DELETE
        line (actor manual), an ALERT line and a pending alert, and the record is brought up to date. A home
        with no record yet is recorded, with no alert. Returns the alerts raised."""
        with held(self._lock_path):
            record, problem = self._load_record()
            current = {name: state for name in self.paths if (state := self._state(name)) is not None}
            raised: list[Alert] = []
            actions: dict[str, str] = {}  # file -> the audit action of its change
            if problem is not None:  # a record nobody can read could hide a change: say so, and start anew
                raised.append(self._alert(f"meta/{RECORD_NAME}", f"unreadable ({problem}) and recorded anew", ""))
            elif record is not None:
                for name, now in current.items():
                    before = record.get(name)
                    if before is None or before.sha256 == now.sha256:
                        continue  # unchanged, or newly configured (nothing to compare with)
                    action = "CREATE" if before.sha256 is None else "DELETE" if now.sha256 is None else "EDIT"
                    verb = {"CREATE": "created", "DELETE": "removed", "EDIT": "changed"}[action]
                    actions[name] = action
                    change = change_summary(before, now)
                    raised.append(self._alert(name, f"{verb} outside the server", change, now.sha256))
            raised = self._add_alerts(raised)
            lines: list[AuditLine] = []
            for alert in raised:
                if alert.file in actions:  # the change's own line, as the seed writes a hand edit's
                    lines.append(self.audit.line(actions[alert.file], alert.file, OUTSIDE_SUMMARY, NO_APPROVAL, MANUAL))
                lines.append(self._alert_line(alert))
            self.audit.record_many(lines)
            kept = {**(record or {}), **current}
            kept = {name: state for name, state in kept.items() if name in self.paths}
            if kept != record:
                self._save_record(kept)
            return raised

    def _state(self, name: str) -> FileState | None:
        """The file's state now; None when it cannot be told this time (e.g. no permission): it is left out."""
        try:
            return state_of(read_bytes(self.paths[name]))
        except FileNotFoundError:
            return FileState(None)
        except RefusedFileError as exc:  # a link or FIFO planted in its place is a change too
            return FileState("refused: a symbolic link" if isinstance(exc, LinkRefusedError) else "refused: not a file")
        except OSError as exc:
            log.warning("critical file %s cannot be read (%s); not checked this time", name, exc)
            return None

    # ------------------------------------------------------------------ the server's own writes
    def written(self, path: Path, data: bytes | None) -> None:
        """Called after the server wrote `data` to `path` (a no-op for a file that is not critical): the record
        takes the new checksum, and a write by an actor that may not change critical files raises an alert at
        once. Never raises: the write is done; a failure here is logged (the next check then alerts)."""
        name = self._by_path.get(path)
        if name is None:
            return
        try:
            with held(self._lock_path):
                record, _ = self._load_record()
                record = record or {}
                before = record.get(name, FileState(None))
                now = state_of(data) if data is not None else FileState(None)  # None: removed
                probe = self.audit.line("EDIT", path, "")  # the actor and approval the change is logged with
                if not allowed(probe.actor, probe.approval):
                    what = f"written by {probe.actor}, which may not change critical files"
                    for alert in self._add_alerts([self._alert(name, what, change_summary(before, now), now.sha256)]):
                        self.audit.record_many([self._alert_line(alert)])
                self._save_record({**record, name: now})
        except (OSError, RockmemError) as exc:
            log.warning("critical file %s: the new checksum was not recorded (%s)", name, exc)

    # ------------------------------------------------------------------ alerts
    def pending(self) -> list[Alert]:
        return [alert for alert in self._load_alerts() if not alert.acknowledged]

    def acknowledge(self, ids: Sequence[str] | Literal["all"]) -> list[Alert]:
        """Mark pending alerts acknowledged (`"all"`, or by id); NotFoundError names an id that is not pending.
        Logs one EDIT line on meta/alerts.json; returns the alerts acknowledged."""
        with held(self._lock_path):
            alerts = self._load_alerts()
            pending = {alert.id: alert for alert in alerts if not alert.acknowledged}
            chosen = list(pending) if ids == "all" else list(dict.fromkeys(ids))
            unknown = [i for i in chosen if i not in pending]
            if unknown:
                listed = ", ".join(pending) or "none"
                raise NotFoundError(f"no pending alert {', '.join(unknown)}; pending: {listed} (rockmem-mcp alerts)")
            if not chosen:
                return []
            for alert_id in chosen:
                pending[alert_id].acknowledged = True
            self._save_alerts(alerts)
            self.audit.record("EDIT", self.alerts_path, f"acknowledged {len(chosen)} alert(s)")
            return [pending[i] for i in chosen]

    def session_lines(self) -> list[str]:
        """What heads a session's first recall while alerts are pending (waits for the start's check first)."""
        if not self._checked.wait(CHECK_WAIT_SECONDS):
            log.warning("critical-file check still running after %gs: recall goes on without it", CHECK_WAIT_SECONDS)
        pending = self.pending()
        lines = [alert.line() for alert in pending[:SHOWN_ALERTS]]
        if len(pending) > SHOWN_ALERTS:
            more = len(pending) - SHOWN_ALERTS
            lines.append(f"⚠️ … and {more} more pending critical-file alert(s): `rockmem-mcp alerts` lists them.")
        return lines

    def _alert(self, file: str, summary: str, change: str, sha256: str | None = None) -> Alert:
        return Alert(secrets.token_hex(4), self._clock(), file, summary, change, False, sha256)

    def _alert_line(self, alert: Alert) -> AuditLine:
        detail = f"{alert.file} {alert.summary}" if not alert.summary.endswith("outside the server") else ""
        text = " ".join(part for part in (ALERT_SUMMARY, detail, f"({alert.change})" if alert.change else "") if part)
        return self.audit.line("ALERT", alert.file, text, NO_APPROVAL, AUDIT_ACTOR)

    def _add_alerts(self, new: Iterable[Alert]) -> list[Alert]:
        """Store `new` alerts as pending (call under the lock); one already pending for the same file, state
        and summary is not added twice. Returns those added."""
        new = list(new)
        if not new:
            return []
        alerts = self._load_alerts()
        known = {(a.file, a.sha256, a.summary) for a in alerts if not a.acknowledged}
        added = [a for a in new if (a.file, a.sha256, a.summary) not in known]
        if added:
            self._save_alerts(alerts + added)
        return added

    # ------------------------------------------------------------------ files
    def _load_record(self) -> tuple[dict[str, FileState] | None, str | None]:
        """The record (None: none yet) and, when it cannot be read, why."""
        try:
            raw = json.loads(read_bytes(self.record_path))
            files = raw["files"]
            return {name: FileState(state.get("sha256"), state.get("text")) for name, state in files.items()}, None
        except FileNotFoundError:
            return None, None
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            return None, type(exc).__name__

    def _save_record(self, record: dict[str, FileState]) -> None:
        files = {name: asdict(state) for name, state in sorted(record.items())}
        data = json.dumps({"version": 1, "files": files}, ensure_ascii=False, indent=1) + "\n"
        atomic_write(self.record_path, data.encode("utf-8"))

    def _load_alerts(self) -> list[Alert]:
        """The alerts file's alerts; an unreadable file raises (a pending alert must not vanish silently)."""
        try:
            raw = json.loads(read_bytes(self.alerts_path))
        except FileNotFoundError:
            return []
        except ValueError as exc:
            raise CorruptEntryError(
                f"{self.alerts_path} is not valid JSON ({exc}); fix it or move it away (its alerts are then lost)"
            ) from None
        alerts = []
        for item in raw.get("alerts", []) if isinstance(raw, dict) else []:
            moment = parse_time(str(item.get("time", "")))
            if moment is None or not isinstance(item.get("id"), str):
                continue
            alerts.append(
                Alert(
                    item["id"],
                    moment,
                    str(item.get("file", "")),
                    str(item.get("summary", "")),
                    str(item.get("change", "")),
                    bool(item.get("acknowledged", False)),
                    item.get("sha256"),
                )
            )
        return alerts

    def _save_alerts(self, alerts: list[Alert]) -> None:
        done = [a for a in alerts if a.acknowledged]
        dropped = {id(a) for a in done[: max(len(done) - KEPT_ACKNOWLEDGED, 0)]}  # the oldest acknowledged
        items = [{**asdict(a), "time": format_time(a.time)} for a in alerts if id(a) not in dropped]
        data = json.dumps({"version": 1, "alerts": items}, ensure_ascii=False, indent=1) + "\n"
        atomic_write(self.alerts_path, data.encode("utf-8"))
