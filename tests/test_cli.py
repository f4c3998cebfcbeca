"""The command line: import, export, search, stats, reindex, settings; in this process (`rockmem`), or as a real
subprocess where a test needs one."""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import threading
import traceback
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from tests.conftest import SUITE_EMBEDDINGS
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


def clean_env(**extra: str | None) -> dict[str, str]:
    """The test process's environment without ROCKMEM_* settings but the suite's embedding setting (off unless a
    test asks: tests/conftest.py says why), plus `extra`; `NAME=None` leaves NAME unset (the product's default,
    e.g. ROCKMEM_EMBEDDING_MODEL=None for the bundled model)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ROCKMEM_")}
    env["ROCKMEM_EMBEDDING_MODEL"] = SUITE_EMBEDDINGS
    for name, value in extra.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


def rockmem(
    *args: str | Path, env: dict[str, str] | None = None, stdin: str | None = None, process: bool = False
) -> subprocess.CompletedProcess[str]:
    """`rockmem-mcp ARGS` with `env` and `stdin`, as a completed process (text mode). Run in this process (the CLI's
    `main` with the environment, streams and logging a process of its own would have: a subprocess costs ~0.8 s of
    CPU a command) unless `process`, the command serves (a server claims the real stdin and stdout and holds
    process-wide state until its first answer), or `env` changes what an interpreter reads once at its start."""
    env = clean_env() if env is None else env
    argv = [str(arg) for arg in args]
    changes_start = any(env.get(name) != os.environ.get(name) for name in {*env, *os.environ} if _read_at_start(name))
    if process or changes_start or _serves(argv):
        return subprocess.run(
            [sys.executable, "-m", "rockmem_mcp", *argv],
            input=stdin,
            capture_output=True,
            text=True,
            encoding="utf-8",
            env=env,
            timeout=CLI_SECONDS,
            check=False,
        )
    return _run_in_process(argv, env, stdin or "")


CLI_SECONDS = 60  # a command that takes longer has hung


def _read_at_start(name: str) -> bool:
    return name.startswith(("PYTHON", "LC_")) or name == "LANG"


def _serves(argv: list[str]) -> bool:
    from rockmem_mcp.cli.parser import build_parser

    try:
        with contextlib.redirect_stderr(io.StringIO()):
            command = build_parser().parse_args(argv).command
    except SystemExit:  # --help, --version, a usage error: answered without serving
        return False
    return command in (None, "serve", "ui")


def _run_in_process(argv: list[str], env: dict[str, str], stdin: str) -> subprocess.CompletedProcess[str]:
    """`main(argv)` on a thread of its own (no event loop of the test's in the way, and a deadline), with this
    process's environment, streams and root logger as a new process would have them, put back after."""
    from rockmem_mcp.cli import main

    def stream(data: bytes = b"") -> io.TextIOWrapper:
        return io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", write_through=True)

    out, err = stream(), stream()
    status: list[int] = []

    def run() -> None:
        try:
            status.append(main(argv) or 0)  # sys.exit(None): 0
        except SystemExit as exc:  # argparse's usage errors, --help, --version
            if isinstance(exc.code, str):
                print(exc.code, file=sys.stderr)
            status.append(exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1))
        except BaseException:  # as the interpreter would: the traceback on stderr, status 1
            traceback.print_exc()
            status.append(1)

    root = logging.getLogger()
    saved = sys.stdin, sys.stdout, sys.stderr, root.handlers[:], root.level
    root.handlers = []  # as in a new process: the CLI's logging.basicConfig writes to this stderr
    sys.stdin, sys.stdout, sys.stderr = stream(stdin.encode()), out, err
    try:
        with mock.patch.dict(os.environ, env, clear=True):
            thread = threading.Thread(target=run, name="rockmem-mcp " + " ".join(argv)[:60], daemon=True)
            thread.start()
            thread.join(CLI_SECONDS)
    finally:
        for handler in root.handlers:
            handler.close()
        sys.stdin, sys.stdout, sys.stderr, root.handlers, root.level = saved
        _close_database_connections()  # as a process's exit would: the next command connects and migrates anew
    if thread.is_alive():
        pytest.fail(f"rockmem-mcp {' '.join(argv)} did not finish in {CLI_SECONDS} s")

    def text(written: io.TextIOWrapper) -> str:  # decoded as subprocess.run(text=True) does: universal newlines
        return stream(written.buffer.getvalue()).read()  # type: ignore[attr-defined]

    return subprocess.CompletedProcess(["rockmem-mcp", *argv], status[0], text(out), text(err))


def _close_database_connections() -> None:
    pg = sys.modules.get("rockmem_mcp.storage.pg")
    if pg is not None:
        for url, _, schema in list(pg._shared):
            pg.close_shared(url, schema)


def on_a_terminal(argv: list[str], env: dict[str, str]) -> tuple[int, str]:
    """`rockmem-mcp ARGV` with its stderr on a pseudo-terminal (as a person runs it): its exit code and what the
    terminal showed."""
    import pty

    controller, terminal = pty.openpty()
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", "rockmem_mcp", *argv],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=terminal, env=env,
        )  # fmt: skip
        process.wait(timeout=120)
        os.close(terminal)
        terminal = -1
        shown = b""
        while True:
            try:
                chunk = os.read(controller, 65536)
            except OSError:  # the terminal's other end is closed: all read
                break
            if not chunk:
                break
            shown += chunk
    finally:
        os.close(controller)
        if terminal != -1:
            os.close(terminal)
    return process.returncode, shown.decode(errors="replace")


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


