"""The memory tools through a real MCP client, with the server running in memory."""

from __future__ import annotations

import errno
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from rockmem_mcp.server.app import build_server

pytestmark = pytest.mark.anyio


def ids(found: dict[str, Any]) -> list[str]:
    return [hit["entry"]["id"] for hit in found["results"]]


def at(day: str) -> datetime:
    return datetime.fromisoformat(f"{day}T00:00:00+00:00")


# Four entries that all contain "deploy", with known creation times, categories and tags.
DEPLOY_NOTES = [
    {
        "content": "Deploy staging with the blue green switch",
        "category": "project-context/rockmem",
        "tags": ["deploy", "ops"],
        "created_at": at("2024-01-10"),
    },
    {
        "content": "Deploy production only on Tuesdays",
        "category": "project-context/rockmem/release",
        "tags": ["deploy"],
        "created_at": at("2024-02-10"),
    },
    {
        "content": "Deploy notes from the old wiki",
        "category": "project-context-old",
        "tags": ["ops"],
        "created_at": at("2024-03-10"),
    },
    {
        "content": "User wants a deploy summary by mail",
        "category": "user-preferences",
        "tags": ["Email"],
        "created_at": at("2024-04-10"),
    },
]


@pytest.fixture
def notes(seed) -> dict[str, str]:
    """Seed DEPLOY_NOTES; returns {'jan': id, 'feb': id, 'mar': id, 'apr': id}."""
    return dict(zip(["jan", "feb", "mar", "apr"], seed(DEPLOY_NOTES), strict=True))


# ---------------------------------------------------------------------------------------------- save / search


async def test_save_then_search_finds_it_with_a_score(client, call) -> None:
    saved = await call(
        client,
        "save_memory",
        content="The user's timezone is Europe/Berlin",
        category="user-preferences/timezone",
        tags=["profile"],
        metadata={"source": "user"},
        importance=0.9,
    )
    await call(client, "save_memory", content="Lunch is usually at noon")

    assert len(saved["id"]) == 12
    assert saved["category"] == "user-preferences/timezone"
    assert saved["tags"] == ["profile"]
    assert saved["metadata"] == {"source": "user"}
    assert saved["importance"] == 0.9
    assert saved["archived_at"] is None

    found = await call(client, "search_memory", query="which timezone is the user in")
    assert ids(found) == [saved["id"]]
    assert found["total_matches"] == 1
    hit = found["results"][0]
    assert hit["score"] > 0
    assert hit["entry"] == saved


async def test_search_ranks_the_best_match_first(client, call) -> None:
    weak = await call(client, "save_memory", content="The cat sleeps on the sofa all afternoon")
    strong = await call(client, "save_memory", content="The cat food brand for the cat is Felix")

    found = await call(client, "search_memory", query="cat food")
    assert ids(found) == [strong["id"], weak["id"]]
    scores = [hit["score"] for hit in found["results"]]
    assert scores[0] > scores[1] > 0


async def test_search_without_query_lists_newest_first(client, call) -> None:
    saved = [(await call(client, "save_memory", content=f"Fact number {n}"))["id"] for n in range(4)]

    listed = await call(client, "search_memory")
    assert ids(listed) == saved[::-1]
    assert all(hit["score"] is None for hit in listed["results"])
    assert listed["total_matches"] == 4


async def test_listing_uses_creation_time_not_save_order(seed, client, call) -> None:
    shuffled = [DEPLOY_NOTES[n] for n in (2, 0, 3, 1)]  # mar, jan, apr, feb
    mar, jan, apr, feb = seed(shuffled)
    listed = await call(client, "search_memory")
    assert ids(listed) == [apr, mar, feb, jan]


async def test_query_of_only_stopwords_matches_nothing(client, call) -> None:
    await call(client, "save_memory", content="an ox is on it")
    found = await call(client, "search_memory", query="is it on")
    assert found == {
        **{"results": [], "total_matches": 0, "mode": "bm25", "unembedded": 0, "workspace": []},
        **{"episodes": [], "procedures": [], "route": None},
    }


# ---------------------------------------------------------------------------------------------- filters


@pytest.mark.parametrize(
    ("category", "expected"),
    [
        ("project-context", ["jan", "feb"]),  # whole-segment prefix: not 'project-context-old'
        ("project-context/rockmem/release", ["feb"]),
        ("project-context-old", ["mar"]),
        ("project-context/", ["jan", "feb"]),  # a trailing slash is tolerated
        ("nothing-here", []),
    ],
)
async def test_search_filters_by_category_prefix(notes, client, call, category, expected) -> None:
    found = await call(client, "search_memory", query="deploy", category=category)
    assert sorted(ids(found)) == sorted(notes[n] for n in expected)
    assert found["total_matches"] == len(expected)


