"""Import and export of long-term memory as JSON Lines (one entry object per line), and import of the
knowledge graph written by the MCP reference memory server."""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any, BinaryIO, TextIO, TypeVar

from pydantic import BaseModel

from rockmem_mcp.audit.service import Audit
from rockmem_mcp.config import Settings
from rockmem_mcp.conversation.feedback import feedback_log
from rockmem_mcp.conversation.service import check_session_id
from rockmem_mcp.core.service import core_document
from rockmem_mcp.core.workspace_files import MAX_FILE_BYTES, WORKSPACE_FILES
from rockmem_mcp.episodes.service import episode_log
from rockmem_mcp.errors import InvalidInputError, RockmemError
from rockmem_mcp.graph.service import MAX_SOURCE_CHARS, GraphService
from rockmem_mcp.graph.shapes import MAX_ALIASES, Entity, Triple, normalize_entity_type, normalize_predicate
from rockmem_mcp.memory.migrations import mapped
from rockmem_mcp.memory.service import MemoryService
from rockmem_mcp.models import (
    ROOTS,
    Episode,
    Feedback,
    MemoryEntry,
    as_utc,
    check_metadata,
    check_text,
    entry_key_segments,
    normalize_category,
    normalize_name,
    normalize_tags,
    utc_now,
    validate_entry_id,
)
from rockmem_mcp.procedures.service import Procedures
from rockmem_mcp.procedures.shapes import Procedure, procedure_slug
from rockmem_mcp.search.conversation_metadata import TurnCounter
from rockmem_mcp.search.episode_index import touch_directory
from rockmem_mcp.storage.atomic import atomic_create, remove_durably
from rockmem_mcp.storage.daily_log import DailyLog
from rockmem_mcp.storage.no_follow import read_bytes
from rockmem_mcp.storage.pg import is_database_url
from rockmem_mcp.working.service import drop_expired, make_room, namespace_of, working_store
from rockmem_mcp.working.shapes import WorkingEntry

log = logging.getLogger(__name__)

CORE_NAME = "MEMORY.md"
STORES = "entity, triple, working, feedback, episode, procedure or file"
Logged = TypeVar("Logged", Feedback, Episode)  # records of the daily logs

IMPORT_BATCH = 2_000
# Longest line either importer takes: a backup line holding a 1 MB working-memory value fits even when every
# character is escaped as \uXXXX. Longer lines are reported by number, never held in memory whole.
MAX_IMPORT_LINE_BYTES = 8_000_000
_SKIP_CHUNK = 1 << 20


def bounded_lines(source: BinaryIO, limit: int = MAX_IMPORT_LINE_BYTES) -> Iterator[bytes]:
    """The lines of a file; a line longer than `limit` comes out cut to `limit + 1` bytes (which the importers
    report as too long) and the rest of it is read past in 1 MB chunks."""
    while line := source.readline(limit + 1):
        if len(line) > limit and not line.endswith(b"\n"):
            while (rest := source.readline(_SKIP_CHUNK)) and not rest.endswith(b"\n"):
                continue
        yield line


def _line_text(line: str | bytes) -> str:
    """One import line as text; ValueError if it is too long or not UTF-8."""
    if len(line.rstrip(b"\r\n" if isinstance(line, bytes) else "\r\n")) > MAX_IMPORT_LINE_BYTES:
        raise ValueError(f"line is longer than {MAX_IMPORT_LINE_BYTES:,} bytes")
    return line.decode("utf-8") if isinstance(line, bytes) else line


@dataclass(frozen=True)
class LineError:
    line: int
    error: str


@dataclass
class ImportReport:
    imported: int = 0
    replaced: int = 0  # of `imported`, how many overwrote an entry with the same id
    errors: list[LineError] = field(default_factory=list)
    other_stores: dict[str, int] = field(default_factory=dict)  # entities, triples, working, feedback restored
    skipped: list[str] = field(default_factory=list)  # other-store records not restored, with the reason


