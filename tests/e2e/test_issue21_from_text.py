"""Issue 21, parts 1 and 2, tested from the issue's text and the README alone (not the implementation).

Part 1, trigger detection: every `recall` and every user `record_turn` carries the intent (remember / forget /
reflect / search, or none), the phrase and its span, by the seed's phrase lists (case-insensitive, negations and
quotes left out), replaceable per intent by `triggers.json` in the home; `ROCKMEM_TRIGGER_MODE` act / suggest / off.
Part 2, routing: `remember(content, route?)` routes through the server's model, the client's model (sampling), the
agent, or rules, and writes memory / episode / procedure / core line / graph in one all-or-nothing step.

Every test drives a real stdio server subprocess with the SDK Client, as a user of the documented behaviour would.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from mcp import Client

from tests.e2e.test_dream_sampling import ClientModel
from tests.embedding_server import EmbeddingServer
from tests.unit.consolidation.test_llm_dream import chat

pytestmark = pytest.mark.anyio

ALL_TOOLS = {"ROCKMEM_TOOLSETS": "all"}


@pytest.fixture
def llm_server() -> Iterator[EmbeddingServer]:
    scripted = EmbeddingServer()  # a real loopback HTTP server, here answering chat completions
    yield scripted
    scripted.close()


def llm_env(server: EmbeddingServer, **extra: str) -> dict[str, str]:
    return {"ROCKMEM_LLM_ENDPOINT": server.url, "ROCKMEM_LLM_MODEL": "router-1", **ALL_TOOLS, **extra}


async def read(client: Client, uri: str) -> str:
    return (await client.read_resource(uri)).contents[0].text


async def memory_contents(client: Client, call: Any, query: str | None = None, **filters: Any) -> list[str]:
    found = await call(client, "search_memory", stores=["memories"], limit=200, **filters, **_query(query))
    return [hit["entry"]["content"] for hit in found["results"]]


async def episode_contents(client: Client) -> list[str]:
    """Every episode's content, from the episode log resources (every day listed)."""
    days = json.loads(await read(client, "rockmem://episodes"))
    out: list[str] = []
    for day in days:
        page = await read(client, day["resource"])
        blocks = page.split("\n## ")[1:]
        out.extend(block.split("\n", 1)[1].strip() for block in blocks)
    return out


async def core_lines(client: Client, call: Any) -> dict[str, list[str]]:
    core = await call(client, "core_memory", action="read")
    return {block["name"]: block["lines"] for block in core["blocks"]}


async def entity_names(client: Client, call: Any) -> list[str]:
    found = await call(client, "find_entities", limit=200)
    return [hit["entity"]["name"] for hit in found["results"]]


async def assert_nothing_stored(client: Client, call: Any) -> None:
    """No memory, no episode, no entity, no procedure and an empty core: a remember left nothing behind."""
    assert await memory_contents(client, call) == []
    assert await memory_contents(client, call, include_archived=True) == []
    assert await episode_contents(client) == []
    assert await entity_names(client, call) == []
    assert json.loads(await read(client, "rockmem://procedures")) == []
    assert all(lines == [] for lines in (await core_lines(client, call)).values())


def _query(query: str | None) -> dict[str, str]:
    return {"query": query} if query is not None else {}


def bare(span: str) -> str:
    return span.strip().rstrip(".!?").strip()


# ---------------------------------------------------------------------------------------------------------------
# Part 1: trigger detection (the default mode is suggest: nothing is written)
# ---------------------------------------------------------------------------------------------------------------


async def test_recall_carries_each_intent_and_its_span(stdio_server, home, call) -> None:
    cases = [
        ("Remember that the gate code is 4417.", "remember", "the gate code is 4417"),
        ("Forget about the old staging server.", "forget", "the old staging server"),
        ("Please reflect on our deployment mishaps.", "reflect", None),
        ("What do you remember about the Falcon project?", "search", "the Falcon project"),
        ("Important: the VPN rotates its keys monthly.", "remember", "the VPN rotates its keys monthly"),
        ("Keep in mind that Bob is vegetarian.", "remember", "Bob is vegetarian"),
        ("Note that invoices are due on the 5th.", "remember", "invoices are due on the 5th"),
        ("For future reference, the wifi password is tangerine.", "remember", None),
        ("Disregard the earlier budget figures.", "forget", None),
        ("Consolidate your memories, please.", "reflect", None),
    ]
    async with stdio_server(home) as client:
        for message, intent, span in cases:
            result = await call(client, "recall", message=message, session_id="s-intents")
            trigger = result["trigger"]
            assert trigger is not None, f"no trigger found in {message!r}"
            assert trigger["intent"] == intent, (message, trigger)
            assert trigger["phrase"].lower() in message.lower()
            if span is not None:
                assert bare(trigger["span"]) == span, (message, trigger["span"])


async def test_recall_without_a_trigger_phrase_has_intent_none(stdio_server, home, call) -> None:
    async with stdio_server(home) as client:
        for message in ["What's the weather like in Oslo?", "Deploy the branch to staging.", "Thanks, that helps!"]:
            result = await call(client, "recall", message=message)
            trigger = result["trigger"]
            assert trigger is None or trigger["intent"] == "none", (message, trigger)
            assert "Trigger (" not in result["text"]


async def test_the_span_is_the_rest_of_its_sentence_only(stdio_server, home, call) -> None:
    async with stdio_server(home) as client:
        result = await call(client, "recall", message="Hi there. Remember that the gate code is 4417. Thanks a lot!")
        assert result["trigger"]["intent"] == "remember"
        assert bare(result["trigger"]["span"]) == "the gate code is 4417"
        result = await call(client, "recall", message="Important: the backup runs at 02:00 UTC")
        assert bare(result["trigger"]["span"]) == "the backup runs at 02:00 UTC"
        result = await call(client, "recall", message="don't forget to water the ficus")
        assert result["trigger"]["intent"] == "remember"
        assert bare(result["trigger"]["span"]) == "water the ficus"