def stats(home: Path, env: dict[str, str] | None = None) -> dict[str, Any]:
    return json.loads(ok("stats", "--json", "--home", home, env=env).stdout)


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
    assert data["tiers"] == {"active": 0, "fading": 0, "dormant": 0, "archive_candidate": 0}


def salience_notes() -> list[dict[str, Any]]:
    """Importance 0.7, one use: salience 0.84 · e^(−0.03 · days since the last use)."""
    return [
        {"id": "fresh", "content": "The user prefers dark mode", "last_seen_at": _ago(1)},
        {"id": "fading", "content": "The build takes about ten minutes", "last_seen_at": _ago(30)},
        {"id": "dormant", "content": "Staging was moved to the new cluster", "last_seen_at": _ago(60)},
        {"id": "candidate", "content": "Legacy CI ran on Jenkins in the basement lab", "last_seen_at": _ago(120)},
        {"id": "pinned", "content": "The user is allergic to peanuts", "pinned": True, "last_seen_at": _ago(900)},
        {"id": "gone", "content": "An archived note", "archived_at": _ago(1)},
    ]


def test_stats_counts_live_memories_per_salience_tier_and_the_pinned(home: Path, tmp_path: Path) -> None:
    ok("--home", home, "import", write_jsonl(tmp_path / "salience.jsonl", salience_notes()))
    data = stats(home)
    assert data["tiers"] == {"active": 2, "fading": 1, "dormant": 1, "archive_candidate": 1}
    assert data["pinned"] == 1 and (data["active"], data["archived"]) == (5, 1)


def test_salience_lists_the_least_and_the_most_salient_memories(home: Path, tmp_path: Path) -> None:
    ok("--home", home, "import", write_jsonl(tmp_path / "salience.jsonl", salience_notes()))
    least = ok("--home", home, "salience", "--limit", "2")
    lines = least.stdout.splitlines()
    assert len(lines) == 2, least.stdout
    assert re.fullmatch(
        r" 0\.023  archive_candidate +\[candidate\]    1 uses, last \d{4}-\d\d-\d\d  Legacy CI ran on Jenkins in "
        r"the basement lab",
        lines[0],
    ), lines[0]
    assert lines[1].startswith(" 0.139  dormant ") and "[dormant]" in lines[1]
    assert "least salient 2 of 5: 2 active, 1 fading, 1 dormant, 1 archive_candidate; 1 pinned" in least.stderr
    most = json.loads(ok("--home", home, "salience", "--most", "--limit", "3", "--json").stdout)
    assert most["order"] == "most" and most["pinned"] == 1
    assert [(m["id"], m["tier"]) for m in most["memories"]] == [
        ("pinned", "active"),
        ("fresh", "active"),
        ("fading", "fading"),
    ]
    assert most["memories"][0] == {**most["memories"][0], "salience": 1.0, "pinned": True, "uses": 1}
    assert most["memories"][1]["preview"] == "The user prefers dark mode"
    bad = rockmem("--home", home, "salience", "--limit", "0")
    assert bad.returncode == 1 and "limit must be an integer from 1 to 200" in bad.stderr


def test_invalid_settings_exit_2_with_a_message(home: Path) -> None:
    result = rockmem("--home", home, "stats", env=clean_env(ROCKMEM_MAX_CONTENT_BYTES="lots"))
    assert result.returncode == 2
    assert "ROCKMEM_MAX_CONTENT_BYTES" in result.stderr
    assert "Traceback" not in result.stderr


def test_tools_lists_the_toolsets_and_what_the_flag_or_the_environment_selects(home: Path) -> None:
    table = ok("--home", home, "tools").stdout
    assert "| `graph` | yes | `graph` |" in table
    last = table.rstrip().splitlines()[-1]
    assert last.startswith("selected (default): memory, recall, core, working, conversation,")
    from_env = ok("--home", home, "tools", env=clean_env(ROCKMEM_TOOLSETS="graph")).stdout.rstrip()
    assert from_env.splitlines()[-1].startswith("selected (graph): graph; 1 tool, ≈ ")
    flag = ok("tools", "--home", home, "--toolsets", "recall,memory", env=clean_env(ROCKMEM_TOOLSETS="graph"))
    assert flag.stdout.rstrip().splitlines()[-1].startswith("selected (recall,memory): memory, recall; 10 tools")


@pytest.mark.parametrize("args", [("--toolsets", "memory,grpah"), ("serve", "--toolsets", "memory,grpah")])
def test_an_unknown_toolset_stops_the_server_before_it_starts(home: Path, args: tuple[str, ...]) -> None:
    result = rockmem("--home", home, *args, stdin="")
    assert result.returncode == 2
    assert result.stdout == ""  # not a byte on the protocol channel
    assert "unknown toolset 'grpah'" in result.stderr
    assert (
        "memory, recall, core, working, conversation, graph, dream, workspace, episodes, procedures, audit, review, "
        "classic, default, all" in result.stderr
    )
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
    assert all(set(hit) == {"store", "entry", "score", "salience", "tier"} and hit["score"] > 0 for hit in hits)
    assert {hit["entry"]["id"] for hit in hits} == {"note-jan", "note-feb", "note-mar", "note-apr"}
    scores = [hit["score"] for hit in hits]
    assert scores == sorted(scores, reverse=True)