class HomeStores:
    """The stores besides long-term memory, in export/import lines tagged with "store": knowledge-graph
    entities and triples, live working-memory entries, and feedback. Import buffers them and `finish` puts
    them back (ids kept; see GraphService.restore for what is skipped)."""

    def __init__(self, settings: Settings, graph: GraphService) -> None:
        self.settings = settings
        self.graph = graph
        self.audit = Audit(settings)
        self.files = working_store(settings)  # the home's files, or the database replicas share
        self.feedback = feedback_log(settings)
        self.episodes = episode_log(settings)
        self._episodes: list[Episode] = []
        self.procedures = Procedures(settings, graph.reinforcer)
        self._procedures: list[Procedure] = []
        self._entities: list[Entity] = []
        self._triples: list[Triple] = []
        self._working: list[WorkingEntry] = []
        self._signals: list[Feedback] = []
        self._files: dict[str, str] = {}
        # Markdown files a person edits, carried whole: core memory (a file, or the database's row) and the
        # workspace files (always the home's).
        self.core = core_document(settings)
        self.shared = is_database_url(settings.store)  # a database: no workspace files of its own
        self.home_files = {CORE_NAME: settings.core_file, **{n: settings.home / n for n in WORKSPACE_FILES}}
        self.exported = 0

    def export_lines(self) -> Iterator[str]:
        entities, triples = self.graph.records()
        for store, records in (("entity", entities), ("triple", triples)):
            for record in records:
                yield json.dumps({"store": store, **record.model_dump(mode="json")}, ensure_ascii=False)
        now = utc_now()
        for root in ROOTS:
            for raw in self.files.read(root).values():
                with contextlib.suppress(ValueError):
                    entry = WorkingEntry.model_validate(raw)
                    if entry.expires_at > now:
                        yield json.dumps({"store": "working", **entry.model_dump(mode="json")}, ensure_ascii=False)
        for store, daily in (("feedback", self.feedback), ("episode", self.episodes)):
            for day in daily.days():
                for record in daily.read(day):
                    yield json.dumps({"store": store, **record.model_dump(mode="json")}, ensure_ascii=False)
        for procedure in self.procedures.records():
            yield json.dumps({"store": "procedure", **procedure.model_dump(mode="json")}, ensure_ascii=False)
        for name, path in self.home_files.items():
            try:
                text = (self.core.read(fresh=True) if name == CORE_NAME else read_bytes(path)).decode("utf-8")
            except FileNotFoundError:
                continue
            except (OSError, UnicodeDecodeError) as exc:  # a link, a FIFO, bytes that are not text: said, kept out
                log.warning("backup: %s left out (%s)", name, exc)
                continue
            if text or name != CORE_NAME:  # no core is no MEMORY.md (the database's row reads as empty)
                yield json.dumps({"store": "file", "name": name, "text": text}, ensure_ascii=False)

    def add(self, record: dict[str, Any]) -> None:
        """Validate one tagged line (ValueError if it is not a valid record of its store)."""
        store = record.pop("store")
        if not isinstance(store, str):
            raise ValueError(f"'store' must be text ({STORES}), not {type(store).__name__}")
        if store == "file":
            self._add_file(record)
            return
        model, bucket = {
            "entity": (Entity, self._entities),
            "triple": (Triple, self._triples),
            "working": (WorkingEntry, self._working),
            "feedback": (Feedback, self._signals),
            "episode": (Episode, self._episodes),
            "procedure": (Procedure, self._procedures),
        }.get(store, (None, None))
        if model is None or bucket is None:
            raise ValueError(f"unknown store {store!r}: {STORES}")
        parsed = model.model_validate(record)
        if isinstance(parsed, Entity | Triple | Feedback | Episode):
            validate_entry_id(parsed.id)
        if isinstance(parsed, WorkingEntry):
            entry_key_segments(parsed.key)
        self._check_caps(parsed)
        bucket.append(parsed)

    def _add_file(self, record: dict[str, Any]) -> None:
        name, text = record.get("name"), record.get("text")
        if not isinstance(name, str) or name not in self.home_files:
            raise ValueError(f"file {name!r} is not one rockmem keeps: {', '.join(self.home_files)}")
        # The cap workspace files are read with, not a memory's: export carries them whole.
        advice = "rockmem skips a larger workspace file; shorten the text in the backup line and import it again."
        self._files[name] = check_text(text, f"file {name}", MAX_FILE_BYTES, "a workspace file's cap", advice)

    def _check_caps(self, record: BaseModel) -> None:
        """The caps the tools hold these records to (docs/limits.md), so a restore cannot let in more."""
        limits = self.settings
        if isinstance(record, Entity):
            normalize_name(record.name)
            normalize_entity_type(record.type)
            if len(record.aliases) > MAX_ALIASES:
                raise InvalidInputError(f"{len(record.aliases)} aliases; at most {MAX_ALIASES}")
            for alias in record.aliases:
                normalize_name(alias, "alias")
            check_metadata(record.metadata, limits.max_metadata_bytes)
        elif isinstance(record, Triple):
            normalize_predicate(record.predicate)
            if record.source is not None:
                check_text(record.source, "source", MAX_SOURCE_CHARS, "a fixed cap", "Shorten it.")
        elif isinstance(record, WorkingEntry):
            limit = limits.working_max_value_bytes
            check_text(record.data, "data", limit, "ROCKMEM_WORKING_MAX_VALUE_BYTES", "Shorten it.")
            normalize_tags(record.tags, limits.max_tags)
            normalize_category(record.category)
            if as_utc(record.expires_at) - utc_now() > timedelta(minutes=limits.working_max_ttl_minutes):
                raise InvalidInputError(
                    "expires later than the longest working-memory TTL from now (ROCKMEM_WORKING_MAX_TTL_MINUTES)"
                )
        elif isinstance(record, Episode):
            check_text(record.content, "content", limits.max_content_bytes, "ROCKMEM_MAX_CONTENT_BYTES", "")
            normalize_tags(record.tags, limits.max_tags)
            if record.memory_id is not None:
                validate_entry_id(record.memory_id)
        elif isinstance(record, Feedback):
            check_text(record.content, "content", limits.max_content_bytes, "ROCKMEM_MAX_CONTENT_BYTES", "")
            check_metadata(record.metadata, limits.max_metadata_bytes)
            check_session_id(record.session_id)

    def finish(self) -> tuple[dict[str, int], list[str]]:
        """Write what `add` took; counts per store and what was skipped, with reasons."""
        skipped = self.graph.restore(self._entities, self._triples) if self._entities or self._triples else []
        now = utc_now()
        live = [e for e in self._working if e.expires_at > now]
        skipped += [f"working {e.key}: expired" for e in self._working if e.expires_at <= now]
        cap = self.settings.working_max_entries
        evicted: set[str] = set()
        for root in ROOTS:
            mine = [e for e in live if e.key.split("/")[0] == root]
            if mine:
                with self.files.changing(root) as entries:
                    drop_expired(entries, now)
                    entries.update({e.key: e.model_dump(mode="json") for e in mine})
                    namespaces = {namespace_of(e.key) for e in mine}
                    evicted.update(
                        make_room(entries, cap, namespaces, max_bytes=self.settings.working_max_namespace_bytes)
                    )
        skipped += [
            f"working {key}: evicted, its namespace holds at most {cap} entries (ROCKMEM_WORKING_MAX_ENTRIES) and "
            f"{self.settings.working_max_namespace_bytes:,} bytes (ROCKMEM_WORKING_MAX_NAMESPACE_BYTES); the ones "
            "closest to expiry went"
            for key in sorted(evicted)
        ]
        written = self.procedures.restore_records(self._procedures) if self._procedures else []
        procedures = {procedure_slug(name) for name in written}
        skipped += [
            f"procedure {p.name}: the home has its own, kept (the backup's not restored)"
            for p in self._procedures
            if procedure_slug(p.name) not in procedures
        ]
        fresh = _append_new(self.feedback, self._signals, "feedback", skipped, self.audit)
        episodes = _append_new(self.episodes, self._episodes, "episode", skipped, self.audit)
        if episodes:
            touch_directory(self.settings.episodes_dir)  # past days' logs grew: followers re-read them
        files = 0
        for name, text in self._files.items():
            restored = self._restore_file(name, text)
            if restored is None:
                files += 1
            elif restored:
                skipped.append(restored)
        counts = {
            "files": files,
            "entities": len(self._entities),
            "triples": len(self._triples),
            "working": len([e for e in live if e.key not in evicted]),
            "feedback": len(fresh),
            "episodes": len(episodes),
            "procedures": len(procedures),
        }
        return counts, skipped

    def _restore_file(self, name: str, text: str) -> str | None:
        """Write a backed-up home file where there is none (None); a file already there is kept ('' when it
        is the same, else the reason): a restore never overwrites what a person may have written since."""
        path, data = self.home_files[name], text.encode("utf-8")
        if name == CORE_NAME and not self.core.on_disk:
            return self._restore_core(data)
        try:
            if atomic_create(path, data):
                self.audit.record(
                    "CREATE", path, f"{name} restored from a backup ({len(data):,} bytes)",
                    undo=lambda: remove_durably(path),
                )  # fmt: skip
                return None
            same = read_bytes(path) == data
        except OSError as exc:  # e.g. a link or a FIFO by that name: refused, never followed
            return f"file {name}: {exc}"
        return "" if same else f"file {name}: the home has its own, kept (the backup's not restored)"

    def _restore_core(self, data: bytes) -> str | None:
        """A database's core row, as `_restore_file` a file: written only where there is none yet."""
        with self.core.locked():
            held = self.core.read(fresh=True)
            if not held:
                self.core.write(data)
                self.audit.record(
                    "CREATE", self.core.path, f"{CORE_NAME} restored from a backup ({len(data):,} bytes)",
                    undo=self.core.remove,  # type: ignore[attr-defined]
                )  # fmt: skip
                return None
        return "" if held == data else f"file {CORE_NAME}: the store has its own, kept (the backup's not restored)"


