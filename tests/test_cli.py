"""The command line, run as a real subprocess: import, export, search, stats, reindex, settings."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest

from tests.embedding_server import EmbeddingServer, hashed_vectors, model_reply

NOTES: list[dict[str, Any]] = [
    {
        "id": "note-jan",
        "content": "Deploy staging with the blue green switch",
        "category": "project-context/rockmem",
        "tags": ["deploy", "ops"],
        "created_at": "2024-01-10T00:00:00Z",
    },
    {
        "id": "note-feb",
        "content": "Deploy production only on Tuesdays",
        "category": "project-context/rockmem/release",
        "tags": ["deploy"],
        "created_at": "2024-02-10T00:00:00Z",
        "importance": 0.9,
    },
    {
        "id": "note-mar",
        "content": "Deploy notes from the old wiki",
        "category": "project-context-old",
        "created_at": "2024-03-10T00:00:00Z",
        "metadata": {"source": "wiki"},
    },
    {
        "id": "note-apr",
        "content": "User wants a deploy summary by mail, café-style, from Zürich",
        "category": "user-preferences",
        "tags": ["Email"],
        "created_at": "2024-04-10T00:00:00Z",
        "updated_at": "2024-04-11T08:30:00Z",
    },
    {
        "id": "note-may",
        "content": "Deploy freeze during the holidays (no longer true)",
        "created_at": "2024-05-10T00:00:00Z",
        "archived_at": "2024-06-01T00:00:00Z",
        "archive_reason": "policy changed",
    },
]


def clean_env(**extra: str) -> dict[str, str]:
    """The test process's environment without ROCKMEM_* settings, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ROCKMEM_")}
    env.update(extra)
    return env


def rockmem(*args: str | Path, env: dict[str, str] | None = None, stdin: str | None = None):
    """Run `python -m rockmem_mcp ARGS` and return the completed process (text mode)."""
    return subprocess.run(
        [sys.executable, "-m", "rockmem_mcp", *map(str, args)],
        input=stdin,
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=clean_env() if env is None else env,
        timeout=60,
        check=False,
    )


def ok(*args: str | Path, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    result = rockmem(*args, **kwargs)
    assert result.returncode == 0, f"rockmem-mcp {args} failed ({result.returncode}):\n{result.stderr}"
    assert "Traceback" not in result.stderr
    return result


def write_jsonl(path: Path, lines: list[Any]) -> Path:
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines), "utf-8")
    return path


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def seeded(home: Path, tmp_path: Path) -> Path:
    """A home holding NOTES (note-may archived)."""
    ok("--home", home, "import", write_jsonl(tmp_path / "notes.jsonl", NOTES))
    return home


def stats(home: Path) -> dict[str, Any]:
    return json.loads(ok("stats", "--home", home).stdout)


# ---------------------------------------------------------------------------------------------- basics


def test_version() -> None:
    result = ok("--version")
    assert result.stdout.strip() == f"rockmem-mcp {version('rockmem-mcp')}"


