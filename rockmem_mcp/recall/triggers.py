"""Trigger detection (seed 004 §8.1): does a message ask to remember, forget, reflect or search, and about what?

A light check on every message, no model: the seed's phrases, matched case-insensitively as whole words. The
phrase that starts first wins (the longest at one place), so "don't forget about the dentist" is a remember
("don't forget"), not a forget ("forget about"). A match is left out when it is negated just before ("don't
remember that", "no need to note that", "never disregard"), quoted ("she said 'remember that'"), said of oneself
("I remember that well", "we note that it rains"), or asked about rather than asked for ("do you remember that
day?" is a search: "do you remember" is a search phrase and starts first). The span is what the phrase applies
to: the rest of its sentence, less a leading "that", "about", "to", ":" or ",".

The phrase lists can be replaced per intent by `triggers.json` in the data home, e.g.
`{"remember": ["remember that", "merk dir"], "forget": ["vergiss"]}`; an intent the file leaves out keeps the
seed's list. A file that cannot be used is reported once and the seed's lists are used.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from rockmem_mcp.audit.service import TRIGGER_REMEMBER, acting_as, bot_actor
from rockmem_mcp.errors import RockmemError
from rockmem_mcp.governance.forgetting import Forgetting
from rockmem_mcp.models import ForgetCandidate, Remembered, TriggerFound
from rockmem_mcp.recall.remembering import Remembering
from rockmem_mcp.storage.no_follow import read_bytes_and_stat

log = logging.getLogger(__name__)

Intent = Literal["remember", "forget", "reflect", "search", "none"]
INTENTS: tuple[str, ...] = ("remember", "forget", "reflect", "search")

# The seed's phrases (004 §8.1), with the spellings people type for them (no apostrophe, "do not") and their
# common variants ("remember this", "do you recall"). A leading "^" means at the start of a sentence: an
# imperative ("Remember my flight is at 9", "Forget the thing about X"), not the verb anywhere.
SEED_PHRASES: dict[str, tuple[str, ...]] = {
    "remember": (
        *("remember that", "remember:", "don't forget", "dont forget", "do not forget", "keep in mind"),
        *("note that", "important:", "for future reference", "save this", "fyi for later"),
        *("^remember", "please remember", "pls remember", "make sure you remember", "remember this"),
        *("don't ever forget", "keep this in mind", "note:", "important \u2014", "important -", "make a note"),
        *("memorize this", "memorise this", "store this", "add to your memory", "save to your memory"),
    ),
    "forget": (
        *("forget about", "forget that", "never mind about", "nevermind about", "disregard"),
        *("that's no longer relevant", "that is no longer relevant", "scratch that", "ignore what i said about"),
        *("remove from memory", "remove from your memory", "delete the memory about", "delete the memories about"),
        *("^forget", "please forget", "you can forget", "ignore what i said earlier about", "is no longer relevant"),
        *("wipe your memory of", "delete what you remember about", "stop remembering", "forget everything"),
    ),
    "reflect": (
        *("reflect on", "consolidate your memories", "review your memories", "clean up your memory"),
        *("tidy up your memory", "go through your memories", "memory review", "run a reflection"),
    ),
    "search": (
        *("what do you remember about", "do you remember", "what do you know about", "what do you recall about"),
        *("do you recall", "do you still remember", "what do you remember", "what have you stored about"),
        *("what's in your memory about", "search your memory", "what did i tell you about", "look up what you"),
    ),
}
CONFIG_FILE = "triggers.json"
MAX_PHRASES = 200
MAX_PHRASE_CHARS = 100
_NEGATION = re.compile(
    r"(?:\b(?:don'?t|do not|never|no need to|not|no)\s+(?:(?:ever|really|have to|need to|want you to)\s+)?)$",
    re.IGNORECASE,
)
# "I remember that well", "we note that it rains": a statement about oneself, not a request.
# "you remember that hotel?" asks; "could you remember that …", "please, you note that …" request.
_STATEMENT = re.compile(
    r"(?:\b(?:i|we|they|he|she|it|i'll|we'll|i\u2019ll|we\u2019ll)|(?<!can )(?<!could )(?<!would )(?<!will )"
    r"(?<!please )\byou|\b(?:told|asked) (?:me|us) to)"
    r"\s+(?:(?:really|still|also|do|did|can|could|always|just|clearly|will|need to|want to|have to)\s+)?$",
    re.IGNORECASE,
)
_QUOTES = {'"': '"', "\u201c": "\u201d", "\u2018": "\u2019", "`": "`"}
_QUOTE_CHARS = tuple(dict.fromkeys([*_QUOTES, *_QUOTES.values()]))
CONTEXT_CHARS = 80  # what precedes a match that can negate it or make it a statement
MAX_MATCHES = 200  # a message naming more phrases than this is not looked at further
SCAN_CHARS = 2_000
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'\u201c])|\n")
_ABBREVIATIONS = frozenset(
    "dr mr mrs ms mx prof st jr sr rev gen capt lt sgt col mt ft no vs etc approx dept inc ltd co corp e.g i.e".split()
)
_LEADING = re.compile(r"^[\s,:;\-\u2014]*(?:(?:that|about|to)\b[\s,:]*)?", re.IGNORECASE)


@dataclass(frozen=True)
class Trigger:
    intent: Intent
    phrase: str = ""  # the phrase as found in the message
    span: str = ""  # what it applies to (may be empty: "scratch that" names nothing)


NONE = Trigger("none")


class TriggerDetector:
    def __init__(self, phrases: Mapping[str, Sequence[str]] = SEED_PHRASES) -> None:
        by_intent = {intent: tuple(phrases.get(intent, SEED_PHRASES[intent])) for intent in INTENTS}
        entries = sorted(
            ((phrase.lower().strip(), intent) for intent, listed in by_intent.items() for phrase in listed),
            key=lambda entry: -len(entry[0]),
        )
        self.intent_of = {phrase: intent for phrase, intent in entries if phrase}
        alternatives = "|".join(_pattern(phrase) for phrase in self.intent_of)
        self._pattern = re.compile(alternatives, re.IGNORECASE) if alternatives else None

    def detect(self, message: str) -> Trigger:
        """The first trigger in `message` that is neither negated, quoted nor said of oneself; NONE otherwise.
        Only its first SCAN_CHARS characters are looked at (a long paste's words are not a request), what
        precedes a match is judged by its last few words, quotes by running counts, at most MAX_MATCHES
        matches: a few milliseconds at worst."""
        if self._pattern is None:
            return NONE
        quotes = dict.fromkeys(_QUOTE_CHARS, 0)
        counted = 0
        for n, found in enumerate(self._pattern.finditer(message, 0, SCAN_CHARS)):
            if n >= MAX_MATCHES:
                break
            start = found.start()
            for char in _QUOTE_CHARS:
                quotes[char] += message.count(char, counted, start)
            counted = start
            before = message[max(0, start - CONTEXT_CHARS) : start]
            if _NEGATION.search(before) or _inside_quotes(quotes):
                continue
            phrase = " ".join(found.group(0).lower().split())
            if phrase not in self.intent_of and f"^{phrase}" in self.intent_of:
                phrase = f"^{phrase}"
            if _STATEMENT.search(before) and not phrase.startswith(("do you", "what do you")):
                continue
            intent = self.intent_of.get(phrase) or self.intent_of.get(phrase.replace("\u2019", "'"))
            if intent is None:
                continue
            return Trigger(intent, found.group(0), _span(message, found.end()))  # type: ignore[arg-type]
        return NONE


def _pattern(phrase: str) -> str:
    """A phrase as a case-insensitive regex: whole words at its word-character ends, any spacing inside, and
    a typographic apostrophe wherever it has a plain one; a leading "^": at a sentence's start."""
    sentence_start = phrase.startswith("^")
    phrase = phrase.lstrip("^")
    body = r"\s+".join(re.escape(word).replace("'", "['\u2019]") for word in phrase.split())
    if sentence_start:
        return rf"(?:^|(?<=[.!?;:] )|(?<=\n))\s*{body}\b"
    start = r"\b" if phrase[:1].isalnum() else ""
    end = r"\b" if phrase[-1:].isalnum() else ""
    return f"{start}{body}{end}"


def _inside_quotes(counts: Mapping[str, int]) -> bool:
    """Whether a match sits inside quotation marks opened before it (`counts`: each quote character so far)."""
    for opening, closing in _QUOTES.items():
        if opening == closing:
            if counts[opening] % 2 == 1:
                return True
        elif counts[opening] > counts[closing]:
            return True
    return False


def _span(message: str, start: int) -> str:
    """The rest of the phrase's sentence, less a leading "that", ":" or ","; trailing punctuation kept off."""
    rest = _LEADING.sub("", message[start:], count=1)
    sentence = rest
    for end in _SENTENCE_END.finditer(rest):
        before = rest[: end.start()]
        word = before.rsplit(None, 1)[-1].rstrip(".").lower() if before.strip() else ""
        if "\n" not in end.group(0) and before.endswith(".") and (word in _ABBREVIATIONS or len(word) == 1):
            continue  # "Dr. Okafor", "J. Smith": a title or an initial, not the sentence's end
        sentence = before
        break
    return sentence.strip().rstrip(".!?;,").strip()


class HomeTriggers:
    """The detector for a data home: the seed's phrases, or those of its `triggers.json`, re-read when that
    file changes (one stat per message)."""

    def __init__(self, home: Path) -> None:
        self.path = home / CONFIG_FILE
        self._lock = threading.Lock()
        self._stamp: tuple[int, int, int] | None = None
        self._detector = TriggerDetector()

    def detect(self, message: str) -> Trigger:
        return self.detector().detect(message)

    def detector(self) -> TriggerDetector:
        try:
            stat = self.path.lstat()
            stamp: tuple[int, int, int] | None = (stat.st_ino, stat.st_mtime_ns, stat.st_size)
        except FileNotFoundError:
            stamp = None
        with self._lock:
            if stamp != self._stamp:
                self._stamp = stamp
                self._detector = self._load() if stamp is not None else TriggerDetector()
            return self._detector

    def _load(self) -> TriggerDetector:
        try:
            data, _ = read_bytes_and_stat(self.path)
            return TriggerDetector(parse_phrases(json.loads(data)))
        except (OSError, RockmemError, ValueError) as exc:
            log.warning("%s is not used (%s); the seed's trigger phrases are", self.path, exc)
            return TriggerDetector()


def parse_phrases(raw: object) -> dict[str, list[str]]:
    """`triggers.json`'s content, checked: an object of intent -> list of phrases."""
    if not isinstance(raw, dict):
        raise ValueError('it must be a JSON object such as {"remember": ["remember that"]}')
    unknown = set(raw) - set(INTENTS)
    if unknown:
        raise ValueError(f"unknown intent(s) {sorted(unknown)}: use {', '.join(INTENTS)}")
    phrases: dict[str, list[str]] = {}
    for intent, listed in raw.items():
        if not isinstance(listed, list) or len(listed) > MAX_PHRASES:
            raise ValueError(f"{intent}: a list of at most {MAX_PHRASES} phrases")
        for phrase in listed:
            if not isinstance(phrase, str) or not phrase.strip() or len(phrase) > MAX_PHRASE_CHARS:
                raise ValueError(f"{intent}: phrases are non-empty text of at most {MAX_PHRASE_CHARS} characters")
        phrases[intent] = listed
    return phrases


CANDIDATES = 5  # memories a forget or a search names
REMEMBERED_FOR_S = 600  # the same span again within this long is the same request (recall + record_turn)
REMEMBERED_KEPT = 256


class TriggerResponder:
    """What a trigger in a user's message leads to (ROCKMEM_TRIGGER_MODE): `suggest` says what to call (for a
    remember, with the rules' route to pass along); `act` remembers a remember's span at once, routed to its
    store by the encode driver (recall/remembering.py). A forget is never acted on: its candidates come back
    for the user to confirm (seed 004 §8.3)."""

    def __init__(
        self,
        triggers: HomeTriggers,
        remembering: Remembering,
        mode: str,
        forgetting: Forgetting,
    ) -> None:
        self.triggers, self.remembering, self.mode, self.forgetting = triggers, remembering, mode, forgetting
        self._recent: OrderedDict[str, tuple[float, Remembered]] = OrderedDict()  # span -> when, what was done
        self._lock = threading.Lock()

    def wants_sample(self, message: str) -> str | None:
        """The span a remember in `message` would ask the client's model to route (act mode, auto driver, no
        model of the server's own), else None. Read-only: it runs before the tool."""
        if self.mode != "act" or not self.remembering.wants_sample() or not message.strip():
            return None
        found = self.triggers.detect(message)
        return found.span if found.intent == "remember" and found.span else None

    def respond(self, message: str, act: bool = True, sampled: str | None = None) -> TriggerFound | None:
        """The trigger in `message` and what it led to; None without one. `act=False` (a read-only view such
        as a recall resource) never writes; `sampled`: the client's model's route for a remember."""
        if self.mode == "off" or not message.strip():
            return None
        found = self.triggers.detect(message)
        if found.intent == "none":
            return None
        reply = TriggerFound(intent=found.intent, phrase=found.phrase, span=found.span, action="")
        span = found.span
        if found.intent == "remember":
            if not span:
                reply.action = "nothing named to remember: ask what to keep"
            elif self.mode == "act" and act:
                self._remember(span, sampled, reply)
            else:
                reply.route = self.remembering.rules(span)
                reply.action = (
                    f'to keep it, call remember with content "{_quoted(span)}" and this route (or your own: '
                    f"store {reply.route.store} by rule)"
                )
        elif found.intent in ("forget", "search"):
            reply.matches = self._candidates(span) if span else []
            reply.candidates = [match.id for match in reply.matches]
            if found.intent == "search":
                reply.action = f'search_memory(query="{_quoted(span)}") reaches further than these matches'
            elif reply.candidates:
                reply.action = "show the user these candidates; forget(ids=[...]) only those they confirm"
            else:
                reply.action = "no memory matches: ask what to forget" if span else "ask what to forget"
        else:
            reply.action = 'reflect(action="run"): it proposes; show the user its summary and resolve it as they say'
        return reply

    def _remember(self, span: str, sampled: str | None, reply: TriggerFound) -> None:
        """Act on a remember: once per span for a while (a client may pass one message to recall and record_turn
        both); a failure is said in the reply, never raised (the turn it came with is already recorded)."""
        key = " ".join(span.lower().split())
        now = time.monotonic()
        with self._lock:
            earlier = self._recent.get(key)
            if earlier is not None and now - earlier[0] < REMEMBERED_FOR_S:
                reply.remembered, reply.memory_id = earlier[1], earlier[1].memory_id
                reply.action = "already " + _where(earlier[1])
                return
        try:
            # The user's phrase asked, not a tool call: the trail says so (seed 004 §12.3).
            with acting_as(bot_actor(TRIGGER_REMEMBER, self.remembering.settings.namespace)):
                done = self.remembering.remember(span, sampled=sampled)
        except (RockmemError, OSError) as exc:
            reply.action = f"not remembered ({exc}); call remember with the content yourself"
            return
        reply.remembered, reply.memory_id = done, done.memory_id
        reply.action = _where(done)
        if done.task is None:
            with self._lock:
                self._recent[key] = (now, done)
                self._recent.move_to_end(key)
                while len(self._recent) > REMEMBERED_KEPT:
                    self._recent.popitem(last=False)

    def _candidates(self, span: str) -> list[ForgetCandidate]:
        """What `span` matches in every store; episodes are left out while their index is still being built at
        start, so a recall never waits for it."""
        return self.forgetting.find(span, limit=CANDIDATES, wait=False)


def _where(done: Remembered) -> str:
    """What a remember did, in one line for the model."""
    if done.task is not None:
        return "route it: follow remembered.task, then call remember with content and your route"
    written = [
        f"memory [{done.memory_id}]" if done.memory_id else "",
        f"procedure {done.procedure!r}" if done.procedure else "",
        f"core ({done.core_line})" if done.core_line else "",
        f"episode [{done.episode_id}]" if done.episode_id else "",
    ]
    if done.entities or done.triples:
        written.append(f"graph ({len(done.entities)} entities, {len(done.triples)} relations)")
    by = {"llm": "the server's model", "sampling": "your client's model", "agent": "you", "rules": "rules"}[done.driver]
    note = f" ({done.note})" if done.note else ""
    return f"remembered in {done.store} by {by}{note}: " + ", ".join(part for part in written if part)


def _quoted(text: str) -> str:
    flat = " ".join(text.split()).replace('"', "'")
    return flat if len(flat) <= 300 else flat[:299] + "…"
