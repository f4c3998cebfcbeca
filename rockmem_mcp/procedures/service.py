"""The procedural store (seed 004 §7): learned workflows — when one applies (trigger phrases), what to do (ordered
steps), notes, and where it was learned (episode or memory ids, or free text).

Each procedure is one JSON file, `procedures/{slug}.json` (procedures/files.py); its readable view is the
seed's markdown, made on demand (`markdown`). An update keeps the version it replaces in the file's `history`
(the newest within MAX_HISTORY_BYTES; how many older ones were dropped is counted). Writers take the store's
cross-process lock and read the file fresh under it, so no update is lost, and an update naming the version it
read is refused if another came first.

Finding one:
- `search`: BM25 over name, trigger, steps and notes, times salience's ranking factor (type weight
  "procedural"); dormant and archived procedures only when asked for.
- `matching` (what recall offers): a procedure matches a message when every searchable word of one of its
  trigger phrases (as `tokenize` makes them: stemmed, stopwords dropped) is among the message's words; the
  longer the matched phrase, the stronger, times the ranking factor. A trigger match is an explicit ask, so
  dormant procedures are offered too; archived ones and archive candidates are not. What is offered is
  reinforced (kind "procedure" in the access log).

The in-memory index follows the folder: each read of the store lists it and lstats each file (tens of
microseconds for a few hundred procedures) and re-reads only files whose identity changed, so another
process's save is seen by the next call.
"""

from __future__ import annotations

import builtins
import difflib
import logging
import re
import threading
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from rockmem_mcp.audit.service import Audit, quoted
from rockmem_mcp.config import Settings
from rockmem_mcp.errors import ChangedSinceReadError, InvalidInputError, NotFoundError, RefusedFileError, RockmemError
from rockmem_mcp.models import ProcedureInfo, check_reason, check_text, normalize_name, utc_now
from rockmem_mcp.procedures.files import Identity, ProcedureFiles
from rockmem_mcp.procedures.shapes import (
    MAX_LINKS,
    MAX_NOTE_CHARS,
    MAX_NOTES,
    MAX_STEP_CHARS,
    MAX_STEPS,
    MAX_TRIGGERS,
    Procedure,
    ProcedureVersion,
    procedure_slug,
)
from rockmem_mcp.reinforcement import Reinforcer, open_access_log
from rockmem_mcp.search.bm25 import BM25Index
from rockmem_mcp.search.salience import (
    ARCHIVE_CANDIDATE,
    DORMANT,
    TYPE_WEIGHTS,
    ranking_factor,
    salience_of,
    tier,
    tier_counts,
)
from rockmem_mcp.search.tokenizer import tokenize
from rockmem_mcp.storage.access_log import uses_of, with_uses
from rockmem_mcp.storage.pg import is_database_url
from rockmem_mcp.text import clean, visible

log = logging.getLogger(__name__)

PROCEDURE = "procedure"  # the kind of item in the access log
TYPE_WEIGHT = TYPE_WEIGHTS["procedural"]
MAX_HISTORY_BYTES = 256 * 1024  # earlier versions kept per procedure, as JSON: the newest that fit
OFFER_STEP_CHARS = 300  # the steps a recall offer quotes, in all
OFFER_TRIGGER_CHARS = 120
URI = "rockmem://procedures"
_SLUG = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # C0 but newline and tab, DEL, C1
_SETEXT = re.compile(r"[ \t]*(=+|-+)[ \t]*")  # under a line of text, a heading (setext underline)

Loaded = Procedure | RockmemError | OSError  # a file's procedure, or why it could not be read


