"""Entity pages (seed 004 §6.2): one markdown page per entity, generated from the graph and the memories that
name it — a view to read, not a file to edit (the graph's JSON files and the memories stay the truth).

    # {name}
    <!-- Type: … | Created: … | Last updated: … -->
    <!-- Salience: … | Access count: … | Pinned: no -->
    ## Summary         metadata 'summary' or 'description', else the best memory naming it, cut
    ## Facts           triples as sentences, most salient first, then the memories naming it, cut short
    ## Timeline        dated triples and memories, oldest first (the newest `MAX_TIMELINE`)
    ## Open Questions  triples below 0.5 confidence, memories with a '?' or a low 'confidence' in metadata
    ## Relations       by predicate, incoming ones under the vocabulary's inverse label (graph/relations.py)

Memories that name the entity: a keyword search for its name and each alias, kept only where the name occurs
as whole words (as recall matches names), at most `MAX_MENTIONS`. Every piece of stored text is made inert
(`text.inert_markdown`): a memory line '# Forged' shows as '\\# Forged', never as a heading. The page is cut to
about `PAGE_TOKENS` tokens (`tokens.estimate_tokens`), the timeline first, and says what was cut. Reading a
page is not a use of the entity (salience is not reinforced): it is a view, like `rockmem://graph/{entity}`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from rockmem_mcp.errors import NotFoundError
from rockmem_mcp.graph.relations import incoming_label
from rockmem_mcp.graph.service import GraphService
from rockmem_mcp.graph.shapes import EntityDetail, Fact
from rockmem_mcp.memory.service import MemoryService
from rockmem_mcp.models import MemoryEntry, mention_key, message_words
from rockmem_mcp.text import inert_markdown, visible
from rockmem_mcp.tokens import estimate_tokens

PAGE_TOKENS = 4_000
MAX_MENTIONS = 20  # memories read per page
SEARCHED_PER_NAME = 100  # search hits looked at per name or alias before the whole-word filter
MAX_TIMELINE = 30
MAX_OPEN_QUESTIONS = 10
MAX_PER_RELATION = 50  # entities listed under one relation label
SUMMARY_CHARS = 600
FACT_CHARS = 240  # a memory's content in Facts and Open Questions
TIMELINE_CHARS = 120
LOW_CONFIDENCE = 0.5
MIN_FACT_TOKENS = 8  # a triple's line costs at least this: a hub's triples beyond cap / 8 are not even written


@dataclass
class _Section:
    title: str
    lines: list[str]
    floor: int  # lines kept by the first cutting pass (the second may cut to none)
    what: str  # what one line is, for the note: "facts"
    cut: int = 0
    notes: list[str] = field(default_factory=list)  # said whether or not anything is cut
    tail: int = 0  # the last lines, cut only after every line before them

    def drop(self, token_cap: int) -> int:
        """Cut one line (the last before the tail, else the tail's last); the tokens this saves (less the
        note saying so, when it is the first line cut)."""
        at = len(self.lines) - self.tail - 1
        if at < 0:
            at, self.tail = len(self.lines) - 1, self.tail - 1
        note = self.note_tokens(token_cap) if self.cut == 0 else 0
        self.cut += 1
        return _tokens(self.lines.pop(at)) - note

    def cut_note(self, token_cap: int, count: int | None = None) -> str:
        count = self.cut if count is None else count
        return f"- … {count} more {self.what} not shown (the page is cut to ~{token_cap:,} tokens)"

    def note_tokens(self, token_cap: int) -> int:
        """The cut note's cost at its largest (every line cut)."""
        return _tokens(self.cut_note(token_cap, self.cut + len(self.lines)))


