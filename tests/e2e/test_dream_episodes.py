"""The dream's episodes pass over a real stdio process, agent-driven: the dream tool returns the episodes
since the last pass (not those save_memory logged), apply_dream turns a plan into memories naming their
source episodes, graph triples and a procedure with its history; refused links are reported; the pass's
mark moves past what was read (not on a dry run), and the episode log is left as it was."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

pytestmark = pytest.mark.anyio

ON = {"ROCKMEM_TOOLSETS": "default,episodes"}


async def read(client: Client, uri: str) -> str:
    return (await client.read_resource(uri)).contents[0].text


def ids_in(material: str) -> list[str]:
    return [line.split("[", 1)[1].split("]", 1)[0] for line in material.splitlines() if "[" in line]


async def material(client: Client, call: Any) -> dict[str, Any]:
    result = await call(client, "dream", dream_pass="episodes", mode="agent")
    assert result["mode"] == "agent" and result["report"] is None
    assert "dream_pass='episodes'" in result["next_step"]
    return result["material"]


async def test_the_episodes_pass_end_to_end(stdio_server, home: Path, call) -> None:
    today = datetime.now(UTC).date().isoformat()
    async with stdio_server(home, **ON) as client:
        first = await call(
            client, "record_episode", content="Deployed Falcon: ran the tests, then make ship", type="task",
            tags=["deploy"],
        )  # fmt: skip
        second = await call(
            client, "record_episode", content="Deployed Falcon again: tests, staging, then make ship. Alice leads "
            "Falcon now.", type="task", confidence="high",
        )  # fmt: skip
        saved = await call(client, "save_memory", content="The staging database runs PostgreSQL 15")
        log_before = await read(client, f"rockmem://episodes/{today}")

        shown = await material(client, call)
        assert ids_in(shown["material"]) == [first["id"], second["id"]]  # save_memory's episode is left out
        assert saved["id"] not in shown["material"]
        lines = shown["material"].splitlines()
        assert lines[0].startswith(f"1. [{first['id']}] {today} ") and lines[0].endswith(
            " task (medium) #deploy: Deployed Falcon: ran the tests, then make ship"
        )
        assert "procedures" in shown["plan_schema"]["properties"] and "Known procedures:" in shown["directive"]

        plan = {
            "creates": [
                {
                    "content": "Falcon deploys go through staging, then make ship",
                    "category": "project-context/falcon",
                    "source_episodes": [first["id"], second["id"]],
                    "reason": "two deploys",
                },
                {"content": "The staging database runs PostgreSQL 15", "source_episodes": [second["id"]]},
            ],
            "triples": [{"subject": "Alice", "predicate": "leads", "object": "Falcon", "source": second["id"]}],
            "procedures": [
                {
                    "name": "how-to-deploy",
                    "trigger": ["deploy", "push to production"],
                    "steps": ["Run the test suite", "Deploy to staging", "make ship"],
                    "notes": ["Falcon is deployed this way"],
                    "learned_from": [first["id"], second["id"]],
                    "reason": "done twice",
                },
                {"name": "backup", "trigger": ["back up"], "steps": ["rsync"], "learned_from": ["0123456789ab"]},
            ],
        }
        dry = await call(client, "apply_dream", plan=plan, dream_pass="episodes", dry_run=True)
        assert dry["summary"] == "episodes (agent): would apply 1 create, 1 procedure, 1 triple; 2 rejected"
        assert ids_in((await material(client, call))["material"]) == [first["id"], second["id"]]  # nothing moved

        report = await call(client, "apply_dream", plan=plan, dream_pass="episodes")
        assert report["summary"] == "episodes (agent): applied 1 create, 1 procedure, 1 triple; 2 rejected"
        rejected = {a["action"]: (a["ids"], a["reason"]) for a in report["rejected"]}
        assert rejected["create"] == ([saved["id"]], "already remembered")
        assert rejected["procedure"] == (["backup"], "unknown episode ids in learned_from: 0123456789ab")
        made = await call(client, "get_memory", id=report["applied"][0]["result_id"])
        assert made["content"] == "Falcon deploys go through staging, then make ship"
        assert made["metadata"] == {"source": "dream", "source_episodes": f"{first['id']},{second['id']}"}
        traversed = await call(client, "traverse_graph", start="Alice")
        assert [f["predicate"] for f in traversed["facts"]] == ["leads"]
        procedure = await read(client, "rockmem://procedures/how-to-deploy")
        assert "## Steps\n1. Run the test suite\n2. Deploy to staging\n3. make ship\n" in procedure
        assert f"## Learned From\n- {first['id']}\n- {second['id']}\n" in procedure
        assert "- v1 (current, " in procedure and "dream: done twice" in procedure

        # Read: the next dream has nothing new, and the episodes are as they were.
        assert (await material(client, call))["material"] == "(nothing to consider)"
        assert await read(client, f"rockmem://episodes/{today}") == log_before

        third = await call(
            client, "record_episode", content="Deployed Falcon with a canary before make ship", type="task"
        )
        assert ids_in((await material(client, call))["material"]) == [third["id"]]
        refined = {
            "procedures": [
                {
                    "name": "how-to-deploy",
                    "trigger": ["deploy"],
                    "steps": ["Run the test suite", "Deploy to staging", "Deploy a canary", "make ship"],
                    "learned_from": [third["id"]],
                    "reason": "canary added",
                }
            ]
        }
        again = await call(client, "apply_dream", plan=refined, dream_pass="episodes")
        assert [a["action"] for a in again["applied"]] == ["procedure"]
        procedure = await read(client, "rockmem://procedures/how-to-deploy")
        assert "3. Deploy a canary\n" in procedure
        assert "- v2 (current, " in procedure and "dream: canary added" in procedure
        assert "- v1 (" in procedure and "dream: done twice" in procedure  # the version replaced, kept
        listed = json.loads(await read(client, "rockmem://procedures"))
        assert [(p["name"], p["version"], p["earlier_versions"]) for p in listed] == [("how-to-deploy", 2, 1)]
        assert (await material(client, call))["material"] == "(nothing to consider)"
    assert (home / "meta" / "dream-episodes.json").is_file()
