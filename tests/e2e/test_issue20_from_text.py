"""Issue 20 (episodes, procedures, one search over every store, retrieval by kind of question, graph pages),
checked end to end from the issue's text and the README alone: the real server over stdio, the real CLI.

Written without reading the implementation, as a demanding user would: where the README is silent, a test
asserts what the issue asks for. Episodes in the past can only be made through what the README documents,
a restore: `rockmem-mcp import` of a backup whose lines are tagged `"store": "episode"` ("Backups (`export`)
carry every episode; a restore adds those the home lacks").
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

pytestmark = pytest.mark.anyio

EVERY_SET = {"ROCKMEM_TOOLSETS": "default,episodes,procedures"}
EPISODE_HEADING = re.compile(
    r"^## (?P<time>\d\d:\d\d) \| (?P<type>[a-z]+) \| "
    r"confidence:(?P<confidence>high|medium|low) \| tags:\[(?P<tags>.*)\]$"
)


# --- helpers -------------------------------------------------------------------------------------------------


async def read(client: Client, uri: str) -> str:
    return (await client.read_resource(uri)).contents[0].text


def today() -> date:
    return datetime.now(UTC).date()


def iso(day: date, hour: int, minute: int) -> str:
    return datetime(day.year, day.month, day.day, hour, minute, tzinfo=UTC).isoformat().replace("+00:00", "Z")


def day_of(at: str) -> str:
    return at[:10]


def cli(home: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rockmem_mcp", "--home", str(home), *args],
        capture_output=True,
        text=True,
        input=stdin,
        timeout=120,
    )


def ep(episode_id: str, at: str, content: str, **fields: Any) -> dict[str, Any]:
    """An episode to restore: id, time and content, other fields (type, confidence, tags, source) optional."""
    return {"id": episode_id, "at": at, "content": content, **fields}


def restore_episodes(home: Path, tmp_path: Path, *episodes: dict[str, Any]) -> None:
    """Write episodes with chosen times into `home` the documented way: import a backup."""
    backup = tmp_path / f"backdated-{len(list(tmp_path.glob('backdated-*')))}.jsonl"
    lines = [
        json.dumps(
            {
                "store": "episode",
                "id": e["id"],
                "at": e["at"],
                "type": e.get("type", "event"),
                "confidence": e.get("confidence", "medium"),
                "tags": e.get("tags", []),
                "source": e.get("source", "conversation"),
                "content": e["content"],
                "memory_id": None,
            }
        )
        for e in episodes
    ]
    backup.write_text("\n".join(lines) + "\n")
    done = cli(home, "import", str(backup))
    assert done.returncode == 0, done.stderr


def markdown_headings(markdown: str) -> list[str]:
    """The headings a CommonMark renderer would show: ATX (`# x`, up to 3 spaces before, also as a list item's
    first block: `1. # x`), setext (a paragraph line underlined by `===` or `---`) and raw HTML `<h1>`…`<h6>`
    blocks; nothing inside a fenced code block. A small reader for these cases only, not a full parser."""
    found: list[str] = []
    fence: str | None = None
    paragraph: tuple[str, int] | None = None  # the open paragraph's last line and the indent an underline needs
    for line in markdown.split("\n"):
        if fence is not None:
            if re.match(rf"^ {{0,3}}{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$", line):
                fence = None
            continue
        item = re.match(r"^( {0,3}(?:[-+*]|\d{1,9}[.)])[ \t]+)(.*)$", line)
        body, width = (item.group(2), len(item.group(1))) if item else (line, 0)
        opening = re.match(r"^ {0,3}(`{3,}|~{3,})", line)
        if opening:
            fence, paragraph = opening.group(1), None
        elif re.match(r"^ {0,3}#{1,6}(?:[ \t]|$)", body) or re.match(r"^ {0,3}<h[1-6](?:[\s>/]|$)", body, re.I):
            found.append(line.strip())
            paragraph = None
        elif paragraph is not None and not item and re.match(r"^ *(?:=+|-+)[ \t]*$", line):
            indent = len(line) - len(line.lstrip(" "))
            if paragraph[1] <= indent <= paragraph[1] + 3:
                found.append(f"{paragraph[0].strip()} (setext)")
                paragraph = None
            else:
                paragraph = (line, paragraph[1])
        elif not line.strip():
            paragraph = None
        elif paragraph is None and not item and (line.startswith("    ") or line.startswith("\t")):
            pass  # an indented code block: never a heading
        elif item:
            paragraph = (body, width)
        else:
            paragraph = (line, paragraph[1] if paragraph else 0)
    return found


def episode_headings(log: str) -> list[re.Match[str]]:
    return [m for m in (EPISODE_HEADING.match(line) for line in log.split("\n")) if m]


def contents(hits: list[dict[str, Any]]) -> list[str]:
    """Episode contents from search_memory's `episodes` hits or recall's `episodes` list, in reply order."""
    return [hit["episode"]["content"] if "episode" in hit else hit["content"] for hit in hits]


# --- 1. save_memory writes the day's episode log, rendered as the seed's markdown ---------------------------


async def test_save_memory_logs_a_typed_line_in_the_days_episode_log(stdio_server, home: Path, call) -> None:
    saves = [  # (category, importance) -> the type and confidence the README derives
        ("user-preferences/drinks", 0.7, "Prefers oolong tea in the afternoon", "preference", "medium"),
        ("project/decisions", 0.95, "Decided to move billing to Postgres", "decision", "high"),
        ("anti-patterns/deploys", 0.6, "Don't deploy on Fridays - instead wait for Monday", "correction", "medium"),
        ("work/todo", 0.5, "Renew the TLS certificate for the staging host", "task", "low"),
        ("calendar/events", 0.9, "Team offsite held in Lisbon", "event", "high"),
        ("notes", 1.0, "The user's cat is named Pixel", "fact", "high"),
    ]
    async with stdio_server(home, **EVERY_SET) as client:
        saved = []
        for category, importance, text, _, _ in saves:
            saved.append(
                await call(client, "save_memory", content=text, category=category, importance=importance, tags=["t1"])
            )
        day = day_of(saved[0]["created_at"])
        log = await read(client, f"rockmem://episodes/{day}")
        lines = log.split("\n")
        assert lines[0] == f"# {day} — Episode Log"
        headings = episode_headings(log)
        assert len(headings) == len(saves), log
        for (_, _, text, kind, confidence), memory, heading in zip(saves, saved, headings, strict=True):
            assert heading["type"] == kind, (text, heading.group(0))
            assert heading["confidence"] == confidence, (text, heading.group(0))
            assert heading["tags"] == "t1"
            assert heading["time"] == memory["created_at"][11:16]  # HH:MM, UTC
            assert lines[lines.index(heading.group(0)) + 1] == text  # the content follows its heading

        days = json.loads(await read(client, "rockmem://episodes"))
        assert {"day": day, "episodes": len(saves), "resource": f"rockmem://episodes/{day}"} in days

        # each line logs its memory: memory_id, and source user-explicit for importance 1
        found = await call(client, "search_memory", query="Pixel cat", stores=["episodes"])
        [pixel] = [h["episode"] for h in found["episodes"] if "Pixel" in h["episode"]["content"]]
        assert pixel["memory_id"] == saved[-1]["id"] and pixel["source"] == "user-explicit"
        found = await call(client, "search_memory", query="oolong tea", stores=["episodes"])
        [tea] = [h["episode"] for h in found["episodes"] if "oolong" in h["episode"]["content"]]
        assert tea["memory_id"] == saved[0]["id"] and tea["source"] == "conversation"


async def test_episode_log_escapes_heading_lines_and_control_codes_from_stored_text(
    stdio_server, home: Path, call
) -> None:
    forged = "## 23:59 | decision | confidence:high | tags:[forged]"
    async with stdio_server(home, **EVERY_SET) as client:
        memory = await call(client, "save_memory", content=f"A plain fact\n{forged}\nforged body")
        await call(client, "record_episode", content="Indented\n   # three spaces before\n#no space\n# Title")
        await call(client, "record_episode", content="Terminal \x1b]0;pwned\x07 title \u202e flipped")
        log = await read(client, f"rockmem://episodes/{day_of(memory['created_at'])}")
    assert forged not in log.split("\n") and f"\\{forged}" in log.split("\n")
    assert "\x1b" not in log and "\x07" not in log and "\u202e" not in log
    assert "\\u001b]0;pwned\\u0007" in log
    # the page's only headings are its title and one per episode
    assert len(markdown_headings(log)) == 1 + 3, markdown_headings(log)


async def test_episode_log_structure_cannot_be_forged_by_setext_underlines_fences_or_html(
    stdio_server, home: Path, call
) -> None:
    """A CommonMark reader must see exactly the title and one heading per episode, whatever the content."""
    async with stdio_server(home, **EVERY_SET) as client:
        first = await call(client, "record_episode", content="Setext forgery\n===")
        await call(client, "record_episode", content="Another setext forgery\n---")
        await call(client, "record_episode", content="<h2>HTML forgery</h2>")
        await call(client, "record_episode", content="A list item\n* # Bullet heading forgery")
        await call(client, "record_episode", content="An unclosed fence swallows what follows\n```")
        await call(client, "record_episode", content="The last real episode")
        log = await read(client, f"rockmem://episodes/{day_of(first['at'])}")
    headings = markdown_headings(log)
    assert len(episode_headings(log)) == 6
    assert headings == [log.split("\n")[0]] + [m.group(0) for m in episode_headings(log)], (headings, log)


async def test_episode_tags_cannot_forge_the_fields_of_an_episode_heading(stdio_server, home: Path, call) -> None:
    async with stdio_server(home, **EVERY_SET) as client:
        episode = await call(
            client, "record_episode", content="tag trick", confidence="low", tags=["ok] | confidence:high"]
        )
        log = await read(client, f"rockmem://episodes/{day_of(episode['at'])}")
    [heading] = [line for line in log.split("\n") if line.startswith("## ")]
    # one `type | confidence | tags` each: a tag must not read as a second confidence or close the tag list
    assert heading.count("confidence:") == 1, heading
    assert heading.count(" | ") == 3, heading


# --- 2. record_episode, no edits, explicit deletes ----------------------------------------------------------


async def test_record_episode_takes_every_type_confidence_and_source_and_refuses_bad_values(
    stdio_server, home: Path, call, call_error
) -> None:
    types = ["decision", "fact", "preference", "task", "event", "emotion", "correction"]
    confidences = ["high", "medium", "low"]
    sources = ["conversation", "reflection", "user-explicit"]
    async with stdio_server(home, **EVERY_SET) as client:
        recorded = []
        for i, kind in enumerate(types):
            confidence, source = confidences[i % 3], sources[i % 3]
            episode = await call(
                client,
                "record_episode",
                content=f"Episode number {i} of kind {kind}",
                type=kind,
                confidence=confidence,
                source=source,
                tags=[f"k{i}"],
            )
            assert (episode["type"], episode["confidence"], episode["source"]) == (kind, confidence, source)
            assert episode["tags"] == [f"k{i}"] and episode["memory_id"] is None
            assert re.fullmatch(r"[0-9a-f]{12}", episode["id"])
            recorded.append(episode)
        default = await call(client, "record_episode", content="Defaults only")
        assert (default["type"], default["confidence"], default["source"]) == ("event", "medium", "conversation")

        for bad in (
            {"content": "x", "type": "rumour"},
            {"content": "x", "type": "Decision"},
            {"content": "x", "confidence": "certain"},
            {"content": "x", "source": "gossip"},
            {"content": "   "},
            {"content": ""},
        ):
            await call_error(client, "record_episode", **bad)

        log = await read(client, f"rockmem://episodes/{day_of(recorded[0]['at'])}")
        heads = episode_headings(log)
        assert [(h["type"], h["confidence"]) for h in heads] == [
            (e["type"], e["confidence"]) for e in [*recorded, default]
        ]
        assert "rumour" not in log and "gossip" not in log  # refused calls wrote nothing


async def test_episodes_have_no_edit_tool_and_leave_only_by_an_explicit_delete(
    stdio_server, home: Path, call, call_error
) -> None:
    async with stdio_server(home, **EVERY_SET) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert {name for name in names if "episode" in name} == {"record_episode", "delete_episode"}

        memory = await call(client, "save_memory", content="The build server lives in rack seven")
        day = day_of(memory["created_at"])
        kept = await call(client, "record_episode", content="Rebooted the build server after the outage")
        doomed = await call(client, "record_episode", content="Ate a sandwich at the desk")

        # update_memory does not edit the episode that logged it; archiving leaves it (what happened, happened)
        await call(client, "update_memory", id=memory["id"], content="The build server lives in rack nine")
        log = await read(client, f"rockmem://episodes/{day}")
        assert "The build server lives in rack seven" in log
        await call(client, "delete_memory", id=memory["id"])
        assert "The build server lives in rack seven" in await read(client, f"rockmem://episodes/{day}")

        # delete_episode removes exactly that one, and only once
        await call(client, "delete_episode", id=doomed["id"])
        log = await read(client, f"rockmem://episodes/{day}")
        assert "sandwich" not in log and "Rebooted the build server" in log
        assert "no episode" in await call_error(client, "delete_episode", id=doomed["id"])
        assert "no episode" in await call_error(client, "delete_episode", id="0123456789ab")
        found = await call(client, "search_memory", query="sandwich desk", stores=["episodes"])
        assert found["episodes"] == []

        # erasing a memory erases the episode that holds its text
        await call(client, "update_memory", id=memory["id"], restore=True)
        await call(client, "delete_memory", id=memory["id"], permanent=True)
        log = await read(client, f"rockmem://episodes/{day}")
        assert "rack seven" not in log and "rack nine" not in log
        assert [m["type"] for m in episode_headings(log)] == ["event"]
        assert kept["id"] in {
            h["episode"]["id"] for h in (await call(client, "search_memory", query="rebooted build server"))["episodes"]
        }

    async with stdio_server(home) as client:  # the default surface has no episode writes
        refused = await client.call_tool("record_episode", {"content": "x"})
        assert refused.is_error and refused.content[0].text == "Unknown tool: record_episode"


async def test_a_torn_last_line_never_swallows_the_next_episode(stdio_server, home: Path, call) -> None:
    """A crash can leave the day's last line half written; the next append must still be its own episode, in the
    day's view and in search."""
    day = today()
    logs = home / "episodes"
    logs.mkdir(parents=True)
    whole = {"id": "c00000000001", "at": iso(day, 0, 1), "type": "event", "confidence": "medium", "tags": [],
             "source": "conversation", "content": "Whole line before the crash", "memory_id": None}  # fmt: skip
    torn = '{"id": "c00000000002", "at": "20'  # no newline: the write stopped here
    (logs / f"{day}.jsonl").write_text(json.dumps(whole) + "\n" + torn)
    (logs / f"{day + timedelta(days=1)}.jsonl").write_text(torn)  # should the UTC day turn during the test
    async with stdio_server(home, **EVERY_SET) as client:
        after = await call(client, "record_episode", content="Recorded after the crash")
        log = await read(client, f"rockmem://episodes/{day_of(after['at'])}")
        assert "Recorded after the crash" in log
        assert [m["time"] for m in episode_headings(log)][-1] == after["at"][11:16]
        found = await call(client, "search_memory", query="recorded after crash", stores=["episodes"])
        assert after["id"] in {h["episode"]["id"] for h in found["episodes"]}, found["episodes"]