def _append_new(
    daily: DailyLog[Logged], records: list[Logged], store: str, skipped: list[str], audit: Audit
) -> list[Logged]:
    """Append to their days' logs the records whose id the logs do not hold yet (a restore twice adds nothing),
    with one APPEND audit line per day's log (if the lines cannot be written, what was appended is taken out
    again and the error raised)."""
    days = {record.at.date() for record in records}
    known = {r.id for day in daily.days() if day in days for r in daily.read(day)}
    fresh = []
    for record in records:
        if record.id in known:
            continue
        try:
            daily.append(record, record.at.date())
        except RockmemError as exc:  # e.g. that day's log is a symbolic link
            skipped.append(f"{store} {record.id}: {exc}")
        else:
            known.add(record.id)
            fresh.append(record)
    per_day: dict[date, set[str]] = {}
    for record in fresh:
        per_day.setdefault(record.at.date(), set()).add(record.id)

    def undo() -> None:
        for day, ids in per_day.items():
            daily.remove_where(day, lambda r, ids=ids: r.id in ids)

    lines = [
        audit.line("APPEND", daily.path(day), f"{len(ids)} {store} record(s) restored from a backup")
        for day, ids in sorted(per_day.items())
    ]
    audit.record_many(lines, undo=undo)
    return fresh