def test_console_script_version() -> None:
    script = Path(sys.executable).with_name("rockmem-mcp")
    if not script.exists():
        pytest.skip("console script not installed next to the interpreter")
    result = subprocess.run([script, "--version"], capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0
    assert result.stdout.startswith("rockmem-mcp ")


def test_stats_of_an_empty_home(home: Path) -> None:
    data = stats(home)
    assert data["home"] == str(home.resolve())
    assert (data["active"], data["archived"], data["categories"]) == (0, 0, 0)
    assert data["top_categories"] == {}


def test_invalid_settings_exit_2_with_a_message(home: Path) -> None:
    result = rockmem("--home", home, "stats", env=clean_env(ROCKMEM_MAX_CONTENT_BYTES="lots"))
    assert result.returncode == 2
    assert "ROCKMEM_MAX_CONTENT_BYTES" in result.stderr
    assert "Traceback" not in result.stderr


# ---------------------------------------------------------------------------------------------- import


def test_import_reports_bad_lines_and_keeps_the_good_ones(home: Path, tmp_path: Path) -> None:
    good = [{"content": f"Good fact number {n}", "category": "facts"} for n in range(5)]
    source = write_jsonl(
        tmp_path / "mixed.jsonl",
        [good[0], good[1], good[2], '{"content": "broken json",', good[3], {"category": "facts"}, good[4]],
    )

    result = rockmem("--home", home, "import", source)  # --home before the subcommand

    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    bad = sorted(int(n) for n in re.findall(r"^line (\d+):", result.stderr, re.MULTILINE))
    assert bad == [4, 6]
    assert re.search(r"^line 6:.*content", result.stderr, re.MULTILINE)
    assert "imported 5 memories" in result.stderr
    assert "2 bad lines" in result.stderr
    assert result.stdout == ""

    data = stats(home)  # --home after the subcommand
    assert data["active"] == 5
    assert data["top_categories"] == {"facts": 5}


def test_import_from_stdin(home: Path) -> None:
    lines = "".join(json.dumps({"content": f"Piped fact {n}"}) + "\n" for n in range(3))
    result = ok("--home", home, "import", "-", stdin=lines)
    assert "imported 3 memories" in result.stderr
    assert stats(home)["active"] == 3


def test_import_replaces_entries_with_the_same_id(seeded: Path, tmp_path: Path) -> None:
    update = write_jsonl(
        tmp_path / "update.jsonl",
        [{"id": "note-jan", "content": "Deploy staging by canary now", "category": "decisions"}],
    )
    result = ok("import", update, "--home", seeded)
    assert "1 replaced" in result.stderr
    assert stats(seeded)["active"] == 4
    found = json.loads(ok("search", "canary", "--json", "--home", seeded).stdout)
    assert found["entry"]["id"] == "note-jan"
    assert found["entry"]["category"] == "decisions"
    assert not (seeded / "memory" / "project-context" / "rockmem" / "note-jan.json").exists()


def test_import_of_a_missing_file_fails_cleanly(home: Path, tmp_path: Path) -> None:
    missing = tmp_path / "no-such-file.jsonl"
    result = rockmem("--home", home, "import", missing)
    assert result.returncode == 1
    assert result.stderr.strip() == f"rockmem-mcp: cannot read {missing}: No such file or directory"


def test_import_of_a_directory_fails_cleanly(home: Path, tmp_path: Path) -> None:
    result = rockmem("--home", home, "import", tmp_path)
    assert result.returncode == 1
    assert result.stderr.startswith(f"rockmem-mcp: cannot read {tmp_path}")
    assert "Traceback" not in result.stderr


def test_import_of_a_file_that_is_not_utf8_fails_cleanly(home: Path, tmp_path: Path) -> None:
    source = tmp_path / "latin1.jsonl"
    source.write_bytes(b'{"content": "a good first line"}\n{"content": "caf\xe9 in latin-1"}\n')
    result = rockmem("--home", home, "import", source)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr, result.stderr
    assert "line 2" in result.stderr or "utf-8" in result.stderr.lower()


@pytest.mark.parametrize(
    ("bad_line", "field"),
    [
        ({"content": "Category given as a number", "category": 5}, "category"),
        ({"content": "Tags given as one string", "tags": "abc"}, "tag"),
        ({"content": "Tags holding a number", "tags": [1]}, "tag"),
        ({"content": "Metadata with a number", "metadata": {"k": 1}}, "metadata"),
        ({"content": "Importance out of range", "importance": 2}, "importance"),
        ({"content": "Bad creation time", "created_at": "yesterday"}, "created_at"),
        ({"content": "Bad id", "id": "../escape"}, "id"),
        (["not", "an", "object"], "object"),
    ],
    ids=["category-int", "tags-str", "tags-int", "metadata-int", "importance", "created_at", "id", "array"],
)
def test_import_rejects_malformed_fields_by_line(home: Path, tmp_path: Path, bad_line: Any, field: str) -> None:
    source = write_jsonl(
        tmp_path / "odd.jsonl", [{"content": "A good line before"}, bad_line, {"content": "And after"}]
    )

    result = rockmem("--home", home, "import", source)

    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 1
    errors = re.findall(r"^line (\d+): (.*)$", result.stderr, re.MULTILINE)
    assert [int(n) for n, _ in errors] == [2]
    assert field in errors[0][1]
    assert "imported 2 memories" in result.stderr
    stored = [json.loads(path.read_text("utf-8")) for path in (home / "memory").rglob("*.json")]
    assert sorted(e["content"] for e in stored) == ["A good line before", "And after"]


# ---------------------------------------------------------------------------------------------- export


def test_export_import_export_round_trip_is_identical(seeded: Path, tmp_path: Path) -> None:
    first = tmp_path / "first.jsonl"
    second = tmp_path / "second.jsonl"
    other_home = tmp_path / "other-home"

    assert "exported 5 memories" in ok("--home", seeded, "export", first).stderr
    assert "imported 5 memories (0 replaced" in ok("--home", other_home, "import", first).stderr
    ok("export", second, "--home", other_home)

    assert first.read_bytes() == second.read_bytes()
    exported = [json.loads(line) for line in first.read_text("utf-8").splitlines()]
    assert [e["id"] for e in exported] == [n["id"] for n in NOTES]  # oldest first
    by_id = {e["id"]: e for e in exported}
    assert by_id["note-may"]["archive_reason"] == "policy changed"
    assert by_id["note-apr"]["content"] == NOTES[3]["content"]
    assert by_id["note-apr"]["updated_at"] == "2024-04-11T08:30:00Z"
    assert by_id["note-feb"]["importance"] == 0.9
    assert by_id["note-mar"]["metadata"] == {"source": "wiki"}
    assert stats(other_home)["archived"] == 1


def test_export_to_stdout_prints_only_the_entries(seeded: Path, tmp_path: Path) -> None:
    to_file = tmp_path / "export.jsonl"
    ok("--home", seeded, "export", to_file)
    to_stdout = ok("--home", seeded, "export", "-")
    assert to_stdout.stdout == to_file.read_text("utf-8")
    assert "exported 5 memories" in to_stdout.stderr


def test_export_to_an_unwritable_path_fails_cleanly(seeded: Path, tmp_path: Path) -> None:
    target = tmp_path / "no-such-dir" / "export.jsonl"
    result = rockmem("--home", seeded, "export", target)
    assert result.returncode == 1
    assert result.stderr.strip() == f"rockmem-mcp: cannot write {target}: No such file or directory"


# ---------------------------------------------------------------------------------------------- search


def test_search_prints_matching_lines(seeded: Path) -> None:
    result = ok("search", "deploy", "--category", "project-context", "--limit", "1", "--home", seeded)
    lines = result.stdout.splitlines()
    assert len(lines) == 1
    line = re.fullmatch(r"\s*(\d+\.\d{3})  \[(note-\w+)\] \(([\w/-]+)\) (.*)", lines[0])
    assert line, lines[0]
    assert float(line[1]) > 0
    assert line[2] in {"note-jan", "note-feb"}
    assert line[3].startswith("project-context/rockmem")
    assert line[4].startswith("Deploy")
    assert "1 of 2 matches" in result.stderr

    both = ok("--home", seeded, "search", "deploy", "--category", "project-context", "--limit", "5")
    assert sorted(re.findall(r"\[(note-\w+)\]", both.stdout)) == ["note-feb", "note-jan"]


def test_search_filters_by_tags_and_includes_archived_on_request(seeded: Path) -> None:
    tagged = ok("--home", seeded, "search", "--tag", "deploy", "--tag", "ops")
    assert re.findall(r"\[(note-\w+)\]", tagged.stdout) == ["note-jan"]

    assert "note-may" not in ok("--home", seeded, "search", "freeze").stdout
    archived = ok("--home", seeded, "search", "freeze", "--include-archived").stdout
    assert "[note-may]" in archived
    assert "[archived]" in archived


def test_search_without_query_lists_newest_first(seeded: Path) -> None:
    result = ok("--home", seeded, "search", "--limit", "2")
    assert re.findall(r"\[(note-\w+)\]", result.stdout) == ["note-apr", "note-mar"]
    assert all(line.startswith("      ") for line in result.stdout.splitlines())  # no score without a query
    assert "2 of 4 matches" in result.stderr


def test_search_json_output_is_one_json_object_per_line(seeded: Path) -> None:
    result = ok("--home", seeded, "search", "deploy", "--json")
    hits = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(hits) == 4
    assert all(set(hit) == {"entry", "score"} and hit["score"] > 0 for hit in hits)
    assert {hit["entry"]["id"] for hit in hits} == {"note-jan", "note-feb", "note-mar", "note-apr"}
    scores = [hit["score"] for hit in hits]
    assert scores == sorted(scores, reverse=True)


def test_search_with_a_bad_limit_fails_cleanly(seeded: Path) -> None:
    result = rockmem("--home", seeded, "search", "deploy", "--limit", "0")
    assert result.returncode == 1
    assert result.stderr.startswith("rockmem-mcp: limit must be")
    assert "Traceback" not in result.stderr


# ---------------------------------------------------------------------------------------------- home selection


def test_rockmem_home_is_honoured_without_home_flag(tmp_path: Path) -> None:
    env_home = tmp_path / "from-env"
    env = clean_env(ROCKMEM_HOME=str(env_home))
    ok("import", write_jsonl(tmp_path / "one.jsonl", [{"content": "Remembered via the environment"}]), env=env)

    assert len(list((env_home / "memory").glob("*.json"))) == 1
    assert "Remembered via the environment" in ok("search", "environment", env=env).stdout
    assert json.loads(ok("stats", env=env).stdout)["home"] == str(env_home.resolve())


def test_home_flag_overrides_rockmem_home(tmp_path: Path) -> None:
    env = clean_env(ROCKMEM_HOME=str(tmp_path / "env-home"))
    flag_home = tmp_path / "flag-home"
    ok("--home", flag_home, "import", "-", stdin=json.dumps({"content": "Filed under the flag home"}) + "\n", env=env)
    assert "Filed under the flag home" in ok("search", "flag", "--home", flag_home, env=env).stdout
    assert ok("search", "flag", env=env).stdout == ""


# ---------------------------------------------------------------------------------------------- reindex


def test_reindex_after_deleting_the_index_rebuilds_it(seeded: Path) -> None:
    shutil.rmtree(seeded / "index")

    result = ok("--home", seeded, "reindex")

    assert result.stdout == ""
    assert "indexed 5 memories" in result.stderr
    assert (seeded / "index" / "memory-index.npz").is_file()
    found = ok("--home", seeded, "search", "deploy", "--json").stdout.splitlines()
    assert len(found) == 4
    data = stats(seeded)
    assert (data["active"], data["archived"]) == (4, 1)


def test_search_without_an_index_rebuilds_it_on_the_fly(seeded: Path) -> None:
    shutil.rmtree(seeded / "index")
    assert len(ok("--home", seeded, "search", "deploy").stdout.splitlines()) == 4


def test_reindex_picks_up_entry_files_added_by_hand(seeded: Path) -> None:
    entry = json.loads((seeded / "memory" / "project-context-old" / "note-mar.json").read_text("utf-8"))
    entry.update(id="by-hand", content="Hand written note about kubernetes")
    (seeded / "memory" / "by-hand.json").write_text(json.dumps(entry), "utf-8")

    ok("--home", seeded, "reindex")
    found = ok("--home", seeded, "search", "kubernetes").stdout
    assert "[by-hand] (-) Hand written note about kubernetes" in found


@pytest.fixture
def embedding_endpoint() -> Iterator[EmbeddingServer]:
    server = EmbeddingServer()
    server.replies = [model_reply(hashed_vectors)]
    yield server
    server.close()


def test_reindex_embeddings_backfills_every_memory(seeded: Path, embedding_endpoint: EmbeddingServer) -> None:
    env = clean_env(ROCKMEM_EMBEDDING_ENDPOINT=embedding_endpoint.url, ROCKMEM_EMBEDDING_MODEL="hashed")
    result = ok("--home", seeded, "reindex", "--embeddings", env=env)
    assert "vectors for 5 memories (5 embedded with openai-compatible:" in result.stderr
    cached = sorted(p.stem for p in (seeded / ".embeddings").glob("*.bin"))
    assert cached == sorted(note["id"] for note in NOTES)
    assert json.loads((seeded / ".embeddings" / "model.json").read_text())["dim"] == 64
    data = json.loads(ok("--home", seeded, "stats", env=env).stdout)
    assert data["embedded"] == 5 and data["embedding_model"].endswith(":hashed")
    # A second run rebuilds the index but takes every vector from the cache: no request but the probe.
    before = len(embedding_endpoint.requests)
    again = ok("--home", seeded, "reindex", "--embeddings", env=env).stderr
    assert "vectors for 5 memories (0 embedded" in again and "5 from the cache" in again
    assert all(len(body["input"]) == 1 for body, _ in embedding_endpoint.requests[before:])  # probe only
    search = ok("--home", seeded, "search", "deploy summary mail", "--mode", "vector", "--limit", "1", env=env)
    assert "[note-apr]" in search.stdout and "ranked by vector" in search.stderr


def test_reindex_embeddings_without_a_provider_fails_clearly(seeded: Path) -> None:
    result = rockmem("--home", seeded, "reindex", "--embeddings")
    assert result.returncode == 1
    assert "no embedding provider is configured" in result.stderr


# ---------------------------------------------------------------------------------------------- import-graph

# The knowledge-graph file of @modelcontextprotocol/server-memory, written from its format description:
# one JSON object per line, entities with observations, relations in active voice.
REFERENCE_GRAPH: list[Any] = [
    {"type": "entity", "name": "John_Smith", "entityType": "person", "observations": ["Speaks fluent Spanish"]},
    {"type": "entity", "name": "Anthropic", "entityType": "organization", "observations": ["Builds Claude", ""]},
    {"type": "entity", "name": "Zed", "entityType": "Code Editor!", "observations": []},
    {"type": "relation", "from": "John_Smith", "to": "Anthropic", "relationType": "works_at"},
    {"type": "relation", "from": "John_Smith", "to": "Zed", "relationType": "prefersEditor"},
    {"type": "relation", "from": "Anthropic", "to": "Claude", "relationType": "builds"},
    "{not json",
    {"type": "relation", "from": "John_Smith", "relationType": "knows"},
    {"type": "entity", "name": "", "entityType": "person", "observations": []},
    {"type": "entity", "name": "Ann", "entityType": "person", "observations": "not a list"},
    {"type": "memory", "name": "x"},
]


def test_import_graph_reads_the_reference_servers_file_and_is_idempotent(home: Path, tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "memory.jsonl", REFERENCE_GRAPH)
    first = rockmem("--home", home, "import-graph", source)
    assert first.returncode == 1 and "Traceback" not in first.stderr  # bad lines make the exit code 1
    assert sorted(int(n) for n in re.findall(r"^line (\d+):", first.stderr, re.MULTILINE)) == [7, 8, 9, 10, 11]
    assert "imported 3 entities (3 new), 3 relations (3 new) and 2 observations as memories" in first.stderr
    data = stats(home)
    assert (data["graph_entities"], data["graph_triples"], data["active"]) == (4, 3, 2)  # Claude was created

    again = rockmem("--home", home, "import-graph", source)
    assert "imported 3 entities (0 new), 3 relations (0 new) and 2 observations as memories" in again.stderr
    data = stats(home)
    assert (data["graph_entities"], data["graph_triples"], data["active"]) == (4, 3, 2)  # nothing doubled

    found = json.loads(ok("--home", home, "search", "spanish", "--json").stdout.splitlines()[0])["entry"]
    assert found["content"] == "John_Smith: Speaks fluent Spanish"
    assert found["category"] == "knowledge-graph/person" and found["tags"] == ["John_Smith"]
    entity = json.loads(
        next((home / "knowledge-graph" / "entities").glob(f"{found['metadata']['entity_id']}.json")).read_text()
    )
    assert entity["name"] == "John_Smith" and entity["aliases"] == ["John Smith"]
    zed = [json.loads(p.read_text()) for p in (home / "knowledge-graph" / "entities").glob("*.json")]
    zed = next(e for e in zed if e["name"] == "Zed")
    assert zed["type"] == "concept" and zed["metadata"] == {"entity_type": "Code Editor!"}
    predicates = sorted(
        json.loads(p.read_text())["predicate"] for p in (home / "knowledge-graph" / "triples").glob("*.json")
    )
    assert predicates == ["builds", "prefers_editor", "works_at"]


def test_import_graph_of_a_missing_file_fails_cleanly(home: Path, tmp_path: Path) -> None:
    result = rockmem("--home", home, "import-graph", tmp_path / "absent.jsonl")
    assert result.returncode == 1 and "cannot read" in result.stderr and "Traceback" not in result.stderr