async def test_a_bad_line_in_a_day_hides_no_neighbour_from_search(
    stdio_server, home: Path, tmp_path: Path, call
) -> None:
    day = today() - timedelta(days=5)
    walrus = [
        ep(f"c0000000001{n}", iso(day, n, 0), f"{when} walrus count")
        for n, when in ((1, "Morning"), (3, "Evening"), (4, "Night"))
    ]
    restore_episodes(home, tmp_path, *walrus)
    log_file = home / "episodes" / f"{day}.jsonl"
    lines = log_file.read_text().splitlines(keepends=True)
    log_file.write_text(lines[0] + '{"id": "c00000000012", "at": "oops\n' + lines[1] + lines[2])
    async with stdio_server(home, **EVERY_SET) as client:
        assert len(episode_headings(await read(client, f"rockmem://episodes/{day}"))) == 3  # the view skips it alone
        found = await call(client, "search_memory", query="walrus count", stores=["episodes"])
        assert {h["episode"]["id"] for h in found["episodes"]} == {"c00000000011", "c00000000013", "c00000000014"}


async def test_two_servers_on_one_home_see_each_others_episodes_and_procedures(stdio_server, home: Path, call) -> None:
    async with stdio_server(home, **EVERY_SET) as first, stdio_server(home, **EVERY_SET) as second:
        assert (await call(second, "search_memory", query="heron", stores=["episodes"]))["episodes"] == []
        episode = await call(first, "record_episode", content="Saw a grey heron at the pond")
        found = await call(second, "search_memory", query="heron", stores=["episodes"])
        assert [h["episode"]["id"] for h in found["episodes"]] == [episode["id"]]
        await call(first, "delete_episode", id=episode["id"])
        assert (await call(second, "search_memory", query="heron", stores=["episodes"]))["episodes"] == []
        assert "heron" not in await read(second, f"rockmem://episodes/{day_of(episode['at'])}")

        await call(first, "save_procedure", name="Feed the fish", trigger=["feed fish"], steps=["one pinch"])
        recalled = await call(second, "recall", message="should I feed the fish now?", session_id="pond")
        assert any("Feed the fish" in line for line in recalled["procedures"])
        await call(first, "save_procedure", name="Feed the fish", trigger=["feed fish"], steps=["two pinches"])
        assert "1. two pinches" in await read(second, "rockmem://procedures/feed-the-fish")