class Procedures:
    def __init__(
        self, settings: Settings, reinforcer: Reinforcer | None = None, clock: Callable[[], datetime] = utc_now
    ) -> None:
        """`reinforcer`: the memory store's (one per process); without one the store opens its own."""
        self.settings = settings
        where = (settings.home, settings.procedures_dir, settings.meta_dir / "procedures.lock")
        if is_database_url(settings.store):  # replicas share one set of procedures
            from rockmem_mcp.procedures.postgres import PgProcedureRows
            from rockmem_mcp.storage.pg import shared_database

            db = shared_database(str(settings.store), "stores", settings.store_schema)
            self.files: ProcedureFiles = PgProcedureRows(db, *where)
        else:
            self.files = ProcedureFiles(*where)
        self.audit = Audit(settings)  # stamped by the wall clock: a store's own clock is its records' time
        self._clock = clock
        self._owns_reinforcer = reinforcer is None
        self.reinforcer = reinforcer or Reinforcer(settings, open_access_log(settings), clock)
        if self._owns_reinforcer:
            self.reinforcer.start()
        self._lock = threading.Lock()
        self._loaded: dict[str, tuple[Identity, Loaded]] = {}  # file stem -> what its file held at that identity
        self._index = BM25Index()
        self._triggers: dict[str, list[frozenset[str]]] = {}  # slug -> each trigger phrase's words

    def close(self) -> None:
        if self._owns_reinforcer:
            self.reinforcer.close()

    # ------------------------------------------------------------------ writes
    def save(
        self,
        name: str,
        trigger: list[str],
        steps: list[str],
        notes: list[str] | None = None,
        learned_from: list[str] | None = None,
        reason: str | None = None,
        version: int | None = None,
    ) -> Procedure:
        """Create a procedure, or update the one with this name (any spelling with the same slug), keeping the
        version it replaces in its history. `version`: the version read (0: only create); refused with
        ChangedSinceReadError if the procedure is at another one now. Saving an archived procedure restores it."""
        name = normalize_name(name, "procedure name")
        slug = procedure_slug(name)
        fields = self._checked(name, trigger, steps, notes, learned_from)
        fields["reason"] = None if reason is None else check_reason(reason)
        if version is not None and (isinstance(version, bool) or not isinstance(version, int) or version < 0):
            raise InvalidInputError(f"version must be the whole number you read (0: create only), got {version!r}")
        with self._lock, self.files.locked():
            current = self._read_for_write(slug)
            at = current.version if current else 0
            if version is not None and version != at:
                now_is = f"it is at version {at}" if at else "it does not exist now"
                raise ChangedSinceReadError(
                    f"procedure {name!r} changed since you read it (you had version {version}; {now_is}): read "
                    f"{URI}/{slug} again, apply your change to it, and save with the version it shows"
                )
            now = self._clock()
            on_disk = current
            if current is None:
                saved = Procedure(
                    name=name, slug=slug, created_at=now, updated_at=now, last_seen_at=now, **fields
                )  # fmt: skip
            else:
                current = with_uses(current, self.reinforcer.accesses(PROCEDURE).get(slug))
                earlier = ProcedureVersion(**current.model_dump(include=set(ProcedureVersion.model_fields)))
                history, dropped = capped_history([*current.history, earlier])
                saved = current.model_copy(
                    update={
                        **fields,
                        "updated_at": now,
                        "version": current.version + 1,
                        "history": history,
                        "history_dropped": current.history_dropped + dropped,
                        "archived_at": None,
                        "archive_reason": None,
                        "last_seen_at": now,
                        "reinforcement_count": current.reinforcement_count + 1,  # an update is a use
                    }
                )
            self._write(saved)
            why = f" ({saved.reason})" if saved.reason else ""
            if on_disk is None:
                self._audited("CREATE", None, saved, f"procedure {quoted(name)}, {len(saved.steps)} steps{why}")
            else:
                restored = "; restored from the archive" if on_disk.archived else ""
                what = f"procedure {quoted(name)} version {saved.version}, {len(saved.steps)} steps{why}{restored}"
                self._audited("EDIT", on_disk, saved, what)
        return saved

    def archive(self, name: str, reason: str | None = None) -> Procedure:
        """Hide a procedure from search and recall (kept on disk; `restore` brings it back). An archived one is
        returned as it is."""
        reason = None if reason is None else check_reason(reason)
        why = f" ({reason})" if reason else ""
        return self._change(
            name,
            lambda p: None if p.archived else {"archived_at": self._clock(), "archive_reason": reason},
            "ARCHIVE",
            lambda p: f"procedure {quoted(p.name)} archived{why}",
        )

    def restore(self, name: str) -> Procedure:
        """Bring an archived procedure back (one that is not archived is returned as it is)."""
        return self._change(
            name,
            lambda p: {"archived_at": None, "archive_reason": None} if p.archived else None,
            "EDIT",
            lambda p: f"procedure {quoted(p.name)} restored from the archive",
        )

    def delete(self, name: str, why: str | None = None) -> Procedure:
        """Remove a procedure's file for good, history and all (archive keeps it); returns what was removed."""
        with self._lock, self.files.locked():
            current = self._existing(name)
            self.files.remove(current.slug)
            self._forget(current.slug)
            because = f" ({why})" if why else ""
            self._audited("DELETE", current, None, f"procedure {quoted(current.name)} deleted for good{because}")
        return current

    def restore_records(self, records: Iterable[Procedure]) -> builtins.list[str]:
        """Write the procedures of a backup that are not here (by slug; those present are left as they are);
        every record is checked as `save` checks, before anything is written. Returns the names written."""
        checked = []
        for record in records:
            name = normalize_name(record.name, "procedure name")
            fields = self._checked(name, record.trigger, record.steps, record.notes, record.learned_from)
            for why in (record.reason, record.archive_reason, *(v.reason for v in record.history)):
                if why is not None:
                    check_reason(why)
            history, dropped = capped_history(record.history)
            fields.update(name=name, slug=procedure_slug(name), history=history)
            fields["history_dropped"] = record.history_dropped + dropped
            checked.append(record.model_copy(update=fields))
        written: builtins.list[Procedure] = []
        with self._lock, self.files.locked():
            present = set(self.files.identities())
            for record in checked:
                if record.slug not in present:
                    self._write(record)
                    present.add(record.slug)
                    written.append(record)

            def undo() -> None:
                for record in written:
                    self.files.remove(record.slug)
                    self._forget(record.slug)

            lines = [
                self.audit.line(
                    "CREATE", self.files.path_for(p.slug), f"procedure {quoted(p.name)} restored from a backup"
                )
                for p in written
            ]
            self.audit.record_many(lines, undo=undo)
        return [p.name for p in written]

    # ------------------------------------------------------------------ reads
    def get(self, name: str) -> Procedure:
        """The procedure with this name (or slug); NotFoundError naming near ones."""
        slug = procedure_slug(name)
        with self._lock:
            self._refresh()
            loaded = self._loaded.get(slug)
            if loaded is None:
                raise self._not_found(name, slug)
            found = loaded[1]
            if not isinstance(found, Procedure):
                raise found
            return self._with_uses(found)

    def list(self, include_archived: bool = False) -> builtins.list[Procedure]:
        """The procedures, by slug; archived ones only when asked for. Unreadable files are left out (see
        `problems`)."""
        return [p for p in self.records() if include_archived or not p.archived]

    def records(self) -> builtins.list[Procedure]:
        """Every readable procedure, archived ones included, by slug (for backups)."""
        with self._lock:
            self._refresh()
            return [self._with_uses(p) for _, p in sorted(self._procedures())]

    def problems(self) -> builtins.list[str]:
        """Procedure files that cannot be used: unreadable, invalid, links, special files, wrongly named."""
        return [str(error) for _, error in self.unusable()]

    def unusable(self) -> builtins.list[tuple[Path, RockmemError | OSError]]:
        """Each procedure file that cannot be used, with why."""
        with self._lock:
            self._refresh()
            return [
                (self.files.path_for(stem), found)
                for stem, (_, found) in sorted(self._loaded.items())
                if not isinstance(found, Procedure)
            ]

    def info(self, procedure: Procedure, done: str | None = None) -> ProcedureInfo:
        return ProcedureInfo(
            name=procedure.name,
            uri=f"{URI}/{procedure.slug}",
            trigger=procedure.trigger,
            version=procedure.version,
            updated_at=procedure.updated_at,
            archived=procedure.archived,
            earlier_versions=len(procedure.history),
            done=done,
        )

    # ------------------------------------------------------------------ finding
    def search(
        self, query: str, limit: int = 5, include_archived: bool = False
    ) -> builtins.list[tuple[float, Procedure]]:
        """The procedures best matching `query` (BM25 over name, trigger, steps and notes, times salience's
        ranking factor), best first; archived and dormant ones only with `include_archived`."""
        check_text(query, "query", self.settings.max_content_bytes, "ROCKMEM_MAX_CONTENT_BYTES", "Shorten it.")
        tokens = tokenize(query)
        if not tokens or limit < 1:
            return []
        with self._lock:
            self._refresh()
            hits = self._index.search(tokens, include_archived=include_archived, limit=max(len(self._index), 1))
            found = []
            for slot, score in zip(hits.slots.tolist(), hits.scores.tolist(), strict=True):
                loaded = self._loaded[self._index.keys[slot]][1]
                assert isinstance(loaded, Procedure)  # only readable procedures are indexed
                found.append((score, self._with_uses(loaded)))
        ranked = self._weighed(found, leave_out=() if include_archived else (DORMANT, ARCHIVE_CANDIDATE))
        return ranked[:limit]

    def matching(self, message: str, limit: int = 2) -> builtins.list[Procedure]:
        """The procedures a message calls for (see the module's docstring for the rule), best first, at most
        `limit`; each is reinforced."""
        words = set(tokenize(message))
        if not words or limit < 1:
            return []
        with self._lock:
            self._refresh()
            found = []
            for slug, phrases in self._triggers.items():
                procedure = self._loaded[slug][1]
                assert isinstance(procedure, Procedure)
                matched = [len(phrase) for phrase in phrases if phrase <= words]
                if matched and not procedure.archived:
                    found.append((float(max(matched)) + 0.01 * len(matched), self._with_uses(procedure)))
            chosen = [p for _, p in self._weighed(found, leave_out=(ARCHIVE_CANDIDATE,))[:limit]]
            if chosen:
                self.reinforcer.use(PROCEDURE, {p.slug: uses_of(p) for p in chosen})
        return chosen

    def offer_lines(self, message: str) -> builtins.list[str]:
        """One line per procedure the message calls for, for the recall block (see `offer_line`)."""
        return [offer_line(procedure) for procedure in self.matching(message)]

    def markdown(self, name: str) -> str:
        """The seed's readable view of a procedure. Stored text cannot forge a heading (a line starting with
        `#`, or a setext underline of `=` or `-`, is escaped with `\\`) nor a terminal control code."""
        p = self.get(name)
        last_used = datetime.fromtimestamp(uses_of(p).last, UTC).date()
        learned, version = p.created_at.date(), p.version
        lines = [
            f"# {p.name}",
            f"<!-- Type: procedure | Learned: {learned} | Last used: {last_used} | Version: {version} -->",
        ]
        if p.archived_at is not None:
            why = f": {_one_line(p.archive_reason)}" if p.archive_reason else ""
            lines.append(f"> Archived on {p.archived_at.date()}{why} (delete_procedure with restore brings it back)")
        lines += ["", "## Trigger", *_bullets(p.trigger)]
        lines += ["", "## Steps"]
        for n, step in enumerate(p.steps, start=1):
            first, *rest = _escaped(step).split("\n")
            lines += [f"{n}. {first}", *(f"   {line}" if line else "" for line in rest)]
        lines += ["", "## Notes", *_bullets(p.notes)]
        lines += ["", "## Learned From", *_bullets(p.learned_from)]
        lines += ["", "## History", f"- v{p.version} (current, {p.updated_at.date()}): {_why(p.reason)}"]
        lines += [f"- v{v.version} ({v.updated_at.date()}): {_why(v.reason)}" for v in reversed(p.history)]
        if p.history_dropped:
            cap = MAX_HISTORY_BYTES // 1024
            lines.append(f"- {p.history_dropped} older version(s) dropped to keep the history within {cap} KB")
        return visible("\n".join(lines) + "\n")

    # ------------------------------------------------------------------ internals (caller holds self._lock)
    def _change(
        self,
        name: str,
        update: Callable[[Procedure], dict[str, Any] | None],
        action: str,
        summary: Callable[[Procedure], str],
    ) -> Procedure:
        with self._lock, self.files.locked():
            current = self._existing(name)
            changes = update(current)
            if changes is None:
                return self._with_uses(current)
            changed = current.model_copy(update=changes)
            self._write(changed)
            self._audited(action, current, changed, summary(current))
        return self._with_uses(changed)

    def _audited(self, action: str, before: Procedure | None, after: Procedure | None, summary: str) -> None:
        """The change's audit line, after its file is in place (caller holds the locks); if the line cannot be
        written, the file goes back to `before` (None: no file) and the error is raised."""
        slug = (after or before).slug  # type: ignore[union-attr]

        def undo() -> None:
            if before is None:
                self.files.remove(slug)
                self._forget(slug)
            else:
                self._write(before)

        self.audit.record(action, self.files.path_for(slug), summary, undo=undo)

    def _existing(self, name: str) -> Procedure:
        """The named procedure as on disk now (under the write lock); NotFoundError naming near ones."""
        slug = procedure_slug(name)
        current = self._read_for_write(slug)
        if current is None:
            self._refresh()
            raise self._not_found(name, slug)
        return current

    def _read_for_write(self, slug: str) -> Procedure | None:
        """The procedure as on disk now (under the write lock), None if absent. A link or special file there
        counts as absent (a write replaces it, never its target); an invalid file is refused, never overwritten."""
        try:
            return self.files.read(slug)
        except (FileNotFoundError, RefusedFileError):
            return None

    def _write(self, procedure: Procedure) -> None:
        self.files.write(procedure)
        self._index.add_many(self._remember(procedure.slug, self.files.identity(procedure.slug), procedure))

    def _refresh(self) -> None:
        """Follow the folder: forget removed files, read new and changed ones (by identity)."""
        if self._owns_reinforcer:  # a shared one is caught up by the memory store, which needs what it returns
            self.reinforcer.catch_up()
        listing = self.files.identities()
        for stem in self._loaded.keys() - listing.keys():
            self._forget(stem)
        documents: builtins.list[tuple[str, builtins.list[str], bool]] = []  # indexed together: one add per call
        for stem, identity in listing.items():
            known = self._loaded.get(stem)
            if known is not None and known[0] == identity:
                continue
            loaded: Loaded
            if not _SLUG.fullmatch(stem):
                loaded = InvalidInputError(
                    f"{self.files.path_for(stem)}: {stem!r} is not a procedure slug (lower-case a-z, 0-9 and single "
                    "'-'), so no name reaches it; rename the file after its name (rockmem_mcp.models.procedure_slug) "
                    "or move it away"
                )
            else:
                try:
                    loaded = self.files.read(stem)
                except FileNotFoundError:  # removed since the listing
                    self._forget(stem)
                    continue
                except (RockmemError, OSError) as exc:
                    loaded = exc
            if not isinstance(loaded, Procedure):
                log.warning("procedure file %s is skipped: %s", self.files.path_for(stem), loaded)
            documents += self._remember(stem, identity, loaded)
        if documents:
            self._index.add_many(documents)

    def _remember(
        self, stem: str, identity: Identity, loaded: Loaded
    ) -> builtins.list[tuple[str, builtins.list[str], bool]]:
        """Keep what a file held; returns the search document to index for it (none for an unreadable file)."""
        self._loaded[stem] = (identity, loaded)
        if isinstance(loaded, Procedure):
            self._triggers[stem] = [phrase for text in loaded.trigger if (phrase := frozenset(tokenize(text)))]
            return [(stem, tokenize(loaded.document_text()), loaded.archived)]
        self._index.remove(stem)
        self._triggers.pop(stem, None)
        return []

    def _forget(self, stem: str) -> None:
        self._loaded.pop(stem, None)
        self._index.remove(stem)
        self._triggers.pop(stem, None)

    def _procedures(self) -> builtins.list[tuple[str, Procedure]]:
        return [(stem, found) for stem, (_, found) in self._loaded.items() if isinstance(found, Procedure)]

    def _not_found(self, name: str, slug: str) -> NotFoundError:
        names = {stem: p.name for stem, p in self._procedures()}
        near = difflib.get_close_matches(slug, names, n=3, cutoff=0.6)
        near += [stem for stem in sorted(names) if slug in stem and stem not in near][: 5 - len(near)]
        hint = f"; near: {', '.join(repr(names[stem]) for stem in near)}" if near else ""
        return NotFoundError(
            f"no procedure named {name[:100]!r}{hint}. {URI} lists them all (save_procedure creates one)"
        )

    def _with_uses(self, procedure: Procedure) -> Procedure:
        return with_uses(procedure, self.reinforcer.accesses(PROCEDURE).get(procedure.slug))

    def salience(self, procedure: Procedure) -> float:
        uses = uses_of(procedure)
        now, lam = self._clock().timestamp(), self.settings.salience_lambda
        return salience_of(procedure.importance, uses.last, uses.count, False, now, lam, TYPE_WEIGHT)

    def tier_counts(self) -> dict[str, int]:
        """How many live procedures are in each salience tier (rockmem://salience)."""
        values = np.array([self.salience(p) for p in self.list()], dtype=np.float64)
        return tier_counts(values, self.settings.salience_archive_threshold)

    def _weighed(
        self, found: builtins.list[tuple[float, Procedure]], leave_out: tuple[str, ...]
    ) -> builtins.list[tuple[float, Procedure]]:
        """`found` (score, procedure) times salience's ranking factor, best first, without the tiers in
        `leave_out` (salience switched off: relevance alone, nothing left out)."""
        if found and self.settings.salience:
            values = [self.salience(p) for _, p in found]
            factors = ranking_factor(np.array(values), self.settings.salience_floor).tolist()
            found = [
                (score * factor, p)
                for (score, p), value, factor in zip(found, values, factors, strict=True)
                if tier(value, self.settings.salience_archive_threshold) not in leave_out
            ]
        return sorted(found, key=lambda hit: (-hit[0], hit[1].slug))

    def _checked(
        self, name: str, trigger: object, steps: object, notes: object, learned_from: object
    ) -> dict[str, Any]:
        """A procedure's fields, checked and cleaned; the whole within ROCKMEM_MAX_CONTENT_BYTES."""
        fields: dict[str, Any] = {
            "trigger": _phrases(trigger),
            "steps": _texts(steps, "steps", MAX_STEPS, MAX_STEP_CHARS, required=True),
            "notes": _texts(notes, "notes", MAX_NOTES, MAX_NOTE_CHARS),
            "learned_from": _links(learned_from),
        }
        text = "\n".join([name, *fields["trigger"], *fields["steps"], *fields["notes"], *fields["learned_from"]])
        check_text(
            text, f"procedure {name!r}", self.settings.max_content_bytes, "ROCKMEM_MAX_CONTENT_BYTES",
            "Shorten its steps or notes, or split it into two procedures.",
        )  # fmt: skip
        return fields


