"""What a model reads of a tool's result: the text copy of its structured content, made cheap to read.

A client puts a tool result's text in its model's context on every turn; programs read the structured content,
which keeps the full typed record. So the text leaves out what a model cannot act on:
- every result is compact JSON without nulls, empty lists, maps and strings, `pinned: false`, and the bookkeeping
  a model has no use for (`BOOKKEEPING`: when an entry was last used, how often it was reinforced, its salience
  and tier, the count still waiting for a vector), floats rounded to 3 decimals. Other false flags stay (a
  `deleted: false` says something), and so does what a user or a schema wrote (`VERBATIM`: metadata, working
  data, the plan schema a dream hands over, whose `false` and `[]` are meaningful);
- a search lists its memories one line each, `id score category created #tags "content"`, under one line
  that says the ranking and how many matched; its episodes, procedures and workspace sections follow as one
  compact JSON object a line. A flag an entry carries (pinned, archived, superseded) is a word on its line.

Stored text stays data: each memory's content is a JSON string (quotes, newlines and control characters
escaped), so no line of memory text can pass for the reply's own structure.
"""

from __future__ import annotations

import json
from typing import Any

from rockmem_mcp.text import visible

BOOKKEEPING = frozenset({"last_seen_at", "reinforcement_count", "salience", "tier", "unembedded"})
VERBATIM = frozenset({"metadata", "data", "plan_schema", "answer_schema", "item", "marks"})


def pruned(value: Any) -> Any:
    """`value` without nulls, empty containers and strings, `pinned: false` and bookkeeping; floats to 3 decimals;
    what is under a `VERBATIM` key as it is."""
    if isinstance(value, dict):
        kept = {k: v if k in VERBATIM else pruned(v) for k, v in value.items() if k not in BOOKKEEPING}
        return {
            k: v
            for k, v in kept.items()
            if k in VERBATIM or (v not in (None, "", [], {}) and not (k == "pinned" and v is False))
        }
    if isinstance(value, list):
        return [pruned(v) for v in value]
    if isinstance(value, float):
        return round(value, 3)
    return value


def compact_json(value: Any) -> str:
    return visible(json.dumps(value, ensure_ascii=False, separators=(",", ":")))


def result_text(structured: dict[str, Any]) -> str:
    """The text a model reads for a tool's structured result."""
    hits = structured.get("results")
    if "mode" in structured and isinstance(hits, list) and all("entry" in hit for hit in hits):  # search_memory
        return search_text(structured)
    return compact_json(pruned(structured))


def search_text(found: dict[str, Any]) -> str:
    hits = found["results"]
    lines = [f"{found.get('mode', 'bm25')} search: {len(hits)} of {found['total_matches']} matching memories"]
    if found.get("route"):
        lines[0] += f"; episodes narrowed to {found['route']}"
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
    score = "-" if hit.get("score") is None else f"{hit['score']:.3g}"  # a listing without a query has none
    parts = [entry["id"], score, entry.get("category") or "-", (entry.get("created_at") or "")[:10]]
    parts += [f"#{tag}" for tag in entry.get("tags") or ()]
    if entry.get("pinned"):
        parts.append("pinned")
    if entry.get("archived_at"):
        parts.append(f"archived {entry['archived_at'][:10]}")
    if entry.get("superseded_by"):
        parts.append(f"superseded-by {entry['superseded_by']}")
    if entry.get("metadata"):
        parts.append(compact_json(entry["metadata"]))
    if hit.get("store") not in (None, "memories"):
        parts.append(f"store {hit['store']}")
    return visible(" ".join(parts)) + " " + compact_json(entry["content"])
