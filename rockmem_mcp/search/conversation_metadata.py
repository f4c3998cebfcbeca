"""The conversation-memory contract: four metadata keys a memory from a conversation may carry.

| key       | value                                                  | read by                                  |
|-----------|--------------------------------------------------------|------------------------------------------|
| `session` | the conversation it comes from (any string)            | neighbours: a session's memories in order |
| `turn`    | its place in the session, a number (0, 1, 2 ...)      | the order of memories saved at one instant |
| `speaker` | who said it ("Caroline", "user")                       | a query naming the speaker lifts it      |
| `date`    | when: ISO ("2023-05-08") or as written ("8 May, 2023") | a query naming that month lifts it       |

Written by a compaction (`session`, `date`), by `import` (from an import line's top-level fields of these names,
numbering `turn` in file order within each session when a line gives none) and by any client through
`metadata`. Plain strings, like all metadata; nothing else about a memory changes.
"""

from __future__ import annotations

import math
from typing import Any

SESSION_KEY = "session"
TURN_KEY = "turn"
SPEAKER_KEY = "speaker"
DATE_KEY = "date"
KEYS = (SESSION_KEY, TURN_KEY, SPEAKER_KEY, DATE_KEY)


def conversation_metadata(
    session: str | None = None, turn: int | None = None, speaker: str | None = None, date: str | None = None
) -> dict[str, str]:
    """The contract's keys for the values given (None: left out)."""
    values = (session, None if turn is None else str(turn), speaker, date)
    return {key: value for key, value in zip(KEYS, values, strict=True) if value}


MAX_TURN = 2**53  # exact as a float: beyond it, turns would not count up


def turn_number(turn: object) -> float:
    """A memory's `turn` as a number ("12" -> 12.0); 0 when it has none or it is not a finite number (a
    non-string, which metadata checks refuse, included)."""
    if not isinstance(turn, str):
        return 0.0
    try:
        number = float(turn.strip())
    except ValueError:
        return 0.0
    return number if math.isfinite(number) and abs(number) <= MAX_TURN else 0.0


class TurnCounter:
    """Moves an import line's top-level `session`, `turn`, `speaker` and `date` into its metadata (metadata of the
    same name wins), numbering the turns of each session in file order where a line gives no `turn`."""

    def __init__(self) -> None:
        self.next_turn: dict[str, int] = {}

    def __call__(self, record: dict[str, Any]) -> dict[str, Any]:
        given = {key: record[key] for key in KEYS if key in record}
        if not given:
            return record
        if any(not isinstance(value, str | int | float) or isinstance(value, bool) for value in given.values()):
            raise ValueError(f"{', '.join(sorted(given))}: each must be a string (turn may be a number)")
        metadata = record.get("metadata")
        if metadata is not None and not isinstance(metadata, dict):
            return record  # the record's own check names the bad metadata
        merged = {key: str(value) for key, value in given.items()} | dict(metadata or {})
        session = merged.get(SESSION_KEY)
        if isinstance(session, str) and session:
            if TURN_KEY in merged:  # the next line without a turn follows it
                self.next_turn[session] = int(turn_number(merged[TURN_KEY])) + 1
            else:
                merged[TURN_KEY] = str(self.next_turn.get(session, 0))
                self.next_turn[session] = int(merged[TURN_KEY]) + 1
        return {key: value for key, value in record.items() if key not in KEYS} | {"metadata": merged}