def import_jsonl(
    memory: MemoryService,
    lines: Iterable[str | bytes],
    progress: Callable[[int], None] | None = None,
    batch_size: int = IMPORT_BATCH,
    others: HomeStores | None = None,
) -> ImportReport:
    """Read `{content, category?, tags?, metadata?, importance?, created_at?, id?, session?, turn?, speaker?,
    date?, ...}` per line (the last four: search/conversation_metadata.py); lines
    tagged `"store"` (entity, triple, working, feedback) go to `others` (a backup of the whole home).

    Bad lines are reported by number and skipped; good ones are written in batches (one durable flush
    and one index update per batch). An id that already exists is replaced.
    """
    report = ImportReport()
    batch: list[MemoryEntry] = []
    conversation = TurnCounter()  # top-level session/turn/speaker/date go into metadata (the contract)

    def flush() -> None:
        if batch:
            report.replaced += memory.save_many(batch)
            report.imported += len(batch)
            batch.clear()

    number = 0
    for number, line in enumerate(lines, start=1):
        try:
            text = _line_text(line)
            if not text.strip():
                continue
            record = json.loads(text)
            if not isinstance(record, dict):
                raise ValueError('expected a JSON object like {"content": "..."}')
            if "store" in record:
                if others is None:
                    raise ValueError(f"a {record['store']!r} record: import it with `rockmem-mcp import`")
                others.add(record)
            else:
                record = conversation(record)
                entry = memory.prepare_entry(record)
                if "reinforcement_count" in record and "pinned" not in record:  # exported before salience
                    entry = entry.model_copy(update=mapped(entry))
                memory.files.check_folder(entry.category)  # a linked folder: this line is refused, not the batch
                batch.append(entry)
        # UnicodeDecodeError and JSONDecodeError are ValueErrors; RecursionError: JSON nested too deep.
        except (ValueError, RecursionError, RockmemError) as exc:
            report.errors.append(LineError(number, str(exc).splitlines()[0][:300]))
        if len(batch) >= batch_size:
            flush()
            if progress:
                progress(number)
    flush()
    if progress:
        progress(number)
    if others is not None:
        report.other_stores, report.skipped = others.finish()
    return report


