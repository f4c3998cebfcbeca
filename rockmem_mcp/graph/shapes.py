"""The knowledge graph's shapes and their rules: entity types, predicates, entities, triples, what each graph tool
returns."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from rockmem_mcp.errors import InvalidInputError
from rockmem_mcp.models import UseCount, UtcDatetime
from rockmem_mcp.text import clean

# ---------------------------------------------------------------------------------------------- knowledge graph
ENTITY_TYPES = ("person", "project", "topic", "tool", "event", "document", "place", "concept")


MAX_ALIASES = 50


_ENTITY_TYPE = re.compile(r"[a-z][a-z0-9_-]{0,39}")


_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


_NOT_WORD = re.compile(r"[\W_]+")  # letters and digits of any script are kept ('arbeitet_für', 'знает')


def normalize_predicate(value: Any) -> str:
    """snake_case: 'works on', 'worksOn' and 'Works-On' all become 'works_on'; letters of any script stay
    (NFC, so a decomposed 'é' is not split off as a separator; invisible characters removed)."""
    if not isinstance(value, str):
        raise InvalidInputError(f"predicate must be text, got {type(value).__name__}")
    snake = _NOT_WORD.sub("_", _CAMEL.sub("_", clean(value).strip()).lower()).strip("_")
    if not snake or len(snake) > 100:
        raise InvalidInputError(f"invalid predicate {value[:60]!r}: a short verb phrase such as 'works_on', 'prefers'")
    return snake


def normalize_entity_type(value: Any) -> str:
    if value is None:
        return "concept"
    if not isinstance(value, str) or not _ENTITY_TYPE.fullmatch(cleaned := value.strip().lower().replace(" ", "_")):
        raise InvalidInputError(
            f"invalid entity type {str(value)[:60]!r}: a short lowercase word such as {', '.join(ENTITY_TYPES)}"
        )
    return cleaned


class StrictInput(BaseModel):
    """A tool's nested input: a field it does not have (`alias` for `aliases`) is refused, naming the fields,
    rather than dropped. Checked by a validator, not `extra="forbid"`, so the published schema stays as small
    (`additionalProperties` on every nested object cost ~70 tokens of the default tool list)."""

    @model_validator(mode="before")
    @classmethod
    def _known_fields(cls, data: Any) -> Any:
        if isinstance(data, dict):
            unknown = [key for key in data if key not in cls.model_fields]
            if unknown:
                listed = ", ".join(cls.model_fields)
                raise ValueError(f"no field {', '.join(repr(k)[:60] for k in unknown[:5])}; the fields are {listed}")
        return data


class EntityInput(StrictInput):
    """An entity to add, as tools take it."""

    name: str = Field(description="e.g. 'Alice'")
    type: str | None = Field(None, description=f"{', '.join(ENTITY_TYPES)} (default)")
    aliases: list[str] | None = Field(None, description="Other names")
    metadata: dict[str, str] | None = Field(None, description="Key/value strings")


class TripleInput(StrictInput):
    """A fact to add, as tools take it: subject --predicate--> object."""

    subject: str = Field(description="Name, alias or id")
    predicate: str = Field(description="e.g. 'works_on'")
    object: str = Field(description="Name, alias or id")
    confidence: float | None = Field(None, description="0 to 1 (default 1)")
    source: str | None = Field(None, description="e.g. 'user'")


class Entity(BaseModel):
    """A node of the knowledge graph; stored as knowledge-graph/entities/{id}.json."""

    model_config = ConfigDict(extra="ignore")

    id: str
    name: str
    type: str = Field("concept", description=f"e.g. {', '.join(ENTITY_TYPES)}")
    aliases: list[str] = Field(default_factory=list)
    metadata: dict[str, str] = Field(default_factory=dict)
    created_at: UtcDatetime
    last_referenced_at: UtcDatetime | None = None  # before salience: when recall last named it
    # Uses, as for memories: the file holds them as of its last write, the access log (meta/access/) the rest.
    last_seen_at: UtcDatetime | None = Field(None, description="Last use (get, search, recall, a new link)")
    reinforcement_count: UseCount = Field(1, ge=1, description="Times used, the creation included")


class Triple(BaseModel):
    """An edge: subject --predicate--> object (entity ids); stored as knowledge-graph/triples/{id}.json."""

    model_config = ConfigDict(extra="ignore")

    id: str
    subject: str
    predicate: str
    object: str
    confidence: float = Field(1.0, ge=0.0, le=1.0)
    source: str | None = None
    created_at: UtcDatetime
    last_seen_at: UtcDatetime | None = Field(None, description="Last use (recall, traversal, added again)")
    reinforcement_count: UseCount = Field(1, ge=1, description="Times used, the creation included")


class Fact(BaseModel):
    """A triple with its entities' names, as tools and recall show it."""

    id: str
    subject: str = Field(description="Subject entity name")
    predicate: str
    object: str = Field(description="Object entity name")
    confidence: float
    source: str | None = None
    subject_id: str
    object_id: str
    created_at: datetime
    hop: int | None = Field(None, description="In a traversal: how many hops from the start")
    reinforcement_count: int = Field(1, description="Times used, the creation included")
    last_seen_at: datetime | None = Field(None, description="Last use")
    salience: float = Field(description="0..1: confidence x 0.7, faded since the last use, grown with uses")
    tier: str = Field(description="active, fading, dormant or archive_candidate")
    superseded_by: str | None = Field(
        None, description="Set when an end of this fact is superseded (X --supersedes--> it): X's name; may be stale"
    )

    def line(self) -> str:
        stale = f" (superseded by {self.superseded_by})" if self.superseded_by else ""
        return f"- {self.subject} --{self.predicate}--> {self.object} (confidence={self.confidence:.2f}){stale}"