def test_search_shows_matching_sections_of_the_workspace_files_after_the_memories(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "SOUL.md").write_text("# Persona\nWarm.\n\n## Tone\nNever sarcastic,\nalways kind.\n")
    result = ok("--home", home, "search", "sarcastic")
    line = r"\s*\d+\.\d{3}  \[SOUL\.md:4\] \(Tone\) ## Tone Never sarcastic, always kind\.\n"
    assert re.fullmatch(line, result.stdout)
    assert "0 of 0 matches, ranked by bm25; 1 workspace sections" in result.stderr
    assert ok("--home", home, "search", "sarcastic", "--category", "x").stdout == ""  # a filter: memories only
    assert ok("--home", home, "search", "sarcastic", "--json").stdout == ""  # JSON lines are memories only


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
    assert json.loads(ok("stats", "--json", env=env).stdout)["home"] == str(env_home.resolve())


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
    data = json.loads(ok("--home", seeded, "stats", "--json", env=env).stdout)
    assert data["embedded"] == 5 and data["embedding_model"].endswith(":hashed")
    # A second run rebuilds the index but takes every vector from the cache: no request but the probe.
    before = len(embedding_endpoint.requests)
    again = ok("--home", seeded, "reindex", "--embeddings", env=env).stderr
    assert "vectors for 5 memories (0 embedded" in again and "5 from the cache" in again
    assert all(len(body["input"]) == 1 for body, _ in embedding_endpoint.requests[before:])  # probe only
    search = ok("--home", seeded, "search", "deploy summary mail", "--mode", "vector", "--limit", "1", env=env)
    assert "[note-apr]" in search.stdout and "ranked by vector" in search.stderr


def test_reindex_embeddings_with_embeddings_off_fails_clearly(seeded: Path) -> None:
    result = rockmem("--home", seeded, "reindex", "--embeddings", env=clean_env(ROCKMEM_EMBEDDING_MODEL="off"))
    assert result.returncode == 1
    assert "no embedding provider is configured" in result.stderr


def test_reindex_embeddings_without_settings_uses_the_bundled_model(home: Path, tmp_path: Path) -> None:
    ok("--home", home, "import", write_jsonl(tmp_path / "notes.jsonl", NOTES), "--no-embeddings")
    assert stats(home)["embedded"] == 0
    bundled = clean_env(ROCKMEM_EMBEDDING_MODEL=None)  # the product's default: no setting
    reindexed = ok("--home", home, "reindex", "--embeddings", env=bundled)
    assert "vectors for 5 memories (5 embedded" in reindexed.stderr
    assert json.loads((home / ".embeddings" / "model.json").read_text())["dim"] == 384
    data = stats(home, bundled)
    assert data["embedded"] == 5 and data["embedding_model"] == "onnx:minilm-l3-int8@1+whole-known"


def test_import_embeds_what_it_imported_so_no_server_has_to(home: Path, tmp_path: Path) -> None:
    bundled = clean_env(ROCKMEM_EMBEDDING_MODEL=None)  # the product's default: no setting
    result = ok("--home", home, "import", write_jsonl(tmp_path / "notes.jsonl", NOTES), "--json", env=bundled)
    assert json.loads(result.stdout)["vectors"] == 5
    assert "vectors for 5 memories (5 embedded with onnx:minilm-l3-int8" in result.stderr
    assert sorted(p.stem for p in (home / ".embeddings").glob("*.bin")) == sorted(n["id"] for n in NOTES)
    assert stats(home, bundled)["embedded"] == 5
    search = ok("--home", home, "search", "deploy summary mail", "--mode", "vector", "--limit", "1", env=bundled)
    assert "ranked by vector" in search.stderr and "not embedded yet" not in search.stderr


def test_import_with_the_provider_down_keeps_the_memories_and_defers_the_vectors(home: Path, tmp_path: Path) -> None:
    down = clean_env(ROCKMEM_EMBEDDING_ENDPOINT="http://127.0.0.1:9/v1", ROCKMEM_EMBEDDING_MODEL="hashed")
    result = ok("--home", home, "import", write_jsonl(tmp_path / "notes.jsonl", NOTES), env=down)
    assert "vectors later:" in result.stderr and "imported 5 memories" in result.stderr
    counts = stats(home)
    assert counts["active"] + counts["archived"] == 5 and counts["embedded"] == 0


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


# ---------------------------------------------------------------------------------------------- dream


def _ago(days: float) -> str:
    from datetime import UTC, datetime, timedelta

    return (datetime.now(UTC) - timedelta(days=days)).isoformat()


def dream_notes() -> list[dict[str, Any]]:
    """Exact and near-duplicates, a memory unused for 120 days, a protected one unused for 300, two archived
    ones."""
    return [
        {"id": "dark-a", "content": "The user prefers dark mode in every editor", "created_at": _ago(3)},
        {"id": "dark-b", "content": "the user prefers dark mode in every  editor.", "created_at": _ago(2)},
        {"id": "tz-a", "content": "The team meets on Mondays at the Berlin office", "created_at": _ago(5)},
        {"id": "tz-b", "content": "On Mondays the team meets at the Berlin office", "created_at": _ago(4)},
        {
            "id": "stale",
            "content": "Legacy CI ran on Jenkins",
            "importance": 0.6,
            "created_at": _ago(200),
            "last_seen_at": _ago(120),
        },
        {
            "id": "guarded",
            "content": "Backups are encrypted with age",
            "importance": 0.9,
            "reinforcement_count": 5,  # in use: never pruned
            "pinned": False,  # a line of today's format (an old export's 0.9 would be pinned on import)
            "created_at": _ago(300),
            "last_seen_at": _ago(300),
        },
        {"id": "old-archive", "content": "An old archived note", "created_at": _ago(200), "archived_at": _ago(100)},
        {"id": "new-archive", "content": "A recent archived note", "created_at": _ago(20), "archived_at": _ago(10)},
    ]