@pytest.mark.parametrize(
    ("tags", "expected"),
    [
        (["deploy"], ["jan", "feb"]),
        (["deploy", "ops"], ["jan"]),  # all tags must match
        (["email"], ["apr"]),  # case-insensitive
        (["missing"], []),
    ],
)
async def test_search_filters_by_tags(notes, client, call, tags, expected) -> None:
    found = await call(client, "search_memory", query="deploy", tags=tags)
    assert sorted(ids(found)) == sorted(notes[n] for n in expected)


@pytest.mark.parametrize(
    ("window", "expected"),
    [
        ({"created_after": "2024-02-10T00:00:00Z"}, ["feb", "mar", "apr"]),  # at or after
        ({"created_before": "2024-03-10T00:00:00Z"}, ["jan", "feb"]),  # strictly before
        ({"created_after": "2024-02-01T00:00:00Z", "created_before": "2024-03-01T00:00:00Z"}, ["feb"]),
        ({"created_after": "2024-02-10T01:00:00+02:00"}, ["feb", "mar", "apr"]),  # offsets converted to UTC
        ({"created_before": "2024-03-10T00:00:00"}, ["jan", "feb"]),  # naive means UTC
        ({"created_after": "2025-01-01T00:00:00Z"}, []),
    ],
)
async def test_search_filters_by_creation_time(notes, client, call, window, expected) -> None:
    with_query = await call(client, "search_memory", query="deploy", **window)
    assert sorted(ids(with_query)) == sorted(notes[n] for n in expected)
    listed = await call(client, "search_memory", **window)
    assert ids(listed) == [notes[n] for n in reversed(expected)]  # newest first


async def test_filters_combine(notes, client, call) -> None:
    found = await call(
        client,
        "search_memory",
        query="deploy",
        category="project-context",
        tags=["ops"],
        created_before="2024-02-01T00:00:00Z",
    )
    assert ids(found) == [notes["jan"]]


async def test_limit_caps_results_and_total_counts_all_matches(notes, client, call) -> None:
    found = await call(client, "search_memory", query="deploy", limit=2)
    assert len(found["results"]) == 2
    assert found["total_matches"] == 4
    scores = [hit["score"] for hit in found["results"]]
    assert scores == sorted(scores, reverse=True)

    listed = await call(client, "search_memory", limit=3)
    assert ids(listed) == [notes["apr"], notes["mar"], notes["feb"]]
    assert listed["total_matches"] == 4


# ---------------------------------------------------------------------------------------------- get / update


async def test_get_returns_the_full_entry(client, call) -> None:
    saved = await call(client, "save_memory", content="Prefers tabs over spaces", tags=["style"])
    assert await call(client, "get_memory", id=saved["id"]) == saved


async def test_update_content_is_reindexed(client, call, disk) -> None:
    saved = await call(client, "save_memory", content="The office wifi password is swordfish", category="office")

    updated = await call(client, "update_memory", id=saved["id"], content="The office wifi password is hunter2")
    assert updated["content"] == "The office wifi password is hunter2"
    assert updated["updated_at"] is not None
    assert updated["created_at"] == saved["created_at"]
    assert updated["category"] == "office"

    assert (await call(client, "search_memory", query="swordfish"))["total_matches"] == 0
    assert ids(await call(client, "search_memory", query="hunter2")) == [saved["id"]]
    assert await call(client, "get_memory", id=saved["id"]) == updated
    assert b"hunter2" in disk.entry_path(saved["id"], "office").read_bytes()


async def test_update_changes_only_the_fields_passed(client, call) -> None:
    saved = await call(
        client, "save_memory", content="Standup is at 9:30", category="team", tags=["meetings"], importance=0.7
    )
    updated = await call(client, "update_memory", id=saved["id"], tags=["schedule"])
    assert updated["tags"] == ["schedule"]
    assert {k: updated[k] for k in ("content", "category", "importance")} == {
        "content": "Standup is at 9:30",
        "category": "team",
        "importance": 0.7,
    }
    assert ids(await call(client, "search_memory", tags=["schedule"])) == [saved["id"]]
    assert (await call(client, "search_memory", tags=["meetings"]))["total_matches"] == 0