async def test_an_old_low_confidence_episode_ranks_lower_but_is_never_hidden(
    stdio_server, home: Path, tmp_path: Path, call
) -> None:
    old = today() - timedelta(days=400)
    restore_episodes(
        home, tmp_path, ep("d00000000001", iso(old, 12, 0), "Heard the nightingale sing", confidence="low")
    )
    async with stdio_server(home, **EVERY_SET) as client:
        fresh = await call(client, "record_episode", content="Heard the nightingale sing", confidence="high")
        found = await call(client, "search_memory", query="nightingale", stores=["episodes"])
        assert [h["episode"]["id"] for h in found["episodes"]] == [fresh["id"], "d00000000001"]
        assert found["episodes"][0]["score"] > found["episodes"][1]["score"]


# --- 3. time queries ----------------------------------------------------------------------------------------


def shed_story() -> list[dict[str, Any]]:
    """Episodes spread over the last two weeks (restored out of order on purpose)."""
    now = today()
    last_monday = now - timedelta(days=now.weekday() + 7)
    return [
        {"id": "e00000000003", "at": iso(now - timedelta(days=1), 15, 30), "content": "Felt proud of the finished shed",
         "type": "emotion"},
        {"id": "e00000000000", "at": iso(now - timedelta(days=10), 12, 0),
         "content": "Kicked off the garden shed project"},
        {"id": "e00000000002", "at": iso(last_monday + timedelta(days=3), 16, 0),
         "content": "Ordered cedar boards from the lumber yard", "type": "task"},
        {"id": "e00000000001", "at": iso(last_monday + timedelta(days=1), 10, 0),
         "content": "Chose cedar boards for the shed roof", "type": "decision"},
        {"id": "e00000000004", "at": iso(now - timedelta(days=1), 9, 0), "content": "Painted the shed door blue"},
    ]  # fmt: skip