def capped_history(history: builtins.list[ProcedureVersion]) -> tuple[builtins.list[ProcedureVersion], int]:
    """The newest of `history` (oldest first) whose JSON fits MAX_HISTORY_BYTES (the newest is always kept),
    and how many older ones were dropped."""
    sizes = [len(version.model_dump_json()) for version in history]
    total, keep = 0, 0
    for size in reversed(sizes):
        if keep and total + size > MAX_HISTORY_BYTES:
            break
        total += size
        keep += 1
    return history[len(history) - keep :], len(history) - keep


# ---------------------------------------------------------------------------------------------- input checks
def _list_of(value: object, what: str, most: int, required: bool) -> builtins.list[object]:
    if value is None:
        value = []
    if not isinstance(value, list | tuple):
        raise InvalidInputError(f'{what} must be a list of strings, e.g. ["first", "second"]')
    if required and not value:
        raise InvalidInputError(f"{what} must name at least one")
    if len(value) > most:
        raise InvalidInputError(f"{what}: {len(value)} given, at most {most} are allowed")
    return list(value)


def _phrases(trigger: object) -> builtins.list[str]:
    """Trigger phrases: 1-20, each 1-200 visible characters with a word search can match."""
    phrases = []
    for raw in _list_of(trigger, "trigger", MAX_TRIGGERS, required=True):
        phrase = normalize_name(raw, "trigger phrase")
        if not tokenize(phrase):
            raise InvalidInputError(
                f"trigger phrase {phrase[:60]!r} has no word to match (common words such as 'how', 'to' and 'the', "
                "and single letters, are ignored): use the words a request would contain, e.g. 'deploy' or "
                "'push to production'"
            )
        phrases.append(phrase)
    return phrases