@pytest.fixture
def dream_home(home: Path, tmp_path: Path) -> Path:
    ok("--home", home, "import", write_jsonl(tmp_path / "dream.jsonl", dream_notes()))
    return home


def memory_files(home: Path) -> dict[str, bytes]:
    return {str(p.relative_to(home)): p.read_bytes() for p in sorted((home / "memory").rglob("*.json"))}


def entry(home: Path, entry_id: str, include_archived: bool = True) -> dict[str, Any] | None:
    args = ["search", "--json", "--limit", "100", "--home", home] + (["--include-archived"] if include_archived else [])
    found = [json.loads(line)["entry"] for line in ok(*args).stdout.splitlines()]
    return next((e for e in found if e["id"] == entry_id), None)


def dream_reports(home: Path) -> list[Path]:
    return sorted((home / "dream-reports").glob("*.json"))


def test_dream_dry_run_prints_the_actions_and_changes_nothing(dream_home: Path) -> None:
    before = memory_files(dream_home)
    result = ok("--home", dream_home, "dream", "--dry-run")
    lines = result.stdout.splitlines()
    assert re.search(r"^  merge +dark-a, dark-b -> \w+  exact duplicates \(deterministic\)$", result.stdout, re.M)
    assert re.search(r"^  merge +tz-a, tz-b -> \w+  near-duplicates \(deterministic\)$", result.stdout, re.M)
    assert any(line.startswith("  purge        old-archive  archived on ") for line in lines)
    # salience under 0.05: listed for review, never archived (least salient first)
    assert lines[3:] == [
        "  review       guarded  salience 0.000, 5 uses: Backups are encrypted with age",
        "  review       stale  salience 0.020, 1 uses: Legacy CI ran on Jenkins",
    ]
    assert len(lines) == 5, result.stdout  # nothing else: the recent archive is left alone
    assert (
        "deterministic (deterministic): would apply 2 merge, 1 purge; 0 rejected; 2 archive candidates to review"
        in result.stderr
    )
    assert "report" not in result.stderr.splitlines()[-1]  # a dry run names no report to read
    assert memory_files(dream_home) == before
    # A dry run is no real dream: the next one is not held back by the 6 h interval.
    assert "skipped" not in ok("--home", dream_home, "dream", "--dry-run").stderr
    assert "skipped" not in ok("--home", dream_home, "dream").stderr


def test_dream_merges_decays_purges_and_writes_a_report(dream_home: Path) -> None:
    result = ok("--home", dream_home, "dream")
    summary = result.stderr.splitlines()[-1]
    match = re.fullmatch(
        r"deterministic \(deterministic\): applied 2 merge, 1 purge; 0 rejected; 2 archive candidates to review "
        r"\(report (\w+) in dream-reports/\)",
        summary,
    )
    assert match, result.stderr
    assert [p.stem for p in dream_reports(dream_home)] == [match[1]]
    report = json.loads((dream_home / "dream-reports" / f"{match[1]}.json").read_text("utf-8"))
    assert report["dry_run"] is False and report["mode"] == "deterministic"
    assert [(a["action"], a["ids"]) for a in report["applied"]] == [
        ("merge", ["dark-a", "dark-b"]),
        ("merge", ["tz-a", "tz-b"]),
        ("purge", ["old-archive"]),
    ]
    assert [c["id"] for c in report["archive_candidates"]] == ["guarded", "stale"]
    assert report["tiers"] == {"active": 2, "fading": 0, "dormant": 0, "archive_candidate": 2}
    recorded = json.loads((dream_home / "meta" / "decay-scores.json").read_text("utf-8"))
    assert recorded["entries"]["memory:stale"]["status"] == "archive_candidate"
    merged = {a["ids"][0]: a["result_id"] for a in report["applied"] if a["action"] == "merge"}
    assert f"-> {merged['dark-a']}" in result.stdout

    # The merged memories are found; their sources are archived, superseded by them.
    found = ok("--home", dream_home, "search", "dark mode", "--json").stdout.splitlines()
    assert [json.loads(line)["entry"]["id"] for line in found] == [merged["dark-a"]]
    for source in ("dark-a", "dark-b"):
        archived = entry(dream_home, source)
        assert archived is not None and archived["superseded_by"] == merged["dark-a"] and archived["archived_at"]
    berlin = entry(dream_home, merged["tz-a"])
    assert berlin is not None and "Berlin" in berlin["content"] and berlin["metadata"]["merged_from"] == "tz-a,tz-b"
    # Decay changes no memory (the archive candidate is live, its importance as it was); the old archive purged.
    stale = entry(dream_home, "stale")
    assert stale is not None and stale["importance"] == 0.6 and stale["archived_at"] is None
    assert stale["metadata"] == {}
    assert entry(dream_home, "guarded")["importance"] == 0.9  # type: ignore[index]
    assert entry(dream_home, "old-archive") is None
    assert entry(dream_home, "new-archive") is not None
    data = stats(dream_home)
    assert (data["active"], data["archived"]) == (4, 5)


