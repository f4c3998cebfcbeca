"""Write-then-compact (seed 003 layer 5): flush advice and compaction by context usage, the window's overflow
compacted instead of dropped, the drivers (the server's model over real loopback HTTP, the client's model's
answer, the agent, rules), and nothing trimmed unless everything was written first."""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Iterator

import pytest

from rockmem_mcp.audit.log import AuditLog
from rockmem_mcp.audit.service import AUTO_DETECT
from rockmem_mcp.config import Settings
from rockmem_mcp.consolidation.compaction import (
    MAX_RULE_FACTS,
    SUMMARY_MAX_CHARS,
    CompactionError,
    Compactor,
    advice_for,
    rule_facts,
    rule_summary,
)
from rockmem_mcp.conversation.service import ConversationMemory
from rockmem_mcp.episodes.service import Episodes
from rockmem_mcp.errors import InvalidInputError
from rockmem_mcp.llm import ChatLLM
from rockmem_mcp.memory.service import MemoryService
from rockmem_mcp.models import ConversationTurn
from rockmem_mcp.storage import atomic
from tests.embedding_server import EmbeddingServer, Reply
from tests.unit.helpers import T0, FakeClock, Services

LOCKER = "By the way, my locker code is 4471."


class Home:
    """A compactor over real stores in a temporary home."""

    def __init__(self, settings: Settings, services: Services) -> None:
        self.settings = settings
        self.clock = FakeClock()
        self.conversation = ConversationMemory(settings, self.clock, compacted=True)
        self.memory: MemoryService = services.open(settings, clock=self.clock)
        self.episodes = Episodes(settings, self.clock)
        self.compactor = Compactor(
            self.conversation,
            self.memory,
            self.episodes,
            settings,
            llm=lambda s: ChatLLM(s, backoff_s=0.0),
            clock=self.clock,
        )

    def talk(self, turns: int, session: str = "chat", first: str = LOCKER) -> list:
        """`turns` alternating user/assistant turns (the first says `first`); the compactions that happened."""
        done = []
        for i in range(turns):
            role = "user" if i % 2 == 0 else "assistant"
            text = first if i == 0 else f"{role} turn {i} about the garden plan"
            _, compaction = self.compactor.record(session, role, text)
            if compaction is not None:
                done.append(compaction)
        return done

    def window(self, session: str = "chat") -> list[ConversationTurn]:
        return self.conversation.window(session)

    def memories(self) -> list[str]:
        return [hit.entry.content for hit in self.memory.search(None, limit=200).results]

    def logged(self) -> list[str]:
        return [episode.content for day, _ in self.episodes.days() for episode in self.episodes.on(day)]


def configured(settings: Settings, **changes: object) -> Settings:
    return settings.model_copy(update=changes)


@pytest.fixture
def home(settings: Settings, services: Services) -> Home:
    return Home(configured(settings, encode_driver="rules"), services)


def chat(content: str | dict) -> Reply:
    """A chat-completions answer whose message is `content` (a dict is sent as JSON text)."""
    text = content if isinstance(content, str) else json.dumps(content)

    def reply(body: dict) -> tuple[int, object]:
        message = {"role": "assistant", "content": text}
        return 200, {"choices": [{"index": 0, "message": message}], "usage": {"total_tokens": 50}}

    return reply


@pytest.fixture
def model_server() -> Iterator[EmbeddingServer]:
    scripted = EmbeddingServer()  # a scripted JSON-over-HTTP server; here it answers chat completions
    yield scripted
    scripted.close()


# ---------------------------------------------------------------------- thresholds
@pytest.mark.parametrize(
    ("percent", "advice"), [(0, None), (59, None), (60, "flush"), (69, "flush"), (70, "compact"), (95, "compact")]
)
def test_usage_thresholds_advise_a_flush_at_60_and_compact_at_70(home: Home, percent: int, advice: str | None) -> None:
    home.talk(9)
    _, compaction = home.compactor.record("chat", "user", "and one more thing", percent, 100)
    if advice is None:
        assert compaction is None and len(home.window()) == 10
        return
    assert compaction is not None and compaction.advice == advice and compaction.usage == percent / 100
    if advice == "flush":
        assert "save_memory" in compaction.note and compaction.compacted == 0 and len(home.window()) == 10
        assert home.memories() == [] and home.logged() == []
    else:
        assert compaction.driver == "rules" and compaction.compacted == 6
        assert [t.role for t in home.window()] == ["summary", "user", "assistant", "user", "user"]


