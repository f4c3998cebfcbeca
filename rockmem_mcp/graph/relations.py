"""The relation vocabulary (seed 004 §6.3): predicates with a documented meaning, grouped as structural,
temporal and qualitative, each with the label its relation takes when seen from the object's side.

The vocabulary is advice, not a schema: `add_triples` accepts any predicate. A free predicate close to a
vocabulary one ('depends' for 'depends_on', 'uses_tool' for 'uses') gets a hint in the reply, never a refusal.
Predicates are snake_case here; the seed writes them hyphenated ('part-of'), which `normalize_predicate` stores
as 'part_of'. One predicate carries behaviour: `A --supersedes--> B` marks B's other facts as superseded by A
(GraphService: a `superseded_by` on each such Fact, ranked last within a hop by recall).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from difflib import SequenceMatcher
from functools import lru_cache

from rockmem_mcp.text import visible

SUPERSEDES = "supersedes"
GROUPS = ("structural", "temporal", "qualitative")
CLOSE_RATIO = 0.8  # difflib's similarity from which a free predicate is taken for a misspelt vocabulary one
MIN_PREFIX_CHARS = 4  # 'dep' is not taken for 'depends_on'; 'depends' is
MAX_FREE_LISTED = 200  # free predicates the vocabulary resource lists (the most used)


@dataclass(frozen=True)
class Relation:
    predicate: str
    group: str
    meaning: str
    inverse: str | None  # the label of `A --predicate--> B` on B's side; None: there is no natural one


VOCABULARY: tuple[Relation, ...] = (
    Relation("develops", "structural", "a person builds a project or tool", "developed_by"),
    Relation("uses", "structural", "a project or person uses a tool or concept", "used_by"),
    Relation("used_by", "structural", "a tool or concept is used by a project or person", "uses"),
    Relation("part_of", "structural", "hierarchical nesting: the subject is inside the object", "contains"),
    Relation("contains", "structural", "hierarchical nesting: the object is inside the subject", "part_of"),
    Relation("depends_on", "structural", "the subject needs the object", "dependency_of"),
    Relation("decided_on", "temporal", "a choice was made (the triple's date says when)", "decided_by"),
    Relation(SUPERSEDES, "temporal", "the subject replaces the object, whose facts may be stale", "superseded_by"),
    Relation("preceded_by", "temporal", "sequence: the object came before the subject", "followed_by"),
    Relation("followed_by", "temporal", "sequence: the object came after the subject", "preceded_by"),
    Relation("prefers", "qualitative", "a preference of the user (or another person)", "preferred_by"),
    Relation("avoids", "qualitative", "an anti-preference", "avoided_by"),
    Relation("confident_about", "qualitative", "epistemic status: the subject is sure of the object", None),
    Relation("uncertain_about", "qualitative", "epistemic status: the subject is unsure of the object", None),
    Relation("relates_to", "qualitative", "a general association (symmetric)", "relates_to"),
)
BY_PREDICATE: dict[str, Relation] = {r.predicate: r for r in VOCABULARY}
# Inverse labels that are not predicates themselves: 'developed_by' written as a predicate reverses 'develops'.
_REVERSED: dict[str, str] = {r.inverse: r.predicate for r in VOCABULARY if r.inverse and r.inverse not in BY_PREDICATE}


def incoming_label(predicate: str) -> str:
    """How `A --predicate--> B` reads from B's side: the inverse where the vocabulary has one, else
    '{predicate} (from)'."""
    relation = BY_PREDICATE.get(predicate)
    if relation is not None and relation.inverse is not None:
        return relation.inverse
    return f"{predicate} (from)"


@lru_cache(maxsize=4096)  # add_triples asks once per triple; a batch repeats its few predicates
def suggest(predicate: str) -> str | None:
    """The vocabulary predicate perhaps meant by a free one (snake_case), or None when it is in the vocabulary
    or close to none of it. Close: one extends the other by whole words ('uses_tool', 'depends'), or difflib
    rates them at least `CLOSE_RATIO` alike ('prefer', 'related_to', 'is_part_of')."""
    if predicate in BY_PREDICATE:
        return None
    if predicate in _REVERSED:
        return _REVERSED[predicate]
    best, best_ratio = None, CLOSE_RATIO
    for name in BY_PREDICATE:
        if len(predicate) >= MIN_PREFIX_CHARS and (
            predicate.startswith(f"{name}_") or name.startswith(f"{predicate}_")
        ):
            return name
        ratio = SequenceMatcher(None, predicate, name).ratio()
        if ratio >= best_ratio:
            best, best_ratio = name, ratio
    return best


def hint(predicate: str) -> str | None:
    """What `add_triples` says about a free predicate close to a vocabulary one (None otherwise)."""
    meant = suggest(predicate)
    if meant is None:
        return None
    if _REVERSED.get(predicate) == meant:
        return (
            f"'{predicate}' reads as the reverse of the vocabulary's '{meant}': perhaps object --{meant}--> subject "
            "(rockmem://graph-relations); kept"
        )
    return f"'{predicate}' is not in the relation vocabulary; perhaps '{meant}' (rockmem://graph-relations); kept"


def vocabulary_markdown(counts: Mapping[str, int]) -> str:
    """The vocabulary as markdown, with how many triples use each predicate (`counts`, predicate -> triples),
    then the free predicates in use, most used first."""
    lines = [
        "# Relation vocabulary",
        "",
        "Predicates are snake_case (the seed's `part-of` is stored as `part_of`); any other predicate is accepted "
        "too. The inverse is how a relation reads from its object's side (on entity pages). "
        "`A --supersedes--> B` marks B's other facts as superseded by A: listed last by recall, with a note.",
    ]
    for group in GROUPS:
        lines += ["", f"## {group.capitalize()}", "", "| Predicate | Inverse | Meaning | Triples here |",
                  "|---|---|---|---|"]  # fmt: skip
        for r in (r for r in VOCABULARY if r.group == group):
            inverse = f"`{r.inverse}`" if r.inverse else "—"
            lines.append(f"| `{r.predicate}` | {inverse} | {r.meaning} | {counts.get(r.predicate, 0)} |")
    free = sorted(((p, n) for p, n in counts.items() if p not in BY_PREDICATE), key=lambda pn: (-pn[1], pn[0]))
    lines += ["", "## Free predicates in use", ""]
    if not free:
        return "\n".join([*lines, "(none)"])
    lines += ["| Predicate | Triples here | Perhaps meant |", "|---|---|---|"]
    for predicate, count in free[:MAX_FREE_LISTED]:
        meant = suggest(predicate)
        lines.append(f"| `{_cell(predicate)}` | {count} | {f'`{meant}`' if meant else ''} |")
    if len(free) > MAX_FREE_LISTED:
        lines.append(f"\n… and {len(free) - MAX_FREE_LISTED} more free predicates, each used less.")
    return "\n".join(lines)


def _cell(predicate: str) -> str:
    """A predicate inside a table cell's code span: stored ones are snake_case, but a file edited by hand may
    hold anything (a line break, a '|' or a backtick would break the table)."""
    return visible(" ".join(predicate.split())).replace("|", "\\|").replace("`", "'")
