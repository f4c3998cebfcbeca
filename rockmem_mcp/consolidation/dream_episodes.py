"""The dream's episodes pass (seed 004 §5: episodes are "read by the reflection engine during consolidation;
older episodes have their key facts extracted into the semantic graph"; §7: procedures are learned from them).

Its material is the episodes recorded since the pass last ran that log no memory (save_memory's lines say what
their memory says, which the other passes read), oldest first. A dream never changes an episode.

The pass's mark, `meta/dream-episodes.json`, says how far applied plans have read: the time of the newest
episode read and the ids of those read at that very time, so episodes sharing a time at a batch's edge are
neither skipped nor read twice. It also keeps how far an agent has been shown the episodes (`shown`): the
agent's plan moves the mark there. The mark follows when episodes happened, so an episode recorded after a
pass with an earlier time than its mark (record_episode's `at`) is not read by the pass.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime
from typing import Any, NamedTuple

from rockmem_mcp.config import Settings
from rockmem_mcp.episodes.service import Episodes
from rockmem_mcp.models import Episode, as_utc
from rockmem_mcp.procedures.service import Procedures
from rockmem_mcp.storage.atomic import atomic_write
from rockmem_mcp.storage.no_follow import make_folders, read_bytes

log = logging.getLogger(__name__)

MARK_FILE = "dream-episodes.json"
PROCEDURES_LISTED = 200  # known procedures the directive names (as many as the graph's entity names)


class EpisodeMark(NamedTuple):
    """How far the episodes pass has read: the newest episode's time, and the ids of those read at that time."""

    at: datetime
    ids: frozenset[str]

    def covers(self, episode: Episode) -> bool:
        return episode.at < self.at or (episode.at == self.at and episode.id in self.ids)


def later(a: EpisodeMark | None, b: EpisodeMark | None) -> EpisodeMark | None:
    """The further of two marks; at the same time, the ids of both."""
    if a is None or b is None:
        return b if a is None else a
    if a.at == b.at:
        return EpisodeMark(a.at, a.ids | b.ids)
    return a if a.at > b.at else b


def mark_after(episodes: list[Episode], through: EpisodeMark | None) -> EpisodeMark | None:
    """The mark just past `episodes`, read after `through`."""
    if not episodes:
        return through
    newest = max(episode.at for episode in episodes)
    return later(through, EpisodeMark(newest, frozenset(e.id for e in episodes if e.at == newest)))


class EpisodeMarks:
    """The pass's state file: `through` (what applied plans have read) and `shown` (what an agent was shown)."""

    def __init__(self, settings: Settings) -> None:
        self.directory = settings.meta_dir
        self.path = settings.meta_dir / MARK_FILE

    def read(self) -> tuple[EpisodeMark | None, EpisodeMark | None]:
        """(through, shown); an unreadable file counts as none (the episodes are read again: a fact already
        remembered is refused as such, a procedure with the same steps is left as it is)."""
        try:
            data = json.loads(read_bytes(self.path))
            return _parsed(data.get("through")), _parsed(data.get("shown"))
        except FileNotFoundError:
            return None, None
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            log.warning("%s cannot be read (%s); the episodes pass reads every episode again", self.path, exc)
            return None, None

    def show(self, mark: EpisodeMark | None) -> None:
        """An agent was shown the episodes up to `mark`: its plan for the pass moves the mark there."""
        through, shown = self.read()
        if mark is not None and later(shown, mark) != shown:
            self._write(through, later(shown, mark))

    def advance(self, mark: EpisodeMark | None) -> None:
        """A plan was applied over the episodes up to `mark`: the next material starts after it."""
        through, shown = self.read()
        moved = later(through, mark)
        left = None if later(moved, shown) == moved else shown  # shown beyond the mark: a plan still to come
        if (moved, left) != (through, shown):
            self._write(moved, left)
        if moved is not None and moved != through:
            log.info("dream: episodes read through %s", moved.at.isoformat())

    def _write(self, through: EpisodeMark | None, shown: EpisodeMark | None) -> None:
        make_folders(self.directory)
        record = {"through": _record(through), "shown": _record(shown)}
        atomic_write(self.path, json.dumps(record, indent=2).encode() + b"\n")


def _record(mark: EpisodeMark | None) -> dict[str, Any] | None:
    return None if mark is None else {"at": mark.at.isoformat(), "ids": sorted(mark.ids)}


def _parsed(record: Any) -> EpisodeMark | None:
    if record is None:
        return None
    ids = record["ids"]
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise ValueError("ids is not a list of episode ids")
    return EpisodeMark(as_utc(datetime.fromisoformat(record["at"])), frozenset(ids))


def unread(episodes: Episodes, through: EpisodeMark | None, offset: int, count: int) -> tuple[list[Episode], int]:
    """`count` episodes from `offset` of those after `through` that log no memory, oldest first, and how many
    there are in all."""
    seen = len(through.ids) if through is not None else 0
    found = episodes.search(limit=offset + count + seen, since=through.at if through else None, unlogged=True)
    fresh = [hit.episode for hit in found.hits if through is None or not through.covers(hit.episode)]
    total = found.total_matches - (len(found.hits) - len(fresh))
    return fresh[offset : offset + count], max(total, len(fresh))


def unknown_episodes(episodes: Episodes, ids: list[str]) -> list[str]:
    """Those of `ids` that name no episode in the store."""
    index = episodes.index
    with index.lock:
        index.sync()
        return [episode_id for episode_id in dict.fromkeys(ids) if index.slot(episode_id) is None]


def episode_line(episode: Episode) -> str:
    """`[id] YYYY-MM-DD HH:MM type (confidence) #tags: content` (UTC; the content on one line)."""
    tags = f" #{' #'.join(episode.tags)}" if episode.tags else ""
    when = f"{episode.at:%Y-%m-%d %H:%M}"
    return f"[{episode.id}] {when} {episode.type} ({episode.confidence}){tags}: {' '.join(episode.content.split())}"


def known_procedures(procedures: Procedures) -> str:
    """The procedures there are, one line each with its trigger phrases, for the directive."""
    listed = procedures.list()[:PROCEDURES_LISTED]
    return "\n".join(f"- {p.name} (trigger: {'; '.join(p.trigger)})" for p in listed) or "(none yet)"