def test_usage_is_checked() -> None:
    assert advice_for(0, 0) == (None, None)
    assert advice_for(700, 1000) == (0.7, "compact") and advice_for(599, 1000) == (0.599, None)
    with pytest.raises(InvalidInputError, match="tokens_used needs token_limit"):
        advice_for(10, 0)
    with pytest.raises(InvalidInputError, match="token_limit must be a whole number"):
        advice_for(10, -5)


# ---------------------------------------------------------------------- the window after a compaction
def test_a_compaction_leaves_the_summary_and_the_last_4_turns(home: Home) -> None:
    home.talk(12)
    before = home.window()
    compaction = home.compactor.compact("chat", "rules")
    window = home.window()
    assert window[0].role == "summary" and window[0].content == compaction.summary
    assert window[1:] == before[-4:]
    assert compaction.compacted == 8 and compaction.logged == 4  # the user turns among the 8
    assert home.logged()[:4] == [LOCKER, "user turn 2 about the garden plan", *home.logged()[2:4]]
    assert [e.at for e in home.episodes.on(T0.date())][:4] == [t.at for t in before[:8:2]]  # when they were said


def test_a_turn_recorded_while_a_compaction_ran_is_kept(home: Home) -> None:
    home.talk(10)
    old = home.window()[:6]
    late = home.conversation.record("chat", "user", "said meanwhile")
    summary = ConversationTurn(session_id="chat", role="summary", content="s", at=T0)
    assert home.conversation.replace_window("chat", summary, old[-1])
    assert home.window()[0].content == "s" and home.window()[-1] is late and len(home.window()) == 6


# ---------------------------------------------------------------------- rules
def test_rules_save_first_person_statements_with_a_detail_and_nothing_else() -> None:
    said = [
        "Hi there! My locker code is 4471. Can you help me with Python?",
        "I live in Lisbon with my sister. ok thanks",
        "My daughter's name is Ana",
        "Please write my report for Monday. What is my locker code?",
        "I think so. I am tired",
        "I prefer tea over coffee",
        "We moved here in March 2021.",
        "Let's talk about my birthday plans",
    ]
    turns = [ConversationTurn(session_id="c", role="user", content=text, at=T0) for text in said]
    turns.append(ConversationTurn(session_id="c", role="assistant", content="My name is Claude, born 2023.", at=T0))
    assert rule_facts(turns) == [
        "My locker code is 4471.",
        "I live in Lisbon with my sister.",
        "My daughter's name is Ana",
        "I prefer tea over coffee",
        "We moved here in March 2021.",
    ]
    many = [ConversationTurn(session_id="c", role="user", content=f"My code {i} is {i}", at=T0) for i in range(20)]
    assert len(rule_facts(many)) == MAX_RULE_FACTS
    assert rule_facts([*turns[:1], *turns[:1]]) == ["My locker code is 4471."]  # no repeats


def test_a_rules_compaction_saves_the_facts_as_memories_logged_as_episodes(home: Home) -> None:
    home.talk(8)
    compaction = home.compactor.compact("chat", "rules")
    assert home.memories() == [LOCKER] and len(compaction.saved) == 1
    entry = home.memory.get(compaction.saved[0])
    # The conversation-memory contract (search/conversation_metadata.py): its session and the day it was said.
    assert entry.metadata == {"source": "compaction", "session": "chat", "date": T0.date().isoformat()}
    assert entry.importance == 0.5
    saved_episodes = [e for e in home.episodes.on(T0.date()) if e.memory_id == entry.id]
    assert [e.content for e in saved_episodes] == [LOCKER]
    assert f"- user: {LOCKER}" in compaction.summary and compaction.summary.endswith(f"- fact: {LOCKER}")


