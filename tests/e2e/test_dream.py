"""The dream tools over a real stdio process: the agent-driven consolidation flow end to end (material, plan,
safeguards, report and resource), dry runs, the deterministic pass, feedback into anti-patterns, the
preference pass over the conversation log, and bad input that leaves the server serving; a few single
safeguards checked against an in-memory server."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from mcp import Client

from rockmem_mcp.models import ConversationTurn
from rockmem_mcp.server.app import build_server

pytestmark = pytest.mark.anyio

NOW = datetime.now(UTC)


def days_ago(days: float) -> datetime:
    return NOW - timedelta(days=days)


def ids(found: dict[str, Any]) -> list[str]:
    return [hit["entry"]["id"] for hit in found["results"]]


def line_of(material: str, entry_id: str) -> str:
    """The material's line for one memory (each memory's id is in brackets)."""
    found = [line for line in material.splitlines() if f"[{entry_id}]" in line]
    assert len(found) == 1, f"{entry_id} listed {len(found)} times in:\n{material}"
    return found[0]


def actions(report: dict[str, Any], kind: str = "applied") -> list[tuple[str, list[str], str]]:
    """(action, ids, reason) of a report's applied or rejected list, in order (result ids left out: a dry run
    names memories it never makes)."""
    return [(a["action"], a["ids"], a["reason"]) for a in report[kind]]


async def read(client: Any, uri: str) -> str:
    return (await client.read_resource(uri)).contents[0].text


# ---------------------------------------------------------------------------------------------- consolidation


async def test_agent_driven_consolidation_end_to_end(stdio_server, home, seed, disk, call, call_error) -> None:
    db1, db2, rel1, rel2, key, noise, old_archive = seed(
        [
            {
                "content": "The staging database runs PostgreSQL 15 on port 5432",
                "category": "project-context/db",
                "tags": ["db"],
                "importance": 0.4,
                "created_at": days_ago(3),
                "metadata": {"source": "chat"},
            },
            {
                "content": "Staging database: PostgreSQL 15, port 5432",
                "category": "project-context/db",
                "tags": ["staging"],
                "importance": 0.6,
                "created_at": days_ago(2),
                "reinforcement_count": 2,
            },
            {"content": "The release train leaves every 2 weeks on Tuesday", "created_at": days_ago(5)},
            {"content": "Release train: every 2 weeks, Tuesdays, cut at 10:00", "created_at": days_ago(4)},
            {
                "content": "The production deploy key is rotated every 90 days",
                "category": "ops/secrets",
                "importance": 0.9,
                "pinned": True,
                "created_at": days_ago(6),
            },
            {"content": "ok, thanks!", "category": "chat", "created_at": days_ago(1)},
            {
                "content": "The staging database ran MySQL 5.7 long ago",
                "category": "project-context/db",
                "created_at": days_ago(50),
                "archived_at": days_ago(40),
            },
        ]
    )
    live = [db1, db2, rel1, rel2, key, noise]
    plan = {
        "merges": [
            {
                "ids": [db1, db2],
                "content": "The staging database runs PostgreSQL 15 on port 5432",
                "reason": "same fact twice",
            },
            # Drops "2" and "10:00" (and "Tuesdays") of its sources: refused.
            {"ids": [rel1, rel2], "content": "The release train leaves fortnightly on Tuesday"},
        ],
        "archives": [
            {"id": key, "reason": "looks stale"},  # protected: refused
            {"id": "0123456789ab", "reason": "no such memory"},  # unknown: refused
            {"id": noise, "reason": "small talk"},
            {"id": db1, "reason": "duplicate"},  # already merged by this plan: refused
        ],
        "updates": [{"id": rel1, "category": "project-context/release", "reason": "filed better"}],
        "creates": [{"content": "Don't deploy on Fridays — instead wait for Monday"}],  # not this pass's kind
    }

    async with stdio_server(home) as client:
        # No dream yet: the report tool and the resource say so.
        assert "no dream report yet" in await call_error(client, "get_dream_report")
        with pytest.raises(Exception, match="no dream report yet"):
            await read(client, "rockmem://dream/latest")

        # The agent asks to dream: it gets the directive, numbered material with ids and flags, and the schema.
        result = await call(client, "dream", mode="agent")
        assert result["mode"] == "agent" and result["report"] is None
        material = result["material"]
        assert material["dream_pass"] == "consolidation"
        assert "Merge" in material["directive"] and "protected" in material["directive"]
        assert (material["items"], material["remaining"]) == (6, 0)
        text = material["material"]
        assert [line.split(". ", 1)[0] for line in text.splitlines()] == ["1", "2", "3", "4", "5", "6"]
        for entry_id in live:
            line_of(text, entry_id)
        assert f"[{old_archive}]" not in text  # archived memories are not material
        assert "PINNED" in line_of(text, key) and "importance=0.90" in line_of(text, key)
        assert all("PINNED" not in line_of(text, i) and "PROTECTED" not in line_of(text, i) for i in live if i != key)
        assert "(project-context/db) #staging" in line_of(text, db2) and "reinforced=2" in line_of(text, db2)
        assert line_of(text, db1).endswith(": The staging database runs PostgreSQL 15 on port 5432")
        assert {"merges", "archives", "updates", "creates"} <= set(material["plan_schema"]["properties"])
        assert "action='apply'" in result["next_step"] and "dream_pass='consolidation'" in result["next_step"]
        # dream in agent mode is only a read: nothing changed, no report.
        assert "no dream report yet" in await call_error(client, "get_dream_report")

        before = disk.entries()

        # A dry run reports what the plan would do and changes no memory.
        dry = await call(client, "apply_dream", plan=plan, dry_run=True)
        assert dry["dry_run"] is True and dry["dream_pass"] == "consolidation" and dry["mode"] == "agent"
        assert dry["summary"] == "consolidation (agent): would apply 1 archive, 1 merge, 1 update; 5 rejected"
        assert disk.entries() == before
        assert sorted(ids(await call(client, "search_memory", query="staging database"))) == sorted([db1, db2])

        report = await call(client, "apply_dream", plan=plan)
        assert report["dry_run"] is False and report["finished_at"] is not None
        assert actions(report) == actions(dry)
        assert actions(report, "rejected") == actions(dry, "rejected")
        assert actions(report) == [
            ("merge", [db1, db2], "same fact twice"),
            ("archive", [noise], "small talk"),
            ("update", [rel1], "filed better"),
        ]
        rejected = {(a["action"], tuple(a["ids"])): a["reason"] for a in report["rejected"]}
        assert len(rejected) == 5
        assert rejected[("creates", ())] == "1 creates are not part of the consolidation pass"
        dropped = rejected[("merge", (rel1, rel2))]
        assert dropped.startswith("the merged text drops details of its sources:")
        assert {"2", "10:00"} <= set(dropped.split(": ", 1)[1].split(", "))
        assert rejected[("archive", (key,))].startswith(f"protected memories are never pruned: {key} is pinned")
        assert rejected[("archive", ("0123456789ab",))] == "unknown or already archived id"
        assert rejected[("archive", (db1,))] == "already changed by another action of this plan"
        assert report["summary"] == "consolidation (agent): applied 1 archive, 1 merge, 1 update; 5 rejected"

        # The merged memory is found; its sources are archived (superseded by it) and hidden from search.
        merged_id = report["applied"][0]["result_id"]
        assert merged_id not in (db1, db2)
        assert ids(await call(client, "search_memory", query="staging database")) == [merged_id]
        archived = await call(client, "search_memory", query="staging database", include_archived=True)
        assert sorted(ids(archived)) == sorted([merged_id, db1, db2, old_archive])
        for source in (db1, db2):
            gone = await call(client, "get_memory", id=source)
            assert gone["archived_at"] is not None and gone["superseded_by"] == merged_id
        merged = await call(client, "get_memory", id=merged_id)
        assert merged["content"] == "The staging database runs PostgreSQL 15 on port 5432"
        assert merged["category"] == "project-context/db" and merged["tags"] == ["db", "staging"]
        assert merged["importance"] == 0.6 and merged["reinforcement_count"] == 3
        assert datetime.fromisoformat(merged["created_at"]) == days_ago(3)
        assert merged["metadata"] == {"source": "chat", "merged_from": f"{db1},{db2}"}
        # The rest: the noise archived, the update applied, the refused ones untouched.
        assert (await call(client, "search_memory", query="thanks"))["total_matches"] == 0
        assert (await call(client, "get_memory", id=noise))["archived_at"] is not None
        assert (await call(client, "get_memory", id=rel1))["category"] == "project-context/release"
        for untouched in (key, rel2):
            entry = await call(client, "get_memory", id=untouched)
            assert entry["archived_at"] is None and entry["updated_at"] is None
        assert (await call(client, "get_memory", id=key))["content"].endswith("every 90 days")

        # The report tool and the resource give the same report; an earlier one is still there by id.
        assert await call(client, "get_dream_report") == report
        assert await call(client, "get_dream_report", report_id=report["id"]) == report
        assert json.loads(await read(client, "rockmem://dream/latest")) == report
        earlier = await call(client, "get_dream_report", report_id=dry["id"])
        assert earlier == dry
        assert (home / "dream-reports" / f"{report['id']}.json").is_file()

        # Dreaming again: the material reflects the changes.
        again = (await call(client, "dream", mode="agent"))["material"]
        assert again["items"] == 4
        assert f"[{merged_id}]" in again["material"] and f"[{db1}]" not in again["material"]
        assert f"[{noise}]" not in again["material"]

        # A plan naming only memories the first one archived: every action refused, nothing changes.
        after = disk.entries()
        stale_plan = {"archives": [{"id": db2}], "merges": [{"ids": [db1, noise], "content": "x"}]}
        stale = await call(client, "apply_dream", plan=stale_plan)
        assert stale["applied"] == []
        assert [a["reason"] for a in stale["rejected"]] == [
            f"unknown or archived ids: {db1}, {noise}",
            "unknown or already archived id",
        ]
        assert disk.entries() == after
    assert "Traceback" not in stdio_server.logs[0].read_text()


async def test_bad_dream_input_is_an_error_and_the_server_keeps_serving(stdio_server, home, call, call_error) -> None:
    async with stdio_server(home) as client:
        saved = await call(client, "save_memory", content="Still here after the bad dream calls")
        assert "dream_pass" in await call_error(client, "dream", dream_pass="nightmare")
        assert "mode" in await call_error(client, "dream", mode="llm-please")
        assert "offset" in await call_error(client, "dream", offset=-1)
        assert "dream_pass" in await call_error(client, "apply_dream", plan={}, dream_pass="nightmare")
        # Plans that do not match the schema.
        assert "plan" in await call_error(client, "apply_dream", plan="merge everything")
        assert "ids" in await call_error(client, "apply_dream", plan={"merges": [{"ids": [saved["id"]]}]})
        assert "content" in await call_error(client, "apply_dream", plan={"merges": [{"ids": ["a", "b"]}]})
        wrong = await call_error(client, "apply_dream", plan={"archives": [saved["id"]]})
        assert "does not match plan_schema" in wrong and "archives.0" in wrong  # where, for the schema in dream's reply
        assert "importance" in await call_error(
            client, "apply_dream", plan={"creates": [{"content": "x", "importance": 3}]}, dream_pass="preferences"
        )
        assert "plan" in await call_error(client, "apply_dream")
        # Feedback of a type that does not exist, or without content.
        assert "type" in await call_error(client, "record_feedback", type="Praise", content="well done")
        assert "content is empty" in await call_error(client, "record_feedback", type="Correction", content="  ")
        assert "session_id" in await call_error(
            client, "record_feedback", type="Correction", content="x", session_id="../etc"
        )
        assert "no dream report 'nope'" in await call_error(client, "get_dream_report", report_id="nope")
        # Nothing was changed by any of them, and the server answers.
        assert ids(await call(client, "search_memory", query="still here")) == [saved["id"]]
        assert (await call(client, "search_memory"))["total_matches"] == 1
        assert not (home / "dream-reports").exists() or not list((home / "dream-reports").glob("*.json"))
        empty = await call(client, "apply_dream", plan={})
        assert empty["applied"] == [] and empty["rejected"] == []
        assert empty["summary"] == "consolidation (agent): applied no changes; 0 rejected"
    assert "Traceback" not in stdio_server.logs[0].read_text()


async def test_the_salience_resource_lists_the_least_and_the_most_salient(stdio_server, home, seed) -> None:
    """What is fading and what is alive, for a person: uses (a get_memory is one) lift a memory."""
    fresh, fading, candidate, pinned = seed(
        [
            {"content": "The user prefers dark mode", "last_seen_at": days_ago(1)},
            {"content": "The build takes about ten minutes", "last_seen_at": days_ago(30)},
            {"content": "Legacy CI ran on Jenkins in the basement lab", "last_seen_at": days_ago(120)},
            {"content": "The user is allergic to peanuts", "pinned": True, "last_seen_at": days_ago(900)},
        ]
    )
    async with stdio_server(home) as client:
        listing = json.loads(await read(client, "rockmem://salience"))
        assert listing["tiers"] == {"active": 2, "fading": 1, "dormant": 0, "archive_candidate": 1}
        assert listing["pinned"] == 1
        assert [m["id"] for m in listing["least"]] == [candidate, fading, fresh, pinned]
        assert [m["id"] for m in listing["most"]] == [pinned, fresh, fading, candidate]
        least = listing["least"][0]
        assert least["tier"] == "archive_candidate" and least["uses"] == 1 and least["salience"] < 0.05
        assert least["preview"] == "Legacy CI ran on Jenkins in the basement lab"
        await client.call_tool("get_memory", {"id": candidate})  # a use: salience back to active
        again = json.loads(await read(client, "rockmem://salience"))
        assert again["least"][0]["id"] == fading and again["tiers"]["archive_candidate"] == 0
        assert next(m for m in again["most"] if m["id"] == candidate)["uses"] == 2


# ---------------------------------------------------------------------------------------------- deterministic


async def test_deterministic_pass_through_the_tool(stdio_server, home, seed, disk, call, call_error) -> None:
    """Exact and near-duplicates merged, archive candidates listed (not archived), purge of archives over 90 days
    old; a dry run first changes nothing."""
    dark1, dark2, s3a, s3b, stale, guarded, purged, recent_archive = seed(
        [
            {"content": "The user prefers dark mode in every editor", "created_at": days_ago(3)},
            {"content": "the user prefers dark mode in every  editor.", "created_at": days_ago(2)},
            {"content": "Build artifacts are uploaded to the Hetzner bucket nightly", "created_at": days_ago(5)},
            {"content": "Build artifacts are uploaded nightly to the Hetzner bucket", "created_at": days_ago(4)},
            {
                "content": "Legacy CI ran on Jenkins",
                "importance": 0.6,
                "created_at": days_ago(200),
                "last_seen_at": days_ago(120),
            },
            {
                "content": "Backups are encrypted with age",
                "importance": 0.9,
                "pinned": True,
                "created_at": days_ago(300),
                "last_seen_at": days_ago(300),
            },
            {"content": "An old archived note", "created_at": days_ago(200), "archived_at": days_ago(100)},
            {"content": "A recently archived note", "created_at": days_ago(20), "archived_at": days_ago(10)},
        ]
    )
    async with stdio_server(home) as client:
        before = disk.entries()
        dry = await call(client, "dream", mode="deterministic", dry_run=True)
        assert dry["mode"] == "deterministic" and dry["material"] is None
        report = dry["report"]
        assert report["dry_run"] is True and report["mode"] == "deterministic"
        assert report["summary"] == (
            "deterministic (deterministic): would apply 2 merge, 1 purge; 0 rejected; 1 archive candidates to review"
        )
        assert disk.entries() == before

        result = await call(client, "dream", mode="deterministic")
        report = result["report"]
        assert "nothing else to do" in result["next_step"]
        assert actions(report) == actions(dry["report"])
        kinds = {(a["action"], tuple(a["ids"])): a for a in report["applied"]}
        assert set(kinds) == {
            ("merge", (dark1, dark2)),
            ("merge", (s3a, s3b)),
            ("purge", (purged,)),
        }
        assert [c["id"] for c in report["archive_candidates"]] == [stale]  # the pinned one is always active
        assert kinds[("merge", (dark1, dark2))]["reason"] == "exact duplicates (deterministic)"
        assert kinds[("merge", (s3a, s3b))]["reason"] == "near-duplicates (deterministic)"
        dark = kinds[("merge", (dark1, dark2))]["result_id"]
        assert ids(await call(client, "search_memory", query="dark mode")) == [dark]
        assert (await call(client, "get_memory", id=dark1))["superseded_by"] == dark
        s3 = kinds[("merge", (s3a, s3b))]["result_id"]
        assert ids(await call(client, "search_memory", query="artifacts bucket")) == [s3]
        candidate = await call(client, "get_memory", id=stale)  # listed for review, left as it was
        assert candidate["importance"] == 0.6 and candidate["archived_at"] is None and candidate["metadata"] == {}
        assert (await call(client, "get_memory", id=guarded))["importance"] == 0.9
        assert "no memory with id" in await call_error(client, "get_memory", id=purged)
        assert (await call(client, "get_memory", id=recent_archive))["archived_at"] is not None
        assert await call(client, "get_dream_report") == report

        # A second run right after: nothing to do; get_memory was a use of the candidate, now active.
        again = (await call(client, "dream", mode="deterministic"))["report"]
        assert again["applied"] == [] and again["archive_candidates"] == []
        changes = {c["id"]: (c["from_tier"], c["to_tier"]) for c in again["tier_changes"]}
        assert changes == {stale: ("archive_candidate", "active")}
        third = (await call(client, "dream", mode="deterministic"))["report"]
        assert third["applied"] == [] and third["tier_changes"] == []
    assert "Traceback" not in stdio_server.logs[0].read_text()


# ---------------------------------------------------------------------------------------------- feedback


async def test_feedback_becomes_material_for_anti_patterns(stdio_server, home, seed, call) -> None:
    (stale,) = seed([{"content": "Legacy CI ran on Jenkins"}])
    async with stdio_server(home) as client:
        # Feedback: a correction becomes material for the anti-patterns pass.
        correction = await call(
            client,
            "record_feedback",
            type="Correction",
            content="The user corrected me: don't use pip to install packages in this repo, use uv",
            session_id="chat-7",
            metadata={"tool": "bash"},
        )
        assert correction["type"] == "Correction" and correction["session_id"] == "chat-7"
        assert correction["metadata"] == {"tool": "bash"} and correction["id"] and correction["at"]
        thumbs = await call(client, "record_feedback", type="UserThumbsUp", content="Nice summary")
        assert thumbs["session_id"]  # this MCP session's own
        failure = await call(client, "record_feedback", type="ToolFailure", content="search_memory timed out")
        assert list((home / "feedback").glob("*.jsonl"))

        result = await call(client, "dream", dream_pass="anti-patterns", mode="agent")
        material = result["material"]
        assert material["dream_pass"] == "anti-patterns" and material["items"] == 2
        assert (
            f"[{correction['id']}] Correction in chat-7: The user corrected me: don't use pip to install packages "
            "in this repo, use uv" in material["material"]
        )
        assert f"[{failure['id']}] ToolFailure" in material["material"]
        assert thumbs["id"] not in material["material"]  # thumbs are not anti-pattern material
        assert "Anti-patterns already known:\n(none yet)" in material["directive"]
        assert "action='apply'" in result["next_step"] and "dream_pass='anti-patterns'" in result["next_step"]

        plan = {
            "creates": [
                {
                    "content": "Don't use pip to install packages in this repo — instead use uv",
                    "category": "anti-patterns/python",
                    "reason": "correction in chat-7",
                },
                {"content": "Never retry a timed-out search at once, instead narrow the query", "category": "tools"},
                {"content": "Prefer uv over pip", "reason": "not in the anti-pattern form"},
            ],
            "archives": [{"id": stale}],  # not this pass's kind
        }
        report = await call(client, "apply_dream", plan=plan, dream_pass="anti-patterns")
        assert [a["action"] for a in report["applied"]] == ["create", "create"]
        pip_id, retry_id = (a["result_id"] for a in report["applied"])
        pip = await call(client, "get_memory", id=pip_id)
        assert pip["category"] == "anti-patterns/python" and pip["metadata"] == {"source": "dream"}
        assert pip["tags"] == ["anti-pattern"]
        assert (await call(client, "get_memory", id=retry_id))["category"] == "anti-patterns/general"
        assert [(a["action"], a["reason"]) for a in report["rejected"]] == [
            ("archives", "1 archives are not part of the anti-patterns pass"),
            ("create", "an anti-pattern reads \"Don't X for Y — instead Z\": 'Prefer uv over pip'"),
        ]
        assert (await call(client, "get_memory", id=stale))["archived_at"] is None
        found = await call(client, "search_memory", query="pip uv", category="anti-patterns")
        assert ids(found) == [pip_id]

        # The same anti-pattern again is refused as already remembered; the known ones are in the directive.
        again = await call(client, "apply_dream", plan={"creates": plan["creates"][:1]}, dream_pass="anti-patterns")
        assert again["applied"] == [] and [(a["ids"], a["reason"]) for a in again["rejected"]] == [
            ([pip_id], "already remembered")
        ]
        directive = (await call(client, "dream", dream_pass="anti-patterns", mode="agent"))["material"]["directive"]
        assert "- Don't use pip to install packages in this repo — instead use uv" in directive
        # The consolidation material carries the correction for judging stale memories.
        consolidation = (await call(client, "dream", mode="agent"))["material"]["directive"]
        assert "Recent feedback (a Correction makes" in consolidation and "use uv" in consolidation
        assert "- UserThumbsUp: Nice summary" in consolidation and "- ToolFailure: search_memory" in consolidation
    assert "Traceback" not in stdio_server.logs[0].read_text()


async def test_the_anti_patterns_directive_asks_for_anti_patterns(client, call) -> None:
    """The anti-patterns pass may only create memories "Don't X for Y — instead Z": its directive must ask for
    those (in `creates`), not for merges, archives and updates, which the pass refuses."""
    await call(client, "record_feedback", type="Correction", content="Don't answer in French; the user reads English")
    directive = (await call(client, "dream", dream_pass="anti-patterns", mode="agent"))["material"]["directive"]
    assert "creates" in directive
    assert "instead" in directive.lower()


# ---------------------------------------------------------------------------------------------- preferences


async def test_preference_pass_reads_the_conversation_log(stdio_server, home, call) -> None:
    async with stdio_server(home, ROCKMEM_CONVERSATION_LOG="true", ROCKMEM_DREAM_BATCH_SIZE="3") as client:
        turns = [
            ("user", "Please, no emojis in answers. I told you twice!"),
            ("assistant", "Understood, no emojis."),
            ("user", "Also keep my cloud budget under 200 euros a month"),
        ]
        for role, content in turns:
            await call(client, "record_turn", role=role, content=content, session_id="chat-9")
        await call(client, "record_turn", role="user", content="Dark   themes\nplease", session_id="chat-10")
        assert list((home / "conversations").glob("*.jsonl"))

        # Batches of 3: the first call says where the next batch starts.
        result = await call(client, "dream", dream_pass="preferences", mode="agent")
        material = result["material"]
        assert material["dream_pass"] == "preferences" and (material["items"], material["remaining"]) == (3, 1)
        assert material["material"].splitlines() == [
            "1. [chat-9] user: Please, no emojis in answers. I told you twice!",
            "2. [chat-9] assistant: Understood, no emojis.",
            "3. [chat-9] user: Also keep my cloud budget under 200 euros a month",
        ]
        assert "dream_pass='preferences'" in result["next_step"] and "offset=3" in result["next_step"]
        rest = await call(client, "dream", dream_pass="preferences", mode="agent", offset=3)
        assert (rest["material"]["items"], rest["material"]["remaining"]) == (1, 0)
        assert rest["material"]["material"] == "4. [chat-10] user: Dark themes please"
        assert "offset=" not in rest["next_step"]
        beyond = await call(client, "dream", dream_pass="preferences", mode="agent", offset=10)
        assert beyond["material"]["items"] == 0 and beyond["material"]["material"] == "(nothing to consider)"
        assert "Existing preferences:\n(none yet)" in material["directive"]

        plan = {
            "creates": [
                {"content": "The user wants answers without emojis", "reason": "chat-9, twice, irritated"},
                {"content": "The user's cloud budget is at most 200 euros a month", "category": "money"},
                {"content": "The user likes dark themes", "category": "user-preferences/ui", "tags": ["ui"]},
            ],
            "merges": [{"ids": ["a", "b"], "content": "x"}],
        }
        preview = await call(client, "apply_dream", plan=plan, dream_pass="preferences", dry_run=True)
        assert [a["action"] for a in preview["applied"]] == ["create"] * 3
        assert (await call(client, "search_memory"))["total_matches"] == 0

        report = await call(client, "apply_dream", plan=plan, dream_pass="preferences")
        assert [(a["action"], a["reason"]) for a in report["rejected"]] == [
            ("merges", "1 merges are not part of the preferences pass")
        ]
        emojis, budget, dark = [await call(client, "get_memory", id=a["result_id"]) for a in report["applied"]]
        assert emojis["category"] == "user-preferences/inferred" and emojis["tags"] == ["inferred"]
        assert emojis["metadata"] == {"source": "inferred"}
        assert budget["category"] == "user-preferences/inferred"
        assert budget["metadata"] == {"source": "inferred", "requires_user_permission": "true"}
        assert dark["category"] == "user-preferences/ui" and dark["tags"] == ["ui", "inferred"]
        assert "requires_user_permission" not in dark["metadata"]
        assert list((home / "conversations").glob("*.jsonl")) == []  # consumed, today's file included

        # Known preferences are listed for the next pass, so it does not repeat them.
        directive = (await call(client, "dream", dream_pass="preferences", mode="agent"))["material"]["directive"]
        assert "- The user wants answers without emojis" in directive
    assert "Traceback" not in stdio_server.logs[0].read_text()


async def test_a_plan_with_a_misspelled_field_is_an_error_not_an_empty_plan(client, call, call_error) -> None:
    """`{"archive": [...]}` (for `archives`) must not pass as an empty plan that reports "no changes"."""
    saved = await call(client, "save_memory", content="Transient status: build 812 is running")
    assert "archive" in await call_error(client, "apply_dream", plan={"archive": [{"id": saved["id"]}]})
    assert (await call(client, "get_memory", id=saved["id"]))["archived_at"] is None


async def test_duplicates_with_a_digit_inside_a_word_can_be_merged(seed, client, call) -> None:
    """ "S3", "EC2", "Python3", "IPv6", "v2": a merge that keeps such a word verbatim keeps every detail."""
    exact = seed([{"content": "Artifacts go to the S3 bucket"}, {"content": "artifacts go to the S3 bucket."}])
    near = seed(
        [
            {"content": "The workers run on EC2 with Python3 nightly"},
            {"content": "Nightly the workers run on EC2 with Python3"},
        ]
    )
    preview = (await call(client, "dream", mode="deterministic", dry_run=True))["report"]
    assert preview["rejected"] == []
    assert sorted(a["ids"] for a in preview["applied"]) == sorted([exact, near])
    # The same through an agent's plan: the merged text is one of its sources, word for word.
    plan = {"merges": [{"ids": exact, "content": "Artifacts go to the S3 bucket"}]}
    report = await call(client, "apply_dream", plan=plan, dry_run=True)
    assert report["rejected"] == [] and [a["action"] for a in report["applied"]] == ["merge"]


async def test_applying_one_preference_batch_keeps_the_turns_of_the_next_batches(home, settings_for, call) -> None:
    """The agent-driven preference pass in batches, as next_step tells it: dream, apply_dream, then dream again
    with the next offset. Applying the first batch's plan must not drop the turns the agent has not read yet."""
    yesterday = days_ago(1)
    log = home / "conversations" / f"{yesterday.date().isoformat()}.jsonl"
    log.parent.mkdir(parents=True)
    log.write_text(
        "".join(
            ConversationTurn(session_id="chat-1", role="user", content=text, at=yesterday).model_dump_json() + "\n"
            for text in ("No emojis, please", "I said no emojis!", "Answers in British English, please")
        ),
        "utf-8",
    )
    async with Client(build_server(settings_for(conversation_log=True, dream_batch_size=2))) as client:
        first = await call(client, "dream", dream_pass="preferences", mode="agent")
        assert (first["material"]["items"], first["material"]["remaining"]) == (2, 1)
        assert "action='apply'" in first["next_step"] and "offset=2" in first["next_step"]
        plan = {"creates": [{"content": "The user wants answers without emojis"}]}
        assert (await call(client, "apply_dream", plan=plan, dream_pass="preferences"))["applied"]
        second = (await call(client, "dream", dream_pass="preferences", mode="agent", offset=2))["material"]
        assert second["material"] == "3. [chat-1] user: Answers in British English, please"
        # The user goes on talking while the agent thinks: that turn is not consumed with the ones it read.
        await call(client, "record_turn", role="user", content="Short answers, please", session_id="chat-2")
        plan = {"creates": [{"content": "The user writes British English"}]}
        assert (await call(client, "apply_dream", plan=plan, dream_pass="preferences"))["applied"]
        rest = (await call(client, "dream", dream_pass="preferences", mode="agent"))["material"]
        assert rest["material"] == "1. [chat-2] user: Short answers, please"
        assert not log.exists()  # yesterday's file worked through and removed


