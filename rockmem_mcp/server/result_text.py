"""What a model reads of a tool's result: the text copy of its structured content, made cheap to read.

A client puts a tool result's text in its model's context on every turn; programs read the structured content,
which keeps the full typed record. So the text leaves out what a model cannot act on:
- every result is compact JSON without nulls, empty lists, maps and strings, `pinned: false`, and a memory
  entry's bookkeeping (`BOOKKEEPING`: when it was last used, how often reinforced, its salience and tier; a
  dream report, whose subject they are, keeps them), floats rounded to 3 decimals. Other false flags stay (a
  `deleted: false` says something), and so does what a user or a schema wrote (`VERBATIM`: metadata, working
  data, the plan schema a dream hands over, whose `false` and `[]` are meaningful);
- a search lists its memories one line each, `id score category created #tags "content"`, under one line
  that says the ranking, how many matched and how many still wait for a vector; its episodes, procedures and
  workspace sections follow as one compact JSON object a line. A flag an entry carries (fading or dormant,
  pinned, archived, superseded) is a word on its line.

Stored text stays data: a memory's content is a JSON string (quotes, newlines, control characters and line
separators escaped), and a category, tag or id that is not one plain word is one too, so no stored text can
pass for the reply's own structure. A shape the renderer does not expect falls back to compact JSON: rendering
never turns a finished call into an error.
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any

from rockmem_mcp.text import visible

log = logging.getLogger(__name__)

# A memory entry's bookkeeping (dropped from entries and search hits only: a dream report's salience is its subject)
BOOKKEEPING = frozenset({"last_seen_at", "reinforcement_count", "salience", "tier"})
# Kept as written: a user's or a schema's values, where "", [] and false can mean something
VERBATIM = frozenset({"metadata", "data", "plan_schema", "answer_schema", "item", "marks", "span", "text"})
_WORD = re.compile(r"[\w./:@+-]+")  # a category, tag or id that reads as one word on a line
_LINE_BREAKS = str.maketrans({"\u2028": "\\u2028", "\u2029": "\\u2029", "\x85": "\\u0085"})


def _is_entry(value: dict[str, Any]) -> bool:
    return "id" in value and "content" in value and "created_at" in value


def _worth_reading(key: str, value: Any) -> bool:
    if value is None or value == {}:
        return False
    return key in VERBATIM or (value not in ("", []) and not (key == "pinned" and value is False))


def pruned(value: Any) -> Any:
    """`value` without nulls, empty containers and strings, `pinned: false`, and an entry's bookkeeping; floats to
    3 decimals; what is under a `VERBATIM` key as it is (left out only when null or an empty map)."""
    if isinstance(value, dict):
        drop = BOOKKEEPING if _is_entry(value) or "entry" in value else frozenset()
        kept = {k: v if k in VERBATIM else pruned(v) for k, v in value.items() if k not in drop}
        return {k: v for k, v in kept.items() if _worth_reading(k, v)}
    if isinstance(value, list):
        return [pruned(v) for v in value]
    if isinstance(value, float):
        return round(value, 3)
    return value


def compact_json(value: Any) -> str:
    return visible(json.dumps(value, ensure_ascii=False, separators=(",", ":"))).translate(_LINE_BREAKS)


def result_text(structured: dict[str, Any]) -> str:
    """The text a model reads for a tool's structured result (never fails a call: compact JSON if a shape surprises)."""
    try:
        if {"results", "total_matches", "mode", "unembedded"} <= structured.keys():  # search_memory's reply
            return search_text(structured)
        return compact_json(pruned(structured))
    except Exception:  # a rendering bug must not turn a done call into an error
        log.exception("result text: falling back to the structured content as compact JSON")
        return compact_json(structured)


def word(text: str) -> str:
    """`text` as one word of a line: itself when it is one, else a JSON string (no space or quote can forge)."""
    return text if _WORD.fullmatch(text) and text != "-" else compact_json(text)


def search_text(found: dict[str, Any]) -> str:
    hits = found["results"]
    head = f"{found.get('mode', 'bm25')} search: {len(hits)} of {found['total_matches']} matching memories"
    if found.get("unembedded"):
        head += f"; {found['unembedded']} without vectors yet (found by keywords only)"
    if found.get("route"):
        head += f"; episodes narrowed to {word(found['route'])}"
    lines = [head]
    if hits:
        lines.append('id score category created #tags "content"')
        lines += [hit_line(hit) for hit in hits]
    for section in ("episodes", "procedures", "workspace"):
        if found.get(section):
            lines.append(f"{section}:")
            lines += [compact_json(pruned(item)) for item in found[section]]
    return "\n".join(lines)


def hit_line(hit: dict[str, Any]) -> str:
    entry = hit["entry"]
    score = "-" if hit.get("score") is None else f"{hit['score']:.3f}".rstrip("0").rstrip(".")  # none: a listing
    category = entry.get("category")
    parts = [word(entry["id"]), score, word(category) if category else "-", (entry.get("created_at") or "")[:10]]
    parts += ["#" + word(tag) for tag in entry.get("tags") or ()]
    if hit.get("tier") not in (None, "active"):
        parts.append(word(hit["tier"]))  # fading or dormant: found because asked for (include_dormant)
    if entry.get("pinned"):
        parts.append("pinned")
    if entry.get("archived_at"):
        parts.append(f"archived {entry['archived_at'][:10]}")
    if entry.get("superseded_by"):
        parts.append(f"superseded-by {word(entry['superseded_by'])}")
    if entry.get("metadata"):
        parts.append(compact_json(entry["metadata"]))
    return visible(" ".join(parts)) + " " + compact_json(entry["content"])