async def test_update_moves_an_entry_to_another_category(client, call, disk) -> None:
    saved = await call(client, "save_memory", content="Use poetry for packaging", category="old-place/tools")

    moved = await call(client, "update_memory", id=saved["id"], category="decisions/tooling")
    assert moved["category"] == "decisions/tooling"
    assert not disk.entry_path(saved["id"], "old-place/tools").exists()
    assert disk.entry_path(saved["id"], "decisions/tooling").exists()

    assert ids(await call(client, "search_memory", query="poetry", category="decisions")) == [saved["id"]]
    assert (await call(client, "search_memory", query="poetry", category="old-place"))["total_matches"] == 0
    tree = await call(client, "list_memory_categories")
    assert [c["category"] for c in tree["categories"]] == ["decisions", "decisions/tooling"]
    assert (await call(client, "get_memory", id=saved["id"]))["category"] == "decisions/tooling"

    uncategorized = await call(client, "update_memory", id=saved["id"], category="")
    assert uncategorized["category"] is None
    assert disk.entry_path(saved["id"], None).exists()
    assert not disk.entry_path(saved["id"], "decisions/tooling").exists()
    tree = await call(client, "list_memory_categories")
    assert tree == {"categories": [], "uncategorized": 1, "total": 1}


# ---------------------------------------------------------------------------------------------- delete


async def test_delete_archives_and_include_archived_shows_it(client, call, disk) -> None:
    saved = await call(client, "save_memory", content="The user lives in Lisbon", category="user-facts")

    deleted = await call(client, "delete_memory", id=saved["id"], reason="moved to Porto")
    assert deleted["id"] == saved["id"]
    assert deleted["permanent"] is False
    assert deleted["entry"]["archived_at"] is not None
    assert deleted["entry"]["archive_reason"] == "moved to Porto"

    assert (await call(client, "search_memory", query="Lisbon"))["total_matches"] == 0
    assert (await call(client, "search_memory"))["total_matches"] == 0
    archived = await call(client, "search_memory", query="Lisbon", include_archived=True)
    assert ids(archived) == [saved["id"]]
    assert archived["results"][0]["entry"]["archived_at"] is not None
    assert ids(await call(client, "search_memory", include_archived=True)) == [saved["id"]]

    assert (await call(client, "get_memory", id=saved["id"]))["archive_reason"] == "moved to Porto"
    assert disk.entry_path(saved["id"], "user-facts").exists()  # nothing silently lost
    assert await call(client, "list_memory_categories") == {"categories": [], "uncategorized": 0, "total": 0}


async def test_a_deleted_memory_is_recoverable_with_update_memory_restore(client, call, call_error, disk) -> None:
    saved = await call(client, "save_memory", content="The user lives in Lisbon", category="user-facts")
    await call(client, "delete_memory", id=saved["id"], reason="moved to Porto")
    error = await call_error(client, "update_memory", id=saved["id"], importance=0.9)
    assert f"memory {saved['id']} is archived" in error and "restore=true" in error
    restored = await call(client, "update_memory", id=saved["id"], restore=True)
    assert restored["archived_at"] is None and restored["archive_reason"] is None
    assert ids(await call(client, "search_memory", query="Lisbon")) == [saved["id"]]
    assert (await call(client, "list_memory_categories"))["total"] == 1


async def test_permanent_delete_erases_the_entry(client, call, call_error, disk) -> None:
    saved = await call(client, "save_memory", content="Temporary note about parking", category="scratch")

    deleted = await call(client, "delete_memory", id=saved["id"], permanent=True)
    assert deleted == {"id": saved["id"], "permanent": True, "entry": None}

    assert not disk.entry_path(saved["id"], "scratch").exists()
    assert (await call(client, "search_memory", query="parking", include_archived=True))["total_matches"] == 0
    assert "no memory with id" in await call_error(client, "get_memory", id=saved["id"])


async def test_archived_entry_can_still_be_erased(client, call, disk) -> None:
    saved = await call(client, "save_memory", content="Old phone number 555-0100")
    await call(client, "delete_memory", id=saved["id"])
    await call(client, "delete_memory", id=saved["id"], permanent=True)
    assert disk.entries() == {}


# ---------------------------------------------------------------------------------------------- categories


async def test_list_memory_categories_counts(client, call) -> None:
    for content, category in [
        ("one", "alpha/beta"),
        ("two", "alpha/beta"),
        ("three", "alpha"),
        ("four", "gamma"),
        ("five", None),
        ("six", "gamma"),
    ]:
        await call(client, "save_memory", content=f"Entry {content}", category=category)
    archived = await call(client, "save_memory", content="Entry seven", category="gamma")
    await call(client, "delete_memory", id=archived["id"])

    tree = await call(client, "list_memory_categories")
    assert tree == {
        "categories": [
            {"category": "alpha", "entries": 1, "total": 3},
            {"category": "alpha/beta", "entries": 2, "total": 2},
            {"category": "gamma", "entries": 2, "total": 2},
        ],
        "uncategorized": 1,
        "total": 6,
    }


