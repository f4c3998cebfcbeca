"""PostgreSQL as the shared store behind several server replicas (`ROCKMEM_STORE=postgresql://…`).

The database holds the truth; each replica keeps its own in-memory index, built from it, and catches up on the
others' writes through one ordered change table: `changes.seq` is the position a replica has read to (as a file
home's journal offset), and `NOTIFY rockmem_changes` only wakes. Change rows are inserted under a
transaction-level advisory lock, so their sequence numbers commit in order: a reader that has seen seq N has seen
every change before it.

Schema migrations are numbered and applied by the server itself at start, in one transaction per step, under an
advisory lock: two replicas starting at once apply each step once, and a started replica never sees half a schema.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, NoReturn
from urllib.parse import urlsplit

from rockmem_mcp.errors import ConfigError, StorageError

log = logging.getLogger(__name__)

SCHEMA_LOCK = 7_261_001  # advisory lock keys (an arbitrary constant per purpose)
CHANGES_LOCK = 7_261_002
LOGS_LOCK = 7_261_003  # was the id locks' single-key base; they use the two-int form now
DREAM_LOCK = 7_261_004
PROPOSALS_LOCK = 7_261_005
PROCEDURES_LOCK = 7_261_006
CORE_LOCK = 7_261_007
REFLECTION_LOCK = 7_261_008
FORGET_LOCK = 7_261_009
AUDIT_FOLD_LOCK = 7_261_010
NOTIFY_CHANNEL = "rockmem_changes"

# (version, statements): applied in order, each once; never edit one that has shipped, add the next.
MIGRATIONS: list[tuple[int, list[str]]] = [
    (
        1,
        [
            "CREATE TABLE IF NOT EXISTS rockmem_meta (key text PRIMARY KEY, value text NOT NULL)",
            "INSERT INTO rockmem_meta (key, value) VALUES ('epoch', md5(random()::text || clock_timestamp()::text))"
            " ON CONFLICT (key) DO NOTHING",
            "CREATE TABLE IF NOT EXISTS memories (id text PRIMARY KEY, category text, doc text NOT NULL)",
            "CREATE TABLE IF NOT EXISTS changes (seq bigserial PRIMARY KEY, writer text NOT NULL,"
            " record jsonb NOT NULL, at timestamptz NOT NULL DEFAULT now())",
        ],
    ),
    (
        2,
        [
            "CREATE TABLE IF NOT EXISTS snapshots (name text NOT NULL, part integer NOT NULL, seq bigint NOT NULL,"
            " data bytea NOT NULL, at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (name, part))",
        ],
    ),
    (3, ["CREATE TABLE IF NOT EXISTS working (root text PRIMARY KEY, entries text NOT NULL)"]),
    (4, ["CREATE TABLE IF NOT EXISTS vectors (id text PRIMARY KEY, data bytea NOT NULL)"]),
    (5, ["INSERT INTO rockmem_meta (key, value) VALUES ('pruned_through', '0') ON CONFLICT (key) DO NOTHING"]),
    (
        6,
        [
            "CREATE TABLE IF NOT EXISTS daily_logs (seq bigserial PRIMARY KEY, log text NOT NULL, day date NOT NULL,"
            " line text NOT NULL)",
            "CREATE INDEX IF NOT EXISTS daily_logs_by_day ON daily_logs (log, day, seq)",
        ],
    ),
    (7, ["CREATE TABLE IF NOT EXISTS proposals (id text PRIMARY KEY, doc text NOT NULL)"]),
    (8, ["CREATE TABLE IF NOT EXISTS procedures (slug text PRIMARY KEY, doc text NOT NULL, version bigint NOT NULL)"]),
    (9, ["CREATE TABLE IF NOT EXISTS documents (name text PRIMARY KEY, body bytea NOT NULL, version bigint NOT NULL)"]),
    (10, ["CREATE TABLE IF NOT EXISTS reflections (number integer PRIMARY KEY, doc text NOT NULL)"]),
    (11, ["CREATE TABLE IF NOT EXISTS dream_reports (id text PRIMARY KEY, doc text NOT NULL)"]),
    (
        12,
        [
            "CREATE TABLE IF NOT EXISTS graph_records (kind char(1) NOT NULL, id text NOT NULL, doc text NOT NULL,"
            " PRIMARY KEY (kind, id))",
        ],
    ),
    (13, ["CREATE TABLE IF NOT EXISTS audit_lines (seq bigserial PRIMARY KEY, line text NOT NULL)"]),
    (
        14,
        [
            "CREATE TABLE IF NOT EXISTS forgotten (store text NOT NULL, key text NOT NULL, doc text NOT NULL,"
            " PRIMARY KEY (store, key))",
            "CREATE TABLE IF NOT EXISTS forget_log (seq bigserial PRIMARY KEY, line text NOT NULL)",
        ],
    ),
    (
        15,
        [
            "CREATE TABLE IF NOT EXISTS access (kind text NOT NULL, id text NOT NULL, count bigint NOT NULL,"
            " last double precision NOT NULL, PRIMARY KEY (kind, id))",
        ],
    ),
    # A line starts with its time (24 characters, ISO 8601 in UTC): retention finds the old ones by it.
    (16, ["CREATE INDEX IF NOT EXISTS audit_lines_by_time ON audit_lines ((left(line, 24)))"]),
]

# A database that stops answering is found out within about a minute (connecting: 10 s), not at the operating
# system's two hours: a replica cut off from it lets go of its locks, and this one stops waiting on a dead socket.
KEEPALIVE = {"connect_timeout": 10, "keepalives": 1, "keepalives_idle": 30, "keepalives_interval": 10,
             "keepalives_count": 3}  # fmt: skip

_shared: dict[tuple[str, str, str | None], Database] = {}
_shared_lock = threading.Lock()


def shared_database(url: str, purpose: str, schema: str | None = None) -> Database:
    """One Database per address, schema and purpose in this process (a store's services share its connection)."""
    with _shared_lock:
        db = _shared.get((url, purpose, schema))
        if db is None:
            db = _shared[(url, purpose, schema)] = Database(url, schema)
        return db


def close_shared(url: str, schema: str | None) -> None:
    """Close and forget this address and schema's shared connections (a tenant's stores closed, or the server's)."""
    with _shared_lock:
        gone = [key for key in _shared if key[0] == url and key[2] == schema]
        databases = [_shared.pop(key) for key in gone]
    for db in databases:
        db.close()


@contextmanager
def store_lock(db: Database, key: int, wait: bool = True) -> Iterator[bool]:
    """A store-wide lock for the body (a session advisory lock, one per schema, on a connection of its own so the
    body's queries run beside it): waited for, or with `wait=False` tried once; yields whether it was had. A
    replica that dies lets go of it with its connection."""
    conn = db.connect()
    try:
        scoped = key ^ (zlib.crc32(db.schema.encode()) if db.schema else 0)
        try:
            if wait:
                conn.execute("SELECT pg_advisory_lock(%s)", (scoped,))
                had = True
            else:
                (had,) = conn.execute("SELECT pg_try_advisory_lock(%s)", (scoped,)).fetchone()
        except db.errors as exc:
            db._failed(exc)
        yield bool(had)
    finally:
        conn.close()  # releases the lock


class StoreClock:
    """The database server's time, as this replica's clock corrected by an offset measured now and then: what
    deadlines several replicas must agree on (working memory's expiry) are measured by, whatever each machine's
    clock says. A measurement that fails keeps the last offset (none yet: this machine's time)."""

    def __init__(self, db: Database, every_s: float = 60.0) -> None:
        self.db, self.every_s = db, every_s
        self._offset_s = 0.0
        self._measured: float | None = None

    def __call__(self) -> datetime:
        if self._measured is None or time.monotonic() - self._measured > self.every_s:
            self._measure()
        return datetime.fromtimestamp(time.time() + self._offset_s, UTC)

    def _measure(self) -> None:
        self._measured = time.monotonic()
        try:
            before = time.time()
            (server,) = self.db.one("SELECT clock_timestamp()")
            after = time.time()
        except StorageError:
            return
        self._offset_s = server.timestamp() - (before + after) / 2


def redacted(url: str) -> str:
    """The store's address for logs: scheme, user, host, port and database only — never a password (in the
    address or its query, `?password=`), nor the query at all; an address that does not parse is not shown."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
        user = f"{parts.username}@" if parts.username else ""
        if ":" in host:
            host = f"[{host}]"
        return f"{parts.scheme}://{user}{host}{port}{parts.path}" + ("?…" if parts.query else "")
    except ValueError:
        return f"{url.split(':', 1)[0]}://(an address that does not parse)"


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def is_database_url(store: str | None) -> bool:
    return bool(store) and str(store).startswith(("postgresql://", "postgres://"))


class Database:
    """One connection per purpose (queries, held advisory locks), opened lazily; a thread lock each, as a psycopg
    connection carries one transaction at a time."""

    def __init__(self, url: str, schema: str | None = None) -> None:
        try:
            import psycopg
        except ImportError:
            raise ConfigError(
                "ROCKMEM_STORE names a PostgreSQL database, but psycopg is not installed: "
                "pip install 'rockmem-mcp[postgres]'"
            ) from None
        self.url = url
        self.schema = schema  # a tenant's tables, in a schema of their own (made by migrate)
        self._psycopg = psycopg
        self.errors = psycopg.Error  # what a caller holding a connection of its own catches
        self.lost = psycopg.OperationalError  # of those, a connection lost
        self._lock = threading.RLock()
        self._conn: Any = None
        self.writer_id = secrets.token_hex(6)
        try:
            self.migrate()
        except psycopg.Error as exc:
            self._failed(exc)
        self.epoch = str(self.one("SELECT value FROM rockmem_meta WHERE key = 'epoch'")[0])

    def connect(self) -> Any:
        try:
            options = {"options": f"-c search_path={self.schema}"} if self.schema else {}
            # Named for operators (pg_stat_activity): whose connection it is, and which tenant's.
            name = f"rockmem-mcp {self.schema}" if self.schema else "rockmem-mcp"
            return self._psycopg.connect(self.url, autocommit=True, application_name=name, **KEEPALIVE, **options)
        except self._psycopg.OperationalError as exc:
            log.warning("cannot reach the store %s: %s", redacted(self.url), _first_line(exc))
            raise StorageError("cannot reach the shared store (the server's log says why)") from None

    @property
    def conn(self) -> Any:
        if self._conn is None or self._conn.closed:
            self._conn = self.connect()
        return self._conn

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    @contextmanager
    def transaction(self) -> Iterator[Any]:
        """A cursor inside one transaction (committed on leaving, rolled back on an error)."""
        with self._lock:
            conn = self.conn
            try:
                with conn.transaction(), conn.cursor() as cursor:
                    yield cursor
            except self._psycopg.Error as exc:
                self._failed(exc)

    def one(self, query: str, params: tuple[Any, ...] = ()) -> tuple[Any, ...]:
        rows = self.all(query, params)
        if not rows:
            raise StorageError(f"the shared store answered nothing to {query.split()[0]}")
        return rows[0]

    def all(self, query: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """A read: one statement, one round trip (autocommit; no BEGIN and COMMIT around it)."""
        with self._lock:
            try:
                return [tuple(row) for row in self.conn.execute(query, params).fetchall()]
            except self._psycopg.Error as exc:
                self._failed(exc)

    def _failed(self, exc: BaseException) -> NoReturn:
        """A database error as one line for the caller, saying nothing of the store's address (a tenant may read
        it); the details go to the log. The connection is made anew after a lost one."""
        if isinstance(exc, self._psycopg.OperationalError):
            self._conn = None
        log.warning("the store %s failed: %s", redacted(self.url), _first_line(exc))
        raise StorageError(f"the shared store failed ({type(exc).__name__}; the server's log says why)") from None

    def migrate(self) -> int:
        """Apply the schema steps this database lacks; returns how many. Safe when replicas start together."""
        applied = 0
        conn = self.connect()
        try:
            conn.execute("SELECT pg_advisory_lock(%s)", (SCHEMA_LOCK,))
            try:
                if self.schema:
                    conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{self.schema}"')  # a name the settings checked
                conn.execute("CREATE TABLE IF NOT EXISTS rockmem_schema (version integer PRIMARY KEY)")
                done = {row[0] for row in conn.execute("SELECT version FROM rockmem_schema").fetchall()}
                for version, statements in MIGRATIONS:
                    if version in done:
                        continue
                    with conn.transaction():
                        for statement in statements:
                            conn.execute(statement)
                        conn.execute("INSERT INTO rockmem_schema (version) VALUES (%s)", (version,))
                    applied += 1
                    log.info("store %s: applied schema step %d", redacted(self.url), version)
                newest = max(done | {v for v, _ in MIGRATIONS})
                if newest > MIGRATIONS[-1][0]:
                    raise ConfigError(
                        f"the store {redacted(self.url)} is at schema {newest}, newer than this rockmem-mcp knows "
                        f"({MIGRATIONS[-1][0]}): upgrade rockmem-mcp"
                    )
            finally:
                conn.execute("SELECT pg_advisory_unlock(%s)", (SCHEMA_LOCK,))
        finally:
            conn.close()
        return applied
