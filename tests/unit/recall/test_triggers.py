"""Trigger detection: the seed's phrases, what is not a trigger, the span, and the home's own phrase lists."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rockmem_mcp.audit.log import AuditLog
from rockmem_mcp.audit.service import TRIGGER_REMEMBER
from rockmem_mcp.config import Settings
from rockmem_mcp.errors import InvalidInputError
from rockmem_mcp.models import Remembered
from rockmem_mcp.recall.triggers import HomeTriggers, TriggerDetector, TriggerResponder
from tests.unit.recall.test_remembering import open_home

DETECT = TriggerDetector().detect


@pytest.mark.parametrize(
    ("message", "intent", "span"),
    [
        ("Remember that I prefer green tea.", "remember", "I prefer green tea"),
        ("ok, KEEP IN MIND I'm on holiday next week", "remember", "I'm on holiday next week"),
        ("Don\u2019t forget to call mom! And buy bread.", "remember", "call mom"),
        ("Important: the API key rotates monthly", "remember", "the API key rotates monthly"),
        ("Don't forget about the dentist on Friday", "remember", "the dentist on Friday"),  # not "forget about"
        ("Please forget about the old address. Thanks!", "forget", "the old address"),
        ("Scratch that.", "forget", ""),
        ("Can you reflect on how this week went?", "reflect", "how this week went"),
        ("What do you remember about Alice?", "search", "Alice"),
        ("Do you remember that day in Rome?", "search", "day in Rome"),  # asked about, not asked for
        ("Could you save this for me: gate code 4412", "remember", "for me: gate code 4412"),
    ],
)
def test_the_seeds_phrases_name_the_intent_and_its_span(message: str, intent: str, span: str) -> None:
    found = DETECT(message)
    assert (found.intent, found.span) == (intent, span)


@pytest.mark.parametrize(
    "message",
    [
        "Don't remember that, it was a joke.",  # negated
        "No need to note that down.",
        "Never disregard a failing test.",
        'She kept saying "remember that" all evening.',  # quoted
        "The song is \u201cDon't Forget About Me\u201d.",
        "He typed `scratch that` in the chat.",
        "I remember that trip fondly.",  # said of oneself
        "We note that the tests are flaky.",
        "You remember that hotel?",
        "Reflection in Java is slow.",  # the words in other senses
        "Save the file and run it.",
        "Remembering names is hard.",
    ],
)
def test_negated_quoted_and_self_described_phrases_are_no_trigger(message: str) -> None:
    assert DETECT(message).intent == "none"


def test_a_home_file_replaces_an_intents_phrases_and_a_bad_one_falls_back(tmp_path: Path) -> None:
    home = HomeTriggers(tmp_path)
    assert home.detect("merk dir: Kaffee schwarz").intent == "none"
    (tmp_path / "triggers.json").write_text('{"remember": ["merk dir"]}')
    found = home.detect("Bitte merk dir: Kaffee schwarz")
    assert (found.intent, found.span) == ("remember", "Kaffee schwarz")
    assert home.detect("Remember that x").intent == "none"  # the file's list replaced the seed's remember list
    assert home.detect("forget about x").intent == "forget"  # intents the file leaves out keep the seed's
    (tmp_path / "triggers.json").write_text('{"rememebr": ["x"]}')  # a typo: reported, the seed's lists used
    os.utime(tmp_path / "triggers.json", ns=(1, 2))
    assert home.detect("Remember that x").intent == "remember"
    (tmp_path / "triggers.json").unlink()
    assert home.detect("Bitte merk dir: Kaffee").intent == "none"


def test_only_a_messages_opening_is_looked_at_and_many_negated_phrases_end_quickly() -> None:
    assert DETECT("x" * 1_900 + " remember that the code is 1").intent == "remember"
    assert DETECT("x" * 2_100 + " remember that the code is 1").intent == "none"  # a long paste is not a request
    assert DETECT("don't remember that " * 5_000).intent == "none"  # was quadratic: 20 s
    assert DETECT("I note that " * 8_000 + "remember that x").intent == "none"


@pytest.mark.parametrize(
    ("message", "span"),
    [
        ("Remember that my dentist is Dr. Okafor. Thanks!", "my dentist is Dr. Okafor"),
        ("Note that J. Smith owns the repo. Next question", "J. Smith owns the repo"),
        ("Keep in mind the fee is approx. 40 euros. Ok?", "the fee is approx. 40 euros"),
        ("Remember that it ends here. Then something else", "it ends here"),
    ],
)
def test_a_title_or_an_initial_does_not_end_the_span(message: str, span: str) -> None:
    assert TriggerDetector().detect(message).span == span


class _Refusing:
    """A Remembering whose every write fails (a full disk), counting the calls."""

    calls = 0
    settings = Settings()  # the main agent's (no namespace)

    def remember(self, text: str, route: object = None, sampled: object = None) -> object:
        _Refusing.calls += 1
        raise InvalidInputError("disk full while saving memory: free space and try again")


class _Counting:
    def __init__(self) -> None:
        self.calls = 0
        self.settings = Settings()

    def remember(self, text: str, route: object = None, sampled: object = None) -> Remembered:
        self.calls += 1
        return Remembered(store="semantic", driver="rules", memory_id=f"{self.calls:012x}")


def test_a_remember_that_fails_is_said_in_the_reply_not_raised(tmp_path: Path) -> None:
    responder = TriggerResponder(HomeTriggers(tmp_path), _Refusing(), "act", None)  # type: ignore[arg-type]
    found = responder.respond("Remember that the gate code is 4412.")
    assert found is not None and found.remembered is None
    assert found.action.startswith("not remembered (disk full") and "call remember" in found.action


def test_the_same_remember_twice_in_a_row_is_acted_on_once(tmp_path: Path) -> None:
    counting = _Counting()
    responder = TriggerResponder(HomeTriggers(tmp_path), counting, "act", None)  # type: ignore[arg-type]
    first = responder.respond("Remember that the gate code is 4412.")  # recall
    again = responder.respond("remember that  the gate code is 4412")  # record_turn, same message
    other = responder.respond("Remember that the bike lock is 1234.")
    assert counting.calls == 2 and first is not None and again is not None and other is not None
    assert again.memory_id == first.memory_id and again.action.startswith("already remembered")


def test_a_remember_the_trigger_acted_on_is_logged_as_bot_trigger_remember(settings: Settings) -> None:
    """Seed 004 §12.3: the user's phrase asked, not a tool call, and the trail says so; a save the agent asks for
    stays the agent's."""
    home = open_home(settings.model_copy(update={"encode_driver": "rules"}))
    try:
        audit_log = AuditLog(settings.meta_dir / "audit.log")
        before = len(list(audit_log.lines()))
        responder = TriggerResponder(HomeTriggers(settings.home), home.remembering, "act", None)  # type: ignore[arg-type]
        found = responder.respond("Remember that the gate code is 4412.")
        assert found is not None and found.memory_id
        lines = list(audit_log.lines())[before:]
        assert lines and {line.actor for line in lines} == {TRIGGER_REMEMBER}
        assert f"memory/{found.memory_id}.json" in {line.file for line in lines}
        home.memory.save("The bike lock is 1234")
        assert [line.actor for line in list(audit_log.lines())[before + len(lines) :]] == ["main"]
    finally:
        home.procedures.close()
        home.graph.close()
        home.memory.close()