# ---------------------------------------------------------------------------------------------- errors

EXISTING = "existing"  # replaced by the id of an entry saved before the failing call

ERROR_CASES = [
    pytest.param("get_memory", {"id": "0123456789ab"}, ["no memory with id", "search_memory"], id="get-unknown-id"),
    pytest.param(
        "update_memory", {"id": "0123456789ab", "content": "x y z"}, ["no memory with id"], id="update-unknown-id"
    ),
    pytest.param("delete_memory", {"id": "0123456789ab"}, ["no memory with id"], id="delete-unknown-id"),
    pytest.param(
        "delete_memory", {"id": "0123456789ab", "permanent": True}, ["no memory with id"], id="erase-unknown-id"
    ),
    pytest.param("get_memory", {"id": "../etc/passwd"}, ["invalid memory id", "letters, digits"], id="get-bad-id"),
    pytest.param(
        "save_memory",
        {"content": "A fact", "category": "../x"},
        ["invalid category", "'..'", "letters, digits"],
        id="save-category-dotdot",
    ),
    pytest.param(
        "save_memory", {"content": "A fact", "category": "/etc"}, ["absolute paths"], id="save-category-absolute"
    ),
    pytest.param(
        "update_memory", {"id": EXISTING, "category": "../x"}, ["invalid category"], id="update-category-dotdot"
    ),
    pytest.param("search_memory", {"category": "../x"}, ["invalid category"], id="search-category-dotdot"),
    pytest.param("save_memory", {"content": ""}, ["content is empty"], id="save-empty-content"),
    pytest.param("save_memory", {"content": "  \n\t "}, ["content is empty"], id="save-blank-content"),
    pytest.param("update_memory", {"id": EXISTING, "content": "   "}, ["content is empty"], id="update-blank-content"),
    pytest.param(
        "save_memory", {"content": "x" * 101}, ["101 bytes", "limit is 100", "Split"], id="save-oversized-content"
    ),
    pytest.param(
        "save_memory", {"content": "é" * 51}, ["102 bytes", "limit is 100"], id="save-oversized-content-in-bytes"
    ),
    pytest.param(
        "update_memory", {"id": EXISTING, "content": "y" * 101}, ["limit is 100"], id="update-oversized-content"
    ),
    pytest.param("update_memory", {"id": EXISTING}, ["nothing to update"], id="update-nothing"),
    pytest.param("save_memory", {"content": "A fact", "tags": "5"}, ["tags", "valid list"], id="tags-as-string"),
    pytest.param("save_memory", {"content": "A fact", "tags": [5]}, ["tags", "valid string"], id="tag-as-number"),
    pytest.param("search_memory", {"limit": 0}, ["limit", "greater than or equal to 1"], id="limit-zero"),
    pytest.param("search_memory", {"limit": 201}, ["limit", "less than or equal to 200"], id="limit-too-big"),
    pytest.param(
        "save_memory", {"content": "A fact", "importance": 2}, ["importance", "less than or equal to 1"], id="imp-2"
    ),
    pytest.param(
        "update_memory",
        {"id": EXISTING, "importance": -0.1},
        ["importance", "greater than or equal to 0"],
        id="imp-neg",
    ),
    pytest.param(
        "save_memory", {"content": "A fact", "metadata": {"k": 1}}, ["metadata", "valid string"], id="metadata-int"
    ),
    pytest.param("search_memory", {"created_after": "last tuesday"}, ["created_after"], id="bad-date"),
    pytest.param("save_memory", {}, ["content", "required"], id="missing-content"),
]


@pytest.mark.parametrize(("tool", "arguments", "hints"), ERROR_CASES)
async def test_bad_calls_return_errors_and_change_nothing(
    settings_for, call, disk, tool: str, arguments: dict[str, Any], hints: list[str]
) -> None:
    async with Client(build_server(settings_for(max_content_bytes=100))) as client:
        existing = await call(client, "save_memory", content="Kept safe during errors", category="safe")
        before = disk.entries()
        if arguments.get("id") == EXISTING:
            arguments = {**arguments, "id": existing["id"]}

        result = await client.call_tool(tool, arguments)

        assert result.is_error
        message = result.content[0].text
        for hint in hints:
            assert hint in message, f"{hint!r} not in {message!r}"
        assert disk.entries() == before  # no entry file created, changed or removed
        assert disk.temp_files() == []
        # ... and the server still answers normally.
        found = await call(client, "search_memory", query="kept safe")
        assert ids(found) == [existing["id"]]
        assert (await call(client, "get_memory", id=existing["id"])) == existing


