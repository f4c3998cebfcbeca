"""Development corpora for retrieval quality, of different shapes, each built by a function here.

A corpus is a list of homes; a home is memories (a key, the text, the metadata an agent would attach) and
questions (the text, the keys of the memories that answer it). Seven shapes:

- `turns`: LoCoMo dev, one home per conversation, each turn a memory with the conversation-memory metadata
  (`session`, `turn`, `speaker`, `date`). Short turns of like length, rich metadata.
- `long`: the same conversations with a long reply after every turn (1,500-5,000 characters, built from
  sentences of the *other* conversations' summaries and observations, opening with the turn's own topic
  words, as an assistant's answer does), metadata `session` and `turn` only. Short statements beside long
  texts that share their words: length normalisation decides.
- `pooled`: every conversation's turns in one home, no metadata at all.
- `summaries`: every session's summary (a paragraph of ~640 characters, the shape of an episode), all
  conversations in one home, no metadata; a question's evidence is the sessions its evidence turns are in.
- `facts`: LoCoMo's observations (one short third-person fact each, the kind of note an agent saves), one home
  per conversation, no metadata; a question's evidence is the observations that cite its evidence turns.
- `agent`: short agent-style memories (preferences, decisions, lessons) with paraphrased questions, written
  for this project (benchmarks/data/agent_facts.json), one home, metadata `session`.

LoCoMo (CC BY-NC 4.0) is read from ../shared/bench/locomo, never copied here; without it only `agent` is built.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
LOCOMO = ROOT.parent / "shared" / "bench" / "locomo" / "locomo-dev.json"
AGENT_FACTS = Path(__file__).resolve().parents[1] / "data" / "agent_facts.json"
SHAPES = ("turns", "long", "mixed", "pooled", "summaries", "facts", "agent")
_EVIDENCE = re.compile(r"D:?(\d+):(\d+)")
_WORD = re.compile(r"[A-Za-z]{4,}")
_STOP = frozenset(
    "that this with have from they them their there what when where which about would could should been were "
    "your just really like also some more much very into than then well know think yeah going time want".split()
)


@dataclass(frozen=True)
class Memory:
    key: str
    content: str
    metadata: dict[str, str] = field(default_factory=dict)
    category: str | None = None


@dataclass(frozen=True)
class Question:
    text: str
    evidence: frozenset[str]


@dataclass
class Home:
    name: str
    memories: list[Memory]
    questions: list[Question]


@dataclass
class Corpus:
    name: str
    homes: list[Home]

    @property
    def questions(self) -> int:
        return sum(len(h.questions) for h in self.homes)


def locomo_available(path: Path = LOCOMO) -> bool:
    return path.exists()


def _samples(path: Path) -> list[dict[str, Any]]:
    return json.loads(path.read_text(encoding="utf-8"))


def _turns(sample: dict[str, Any]) -> list[tuple[str, int, int, str, str, str]]:
    """(turn id, session number, place in session, speaker, text, session date) of every turn, in order."""
    conversation = sample["conversation"]
    out = []
    for key, value in conversation.items():
        if not re.fullmatch(r"session_\d+", key):
            continue
        number = int(key.split("_")[1])
        date = str(conversation.get(f"{key}_date_time", ""))
        for place, turn in enumerate(value):
            text = f"{turn['speaker']}: {turn['text']}"
            if turn.get("blip_caption"):
                text += f" [shares a photo: {turn['blip_caption']}]"
            out.append((turn["dia_id"], number, place, turn["speaker"], text, date))
    return out


def _evidence(raw: list[str]) -> frozenset[str]:
    # "D3:5"; the data also holds "D8:6; D9:17", "D:11:26" (read D11:26) and a bare "D".
    return frozenset(f"D{s}:{t}" for item in raw for s, t in _EVIDENCE.findall(item))


def _questions(sample: dict[str, Any], prefix: str = "") -> list[Question]:
    out = []
    for qa in sample["qa"]:
        if qa.get("category") not in (1, 2, 3, 4):
            continue  # 5 is adversarial: nothing to find
        evidence = _evidence(qa.get("evidence", []))
        if evidence:
            out.append(Question(qa["question"], frozenset(prefix + e for e in evidence)))
    return out


def turns_corpus(path: Path = LOCOMO) -> Corpus:
    homes = []
    for sample in _samples(path):
        name = sample["sample_id"]
        memories = [
            Memory(dia, text, {"session": f"{name}/s{session:02d}", "turn": str(place), "speaker": speaker}
                   | ({"date": date} if date else {}))
            for dia, session, place, speaker, text, date in _turns(sample)
        ]  # fmt: skip
        homes.append(Home(name, memories, _questions(sample)))
    return Corpus("turns", homes)


def pooled_corpus(path: Path = LOCOMO) -> Corpus:
    memories, questions = [], []
    for sample in _samples(path):
        name = sample["sample_id"]
        memories += [Memory(f"{name}/{dia}", text) for dia, _, _, _, text, _ in _turns(sample)]
        questions += _questions(sample, prefix=f"{name}/")
    return Corpus("pooled", [Home("all", memories, questions)])


def summaries_corpus(path: Path = LOCOMO) -> Corpus:
    memories, questions = [], []
    for sample in _samples(path):
        name = sample["sample_id"]
        for key, summary in sample.get("session_summary", {}).items():
            number = int(key.split("_")[1])
            memories.append(Memory(f"{name}/s{number}", str(summary)))
        for q in _questions(sample):
            sessions = frozenset(f"{name}/s{int(turn[1:].split(':')[0])}" for turn in q.evidence)
            questions.append(Question(q.text, sessions))
    return Corpus("summaries", [Home("all", memories, questions)])


def _observations(sample: dict[str, Any]) -> list[tuple[str, list[str]]]:
    """(fact, the turn ids it cites) of every observation."""
    out = []
    for session in sample.get("observation", {}).values():
        for facts in session.values():
            for fact in facts:
                if isinstance(fact, list) and fact and isinstance(fact[0], str):
                    cited = fact[1] if len(fact) > 1 else []
                    out.append((fact[0], sorted(_evidence(cited if isinstance(cited, list) else [cited]))))
    return out


def facts_corpus(path: Path = LOCOMO) -> Corpus:
    homes = []
    for sample in _samples(path):
        facts = _observations(sample)
        memories = [Memory(f"o{i}", text) for i, (text, _) in enumerate(facts)]
        citing: dict[str, set[str]] = {}
        for i, (_, cited) in enumerate(facts):
            for turn in cited:
                citing.setdefault(turn, set()).add(f"o{i}")
        questions = []
        for q in _questions(sample):
            evidence = frozenset(k for turn in q.evidence for k in citing.get(turn, ()))
            if evidence:
                questions.append(Question(q.text, evidence))
        homes.append(Home(sample["sample_id"], memories, questions))
    return Corpus("facts", homes)


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+", text) if len(s.strip()) > 20]


def long_corpus(path: Path = LOCOMO, seed: int = 7, joined: float = 0.0) -> Corpus:
    """`long`; with `joined` > 0 that share of turns is one memory with its reply (`mixed`)."""
    samples = _samples(path)
    pools: dict[str, list[str]] = {}
    for sample in samples:
        sentences = [s for summary in sample.get("session_summary", {}).values() for s in _sentences(str(summary))]
        sentences += [fact for fact, _ in _observations(sample)]
        pools[sample["sample_id"]] = sentences
    rng = random.Random(seed)
    homes = []
    for sample in samples:
        name = sample["sample_id"]
        others = [s for other, pool in pools.items() if other != name for s in pool]
        by_word = _by_word(others)
        memories = []
        for dia, session, place, _, text, _ in _turns(sample):
            meta = {"session": f"{name}/s{session:02d}"}
            reply = _reply(text, others, by_word, rng)
            if joined and rng.random() < joined:
                memories.append(Memory(dia, f"{text}\n\n{reply}", meta | {"turn": str(2 * place)}))
                continue
            memories.append(Memory(dia, text, meta | {"turn": str(2 * place)}))
            memories.append(Memory(f"{dia}/reply", reply, meta | {"turn": str(2 * place + 1)}))
        homes.append(Home(name, memories, _questions(sample)))
    return Corpus("mixed" if joined else "long", homes)


def mixed_corpus(path: Path = LOCOMO) -> Corpus:
    return long_corpus(path, seed=11, joined=0.5)


def _reply(turn: str, pool: list[str], by_word: dict[str, list[int]], rng: random.Random) -> str:
    """A long answer to a turn, as an assistant gives one: it opens on the turn's topic words, and most of its
    sentences share one of them (from other conversations: on topic, but not the fact asked about)."""
    words = list(dict.fromkeys(w.lower() for w in _WORD.findall(turn.split(":", 1)[-1]) if w.lower() not in _STOP))
    opening = f"Thanks for sharing that about {', '.join(words[:4]) or 'this'}. Here are some thoughts."
    on_topic = [i for w in words for i in by_word.get(w, ())]
    target = rng.randint(1500, 5000)
    parts, size = [opening], len(opening)
    while size < target:
        sentence = pool[rng.choice(on_topic)] if on_topic and rng.random() < 0.7 else rng.choice(pool)
        parts.append(sentence)
        size += len(sentence) + 1
    return " ".join(parts)


def _by_word(pool: list[str]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for i, sentence in enumerate(pool):
        for word in {w.lower() for w in _WORD.findall(sentence)} - _STOP:
            out.setdefault(word, []).append(i)
    return out


def agent_corpus(path: Path = AGENT_FACTS) -> Corpus:
    data = json.loads(path.read_text(encoding="utf-8"))
    memories = [
        Memory(m["id"], m["content"], {"session": m["session"]} if m.get("session") else {}) for m in data["memories"]
    ]
    questions = [Question(q["question"], frozenset(q["evidence"])) for q in data["questions"]]
    return Corpus("agent", [Home("agent", memories, questions)])


BUILDERS = {
    "turns": turns_corpus,
    "long": long_corpus,
    "mixed": mixed_corpus,
    "pooled": pooled_corpus,
    "summaries": summaries_corpus,
    "facts": facts_corpus,
    "agent": agent_corpus,
}


def corpora(names: tuple[str, ...] = SHAPES) -> list[Corpus]:
    """The named corpora that can be built here (the LoCoMo ones need ../shared)."""
    out = []
    for name in names:
        if name != "agent" and not locomo_available():
            continue
        if name == "agent" and not AGENT_FACTS.exists():
            continue
        out.append(BUILDERS[name]())
    return out