class EntityAdded(BaseModel):
    entity: Entity
    created: bool = Field(description="False when the name or an alias already named this entity")
    ignored_aliases: list[str] = Field(default_factory=list, description="Aliases that already name another entity")


class EntitiesAdded(BaseModel):
    entities: list[EntityAdded]


class TripleAdded(BaseModel):
    fact: Fact
    created: bool = Field(
        description="False when the same subject, predicate and object existed (kept the higher confidence)"
    )
    hint: str | None = Field(
        None, description="A predicate outside the vocabulary (rockmem://graph-relations) close to one in it"
    )


class TriplesAdded(BaseModel):
    triples: list[TripleAdded]
    created_entities: list[str] = Field(description="Names of entities created because a triple named them")


class GraphAdded(BaseModel):
    """What one `graph` add made: its entities first, then its facts (created_entities: named only by a fact)."""

    entities: list[EntityAdded] = Field(default_factory=list)
    triples: list[TripleAdded] = Field(default_factory=list)
    created_entities: list[str] = Field(default_factory=list)


class EntityHit(BaseModel):
    entity: Entity
    score: float | None = Field(
        description="Relevance: BM25 for word matches; below 1 for a name that only contains the query; "
        "null when listing without a query"
    )
    triples: int = Field(description="How many triples touch this entity")
    salience: float = Field(description="0..1: 0.7, faded since the last use, grown with uses")
    tier: str = Field(description="active, fading, dormant or archive_candidate")


class EntitySearch(BaseModel):
    results: list[EntityHit]
    total_matches: int


class EntityDetail(BaseModel):
    entity: Entity
    salience: float = Field(description="0..1: 0.7, faded since the last use, grown with uses")
    tier: str = Field(description="active, fading, dormant or archive_candidate")
    facts: list[Fact] = Field(description="Every triple touching the entity, outgoing then incoming")


class Traversal(BaseModel):
    start: Entity
    facts: list[Fact] = Field(description="Breadth-first, nearest first; each triple once")
    entities_reached: int
    truncated: bool = Field(description="True when the limit cut the traversal short")


class EntityDeleted(BaseModel):
    entity: Entity
    triples_deleted: int


class TripleDeleted(BaseModel):
    fact: Fact


class EntitiesMerged(BaseModel):
    entity: Entity = Field(description="The kept entity, with the merged one's name and aliases as aliases")
    merged_id: str
    triples_repointed: int
    duplicates_folded: int = Field(
        description="Triples dropped: identical to an existing one after re-pointing, or linking the two merged"
    )