async def test_a_span_with_an_abbreviation_keeps_the_whole_fact(stdio_server, home, call) -> None:
    # A user's "Dr." is not the end of what they asked to keep: storing "my dentist is Dr" loses the fact.
    async with stdio_server(home) as client:
        result = await call(client, "recall", message="Remember that my dentist is Dr. Okafor in Leeds.")
        assert result["trigger"]["intent"] == "remember"
        assert "Okafor" in result["trigger"]["span"], result["trigger"]["span"]


async def test_detection_is_case_insensitive(stdio_server, home, call) -> None:
    async with stdio_server(home) as client:
        for message, intent in [
            ("REMEMBER THAT THE GATE CODE IS 4417", "remember"),
            ("rEmEmBeR tHaT the gate code is 4417", "remember"),
            ("FORGET ABOUT the gate code", "forget"),
            ("REFLECT ON last week", "reflect"),
            ("WHAT DO YOU REMEMBER ABOUT the gate?", "search"),
        ]:
            trigger = (await call(client, "recall", message=message))["trigger"]
            assert trigger is not None and trigger["intent"] == intent, (message, trigger)
        trigger = (await call(client, "recall", message="REMEMBER THAT THE GATE CODE IS 4417"))["trigger"]
        assert bare(trigger["span"]).lower() == "the gate code is 4417"


async def test_negations_quotes_and_self_statements_are_not_triggers(stdio_server, home, call) -> None:
    async with stdio_server(home) as client:
        for message in [
            "Don't remember that, it was a joke.",
            "No need to note that.",
            'She said "remember that" twice during the call.',
            "He typed `scratch that` into the terminal.",
            "I remember that trip to Lisbon fondly.",
            "I'll remember that next time.",
        ]:
            trigger = (await call(client, "recall", message=message))["trigger"]
            assert trigger is None or trigger["intent"] == "none", (message, trigger)
        # ... but a negated forget is a remember, and the typographic apostrophe reads as a plain one
        for message in ["Don't forget about the dentist on Monday.", "Don\u2019t forget the dentist on Monday."]:
            trigger = (await call(client, "recall", message=message))["trigger"]
            assert trigger is not None and trigger["intent"] == "remember", (message, trigger)


async def test_record_turn_detects_triggers_in_user_turns_only(stdio_server, home, call) -> None:
    async with stdio_server(home) as client:
        turn = await call(client, "record_turn", role="user", content="Remember that Mia takes the 7:40 train.")
        assert turn["trigger"]["intent"] == "remember"
        assert bare(turn["trigger"]["span"]) == "Mia takes the 7:40 train"
        turn = await call(client, "record_turn", role="user", content="Scratch that.")
        assert turn["trigger"]["intent"] == "forget" and turn["trigger"]["span"] == ""
        turn = await call(client, "record_turn", role="user", content="what do you remember about Mia?")
        assert turn["trigger"]["intent"] == "search"
        for role in ["assistant", "system", "tool"]:
            turn = await call(client, "record_turn", role=role, content="Remember that Mia takes the 7:40 train.")
            assert turn["trigger"] is None, (role, turn["trigger"])
        turn = await call(client, "record_turn", role="user", content="The train was late again.")
        assert turn["trigger"] is None


async def test_suggest_mode_writes_nothing_and_says_what_to_call(stdio_server, home, call) -> None:
    async with stdio_server(home, **ALL_TOOLS) as client:
        result = await call(client, "recall", message="Remember that the boiler is serviced every March.")
        trigger = result["trigger"]
        assert trigger["intent"] == "remember"
        assert "remember" in trigger["action"] and trigger["remembered"] is None and trigger["memory_id"] is None
        assert trigger["route"] is not None and trigger["route"]["store"] in {"semantic", "episodic"}
        assert 2 <= len(trigger["route"]["tags"]) <= 5
        inside = result["text"].split("\n", 1)[1]
        assert inside.startswith("Trigger ("), result["text"]
        turn = await call(
            client, "record_turn", role="user", content="Remember that the boiler is serviced every March."
        )
        assert turn["trigger"]["remembered"] is None
        await assert_nothing_stored(client, call)


async def test_off_mode_detects_nothing(stdio_server, home, call) -> None:
    async with stdio_server(home, ROCKMEM_TRIGGER_MODE="off", **ALL_TOOLS) as client:
        result = await call(client, "recall", message="Remember that the boiler is serviced every March.")
        assert result["trigger"] is None
        assert "Trigger (" not in result["text"]
        turn = await call(client, "record_turn", role="user", content="Remember that the boiler is serviced in March.")
        assert turn["trigger"] is None
        await assert_nothing_stored(client, call)


async def test_a_home_triggers_file_replaces_an_intents_phrases(stdio_server, home, call) -> None:
    home.mkdir(parents=True)
    (home / "triggers.json").write_text(json.dumps({"remember": ["merk dir", "^notiere"], "forget": ["vergiss"]}))
    async with stdio_server(home) as client:
        trigger = (await call(client, "recall", message="Merk dir: der Schlüssel liegt unter der Matte."))["trigger"]
        assert trigger is not None and trigger["intent"] == "remember"
        assert bare(trigger["span"]) == "der Schlüssel liegt unter der Matte"
        trigger = (await call(client, "recall", message="Vergiss den alten Schlüssel."))["trigger"]
        assert trigger is not None and trigger["intent"] == "forget"
        # the seed's remember and forget phrases are replaced ...
        trigger = (await call(client, "recall", message="Remember that the gate code is 4417."))["trigger"]
        assert trigger is None or trigger["intent"] != "remember", trigger
        trigger = (await call(client, "recall", message="Forget about the gate code."))["trigger"]
        assert trigger is None or trigger["intent"] != "forget", trigger
        # ... an intent the file leaves out keeps the seed's list
        trigger = (await call(client, "recall", message="Reflect on the last sprint."))["trigger"]
        assert trigger is not None and trigger["intent"] == "reflect"
        # "^" matches only at a sentence's start
        trigger = (await call(client, "recall", message="Notiere die Nummer 0815."))["trigger"]
        assert trigger is not None and trigger["intent"] == "remember"
        trigger = (await call(client, "recall", message="Ich sagte notiere die Nummer 0815."))["trigger"]
        assert trigger is None, trigger