def entity_page(
    graph: GraphService, memory: MemoryService | None, name_or_id: str, token_cap: int = PAGE_TOKENS
) -> str:
    """The markdown page of the entity named (name or alias, any case) or with this id; `memory` None: from
    the graph alone. Raises NotFoundError naming the nearest entities when there is no such entity."""
    detail = _detail(graph, name_or_id)
    entity = detail.entity
    # Most salient first; facts about a superseded entity last.
    facts = sorted(detail.facts, key=lambda f: (bool(f.superseded_by), -f.salience, -f.confidence, f.created_at, f.id))
    mentions, mentions_capped = _mentions(memory, [entity.name, *entity.aliases]) if memory else ([], False)
    superseded = graph.superseders({entity.id, *(f.subject_id for f in facts), *(f.object_id for f in facts)})

    dates = [entity.created_at, *(f.created_at for f in facts), *(m.updated_at or m.created_at for m in mentions)]
    header = [
        f"# {_flat(entity.name)}",
        f"<!-- Type: {_flat(entity.type)} | Created: {_day(entity.created_at)} | Last updated: {_day(max(dates))} -->",
        f"<!-- Salience: {detail.salience:.2f} ({detail.tier}) | Access count: {entity.reinforcement_count} "
        "| Pinned: no -->",
    ]
    if entity.aliases:
        header.append(f"Aliases: {', '.join(_flat(a) for a in entity.aliases)}")
    if entity.id in superseded:
        header.append(f"> Superseded by [[{_link(superseded[entity.id])}]]: its facts may be out of date.")

    sentences = _Sentences()
    sections = [
        _Section("Summary", _summary(entity.metadata, mentions), 1, "summary lines"),
        _facts(facts, sentences, mentions, mentions_capped, token_cap // MIN_FACT_TOKENS),
        _timeline(facts, sentences, mentions),
        _Section("Open Questions", _open_questions(facts, sentences, mentions), 3, "open questions"),
        _relations(entity.id, facts, superseded),
    ]
    return _render(header, sections, token_cap)


def _detail(graph: GraphService, name_or_id: str) -> EntityDetail:
    try:
        return graph.get_entity(name_or_id)
    except NotFoundError:
        near = graph.near_names(name_or_id)
        listed = f"; nearest names: {', '.join(repr(n) for n in near)}" if near else "; the graph has no close name"
        raise NotFoundError(
            f"no entity named {name_or_id[:100]!r}{listed} (names and aliases match in any case; "
            "graph find lists what exists)"
        ) from None


def _mentions(memory: MemoryService, names: list[str]) -> tuple[list[MemoryEntry], bool]:
    """Memories naming the entity as whole words, best match first, at most `MAX_MENTIONS`; and whether the
    cap was reached (more may exist)."""
    keys = [key for key in (mention_key(n) for n in names) if key]
    found: dict[str, MemoryEntry] = {}
    limit = min(SEARCHED_PER_NAME, memory.settings.search_limit_max)
    for name in names:
        hits = memory.search(query=name, limit=limit, mode="bm25", include_dormant=True).results
        for hit in hits:
            entry = hit.entry
            if entry.id in found or entry.superseded_by:
                continue
            words = f" {' '.join(message_words(entry.content))} "
            if any(f" {key} " in words for key in keys):
                found[entry.id] = entry
                if len(found) == MAX_MENTIONS:
                    return list(found.values()), True
    return list(found.values()), False


def _summary(metadata: dict[str, str], mentions: list[MemoryEntry]) -> list[str]:
    given = metadata.get("summary") or metadata.get("description")
    if given:
        return inert_markdown(_cut(given.strip(), SUMMARY_CHARS)).split("\n")
    if mentions:
        first = mentions[0]
        return [*inert_markdown(_cut(first.content.strip(), SUMMARY_CHARS)).split("\n"), f"[{first.id}]"]
    return ["(no summary yet: give the entity a 'summary' in its metadata, or save a memory that names it)"]


def _facts(facts: list[Fact], sentences: _Sentences, mentions: list[MemoryEntry], capped: bool, room: int) -> _Section:
    """The triples (at most `room` written: more cannot fit), then the memories, which the cap cuts only once
    every triple is gone: a hub's least salient triple says less than a memory naming it."""
    lines = [f"- {sentences.of(f)}{_stale(f)} [triple {f.id}]" for f in facts[:room]]
    memories = [f"- {_line(m.content, FACT_CHARS)} [{m.id}]" for m in mentions]
    if capped:
        memories.append(f"- (the best {MAX_MENTIONS} memories naming it are shown; search_memory finds more)")
    return _Section("Facts", lines + memories, 10, "facts", cut=max(0, len(facts) - room), tail=len(memories))


def _timeline(facts: list[Fact], sentences: _Sentences, mentions: list[MemoryEntry]) -> _Section:
    dated: list[tuple[datetime, Fact | MemoryEntry]] = [(f.created_at, f) for f in facts]
    dated += [(m.created_at, m) for m in mentions]
    dated.sort(key=lambda item: item[0])
    lines = [
        f"- {_day(at)}: {sentences.of(item)}{_stale(item)}"
        if isinstance(item, Fact)
        else f"- {_day(at)}: {_line(item.content, TIMELINE_CHARS)}"
        for at, item in dated[-MAX_TIMELINE:]
    ]
    section = _Section("Timeline", lines, 5, "timeline items")
    if len(dated) > MAX_TIMELINE:
        section.notes.append(f"- (the newest {MAX_TIMELINE} of {len(dated)} items)")
    return section


def _open_questions(facts: list[Fact], sentences: _Sentences, mentions: list[MemoryEntry]) -> list[str]:
    lines = [
        f"- {sentences.of(f)} (confidence {f.confidence:.2f}){_stale(f)} [triple {f.id}]"
        for f in facts
        if f.confidence < LOW_CONFIDENCE or "?" in f.subject or "?" in f.object
    ]
    lines += [f"- {_line(m.content, FACT_CHARS)} [{m.id}]" for m in mentions if "?" in m.content or _unsure(m)]
    return lines[:MAX_OPEN_QUESTIONS]


def _relations(entity_id: str, facts: list[Fact], superseded: dict[str, str]) -> _Section:
    """`- label: [[Other]], [[Another]]`, a label per predicate (outgoing) or inverse label (incoming), in
    the order of the most salient fact of each."""
    groups: dict[str, dict[str, str]] = {}  # label -> other entity id -> shown name
    for fact in facts:
        if fact.subject_id == entity_id:
            label, other_id, other = fact.predicate, fact.object_id, fact.object
        else:
            label, other_id, other = incoming_label(fact.predicate), fact.subject_id, fact.subject
        stale = f" (superseded by {_flat(superseded[other_id])})" if other_id in superseded else ""
        groups.setdefault(label, {}).setdefault(other_id, f"[[{_link(other)}]]{stale}")
    lines = []
    for label, others in groups.items():
        shown = list(others.values())
        more = f", … {len(shown) - MAX_PER_RELATION} more" if len(shown) > MAX_PER_RELATION else ""
        lines.append(f"- {_flat(label)}: {', '.join(shown[:MAX_PER_RELATION])}{more}")
    return _Section("Relations", lines, 10, "relation lines")


def _render(header: list[str], sections: list[_Section], token_cap: int) -> str:
    """The page, cut to about `token_cap` tokens: lines are dropped from the end of the timeline, then the
    facts (triples before memories), relations, open questions and summary, first down to each section's
    floor, then further."""
    total = sum(_tokens(line) for line in header)
    for section in sections:
        total += _tokens(f"## {section.title}") + 1 + sum(_tokens(line) for line in [*section.lines, *section.notes])
        total += section.note_tokens(token_cap) if section.cut else 0  # a hub's facts not even written
    order = [sections[i] for i in (2, 1, 4, 3, 0)]  # timeline, facts, relations, open questions, summary
    for floors in (True, False):
        for section in order:
            while total > token_cap and len(section.lines) > (section.floor if floors else 0):
                total -= section.drop(token_cap)
    lines = list(header)
    for section in sections:
        lines += ["", f"## {section.title}", *(section.lines or ([] if section.cut else ["(none)"])), *section.notes]
        if section.cut:
            lines.append(section.cut_note(token_cap))
    return "\n".join(lines) + "\n"


class _Sentences(dict[str, str]):
    """Each fact's sentence, written once, on first use: up to three sections show it, and a hub's page shows
    few of its facts."""

    def of(self, fact: Fact) -> str:
        text = self.get(fact.id)
        if text is None:
            text = self[fact.id] = _sentence(fact)
        return text


def _sentence(fact: Fact) -> str:
    """'Alice develops RockBot.' (inert: a name may start with '#')."""
    return inert_markdown(f"{_flat(fact.subject)} {_flat(fact.predicate).replace('_', ' ')} {_flat(fact.object)}.")


def _stale(fact: Fact) -> str:
    return f" (superseded by {_flat(fact.superseded_by)})" if fact.superseded_by else ""


def _unsure(entry: MemoryEntry) -> bool:
    """A memory whose metadata says it is unsure: confidence 'low' or a number below 0.5."""
    value = entry.metadata.get("confidence", "").strip().lower()
    if value == "low":
        return True
    try:
        return float(value) < LOW_CONFIDENCE
    except ValueError:
        return False


def _line(text: str, limit: int) -> str:
    """Stored text as one inert line of at most `limit` characters."""
    return inert_markdown(_cut(" ".join(text.split()), limit))


def _flat(text: str) -> str:
    """A name or label on one line, inside a line the page writes (so it cannot start a block of its own)."""
    return visible(" ".join(text.split())).replace("-->", "--\\>")


def _link(name: str) -> str:
    """A name inside `[[…]]`: its brackets escaped, so a name cannot close the link and open another."""
    return _flat(name).replace("[", "\\[").replace("]", "\\]")


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _day(at: datetime) -> str:
    return at.date().isoformat()


def _tokens(line: str) -> int:
    return estimate_tokens(line) + 1  # its line break
