"""The knowledge graph as JSON files: knowledge-graph/entities/{id}.json and knowledge-graph/triples/{id}.json.

One small pretty-JSON file per record, written atomically and durably, like memory entries: readable,
greppable, and a crash leaves either the old file or the new one. A file that does not parse is skipped with
one warning naming it and is never deleted.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from sys import intern
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from rockmem_mcp.graph.shapes import Entity, Triple
from rockmem_mcp.models import validate_entry_id
from rockmem_mcp.storage.atomic import atomic_write, atomic_write_many, remove_durably
from rockmem_mcp.storage.changes import JournalPosition
from rockmem_mcp.storage.no_follow import read_bytes, writing

log = logging.getLogger(__name__)

Record = TypeVar("Record", Entity, Triple)


class RecordFiles(Generic[Record]):
    """One folder of `{id}.json` files holding one kind of record."""

    def __init__(self, directory: Path, model: type[Record]) -> None:
        self.directory = directory
        self._directory_text = str(directory)
        self.model = model
        self._warned: set[str] = set()

    def path(self, record_id: str) -> Path:
        return Path(self._path_text(validate_entry_id(record_id)))

    def _path_text(self, record_id: str) -> str:
        # A string, not a Path: a start that reads 100k records spends seconds in pathlib otherwise.
        return f"{self._directory_text}/{record_id}.json"

    @staticmethod
    def encode(record: BaseModel) -> bytes:
        return record.model_dump_json(indent=2).encode() + b"\n"

    def write(self, record: Record) -> None:
        with writing(self.directory):
            atomic_write(self.path(record.id), self.encode(record))

    def write_many(self, records: Iterable[Record]) -> int:
        with writing(self.directory):
            return atomic_write_many((self.path(r.id), self.encode(r)) for r in records)

    def remove(self, record_id: str) -> bool:
        with writing(self.directory):
            return remove_durably(self.path(record_id))

    def read(self, record_id: str) -> Record | None:
        """The record, or None if its file is absent or unreadable (the latter warned once)."""
        path = self._path_text(validate_entry_id(record_id))
        try:
            record = self.model.model_validate_json(read_bytes(path))
        except FileNotFoundError:
            return None
        except (OSError, ValidationError, ValueError) as exc:
            self._warn(f"{path} is not a valid {self.model.__name__.lower()} ({_first_problem(exc)}); skipped")
            return None
        return record if record.id == record_id else record.model_copy(update={"id": record_id})

    def stems(self) -> set[str]:
        """The names of the record files without '.json' (temp files and dotfiles left out), unchecked."""
        try:
            names = os.listdir(self.directory)
        except FileNotFoundError:
            return set()
        return {n[:-5] for n in names if n.endswith(".json") and not n.startswith(".")}

    def written_since(self, since_ns: int) -> set[str]:
        """Stems of the files written at or after `since_ns` (an mtime): none without a stat each when the
        folder itself has not changed since (every write renames a file into it, which updates the folder)."""
        try:
            if os.stat(self.directory).st_mtime_ns < since_ns:
                return set()
            items = list(os.scandir(self.directory))
        except FileNotFoundError:
            return set()
        found = set()
        for item in items:
            name = item.name
            if name.endswith(".json") and not name.startswith("."):
                try:
                    if item.stat(follow_symlinks=False).st_mtime_ns >= since_ns:
                        found.add(name[:-5])
                except OSError:
                    continue
        return found

    def ids(self) -> list[str]:
        """The ids of the files in the folder (strays named unlike an id are warned about and left out)."""
        found = []
        for stem in self.stems():
            try:
                found.append(validate_entry_id(stem))
            except ValueError:
                self._warn(f"{self.directory / stem}.json is not named like a record id; skipped")
        return found

    def read_all(self) -> list[Record]:
        return [record for record_id in self.ids() if (record := self.read(record_id)) is not None]

    def _warn(self, message: str) -> None:
        if message not in self._warned:
            self._warned.add(message)
            log.warning("%s", message)


def _first_problem(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        return exc.errors()[0]["msg"]
    return str(exc)


class GraphFiles:
    on_disk = True

    def __init__(self, root: Path) -> None:
        self.root = root
        self.entities = RecordFiles(root / "entities", Entity)
        self.triples = RecordFiles(root / "triples", Triple)

    def write_change(
        self,
        entities: Iterable[Entity],
        triples: Iterable[Triple],
        removed_triples: Iterable[str] = (),
        removed_entities: Iterable[str] = (),
    ) -> None:
        """Puts first, then removals of triples before their entities: a crash between leaves no triple whose
        entity is gone (the caller journals the change after)."""
        self.entities.write_many(entities)
        self.triples.write_many(triples)
        for triple_id in removed_triples:
            self.triples.remove(triple_id)
        for entity_id in removed_entities:
            self.entities.remove(entity_id)


# ---------------------------------------------------------------------------------------------- snapshot
SNAPSHOT_FORMAT = 2  # 2 added uses (last_seen_at, reinforcement_count) at the end of each row; 1 is still read
_READABLE_FORMATS = (1, SNAPSHOT_FORMAT)
_USES = ("last_seen_at", "reinforcement_count")
_ENTITY_FIELDS = ("id", "name", "type", "aliases", "metadata", "created_at", "last_referenced_at", *_USES)
_TRIPLE_FIELDS = ("id", "subject", "predicate", "object", "confidence", "source", "created_at", *_USES)


@dataclass(frozen=True)
class GraphSnapshot:
    position: JournalPosition
    entities: list[Entity]
    triples: list[Triple]


def write_snapshot(
    path: Path, position: JournalPosition, entities: Iterable[Entity], triples: Iterable[Triple]
) -> None:
    """Every record in one compact JSON file (rows of fields), with the journal position it reflects.
    Derived data: written atomically but not synced; a lost or damaged snapshot means reading the files."""
    body = {
        "format": SNAPSHOT_FORMAT,
        "generation": position.generation,
        "offset": position.offset,
        "entities": [_row(e, _ENTITY_FIELDS) for e in entities],
        "triples": [_row(t, _TRIPLE_FIELDS) for t in triples],
    }
    atomic_write(path, json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode(), durable=False)


def read_snapshot(path: Path) -> GraphSnapshot | None:
    """The snapshot, or None if there is none or it is unusable (then the files are read)."""
    try:
        body = json.loads(read_bytes(path))
        if body.get("format") not in _READABLE_FORMATS:
            return None
        position = JournalPosition(int(body["generation"]), int(body["offset"]))
        entities = [_entity(*row) for row in body["entities"]]
        triples = [_triple(*row) for row in body["triples"]]
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        log.warning("the graph snapshot %s is unusable (%s); reading the graph files instead", path, exc)
        return None
    return GraphSnapshot(position, entities, triples)


def _row(record: BaseModel, fields: tuple[str, ...]) -> list[Any]:
    values = []
    for name in fields:
        value = getattr(record, name)
        values.append(value.isoformat() if isinstance(value, datetime) else value)
    return values


def _entity(
    id: str,
    name: str,
    type: str,
    aliases: list[str],
    metadata: dict[str, str],
    created: str,
    referenced: str | None,
    seen: str | None = None,
    count: int = 1,
) -> Entity:
    return _trusted(
        Entity,
        id=intern(id),
        name=name,
        type=type,
        aliases=aliases,
        metadata=metadata,
        created_at=datetime.fromisoformat(created),
        last_referenced_at=None if referenced is None else datetime.fromisoformat(referenced),
        last_seen_at=None if seen is None else datetime.fromisoformat(seen),
        reinforcement_count=int(count),
    )


def _triple(
    id: str,
    subject: str,
    predicate: str,
    object: str,
    confidence: float,
    source: str | None,
    created: str,
    seen: str | None = None,
    count: int = 1,
) -> Triple:
    return _trusted(
        Triple,
        id=id,
        subject=intern(subject),  # one string per entity id and predicate, not one per triple end
        predicate=intern(predicate),
        object=intern(object),
        confidence=confidence,
        source=source,
        created_at=datetime.fromisoformat(created),
        last_seen_at=None if seen is None else datetime.fromisoformat(seen),
        reinforcement_count=int(count),
    )


# One fields-set per model: a set per record was ~80 MB of a 100k-triple graph. Every field is set, so what
# pydantic adds to it later (a field assigned) is already in it; model_copy copies it before changing it.
_ALL_FIELDS: dict[tuple[type[BaseModel], tuple[str, ...]], set[str]] = {}


def _trusted(model: type[Record], **values: Any) -> Record:
    """A model instance from values this process's own snapshot holds (validated when first made): what
    `model_construct` does, without its per-field bookkeeping, which costs seconds at 100k records.
    tests/unit/graph/test_graph_files.py checks that the result equals the validated model."""
    record = model.__new__(model)
    object.__setattr__(record, "__dict__", values)
    fields = _ALL_FIELDS.get(key := (model, tuple(values)))
    if fields is None:
        fields = _ALL_FIELDS[key] = set(values)
    object.__setattr__(record, "__pydantic_fields_set__", fields)
    object.__setattr__(record, "__pydantic_extra__", None)
    object.__setattr__(record, "__pydantic_private__", None)
    return record