@pytest.mark.parametrize("content", ["{not json", '["remember that"]', '{"remember": "not a list"}'])
async def test_a_broken_triggers_file_falls_back_to_the_seeds_lists(stdio_server, home, call, content) -> None:
    home.mkdir(parents=True)
    (home / "triggers.json").write_text(content)
    async with stdio_server(home) as client:
        for message, intent in [
            ("Remember that the gate code is 4417.", "remember"),
            ("Forget about the gate code.", "forget"),
            ("Reflect on the last sprint.", "reflect"),
            ("What do you remember about the gate?", "search"),
        ]:
            trigger = (await call(client, "recall", message=message))["trigger"]
            assert trigger is not None and trigger["intent"] == intent, (content, message, trigger)
        turn = await call(client, "record_turn", role="user", content="Keep in mind the gate code is 4417.")
        assert turn["trigger"]["intent"] == "remember"


# ---------------------------------------------------------------------------------------------------------------
# Part 1: act mode
# ---------------------------------------------------------------------------------------------------------------

ACT = {"ROCKMEM_TRIGGER_MODE": "act", **ALL_TOOLS}


async def test_act_mode_remembers_the_span_and_says_where(stdio_server, home, call) -> None:
    async with stdio_server(home, **ACT) as client:
        result = await call(client, "recall", message="Remember that the staging database lives on host Quasar.")
        trigger = result["trigger"]
        assert trigger["intent"] == "remember"
        remembered = trigger["remembered"]
        assert remembered is not None and remembered["store"] == "semantic", trigger
        memory_id = remembered["memory_id"]
        assert memory_id and trigger["memory_id"] == memory_id
        assert "semantic" in trigger["action"] and memory_id in trigger["action"], trigger["action"]
        assert "semantic" in result["text"].split("\n", 2)[1]  # the Trigger line of the block says where
        found = await call(client, "search_memory", query="staging database host")
        assert [hit["entry"]["id"] for hit in found["results"]] == [memory_id]
        entry = found["results"][0]["entry"]
        assert bare(entry["content"]) == "the staging database lives on host Quasar"
        assert entry["metadata"].get("source") == "remember" and 2 <= len(entry["tags"]) <= 5
        assert any("staging database" in text for text in await episode_contents(client))


async def test_act_mode_record_turn_remembers_user_turns_only(stdio_server, home, call) -> None:
    async with stdio_server(home, **ACT) as client:
        turn = await call(client, "record_turn", role="assistant", content="Remember that I am a helpful assistant.")
        assert turn["trigger"] is None
        await assert_nothing_stored(client, call)
        turn = await call(client, "record_turn", role="user", content="Remember that the plumber charges 80 per hour.")
        remembered = turn["trigger"]["remembered"]
        assert remembered is not None and remembered["memory_id"]
        assert await memory_contents(client, call, "plumber") == ["the plumber charges 80 per hour"]
        window = await call(client, "get_conversation")
        assert [t["content"] for t in window["turns"]][-1] == "Remember that the plumber charges 80 per hour."


async def test_act_mode_forget_returns_candidates_and_changes_nothing(stdio_server, home, call) -> None:
    async with stdio_server(home, **ACT) as client:
        kept = await call(client, "save_memory", content="The old staging server is called Marmot")
        other = await call(client, "save_memory", content="Lunch is at noon on Fridays")
        result = await call(client, "recall", message="Forget about the old staging server.")
        trigger = result["trigger"]
        assert trigger["intent"] == "forget"
        assert f"memory:{kept['id']}" in trigger["candidates"] and f"memory:{other['id']}" not in trigger["candidates"]
        assert trigger["remembered"] is None
        turn = await call(client, "record_turn", role="user", content="Please forget about Marmot.")
        assert f"memory:{kept['id']}" in turn["trigger"]["candidates"]
        entry = await call(client, "get_memory", id=kept["id"])
        assert entry["archived_at"] is None and entry["content"] == "The old staging server is called Marmot"
        assert await memory_contents(client, call, "staging server Marmot") == [
            "The old staging server is called Marmot"
        ]
        assert sorted(await memory_contents(client, call)) == sorted([kept["content"], other["content"]])


async def test_act_mode_reflect_points_to_the_reflection(stdio_server, home, call) -> None:
    """Since issue 23 a reflect phrase points to the reflect tool (seed 004 §10), which proposes and applies nothing
    until the user approves; the dream stays the agent's own consolidation."""
    async with stdio_server(home, **ACT) as client:
        await call(client, "save_memory", content="The user prefers tea")
        result = await call(client, "recall", message="Reflect on what you know about my habits.")
        trigger = result["trigger"]
        assert trigger["intent"] == "reflect" and 'reflect(action="run")' in trigger["action"], trigger
        turn = await call(client, "record_turn", role="user", content="Clean up your memory please.")
        assert turn["trigger"]["intent"] == "reflect" and 'reflect(action="run")' in turn["trigger"]["action"]
        assert await memory_contents(client, call) == ["The user prefers tea"]


async def test_search_intent_includes_the_results(stdio_server, home, call) -> None:
    async with stdio_server(home, **ACT) as client:
        falcon = await call(client, "save_memory", content="The Falcon project ships on the first of June")
        await call(client, "save_memory", content="The cat is called Whiskerino")
        result = await call(client, "recall", message="What do you remember about the Falcon project?")
        trigger = result["trigger"]
        assert trigger["intent"] == "search" and trigger["candidates"] == [f"memory:{falcon['id']}"], trigger
        assert trigger["matches"][0]["text"] == "The Falcon project ships on the first of June"
        turn = await call(client, "record_turn", role="user", content="Do you remember the Falcon project?")
        assert turn["trigger"]["intent"] == "search" and f"memory:{falcon['id']}" in turn["trigger"]["candidates"]
        assert len(await memory_contents(client, call)) == 2  # a search writes nothing


