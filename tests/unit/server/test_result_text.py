"""The text a model reads of a result (server/result_text.py): what it drops, what it keeps, and that it never
fails a call."""

from __future__ import annotations

import json

from rockmem_mcp.server.result_text import compact_json, pruned, result_text

ENTRY = {
    "id": "0123456789ab",
    "content": "Ada prefers tea",
    "category": "",
    "tags": [],
    "created_at": "2026-11-02T10:00:00Z",
    "metadata": {},
    "last_seen_at": "2026-11-29T07:00:00Z",
    "reinforcement_count": 3,
    "pinned": False,
    "archived_at": None,
}


def test_an_entry_loses_nulls_empties_and_bookkeeping() -> None:
    assert pruned(ENTRY) == {"id": "0123456789ab", "content": "Ada prefers tea", "created_at": "2026-11-02T10:00:00Z"}


def test_a_report_keeps_salience_and_tier_they_are_its_subject() -> None:
    report = {"archive_candidates": [{"id": "b2", "uses": 0, "salience": 0.04123, "tier": "archive_candidate"}]}
    assert pruned(report) == {
        "archive_candidates": [{"id": "b2", "uses": 0, "salience": 0.041, "tier": "archive_candidate"}]
    }


def test_false_answers_and_what_a_user_or_schema_wrote_stay() -> None:
    assert pruned({"key": "k", "deleted": False}) == {"key": "k", "deleted": False}
    schema = {"properties": {"merges": {"type": "array", "default": []}}, "additionalProperties": False}
    assert pruned({"plan_schema": schema, "metadata": {"source": ""}}) == {
        "plan_schema": schema,
        "metadata": {"source": ""},
    }


def test_line_separators_and_controls_are_escaped() -> None:
    assert compact_json("a\u2028b\u2029c\x1b[2J") == '"a\\u2028b\\u2029c\\u001b[2J"'


def test_a_search_reply_of_an_unexpected_shape_falls_back_to_json() -> None:
    odd = {"results": [{"entry": {"id": "x"}}], "total_matches": 1, "mode": "bm25", "unembedded": 0}  # no content
    assert json.loads(result_text(odd)) == odd


def test_a_search_header_says_what_waits_for_vectors_and_a_line_says_dormant() -> None:
    hit = {"entry": ENTRY | {"tags": ["drinks"]}, "score": 2.5, "tier": "dormant", "store": "memories"}
    text = result_text({"results": [hit], "total_matches": 7, "mode": "hybrid", "unembedded": 3})
    head, _, line = text.split("\n")
    assert head == "hybrid search: 1 of 7 matching memories; 3 without vectors yet (found by keywords only)"
    assert line == '0123456789ab 2.5 - 2026-11-02 #drinks dormant "Ada prefers tea"'