async def test_content_at_the_byte_limit_is_accepted(settings_for, call) -> None:
    async with Client(build_server(settings_for(max_content_bytes=100))) as client:
        saved = await call(client, "save_memory", content="é" * 50)  # 100 bytes in UTF-8
        assert saved["content"] == "é" * 50


async def test_many_errors_in_a_row_leave_the_server_healthy(client, call, call_error, disk, home) -> None:
    for _ in range(3):
        await call_error(client, "save_memory", content="", category="../x")
        await call_error(client, "search_memory", limit=0)
        await call_error(client, "get_memory", id="0123456789ab")
    assert disk.entries() == {}
    saved = await call(client, "save_memory", content="Still working after errors")
    assert ids(await call(client, "search_memory", query="still working")) == [saved["id"]]
    assert disk.temp_files() == []
    assert [p.name for p in (home / "memory").iterdir()] == [f"{saved['id']}.json"]


async def test_concurrent_calls_are_all_applied(client, call, disk) -> None:
    first = await call(client, "save_memory", content="Counter starts here", category="load")

    async def save(n: int) -> None:
        await call(client, "save_memory", content=f"Concurrent item {n}", category="load/items")

    async def update(n: int) -> None:
        await call(client, "update_memory", id=first["id"], tags=[f"round-{n}"])

    async with anyio.create_task_group() as tg:
        for n in range(20):
            tg.start_soon(save, n)
            tg.start_soon(update, n)
            tg.start_soon(call, client, "search_memory")

    assert (await call(client, "search_memory", query="concurrent item", limit=100))["total_matches"] == 20
    tree = await call(client, "list_memory_categories")
    assert tree["categories"] == [
        {"category": "load", "entries": 1, "total": 21},
        {"category": "load/items", "entries": 20, "total": 20},
    ]
    assert len(disk.entries()) == 21
    assert disk.temp_files() == []
    final_tags = (await call(client, "get_memory", id=first["id"]))["tags"]
    assert len(final_tags) == 1
    assert ids(await call(client, "search_memory", tags=final_tags)) == [first["id"]]


def _remove_while_the_server_writes(folder: Path) -> None:
    """rm -rf as a user would run it again: the server's background writers (vector cache, snapshot) may put a
    file into the folder between rmtree's listing and its rmdir (ENOTEMPTY), which is not what is tested."""
    for _ in range(100):
        try:
            shutil.rmtree(folder)
            return
        except OSError as exc:
            if exc.errno != errno.ENOTEMPTY:
                raise
    raise AssertionError(f"{folder} kept being refilled")


async def test_removing_the_index_folder_while_serving_does_not_break_it(settings_for, call, home) -> None:
    # The index and journal are derived data; the memory files are the truth.
    async with Client(build_server(settings_for())) as client:
        before = await call(client, "save_memory", content="Saved before the index folder vanished")
        _remove_while_the_server_writes(home / "index")

        assert ids(await call(client, "search_memory", query="vanished")) == [before["id"]]
        after = await call(client, "save_memory", content="Saved after the index folder vanished")
        assert sorted(ids(await call(client, "search_memory", query="vanished"))) == sorted([before["id"], after["id"]])
    async with Client(build_server(settings_for())) as restarted:
        assert (await call(restarted, "search_memory", query="vanished"))["total_matches"] == 2


async def test_created_at_is_utc_and_recent(client, call) -> None:
    before = datetime.now(UTC)
    saved = await call(client, "save_memory", content="Timestamp check")
    created = datetime.fromisoformat(saved["created_at"].replace("Z", "+00:00"))
    assert created.utcoffset() is not None and created.utcoffset().total_seconds() == 0
    assert before <= created <= datetime.now(UTC)


async def test_an_explicit_null_for_an_optional_parameter_is_still_accepted(client, call) -> None:
    """tools/list advertises optional parameters without their null (issue 43); a client that sends one anyway
    is served as before."""
    saved = await call(client, "save_memory", content="Nulls are fine", category=None, tags=None, metadata=None)
    found = await call(client, "search_memory", query=None, category=None, tags=None, mode=None, stores=None)
    assert [hit["entry"]["id"] for hit in found["results"]] == [saved["id"]]
    schema = {t.name: t for t in (await client.list_tools()).tools}["search_memory"].input_schema
    query = schema["properties"]["query"]
    assert query == {"type": "string", "description": query["description"]}