async def test_recall_read_as_a_resource_never_writes_even_in_act_mode(stdio_server, home, call) -> None:
    async with stdio_server(home, **ACT) as client:
        page = await read(client, "rockmem://recall/Remember%20that%20the%20gate%20code%20is%204417")
        assert "recalled-memory" in page
        await assert_nothing_stored(client, call)


async def test_act_mode_with_the_agent_driver_returns_the_task_and_writes_nothing(stdio_server, home, call) -> None:
    async with stdio_server(home, ROCKMEM_ENCODE_DRIVER="agent", **ACT) as client:
        result = await call(client, "recall", message="Remember that the kiln fires at 1240 degrees.")
        remembered = result["trigger"]["remembered"]
        assert remembered is not None and remembered["store"] is None and remembered["task"] is not None
        assert "kiln" in remembered["task"]["text"]
        await assert_nothing_stored(client, call)


# ---------------------------------------------------------------------------------------------------------------
# Part 2: the remember tool, each driver
# ---------------------------------------------------------------------------------------------------------------

RULES = {"ROCKMEM_ENCODE_DRIVER": "rules", **ALL_TOOLS}


async def test_rules_route_each_store_without_a_model(stdio_server, home, call) -> None:
    model = ClientModel('{"store": "semantic", "summary": "should not be asked"}')
    async with stdio_server(home, sampling_callback=model, **RULES) as client:
        vault = await call(client, "remember", content="Always remember that my blood type is O negative.")
        assert vault["driver"] == "rules" and vault["store"] == "vault"
        procedure = await call(
            client,
            "remember",
            content="How to restart the router: first unplug it, then wait ten seconds, then plug it in.",
        )
        assert procedure["store"] == "procedural" and procedure["procedure"]
        core = await call(client, "remember", content="My name is Ingrid and I work at Fjordline.")
        assert core["store"] == "core" and core["core_line"]
        episodic = await call(client, "remember", content="Yesterday we decided to drop the legacy importer.")
        assert episodic["store"] == "episodic" and episodic["episode_id"] and episodic["memory_id"] is None
        semantic = await call(client, "remember", content="The office coffee machine takes oat milk.")
        assert semantic["store"] == "semantic" and semantic["memory_id"]
        for result in [vault, procedure, core, episodic, semantic]:
            assert result["driver"] == "rules" and result["note"] == "" and result["task"] is None
            assert 2 <= len(result["route"]["tags"]) <= 5, result["route"]
        assert model.requests == []  # rules never ask a model


async def test_rules_entities_come_from_capitalised_words_and_land_in_the_graph(stdio_server, home, call) -> None:
    async with stdio_server(home, **RULES) as client:
        result = await call(client, "remember", content="The billing service now runs on Kubernetes at Hetzner.")
        assert {"Kubernetes", "Hetzner"} <= set(result["entities"])
        assert {"Kubernetes", "Hetzner"} <= set(await entity_names(client, call))
        for name in ["Kubernetes", "Hetzner"]:
            entity = await call(client, "get_entity", name_or_id=name)
            assert entity["entity"]["name"] == name
        found = await call(client, "find_entities", query="Hetzner")
        assert [hit["entity"]["name"] for hit in found["results"]][:1] == ["Hetzner"]


async def test_the_servers_model_routes(stdio_server, home, call, llm_server) -> None:
    route = {
        "store": "semantic",
        "entities": [{"name": "Priya", "type": "person"}, {"name": "Atlas", "type": "project"}],
        "relations": [{"from": "Priya", "relation": "leads", "to": "Atlas"}],
        "tags": ["team", "atlas", "lead"],
        "confidence": "high",
        "core_update": False,
        "summary": "Priya leads the Atlas project",
    }
    llm_server.replies = [chat(route)]
    async with stdio_server(home, **llm_env(llm_server)) as client:
        result = await call(client, "remember", content="Priya is the lead on Atlas since the reorg.")
        assert result["driver"] == "llm" and result["store"] == "semantic" and result["note"] == ""
        assert result["route"]["summary"] == "Priya leads the Atlas project"
        body = llm_server.requests[-1][0]
        assert body["model"] == "router-1"
        assert "Priya is the lead on Atlas since the reorg." in json.dumps(body["messages"])
        # the text itself is stored, not only the summary
        found = await call(client, "search_memory", query="Priya Atlas", stores=["memories"])
        entry = found["results"][0]["entry"]
        assert entry["id"] == result["memory_id"] and entry["content"] == "Priya is the lead on Atlas since the reorg."
        assert sorted(entry["tags"]) == ["atlas", "lead", "team"] and entry["importance"] == 1.0
        priya = await call(client, "get_entity", name_or_id="Priya")
        assert priya["entity"]["type"] == "person"
        assert [(f["subject"], f["predicate"], f["object"]) for f in priya["facts"]] == [("Priya", "leads", "Atlas")]
        assert (await call(client, "get_entity", name_or_id="Atlas"))["entity"]["type"] == "project"


async def test_a_malformed_answer_from_the_servers_model_still_stores_with_a_note(
    stdio_server, home, call, llm_server
) -> None:
    llm_server.replies = [chat("Sure! I would file this under semantic memory.")]
    async with stdio_server(home, **llm_env(llm_server, ROCKMEM_LLM_RETRIES="0")) as client:
        result = await call(client, "remember", content="The garage door code is 2468.")
        assert result["note"], result
        assert result["store"] is not None and result["task"] is None
        assert await memory_contents(client, call, "garage door code") == ["The garage door code is 2468."]
        assert llm_server.requests, "the server's model was never asked"


async def test_an_answer_of_the_wrong_shape_from_the_servers_model_still_stores_with_a_note(
    stdio_server, home, call, llm_server
) -> None:
    llm_server.replies = [chat({"store": "attic", "summary": "x", "tags": "not a list"})]
    async with stdio_server(home, **llm_env(llm_server, ROCKMEM_LLM_RETRIES="0")) as client:
        result = await call(client, "remember", content="The spare key is with the neighbour Hal.")
        assert result["note"] and result["store"] in {"core", "episodic", "semantic", "procedural", "vault"}
        assert await memory_contents(client, call, "spare key neighbour") == [
            "The spare key is with the neighbour Hal."
        ]