def restore_shed_story(home: Path, tmp_path: Path) -> tuple[list[dict[str, Any]], date, date, date, date, date]:
    """Restore the shed story into `home`: the story, today, yesterday, last week's Monday, and the days of its
    first and second episodes (for "between")."""
    story = shed_story()
    restore_episodes(home, tmp_path, *story)
    now = today()
    first, second = sorted(date.fromisoformat(day_of(story[i]["at"])) for i in (1, 3))
    return story, now, now - timedelta(days=1), now - timedelta(days=now.weekday() + 7), first, second


def in_period(story: list[dict[str, Any]], first: date, last: date) -> list[str]:
    """Contents of the episodes on days first..last (inclusive), in the order they happened."""
    chosen = [e for e in story if first.isoformat() <= day_of(e["at"]) <= last.isoformat()]
    return [e["content"] for e in sorted(chosen, key=lambda e: e["at"])]


async def test_time_queries_through_search_memory_return_the_periods_episodes_in_order(
    stdio_server, home: Path, tmp_path: Path, call
) -> None:
    story, now, yesterday, last_monday, first, second = restore_shed_story(home, tmp_path)
    async with stdio_server(home, **EVERY_SET) as client:
        brushes = await call(client, "record_episode", content="Cleaned the brushes after painting the shed")
        story.append({"at": brushes["at"], "content": brushes["content"]})

        async def period_of(query: str, **filters: Any) -> dict[str, Any]:
            return await call(client, "search_memory", query=query, stores=["episodes"], **filters)

        found = await period_of("what happened yesterday")
        assert contents(found["episodes"]) == in_period(story, yesterday, yesterday)
        assert found["route"] is not None and f"{yesterday} to {yesterday}" in found["route"]

        found = await period_of(f"what happened on {yesterday}")
        assert contents(found["episodes"]) == in_period(story, yesterday, yesterday)

        found = await period_of("what happened last week")
        assert contents(found["episodes"]) == in_period(story, last_monday, last_monday + timedelta(days=6))
        assert f"{last_monday} to {last_monday + timedelta(days=6)}" in found["route"]

        found = await period_of(f"what happened between {first} and {second}")
        assert contents(found["episodes"]) == in_period(story, first, second)
        assert len(found["episodes"]) >= 2

        found = await period_of("what happened this week")
        this_week = in_period(story, now - timedelta(days=now.weekday()), now)
        assert contents(found["episodes"]) == this_week and brushes["content"] in this_week

        found = await period_of("what happened today")
        assert contents(found["episodes"]) == [brushes["content"]]

        # explicit dates instead of a phrase: created_after inclusive, created_before exclusive; no query, in order
        found = await call(
            client,
            "search_memory",
            stores=["episodes"],
            created_after=iso(yesterday, 0, 0),
            created_before=iso(now, 0, 0),
        )
        assert contents(found["episodes"]) == in_period(story, yesterday, yesterday)

        # keywords and a period: only that period's matches
        found = await period_of("cedar boards last week")
        assert found["episodes"] and set(contents(found["episodes"])) <= set(
            in_period(story, last_monday, last_monday + timedelta(days=6))
        )
        assert "Ordered cedar boards from the lumber yard" in contents(found["episodes"])


