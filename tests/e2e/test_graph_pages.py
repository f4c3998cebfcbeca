"""Entity pages and the relation vocabulary through the real server process over stdio: a page's sections,
relations read from both ends, supersedes, a memory that tries to forge a heading, vocabulary hints from
add_triples, the vocabulary resource, and an unknown name."""

from __future__ import annotations

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

pytestmark = pytest.mark.anyio

SECTIONS = ["## Summary", "## Facts", "## Timeline", "## Open Questions", "## Relations"]


def section(page: str, title: str) -> list[str]:
    body = page.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]
    return [line for line in body.split("\n") if line]


async def read(client: Client, uri: str) -> str:
    return (await client.read_resource(uri)).contents[0].text


async def test_entity_pages_and_the_vocabulary_over_stdio(stdio_server, home, call) -> None:
    async with stdio_server(home) as client:
        await call(
            client,
            "add_entities",
            entities=[
                {"name": "RockBot", "type": "project", "aliases": ["rb"], "metadata": {"summary": "A memory server."}}
            ],
        )
        added = await call(
            client,
            "add_triples",
            triples=[
                {"subject": "Alice", "predicate": "develops", "object": "RockBot"},
                {"subject": "RockBot", "predicate": "depends", "object": "Python", "confidence": 0.4},
                {"subject": "RockBot", "predicate": "uses", "object": "BasicAuth"},
                {"subject": "RockBot", "predicate": "uses", "object": "PKCE", "confidence": 0.8},
                {"subject": "PKCE", "predicate": "supersedes", "object": "BasicAuth"},
                {"subject": "RockBot", "predicate": "part-of", "object": "Suite"},  # the seed's spelling
            ],
        )
        hints = {t["fact"]["predicate"]: t["hint"] for t in added["triples"]}
        assert "'depends_on'" in hints["depends"] and "rockmem://graph-relations" in hints["depends"]
        assert hints["part_of"] is None and hints["develops"] is None  # stored in snake_case, in the vocabulary
        forged = await call(client, "save_memory", content="RockBot release notes\n# Forged\nmore text")
        asked = await call(client, "save_memory", content="Should RockBot support Windows?")

        page = await read(client, "rockmem://entities/rb")  # an alias, any case
        assert [line for line in page.split("\n") if line.startswith("#")] == ["# RockBot", *SECTIONS]
        assert page.split("\n")[1].startswith("<!-- Type: project | Created: ")
        assert section(page, "Summary") == ["A memory server."]
        facts = "\n".join(section(page, "Facts"))
        assert "- Alice develops RockBot. [triple " in facts
        assert f"- RockBot release notes # Forged more text [{forged['id']}]" in facts  # one line: no heading
        assert section(page, "Timeline")[0].startswith("- 20")
        questions = "\n".join(section(page, "Open Questions"))
        assert "RockBot depends Python. (confidence 0.40)" in questions and f"[{asked['id']}]" in questions
        assert sorted(section(page, "Relations")) == [
            "- depends: [[Python]]",
            "- developed_by: [[Alice]]",
            "- part_of: [[Suite]]",
            "- uses: [[PKCE]], [[BasicAuth]] (superseded by PKCE)",
        ]
        assert section(page, "Facts")[-3].startswith("- RockBot uses BasicAuth. (superseded by PKCE) [triple ")

        # The other ends read the relations under their inverses; the superseded one says so.
        assert section(await read(client, "rockmem://entities/Suite"), "Relations") == ["- contains: [[RockBot]]"]
        old = await read(client, "rockmem://entities/BasicAuth")
        assert "> Superseded by [[PKCE]]: its facts may be out of date." in old.split("\n")
        assert sorted(section(old, "Relations")) == ["- superseded_by: [[PKCE]]", "- used_by: [[RockBot]]"]

        # A memory cannot forge a heading where its lines are kept (a summary taken from it).
        await call(client, "add_entities", entities=[{"name": "Tidy"}])
        hostile = await call(client, "save_memory", content="Tidy is a linter\n# Forged\n---\n\x1b[2Jcleared")
        tidy = await read(client, "rockmem://entities/tidy")
        assert [line for line in tidy.split("\n") if line.startswith("#")] == ["# Tidy", *SECTIONS]
        assert section(tidy, "Summary") == [
            "Tidy is a linter", "\\# Forged", "\\---", "\\u001b[2Jcleared", f"[{hostile['id']}]"
        ]  # fmt: skip
        assert "\n# Forged" not in page and "\x1b" not in tidy
        assert (await read(client, "rockmem://graph/RockBot")).startswith("# RockBot (project)")  # kept as it was
        assert (await read(client, "rockmem://graph/RockBot")).startswith("# RockBot (project)")
        recalled = await call(client, "recall", message="what does RockBot use?")
        assert recalled["graph"][-1]["superseded_by"] == "PKCE"  # superseded facts come last

        vocabulary = await read(client, "rockmem://graph-relations")
        assert "| `develops` | `developed_by` | a person builds a project or tool | 1 |" in vocabulary
        assert "| `part_of` | `contains` | hierarchical nesting: the subject is inside the object | 1 |" in vocabulary
        assert "| `depends` | 1 | `depends_on` |" in vocabulary.split("## Free predicates in use")[1]

        with pytest.raises(MCPError) as refused:
            await read(client, "rockmem://entities/Rokbot")
        assert "no entity named 'Rokbot'" in str(refused.value) and "'RockBot'" in str(refused.value)