async def test_the_clients_model_routes_through_sampling(stdio_server, home, call) -> None:
    route = {
        "store": "vault",
        "entities": [{"name": "Grandma Rose", "type": "person"}],
        "relations": [],
        "tags": ["family", "recipe"],
        "confidence": "high",
        "core_update": False,
        "summary": "Grandma Rose's lemon cake uses three lemons",
    }
    model = ClientModel(json.dumps(route))
    async with stdio_server(home, sampling_callback=model, **ALL_TOOLS) as client:
        result = await call(client, "remember", content="Grandma Rose's lemon cake takes three lemons, never two.")
        assert result["driver"] == "sampling" and result["store"] == "vault" and result["note"] == ""
        assert model.requests and "lemon cake" in model.requests[-1].messages[0].content.text
        found = await call(client, "search_memory", query="lemon cake", stores=["memories"])
        entry = found["results"][0]["entry"]
        assert entry["id"] == result["memory_id"] and entry["pinned"] is True
        assert (await call(client, "get_entity", name_or_id="Grandma Rose"))["entity"]["type"] == "person"


async def test_a_malformed_answer_from_the_clients_model_still_stores_with_a_note(stdio_server, home, call) -> None:
    model = ClientModel("I'd rather not say.")
    async with stdio_server(home, sampling_callback=model, **ALL_TOOLS) as client:
        result = await call(client, "remember", content="The recycling goes out on Thursdays.")
        assert model.requests and result["note"]
        kept = await memory_contents(client, call, "recycling") + await episode_contents(client)
        assert "The recycling goes out on Thursdays." in kept, kept


async def test_act_mode_uses_the_clients_model(stdio_server, home, call) -> None:
    route = {"store": "semantic", "tags": ["car", "service"], "confidence": "high", "summary": "Car service in May"}
    model = ClientModel(json.dumps(route))
    async with stdio_server(home, sampling_callback=model, **ACT) as client:
        result = await call(client, "recall", message="Remember that the car needs its service in May.")
        remembered = result["trigger"]["remembered"]
        assert remembered["driver"] == "sampling" and remembered["store"] == "semantic", remembered
        assert await memory_contents(client, call, "car service") == ["the car needs its service in May"]


async def test_the_agent_driver_returns_a_task_and_writes_nothing_until_it_answers(stdio_server, home, call) -> None:
    model = ClientModel('{"store": "semantic", "summary": "should not be asked"}')
    async with stdio_server(home, sampling_callback=model, ROCKMEM_ENCODE_DRIVER="agent", **ALL_TOOLS) as client:
        content = "Marta from Legal approves every vendor contract."
        result = await call(client, "remember", content=content)
        assert result["driver"] == "agent" and result["store"] is None
        task = result["task"]
        assert task is not None and task["text"] == content and task["instructions"]
        assert "store" in json.dumps(task["answer_schema"])
        assert result["memory_id"] is None and result["episode_id"] is None
        await assert_nothing_stored(client, call)
        assert model.requests == []
        route = {
            "store": "semantic",
            "entities": [{"name": "Marta", "type": "person"}, {"name": "Legal", "type": "concept"}],
            "relations": [{"from": "Marta", "relation": "part_of", "to": "Legal"}],
            "tags": ["legal", "contracts", "approvals"],
            "confidence": "high",
            "core_update": False,
            "summary": "Marta (Legal) approves vendor contracts",
        }
        done = await call(client, "remember", content=content, route=route)
        assert done["store"] == "semantic" and done["memory_id"] and done["task"] is None
        assert done["driver"] == "agent"
        assert await memory_contents(client, call, "vendor contract") == [content]
        marta = await call(client, "get_entity", name_or_id="Marta")
        assert [(f["predicate"], f["object"]) for f in marta["facts"]] == [("part_of", "Legal")]


# ---------------------------------------------------------------------------------------------------------------
# Part 2: what each store gets
# ---------------------------------------------------------------------------------------------------------------


def a_route(store: str, summary: str, **fields: Any) -> dict[str, Any]:
    return {"store": store, "summary": summary, "tags": ["alpha", "beta"], "confidence": "high", **fields}


async def test_a_core_route_appends_a_core_line_and_an_episode(stdio_server, home, call) -> None:
    async with stdio_server(home, **ALL_TOOLS) as client:
        identity = await call(
            client,
            "remember",
            content="I'm called Ingrid, I work at Fjordline.",
            route=a_route("core", "My name is Ingrid; I work at Fjordline"),
        )
        assert (
            identity["store"] == "core" and identity["core_line"] == "Identity: My name is Ingrid; I work at Fjordline"
        )
        context = await call(
            client,
            "remember",
            content="This quarter I'm focused on the billing migration.",
            route=a_route("core", "Currently working on the billing migration"),
        )
        assert context["core_line"].startswith("Active Context: ")
        lines = await core_lines(client, call)
        assert lines["Identity"] == ["My name is Ingrid; I work at Fjordline"]
        assert lines["Active Context"] == ["Currently working on the billing migration"]
        assert identity["memory_id"] is None and identity["episode_id"]
        assert len(await episode_contents(client)) == 2
        core_page = await read(client, "rockmem://core")
        assert "Ingrid" in core_page
        recall = await call(client, "recall", message="hello", session_id="fresh")
        assert "My name is Ingrid; I work at Fjordline" in recall["text"]  # core is loaded at a session's start


async def test_an_episodic_route_writes_an_episode_and_no_memory(stdio_server, home, call) -> None:
    async with stdio_server(home, **ALL_TOOLS) as client:
        content = "We shipped the onboarding redesign after the design review."
        result = await call(
            client, "remember", content=content, route=a_route("episodic", "Shipped onboarding redesign")
        )
        assert result["store"] == "episodic" and result["episode_id"] and result["memory_id"] is None
        found = await call(client, "search_memory", query="onboarding redesign", stores=["episodes"])
        assert [hit["content"] if "content" in hit else hit["episode"]["content"] for hit in found["episodes"]] == [
            content
        ], found["episodes"]
        assert await memory_contents(client, call) == []