async def test_time_queries_through_recall_return_the_periods_episodes_in_order_once_per_session(
    stdio_server, home: Path, tmp_path: Path, call
) -> None:
    story, _, yesterday, last_monday, first, second = restore_shed_story(home, tmp_path)
    async with stdio_server(home, **EVERY_SET) as client:
        cases = [
            ("What happened yesterday?", yesterday, yesterday),
            ("what happened last week?", last_monday, last_monday + timedelta(days=6)),
            (f"what happened between {first} and {second}?", first, second),
        ]
        for n, (message, start, end) in enumerate(cases):
            recalled = await call(client, "recall", message=message, session_id=f"time-{n}")
            assert recalled["route"].startswith("when"), recalled["route"]
            assert f"{start} to {end}" in recalled["route"]
            assert f"Route: {recalled['route']}" in recalled["text"]
            expected = in_period(story, start, end)
            assert expected, "the story must have episodes in every period asked about"
            assert contents(recalled["episodes"]) == expected, message
            shown = [line for line in recalled["text"].split("\n") if any(c in line for c in expected)]
            assert [next(c for c in expected if c in line) for line in shown] == expected  # the block too, in order

        again = await call(client, "recall", message="What happened yesterday?", session_id="time-0")
        assert again["episodes"] == [] and again["already_injected"] >= 2  # delta injection: nothing twice
        fresh = await call(client, "recall", message="What happened yesterday?", session_id="time-9")
        assert contents(fresh["episodes"]) == in_period(story, yesterday, yesterday)


# --- 4. procedures ------------------------------------------------------------------------------------------


async def test_a_procedure_update_keeps_its_history_in_its_markdown_view(
    stdio_server, home: Path, call, call_error
) -> None:
    async with stdio_server(home, **EVERY_SET) as client:
        episode = await call(client, "record_episode", content="Staging broke after a deploy without checks")
        v1 = await call(
            client,
            "save_procedure",
            name="Push to production",
            trigger=["push to production"],
            steps=["run the test suite", "tag the release", "deploy with make ship"],
            notes=["never on Fridays"],
            learned_from=[episode["id"]],
        )
        assert (v1["version"], v1["earlier_versions"], v1["uri"]) == (1, 0, "rockmem://procedures/push-to-production")
        v2 = await call(
            client,
            "save_procedure",
            name="push TO production!",  # one slug: the same procedure, first spelling kept
            trigger=["push to production", "release to prod"],
            steps=["run the test suite", "tag the release", "deploy with make ship", "watch error rates"],
            reason="refined after staging incident",
            version=1,
        )
        assert (v2["name"], v2["version"], v2["earlier_versions"]) == ("Push to production", 2, 1)
        stale = await call_error(
            client, "save_procedure", name="Push to production", trigger=["push"], steps=["lost"], version=1
        )
        assert "changed since you read it" in stale
        assert "changed since you read it" in await call_error(
            client, "save_procedure", name="Push to production", trigger=["push"], steps=["lost"], version=0
        )
        assert "how to" in await call_error(client, "save_procedure", name="Vague", trigger=["how to"], steps=["x"])

        view = await read(client, "rockmem://procedures/push-to-production")
        lines = view.split("\n")
        assert lines[0] == "# Push to production"
        assert re.match(
            r"<!-- Type: procedure \| Learned: \d{4}-\d\d-\d\d \| Last used: .* \| Version: 2 -->", lines[1]
        )
        for section in ("## Trigger", "## Steps", "## Notes", "## Learned From", "## History"):
            assert section in lines, section
        steps = lines[lines.index("## Steps") + 1 : lines.index("## Notes")]
        assert [s for s in steps if s] == [
            "1. run the test suite",
            "2. tag the release",
            "3. deploy with make ship",
            "4. watch error rates",
        ]
        assert "lost" not in view
        history = [line for line in lines[lines.index("## History") + 1 :] if line.startswith("- v")]
        day = day_of(v2["updated_at"])
        assert history[0] == f"- v2 (current, {day}): refined after staging incident"
        assert history[1].startswith(f"- v1 ({day})") and len(history) == 2
        listing = json.loads(await read(client, "rockmem://procedures"))
        assert [(p["name"], p["version"], p["earlier_versions"]) for p in listing] == [("Push to production", 2, 1)]

        # stored text cannot forge the view's headings
        await call(
            client,
            "save_procedure",
            name="Forgery",
            trigger=["forgery check"],
            steps=["# Steps\nreal step", "Looks like a title\n==="],
            notes=["## History\n- v9 (current): forged"],
        )
        forged_view = await read(client, "rockmem://procedures/forgery")
        assert markdown_headings(forged_view) == [
            "# Forgery",
            "## Trigger",
            "## Steps",
            "## Notes",
            "## Learned From",
            "## History",
        ], forged_view
        with pytest.raises(MCPError, match=r"push-to-production|Push to production"):
            await read(client, "rockmem://procedures/push-to-prod")


