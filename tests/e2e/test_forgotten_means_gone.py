"""Issue 45, forgotten means gone: after each kind of permanent removal (delete_memory permanent; forget permanent of a
memory, an episode, an entity, a procedure, a core line) no file under the home holds the item's text (git objects
inflated, packed or loose, reachable or not; index snapshots; vectors; logs), and for a database store no row of
any table does. A text that stays (the control) is found in each of those places, so the search is known to look."""

from __future__ import annotations

import json
import secrets
import subprocess
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from rockmem_mcp.search.tokenizer import tokenize
from tests.pg_server import database  # noqa: F401  (the fixture)

pytestmark = pytest.mark.anyio

KINDS = ("delete_memory", "forget_memory", "episode", "entity", "procedure", "core")
KIND_MEMORIES = ("delete_memory", "forget_memory", "control")
# Every tool (episodes, procedures); commits soon after a change; the memory index snapshot rewritten after each
# change (not only as the server closes); vectors from the quick bundled model.
SERVER_ENV = {
    "ROCKMEM_TOOLSETS": "all",
    "ROCKMEM_AUDIT_COMMIT_SECONDS": "0.2",
    "ROCKMEM_SNAPSHOT_EVERY_CHANGES": "1",
    "ROCKMEM_EMBEDDING_MODEL": "static",
}


def markers() -> dict[str, str]:
    """A word per kind nothing else holds: lowercase letters and digits ending in a digit, so the tokenizer keeps it
    whole (the stemmer cuts a final "e", which 1 in 16 random hex tokens ends with, and the index snapshot would
    never hold the whole word); one with letters outside ASCII, so copies JSON escapes (`\u00e9`) are looked for
    too."""
    token = secrets.token_hex(4) + "0"
    words = {kind: f"zq{kind.replace('_', '')}{token}" for kind in (*KINDS, "control")}
    words["forget_memory"] = f"zqéforgetmémoire{token}"
    assert all(tokenize(word) == [word] for word in words.values()), words
    return words


def git_objects(home: Path) -> list[tuple[str, bytes]]:
    """Every object of the home's repository, inflated: reachable or not, packed or loose."""
    git = home / ".git"
    if not git.is_dir():
        return []
    out = subprocess.run(
        ["git", "--git-dir", str(git), "cat-file", "--batch-all-objects", "--batch", "--unordered"],
        capture_output=True,
        check=True,
    ).stdout
    objects, pos = [], 0
    while pos < len(out):
        end = out.index(b"\n", pos)
        sha, _kind, size = out[pos:end].split()
        objects.append((sha.decode(), out[end + 1 : end + 1 + int(size)]))
        pos = end + 2 + int(size)
    return objects


def home_holders(home: Path, text: str) -> list[str]:
    """Where under `home` `text` is: each file's bytes (a loose git object's inflated too), and each git object."""
    needles = forms(text)
    found = []
    for path in sorted(home.rglob("*")):
        if not path.is_file() or path.is_symlink():
            continue
        data = path.read_bytes()
        if ".git/objects/" in path.as_posix() and len(path.parent.name) == 2:
            data = zlib.decompress(data)
        if any(needle in data for needle in needles):
            found.append(path.relative_to(home).as_posix())
    found += [f"git object {sha}" for sha, data in git_objects(home) if any(needle in data for needle in needles)]
    return found


def forms(text: str) -> set[bytes]:
    """`text` as files hold it: UTF-8, and JSON's ASCII escapes of it."""
    return {text.encode(), json.dumps(text)[1:-1].encode()}


def table_holders(url: str, text: str) -> list[str]:
    """Where in the database `text` is: each column of each row of each table (bytea as its bytes)."""
    import psycopg

    needles = forms(text)
    found = []
    with psycopg.connect(url) as db:
        tables = db.execute(
            "SELECT table_schema, table_name FROM information_schema.tables WHERE table_type = 'BASE TABLE' "
            "AND table_schema NOT IN ('pg_catalog', 'information_schema')"
        ).fetchall()
        for schema, table in tables:
            cursor = db.execute(f'SELECT * FROM "{schema}"."{table}"')
            columns = [column.name for column in cursor.description or []]
            for row in cursor.fetchall():
                for column, value in zip(columns, row, strict=True):
                    data = bytes(value) if isinstance(value, bytes | memoryview) else str(value).encode()
                    if any(needle in data for needle in needles):
                        found.append(f"{schema}.{table}.{column}")
    return found


async def make_items(client: Client, call: Any, marker: dict[str, str]) -> dict[str, str]:
    """One item per kind holding its marker (and an earlier version holding it too), and the control memory; returns
    the id each removal is given."""
    ids = {}
    m = marker
    for kind in ("delete_memory", "forget_memory"):
        saved = await call(client, "save_memory", content=f"The locker code {m[kind]} opens box 1", category="private")
        await call(client, "update_memory", id=saved["id"], content=f"The locker code {m[kind]} opens box 2")
        ids[kind] = saved["id"] if kind == "delete_memory" else f"memory:{saved['id']}"
    control = await call(client, "save_memory", content=f"The gym code {m['control']} stays", category="private")
    ids["control"] = control["id"]
    episode = await call(client, "record_episode", content=f"Met the lawyer about {m['episode']} today")
    ids["episode"] = f"episode:{episode['id']}"
    fact = {"subject": f"Person {m['entity']}", "predicate": "knows", "object": "Bob"}
    await call(client, "add_triples", triples=[fact])
    for steps in ([f"lock the {m['procedure']} drawer"], [f"lock the {m['procedure']} drawer twice", "sleep"]):
        saved = await call(
            client, "save_procedure", name="Evening routine", trigger=["evening routine"], steps=steps,
            notes=[f"the {m['procedure']} key is blue"],
        )  # fmt: skip
    ids["procedure"] = f"procedure:{saved['uri'].rsplit('/', 1)[-1]}"
    version = (await call(client, "core_memory", action="read"))["version"]
    line = f"- Nickname {m['core']}"
    await call(client, "core_memory", action="append", block="Identity", text=line, version=version)
    for kind in ("entity", "core"):
        found = (await call(client, "forget", query=m[kind]))["candidates"]
        ids[kind] = next(c["id"] for c in found if c["store"] == kind)
    for text in marker.values():  # in the indexes, and a use counted
        await call(client, "search_memory", query=text)
    return ids