def export_jsonl(
    memory: MemoryService,
    out: TextIO,
    others: HomeStores | None = None,
    progress: Callable[[int], None] | None = None,
) -> int:
    """Write every entry (archived ones too), oldest first, in the format import reads; then, with `others`,
    the graph, live working memory and feedback as lines tagged "store". Returns the memories written
    (`others.exported` counts the rest); `progress(memories written)` hears of them every EXPORT_PROGRESS."""
    count = 0
    for entry in memory.iter_entries():
        out.write(memory.with_uses(entry).model_dump_json() + "\n")  # uses from the access log too
        count += 1
        if progress is not None and count % EXPORT_PROGRESS == 0:
            progress(count)
    if progress is not None:
        progress(count)
    for line in others.export_lines() if others is not None else ():
        out.write(line + "\n")
        others.exported += 1
    return count


EXPORT_PROGRESS = 1_000  # memories between two progress reports
MIGRATE_BATCH = 2_000


@dataclass
class MigrationReport:
    moved: int = 0  # memories written to the target (archived ones included)
    replaced: int = 0  # of them, ids the target had already
    checked: int = 0  # read back from the target and compared with the source
    differing: list[str] = field(default_factory=list)  # ids whose copy differs (none, unless something broke)
    other_stores: dict[str, int] = field(default_factory=dict)  # graph, working, feedback, episodes, … moved
    skipped: list[str] = field(default_factory=list)  # other-store records the target kept its own of, and why