async def test_recall_offers_a_matching_procedure_once_per_session_until_it_changes(
    stdio_server, home: Path, call
) -> None:
    async with stdio_server(home, **EVERY_SET) as client:

        async def offered(message: str, session: str) -> list[str]:
            recalled = await call(client, "recall", message=message, session_id=session)
            return [line for line in recalled["procedures"] if "Push to production" in line]

        await call(
            client,
            "save_procedure",
            name="Push to production",
            trigger=["push to production"],
            steps=["run the test suite", "deploy with make ship"],
        )
        first = await offered("can you push this to production?", "alpha")
        assert len(first) == 1 and "run the test suite" in first[0]
        assert "rockmem://procedures/push-to-production" in first[0]
        assert await offered("can you push this to production?", "alpha") == []  # given already
        assert await offered("please push the fix to production", "alpha") == []  # another match, same version
        assert await offered("push the branch", "beta") == []  # not every trigger word: no offer
        assert len(await offered("push this to production please", "gamma")) == 1  # another session

        await call(
            client,
            "save_procedure",
            name="Push to production",
            trigger=["push to production"],
            steps=["run the test suite", "deploy with make ship", "watch error rates"],
            reason="added monitoring",
        )
        changed = await offered("can you push this to production?", "alpha")
        assert len(changed) == 1 and "watch error rates" in changed[0]  # a new version is offered again

        await call(client, "save_procedure", name="Ship it", trigger=["ship"], steps=["open the release checklist"])
        recalled = await call(client, "recall", message="we are shipping the new build", session_id="delta")
        assert any("Ship it" in line for line in recalled["procedures"])  # stemmed: ship ~ shipping

        await call(client, "delete_procedure", name="Push to production")
        assert await offered("can you push this to production?", "epsilon") == []  # archived: not offered
        await call(client, "delete_procedure", name="Push to production", restore=True)
        assert len(await offered("can you push this to production?", "epsilon")) == 1


# --- 5. one search over every store -------------------------------------------------------------------------


async def test_one_search_over_every_store_names_each_store_filters_and_dedupes(
    stdio_server, home: Path, call, call_error
) -> None:
    home.mkdir()
    (home / "USER.md").write_text("# Servers\nThe user names servers after kestrel species.\n")
    async with stdio_server(home, **EVERY_SET) as client:
        memory = await call(client, "save_memory", content="The kestrel cluster runs on ARM machines")
        episode = await call(client, "record_episode", content="Migrated the kestrel cluster to the new rack")
        await call(
            client, "save_procedure", name="Restart kestrel", trigger=["restart kestrel"], steps=["drain kestrel nodes"]
        )

        everything = await call(client, "search_memory", query="kestrel")
        assert [h["entry"]["id"] for h in everything["results"]] == [memory["id"]]
        episode_ids = [h["episode"]["id"] for h in everything["episodes"]]
        assert episode["id"] in episode_ids
        # dedupe: the episode that logs the memory found in results is left out
        assert all(h["episode"]["memory_id"] != memory["id"] for h in everything["episodes"])
        assert [h["procedure"]["name"] for h in everything["procedures"]] == ["Restart kestrel"]
        assert everything["workspace"] and everything["workspace"][0]["file"] == "USER.md"
        for kind, store in (("results", "memories"), ("episodes", "episodes"), ("procedures", "procedures"),
                            ("workspace", "workspace")):  # fmt: skip
            assert everything[kind] and all(hit.get("store") == store for hit in everything[kind]), kind

        only_episodes = await call(client, "search_memory", query="kestrel", stores=["episodes"])
        assert only_episodes["results"] == [] and only_episodes["procedures"] == [] and only_episodes["workspace"] == []
        logged = {h["episode"]["memory_id"]: h["episode"] for h in only_episodes["episodes"]}
        assert memory["id"] in logged  # without the memory in results, its episode is a hit of its own
        assert logged[memory["id"]]["content"] == memory["content"]

        only_procedures = await call(client, "search_memory", query="kestrel", stores=["procedures"])
        assert only_procedures["results"] == [] and only_procedures["episodes"] == []
        assert [h["procedure"]["name"] for h in only_procedures["procedures"]] == ["Restart kestrel"]

        only_memories = await call(client, "search_memory", query="kestrel", stores=["memories"])
        assert [h["entry"]["id"] for h in only_memories["results"]] == [memory["id"]]
        assert (
            only_memories["episodes"] == [] and only_memories["procedures"] == [] and only_memories["workspace"] == []
        )

        two = await call(client, "search_memory", query="kestrel", stores=["memories", "workspace"])
        assert two["results"] and two["workspace"] and two["episodes"] == [] and two["procedures"] == []

        assert "stores" in await call_error(client, "search_memory", query="kestrel", stores=["nowhere"])

        # recall's general route dedupes the same way: the memory speaks for its episode
        recalled = await call(client, "recall", message="tell the kestrel team about ARM", session_id="dedupe")
        assert memory["id"] in {m["id"] for m in recalled["memories"]}
        assert all(e["content"] != memory["content"] for e in recalled["episodes"])


# --- 6. routing ---------------------------------------------------------------------------------------------


async def test_recall_says_which_route_each_kind_of_question_took(stdio_server, home: Path, call) -> None:
    async with stdio_server(home, **EVERY_SET) as client:
        await call(
            client, "add_triples", triples=[{"subject": "Marguerite", "predicate": "develops", "object": "Quillon"}]
        )
        await call(client, "record_episode", content="Painted the shed door blue")
        await call(client, "save_procedure", name="Paint a door", trigger=["paint door"], steps=["sand it first"])
        cases = {
            "when did we paint the shed door?": "when",
            "how do I paint a door?": "how",
            "what do you know about Marguerite?": "about",
            "what's the latest on Quillon?": "latest",
            "The garden looks lovely": "general",
        }
        for n, (message, route) in enumerate(cases.items()):
            recalled = await call(client, "recall", message=message, session_id=f"route-{n}")
            assert recalled["route"].split(" ")[0] == route, (message, recalled["route"])
            if route != "general":  # the block a model reads names the route too (general, the default, may not)
                assert f"Route: {recalled['route']}" in recalled["text"], recalled["text"]
        how = await call(client, "recall", message="how do I paint a door?", session_id="route-how")
        assert any("Paint a door" in line and "sand it first" in line for line in how["procedures"])
        when = await call(client, "recall", message="when did we paint the shed door?", session_id="route-when")
        assert "Painted the shed door blue" in contents(when["episodes"])