def _links(learned_from: object) -> builtins.list[str]:
    """Where it was learned: episode or memory ids, or free text ('Episode 2026-01-25 14:30'), ≤ 200 characters."""
    items = _list_of(learned_from, "learned_from", MAX_LINKS, required=False)
    return [normalize_name(raw, "learned_from item") for raw in items]


def _texts(items: object, what: str, most: int, chars: int, required: bool = False) -> builtins.list[str]:
    """Steps or notes: each non-blank text of at most `chars` characters; newlines and tabs allowed, other
    control characters (and zero-width or bidi ones) not."""
    texts = []
    for n, raw in enumerate(_list_of(items, what, most, required), start=1):
        advice = f"Keep it within {chars} characters."
        text = clean(check_text(raw, f"{what} item {n}", 4 * chars, "a fixed cap", advice)).strip()
        if not text:
            raise InvalidInputError(f"{what} item {n} is blank: remove it or say what it is")
        if len(text) > chars:
            raise InvalidInputError(f"{what} item {n} is {len(text)} characters; at most {chars} are allowed")
        if _CONTROL.search(text):
            raise InvalidInputError(f"{what} item {n} holds a control character; only newlines and tabs are allowed")
        texts.append(text.replace("\r\n", "\n"))
    return texts


# ---------------------------------------------------------------------------------------------- markdown
def _escaped(text: str) -> str:
    """Stored text as markdown that cannot make a heading: a line starting with '#', or one of only '=' or '-'
    (which would underline the line above into a heading), gets a backslash."""
    return "\n".join(
        f"\\{line}" if line.lstrip().startswith("#") or _SETEXT.fullmatch(line) else line for line in text.split("\n")
    )


def _bullets(items: builtins.list[str]) -> builtins.list[str]:
    if not items:
        return ["(none)"]
    lines = []
    for item in items:
        first, *rest = _escaped(item).split("\n")
        lines += [f"- {first}", *(f"  {line}" if line else "" for line in rest)]
    return lines


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _why(reason: str | None) -> str:
    return _one_line(reason) if reason else "no reason given"


def _cut(text: str, chars: int) -> str:
    text = _one_line(text)
    return text if len(text) <= chars else text[: chars - 1].rstrip() + "…"


def offer_line(procedure: Procedure) -> str:
    """A procedure as recall offers it: its name, trigger, the first steps (about 300 characters) and the
    resource to read for the rest."""
    trigger = _cut(", ".join(procedure.trigger), OFFER_TRIGGER_CHARS)
    steps = _cut(" ".join(f"{n}. {step}" for n, step in enumerate(procedure.steps, start=1)), OFFER_STEP_CHARS)
    return visible(f'Procedure "{procedure.name}" (trigger: {trigger}): {steps} (read {URI}/{procedure.slug})')
