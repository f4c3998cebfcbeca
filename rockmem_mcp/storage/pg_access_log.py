"""The access log in PostgreSQL: AccessLog's interface over the `access` table (one row per used item: its use count
and last use, each only ever raised), so salience weighs every replica's uses, not only its own.

A flush upserts its batch with GREATEST (merging is idempotent, as a file home's records are) and writes the same
records as change rows in the same transaction; each replica follows the others' through the change feed, as a
file home's processes follow its journal, at most once a second (a memory read asks first; salience may lag another
replica's uses by that much). The table is the state: there is nothing to compact."""

from __future__ import annotations

import math
import time

from rockmem_mcp.storage.access_log import Access, Record, parsed_records
from rockmem_mcp.storage.pg import Database
from rockmem_mcp.storage.pg_changes import ParsedRows, PgChangeFeed, append_changes

STORE = "access"
PRUNE_EVERY_S = 600.0  # how often a flush also drops old access change rows
KEEP_S = 3600.0  # access change rows younger than this stay (a replica stalled longer misses those uses)
READ_EVERY_S = 1.0  # other replicas flush every salience_flush_s (2 s): a use reaches them within ~3 s


class PgAccessLog:
    read_only = False
    state_damaged = False

    def __init__(self, db: Database, every_s: float = READ_EVERY_S) -> None:
        self.db = db
        self.feed = PgChangeFeed(db, ParsedRows(0), store=STORE)
        self._position = self.feed.end()
        self.every_s = every_s
        self._read_at = time.monotonic()
        self._pruned_at = -math.inf  # not 0.0: monotonic time starts at boot, so a young machine never pruned

    def close(self) -> None:
        self.db.close()

    def load(self) -> list[Record]:
        self._position = self.feed.end()  # before reading: a flush meanwhile comes in the feed after it
        rows = self.db.all("SELECT kind, id, count, last FROM access")
        return [(kind, item_id, Access(int(count), float(last))) for kind, item_id, count, last in rows]

    def read_new(self) -> list[Record]:
        """Other replicas' flushes since the last read; asked of the store at most every `every_s` (a memory read
        calls this first: salience may lag another replica's uses by that much, a read never pays a round trip
        for them more often)."""
        if time.monotonic() - self._read_at < self.every_s:
            return []
        self._read_at = time.monotonic()
        read = self.feed.read_since(self._position)
        if read.gap:
            return self.load()
        self._position = read.position
        return parsed_records(read.records)

    def append(self, items: dict[tuple[str, str], Access]) -> None:
        rows = [(kind, item_id, a.count, round(a.last, 3)) for (kind, item_id), a in items.items()]
        if not rows:
            return
        with self.db.transaction() as cursor:
            cursor.executemany(
                "INSERT INTO access (kind, id, count, last) VALUES (%s, %s, %s, %s) ON CONFLICT (kind, id) DO UPDATE"
                " SET count = GREATEST(access.count, EXCLUDED.count), last = GREATEST(access.last, EXCLUDED.last)",
                rows,
            )
            records = [{"s": STORE, "k": kind, "i": item_id, "n": n, "t": t} for kind, item_id, n, t in rows]
            append_changes(cursor, self.db.writer_id, records)
        if time.monotonic() - self._pruned_at > PRUNE_EVERY_S:
            # The table holds every use; its change rows only carry them to replicas following the feed (each reads
            # it every second), so old ones go, or a read-heavy store's feed would grow without end. A transaction
            # of its own: the change-order lock the flush held is not held meanwhile.
            self._pruned_at = time.monotonic()
            with self.db.transaction() as cursor:
                cursor.execute(
                    "DELETE FROM changes WHERE record->>'s' = %s AND at < now() - make_interval(secs => %s)",
                    (STORE, KEEP_S),
                )

    def needs_compaction(self, limit_bytes: int) -> bool:
        return False