async def test_what_do_you_know_about_brings_the_entity_its_two_hop_graph_and_its_memories(
    stdio_server, home: Path, call
) -> None:
    async with stdio_server(home, **EVERY_SET) as client:
        await call(client, "add_entities", entities=[{"name": "Marguerite", "type": "person"}])
        added = await call(
            client,
            "add_triples",
            triples=[
                {"subject": "Marguerite", "predicate": "develops", "object": "Quillon"},  # hop 1
                {"subject": "Quillon", "predicate": "uses", "object": "Postgres"},  # hop 2
                {"subject": "Postgres", "predicate": "part_of", "object": "Datastack"},  # hop 3: out of reach
                {"subject": "Bartholomew", "predicate": "knows", "object": "Marguerite"},  # hop 1, incoming
            ],
        )
        ids = [t["fact"]["id"] for t in added["triples"]]
        about_her = await call(client, "save_memory", content="Marguerite prefers tabs over spaces")
        await call(client, "save_memory", content="The orchard needs pruning in winter")

        recalled = await call(client, "recall", message="What do you know about Marguerite?", session_id="about")
        assert recalled["route"].startswith("about"), recalled["route"]
        assert recalled["entities"] == ["Marguerite"]
        assert {t["id"] for t in recalled["graph"]} == {ids[0], ids[1], ids[3]}
        hops = {t["id"]: t["hop"] for t in recalled["graph"]}
        assert (hops[ids[0]], hops[ids[1]], hops[ids[3]]) == (1, 2, 1)
        assert [m["id"] for m in recalled["memories"]] == [about_her["id"]]
        assert "Quillon --uses--> Postgres" in recalled["text"] and "Datastack" not in recalled["text"]

        # "the best name match" when the name is written in another case
        lower = await call(client, "recall", message="tell me about marguerite", session_id="about-2")
        assert lower["route"].startswith("about") and lower["entities"] == ["Marguerite"]


async def test_whats_the_latest_on_brings_recent_episodes_about_the_subject(
    stdio_server, home: Path, tmp_path: Path, call
) -> None:
    now = today()
    old, other = (
        ep("f00000000001", iso(now - timedelta(days=40), 9, 0), "Quillon alpha started"),
        ep("f00000000002", iso(now - timedelta(days=2), 9, 0), "Garden shed roof finished"),
    )
    restore_episodes(home, tmp_path, old, other)
    async with stdio_server(home, **EVERY_SET) as client:
        await call(client, "record_episode", content="Quillon beta opened to ten customers")
        recalled = await call(client, "recall", message="what's the latest on Quillon?", session_id="latest")
        assert recalled["route"].startswith("latest"), recalled["route"]
        shown = contents(recalled["episodes"])
        assert "Quillon beta opened to ten customers" in shown
        assert "Quillon alpha started" not in shown  # older than the last 14 days
        assert "Garden shed roof finished" not in shown  # not about Quillon


# --- 7. export / import and doctor --------------------------------------------------------------------------


async def test_export_import_round_trips_episodes_and_procedures_into_a_fresh_home(
    stdio_server, home: Path, tmp_path: Path, call
) -> None:
    now = today()
    restore_episodes(home, tmp_path, ep("a00000000001", iso(now - timedelta(days=3), 8, 15), "Backdated standup"))
    async with stdio_server(home, **EVERY_SET) as client:
        memory = await call(client, "save_memory", content="The VPN gateway moved to Frankfurt", importance=0.9)
        await call(
            client, "record_episode", content="Chose Frankfurt for the gateway", type="decision", confidence="high"
        )
        gone = await call(client, "record_episode", content="An episode the user deleted")
        await call(client, "delete_episode", id=gone["id"])
        await call(client, "save_procedure", name="Rotate keys", trigger=["rotate keys"], steps=["revoke old keys"])
        await call(
            client,
            "save_procedure",
            name="Rotate keys",
            trigger=["rotate keys"],
            steps=["issue new keys", "revoke old keys"],
            reason="issue before revoking",
        )
        day, backdated_day = day_of(memory["created_at"]), (now - timedelta(days=3)).isoformat()
        before = {
            uri: await read(client, uri)
            for uri in (
                "rockmem://episodes",
                f"rockmem://episodes/{day}",
                f"rockmem://episodes/{backdated_day}",
                "rockmem://procedures/rotate-keys",
            )
        }

    backup, again = tmp_path / "backup.jsonl", tmp_path / "again.jsonl"
    exported = cli(home, "export", str(backup))
    assert exported.returncode == 0, exported.stderr
    stores = [json.loads(line).get("store") for line in backup.read_text().splitlines()]
    assert stores.count("episode") == 3 and stores.count("procedure") == 1  # restored, logged, recorded
    assert "An episode the user deleted" not in backup.read_text()

    fresh = tmp_path / "fresh"
    imported = cli(fresh, "import", str(backup))
    assert imported.returncode == 0, imported.stderr
    assert cli(fresh, "export", str(again)).returncode == 0
    assert again.read_text() == backup.read_text()  # export -> import into an empty home -> export: the same file

    assert cli(fresh, "import", str(backup)).returncode == 0  # restoring twice adds nothing: episodes it has
    async with stdio_server(fresh, **EVERY_SET) as client:
        after = {uri: await read(client, uri) for uri in before}
    assert after == before
    assert "issue before revoking" in after["rockmem://procedures/rotate-keys"]
    assert "- v1 (" in after["rockmem://procedures/rotate-keys"]