def migrate_memories(
    source: MemoryService, target: MemoryService, progress: Callable[[int, int], None] | None = None
) -> MigrationReport:
    """Copy every long-term memory of `source` (archived ones included, with their uses) to `target`, ids and
    fields as they are, in batches; then read each back from the target and compare it with the source's. The
    source is left as it was. `progress(done, in all)` hears of each batch."""
    report = MigrationReport()
    total = len(source.index)
    batch: list[MemoryEntry] = []

    def flush() -> None:
        if batch:
            report.replaced += target.save_many(batch, audit_as=("CREATE", "migrated from another store"))
            report.moved += len(batch)
            batch.clear()
            if progress is not None:
                progress(report.moved, total)

    for entry in source.iter_entries():
        batch.append(source.with_uses(entry))
        if len(batch) >= MIGRATE_BATCH:
            flush()
    flush()
    for entry in source.iter_entries():
        report.checked += 1
        try:
            copy = target.get(entry.id)
        except RockmemError:
            report.differing.append(entry.id)
            continue
        if copy != source.with_uses(entry):
            report.differing.append(entry.id)
    return report


def migrate_other_stores(source: HomeStores, target: HomeStores, report: MigrationReport) -> None:
    """Copy the stores besides long-term memory (as a backup carries them: the graph, live working memory, the
    feedback and episode logs, procedures, core memory and the workspace files) from `source` to `target`; then
    export the target and check that it holds every record the source does. What the target does not take is in
    `report.skipped` with the reason, not among the differing: a record it kept its own of (GraphService.restore,
    HomeStores.finish say when), and the workspace files when it is a database (they are each replica's own, in
    its home; the store has none)."""
    skipped: list[str] = []
    carried: list[tuple[str, str]] = []  # (line, how a skip reason names its record)
    for line in source.export_lines():
        record = json.loads(line)
        named = f"{record['store']} {record.get('id') or record.get('name') or record.get('key')}"
        if target.shared and record["store"] == "file" and record.get("name") != CORE_NAME:
            skipped.append(f"{named}: a workspace file is each replica's own (in its home, not the store); copy it "
                           "into the replicas' homes")  # fmt: skip
            continue
        target.add(record)
        carried.append((line, named))
    report.other_stores, kept = target.finish()
    report.skipped = skipped + [reason for reason in kept if reason]
    held = set(target.export_lines())
    for line, named in carried:
        if line not in held and not any(reason.startswith((f"{named}:", f"{named} ")) for reason in kept):
            report.differing.append(named)


# ------------------------------------------------------------------------ the reference memory server's graph
GRAPH_SOURCE = "server-memory import"
GRAPH_BATCH = 1_000  # the graph tools' own cap per call


@dataclass
class GraphImportReport:
    entities: int = 0  # entities in the file, each created or matched by name
    entities_created: int = 0
    triples: int = 0
    triples_created: int = 0
    observations: int = 0  # long-term memories written (a re-import rewrites the same ids)
    errors: list[LineError] = field(default_factory=list)


def import_reference_graph(
    graph: GraphService, memory: MemoryService, lines: Iterable[str | bytes]
) -> GraphImportReport:
    """Read the knowledge graph of `@modelcontextprotocol/server-memory` (JSON Lines of
    `{"type":"entity","name","entityType","observations":[…]}` and `{"type":"relation","from","to","relationType"}`).

    Entities become entities (an existing name or alias is matched, not duplicated), relations become triples
    (confidence 1), and each observation a long-term memory "{name}: {observation}" in category
    `knowledge-graph/{type}`, tagged with the entity's name and linked by metadata `entity_id`. Observation
    ids derive from the entity and the text, so importing the same file again changes nothing.
    Bad lines are reported by number and skipped.
    """
    report = GraphImportReport()
    entities: list[tuple[int, dict[str, Any]]] = []
    relations: list[tuple[int, dict[str, Any]]] = []
    for number, line in enumerate(lines, start=1):
        try:
            text = _line_text(line)
            if not text.strip():
                continue
            record = json.loads(text)
            kind = record.get("type") if isinstance(record, dict) else None
            if kind == "entity":
                entities.append((number, _reference_entity(record)))
            elif kind == "relation":
                relations.append((number, _reference_relation(record)))
            else:
                raise ValueError('expected {"type": "entity", …} or {"type": "relation", …}')
        except (ValueError, RecursionError, RockmemError) as exc:  # RecursionError: nested too deep
            report.errors.append(LineError(number, str(exc).splitlines()[0][:300]))

    observations: list[MemoryEntry] = []
    for number, item, added in _added(lambda batch: graph.add_entities(batch).entities, entities, report.errors):
        try:
            observations += [_observation(memory, added.entity, text) for text in item["observations"]]
        except RockmemError as exc:
            report.errors.append(LineError(number, str(exc)[:300]))
        report.entities += 1
        report.entities_created += added.created
        if len(observations) >= IMPORT_BATCH:
            memory.save_many(observations)
            report.observations += len(observations)
            observations.clear()
    memory.save_many(observations)
    report.observations += len(observations)
    for _, _, triple in _added(lambda batch: graph.add_triples(batch).triples, relations, report.errors):
        report.triples += 1
        report.triples_created += triple.created
    report.errors.sort(key=lambda e: e.line)
    return report


