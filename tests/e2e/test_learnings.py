"""Learnings over a real stdio process: tool failures and corrections recorded with record_feedback are read
back as the two markdown resources, newest first, each with its context, stored text kept inert."""

from __future__ import annotations

import re

import pytest

pytestmark = pytest.mark.anyio


async def test_recorded_failures_and_corrections_are_read_as_resources(stdio_server, home, call) -> None:
    async with stdio_server(home) as client:

        async def read(uri: str) -> str:
            [content] = (await client.read_resource(uri)).contents
            assert content.mime_type == "text/markdown"
            return content.text

        listed = {str(r.uri): r.mime_type for r in (await client.list_resources()).resources}
        assert listed["rockmem://learnings/errors"] == listed["rockmem://learnings/corrections"] == "text/markdown"
        assert "No tool failures recorded yet" in await read("rockmem://learnings/errors")

        first = await call(client, "record_feedback", type="ToolFailure", content="search_files timed out after 30 s",
                           session_id="chat-1", metadata={"tool": "search_files"})  # fmt: skip
        await call(client, "record_feedback", type="SessionSummary", content="a quiet session")
        hostile = "Use grep for content search\n## Injected heading\x1b[2J"
        correction = await call(client, "record_feedback", type="Correction", content=hostile, session_id="chat-2")
        second = await call(client, "record_feedback", type="ToolFailure", content="git push rejected",
                            session_id="chat-2", metadata={"tool": "git", "exit": "1"})  # fmt: skip

        errors = await read("rockmem://learnings/errors")
        assert errors.startswith("# Learnings — tool failures\n") and "2 shown" in errors
        sections = [line for line in errors.splitlines() if line.startswith("## ")]
        assert [line.rsplit(" · ", 1)[1] for line in sections] == ["chat-2", "chat-1"]  # newest first
        assert all(re.fullmatch(r"## \d{4}-\d\d-\d\d \d\d:\d\d UTC · chat-\d", line) for line in sections)
        assert f"Context: id `{second['id']}` · `tool` = `git` · `exit` = `1`" in errors
        assert f"Context: id `{first['id']}` · `tool` = `search_files`" in errors
        assert errors.index("    git push rejected") < errors.index("    search_files timed out after 30 s")
        assert "Use grep" not in errors and "a quiet session" not in errors

        corrections = await read("rockmem://learnings/corrections")
        assert corrections.startswith("# Learnings — corrections\n") and "1 shown" in corrections
        assert f"Context: id `{correction['id']}`" in corrections
        assert "    Use grep for content search\n    ## Injected heading\\u001b[2J\n" in corrections
        headings = [line for line in corrections.splitlines() if line.startswith("#")]
        assert len(headings) == 2 and headings[1].endswith(" UTC · chat-2")  # the title and the one item
        assert "\x1b" not in corrections and "git push" not in corrections