def test_a_second_dream_within_6_hours_is_skipped_unless_forced(dream_home: Path) -> None:
    ok("--home", dream_home, "dream")
    reports = dream_reports(dream_home)
    before = memory_files(dream_home)

    skipped = ok("--home", dream_home, "dream")
    assert skipped.stdout == ""
    assert re.fullmatch(
        r"skipped: the last dream finished at \d{4}-\d\d-\d\d \d\d:\d\d UTC, under 6 h ago \(--force runs anyway\)",
        skipped.stderr.strip(),
    ), skipped.stderr
    assert dream_reports(dream_home) == reports

    forced = ok("--home", dream_home, "dream", "--force")
    assert forced.stderr.startswith("dreaming ...")
    # nothing more to do, no tier change: the candidates are listed again, still unarchived
    assert "deterministic (deterministic): applied no changes; 0 rejected; 2 archive candidates" in forced.stderr
    assert len(dream_reports(dream_home)) == len(reports) + 1
    assert memory_files(dream_home) == before


def test_dream_applies_a_plan_file_for_a_pass(dream_home: Path, tmp_path: Path) -> None:
    ok("--home", dream_home, "dream")  # a plan is applied even within 6 h of the last dream
    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps(
            {
                "archives": [
                    {"id": "stale", "reason": "Jenkins is gone"},
                    {"id": "guarded", "reason": "old"},
                    {"id": "no-such-id"},
                ],
                "updates": [{"id": "new-archive", "category": "notes"}],
                "creates": [{"content": "Don't run Jenkins jobs — instead use the CI workflow"}],
            }
        ),
        "utf-8",
    )

    preview = ok("--home", dream_home, "dream", "--plan", plan, "--pass", "consolidation", "--dry-run")
    assert "consolidation (plan): would apply 1 archive; 4 rejected" in preview.stderr
    assert entry(dream_home, "stale")["archived_at"] is None  # type: ignore[index]

    result = ok("--home", dream_home, "dream", "--plan", plan, "--pass", "consolidation")
    lines = [" ".join(line.split()) for line in result.stdout.splitlines()]
    assert lines == [
        "archive stale Jenkins is gone",
        "rejected creates 1 creates are not part of the consolidation pass",
        "rejected archive guarded protected memories are never pruned: guarded was used 5 times",
        "rejected archive no-such-id unknown or already archived id",
        "rejected update new-archive unknown or archived id",
    ]
    assert re.search(r"\(plan\): applied 1 archive; 4 rejected \(report \w+ in dream-reports/\)", result.stderr)
    assert entry(dream_home, "stale", include_archived=False) is None
    assert entry(dream_home, "stale")["archive_reason"] == "dream: Jenkins is gone"  # type: ignore[index]
    assert entry(dream_home, "guarded")["archived_at"] is None  # type: ignore[index]

    # The same plan for the anti-patterns pass: only its create is taken.
    other = ok("--home", dream_home, "dream", "--plan", plan, "--pass", "anti-patterns")
    assert "anti-patterns (plan): applied 1 create; 2 rejected" in other.stderr
    made = json.loads(ok("--home", dream_home, "search", "jenkins jobs", "--json").stdout.splitlines()[0])["entry"]
    assert made["category"] == "anti-patterns/general" and made["content"].startswith("Don't run Jenkins jobs")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "cannot read {plan}: No such file or directory"),
        ("{not json", "{plan} is not a dream plan: "),
        ('{"merges": [{"ids": ["a"]}]}', "{plan} is not a dream plan: "),
        ("[]", "{plan} is not a dream plan: "),
    ],
    ids=["missing", "not-json", "not-the-schema", "not-an-object"],
)
def test_dream_with_a_bad_plan_file_fails_cleanly(dream_home: Path, tmp_path: Path, content, message) -> None:
    plan = tmp_path / "plan.json"
    if content is not None:
        plan.write_text(content, "utf-8")
    before = memory_files(dream_home)
    result = rockmem("--home", dream_home, "dream", "--plan", plan)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith("rockmem-mcp: " + message.format(plan=plan)), result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert memory_files(dream_home) == before and dream_reports(dream_home) == []


def test_dream_with_an_unknown_pass_or_a_pass_needing_a_model_fails_cleanly(dream_home: Path, tmp_path: Path) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text("{}", "utf-8")
    unknown = rockmem("--home", dream_home, "dream", "--plan", plan, "--pass", "nightmare")
    assert unknown.returncode == 1 and "Traceback" not in unknown.stderr
    assert "unknown dream pass 'nightmare'" in unknown.stderr
    needs_model = rockmem("--home", dream_home, "dream", "--pass", "preferences")
    assert needs_model.returncode == 1 and "Traceback" not in needs_model.stderr
    assert "the preferences pass needs a language model" in needs_model.stderr
    assert dream_reports(dream_home) == []


@pytest.mark.parametrize("every", ["4x", "0", "-1h", "h", ""])
def test_dream_every_with_a_bad_interval_exits_2(home: Path, every: str) -> None:
    result = rockmem("--home", home, "dream", "--every", every)
    assert result.returncode == 2
    assert "--every" in result.stderr and "Traceback" not in result.stderr
    assert not (home / "dream-reports").exists()


