"""Working memory: path-keyed scratch space with expiry, shared by sessions, sub-agents and patrols.

Keys are paths. The first two segments are the namespace: `session/{id}`, `patrol/{task}`,
`subagent/{task}`, or `shared/{topic}`, which every caller may write; an entry's key names one more segment
at least (`shared/plan/steps`), so every entry belongs to a namespace and counts toward its cap.
A key whose first segment is one of those roots is a full path and may be read from any namespace; any
other key is relative to the caller's own namespace. Writes and deletes outside the caller's namespace are
refused, `shared/…` excepted. A namespace holds at most `working_max_entries` entries and
`working_max_namespace_bytes` bytes of values; a save past either evicts the entries closest to expiry. An
expired entry is never returned; expired entries are dropped whenever their file is rewritten, and
`sweep_expired` (run by the server at start and periodically) rewrites files that hold any.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import numpy as np

from rockmem_mcp.config import Settings
from rockmem_mcp.errors import InvalidInputError, NotFoundError
from rockmem_mcp.models import (
    ROOTS,
    as_utc,
    check_text,
    entry_key_segments,
    normalize_category,
    normalize_tags,
    parse_namespace,
    tag_key,
    utc_now,
    working_key_segments,
)
from rockmem_mcp.search.bm25 import BM25Index
from rockmem_mcp.search.rank import Ranking, rank, uses_vectors
from rockmem_mcp.search.tokenizer import tokenize
from rockmem_mcp.storage.pg import is_database_url
from rockmem_mcp.working.files import WorkingFiles
from rockmem_mcp.working.shapes import WorkingEntry, WorkingInfo, WorkingSaved, WorkingSearchHit
from rockmem_mcp.working.vectors import WorkingVectors

PREVIEW_CHARS = 200


class WorkingMemory:
    """Working memory for one caller (its namespace); every instance on a home sees the same entries."""

    def __init__(
        self,
        settings: Settings,
        namespace: str,
        clock: Callable[[], datetime] = utc_now,
        vectors: WorkingVectors | None = None,  # with embeddings: search ranks hybrid, like long-term memory
        files: WorkingFiles | None = None,
    ) -> None:
        self.settings = settings
        self.namespace = parse_namespace(namespace)
        self.files = files or working_store(settings)
        self._clock = store_clock(self.files, clock)
        self.vectors = vectors

    def for_namespace(self, namespace: str) -> WorkingMemory:
        """Working memory for another caller of this process, sharing this one's view of the files: a server's
        sessions read and hold the entries once between them, not once each."""
        return WorkingMemory(self.settings, namespace, self._clock, self.vectors, self.files)

    # ------------------------------------------------------------------ keys
    def resolve(self, key: str) -> str:
        """The full path of `key`: itself if it starts with a namespace root, else under the caller's namespace."""
        parts = working_key_segments(key)
        if parts[0] in ROOTS:
            return "/".join(entry_key_segments(key))
        return f"{self.namespace}/{'/'.join(parts)}"

    def _check_writable(self, full_key: str) -> None:
        namespace = namespace_of(full_key)
        if namespace != self.namespace and not full_key.startswith("shared/"):
            raise InvalidInputError(
                f"cannot change {full_key!r}: it belongs to namespace {namespace!r} and this caller writes only "
                f"to {self.namespace!r} and 'shared/…'; read it with its full key, or save under your own key"
            )

    # ------------------------------------------------------------------ operations
    def save(
        self,
        key: str,
        data: str,
        ttl_minutes: float = 5,
        category: str | None = None,
        tags: list[str] | None = None,
    ) -> WorkingSaved:
        full_key = self.resolve(key)
        self._check_writable(full_key)
        limit = self.settings.working_max_value_bytes
        advice = "Save a summary, or split it over several keys (serialise structured results as JSON)."
        check_text(data, "data", limit, "ROCKMEM_WORKING_MAX_VALUE_BYTES", advice)
        room = self.settings.working_max_namespace_bytes
        advice = "Save a summary, or keep it in long-term memory; a namespace's values together stay under this bound."
        check_text(data, "data", room, "ROCKMEM_WORKING_MAX_NAMESPACE_BYTES", advice)
        if isinstance(ttl_minutes, bool) or not isinstance(ttl_minutes, int | float):
            raise InvalidInputError("ttl_minutes must be a number")
        if not 0 < ttl_minutes <= self.settings.working_max_ttl_minutes:
            raise InvalidInputError(
                f"ttl_minutes must be above 0 and at most {self.settings.working_max_ttl_minutes:g}; "
                "for something to keep, use save_memory"
            )
        now = self._clock()
        entry = WorkingEntry(
            key=full_key,
            data=data,
            category=normalize_category(category),
            tags=normalize_tags(tags, self.settings.max_tags),
            created_at=now,
            expires_at=now + timedelta(minutes=ttl_minutes),
        )
        with self.files.changing(full_key.split("/")[0]) as entries:
            drop_expired(entries, now)
            entries.pop(full_key, None)
            entries[full_key] = entry.model_dump(mode="json")
            namespaces = {namespace_of(full_key)}
            evicted = make_room(entries, self.settings.working_max_entries, namespaces, keep=full_key, max_bytes=room)
        return WorkingSaved(entry=self._info(entry, now), evicted=evicted[0] if evicted else None, evicted_keys=evicted)

    def get(self, key: str) -> WorkingEntry:
        full_key = self.resolve(key)
        now = self._clock()
        raw = self.files.read(full_key.split("/")[0]).get(full_key)
        entry = self._live({full_key: raw}, now).get(full_key) if raw is not None else None
        if entry is None:
            raise NotFoundError(
                f"no working-memory entry {full_key!r} (never saved, deleted, or expired); "
                "working_memory list shows what is there"
            )
        return entry

    def delete(self, key: str) -> bool:
        """Remove an entry; False if it was not there (or had expired)."""
        full_key = self.resolve(key)
        self._check_writable(full_key)
        with self.files.changing(full_key.split("/")[0]) as entries:
            drop_expired(entries, self._clock())
            return entries.pop(full_key, None) is not None

    def list(self, namespace: str | None = None) -> list[WorkingInfo]:
        """Live entries (no values) of `namespace` (a namespace or a root such as 'patrol'); default: the
        caller's own and `shared/…`. Soonest to expire first."""
        now = self._clock()
        found = [self._info(e, now) for e in self._visible(namespace, now)]
        return sorted(found, key=lambda info: (info.expires_at, info.key))

    def search(
        self,
        query: str | None = None,
        category: str | None = None,
        tags: list[str] | None = None,
        namespace: str | None = None,
        limit: int = 20,
        key_suffix: str = "",
    ) -> list[WorkingSearchHit]:
        """Entries ranked by the shared ranker (BM25 over key, category, tags and data, fused with embedding
        similarity as `search_mode` says when embeddings are configured); newest first without a query.
        Filters: category prefix, all tags, keys ending in `key_suffix`."""
        if query:
            check_text(query, "query", self.settings.max_content_bytes, "ROCKMEM_MAX_CONTENT_BYTES", "Shorten it.")
        now = self._clock()
        wanted_category = normalize_category(category)
        wanted_tags = {tag_key(t) for t in normalize_tags(tags, self.settings.max_tags)}
        candidates = [
            e
            for e in self._visible(namespace, now)
            if e.key.endswith(key_suffix)
            and (
                wanted_category is None
                or e.category == wanted_category
                or (e.category or "").startswith(wanted_category + "/")
            )
            and wanted_tags <= {tag_key(t) for t in e.tags}
        ]
        tokens = tokenize(query) if query else []
        if not tokens:
            if query and query.strip():
                return []
            newest = sorted(candidates, key=lambda e: e.created_at, reverse=True)[:limit]
            return [self._hit(e, now, None) for e in newest]
        index = BM25Index()
        index.add_many([(e.key, tokenize(e.document_text()), False) for e in candidates])
        mode = self.settings.search_mode
        fused = None
        if self.vectors is not None and uses_vectors(mode):
            fused = self.vectors.similarities(query, candidates)
        similarity, with_vector = fused or (None, np.zeros(index.slot_count, dtype=bool))
        ranking = Ranking(mode, self.settings.hybrid_vector_weight, self.settings.hybrid_min_similarity)
        hits = rank(ranking, index.scores(tokens), similarity, with_vector, limit)
        return [self._hit(candidates[s], now, float(v)) for s, v in zip(hits.slots, hits.scores, strict=True)]

    # ------------------------------------------------------------------ helpers
    def _visible(self, namespace: str | None, now: datetime) -> list[WorkingEntry]:
        if namespace is None:
            scopes = [self.namespace, "shared"]
        else:
            parts = working_key_segments(namespace, "namespace")
            if parts[0] not in ROOTS or len(parts) > 2:
                raise InvalidInputError(
                    f"invalid namespace {namespace!r}: use e.g. 'session/<id>', 'patrol', 'subagent/<task>', 'shared'"
                )
            scopes = ["/".join(parts)]
        found: list[WorkingEntry] = []
        prefixes = tuple(scope + "/" for scope in scopes)
        for root in dict.fromkeys(scope.split("/")[0] for scope in scopes):
            # Only the wanted keys are validated: a root's other namespaces may hold megabytes of values.
            wanted = {key: raw for key, raw in self.files.read(root).items() if key.startswith(prefixes)}
            found += self._live(wanted, now).values()
        return found

    @staticmethod
    def _live(entries: dict[str, dict[str, Any]], now: datetime) -> dict[str, WorkingEntry]:
        live = {}
        for key, raw in entries.items():
            try:
                entry = WorkingEntry.model_validate(raw)
            except ValueError:
                continue  # a damaged record is skipped; the file itself was reported when read
            if entry.expires_at > now:
                live[key] = entry
        return live

    @staticmethod
    def _info(entry: WorkingEntry, now: datetime) -> WorkingInfo:
        return WorkingInfo(
            key=entry.key,
            category=entry.category,
            tags=entry.tags,
            created_at=entry.created_at,
            expires_at=entry.expires_at,
            expires_in=format_remaining(entry.expires_at - now),
            size=len(entry.data.encode("utf-8")),
        )

    def _hit(self, entry: WorkingEntry, now: datetime, score: float | None) -> WorkingSearchHit:
        preview = entry.data[:PREVIEW_CHARS] + ("…" if len(entry.data) > PREVIEW_CHARS else "")
        return WorkingSearchHit(info=self._info(entry, now), preview=preview, score=score)


