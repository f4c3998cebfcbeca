"""Reading the audit trail (seed 004 §12.7): lines filtered by file or id, action, actor and time, and the
history of one item — every version in the home's git history with who changed it and why."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from rockmem_mcp.audit.line_index import file_key, item_keys
from rockmem_mcp.audit.log import ACTIONS, AuditLine
from rockmem_mcp.audit.service import Audit
from rockmem_mcp.audit.shapes import AuditEntry, AuditResult, AuditVersion
from rockmem_mcp.errors import InvalidInputError, NotFoundError

if TYPE_CHECKING:  # history imports this module's neighbours; only its type is needed here
    from rockmem_mcp.governance.history import GitHistory

TEXT_CHARS = 2_000
_AGE = re.compile(r"(\d{1,6})([mhd])")
_AGE_UNITS = {"m": "minutes", "h": "hours", "d": "days"}
_STORE_PREFIX = re.compile(r"^(memory|episode|procedure|entity|triple|core):")


def parse_moment(text: str, now: datetime, what: str = "time") -> datetime:
    """An ISO time with its zone (2026-11-24T18:00Z), a day (2026-11-24, its start in UTC), or an age
    (30m, 2h, 3d: that long before `now`)."""
    text = text.strip()
    if age := _AGE.fullmatch(text):
        return now - timedelta(**{_AGE_UNITS[age.group(2)]: int(age.group(1))})
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise InvalidInputError(
            f"{what}={text!r} is not a time: use an ISO time like 2026-11-24T18:00Z, a day like 2026-11-24, "
            "or an age like 30m, 2h, 3d"
        ) from None
    if moment.tzinfo is None:
        if len(text) == 10:  # a day
            return moment.replace(tzinfo=UTC)
        raise InvalidInputError(f"{what}={text!r} has no time zone: add Z for UTC, e.g. 2026-11-24T18:00Z")
    return moment.astimezone(UTC)


def entry_of(line: AuditLine) -> AuditEntry:
    return AuditEntry(
        time=line.time,
        action=line.action,
        file=line.file,
        actor=line.actor,
        approval=line.approval,
        summary=line.summary,
    )


def parse_actions(action: str | None) -> set[str] | None:
    if not action:
        return None
    wanted = {word.strip().upper() for word in action.split(",") if word.strip()}
    unknown = wanted - set(ACTIONS)
    if unknown:
        raise InvalidInputError(f"unknown action {', '.join(sorted(unknown))}: use any of {', '.join(ACTIONS)}")
    return wanted


def actor_matches(actor: str, wanted: str) -> bool:
    """`dream` matches every dream run (dream:…); `dream:d-1` only that one; a trailing * is a prefix."""
    wanted = wanted.rstrip("*").rstrip(":") if wanted.endswith("*") else wanted
    return actor == wanted or actor.startswith(wanted + ":")


def names_item(file: str, item: str) -> bool:
    """Whether `file` is the item's file: the item is the file, or its name without extension."""
    if file == item:
        return True
    name = file.rsplit("/", 1)[-1]
    return name.rsplit(".", 1)[0] == item


class AuditTrail:
    def __init__(self, audit: Audit, history: GitHistory | None = None) -> None:
        self.audit = audit
        self.history = history

    def entries(
        self,
        file: str | None = None,
        action: str | None = None,
        actor: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int = 50,
    ) -> list[AuditEntry]:
        """Matching lines, newest first. `file` is a path or part of one (a memory's id finds its file)."""
        if limit < 1:
            raise InvalidInputError("limit must be at least 1")
        if since and until and since > until:
            raise InvalidInputError("since is after until: nothing can match")
        actions = parse_actions(action)
        found: list[AuditEntry] = []
        for line in self.audit.log.newest_first():  # stops at `limit`: the latest lines cost what they did at 200
            if since and line.time < since:
                continue
            if until and line.time > until:
                continue
            if actions and line.action not in actions:
                continue
            if actor and not actor_matches(line.actor, actor):
                continue
            if file and file not in line.file and file not in line.summary:
                continue
            found.append(entry_of(line))
            if len(found) >= limit:
                break
        return found

    def files_of(self, item: str) -> list[str]:
        """The files an item lived in, newest first: a path as given, or an id's files (a memory that moved
        has two) as the audit lines name them (the audit index's: the log is not read)."""
        item = _STORE_PREFIX.sub("", item.strip())
        if not item:
            raise InvalidInputError("name a memory id, an entity or procedure id, or a file path")
        files: dict[str, None] = {}
        for file, named_by in self.audit.index.files(item_keys(item)):  # a line's file, and where it moved from
            if names_item(named_by, item):
                files.setdefault(file, None)
        if not files and ("/" in item or item.endswith((".md", ".json", ".jsonl"))):
            files.setdefault(item, None)
        stores = {file.split("/", 1)[0] for file in files}
        if len(stores) > 1:  # e.g. a day: its episode log and its feedback log
            listed = ", ".join(list(files)[:10])
            raise InvalidInputError(f"{item!r} names files in several stores ({listed}): name one by its path")
        return list(files)

    def item_history(self, item: str, limit: int = 20) -> AuditResult:
        """Every version of an item, newest first, each with who changed it and why; without git, its lines."""
        files = self.files_of(item)
        named = set(files)
        found = self.audit.index.find({file_key(file) for file in files}, lambda line: line.file in named, limit)
        entries = [entry_of(hit.line) for hit in found]
        history = self.history
        if history is None or not history.available:
            if not entries:
                raise NotFoundError(f"nothing in the audit trail names {item!r}; check the id (search_memory)")
            note = "git is not available here: versions are not kept"
            if history is not None and history.shared:
                note = "the store is a database: versions are not kept here (its backups are the history)"
            return AuditResult(entries=entries, note=note)
        history.flush()  # the newest change is then a version too
        versions = []
        for file in files:
            for version in history.versions(file, limit):
                text = None if version.deleted else _text(history.read(version.commit, file))
                changes = [entry_of(line) for line in version.lines]
                versions.append(
                    AuditVersion(
                        commit=version.commit,
                        time=version.time,
                        file=file,
                        deleted=version.deleted,
                        text=text,
                        changes=changes,
                    )
                )
        if not versions and not entries:
            raise NotFoundError(f"nothing in the history names {item!r}; check the id (search_memory)")
        versions.sort(key=lambda v: v.time, reverse=True)
        return AuditResult(entries=entries, versions=versions[:limit])


def _text(data: bytes | None) -> str | None:
    """What a version says: a memory's content, or the file's text."""
    if data is None:
        return None
    text = data.decode("utf-8", "replace")
    try:
        body = json.loads(text)
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("content"), str):
        text = body["content"]
    return text if len(text) <= TEXT_CHARS else text[: TEXT_CHARS - 1] + "…"