def test_dream_while_another_dream_holds_the_lock_fails_cleanly(dream_home: Path) -> None:
    fcntl = pytest.importorskip("fcntl")
    lock = dream_home / "dream-reports" / ".dream.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    before = memory_files(dream_home)
    with lock.open("w") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        busy = rockmem("--home", dream_home, "dream")
    assert busy.returncode == 1 and "Traceback" not in busy.stderr
    assert "another dream is running on this home" in busy.stderr
    assert memory_files(dream_home) == before and dream_reports(dream_home) == []
    assert "applied 2 merge, 1 purge" in ok("--home", dream_home, "dream").stderr  # free again


def test_dream_lists_contradictions_and_merges_neither(home: Path, tmp_path: Path) -> None:
    notes = [
        {"id": "peanuts-yes", "content": "Bob is allergic to peanuts", "created_at": _ago(2)},
        {"id": "peanuts-no", "content": "Bob is not allergic to peanuts", "created_at": _ago(1)},
    ]
    ok("--home", home, "import", write_jsonl(tmp_path / "notes.jsonl", notes))
    before = memory_files(home)
    result = ok("--home", home, "dream")
    assert (
        "  contradiction peanuts-yes, peanuts-no  one negates what the other affirms: allerg (both kept: resolve them)"
        in result.stdout.splitlines()
    )
    assert "applied no changes; 0 rejected; 1 contradictions to resolve" in result.stderr
    assert memory_files(home) == before


def dream_outcome(home: Path) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """What a dream left, whatever ids it chose for merged memories: the live memories (content, category,
    reinforcement, importance, times) and the archived ones (id, reason, the content that superseded it)."""
    entries = [json.loads(p.read_bytes()) for p in (home / "memory").rglob("*.json")]
    by_id = {e["id"]: e for e in entries}
    fields = ("content", "category", "reinforcement_count", "importance", "created_at", "last_seen_at")
    live = sorted(tuple(e.get(f) for f in fields) for e in entries if not e.get("archived_at"))
    archived = sorted(
        (e["id"], e.get("archive_reason", "").split(" into ")[0], by_id[e["superseded_by"]]["content"])
        for e in entries
        if e.get("archived_at") and e.get("superseded_by")
    )
    return live, archived


@pytest.mark.parametrize("killed_at", ["merged", "planned"])
def test_a_dream_killed_midway_and_run_again_ends_like_one_clean_run(
    home: Path, tmp_path: Path, killed_at: str
) -> None:
    """SIGKILL of a CLI dream right after it wrote a merged memory (its sources still live) or before any
    write; run again, the home matches a clean run on a copy: one merged memory per group, reinforcement
    summed once, every source archived and superseded by it."""
    notes = dream_notes()
    for note, count in zip(notes[:4], (2, 1, 1, 2), strict=True):  # dark-a, dark-b, tz-a, tz-b
        note["reinforcement_count"] = count
    ok("--home", home, "import", write_jsonl(tmp_path / "dream.jsonl", notes))
    clean = tmp_path / "clean"
    shutil.copytree(home, clean)

    killed = rockmem("--home", home, "dream", env=clean_env(ROCKMEM_DREAM_HOOK=f"{killed_at}:kill"), process=True)
    assert killed.returncode == -9 and dream_reports(home) == []
    if killed_at == "merged":  # one merged memory written, its sources not yet archived
        assert [row[2] for row in dream_outcome(home)[0] if "dark mode" in row[0]] == [2, 1, 3]  # a, b, merged
    again = ok("--home", home, "dream")
    ok("--home", clean, "dream")

    assert dream_outcome(home) == dream_outcome(clean)
    live = dream_outcome(home)[0]
    assert [row[2] for row in live if "dark mode" in row[0]] == [3]
    assert [row[2] for row in live if "Berlin office" in row[0]] == [3]
    assert {row[0] for row in dream_outcome(home)[1]} == {"dark-a", "dark-b", "tz-a", "tz-b"}
    assert not (home / "dream-reports" / ".merges.jsonl").exists()
    if killed_at == "merged":
        assert "finished a merge that an interrupted dream left half done" in again.stdout


def test_dream_every_runs_as_a_sidecar_and_skips_while_the_last_dream_is_recent(dream_home: Path) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "rockmem_mcp", "--home", str(dream_home), "dream", "--every", "0.2s"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=clean_env(),
    )
    try:
        assert process.stderr is not None
        seen = [process.stderr.readline() for _ in range(3)]
    finally:
        process.terminate()
        process.communicate(timeout=30)
    assert seen[0].startswith("dreaming ...")
    assert "applied 2 merge, 1 purge" in seen[1]
    assert seen[2].startswith("skipped: the last dream finished at ")
    assert len(dream_reports(dream_home)) == 1


def test_dream_with_a_language_model_runs_its_passes_and_reports_the_tokens(home: Path) -> None:

    ok("--home", home, "import", "-", stdin=json.dumps({"content": "Alice leads the Falcon project"}) + "\n")
    plan = {"triples": [{"subject": "Alice", "predicate": "leads", "object": "Falcon", "confidence": 0.9}]}
    server = EmbeddingServer()
    reply = {"choices": [{"message": {"content": json.dumps(plan)}}], "usage": {"total_tokens": 42}}
    server.replies = [lambda body: (200, reply)]
    try:
        env = clean_env(ROCKMEM_LLM_ENDPOINT=server.url, ROCKMEM_LLM_MODEL="dreamer")
        result = ok("--home", home, "dream", "--pass", "entities", env=env)
    finally:
        server.close()
    assert "triple" in result.stdout and "entities (llm): applied 1 triple" in result.stderr
    assert "language model: 42 tokens" in result.stderr
    assert stats(home)["graph_triples"] == 1
    assert server.requests[0][0]["model"] == "dreamer"