def _added(
    add: Callable[[list[dict[str, Any]]], list[Any]], items: list[tuple[int, dict[str, Any]]], errors: list[LineError]
) -> Iterable[tuple[int, dict[str, Any], Any]]:
    """(line, item, result) for each item `add` accepted: a batch of 1,000 per call; a batch refused as a
    whole is retried line by line so the bad line is the one reported."""
    for start in range(0, len(items), GRAPH_BATCH):
        batch = items[start : start + GRAPH_BATCH]
        try:
            results = add([_without_observations(item) for _, item in batch])
            yield from ((number, item, result) for (number, item), result in zip(batch, results, strict=True))
        except RockmemError:
            for number, item in batch:
                try:
                    result = add([_without_observations(item)])[0]
                except RockmemError as exc:
                    errors.append(LineError(number, str(exc)[:300]))
                    continue
                yield number, item, result


def _without_observations(item: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in item.items() if k != "observations"}


def _reference_entity(record: dict[str, Any]) -> dict[str, Any]:
    name = normalize_name(record.get("name"))
    raw_type = record.get("entityType")
    metadata = {}
    try:
        entity_type = normalize_entity_type(raw_type)
    except InvalidInputError:
        entity_type = "concept"  # the reference server takes any text; keep the original beside it
        metadata["entity_type"] = str(raw_type)[:200]
    found = record.get("observations") or []
    if not isinstance(found, list) or not all(isinstance(o, str) for o in found):
        raise ValueError(f"observations of {name!r} must be a list of strings")
    # That server's names are often snake_case ("John_Smith"); the spaced form lets recall find "John Smith".
    aliases = [spaced] if (spaced := " ".join(name.replace("_", " ").split())) != name and spaced else []
    observations = [o for o in found if o.strip()]
    return {"name": name, "type": entity_type, "aliases": aliases, "metadata": metadata, "observations": observations}


def _reference_relation(record: dict[str, Any]) -> dict[str, Any]:
    return {
        "subject": normalize_name(record.get("from"), "from"),
        "predicate": normalize_predicate(record.get("relationType")),
        "object": normalize_name(record.get("to"), "to"),
        "confidence": 1.0,
        "source": GRAPH_SOURCE,
    }


def _observation(memory: MemoryService, entity: Entity, text: str) -> MemoryEntry:
    digest = hashlib.sha256(f"{entity.id}\n{text}".encode()).hexdigest()[:12]
    return memory.prepare_entry(
        {
            "id": digest,
            "content": f"{entity.name}: {text}",
            "category": f"knowledge-graph/{entity.type}",
            "tags": [entity.name[:100]],
            "metadata": {"entity_id": entity.id, "entity": entity.name, "source": GRAPH_SOURCE},
        }
    )
