"""The knowledge graph through the real server process over stdio: tools, recall, the graph resource,
two processes on one home, restarts and refusals (one in-memory check of predicate spelling)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

pytestmark = pytest.mark.anyio


def triple(subject: str, predicate: str, obj: str, confidence: float | None = None, **extra: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"subject": subject, "predicate": predicate, "object": obj, **extra}
    if confidence is not None:
        spec["confidence"] = confidence
    return spec


def edges(facts: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    return [(f["subject"], f["predicate"], f["object"]) for f in facts]


def files(home: Path, kind: str) -> set[str]:
    """Ids of the records stored as knowledge-graph/{kind}/{id}.json."""
    return {p.stem for p in (home / "knowledge-graph" / kind).glob("*.json")}


async def test_a_graph_built_through_tools_resolves_names_and_traverses_by_hops(stdio_server, home, call) -> None:
    async with stdio_server(home) as client:
        # Entities: created once; a name or alias in any case returns the existing entity and adds to it.
        added = await call(
            client,
            "add_entities",
            entities=[
                {"name": "Alice", "type": "person", "aliases": ["Ali"], "metadata": {"team": "core"}},
                {"name": "RockBot", "type": "project"},
            ],
        )
        alice, rockbot = (a["entity"] for a in added["entities"])
        assert [a["created"] for a in added["entities"]] == [True, True]
        assert (alice["name"], alice["type"], alice["aliases"], alice["metadata"]) == (
            "Alice",
            "person",
            ["Ali"],
            {"team": "core"},
        )
        again = await call(
            client,
            "add_entities",
            entities=[{"name": "ALI", "aliases": ["Alice Smith", "rockbot"], "metadata": {"city": "Oslo"}}],
        )
        [twin] = again["entities"]
        assert twin["created"] is False and twin["entity"]["id"] == alice["id"]
        assert twin["entity"]["name"] == "Alice" and twin["entity"]["type"] == "person"
        assert twin["entity"]["aliases"] == ["Ali", "Alice Smith"]  # 'ALI' is already an alias in another case
        assert twin["ignored_aliases"] == ["rockbot"]  # it names another entity
        assert twin["entity"]["metadata"] == {"team": "core", "city": "Oslo"}

        # Triples: predicates in snake_case, confidence clamped, unknown entities created as concepts.
        made = await call(
            client,
            "add_triples",
            triples=[
                triple("alice smith", "works on", "ROCKBOT", 0.9, source="user"),
                triple("RockBot", "dependsOn", "Python", 1.7),
                triple("Python", "Created-By", "Guido"),
                triple("Guido", "LIVES_IN", "Amsterdam", -0.5),
                triple("Ann", "knows", "Bob"),  # a cycle: Ann -> Bob -> Cid -> Ann
                triple("Bob", "knows", "Cid"),
                triple("Cid", "knows", "Ann"),
            ],
        )
        assert all(t["created"] for t in made["triples"])
        assert made["created_entities"] == ["Python", "Guido", "Amsterdam", "Ann", "Bob", "Cid"]
        assert edges([t["fact"] for t in made["triples"]]) == [
            ("Alice", "works_on", "RockBot"),
            ("RockBot", "depends_on", "Python"),
            ("Python", "created_by", "Guido"),
            ("Guido", "lives_in", "Amsterdam"),
            ("Ann", "knows", "Bob"),
            ("Bob", "knows", "Cid"),
            ("Cid", "knows", "Ann"),
        ]
        assert [t["fact"]["confidence"] for t in made["triples"]][:4] == [0.9, 1.0, 1.0, 0.0]
        works_on = made["triples"][0]["fact"]
        assert (works_on["subject_id"], works_on["object_id"], works_on["source"]) == (
            alice["id"],
            rockbot["id"],
            "user",
        )
        assert (await call(client, "get_entity", name_or_id="python"))["entity"]["type"] == "concept"

        # The same fact again (by alias, in another case, another spelling of the predicate) is folded:
        # one triple, the higher confidence; within one call too.
        folded = await call(
            client,
            "add_triples",
            triples=[triple("ali", "WorksOn", "rockbot", 0.95), triple("ALICE", "works-on", "RockBot", 0.3)],
        )
        assert [t["created"] for t in folded["triples"]] == [False, False]
        assert {t["fact"]["id"] for t in folded["triples"]} == {works_on["id"]}
        assert [t["fact"]["confidence"] for t in folded["triples"]] == [0.95, 0.95]
        assert folded["created_entities"] == []
        assert len(files(home, "triples")) == 7 and len(files(home, "entities")) == 8

        # get_entity by name, alias (any case) or id: outgoing triples first, names on both ends.
        for handle in ("Alice", "alice SMITH", "ali", alice["id"]):
            detail = await call(client, "get_entity", name_or_id=handle)
            assert detail["entity"]["id"] == alice["id"], handle
            assert edges(detail["facts"]) == [("Alice", "works_on", "RockBot")]
            assert detail["facts"][0]["confidence"] == 0.95
        python = await call(client, "get_entity", name_or_id="PYTHON")
        assert edges(python["facts"]) == [("Python", "created_by", "Guido"), ("RockBot", "depends_on", "Python")]

        # Traversal walks both directions, one hop further per max_hops, nearest first.
        chain = [
            ("Alice", "works_on", "RockBot"),
            ("RockBot", "depends_on", "Python"),
            ("Python", "created_by", "Guido"),
            ("Guido", "lives_in", "Amsterdam"),
        ]
        for hops in range(1, 6):
            walk = await call(client, "traverse_graph", start="ALI", max_hops=hops)
            assert walk["start"]["id"] == alice["id"]
            assert edges(walk["facts"]) == chain[:hops], hops
            assert [f["hop"] for f in walk["facts"]] == list(range(1, min(hops, 4) + 1))
            assert walk["entities_reached"] == min(hops, 4) + 1 and walk["truncated"] is False
        default = await call(client, "traverse_graph", start="Alice")
        assert edges(default["facts"]) == chain[:2]  # max_hops defaults to 2
        backwards = await call(client, "traverse_graph", start="amsterdam", max_hops=2)
        assert edges(backwards["facts"]) == chain[:1:-1]
        cut = await call(client, "traverse_graph", start="RockBot", limit=1)
        assert len(cut["facts"]) == 1 and cut["truncated"] is True
        sure = await call(client, "traverse_graph", start="Guido", max_hops=1, min_confidence=0.5)
        assert edges(sure["facts"]) == [("Python", "created_by", "Guido")]  # lives_in (0.0) is skipped

        # A cycle is walked once: each triple once, no entity expanded twice.
        cycle = await call(client, "traverse_graph", start="ann", max_hops=5)
        assert sorted(edges(cycle["facts"])) == [
            ("Ann", "knows", "Bob"),
            ("Bob", "knows", "Cid"),
            ("Cid", "knows", "Ann"),
        ]
        assert len({f["id"] for f in cycle["facts"]}) == 3
        assert sorted(f["hop"] for f in cycle["facts"]) == [1, 1, 2]
        assert cycle["entities_reached"] == 3 and cycle["truncated"] is False

        # find_entities: word matches, names containing the query, types, and the newest without a query.
        assert [h["entity"]["name"] for h in (await call(client, "find_entities", query="rock"))["results"]] == [
            "RockBot"
        ]
        smith = await call(client, "find_entities", query="smith")
        assert [h["entity"]["name"] for h in smith["results"]] == ["Alice"]
        assert smith["results"][0]["triples"] == 1
        people = await call(client, "find_entities", type="person")
        assert [h["entity"]["name"] for h in people["results"]] == ["Alice"] and people["total_matches"] == 1
        newest = await call(client, "find_entities", limit=3)
        assert newest["total_matches"] == 8 and len(newest["results"]) == 3
        assert all(h["score"] is None for h in newest["results"])
        assert (await call(client, "find_entities", query="nobody-like-this"))["results"] == []
        oslo = await call(client, "find_entities", query="oslo")  # metadata values are searched too
        assert [h["entity"]["name"] for h in oslo["results"]] == ["Alice"]

        # Twins within one call fold too, and names match by Unicode case folding.
        twins = await call(
            client, "add_entities", entities=[{"name": "Straße"}, {"name": "STRASSE", "aliases": ["Street"]}]
        )
        assert [a["created"] for a in twins["entities"]] == [True, False]
        assert twins["entities"][1]["entity"]["name"] == "Straße"
        assert twins["entities"][1]["entity"]["aliases"] == ["Street"]
        assert (await call(client, "get_entity", name_or_id="strasse"))["entity"]["id"] == twins["entities"][0][
            "entity"
        ]["id"]


async def test_delete_cascades_and_merge_folds_through_tools(stdio_server, home, call, call_error) -> None:
    async with stdio_server(home) as client:
        await call(
            client,
            "add_entities",
            entities=[
                {"name": "Bob", "type": "person", "metadata": {"team": "core"}},
                {"name": "Robert", "type": "person", "aliases": ["Rob"], "metadata": {"team": "infra", "city": "Oslo"}},
            ],
        )
        made = await call(
            client,
            "add_triples",
            triples=[
                triple("Bob", "knows", "Cid", 0.5),
                triple("Robert", "knows", "Cid", 0.9),  # the same fact once merged: folded, 0.9 kept
                triple("Rob", "likes", "Tea", 0.8),  # re-pointed to Bob
                triple("Bob", "manages", "Robert"),  # between the two: says nothing after the merge
                triple("Cid", "mentors", "Dee"),
            ],
        )
        bob_id = made["triples"][0]["fact"]["subject_id"]
        robert_id = made["triples"][1]["fact"]["subject_id"]

        merged = await call(client, "merge_entities", keep="bob", merge="ROB")
        assert merged["merged_id"] == robert_id
        assert (merged["triples_repointed"], merged["duplicates_folded"]) == (1, 2)
        assert merged["entity"]["id"] == bob_id and merged["entity"]["name"] == "Bob"
        assert merged["entity"]["aliases"] == ["Robert", "Rob"]
        assert merged["entity"]["metadata"] == {"team": "core", "city": "Oslo"}  # the kept value wins
        for handle in ("Robert", "rob", bob_id):
            detail = await call(client, "get_entity", name_or_id=handle)
            assert detail["entity"]["id"] == bob_id, handle
        bob = await call(client, "get_entity", name_or_id="Bob")
        assert sorted((f["subject"], f["predicate"], f["object"], f["confidence"]) for f in bob["facts"]) == [
            ("Bob", "knows", "Cid", 0.9),
            ("Bob", "likes", "Tea", 0.8),
        ]
        assert "no entity named" in await call_error(client, "get_entity", name_or_id=robert_id)
        assert robert_id not in files(home, "entities")
        assert len(files(home, "triples")) == 3

        # Deleting an entity deletes every triple touching it, on disk too; the other ends stay.
        cid = await call(client, "get_entity", name_or_id="cid")
        touching = {f["id"] for f in cid["facts"]}
        assert len(touching) == 2
        deleted = await call(client, "delete_entity", name_or_id="CID")
        assert deleted["entity"]["name"] == "Cid" and deleted["triples_deleted"] == 2
        assert not touching & files(home, "triples") and cid["entity"]["id"] not in files(home, "entities")
        assert edges((await call(client, "get_entity", name_or_id="Bob"))["facts"]) == [("Bob", "likes", "Tea")]
        assert (await call(client, "get_entity", name_or_id="Dee"))["facts"] == []
        walk = await call(client, "traverse_graph", start="Dee", max_hops=5)
        assert walk["facts"] == [] and walk["entities_reached"] == 1
        assert "no entity named 'Cid'" in await call_error(client, "delete_entity", name_or_id="Cid")

        # Deleting one triple keeps its entities; a second delete of it is refused.
        [likes] = (await call(client, "get_entity", name_or_id="tea"))["facts"]
        gone = await call(client, "delete_triple", id=likes["id"])
        assert edges([gone["fact"]]) == [("Bob", "likes", "Tea")]
        assert files(home, "triples") == set()
        assert (await call(client, "get_entity", name_or_id="Tea"))["facts"] == []
        assert (await call(client, "get_entity", name_or_id="Bob"))["facts"] == []
        assert "no triple with id" in await call_error(client, "delete_triple", id=likes["id"])


async def test_two_processes_share_one_graph_and_a_restart_keeps_it(stdio_server, home, call, call_error) -> None:
    async with stdio_server(home) as a, stdio_server(home) as b:
        # B starts before A writes anything: B reads an empty graph, then sees A's writes on its next call.
        assert (await call(b, "find_entities"))["total_matches"] == 0
        await call(a, "add_entities", entities=[{"name": "Alice", "type": "person", "aliases": ["Ali"]}])
        await call(
            a,
            "add_triples",
            triples=[triple("Ali", "works on", "RockBot", 0.9), triple("RockBot", "depends on", "Python")],
        )
        walk = await call(b, "traverse_graph", start="alice")
        assert edges(walk["facts"]) == [("Alice", "works_on", "RockBot"), ("RockBot", "depends_on", "Python")]
        assert (await call(b, "get_entity", name_or_id="ALI"))["entity"]["type"] == "person"
        recalled = await call(b, "recall", message="What is Alice busy with?")
        assert "- Alice --works_on--> RockBot (confidence=0.90)" in recalled["text"]

        # B's writes reach A: a triple onto A's entity by alias, a merge, a delete.
        await call(
            b, "add_triples", triples=[triple("Bob", "works on", "rockbot", 0.7), triple("Robert", "knows", "Ali")]
        )
        assert {e for e in edges((await call(a, "get_entity", name_or_id="RockBot"))["facts"])} == {
            ("Alice", "works_on", "RockBot"),
            ("RockBot", "depends_on", "Python"),
            ("Bob", "works_on", "RockBot"),
        }
        await call(b, "merge_entities", keep="Bob", merge="Robert")
        assert (await call(a, "get_entity", name_or_id="robert"))["entity"]["name"] == "Bob"
        assert ("Bob", "knows", "Alice") in edges((await call(a, "get_entity", name_or_id="Alice"))["facts"])
        await call(a, "delete_entity", name_or_id="Python")
        assert "no entity named" in await call_error(b, "get_entity", name_or_id="python")
        assert ("RockBot", "depends_on", "Python") not in edges((await call(b, "traverse_graph", start="Bob"))["facts"])

        # Both add the same facts at once: one copy of each entity and triple, never twins.
        async def add(client: Any, n: int) -> None:
            await call(
                client, "add_triples", triples=[triple(f"Shared{n}", "links", "Hub"), triple("Hub", "has", "Spoke")]
            )

        async with anyio.create_task_group() as tg:
            for n in range(4):
                tg.start_soon(add, a, n)
                tg.start_soon(add, b, n)
        for client in (a, b):
            assert (await call(client, "find_entities", query="hub"))["total_matches"] == 1
            hub = await call(client, "get_entity", name_or_id="hub")
            assert sorted(edges(hub["facts"])) == [("Hub", "has", "Spoke")] + [
                (f"Shared{n}", "links", "Hub") for n in range(4)
            ]
        before = {name: await call(a, "get_entity", name_or_id=name) for name in ("Alice", "Bob", "RockBot", "Hub")}
        everything = await call(a, "find_entities", limit=200)
        [has] = (await call(a, "get_entity", name_or_id="Spoke"))["facts"]

    assert len(files(home, "entities")) == everything["total_matches"] == 9
    # Files are the truth: a triple file removed by hand is gone after a restart. A damaged record and a
    # stray file in the graph folders are skipped (and kept), not fatal.
    (home / "knowledge-graph" / "triples" / f"{has['id']}.json").unlink()
    before["Hub"]["facts"].remove(has)
    for hit in everything["results"]:
        if hit["entity"]["name"] in ("Hub", "Spoke"):
            hit["triples"] -= 1
    damaged = home / "knowledge-graph" / "entities" / "0123456789ab.json"
    damaged.write_text("{not json", encoding="utf-8")
    (home / "knowledge-graph" / "triples" / "not-an-id!.json").write_text("{}", encoding="utf-8")
    async with stdio_server(home) as later:
        for name, detail in before.items():
            assert await call(later, "get_entity", name_or_id=name) == detail, name
        assert (await call(later, "get_entity", name_or_id="spoke"))["facts"] == []
        assert await call(later, "find_entities", limit=200) == everything
        walk = await call(later, "traverse_graph", start="ali", max_hops=1)
        assert sorted(edges(walk["facts"])) == [("Alice", "works_on", "RockBot"), ("Bob", "knows", "Alice")]
    assert damaged.read_text(encoding="utf-8") == "{not json"
    assert "0123456789ab.json is not a valid entity" in stdio_server.logs[-1].read_text()
    for log in stdio_server.logs:
        assert "Traceback" not in log.read_text()


async def test_a_process_catching_up_on_many_changes_keeps_names_and_triples_unique(stdio_server, home, call) -> None:
    """B reads A's changes in one catch-up: a merge (kept entity re-indexed, merged one removed), a triple
    deleted and added again, an entity deleted and created again. Whatever order B applies them in, the
    merged names must resolve to the kept entity, the re-created name to the new entity, and B must not add
    a second copy of a triple that exists. Several rounds, so no lucky ordering hides a fault."""
    rounds = range(8)
    async with stdio_server(home) as a, stdio_server(home) as b:
        await call(
            a,
            "add_triples",
            triples=[
                t
                for n in rounds
                for t in (
                    triple(f"Keep{n}", "knows", f"Other{n}"),
                    triple(f"Gone{n}", "likes", f"Other{n}"),
                    triple(f"Subject{n}", "uses", f"Object{n}"),
                    triple(f"Again{n}", "links", f"Object{n}"),
                )
            ],
        )
        assert (await call(b, "find_entities"))["total_matches"] == 48  # B is in step before the changes
        again_ids = {}
        for n in rounds:
            await call(a, "merge_entities", keep=f"Keep{n}", merge=f"Gone{n}")
            [uses] = (await call(a, "get_entity", name_or_id=f"Subject{n}"))["facts"]
            await call(a, "delete_triple", id=uses["id"])
            await call(a, "add_triples", triples=[triple(f"Subject{n}", "uses", f"Object{n}")])
            await call(a, "delete_entity", name_or_id=f"Again{n}")
            again = await call(a, "add_entities", entities=[{"name": f"Again{n}", "type": "topic"}])
            again_ids[n] = again["entities"][0]["entity"]["id"]

        unresolved = [
            name
            for n in rounds
            for name in (f"Gone{n}", f"Again{n}")
            if (await b.call_tool("graph", {"action": "get", "name": name})).is_error
        ]
        assert unresolved == [], "B lost these names after catching up"
        for n in rounds:
            assert (await call(b, "get_entity", name_or_id=f"Gone{n}"))["entity"]["name"] == f"Keep{n}"
            assert (await call(b, "get_entity", name_or_id=f"Again{n}"))["entity"]["id"] == again_ids[n]
        readded = await call(b, "add_triples", triples=[triple(f"Subject{n}", "uses", f"Object{n}") for n in rounds])
        assert [t["created"] for t in readded["triples"]] == [False] * len(rounds), "B made twins of triples"
        for n in rounds:
            assert len((await call(a, "get_entity", name_or_id=f"Subject{n}"))["facts"]) == 1


async def test_recall_and_the_graph_resource_show_an_entitys_neighbourhood(stdio_server, home, call) -> None:
    async with stdio_server(home) as client:
        await call(
            client,
            "add_entities",
            entities=[
                {"name": "Alice", "type": "person", "aliases": ["Ali"], "metadata": {"team": "core"}},
                {"name": "Go", "type": "tool"},  # too short to be looked for in a message
            ],
        )
        await call(
            client,
            "add_triples",
            triples=[
                triple("Alice", "works on", "RockBot", 0.9),
                triple("RockBot", "depends on", "Python"),
                triple("Python", "created by", "Guido"),  # 3 hops from Alice
                triple("Go", "used by", "Zed"),
                *(triple("Carol", "knows", f"Friend{n:02}") for n in range(20)),
            ],
        )
        saved = await call(client, "save_memory", content="Alice prefers short standups")

        recalled = await call(client, "recall", message="What is alice doing on Monday? Ask her in Go.")
        assert recalled["entities"] == ["Alice"]
        assert edges(recalled["graph"]) == [("Alice", "works_on", "RockBot"), ("RockBot", "depends_on", "Python")]
        text = recalled["text"]
        assert "Knowledge graph (around Alice):" in text
        assert "- Alice --works_on--> RockBot (confidence=0.90)" in text
        assert "- RockBot --depends_on--> Python (confidence=1.00)" in text
        assert "Guido" not in text and "Zed" not in text
        assert f"[{saved['id']}]" in text  # memories and the graph side by side
        assert text.index(f"[{saved['id']}]") < text.index("Knowledge graph") < text.index("</recalled-memory>")

        by_alias = await call(client, "recall", message="ping ali and zed about rockbot")
        assert sorted(by_alias["entities"]) == ["Alice", "RockBot", "Zed"]
        assert "- Go --used_by--> Zed (confidence=1.00)" in by_alias["text"]
        assert "Knowledge graph (around " in by_alias["text"]

        capped = await call(client, "recall", message="carol")
        assert capped["entities"] == ["Carol"] and len(capped["graph"]) == 15
        assert capped["text"].count("- Carol --knows--> Friend") == 15

        none = await call(client, "recall", message="Alicent and Gopher are not entities")
        assert none["entities"] == [] and none["graph"] == []
        assert "Knowledge graph" not in none["text"]

        # The resource: the entity, its aliases and metadata, and the triples within 2 hops.
        templates = {t.uri_template for t in (await client.list_resource_templates()).resource_templates}
        assert "rockmem://graph/{entity}" in templates

        async def read(uri: str, mime_type: str = "text/markdown") -> str:
            [content] = (await client.read_resource(uri)).contents
            assert content.mime_type == mime_type
            return content.text

        alice = (await call(client, "get_entity", name_or_id="Alice"))["entity"]
        page = await read("rockmem://graph/Alice")
        assert page.splitlines() == [
            f"# Alice (person) [{alice['id']}]",
            "Aliases: Ali",
            "team: core",
            "",
            "Within 2 hops (2 triples):",
            "- Alice --works_on--> RockBot (confidence=0.90)",
            "- RockBot --depends_on--> Python (confidence=1.00)",
        ]
        assert await read("rockmem://graph/ALI") == page
        assert await read(f"rockmem://graph/{alice['id']}") == page
        assert "# RockBot (concept)" in await read("rockmem://graph/rockbot")
        await call(client, "add_entities", entities=[{"name": "Lonely"}])
        assert (await read("rockmem://graph/lonely")).endswith("Within 2 hops (0 triples):\n(no triples yet)")
        with pytest.raises(Exception, match="no entity named 'Nobody'"):
            await read("rockmem://graph/Nobody")
        assert "- Alice --works_on--> RockBot (confidence=0.90)" in await read("rockmem://recall/alice", "text/plain")
        # The process keeps serving after the refused read.
        assert "Alice" in await read("rockmem://graph/alice")
    assert "Traceback" not in stdio_server.logs[0].read_text()


async def test_bad_graph_calls_return_helpful_errors_and_the_server_keeps_serving(
    stdio_server, home, call, call_error
) -> None:
    async with stdio_server(home) as client:
        await call(client, "add_triples", triples=[triple("Alice", "works on", "RockBot")])
        [fact] = (await call(client, "get_entity", name_or_id="Alice"))["facts"]

        assert "entities must be a non-empty list" in await call_error(client, "add_entities", entities=[])
        assert "triples must be a non-empty list" in await call_error(client, "add_triples", triples=[])
        assert "at most 1000" in await call_error(
            client, "add_triples", triples=[triple(f"S{n}", "p", f"O{n}") for n in range(1001)]
        )
        self_loop = await call_error(client, "add_triples", triples=[triple("Alice", "likes", "ALICE")])
        assert "same entity" in self_loop and "links two entities" in self_loop
        # A refused batch writes nothing, not even the entities or triples before the bad item.
        refused = await call_error(
            client, "add_triples", triples=[triple("Newcomer", "meets", "Stranger"), triple("RockBot", "is", "rockbot")]
        )
        assert "same entity" in refused
        assert "no entity named 'Newcomer'" in await call_error(client, "get_entity", name_or_id="Newcomer")
        assert "invalid predicate" in await call_error(client, "add_triples", triples=[triple("A1", "!!!", "B1")])
        assert "invalid entity type" in await call_error(
            client, "add_entities", entities=[{"name": "Thing", "type": "Not a type!"}]
        )
        assert "invalid name" in await call_error(client, "add_entities", entities=[{"name": "   "}])
        assert "confidence" in await call_error(
            client, "add_triples", triples=[triple("A1", "p", "B1") | {"confidence": "high"}]
        )

        assert "no triple with id '0123456789ab'" in await call_error(client, "delete_triple", id="0123456789ab")
        assert "no triple with id" in await call_error(client, "delete_triple", id="../../etc/passwd")
        missing = await call_error(client, "get_entity", name_or_id="Nobody")
        assert "no entity named 'Nobody'" in missing and "graph find" in missing
        assert "no entity named" in await call_error(client, "traverse_graph", start="Nobody")
        assert "same entity" in await call_error(client, "merge_entities", keep="Alice", merge="alice")
        assert "no entity named" in await call_error(client, "merge_entities", keep="Alice", merge="Nobody")
        assert "less than or equal to 5" in await call_error(client, "traverse_graph", start="Alice", max_hops=9)
        assert "greater than or equal to 1" in await call_error(client, "traverse_graph", start="Alice", max_hops=0)
        assert "less than or equal to 200" in await call_error(client, "traverse_graph", start="Alice", limit=500)
        assert "less than or equal to 1" in await call_error(
            client, "traverse_graph", start="Alice", min_confidence=1.5
        )
        assert "less than or equal to 200" in await call_error(client, "find_entities", limit=201)

        # Nothing was changed by the refusals, and the process keeps serving.
        assert (await call(client, "find_entities"))["total_matches"] == 2
        assert (await call(client, "get_entity", name_or_id="Alice"))["facts"] == [fact]
        more = await call(client, "add_triples", triples=[triple("Alice", "likes", "Tea")])
        assert more["created_entities"] == ["Tea"]
        walk = await call(client, "traverse_graph", start="Alice", max_hops=1)
        assert sorted(edges(walk["facts"])) == [("Alice", "likes", "Tea"), ("Alice", "works_on", "RockBot")]
    assert "Traceback" not in stdio_server.logs[0].read_text()


async def test_predicates_keep_letters_outside_ascii(client, call) -> None:
    """snake_case lowercases and joins the words of a predicate; it must not drop or refuse non-ASCII letters
    (entity names keep them: 'Zoë', 'Straße' work), nor make different predicates one."""
    made = await call(
        client,
        "add_triples",
        triples=[
            triple("Alice", "arbeitet für", "RockBot"),
            triple("Alice", "arbeitet fär", "RockBot"),
            triple("Alice", "Créé par", "Bob"),
        ],
    )
    assert [t["fact"]["predicate"] for t in made["triples"]] == ["arbeitet_für", "arbeitet_fär", "créé_par"]
    assert [t["created"] for t in made["triples"]] == [True, True, True]
    known = await call(client, "add_triples", triples=[triple("Alice", "знает", "Bob"), triple("Bob", "知道", "Alice")])
    assert [t["fact"]["predicate"] for t in known["triples"]] == ["знает", "知道"]


async def test_get_entity_shows_uses_counted_by_added_triples_and_reads(stdio_server, home, call) -> None:
    async with stdio_server(home, ROCKMEM_REINFORCE_INTERVAL_S="0") as client:  # every use counts
        await call(client, "add_triples", triples=[triple("Alice", "works_on", "RockBot")])
        await call(client, "add_triples", triples=[triple("Alice", "knows", "Bob")])  # links Alice again
        detail = await call(client, "get_entity", name_or_id="Alice")  # a use too
        assert detail["entity"]["reinforcement_count"] == 3 and detail["entity"]["last_seen_at"]
        assert detail["tier"] == "active" and 0 < detail["salience"] <= 1
        assert {f["reinforcement_count"] for f in detail["facts"]} == {1}
    record = (home / "knowledge-graph" / "entities" / f"{detail['entity']['id']}.json").read_text()
    assert '"reinforcement_count": 1' in record  # the uses are in the access log, not the entity file
