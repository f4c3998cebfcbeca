"""Browsing and fixing memory from a shell (cli/browse.py), through test_cli's `rockmem`: get, list, add, delete,
categories, graph, working, status, each human by default and JSON with --json."""

from __future__ import annotations

import json
from pathlib import Path

from tests.test_cli import clean_env, ok, rockmem

ENV = clean_env(ROCKMEM_EMBEDDING_MODEL="off")


def run(home: Path, *args: str) -> str:
    return ok("--home", home, *args, env=ENV).stdout


def test_add_list_get_delete_round_trip_human_and_json(tmp_path: Path) -> None:
    home = tmp_path / "home"
    saved = json.loads(run(home, "add", "Ada takes her tea with lemon", "--category", "people/ada", "--tag", "tea",
                           "--json"))  # fmt: skip
    assert saved["category"] == "people/ada" and saved["tags"] == ["tea"]
    human = run(home, "add", "Deploys go out on Fridays\x1b[31m", "--pin")
    assert human.startswith("saved [") and "[pinned]" in human and "\x1b" not in human  # no control codes

    listed = run(home, "list")
    assert listed.splitlines()[-1] == "2 of 2, newest first"
    assert f"[{saved['id']}]" in listed and "(people/ada)" in listed
    lines = [json.loads(line) for line in run(home, "list", "--category", "people", "--json").splitlines()]
    assert [entry["id"] for entry in lines] == [saved["id"]]

    shown = run(home, "get", saved["id"])
    assert "tags: tea" in shown and shown.rstrip().endswith("Ada takes her tea with lemon")
    assert shown.count("Ada takes her tea with lemon") == 1  # the content once, whole
    assert shown.splitlines()[0].startswith(f"[{saved['id']}] ") and "(people/ada)" in shown.splitlines()[0]
    assert json.loads(run(home, "get", saved["id"], "--json"))["content"] == "Ada takes her tea with lemon"

    assert run(home, "delete", saved["id"]).startswith(f"{saved['id']} archived")
    assert run(home, "list").splitlines()[-1] == "1 of 1, newest first"
    assert "archived" in run(home, "list", "--include-archived")
    missing = rockmem("--home", home, "get", "000000000000", env=ENV)
    assert missing.returncode == 1 and missing.stderr.startswith("rockmem-mcp: no memory with id '000000000000'")

    # The save was audited as a person's, and logged as an episode like a tool's save.
    assert "manual" in run(home, "log")
    assert list((home / "episodes").glob("*.jsonl"))


def test_a_pinned_memory_needs_confirmation_to_delete(tmp_path: Path) -> None:
    home = tmp_path / "home"
    pinned = json.loads(run(home, "add", "The vault code is in the red book", "--pin", "--json"))
    refused = rockmem("--home", home, "delete", pinned["id"], env=ENV)
    assert refused.returncode == 1 and "pinned" in refused.stderr and "Traceback" not in refused.stderr
    assert "removed permanently" in run(home, "delete", pinned["id"], "--permanent", "--confirm-pinned")


def test_categories_graph_working_and_status(tmp_path: Path) -> None:
    home = tmp_path / "home"
    run(home, "add", "Ada likes tea", "--category", "people/ada")
    run(home, "add", "Bob likes coffee", "--category", "people/bob")
    tree = run(home, "categories")
    assert "people  2" in tree and "  ada  1" in tree and tree.splitlines()[-1] == "2 memories"
    assert json.loads(run(home, "categories", "--json"))["total"] == 2

    graph_lines = json.dumps({"type": "entity", "name": "Ada", "entityType": "person", "observations": []}) + "\n"
    graph_lines += json.dumps({"type": "entity", "name": "Tea", "entityType": "concept", "observations": []}) + "\n"
    graph_lines += json.dumps({"type": "relation", "from": "Ada", "to": "Tea", "relationType": "likes"}) + "\n"
    ok("--home", home, "import-graph", "-", stdin=graph_lines, env=ENV)
    assert run(home, "graph").strip() == "2 entities, 1 triples"
    ada = run(home, "graph", "Ada")
    assert ada.startswith("Ada [person]") and "Ada —likes→ Tea" in ada
    assert json.loads(run(home, "graph", "Ada", "--json"))["entity"]["name"] == "Ada"

    assert run(home, "working").strip() == "0 live entries"
    from rockmem_mcp.config import Settings
    from rockmem_mcp.working.service import WorkingMemory

    agent = WorkingMemory(Settings.load({"home": home, "embedding_model": "off"}, env={}), "subagent/t1")
    agent.save("shared/plan/today", "step 1: tea", ttl_minutes=30)
    agent.save("draft", "half a thought", ttl_minutes=5)
    listed = run(home, "working")
    assert "shared/plan/today  11 B, " in listed and "subagent/t1/draft  14 B, " in listed
    assert listed.splitlines()[-1] == "2 live entries"
    assert run(home, "working", "--in", "shared").splitlines()[-1] == "1 live entries"
    assert run(home, "working", "shared/plan/today").splitlines()[1] == "step 1: tea"
    assert json.loads(run(home, "working", "shared/plan/today", "--json"))["data"] == "step 1: tea"

    status = run(home, "status")
    assert status.splitlines()[0] == f"home {home}; 2 memories; ranking bm25 (embeddings off)"
    assert "graph: 2 entities, 1 triples" in status and "waiting for you: nothing" in status
    report = json.loads(run(home, "status", "--json"))
    assert (report["memories"], report["graph_triples"], report["open_proposals"]) == (2, 1, 0)


def test_every_reporting_command_speaks_json(tmp_path: Path) -> None:
    home = tmp_path / "home"
    lines = "".join(json.dumps({"content": f"note {i} about tea"}) + "\n" for i in range(3)) + "not json\n"
    imported = rockmem("--home", home, "import", "-", "--json", stdin=lines, env=ENV)
    assert imported.returncode == 1  # a bad line
    report = json.loads(imported.stdout)
    assert report["imported"] == 3 and [e["line"] for e in report["errors"]] == [4]
    graph = json.dumps({"type": "entity", "name": "Ada", "entityType": "person", "observations": ["likes tea"]})
    assert (
        json.loads(ok("--home", home, "import-graph", "-", "--json", stdin=graph + "\n", env=ENV).stdout)[
            "entities_created"
        ]
        == 1
    )
    assert json.loads(run(home, "reindex", "--json")) == {"memories": 4}
    assert json.loads(run(home, "stats", "--json"))["active"] == 4
    tools = json.loads(run(home, "tools", "--json"))
    assert tools["selected_tokens"] <= tools["budget"] and tools["toolsets"]["memory"]["default"] is True
    dreamt = [json.loads(line) for line in run(home, "dream", "--dry-run", "--json").splitlines()]
    assert dreamt and all(report["dry_run"] for report in dreamt)