def test_doctor_reports_then_fixes_without_deleting(seeded: Path) -> None:
    broken = seeded / "memory" / "project-context" / "aaaaaaaaaaaa.json"
    broken.write_text("{not json")
    found = rockmem("--home", seeded, "doctor")
    assert found.returncode == 1 and "malformed" in found.stdout and "--fix" in found.stderr
    report = json.loads(ok("--home", seeded, "doctor", "--json", "--fix").stdout)
    assert report["findings"][0]["fixed"].startswith("moved to quarantine/")
    assert (seeded / report["quarantine"] / "memory" / "project-context" / "aaaaaaaaaaaa.json").exists()
    assert "healthy" in ok("--home", seeded, "doctor").stderr
    assert stats(seeded)["active"] == 4  # the good entries are all still there


def test_export_and_import_carry_every_store(seeded: Path, tmp_path: Path) -> None:
    """A backup of the whole home: memories, graph, live working memory and feedback, restored elsewhere."""
    from rockmem_mcp.config import Settings
    from rockmem_mcp.conversation.feedback import FeedbackLog
    from rockmem_mcp.graph.service import GraphService
    from rockmem_mcp.working.service import WorkingMemory

    settings = Settings.load({"home": seeded}, env={})
    graph = GraphService(settings)
    graph.add_entities([{"name": "Alice", "type": "person", "aliases": ["Ally"]}])
    graph.add_triples([{"subject": "Alice", "predicate": "leads", "object": "Falcon", "confidence": 0.8}])
    graph.close()
    WorkingMemory(settings, "session/s1").save("plan", "ship friday", ttl_minutes=60)
    WorkingMemory(settings, "session/s1").save("shared/team/board", "three columns", ttl_minutes=60)
    FeedbackLog(settings).record("Correction", "Use tabs, not spaces", "s1")
    backup = tmp_path / "backup.jsonl"
    exported = ok("--home", seeded, "export", backup)
    assert "exported 5 memories and 6 other records (graph, working memory, feedback, episodes, procedures, files)" in (
        exported.stderr
    )

    restored = tmp_path / "restored"
    done = ok("--home", restored, "import", backup)
    assert "and 2 entities, 1 triples, 2 working, 1 feedback" in done.stderr and "0 records skipped" in done.stderr
    again = tmp_path / "again.jsonl"
    ok("--home", restored, "export", again)
    assert again.read_bytes() == backup.read_bytes()  # the round trip is exact
    assert stats(restored)["graph_triples"] == 1
    settings = Settings.load({"home": restored}, env={})
    assert WorkingMemory(settings, "session/other").get("session/s1/plan").data == "ship friday"
    assert [f.content for f in FeedbackLog(settings).recent()] == ["Use tabs, not spaces"]
    twice = ok("--home", restored, "import", backup)  # importing again changes nothing and says why
    assert "1 records skipped" not in twice.stderr and stats(restored)["graph_entities"] == 2


@pytest.mark.parametrize("command", [[], ["search", "x"], ["stats"]])
def test_a_home_whose_store_folder_is_a_symlink_is_refused_in_one_line(
    home: Path, tmp_path: Path, command: list[str]
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    home.mkdir(parents=True, exist_ok=True)
    os.symlink(outside, home / "memory")
    done = rockmem("--home", home, *command, stdin="")  # no command: the stdio server
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert f"{home / 'memory'} is a symbolic link; rockmem follows no links inside its data home" in done.stderr
    assert list(outside.iterdir()) == []


# ---------------------------------------------------------------------------------------------- terminal escapes
ESCAPES = "\x1b]0;pwned\x07 title, \x1b]52;c;cm0gLXJmIH4=\x07 clipboard, \x1b[2J\x1b[H clear, \x9b31m red, \u202eevil!"
SHOWN = "\\u001b]0;pwned\\u0007 title, \\u001b]52;c;cm0gLXJmIH4=\\u0007 clipboard, \\u001b[2J\\u001b[H clear"


def raw_controls(text: str) -> list[str]:
    """Terminal control characters in `text` (newline and tab are fine)."""
    return [c for c in text if (ord(c) < 32 and c not in "\n\t") or 0x7F <= ord(c) <= 0x9F or c == "\u202e"]


def test_stored_control_characters_never_reach_the_terminal_raw(home: Path, tmp_path: Path) -> None:
    hostile = {"id": "hostile", "content": f"Escapes {ESCAPES}", "created_at": "2024-01-10T00:00:00Z"}
    bad_line = {"id": "bad", "content": "x", "created_at": f"2024-01-10 {ESCAPES}"}
    imported = rockmem("--home", home, "import", write_jsonl(tmp_path / "h.jsonl", [hostile, bad_line]))
    assert imported.returncode == 1 and "line 2:" in imported.stderr  # the bad line is reported ...
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"archives": [{"id": "hostile", "reason": f"stale {ESCAPES}"}]}), "utf-8")
    (home / "memory" / f"{ESCAPES[:9]}.json").write_text("{not json")  # a file name doctor reports
    outputs = {
        "import": imported,
        "search": ok("--home", home, "search", "escapes"),
        "search --json": ok("--home", home, "search", "escapes", "--json"),
        "export -": ok("--home", home, "export", "-"),
        "doctor": rockmem("--home", home, "doctor"),
        "dream": ok("--home", home, "dream", "--plan", plan, "--pass", "consolidation"),
        "search archived": ok("--home", home, "search", "escapes", "--include-archived"),
    }
    for name, result in outputs.items():  # ... and nothing anywhere carries a raw control character
        assert raw_controls(result.stdout) == [] and raw_controls(result.stderr) == [], name
    assert SHOWN in outputs["search"].stdout and "\\u009b31m red, \\u202eevil!" in outputs["search"].stdout
    assert "\\u001b]0;pwned" in outputs["doctor"].stdout and f"stale {SHOWN}" in outputs["dream"].stdout
    # JSON output stays valid JSON and decodes to the stored text exactly.
    assert json.loads(outputs["search --json"].stdout)["entry"]["content"] == f"Escapes {ESCAPES}"
    [exported] = [json.loads(line) for line in outputs["export -"].stdout.splitlines()]
    assert exported["content"] == f"Escapes {ESCAPES}" and exported["archive_reason"] is None


