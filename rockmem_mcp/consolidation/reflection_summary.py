"""What a reflection reads like: the proposal in the seed's sections (004 §10.5), its reflection-log entry and
its evolution.md entry. Stored text is shown as data: every line of it is flattened to one line."""

from __future__ import annotations

from rockmem_mcp.audit.log import clean_field
from rockmem_mcp.consolidation.shapes import Reflection, ReflectionAction

SECTIONS = (
    ("🧠 New Knowledge Extracted", ("create", "entity", "procedure", "proposal")),
    ("🔗 New Connections", ("triple",)),
    ("🧹 Consolidated", ("merge", "update")),
    ("📦 Proposed Archival", ("archive",)),
)


def _line(text: str) -> str:
    return " ".join(clean_field(str(text), limit=2_000, separator=False).split())


def _actions(actions: list[ReflectionAction], kinds: tuple[str, ...]) -> list[str]:
    return [f"- [{a.id}] {_line(a.summary)}" for a in actions if a.kind in kinds] or ["- None this cycle"]


def summary(reflection: Reflection, next_scheduled: str) -> str:
    """The readable proposal (meta/pending-reflection.md), action ids in brackets."""
    r = reflection
    out = [f"# Reflection Summary — {r.started_at:%Y-%m-%d} ({r.id})", ""]
    out += ["## 🔭 Survey", *[f"- {_line(s)}" for s in r.survey], ""]
    for title, kinds in SECTIONS:
        out += [f"## {title}", *_actions(r.actions, kinds), ""]
    out += ["## ⚠️ Contradictions Detected", *([f"- {_line(c)}" for c in r.contradictions] or ["- None this cycle"])]
    out += ["", "## ✏️ Core Memory Changes", *_actions(r.actions, ("core",)), ""]
    out += ["## 🌱 Philosophical Evolution"]
    meta = r.meta
    for title, items in (
        ("Patterns Across Reflections", meta.patterns),
        ("Evolving Understanding", meta.evolution),
        ("Revised Assumptions", meta.revised_assumptions),
    ):
        if items:
            out += [f"### {title}", *[f"- {_line(i)}" for i in items]]
    if meta.guidance:
        out += ["### Guidance For This Cycle", _line(meta.guidance)]
    if not (meta.patterns or meta.evolution or meta.revised_assumptions or meta.guidance):
        out += ["- None this cycle" + (" (no language model: no meta-reflection)" if r.mode != "llm" else "")]
    out += ["", "## ❓ Questions for You", *([f"- {_line(q)}" for q in r.questions] or ["- None"]), ""]
    if r.not_covered:
        out += ["## ⏳ Not Covered This Cycle", *[f"- {_line(n)}" for n in r.not_covered], ""]
    budget = f"{r.output_tokens:,} / {r.token_budget:,}" if r.mode == "llm" else "no language model"
    processed = ", ".join(f"{n} {what}" for what, n in r.processed.items())
    out += [
        "---",
        f"**Reflection #**: {r.number} ({r.trigger}, {r.mode})",
        f"**Token budget used**: {budget}",
        f"**Memories processed**: {processed}",
        f"**Next scheduled reflection**: {next_scheduled}",
        f"> Resolve with reflect: approve, approve_with_changes (edits), partial (action ids) or reject (reason) "
        f"{r.id}.",
    ]
    return "\n".join(out) + "\n"


def log_entry(reflection: Reflection) -> str:
    """The cycle's entry in meta/reflection-log.md."""
    r, resolution = reflection, reflection.resolution
    assert resolution is not None
    applied = ", ".join(f"{n} {kind}" for kind, n in resolution.applied.items()) or "nothing"
    lines = [
        f"## Reflection #{r.number} — {r.started_at:%Y-%m-%d %H:%M} UTC ({r.id}, {r.status})",
        f"- Trigger: {r.trigger}; mode: {r.mode}",
        f"- Tokens used: {r.output_tokens:,} of {r.token_budget:,}" if r.mode == "llm" else "- Tokens used: 0",
        f"- Proposed: {len(r.actions)} actions; decision: {resolution.decision}"
        + (f" ({_line(resolution.reason)})" if resolution.reason else ""),
        f"- Applied: {applied}; refused by the safeguards: {resolution.refused}",
        f"- Contradictions: {len(r.contradictions)}; questions: {len(r.questions)}",
    ]
    lines += [f"- Survey: {_line(s)}" for s in r.survey[:1]]
    lines += [f"- Pattern: {_line(p)}" for p in r.meta.patterns[:5]]
    lines += [f"- Not covered: {_line(n)}" for n in r.not_covered[:5]]
    return "\n".join(lines)


def evolution_entry(reflection: Reflection, milestone: str | None) -> str:
    """The cycle's insights for meta/evolution.md (a milestone cycle says which)."""
    r = reflection
    lines = [f"## Reflection #{r.number} — {r.started_at:%Y-%m-%d}"]
    if milestone:
        lines.append(f"### Milestone {r.number}: {milestone}")
    insights = [*r.meta.evolution, *r.meta.patterns, *[f"Revised: {a}" for a in r.meta.revised_assumptions]]
    lines += [f"- {_line(i)}" for i in insights] or ["- No new insight this cycle"]
    return "\n".join(lines)