def test_what_a_compaction_saves_is_logged_as_bot_auto_detect(home: Home) -> None:
    """Seed 004 §12.3: facts the server picked out of the conversation (and the turns it logged) are auto-detected;
    an agent's summary, and the facts it saves itself, stay its own."""
    audit_log = AuditLog(home.settings.meta_dir / "audit.log")
    home.talk(8)
    before = len(list(audit_log.lines()))
    compaction = home.compactor.compact("chat", "rules")
    lines = list(audit_log.lines())[before:]
    assert lines and {line.actor for line in lines} == {AUTO_DETECT}
    assert f"memory/{compaction.saved[0]}.json" in {line.file for line in lines}
    home.memory.save("The bike lock is 1234")
    assert [line.actor for line in list(audit_log.lines())[before + len(lines) :]] == ["main"]


def test_a_fact_already_in_memory_is_not_saved_again(home: Home) -> None:
    said = home.memory.save("my locker code is 4471", None, ["remembered"], {"source": "trigger"}, 1.0)
    home.memory.save("tea", None)  # a short memory inside a fact does not count as saying it
    home.compactor.record("chat", "user", "Remember that my locker code is 4471. I prefer tea over coffee.")
    home.talk(9, first="fine")
    compaction = home.compactor.compact("chat", "rules")
    assert [home.memory.get(i).content for i in compaction.saved] == ["I prefer tea over coffee."]
    assert said.id not in compaction.saved and len(home.memories()) == 3


def test_a_summary_of_summaries_stays_bounded(home: Home) -> None:
    long = "I walked along the river with my dog " * 20
    for round_ in range(30):
        for i in range(10):
            home.compactor.record("chat", "user" if i % 2 == 0 else "assistant", f"{round_}.{i} {long}")
        summary = home.compactor.compact("chat", "rules").summary
        assert summary is not None and len(summary) <= SUMMARY_MAX_CHARS
    window = home.window()
    assert [t.role for t in window].count("summary") == 1 and len(window) == 5
    assert window[0].content.splitlines()[-1].startswith("- assistant: 29.5 ")  # the newest lines are kept
    assert "29.0" in window[0].content and "0.0 " not in window[0].content  # the oldest fall out
    turn = ConversationTurn(session_id="c", role="user", content="x" * 10_000, at=T0)
    assert len(rule_summary([turn])) <= SUMMARY_MAX_CHARS


# ---------------------------------------------------------------------- the window overflowing
def test_a_full_window_is_compacted_instead_of_dropping_its_oldest_turn(home: Home) -> None:
    compactions = home.talk(50)
    assert len(compactions) == 1 and compactions[0].advice == "compact" and compactions[0].usage is None
    window = home.window()
    assert [t.role for t in window] == ["summary", "user", "assistant", "user", "assistant"]
    assert window[-1].content == "assistant turn 49 about the garden plan"
    assert home.memories() == [LOCKER] and LOCKER in home.logged()
    more = home.talk(45, first="user turn again")  # 5 + 45 = 50: full again, once
    assert len(more) == 1 and len(home.window()) == 5
    assert len(home.logged()) == 23 + 1 + 23  # every user turn compacted is logged, and the one fact


def test_without_a_compactor_the_window_still_drops_its_oldest_turn(settings: Settings) -> None:
    plain = ConversationMemory(configured(settings, conversation_window=3), FakeClock())
    for i in range(5):
        plain.record("chat", "user", f"turn {i}")
    assert [t.content for t in plain.window("chat")] == ["turn 2", "turn 3", "turn 4"]


# ---------------------------------------------------------------------- write, then compact
def test_a_failed_episode_write_leaves_the_window_untouched(home: Home) -> None:
    home.talk(10)
    before = home.window()
    home.settings.episodes_dir.parent.mkdir(parents=True, exist_ok=True)
    home.settings.episodes_dir.write_text("a file where the episode folder belongs")
    with pytest.raises(CompactionError, match="the window was not trimmed, so nothing is lost"):
        home.compactor.compact("chat", "rules")
    assert home.window() == before and home.memories() == []
    _, compaction = home.compactor.record("chat", "user", "at 75%", 75, 100)  # the reply says so too
    assert compaction is not None and compaction.compacted == 0 and "window was not trimmed" in compaction.note
    assert len(home.window()) == 11


