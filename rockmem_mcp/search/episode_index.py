"""The episode index: BM25 over the episodic store's day logs, with each episode's time and where its line is.

It holds no content (a hit is read back from its day file by offset: 100,000 episodes cost postings and five
numbers each) and follows the files, so another process's episodes are found by the next search:
- a day file that grew is read from where this index stopped (only the new lines are parsed);
- a day file replaced (a delete rewrites its day) is read again from its start: another inode, a shorter file,
  or other bytes just before where the index stopped (a rewrite that got the old inode back);
- new and removed day files show in the directory's listing, read when the directory changes. Today's,
  yesterday's and the newest two days' logs are checked on every search; an append to any other day changes
  no listing, so its writer touches the directory (`touch_directory`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Protocol

import numpy as np

from rockmem_mcp.models import CONFIDENCES, EPISODE_TYPES, Episode
from rockmem_mcp.search.array_files import read_arrays, write_arrays
from rockmem_mcp.search.bm25 import ACTIVE, BM25Index, Hits, last_versions, top_k
from rockmem_mcp.search.columns import Column
from rockmem_mcp.search.strings import pack_strings, unpack_strings
from rockmem_mcp.search.tokenizer import TOKENIZER_VERSION, tokenize
from rockmem_mcp.storage.changes import JournalPosition, JournalRead
from rockmem_mcp.storage.daily_log import DailyLog
from rockmem_mcp.storage.no_follow import open_fd
from rockmem_mcp.storage.records import RACY_NS

log = logging.getLogger(__name__)

FOLLOWED_DAYS = 2  # the newest day files are checked on every search; older ones when the directory changes
TAIL_BYTES = 64


class ChangeFeed(Protocol):
    def end(self) -> JournalPosition: ...

    def read_since(self, position: JournalPosition) -> JournalRead: ...


def episode_tokens(episode: Episode) -> list[str]:
    """What an episode is found by: its content, tags and type."""
    return tokenize(" ".join([episode.content, *episode.tags, episode.type]))


@dataclass
class _Day:
    inode: int = 0
    upto: int = 0  # offset just past the last line indexed
    tail: bytes = b""  # the bytes just before `upto`: a rewrite that got the old inode back differs there
    keys: list[str] = field(default_factory=list)
    mtime_ns: int = 0  # the file's times when it was last followed: what a restored snapshot compares
    ctime_ns: int = 0
    restored: bool = False  # from a snapshot: trusted only if the file is exactly as it was, else read again


SNAPSHOT_FORMAT = 1  # bump when a column's meaning changes (EPISODE_TYPES or CONFIDENCES reordered, say)
_NEVER_LISTED = (-1, -1)  # the listing stamp before the first listing: no directory (None) has it either
SNAPSHOT_AFTER_LINES = 1_000  # lines read from the day files since the last snapshot that make warm() write one
COLUMNS = {  # name -> dtype of the per-slot columns a snapshot keeps
    "at": np.float64,
    "day": np.int32,
    "start": np.int64,
    "end": np.int64,
    "type_code": np.int8,
    "confidence_code": np.int8,
    "logs_memory": np.bool_,
    "uses": np.int32,
    "last_use": np.float64,
}


class EpisodeIndex:
    def __init__(self, log: DailyLog[Episode], snapshot: Path | None = None, feed: ChangeFeed | None = None) -> None:
        """`snapshot`: where the index is saved between starts (restored by the first sync, if it is there).
        `feed`: a database store's change feed of the log (PgDailyLog): its rows are followed through it instead
        of files, and a row's number stands for its byte range (no snapshot: a start reads the rows)."""
        self.log = log
        self.feed = feed
        self.snapshot = snapshot if feed is None else None
        self._position: JournalPosition | None = None  # how far the feed has been read
        self._fetched: dict[int, Episode] = {}  # slot -> its row, read ahead by `prefetch`
        self._empty()
        self._listing_stamp: tuple[int, int] | None = _NEVER_LISTED
        self.built = False  # every day file read once (a first sync of 100k episodes takes seconds)
        self.lock = threading.RLock()  # held by a search around sync and reads
        self.lines_since_snapshot = 0  # lines read from day files (or days dropped) since a snapshot was written
        self.clock = time.time_ns  # what "a day changed just now" is measured by (tests move it on)

    def _empty(self) -> None:
        self.bm25 = BM25Index()
        self.at = Column(np.float64)  # per slot: seconds since the epoch
        self.day = Column(np.int32)  # date ordinal
        self.start = Column(np.int64)  # the line's byte range in its day file (a database row's number: both)
        self.end = Column(np.int64)
        self.type_code = Column(np.int8)
        self.confidence_code = Column(np.int8)
        self.logs_memory = Column(np.bool_)  # written by save_memory (the memory says the same)
        self.uses = Column(np.int32)  # salience's inputs as this process knows them (its own uses at once)
        self.last_use = Column(np.float64)
        self._days: dict[date, _Day] = {}

    def __len__(self) -> int:
        return len(self.bm25)

    # ------------------------------------------------------------------ following the files
    def sync(self) -> None:
        """Catch up with the day files: one stat of the directory, and of today's, yesterday's and the newest
        two days' logs, when nothing changed."""
        with self.lock:
            if self.feed is not None:
                self._follow_rows(self.feed)
                return
            first = self._listing_stamp == _NEVER_LISTED
            if first and not self.built and self.snapshot is not None and not len(self.bm25):
                self.restore(self.snapshot)  # once: the first listing then checks every day against it
            stamp = _stamp(self.log.directory)
            if stamp != self._listing_stamp:
                days = self.log.days()
                for gone in set(self._days) - set(days):
                    self._drop_day(gone)
                for day in days:
                    self._follow(day)
                self._listing_stamp = stamp  # only once every day was followed: an error lists them all again
                self.built = True
                return
            today = datetime.now(UTC).date()
            for day in {today, today - timedelta(days=1), *sorted(self._days)[-FOLLOWED_DAYS:]}:
                self._follow(day)

    def _follow_rows(self, feed: ChangeFeed) -> None:
        """A database store: every row at the first sync (or after a gap in the feed), then the log's changes since
        the last — appended rows read by number, a day whose rows were removed read again whole."""
        self._fetched = {}  # rows may change with what follows
        read = feed.read_since(self._position) if self._position is not None else None
        if read is None or read.gap:
            position = feed.end()  # before reading: a row added meanwhile comes in the feed after it
            self._empty()
            for day in self.log.days():
                self._add_rows(day, self.log.read_positions(day)[0])
            self._position, self.built = position, True
            return
        dropped = sorted({date.fromisoformat(r["day"]) for r in read.records if r.get("op") == "drop"})
        for day in dropped:
            self._drop_day(day)
            self._add_rows(day, self.log.read_positions(day)[0])
        added = [int(r["row"]) for r in read.records if r.get("op") == "put"]
        by_day: dict[date, list[tuple[Episode, int]]] = {}
        for seq, day, episode in self.log.read_rows(added) if added else ():  # type: ignore[attr-defined]
            if episode.id not in self.bm25.slot_of:  # not read already with its day
                by_day.setdefault(day, []).append((episode, seq))
        for day, rows in by_day.items():
            self._add_rows(day, rows)
        self._position = read.position

    def _add_rows(self, day: date, rows: list[tuple[Episode, int]]) -> None:
        self._add(day, [(episode, seq, seq) for episode, seq in rows], self._days.setdefault(day, _Day()))

    def _follow(self, day: date) -> None:
        known = self._days.get(day)
        path = self.log.path(day)
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            if known is not None:
                self._drop_day(day)
            return
        if known is not None and known.restored:
            # Between two runs anything may have happened to the file, and a rewrite can end in the same bytes:
            # the saved state stands only if the file is exactly as it was (times included), else from the start.
            if (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns) == (
                known.inode, known.upto, known.mtime_ns, known.ctime_ns
            ):  # fmt: skip
                known.restored = False
                return
            self._drop_day(day)
            known = None
        elif known is not None and st.st_ino == known.inode and st.st_size == known.upto:
            return
        if known is None:
            known = self._days[day] = _Day()
        known.mtime_ns, known.ctime_ns = st.st_mtime_ns, st.st_ctime_ns  # before reading: a later change differs
        records, inode, start, data = self.log.read_from(day, known.upto, known.inode or None, known.tail)
        if start != known.upto:  # not the file it was: a delete rewrote it (same inode or not); from the start
            self._drop_day(day)
            known = self._days[day] = _Day()
        known.inode = inode
        rows = []
        for episode, end in records:
            rows.append((episode, start, end))
            start = end
        if records:
            read_through = records[-1][1] - known.upto
            known.tail = (known.tail + data[:read_through])[-TAIL_BYTES:]
            known.upto = records[-1][1]
        self._add(day, rows, known)

    def _add(self, day: date, rows: list[tuple[Episode, int, int]], known: _Day) -> None:
        rows = last_versions(rows, key=lambda row: row[0].id)  # an id twice (a copied line): its last line
        if not rows:
            return
        self.lines_since_snapshot += len(rows)
        self.bm25.add_many([(episode.id, episode_tokens(episode), False) for episode, _, _ in rows])
        at = np.array([episode.at.timestamp() for episode, _, _ in rows], dtype=np.float64)
        self.at.extend(at)
        self.last_use.extend(at)
        self.uses.extend(np.ones(len(rows), dtype=np.int32))
        self.day.extend(np.full(len(rows), day.toordinal(), dtype=np.int32))
        self.start.extend(np.array([start for _, start, _ in rows], dtype=np.int64))
        self.end.extend(np.array([end for _, _, end in rows], dtype=np.int64))
        self.type_code.extend(np.array([EPISODE_TYPES.index(e.type) for e, _, _ in rows], dtype=np.int8))
        self.confidence_code.extend(np.array([CONFIDENCES.index(e.confidence) for e, _, _ in rows], dtype=np.int8))
        self.logs_memory.extend(np.array([e.memory_id is not None for e, _, _ in rows], dtype=np.bool_))
        known.keys += [episode.id for episode, _, _ in rows]

    def _drop_day(self, day: date) -> None:
        known = self._days.pop(day, None)
        self.lines_since_snapshot += 1
        ordinal, slot_of, days = day.toordinal(), self.bm25.slot_of, self.day.view
        for key in known.keys if known else ():
            slot = slot_of.get(key)
            if slot is not None and days[slot] == ordinal:  # an id copied into a later day lives on there
                self.bm25.remove(key)

    # ------------------------------------------------------------------ snapshots
    def save(self, path: Path) -> None:
        """Write what the index knows (derived data: atomic, not fsynced), so the next start follows the day files
        from where this one stopped instead of parsing every line again (100k episodes: ~4.4 s of CPU and the
        slack of columns grown line by line)."""
        with self.lock:
            live = self.bm25.live_slots()
            arrays = self.bm25.export_arrays(live)
            arrays.update({name: getattr(self, name).view[live] for name in COLUMNS})
            # A day changed within RACY_NS of now is left out: it is read again at the next start.
            recent = self.clock() - RACY_NS
            days = sorted(
                (day, known)
                for day, known in self._days.items()
                if not known.restored and max(known.mtime_ns, known.ctime_ns) < recent
            )
            arrays.update(
                keys=pack_strings([self.bm25.keys[s] for s in live]),
                terms=pack_strings(self.bm25.snapshot_terms(arrays["term_offsets"])),
                day_ordinal=np.array([day.toordinal() for day, _ in days], dtype=np.int64),
                day_inode=np.array([known.inode for _, known in days], dtype=np.uint64),
                day_upto=np.array([known.upto for _, known in days], dtype=np.int64),
                day_mtime=np.array([known.mtime_ns for _, known in days], dtype=np.int64),
                day_ctime=np.array([known.ctime_ns for _, known in days], dtype=np.int64),
                day_tail_len=np.array([len(known.tail) for _, known in days], dtype=np.int64),
                day_tails=np.frombuffer(b"".join(known.tail for _, known in days), dtype=np.uint8),
                day_key_count=np.array([len(known.keys) for _, known in days], dtype=np.int64),
                day_keys=pack_strings([key for _, known in days for key in known.keys]),
                header=np.array([SNAPSHOT_FORMAT, TOKENIZER_VERSION, len(live)], dtype=np.int64),
            )
            self.lines_since_snapshot = 0
        write_arrays(path, arrays)

    def restore(self, path: Path) -> bool:
        """Take the state a snapshot holds (before the first sync); False, with the index left empty, when there
        is none or it is of another version or damaged. The first sync then checks every day file against it:
        a day stands only if its file is exactly as it was (inode, size, mtime, ctime), else it is read again
        from its start; days added or removed are read or dropped."""
        try:
            with open(path, "rb") as snapshot:
                arrays = read_arrays(snapshot)
            fmt, tokenizer, count = (int(x) for x in arrays["header"])
            if fmt != SNAPSHOT_FORMAT or tokenizer != TOKENIZER_VERSION:
                log.info("episode index snapshot %s is from another version; rebuilding", path)
                return False
            keys = unpack_strings(arrays["keys"])
            bm25 = BM25Index.from_arrays(arrays, keys, unpack_strings(arrays["terms"]))
            columns = {name: Column(dtype, data=arrays[name], take=True) for name, dtype in COLUMNS.items()}
            tails, offsets = arrays["day_tails"].tobytes(), np.cumsum(arrays["day_tail_len"])
            if not all(len(column) == count == len(keys) for column in columns.values()) or (
                len(offsets) and offsets[-1] != len(tails)
            ):
                raise ValueError("columns disagree")
            same = {key: key for key in keys}  # one string object per id, shared with the BM25 index's key list
            day_keys = [same.get(key, key) for key in unpack_strings(arrays["day_keys"])]
            key_ends = np.cumsum(arrays["day_key_count"]).tolist()
            if key_ends and key_ends[-1] != len(day_keys):
                raise ValueError("day keys disagree")
            days: dict[date, _Day] = {}
            for ordinal, inode, upto, mtime, ctime, end, length, key_end, key_count in zip(
                arrays["day_ordinal"].tolist(), arrays["day_inode"].tolist(), arrays["day_upto"].tolist(),
                arrays["day_mtime"].tolist(), arrays["day_ctime"].tolist(), offsets.tolist(),
                arrays["day_tail_len"].tolist(), key_ends, arrays["day_key_count"].tolist(), strict=True,
            ):  # fmt: skip
                days[date.fromordinal(ordinal)] = _Day(
                    inode,
                    upto,
                    tails[end - length : end],
                    day_keys[key_end - key_count : key_end],
                    mtime,
                    ctime,
                    restored=True,
                )
            saved_days = set(days)
            if any(date.fromordinal(o) not in saved_days for o in set(columns["day"].view.tolist())):
                # A day left out (changed just before the save) still has slots: drop them with a day of their own.
                for slot, ordinal in enumerate(columns["day"].view.tolist()):
                    day = date.fromordinal(ordinal)
                    if day not in saved_days:
                        days.setdefault(day, _Day(restored=True)).keys.append(keys[slot])
        except FileNotFoundError:
            return False
        except Exception as exc:  # derived data: whatever is wrong with it (a torn zip raises many kinds), rebuild
            log.warning("episode index snapshot %s is damaged (%s); rebuilding from the day files", path, exc)
            return False
        self.bm25, self._days = bm25, days
        for name, column in columns.items():
            setattr(self, name, column)
        return True

    # ------------------------------------------------------------------ reading
    def live(self) -> np.ndarray:
        return self.bm25.state.view == ACTIVE

    def search(
        self, tokens: list[str], allowed: np.ndarray | None, limit: int, weigh: Callable[[np.ndarray], np.ndarray]
    ) -> Hits:
        """The best `limit` slots for `tokens` (BM25 × `weigh`), among `allowed`."""
        scores = self.bm25.scores(tokens, allowed)
        slots = np.flatnonzero(scores > 0)
        values = scores[slots] * weigh(slots)
        order = top_k(slots, values, limit)
        return Hits(slots[order], values[order], len(slots))

    def read(self, slot: int) -> Episode | None:
        """The episode in `slot`, read from its day file (None if its file changed under it: sync again)."""
        day = date.fromordinal(int(self.day.view[slot]))
        start, end = int(self.start.view[slot]), int(self.end.view[slot])
        if self.feed is not None:  # a database row, by its number (fetched with the search's other hits, or alone)
            fetched = self._fetched.pop(slot, None)
            if fetched is None:
                rows = self.log.read_rows([start])  # type: ignore[attr-defined]
                fetched = rows[0][2] if rows else None
            return fetched if fetched is not None and fetched.id == self.bm25.keys[slot] else None
        try:
            fd = open_fd(self.log.path(day), os.O_RDONLY)
        except (FileNotFoundError, OSError):
            return None
        try:
            line = os.pread(fd, end - start, start)
        finally:
            os.close(fd)
        # The range starts where the previous indexed line ended: an unreadable line skipped between them (a torn
        # write) comes first, so the episode is the range's last line.
        line = line.rstrip(b"\r\n").rsplit(b"\n", 1)[-1]
        try:
            episode = Episode.model_validate_json(line)
        except ValueError:
            return None
        return episode if episode.id == self.bm25.keys[slot] else None

    def prefetch(self, slots: list[int]) -> None:
        """A database store: these slots' rows in one query, for the reads that follow (a search's hits), instead of
        a round trip each. What is not read is dropped at the next prefetch or sync. A file home: nothing to do."""
        self._fetched = {}
        if self.feed is None or not slots:
            return
        by_row = {int(self.start.view[slot]): slot for slot in slots}
        for row, _, episode in self.log.read_rows(list(by_row)):  # type: ignore[attr-defined]
            self._fetched[by_row[row]] = episode

    def day_counts(self) -> list[tuple[date, int]]:
        return [(day, len(self._days[day].keys)) for day in sorted(self._days) if self._days[day].keys]

    def slot(self, key: str) -> int | None:
        return self.bm25.slot_of.get(key)

    def set_use(self, slot: int, count: int, last: float) -> None:
        self.uses[slot] = max(count, int(self.uses.view[slot]))
        self.last_use[slot] = max(last, float(self.last_use.view[slot]))

    def key(self, slot: int) -> str:
        return self.bm25.keys[slot]


def _stamp(directory: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(directory)
    except FileNotFoundError:
        return None
    return st.st_mtime_ns, st.st_ctime_ns


def touch_directory(directory: Path) -> None:
    """Tell followers a day beyond the newest two changed (its listing did not)."""
    with contextlib.suppress(OSError):  # followers then see it when the directory next changes, or at a start
        os.utime(directory)
