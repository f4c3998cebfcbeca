"""Vectors made where memories are written (issue 44, part 3): `add`, `import` and `migrate-store` embed what they
wrote, the way a server's backfill does, so no server has to catch up; a provider that is down defers the vectors
and never the write; `reindex` says what it does from its first moment. Through test_cli's `rockmem`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.embedding_server import EmbeddingServer, hashed_vectors, model_reply
from tests.test_cli import clean_env, ok, on_a_terminal, rockmem

DOWN = clean_env(ROCKMEM_EMBEDDING_ENDPOINT="http://127.0.0.1:9/v1", ROCKMEM_EMBEDDING_MODEL="hashed")


@pytest.fixture
def endpoint() -> Iterator[EmbeddingServer]:
    server = EmbeddingServer()
    server.replies = [model_reply(hashed_vectors)]
    yield server
    server.close()


def counts(home: Path, env: dict[str, str] | None = None) -> dict[str, object]:
    return json.loads(ok("--home", home, "stats", "--json", env=env or clean_env()).stdout)


def test_add_embeds_what_it_saved_with_the_bundled_model(tmp_path: Path) -> None:
    home = tmp_path / "home"
    bundled = clean_env(ROCKMEM_EMBEDDING_MODEL=None)  # the product's default: no setting
    added = ok("--home", home, "add", "Ada takes her tea with lemon", "--json", env=bundled)
    saved = json.loads(added.stdout)  # stdout is the saved entry alone
    assert "vectors for 1 memory (1 embedded with onnx:minilm-l3-int8" in added.stderr
    assert [p.stem for p in (home / ".embeddings").glob("*.bin")] == [saved["id"]]
    data = counts(home, bundled)
    assert (data["embedded"], data["embedding_model"]) == (1, "onnx:minilm-l3-int8@1+whole-known")
    search = ok("--home", home, "search", "lemon tea", "--mode", "vector", env=bundled)
    assert saved["id"] in search.stdout and "not embedded yet" not in search.stderr

    later = ok("--home", home, "add", "Bob drinks coffee", "--no-embeddings", env=bundled)
    assert "vectors for" not in later.stderr and counts(home, bundled)["embedded"] == 1


def test_add_with_the_provider_down_keeps_the_memory_and_says_who_catches_up(tmp_path: Path) -> None:
    home = tmp_path / "home"
    added = ok("--home", home, "add", "Ada takes her tea with lemon", env=DOWN)
    assert added.stdout.startswith("saved [")
    assert "vectors later:" in added.stderr and "`rockmem-mcp reindex --embeddings`" in added.stderr
    data = counts(home, DOWN)
    assert (data["active"], data["embedded"]) == (1, 0)


def test_add_with_embeddings_off_makes_no_vectors_and_says_nothing_of_them(tmp_path: Path) -> None:
    home = tmp_path / "home"
    added = ok("--home", home, "add", "Ada takes her tea", env=clean_env(ROCKMEM_EMBEDDING_MODEL="off"))
    assert added.stderr == "" and not (home / ".embeddings").exists()


def test_migrate_store_embeds_the_target_so_its_server_need_not(tmp_path: Path, endpoint: EmbeddingServer) -> None:
    source, target = tmp_path / "source", tmp_path / "target"
    lines = "".join(json.dumps({"content": f"fact {i} about lighthouses"}) + "\n" for i in range(12))
    ok("--home", source, "import", "-", "--no-embeddings", stdin=lines, env=clean_env(ROCKMEM_EMBEDDING_MODEL="off"))
    env = clean_env(ROCKMEM_EMBEDDING_ENDPOINT=endpoint.url, ROCKMEM_EMBEDDING_MODEL="hashed")
    moved = ok("--home", tmp_path / "cli", "migrate-store", "--from", source, "--to", target, "--json", env=env)
    report = json.loads(moved.stdout)
    assert (report["moved"], report["vectors"], report["embedded"]) == (12, 12, 12)
    assert "vectors for 12 memories (12 embedded with openai-compatible:" in moved.stderr
    assert counts(target, env)["embedded"] == 12 and len(list((target / ".embeddings").glob("*.bin"))) == 12
    assert not (source / ".embeddings").exists()  # the source is left as it was

    again = tmp_path / "again"
    skipped = ok("--home", tmp_path / "cli", "migrate-store", "--from", source, "--to", again, "--no-embeddings",
                 env=env)  # fmt: skip
    assert "vectors for" not in skipped.stderr and counts(again, env)["embedded"] == 0


def test_reindex_says_what_it_does_before_it_reads_the_files(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = clean_env(ROCKMEM_EMBEDDING_MODEL="off")
    lines = "".join(json.dumps({"content": f"note {i} about ferns"}) + "\n" for i in range(30))
    ok("--home", home, "import", "-", stdin=lines, env=env)
    said = ok("--home", home, "reindex", env=env).stderr.splitlines()
    assert said[0] == "reindexing: reading every memory file ..."  # written before the store is opened
    assert said[1].startswith("indexed 30 memories in ") and said[1].endswith("s")


def test_reindex_on_a_terminal_shows_a_moving_bar_from_the_start(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = clean_env(ROCKMEM_EMBEDDING_MODEL="off", COLUMNS="120")
    ok("--home", home, "add", "Ada likes tea", env=env)
    returncode, text = on_a_terminal(["--home", str(home), "reindex"], env)
    assert returncode == 0, text
    assert "reindexing: reading every memory file" in text and "0:00:0" in text  # the bar, with the time so far
    assert text.index("reindexing:") < text.index("indexed 1 memory in ")


def test_a_failed_reindex_embedding_still_fails_clearly(tmp_path: Path) -> None:
    """`reindex --embeddings` asked for vectors: there a provider that is down is the command's failure."""
    home = tmp_path / "home"
    ok("--home", home, "add", "Ada likes tea", "--no-embeddings", env=DOWN)
    result = rockmem("--home", home, "reindex", "--embeddings", env=DOWN)
    assert result.returncode == 1 and "Traceback" not in result.stderr