async def test_a_semantic_route_writes_a_memory_and_its_episode(stdio_server, home, call) -> None:
    async with stdio_server(home, **ALL_TOOLS) as client:
        content = "The team's standup moved to 9:30 in room Orca."
        result = await call(client, "remember", content=content, route=a_route("semantic", "Standup at 9:30 in Orca"))
        entry = await call(client, "get_memory", id=result["memory_id"])
        assert entry["content"] == content and entry["pinned"] is False
        assert entry["metadata"].get("source") == "remember" and entry["importance"] == 1.0
        assert content in await episode_contents(client)
        found = await call(client, "search_memory", query="standup Orca", stores=["episodes"])
        assert len(found["episodes"]) == 1


async def test_confidence_sets_the_memorys_importance(stdio_server, home, call) -> None:
    async with stdio_server(home, **ALL_TOOLS) as client:
        importance = {}
        for confidence in ["high", "medium", "low"]:
            route = a_route("semantic", f"a {confidence} fact", confidence=confidence)
            result = await call(client, "remember", content=f"The {confidence} fact about parrots.", route=route)
            importance[confidence] = (await call(client, "get_memory", id=result["memory_id"]))["importance"]
        assert importance["high"] == 1.0
        assert 1.0 > importance["medium"] > importance["low"] >= 0.5, importance
        assert {importance["medium"], importance["low"]} <= {0.9, 0.7, 0.5}


async def test_a_vault_route_pins_the_memory(stdio_server, home, call, call_error) -> None:
    async with stdio_server(home, **ALL_TOOLS) as client:
        result = await call(
            client, "remember", content="My passport number ends in 7731.", route=a_route("vault", "Passport ends 7731")
        )
        entry = await call(client, "get_memory", id=result["memory_id"])
        assert entry["pinned"] is True and entry["content"] == "My passport number ends in 7731."
        error = await call_error(client, "delete_memory", id=result["memory_id"])
        assert "confirm_pinned" in error
        assert "My passport number ends in 7731." in await episode_contents(client)


async def test_a_procedural_route_saves_a_procedure_with_its_steps(stdio_server, home, call) -> None:
    async with stdio_server(home, **ALL_TOOLS) as client:
        content = "To deploy the web app: run the tests; build the image; then push it to production."
        result = await call(client, "remember", content=content, route=a_route("procedural", "Deploy the web app"))
        assert result["store"] == "procedural" and result["procedure"]
        listing = json.loads(await read(client, "rockmem://procedures"))
        assert [p["name"] for p in listing] == ["Deploy the web app"]
        page = await read(client, listing[0]["uri"])
        assert "## Steps" in page
        steps = page.split("## Steps", 1)[1].split("\n## ", 1)[0]
        lowered = steps.lower()
        assert "run the tests" in lowered and "build the image" in lowered and "push it to production" in lowered
        assert len([line for line in steps.splitlines() if line[:1].isdigit()]) >= 3, steps
        assert len(await episode_contents(client)) == 1
        # a second procedure of the same name never overwrites the first
        again = await call(
            client,
            "remember",
            content="Deploy: just press the big button.",
            route=a_route("procedural", "Deploy the web app"),
        )
        names = sorted(p["name"] for p in json.loads(await read(client, "rockmem://procedures")))
        assert names == ["Deploy the web app", "Deploy the web app (2)"], (names, again["procedure"])
        first = await read(client, listing[0]["uri"])
        assert "run the tests" in first and "big button" not in first


async def test_core_update_adds_a_core_line_beside_the_memory(stdio_server, home, call) -> None:
    async with stdio_server(home, **ALL_TOOLS) as client:
        route = a_route("semantic", "Currently working on the Atlas launch", core_update=True)
        result = await call(client, "remember", content="I'm now leading the Atlas launch.", route=route)
        assert result["memory_id"] and result["core_line"]
        lines = await core_lines(client, call)
        assert "Currently working on the Atlas launch" in lines["Identity"] + lines["Active Context"]


async def test_entities_and_relations_land_in_the_graph(stdio_server, home, call) -> None:
    async with stdio_server(home, **ALL_TOOLS) as client:
        route = a_route(
            "semantic",
            "Ada worked on the Analytical Engine",
            entities=[{"name": "Ada Lovelace", "type": "person"}, {"name": "Analytical Engine", "type": "starship"}],
            relations=[{"from": "Ada Lovelace", "relation": "works on", "to": "Analytical Engine"}],
        )
        result = await call(client, "remember", content="Ada Lovelace worked on the Analytical Engine.", route=route)
        assert sorted(result["entities"]) == ["Ada Lovelace", "Analytical Engine"] and len(result["triples"]) == 1
        ada = await call(client, "get_entity", name_or_id="ada lovelace")
        assert ada["entity"]["type"] == "person"
        fact = ada["facts"][0]
        assert (fact["subject"], fact["predicate"], fact["object"]) == ("Ada Lovelace", "works_on", "Analytical Engine")
        assert fact["source"] == result["memory_id"] and fact["id"] == result["triples"][0]
        found = await call(client, "find_entities", query="Analytical")
        assert [hit["entity"]["name"] for hit in found["results"]] == ["Analytical Engine"]
        # README: a type that is a short lowercase word is kept (as add_entities keeps it); anything else is concept
        assert found["results"][0]["entity"]["type"] == "starship", found["results"][0]["entity"]


async def test_an_episodic_route_sources_its_graph_facts_to_the_episode(stdio_server, home, call) -> None:
    async with stdio_server(home, **ALL_TOOLS) as client:
        route = a_route(
            "episodic",
            "Picked Postgres for Atlas",
            entities=[{"name": "Atlas", "type": "project"}, {"name": "Postgres", "type": "tool"}],
            relations=[{"from": "Atlas", "relation": "uses", "to": "Postgres"}],
        )
        result = await call(client, "remember", content="Today we picked Postgres for Atlas.", route=route)
        atlas = await call(client, "get_entity", name_or_id="Atlas")
        assert [(f["predicate"], f["object"], f["source"]) for f in atlas["facts"]] == [
            ("uses", "Postgres", result["episode_id"])
        ]


