"""What a model reads from rockmem, in tokens (issue 43): each tool of a `tools/list`, each toolset, the server's
instructions, and the text of typical replies, over the SDK's client against a server in this process.

    python -m benchmarks.model_reads [--out FILE]          # this checkout
    PYTHONPATH=../before python -m benchmarks.model_reads  # another revision's package, for a same-run A/B

Tokens are counted as the tool-list budget counts them: compact JSON (the list) or the text (a reply), characters
divided by 4. The replies, prompts and two resources are made on a fresh home with embeddings off (the text
does not depend on the model): 20 memories of typical length (~110 characters) for a 20-hit `search_memory`, then
`get_memory`, a session's first `recall` (with three core-memory lines) and a later one, and `dream` in agent
mode. Only tools every
revision since issue 39 has are called, so the same script measures the before and the after.

Writes benchmarks/results/model_reads.json (or --out).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

import anyio
from mcp import Client

from rockmem_mcp.config import Settings
from rockmem_mcp.server import toolsets
from rockmem_mcp.server.app import build_server, instructions

RESULTS = Path(__file__).parent / "results"
TYPICAL = (
    "Ada prefers green tea in the morning and black coffee after lunch; she avoids anything with oat milk.",
    "The billing service moved to PostgreSQL 15 in March; the migration runbook lives in docs/runbooks/billing.md.",
    "Deploys to staging need the VPN on and the on-call engineer told in #deploys before the pipeline starts.",
    "Lesson: the nightly export failed twice because the disk filled up; we now prune snapshots older than a week.",
)
CORE = ("The user is Ada, a data engineer in Lisbon", "Working on the billing migration", "Prefers short answers")


def _tokens(text: str) -> int:
    return round(len(text) / 4)


def _listed(tools: list[Any]) -> int:
    return toolsets.tokens(tools)


async def _replies(home: Path) -> dict[str, int]:
    settings = Settings.load({"home": home, "embedding_model": "off", "audit_git": False}, env={})
    async with Client(build_server(settings)) as client:

        async def text(tool: str, **arguments: Any) -> str:
            result = await client.call_tool(tool, arguments)
            assert not result.is_error, result.content[0].text
            return result.content[0].text

        ids = [
            json.loads(await text("save_memory", content=f"{TYPICAL[i % 4]} (note {i})", category="notes"))["id"]
            for i in range(20)
        ]
        version = json.loads(await text("core_memory"))["version"]
        for line in CORE:
            edited = await text("core_memory", action="append", block="Identity", text=line, version=version)
            version = json.loads(edited)["version"]

        async def prompt(name: str, **arguments: str) -> str:
            return "\n".join(m.content.text for m in (await client.get_prompt(name, arguments)).messages)

        async def resource(uri: str) -> str:
            return (await client.read_resource(uri)).contents[0].text

        return {
            "prompt memory-rules": _tokens(await prompt("memory-rules")),
            "prompt remember": _tokens(await prompt("remember")),
            "prompt recall (a message, a session's start)": _tokens(await prompt("recall", message="Ada's tea?")),
            "resource rockmem://recall (session start)": _tokens(await resource("rockmem://recall")),
            "resource rockmem://core": _tokens(await resource("rockmem://core")),
            "search_memory, 20 hits": _tokens(await text("search_memory", query="note", limit=20)),
            "get_memory": _tokens(await text("get_memory", id=ids[0])),
            "recall, a session's first": _tokens(await text("recall", message="what does Ada drink?", session_id="a")),
            "recall, a later turn": _tokens(await text("recall", message="and the billing runbook?", session_id="a")),
            "dream (agent mode): material and plan schema": _tokens(await text("dream", mode="agent")),
        }


async def _lists(home: Path) -> tuple[dict[str, int], dict[str, int]]:
    settings = Settings.load({"home": home, "embedding_model": "off", "toolsets": "all"}, env={})
    async with Client(build_server(settings)) as client:
        tools = (await client.list_tools()).tools
    by_name = {tool.name: tool for tool in tools}
    per_tool = {tool.name: _listed([tool]) for tool in tools}
    per_set = {name: _listed([by_name[t] for t in names]) for name, names in toolsets.TOOLSETS.items()}
    per_set["default"] = _listed([by_name[t] for t in toolsets.tools_of(toolsets.DEFAULT)])
    per_set["all"] = _listed(tools)
    return per_tool, per_set


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=RESULTS / "model_reads.json")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        per_tool, per_set = anyio.run(_lists, Path(folder, "lists"))
        replies = anyio.run(_replies, Path(folder, "replies"))
    report = {
        "tools": per_tool,
        "toolsets": per_set,
        "instructions": {
            "default": _tokens(instructions(toolsets.DEFAULT)),
            "all": _tokens(instructions(tuple(toolsets.TOOLSETS))),
        },
        "replies": replies,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