def namespace_of(full_key: str) -> str:
    """The namespace of a full key: its first two segments."""
    return "/".join(full_key.split("/")[:2])


def make_room(
    entries: dict[str, dict[str, Any]],
    cap: int,
    namespaces: set[str],
    keep: str | None = None,
    max_bytes: int | None = None,
) -> list[str]:
    """Evict from each of `namespaces` the entries closest to expiry (never `keep`) until it holds at most `cap`
    entries and, given `max_bytes`, at most that many bytes of values (a save and a restore alike); the keys
    evicted, closest to expiry first."""
    members: dict[str, list[str]] = {namespace: [] for namespace in namespaces}
    for key in entries:
        members.get(namespace_of(key), []).append(key)
    evicted: list[str] = []
    for keys in members.values():
        count, size = len(keys), (sum(data_bytes(entries[k]) for k in keys) if max_bytes is not None else 0)
        closest = sorted((k for k in keys if k != keep), key=lambda k: (entries[k]["expires_at"], k))
        for key in closest:
            if count <= cap and (max_bytes is None or size <= max_bytes):
                break
            evicted.append(key)
            count, size = count - 1, size - (data_bytes(entries[key]) if max_bytes is not None else 0)
    for key in evicted:
        del entries[key]
    return evicted


def data_bytes(raw: Any) -> int:
    """UTF-8 bytes of a stored entry's value (0 for a damaged record, which the next rewrite drops anyway)."""
    data = raw.get("data") if isinstance(raw, dict) else None
    if not isinstance(data, str):
        return 0
    return len(data) if data.isascii() else len(data.encode("utf-8", "surrogatepass"))