async def test_tags_are_cut_to_five_or_filled_to_two(stdio_server, home, call) -> None:
    async with stdio_server(home, **ALL_TOOLS) as client:
        many = a_route("semantic", "many tags", tags=["one", "two", "three", "four", "five", "six", "seven"])
        result = await call(client, "remember", content="A fact with far too many tags about gardening.", route=many)
        entry = await call(client, "get_memory", id=result["memory_id"])
        assert len(entry["tags"]) == 5 and set(entry["tags"]) <= {"one", "two", "three", "four", "five", "six", "seven"}
        few = a_route("semantic", "few tags", tags=["gardening"])
        result = await call(client, "remember", content="Tomatoes need staking in the greenhouse.", route=few)
        entry = await call(client, "get_memory", id=result["memory_id"])
        assert len(entry["tags"]) == 2 and "gardening" in entry["tags"], entry["tags"]
        none = a_route("semantic", "no tags", tags=[])
        result = await call(client, "remember", content="Basil hates cold nights in the greenhouse.", route=none)
        assert 2 <= len((await call(client, "get_memory", id=result["memory_id"]))["tags"]) <= 5


# ---------------------------------------------------------------------------------------------------------------
# Part 2: all or nothing, and bad input
# ---------------------------------------------------------------------------------------------------------------


async def test_a_core_line_over_the_cap_leaves_nothing_behind(stdio_server, home, call, call_error) -> None:
    env = {"ROCKMEM_CORE_IDENTITY_TOKENS": "5", "ROCKMEM_CORE_ACTIVE_CONTEXT_TOKENS": "5", **ALL_TOOLS}
    async with stdio_server(home, **env) as client:
        route = a_route(
            "semantic",
            "Currently working on the enormous multi-quarter migration of every billing subsystem to the new ledger",
            core_update=True,
            entities=[{"name": "Ledger", "type": "project"}, {"name": "Billing", "type": "project"}],
            relations=[{"from": "Billing", "relation": "depends_on", "to": "Ledger"}],
        )
        error = await call_error(client, "remember", content="We are migrating billing to the Ledger.", route=route)
        assert "cap" in error.lower() or "token" in error.lower(), error
        await assert_nothing_stored(client, call)
        found = await call(client, "search_memory", query="billing ledger migration", stores=["memories", "episodes"])
        assert found["results"] == [] and found["episodes"] == []
        # the server keeps serving, and a route that fits is written
        ok = await call(
            client, "remember", content="We are migrating billing to the Ledger.", route=a_route("semantic", "x")
        )
        assert ok["memory_id"]


async def test_a_core_route_over_the_cap_leaves_nothing_behind(stdio_server, home, call, call_error) -> None:
    env = {"ROCKMEM_CORE_IDENTITY_TOKENS": "5", "ROCKMEM_CORE_ACTIVE_CONTEXT_TOKENS": "5", **ALL_TOOLS}
    async with stdio_server(home, **env) as client:
        await call_error(
            client,
            "remember",
            content="My name is Bartholomew Fitzgerald-Huntington and I work at the Consolidated Widget Corporation.",
            route=a_route(
                "core",
                "My name is Bartholomew Fitzgerald-Huntington, I work at Consolidated Widget Corporation",
                entities=[{"name": "Bartholomew", "type": "person"}],
            ),
        )
        await assert_nothing_stored(client, call)


async def test_a_relation_of_an_entity_to_itself_leaves_nothing_behind(stdio_server, home, call, call_error) -> None:
    async with stdio_server(home, **ALL_TOOLS) as client:
        route = a_route(
            "vault",
            "Atlas depends on itself",
            core_update=True,
            entities=[{"name": "Atlas", "type": "project"}, {"name": "Ledger", "type": "project"}],
            relations=[
                {"from": "Atlas", "relation": "uses", "to": "Ledger"},
                {"from": "Atlas", "relation": "depends_on", "to": "atlas"},
            ],
        )
        error = await call_error(client, "remember", content="Atlas uses Ledger and depends on Atlas.", route=route)
        assert "Atlas" in error or "itself" in error or "same" in error, error
        await assert_nothing_stored(client, call)


@pytest.mark.parametrize(
    ("route", "named"),
    [
        ({"store": "attic", "summary": "x"}, "store"),
        ({"summary": "no store given"}, "store"),
        ({"store": "semantic"}, "summary"),
        ({"store": "semantic", "summary": "x", "confidence": "certain"}, "confidence"),
        ({"store": "semantic", "summary": "x", "relations": [{"from": "A"}]}, "relation"),
        ({"store": "semantic", "summary": "x", "entities": "Alice"}, "entities"),
    ],
)
async def test_a_malformed_route_is_an_error_a_model_can_act_on(
    stdio_server, home, call, call_error, route, named
) -> None:
    async with stdio_server(home, **ALL_TOOLS) as client:
        error = await call_error(client, "remember", content="Alice likes green tea.", route=route)
        assert named in error.lower(), error
        await assert_nothing_stored(client, call)
        ok = await call(client, "remember", content="Alice likes green tea.", route=a_route("semantic", "Alice: tea"))
        assert await memory_contents(client, call) == ["Alice likes green tea."] and ok["memory_id"]


async def test_empty_content_is_refused(stdio_server, home, call, call_error) -> None:
    async with stdio_server(home, **ALL_TOOLS) as client:
        error = await call_error(client, "remember", content="   ")
        assert "content" in error.lower() or "empty" in error.lower(), error
        await assert_nothing_stored(client, call)


# ---------------------------------------------------------------------------------------------------------------
# More of what the README promises around triggers and routing
# ---------------------------------------------------------------------------------------------------------------


async def test_the_phrase_that_starts_first_wins(stdio_server, home, call) -> None:
    async with stdio_server(home) as client:
        message = "Forget about the old door code and remember that the new one is 9981."
        trigger = (await call(client, "recall", message=message))["trigger"]
        assert trigger["intent"] == "forget" and trigger["phrase"].lower() == "forget about", trigger
        message = "Remember that the new door code is 9981, and forget about the old one."
        assert (await call(client, "recall", message=message))["trigger"]["intent"] == "remember"