async def test_an_anti_pattern_with_a_typographic_apostrophe_is_in_the_form(client, call) -> None:
    """Models often write "Don’t" (U+2019): it is the same "Don't X for Y — instead Z"."""
    plan = {"creates": [{"content": "Don’t use pip for installs in this repo — instead use uv"}]}
    report = await call(client, "apply_dream", plan=plan, dream_pass="anti-patterns", dry_run=True)
    assert report["rejected"] == [] and [a["action"] for a in report["applied"]] == ["create"]


# ---------------------------------------------------------------------------------------------- issue 45


async def test_a_merge_keeps_every_fact_and_a_contradiction_goes_to_the_user(stdio_server, home, seed, call) -> None:
    """Issue 45 over stdio: an agent's merge that drops "allergic to peanuts" from one source is refused saying
    which source lost which words (the model retries and keeps them); "standup at 9am" and "… at 10am" are never
    merged, not even keeping both times, but listed as a contradiction for the user by the dream that refused the
    merge, the deterministic pass and a reflection."""
    peanuts, hiking, nine, ten = seed(
        [
            {"content": "Bob is allergic to peanuts", "category": "people", "created_at": days_ago(4)},
            {"content": "Bob likes hiking", "category": "people", "created_at": days_ago(3)},
            {"content": "The team standup is at 9am", "category": "work", "created_at": days_ago(2)},
            {"content": "The team standup is at 10am", "category": "work", "created_at": days_ago(1)},
        ]
    )
    times = "they give different times: 9am / 10am"
    async with stdio_server(home) as client:
        plan = {
            "merges": [
                {"ids": [peanuts, hiking], "content": "Bob likes hiking", "reason": "both about Bob"},
                {"ids": [nine, ten], "content": "The team standup is at 9am or 10am", "reason": "same meeting"},
            ]
        }
        result = await client.call_tool("dream", {"action": "apply", "plan": plan})
        assert not result.is_error
        report = result.structured_content["report"]
        assert report["applied"] == []
        refused = {tuple(r["ids"]): r["reason"] for r in report["rejected"]}
        assert refused[(peanuts, hiking)].startswith(
            f'the merged text drops words of {peanuts} ("Bob is allergic to peanuts"): allergic, peanuts'
        )
        assert refused[(nine, ten)] == f"{nine} and {ten} contradict each other ({times}): keep both, or archive one"
        assert [(c["ids"], c["reason"]) for c in report["contradictions"]] == [([nine, ten], times)]
        # What the model reads: the refusal with its words, and what to do next.
        text = result.content[0].text
        assert "allergic, peanuts" in text and "Ask the user which is right" in text
        assert "plan them again keeping every word" in text
        for entry_id in (peanuts, hiking, nine, ten):
            assert (await call(client, "get_memory", id=entry_id))["archived_at"] is None

        # The model retries keeping every word: applied.
        retry = {"merges": [{"ids": [peanuts, hiking], "content": "Bob is allergic to peanuts and enjoys hiking"}]}
        again = await call(client, "apply_dream", plan=retry)
        assert [(a["action"], a["ids"]) for a in again["applied"]] == [("merge", [peanuts, hiking])]

        # The deterministic pass reports the pair (no embeddings here: found by the words they share).
        deterministic = await call(client, "dream", mode="deterministic")
        assert [(c["ids"], c["reason"]) for c in deterministic["report"]["contradictions"]] == [([nine, ten], times)]
        assert "Ask the user which is right" in deterministic["next_step"]

        # A reflection lists it for the user, in its summary and its questions; nothing merges the two.
        ran = await call(client, "reflect", action="run")
        reflection = ran["reflections"][0]
        assert [(c["ids"], c["reason"]) for c in reflection["conflicts"]] == [([nine, ten], times)]
        assert any(nine in q and ten in q for q in reflection["questions"])
        assert times in reflection["summary"].split("Contradictions Detected")[1].split("##")[0]
        assert "contradictions wait for the user" in ran["next_step"] or reflection["status"] == "pending"
        for entry_id in (nine, ten):
            assert (await call(client, "get_memory", id=entry_id))["archived_at"] is None
    assert "Traceback" not in stdio_server.logs[0].read_text()