def test_a_disk_full_while_saving_a_fact_leaves_the_window_untouched(
    home: Home, monkeypatch: pytest.MonkeyPatch
) -> None:
    home.talk(10)
    before = home.window()

    def disk_full(*_: object) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    with monkeypatch.context() as patch:
        patch.setattr(atomic.os, "fsync", disk_full)
        with pytest.raises(CompactionError, match="disk full"):
            home.compactor.compact("chat", "rules")
    assert home.window() == before and home.memories() == []
    assert home.compactor.compact("chat", "rules").saved  # space again: the retry compacts
    assert home.window()[0].role == "summary"


# ---------------------------------------------------------------------- the server's model
def test_the_servers_model_extracts_the_facts_and_writes_the_summary(
    settings: Settings, services: Services, model_server: EmbeddingServer
) -> None:
    llm = configured(settings, llm_endpoint=model_server.url, llm_model="compactor-1", llm_retries=0)
    home = Home(llm, services)
    answer = {"facts": ["The user's locker code is 4471", "The user gardens"], "summary": "Talked about gardens."}
    model_server.replies = [chat(answer)]
    home.talk(9)
    _, compaction = home.compactor.record("chat", "user", "one more", 7, 10)
    assert compaction is not None and compaction.driver == "llm" and len(compaction.saved) == 2
    assert sorted(home.memories()) == ["The user gardens", "The user's locker code is 4471"]
    assert home.window()[0].content == "Talked about gardens." and LOCKER in home.logged()
    body, _ = model_server.requests[0]
    assert body["model"] == "compactor-1" and '"facts"' in body["messages"][0]["content"]
    assert f"[1] user: {LOCKER}" in body["messages"][1]["content"]


@pytest.mark.parametrize("bad", ["not json at all", {"facts": "one"}, {"facts": [], "summary": "x" * 2001}])
def test_a_bad_answer_from_the_servers_model_falls_back_to_rules_and_says_so(
    settings: Settings, services: Services, model_server: EmbeddingServer, bad: str | dict
) -> None:
    home = Home(configured(settings, llm_endpoint=model_server.url, llm_model="m", llm_retries=0), services)
    model_server.replies = [chat(bad)]
    home.talk(10)
    compaction = home.compactor.compact("chat", home.compactor.driver())
    assert compaction.driver == "rules" and "no usable answer" in compaction.note and "rules used" in compaction.note
    assert home.memories() == [LOCKER] and home.window()[0].role == "summary"


# ---------------------------------------------------------------------- the client's model, the agent
def test_the_clients_models_answer_is_used_and_a_bad_one_falls_back_to_rules(home: Home) -> None:
    auto = Compactor(
        home.conversation, home.memory, home.episodes, configured(home.settings, encode_driver="auto"), clock=home.clock
    )
    home.talk(9)
    assert auto.will_compact("chat", 0, 0) is False and auto.will_compact("chat", 70, 100) is True
    system, user = auto.sample_prompt("chat") or ("", "")
    assert '"summary"' in system and user.startswith(f"[1] user: {LOCKER}") and "[6]" in user and "[7]" not in user
    answer = json.dumps({"facts": ["Locker code: 4471"], "summary": "Locker and garden."})
    _, compaction = auto.record("chat", "user", "x", 70, 100, sampled=answer)
    assert compaction is not None and compaction.driver == "sampling" and home.memories() == ["Locker code: 4471"]
    home.talk(9, first="My bike is red and I was born in 1990")
    _, compaction = auto.record("chat", "user", "x", 70, 100, sampled="Sure! Here you go")
    assert (
        compaction is not None
        and compaction.driver == "rules"
        and "client's model answered no valid JSON" in (compaction.note)
    )
    assert "My bike is red and I was born in 1990" in home.memories()