def working_store(settings: Settings) -> WorkingFiles:
    """Where working memory lives: the home's files, or the database several replicas share (ROCKMEM_STORE)."""
    if is_database_url(settings.store):
        from rockmem_mcp.storage.pg import shared_database
        from rockmem_mcp.working.postgres import PgWorkingRows

        db = shared_database(str(settings.store), "working", settings.store_schema)
        return PgWorkingRows(db)  # type: ignore[return-value]
    return WorkingFiles(settings.working_dir)


def store_clock(files: WorkingFiles, clock: Callable[[], datetime]) -> Callable[[], datetime]:
    """What entries expire by: the clock given (a test's), or by default the store's own (a database's time, which
    every replica shares; a home's is this machine's)."""
    return getattr(files, "clock", clock) if clock is utc_now else clock


def sweep_expired(settings: Settings, clock: Callable[[], datetime] = utc_now) -> int:
    """Drop expired entries from every working-memory file on the home; the number dropped. A file with
    nothing expired is left untouched (no lock, no write)."""
    files = working_store(settings)
    clock = store_clock(files, clock)
    dropped = 0
    for root in ROOTS:
        now = clock()
        if all(_expires_after(raw, now) for raw in files.read(root).values()):
            continue
        with files.changing(root) as entries:
            before = len(entries)
            drop_expired(entries, now)
            dropped += before - len(entries)
    return dropped


def drop_expired(entries: dict[str, dict[str, Any]], now: datetime) -> None:
    for key in [k for k, raw in entries.items() if not _expires_after(raw, now)]:
        del entries[key]


def _expires_after(raw: Any, now: datetime) -> bool:
    try:
        return as_utc(datetime.fromisoformat(raw["expires_at"])) > now
    except (TypeError, KeyError, ValueError):
        return False  # a damaged record goes with the next rewrite


def format_remaining(left: timedelta) -> str:
    """'4m32s', '1h05m', '12s' — how recall shows time to expiry."""
    seconds = max(0, int(left.total_seconds()))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"