async def test_only_a_messages_first_2000_characters_are_looked_at(stdio_server, home, call) -> None:
    async with stdio_server(home) as client:
        paste = "lorem ipsum dolor sit amet. " * 80  # 2,240 characters of pasted text
        assert (await call(client, "recall", message=paste + "Remember that the gate code is 4417."))["trigger"] is None
        trigger = (await call(client, "recall", message="Remember that the gate code is 4417. " + paste))["trigger"]
        assert trigger is not None and trigger["intent"] == "remember"


async def test_a_suggested_route_passed_back_to_remember_is_written(stdio_server, home, call) -> None:
    async with stdio_server(home, **ALL_TOOLS) as client:
        trigger = (await call(client, "recall", message="Note that the Zephyr build needs Java 21."))["trigger"]
        assert trigger["intent"] == "remember" and trigger["route"] is not None
        result = await call(client, "remember", content=trigger["span"], route=trigger["route"])
        assert result["store"] == trigger["route"]["store"]
        assert result["driver"] == "agent", result["driver"]  # a route you pass is always used
        found = await call(client, "search_memory", query="Zephyr Java", stores=["memories", "episodes"])
        texts = [hit["entry"]["content"] for hit in found["results"]] + await episode_contents(client)
        assert any("Zephyr build needs Java 21" in text for text in texts), texts


async def test_act_mode_leaves_negated_and_quoted_phrases_alone(stdio_server, home, call) -> None:
    async with stdio_server(home, **ACT) as client:
        for message in [
            "Don't remember that, it was a joke.",
            'She said "remember that the code is 1234" as a joke.',
            "I remember that the code was 1234 once.",
        ]:
            result = await call(client, "recall", message=message)
            assert result["trigger"] is None, (message, result["trigger"])
            await call(client, "record_turn", role="user", content=message)
        await assert_nothing_stored(client, call)


async def test_suggest_mode_forget_and_search_list_candidates_too(stdio_server, home, call) -> None:
    async with stdio_server(home) as client:
        memory = await call(client, "save_memory", content="The old staging server is called Marmot")
        forget = (await call(client, "recall", message="Forget about the old staging server."))["trigger"]
        assert forget["intent"] == "forget" and f"memory:{memory['id']}" in forget["candidates"]
        search = (await call(client, "recall", message="Do you remember the old staging server?"))["trigger"]
        assert search["intent"] == "search" and f"memory:{memory['id']}" in search["candidates"]
        assert (await call(client, "get_memory", id=memory["id"]))["archived_at"] is None


async def test_act_mode_uses_the_servers_model(stdio_server, home, call, llm_server) -> None:
    route = {"store": "vault", "tags": ["health", "allergy"], "confidence": "high", "summary": "Allergic to penicillin"}
    llm_server.replies = [chat(route)]
    async with stdio_server(home, **llm_env(llm_server, ROCKMEM_TRIGGER_MODE="act")) as client:
        result = await call(client, "record_turn", role="user", content="Remember that I'm allergic to penicillin.")
        remembered = result["trigger"]["remembered"]
        assert remembered["driver"] == "llm" and remembered["store"] == "vault", remembered
        entry = await call(client, "get_memory", id=remembered["memory_id"])
        assert entry["pinned"] is True and "penicillin" in entry["content"]


async def test_the_servers_model_comes_before_the_clients(stdio_server, home, call, llm_server) -> None:
    llm_server.replies = [chat({"store": "semantic", "tags": ["a", "b"], "summary": "From the server's model"})]
    model = ClientModel('{"store": "vault", "summary": "from the client"}')
    async with stdio_server(home, sampling_callback=model, **llm_env(llm_server)) as client:
        result = await call(client, "remember", content="The printer on floor 3 jams on A3 paper.")
        assert result["driver"] == "llm" and result["store"] == "semantic"
        assert model.requests == []


async def test_an_unreachable_servers_model_still_stores_what_the_user_asked(
    stdio_server, home, call, llm_server
) -> None:
    llm_server.replies = [lambda body: (500, {"error": "overloaded"})]
    async with stdio_server(home, **llm_env(llm_server, ROCKMEM_LLM_RETRIES="0")) as client:
        result = await call(client, "remember", content="The fire alarm test is every Wednesday at 11.")
        assert result["store"] is not None and result["note"], result
        kept = await memory_contents(client, call, "fire alarm") + await episode_contents(client)
        assert "The fire alarm test is every Wednesday at 11." in kept


async def test_a_procedural_route_over_the_core_cap_leaves_no_procedure(stdio_server, home, call, call_error) -> None:
    env = {"ROCKMEM_CORE_IDENTITY_TOKENS": "5", "ROCKMEM_CORE_ACTIVE_CONTEXT_TOKENS": "5", **ALL_TOOLS}
    async with stdio_server(home, **env) as client:
        route = a_route(
            "procedural",
            "Release the mobile app to both app stores after the full regression suite has passed",
            core_update=True,
            entities=[{"name": "Fastlane", "type": "tool"}],
        )
        content = "To release the app: run the regression suite; then run Fastlane; then submit for review."
        await call_error(client, "remember", content=content, route=route)
        await assert_nothing_stored(client, call)


async def test_a_vault_route_over_the_core_cap_leaves_no_pinned_memory(stdio_server, home, call, call_error) -> None:
    env = {"ROCKMEM_CORE_IDENTITY_TOKENS": "5", "ROCKMEM_CORE_ACTIVE_CONTEXT_TOKENS": "5", **ALL_TOOLS}
    async with stdio_server(home, **env) as client:
        route = a_route(
            "vault",
            "Currently working on the enormous multi-quarter migration of every billing subsystem to the new ledger",
            core_update=True,
        )
        await call_error(client, "remember", content="Never forget: the ledger migration matters most.", route=route)
        await assert_nothing_stored(client, call)
        # a pinned memory is never silently left behind, archived or not
        found = await call(client, "search_memory", query="ledger migration", include_archived=True)
        assert found["results"] == []