def test_the_agent_gets_the_task_and_its_summary_compacts_the_window(settings: Settings, services: Services) -> None:
    home = Home(configured(settings, encode_driver="agent"), services)
    home.talk(9)
    _, compaction = home.compactor.record("chat", "user", "getting long", 80, 100)
    assert compaction is not None and compaction.driver == "agent" and compaction.task is not None
    assert "save_memory" in compaction.task and 'role="summary"' in compaction.task and LOCKER in compaction.task
    assert len(home.window()) == 10 and home.logged() == []  # nothing trimmed until the agent answers
    turn, done = home.compactor.record("chat", "summary", "We planned the garden; locker code saved.")
    assert turn.role == "summary" and done is not None and done.compacted == 6 and done.logged == 3
    assert home.window()[0].content == "We planned the garden; locker code saved."
    assert len(home.window()) == 5 and LOCKER in home.logged()
    with pytest.raises(InvalidInputError, match="at most 2000 characters"):
        home.compactor.record("chat", "summary", "x" * 2001)


def test_an_agent_that_never_answers_a_full_window_gets_rules_at_twice_its_size(
    settings: Settings, services: Services
) -> None:
    home = Home(configured(settings, encode_driver="agent", conversation_window=10), services)
    compactions = home.talk(20)
    assert [c.driver for c in compactions] == ["agent", "rules"]  # told once when full, rules at 20
    assert len(home.window()) == 5 and home.memories() == [LOCKER]


# ---------------------------------------------------------------------- found by review
def test_a_fact_the_user_had_forgotten_is_not_brought_back(home: Home) -> None:
    forgotten = home.memory.save("My locker code is 4471", None, ["locker"])
    home.memory.delete(forgotten.id, reason="forgotten at the user's request")
    home.talk(10, first="My locker code is 4471.")
    home.compactor.compact("chat", "rules")
    assert home.memories() == []  # live memories: the archived one is not saved again


def test_a_fact_a_store_refuses_is_skipped_and_a_retry_logs_no_turn_twice(
    home: Home, monkeypatch: pytest.MonkeyPatch
) -> None:
    home.talk(10)
    refused = {"n": 0}
    save = home.memory.save

    def refuse_first(content: str, *rest: object, **named: object):
        if refused["n"] == 0:
            refused["n"] += 1
            raise InvalidInputError("too long")
        return save(content, *rest, **named)

    with monkeypatch.context() as patch:
        patch.setattr(home.memory, "save", refuse_first)
        answer = json.dumps({"facts": ["first fact is refused", "My bike is red"], "summary": "s"})
        compaction = home.compactor.compact("chat", "sampling", sampled=answer)
    assert compaction.saved and home.memories() == ["My bike is red"]
    assert home.logged().count(LOCKER) == 1


def test_a_retry_after_a_failed_compaction_logs_no_turn_twice(home: Home, monkeypatch: pytest.MonkeyPatch) -> None:
    home.talk(10)

    def disk_full(*_: object, **__: object) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    with monkeypatch.context() as patch:
        patch.setattr(home.memory, "save", disk_full)  # the turns are logged, then the first fact fails
        with pytest.raises(CompactionError):
            home.compactor.compact("chat", "rules")
    assert home.logged().count(LOCKER) == 1
    compaction = home.compactor.compact("chat", "rules")
    assert compaction.logged == 0 and compaction.saved  # the retry saves the facts, logs no turn again
    assert home.logged().count(LOCKER) == 2  # the turn once, and the saved fact's own line


def test_a_model_fact_over_its_size_is_refused_as_an_answer() -> None:
    from rockmem_mcp.consolidation.compaction import FACT_MAX_CHARS, CompactionAnswer

    with pytest.raises(ValueError):
        CompactionAnswer.model_validate({"facts": ["x" * (FACT_MAX_CHARS + 1)], "summary": "s"})


def test_high_usage_right_after_a_compaction_does_not_compact_again(home: Home) -> None:
    home.talk(9)
    _, first = home.compactor.record("chat", "user", "one", 75, 100)
    assert first is not None and first.compacted == 6
    _, again = home.compactor.record("chat", "user", "two", 76, 100)
    assert again is not None and again.compacted == 0 and "compacted moments ago" in again.note
    assert home.compactor.will_compact("chat", 77, 100) is False


def test_a_summary_for_a_session_with_no_turns_is_refused(home: Home) -> None:
    with pytest.raises(InvalidInputError, match="no turns to summarise"):
        home.compactor.record("nobody", "summary", "a summary of nothing")