async def test_doctor_reports_a_corrupted_episode_line_and_fix_keeps_the_readable_ones(
    stdio_server, home: Path, tmp_path: Path, call
) -> None:
    now = today()
    day = now - timedelta(days=2)
    three = [
        ep(f"b0000000000{n}", iso(day, 7 + n, 0), f"{when} episode")
        for n, when in ((1, "Morning"), (2, "Second"), (3, "Evening"))
    ]
    restore_episodes(home, tmp_path, *three)
    assert cli(home, "doctor").returncode == 0
    log_file = home / "episodes" / f"{day}.jsonl"
    lines = log_file.read_text().splitlines(keepends=True)
    assert len(lines) == 3
    corrupted = [lines[0], '{"id": "b00000000009", "at": "oops\n', lines[2]]  # line 2 torn, line 3 whole
    log_file.write_text("".join(corrupted))
    (home / "episodes" / "notes.txt").write_text("not a day\n")

    found = cli(home, "doctor")
    assert found.returncode == 1, found.stdout + found.stderr
    report = found.stdout + found.stderr
    assert f"episodes/{day}.jsonl" in report and "line 2" in report, report
    assert "episodes/notes.txt" in report, report
    as_json = json.loads(cli(home, "doctor", "--json").stdout)
    assert f"episodes/{day}.jsonl" in {f["path"] for f in as_json["findings"]}

    async with stdio_server(home, **EVERY_SET) as client:  # the bad line never hides its neighbours
        shown = await read(client, f"rockmem://episodes/{day}")
    assert "Morning episode" in shown and "Evening episode" in shown and len(episode_headings(shown)) == 2

    fixed = cli(home, "doctor", "--fix")
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    [quarantined] = [p for p in (home / "quarantine").rglob(f"{day}.jsonl")]
    assert quarantined.read_text() == "".join(corrupted)  # the user's bytes are kept, never deleted
    assert [json.loads(line)["content"] for line in log_file.read_text().splitlines()] == [
        "Morning episode",
        "Evening episode",
    ]
    assert cli(home, "doctor").returncode == 0


# --- 8. graph pages -----------------------------------------------------------------------------------------


async def test_entity_page_and_relation_vocabulary(stdio_server, home: Path, call) -> None:
    async with stdio_server(home, **EVERY_SET) as client:
        await call(
            client,
            "add_entities",
            entities=[{"name": "Marguerite", "type": "person", "metadata": {"summary": "Lead engineer on Quillon."}}],
        )
        added = await call(
            client,
            "add_triples",
            triples=[
                {"subject": "Marguerite", "predicate": "develops", "object": "Quillon"},
                {"subject": "Quillon", "predicate": "depends", "object": "Redis"},
                {"subject": "Marguerite", "predicate": "uncertain_about", "object": "Redis", "confidence": 0.3},
            ],
        )
        assert added["triples"][0]["hint"] is None
        assert "depends_on" in (added["triples"][1]["hint"] or "")  # a hint, never a refusal
        memory = await call(
            client, "save_memory", content="Marguerite asked whether Quillon should drop Redis?\n# Forged\n<h1>x</h1>"
        )
        await call(client, "save_memory", content="## Marguerite forged a heading\n===")

        page = await read(client, "rockmem://entities/Marguerite")
        lines = page.split("\n")
        assert lines[0] == "# Marguerite"
        sections = [line for line in lines if line.startswith("## ")]
        assert sections == ["## Summary", "## Facts", "## Timeline", "## Open Questions", "## Relations"]
        assert "Lead engineer on Quillon." in page
        assert memory["id"] in page and added["triples"][0]["fact"]["id"] in page
        assert "- develops: [[Quillon]]" in lines
        questions = lines[lines.index("## Open Questions") + 1 : lines.index("## Relations")]
        assert any("Redis" in line for line in questions)  # confidence 0.3, and the memory's question
        assert markdown_headings(page) == ["# Marguerite", *sections], markdown_headings(page)

        quillon = await read(client, "rockmem://entities/quillon")  # any case
        assert "- developed_by: [[Marguerite]]" in quillon.split("\n")
        with pytest.raises(MCPError, match="Marguerite"):
            await read(client, "rockmem://entities/Margerite")

        vocabulary = await read(client, "rockmem://graph-relations")
        for predicate in ("develops", "uses", "part_of", "depends_on", "decided_on", "supersedes", "preceded_by",
                          "prefers", "avoids", "confident_about", "uncertain_about", "relates_to"):  # fmt: skip
            assert f"`{predicate}`" in vocabulary, predicate
        assert re.search(r"\| `develops` \|.*\| 1 \|", vocabulary)
        assert re.search(r"\| `depends` \| 1 \|", vocabulary)  # a free predicate in use, with its count

        await call(client, "add_triples", triples=[{"subject": "Valkey", "predicate": "supersedes", "object": "Redis"}])
        facts = (await call(client, "get_entity", name_or_id="Redis"))["facts"]
        others = [t for t in facts if t["predicate"] != "supersedes"]
        assert others and all(t["superseded_by"] == "Valkey" for t in others)


# --- 9. the default tools/list budget -----------------------------------------------------------------------


async def test_default_tools_list_stays_within_eight_thousand_tokens(stdio_server, home: Path) -> None:
    async with stdio_server(home) as client:
        tools = (await client.list_tools()).tools
    listed = [{"name": t.name, "description": t.description, "inputSchema": t.input_schema} for t in tools]
    # the README's measure, taking the larger of its readings (whole list, non-ASCII escaped)
    tokens = len(json.dumps(listed, separators=(",", ":"), ensure_ascii=True)) / 4
    assert tokens <= 8000, tokens
    names = {t.name for t in tools}
    assert {"save_memory", "search_memory", "recall"} <= names
    assert not names & {"record_episode", "delete_episode", "save_procedure", "delete_procedure"}