async def remove(client: Client, call: Any, kind: str, item: str) -> None:
    if kind == "delete_memory":
        await call(client, "delete_memory", id=item, permanent=True)
        return
    if kind in ("episode", "entity"):  # forgotten softly first: what forgotten/ kept goes too
        await call(client, "forget", ids=[item])
        await client.call_tool("audit", {"item": "MEMORY.md", "history": True})  # a home's history: committed now
    erased = await call(client, "forget", ids=[item], permanent=True)
    assert [outcome["ok"] for outcome in erased["items"]] == [True], erased
    assert "but" not in erased["items"][0]["done"], erased  # nothing left over that it knows of


async def wait_for(check: Callable[[], bool], what: str, seconds: float = 90.0) -> None:
    with anyio.fail_after(seconds):
        while not check():
            await anyio.sleep(0.1)


async def snapshot_holding(client: Client, call: Any, home: Path, control: str, texts: list[str]) -> None:
    """Until the memory index snapshot holds `texts`: a change to the control memory asks for one (one is written in
    the background after each change, unless one is being written then)."""
    snapshot = home / "index" / "memory-index.npz"
    with anyio.fail_after(30):
        for step in range(1000):
            if snapshot.exists() and all(text.encode() in snapshot.read_bytes() for text in texts):
                return
            await call(client, "update_memory", id=control, importance=0.5 + (step % 2) / 10)
            await anyio.sleep(0.2)


async def test_no_file_under_the_home_holds_a_text_deleted_for_good(stdio_server, home: Path, call: Any) -> None:
    marker = markers()
    async with stdio_server(home, **SERVER_ENV) as client:
        ids = await make_items(client, call, marker)
        for kind in ("delete_memory", "forget_memory"):
            item = ids[kind].removeprefix("memory:")
            await wait_for(lambda i=item: (home / ".embeddings" / f"{i}.bin").exists(), f"{kind}'s vector")
        await snapshot_holding(client, call, home, ids["control"], [marker[k] for k in KIND_MEMORIES])
        await call(client, "audit", item="MEMORY.md", history=True)  # everything so far committed
    # Each text reached the audit log (the procedure's steps only its file), the history and the index snapshots.
    before = {kind: home_holders(home, text) for kind, text in marker.items()}
    for kind, places in before.items():
        assert any(place.startswith("git object") for place in places), (kind, places)
        if kind != "procedure":
            assert "meta/audit.log" in places, (kind, places)
    for kind in KIND_MEMORIES:
        assert "index/memory-index.npz" in before[kind], (kind, before[kind])

    async with stdio_server(home, **SERVER_ENV) as client:
        for kind in KINDS:
            await remove(client, call, kind, ids[kind])
            assert home_holders(home, marker[kind]) == [], kind
            control = home_holders(home, marker["control"])
            assert "meta/audit.log" in control and "index/memory-index.npz" in control, control
            assert any(place.startswith("git object") for place in control), control
            if kind == "episode":  # the episode index snapshot, written again by the removal, holds the rest
                assert "index/episode-index.npz" in control, control
        for kind in ("delete_memory", "forget_memory"):
            assert not (home / ".embeddings" / f"{ids[kind].removeprefix('memory:')}.bin").exists()
        # What the record still says: that something was there, when and by whom; a revert is refused, saying why.
        lines = (await call(client, "audit", item=ids["delete_memory"]))["entries"]
        assert [line["action"] for line in lines][:1] == ["DELETE"] and "[forgotten sha256:" in lines[0]["summary"]
        refused = await client.call_tool("revert", {"item": ids["delete_memory"]})
        assert refused.is_error and "deleted for good" in refused.content[0].text
    for kind in KINDS:  # nor do the snapshots and commits the server wrote as it closed
        assert home_holders(home, marker[kind]) == [], kind


@pytest.mark.slow
async def test_no_row_of_a_database_store_holds_a_text_deleted_for_good(
    database: str,  # noqa: F811
    stdio_server,
    home: Path,
    call: Any,
) -> None:
    marker = markers()
    env = {**SERVER_ENV, "ROCKMEM_STORE": database}
    async with stdio_server(home, **env) as client:
        ids = await make_items(client, call, marker)
    for kind, text in marker.items():
        places = table_holders(database, text)
        assert places, kind
        if kind != "procedure":
            assert any(place.endswith("audit_lines.line") for place in places), (kind, places)

    async with stdio_server(home, **env) as client:
        for kind in KINDS:
            await remove(client, call, kind, ids[kind])
            assert table_holders(database, marker[kind]) == [], kind
            assert home_holders(home, marker[kind]) == [], kind
        assert any(place.endswith("audit_lines.line") for place in table_holders(database, marker["control"]))
    for kind in KINDS:
        assert table_holders(database, marker[kind]) == [] and home_holders(home, marker[kind]) == [], kind
