"""Where a remembered piece of information goes (seed 004 §8.2), decided by rules when no model routes it.

The seed's router is a model's classification call; this is the rule-based fallback issue 21 asks for, and
the shape every driver's answer takes (`RoutedMemory`): the store, entities, relations, 2–5 tags, a
confidence, whether core memory changes, and a one-line summary. The rules, first match wins:

| store        | when the text …                                                                               |
|--------------|-----------------------------------------------------------------------------------------------|
| `vault`      | asks to keep it for good: "never forget", "always remember", "permanently", "forever"          |
| `procedural` | is a way of doing something: "how to", "steps", "first … then", "to deploy/build/release …"     |
| `core`       | is about who the user is or what is happening now: "my name is", "I am a", "I work at", "call me" |
| `episodic`   | is an event with a time: today, yesterday, a weekday, a date, "we decided", "just finished"     |
| `semantic`   | anything else: a fact                                                                         |

Entities are the names the knowledge graph knows that the text mentions, then capitalised words that are not
sentence-initial (a person, a project); relations are left to a model (a rule cannot tell who does what). Tags
are the text's most frequent searchable words, 2 to 5. Confidence is `high` for what the user asked to
remember (every trigger), `medium` otherwise. `core_update` is true for the core store.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from datetime import UTC, datetime

from rockmem_mcp.models import RoutedEntity, RoutedMemory, RoutedStore
from rockmem_mcp.search.routing import time_period
from rockmem_mcp.search.tokenizer import STOPWORDS

Store = RoutedStore
MIN_TAGS, MAX_TAGS = 2, 5
SUMMARY_CHARS = 200

_RULES: list[tuple[Store, re.Pattern[str]]] = [
    (store, re.compile(pattern, re.IGNORECASE))
    for store, pattern in [
        ("vault", r"\b(?:never (?:ever )?forget|always remember|permanent(?:ly)?|forever|for good)\b"),
        (
            "procedural",
            r"\b(?:how to|steps? (?:to|for)|first\b.*\bthen\b|(?:to|when you) (?:deploy|build|release|"
            r"install|set up|configure|run|ship)\b|workflow|procedure)",
        ),
        (
            "core",
            r"\b(?:my name is|call me|i am an? |i'm an? |i work (?:at|for|on)|my (?:role|job|pronouns) "
            r"(?:is|are)|i live in|currently (?:working|focused) on|my priority)",
        ),
        (
            "episodic",
            r"\b(?:today|yesterday|this morning|last night|just (?:finished|shipped|decided)|we decided|"
            r"we agreed|happened)\b",
        ),
    ]
]
_CAPITALISED = re.compile(r"(?<![.!?]\s)(?<!^)\b([A-Z][\w'-]+(?:\s+[A-Z][\w'-]+)*)")
_TAG_WORD = re.compile(r"[a-zA-Z][a-zA-Z0-9-]{2,}")
# Words that say how or when, not what about: never tags.
_NOT_TAGS = frozenset(
    "never forget always remember permanently forever first then name call today yesterday morning night "
    "decided agreed happened just finished currently working work".split()
)
# A time phrase makes a fact an event; only whether one is named matters here, not its period.
_ANY_DAY = datetime(2000, 1, 3, tzinfo=UTC)


def route_memory(text: str, known_entities: Iterable[str] = (), asked: bool = True) -> RoutedMemory:
    """The rule-based route for `text`; `known_entities`: the graph's names the text mentions (as
    GraphService.mentioned finds them through its index; each is checked whole-word here, so pass those, not
    the whole graph); `asked`: the user asked to remember it (a trigger), so confidence is high."""
    flat = " ".join(text.split())
    store: Store = next((store for store, rule in _RULES if rule.search(flat)), "semantic")
    if store == "semantic" and time_period(flat, _ANY_DAY) is not None:
        store = "episodic"
    return RoutedMemory(
        store=store,
        entities=[RoutedEntity(name=name) for name in _entities(flat, known_entities)],
        tags=_tags(flat),
        confidence="high" if asked else "medium",
        core_update=store == "core",
        summary=flat if len(flat) <= SUMMARY_CHARS else flat[: SUMMARY_CHARS - 1] + "…",
    )


def _entities(text: str, known: Iterable[str]) -> list[str]:
    found: dict[str, str] = {}
    lowered = f" {text.lower()} "
    for name in known:
        if name and re.search(rf"(?<!\w){re.escape(name.lower())}(?!\w)", lowered):
            found.setdefault(name.lower(), name)
    for match in _CAPITALISED.finditer(text):
        name = match.group(1)
        key = name.lower()
        overlaps = any(key in other or other in key for other in found)  # "Acme Corp" beside a known "Acme"
        if key not in STOPWORDS and not overlaps and name not in ("I", "I'm"):
            found[key] = name
    return list(found.values())[:10]


def _tags(text: str) -> list[str]:
    words = [w.lower() for w in _TAG_WORD.findall(text) if w.lower() not in STOPWORDS | _NOT_TAGS]
    ranked = [word for word, _ in Counter(words).most_common()]
    tags = ranked[:MAX_TAGS]
    return tags if len(tags) >= MIN_TAGS else [*tags, "remembered"][: max(MIN_TAGS, len(tags))]


_IDENTITY = re.compile(
    r"\b(?:my name is|call me|i am an? |i'm an? |my (?:role|job|pronouns) (?:is|are)|i live in|i work (?:at|for))",
    re.IGNORECASE,
)
_STEP_BREAK = re.compile(r"(?:\s*(?:;|\n|(?<=[.!?])\s+|,?\s+\bthen\b,?\s*|\s+\d+[.)]\s+))", re.IGNORECASE)
_STEP_START = re.compile(r"^(?:(?:first|next|finally|and)\b[,:]?\s*|\d+[.)]\s*)", re.IGNORECASE)


def core_block(text: str) -> str:
    """The core-memory block a routed line joins: Identity for who the user is, Active Context otherwise."""
    return "Identity" if _IDENTITY.search(text) else "Active Context"


def steps_of(text: str) -> list[str]:
    """A procedure's steps read from prose: split at sentences, semicolons, numbered items and "then"."""
    parts = (_STEP_START.sub("", part.strip()).strip(" .,;") for part in _STEP_BREAK.split(text))
    steps = [part[:1].upper() + part[1:] for part in parts if part]
    return steps or [text.strip()]