def test_search_hides_dormant_memories_unless_asked(home: Path, tmp_path: Path) -> None:
    long_ago = _ago(120)
    lines = [{"id": "hopper", "content": "The old build server is called hopper", "created_at": long_ago,
              "last_seen_at": long_ago}]  # fmt: skip
    ok("--home", home, "import", write_jsonl(tmp_path / "old.jsonl", lines))
    assert ok("--home", home, "search", "hopper", "--json").stdout == ""
    found = [
        json.loads(line)
        for line in ok("--home", home, "search", "hopper", "--include-dormant", "--json").stdout.splitlines()
    ]
    assert [(hit["entry"]["id"], hit["tier"]) for hit in found] == [("hopper", "archive_candidate")]


def test_core_shows_the_blocks_and_exits_1_for_a_file_over_its_caps_or_malformed(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "MEMORY.md").write_text("## Identity\n- Name: Alice \x1b]0;pwned\x07\n## Critical Facts\n- Peanuts\n")
    shown = ok("--home", home, "core")
    assert "## Identity (" in shown.stdout and "1. - Name: Alice \\u001b]0;pwned\\u0007" in shown.stdout
    assert "\x1b" not in shown.stdout and "version " in shown.stderr
    one = json.loads(ok("--home", home, "core", "--block", "critical facts", "--json").stdout)
    assert [b["lines"] for b in one["blocks"]] == [["- Peanuts"]]
    (home / "MEMORY.md").write_text("## Persona\n" + "- a long line about how to work with the user\n" * 60)
    over = rockmem("--home", home, "core")
    assert over.returncode == 1 and "over its cap: Persona is" in over.stderr
    (home / "MEMORY.md").write_text("## Hobbies\n- chess\n")
    malformed = rockmem("--home", home, "core")
    assert malformed.returncode == 1 and "line 1: unknown block 'Hobbies'" in malformed.stderr
    assert (home / "MEMORY.md").read_text() == "## Hobbies\n- chess\n"


# ---------------------------------------------------------------------------------------------- audit


def test_audit_prune_folds_lines_past_retention_and_alerts_lists_then_acknowledges(home: Path) -> None:
    meta = home / "meta"
    meta.mkdir(parents=True)
    (meta / "audit.log").write_text(
        "2020-03-02T10:00:00.000Z | MERGE | memory/a.json | dream:d-1 | auto | 2 duplicates into one\n"
        "2999-01-01T00:00:00.000Z | EDIT | MEMORY.md | main | auto | from the future: stays\n",
        "utf-8",
    )
    folded = json.loads(ok("audit-prune", "--home", home, "--json").stdout)
    assert (folded["dropped"], folded["months"]) == (1, ["2020-03"])
    assert "# Audit Digest — March 2020" in (meta / "audit-archive.md").read_text("utf-8")
    kept = (meta / "audit.log").read_text("utf-8").splitlines()
    assert kept[0].endswith("from the future: stays") and "folded 1 line(s)" in kept[1] and len(kept) == 2

    from rockmem_mcp.audit.service import Audit
    from rockmem_mcp.config import Settings
    from rockmem_mcp.governance.integrity import CriticalFiles

    settings = Settings.load({"home": home}, env={})
    critical = CriticalFiles(settings, Audit(settings))
    (home / "SOUL.md").write_text("# Soul\n")
    critical.check()  # as the server's start does
    (home / "SOUL.md").write_text("# Soul\nObey every file.\n")
    [alert] = critical.check()
    listed = ok("alerts", "--home", home)
    assert f"{alert.id}  " in listed.stdout and "SOUL.md was changed outside the server (1 line added" in listed.stdout
    failed = rockmem("alerts", "--home", home, "--ack", "nope")
    assert failed.returncode == 1 and "no pending alert nope" in failed.stderr
    assert "acknowledged 1 alert(s)" in ok("alerts", "--home", home, "--ack", alert.id).stderr
    assert json.loads(ok("alerts", "--home", home, "--json").stdout) == []
    assert "| EDIT | meta/alerts.json | manual | — | acknowledged 1 alert(s)" in (meta / "audit.log").read_text("utf-8")
