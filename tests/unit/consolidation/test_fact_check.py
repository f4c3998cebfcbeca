"""The facts a dream merge must keep (names, numbers, dates, negations) and when two memories contradict."""

from __future__ import annotations

import pytest

from rockmem_mcp.consolidation.fact_check import (
    contradiction,
    contradictions,
    details,
    lost_facts,
    lost_words,
    merge_loss,
)
from rockmem_mcp.search.tokenizer import STOPWORDS, tokenize


@pytest.mark.parametrize(
    ("a", "b", "word"),
    [
        ("Bob is allergic to peanuts", "Bob is not allergic to peanuts", "allerg"),
        ("The user wants emails", "The user never wants emails", "want"),
        ("Alice isn't vegetarian", "Alice is vegetarian", "vegetarian"),
        ("The user doesn’t drink coffee at night", "The user drinks coffee at night", "drink"),
        ("the user likes no sugar in tea", "the user likes sugar in tea", "sugar"),
    ],
)
def test_a_negated_twin_is_a_contradiction(a: str, b: str, word: str) -> None:
    assert contradiction(a, b) == f"one negates what the other affirms: {word}"
    assert contradiction(b, a) is not None
    assert contradictions({"x": a, "y": b, "z": "Deploys go out on Fridays"})[0][:2] == ("x", "y")


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("Bob is allergic to peanuts", "Bob is allergic to peanuts and shellfish"),
        ("Bob is not allergic to peanuts", "Bob isn't allergic to peanuts at all"),
        ("The user likes tea", "The user does not like coffee at work on Mondays"),  # not the same thing
        ("the user note number 1", "the user note number 2"),  # two notes, not a contradiction
    ],
)
def test_agreeing_or_unrelated_texts_are_no_contradiction(a: str, b: str) -> None:
    assert contradiction(a, b) is None


def test_a_merge_must_keep_every_negation_name_number_and_date() -> None:
    sources = ["Bob is not allergic to peanuts", "Bob's checkup is on Friday 2026-03-05 at 10:30"]
    kept = "Bob is not allergic to peanuts; Bob's checkup is on Friday 2026-03-05 at 10:30"
    assert lost_facts(sources, kept) == []
    assert lost_facts(sources, "Bob does not seem allergic to peanuts; checkup Friday 2026-03-05 at 10:30") == []
    assert lost_facts(sources, kept.replace("is not", "is")) == ["not allerg"]
    assert lost_facts(sources, kept.replace("Friday ", "")) == ["friday"]
    assert lost_facts(sources, kept.replace("2026-03-05", "2026-03")) == ["05"]
    # a negation moved onto another word does not keep it
    moved = "Bob is allergic to peanuts, not shellfish; Bob's checkup is on Friday 2026-03-05 at 10:30"
    assert lost_facts(sources, moved) == ["not allerg"]
    assert lost_facts(["The user never wants emails"], "The user wants emails") == ["not want"]


@pytest.mark.parametrize(
    ("affirmed", "negated", "word"),
    [
        ("Bob is allergic to peanuts", "Bob is not allergic to peanuts, his doctor confirmed", "allerg"),
        ("The user prefers dark mode", "The user does not prefer dark mode at all", "prefer"),
    ],
)
def test_a_padded_negation_is_a_contradiction_and_no_merge_into_it_keeps_the_fact(
    affirmed: str, negated: str, word: str
) -> None:
    """Extra words lower the Jaccard below SAME_SUBJECT; the shorter text is still all in the longer one."""
    assert contradiction(affirmed, negated) == f"one negates what the other affirms: {word}"
    assert contradiction(negated, affirmed) is not None
    assert lost_facts([affirmed, negated], negated) == [f"{word} now negated"]
    assert lost_facts([affirmed], negated) == [f"{word} now negated"]
    assert lost_facts([negated, affirmed], affirmed) == [f"not {word}"]


def test_a_merge_may_negate_a_word_it_also_affirms() -> None:
    sources = ["The user uses vim", "The user does not use emacs"]
    assert lost_facts(sources, "The user uses vim and does not use emacs") == []
    assert lost_facts(["Bob likes tea"], "Bob likes tea, not coffee") == []
    assert lost_facts(["Bob likes tea"], "Bob does not like tea") == ["like now negated"]


def test_lower_case_date_words_are_details_but_may_and_march_are_not() -> None:
    assert {"friday", "june"} <= details("standup moves to friday, the review to june")
    assert details("we may march on") == set()


def test_a_long_text_is_checked_in_linear_time() -> None:
    """Thousands of distinct numbers in 100 KB: every one kept, found with word sets (this took seconds
    when each detail was searched for in the merged text)."""
    text = " ".join(f"Ticket {n} closed by Alice{n % 97}." for n in range(6000))
    assert len(text) > 100_000 and len(details(text)) > 6000
    assert lost_facts([text, text + " Bob agreed."], text + " Bob agreed.") == []
    assert lost_facts([text], text.replace("Ticket 5999 ", "Ticket ")) == ["5999"]
    words = " ".join(f"word{chr(97 + n % 26)}{chr(97 + n // 26 % 26)}{chr(97 + n // 676 % 26)}" for n in range(15000))
    assert merge_loss({"a": words}, words) is None and len(lost_words({"a": words}, "nothing")["a"]) > 14000


def test_a_number_with_its_unit_written_on_is_a_fact() -> None:
    """Issue 45: "standup at 9am" and "standup at 10am" merged into the 10am one passed the check."""
    assert {"9am", "10:30pm", "5kg"} <= details("standup at 9am, review at 10:30pm, a 5kg parcel")
    assert lost_facts(["The standup is at 9am", "The standup is at 10am"], "The standup is at 10am") == ["9am"]
    assert "s3" in details("backups go to S3") and "3" not in details("backups go to S3")


def test_a_time_written_with_or_without_a_space_is_one_fact() -> None:
    assert lost_facts(["Standup is at 10am", "Standup is at 10 am"], "Standup is at 10 am") == []


# ---------------------------------------------------------------------------------------------- issue 45: words


def test_a_merge_that_drops_a_sources_words_is_refused_naming_the_source_and_the_words() -> None:
    sources = {"m-peanuts": "Bob is allergic to peanuts", "m-hiking": "Bob likes hiking"}
    assert lost_words(sources, "Bob likes hiking") == {"m-peanuts": ["allergic", "peanuts"]}
    why = merge_loss(sources, "Bob likes hiking")
    assert why is not None and why.startswith('the merged text drops words of m-peanuts ("Bob is allergic to peanuts")')
    assert "allergic, peanuts" in why and "m-hiking" not in why and "leave that memory out" in why
    assert merge_loss(sources, "Bob is allergic to peanuts and likes hiking") is None


@pytest.mark.parametrize(
    ("sources", "merged"),
    [
        (["Bob is allergic to peanuts", "Bob likes hiking"], "Bob, allergic to peanut, enjoys hiking"),  # inflection
        (["The user likes dark mode", "User prefers dark mode in editors"], "The user prefers dark mode in editors"),
        (["Alice uses vim", "Alice wants vim keybindings"], "Alice prefers vim and vim keybindings"),
        (["Deploys run on a peanut-free schedule"], "Deploys run on a peanut-free schedule, says Ops"),
        (["Bob is allergic to peanuts"], "Bob has a severe peanut allergy"),  # allerg begins allergi
        (["Bob has a peanut allergy"], "Bob is allergic to peanuts"),
    ],
)
def test_inflections_and_how_a_fact_is_held_may_be_reworded(sources: list[str], merged: str) -> None:
    """The documented allowances: stems compare ("peanut" keeps "peanuts"), so do stems one of which begins the
    other (SAME_ROOT letters or more); REWORDABLE words may change."""
    assert merge_loss({str(i): text for i, text in enumerate(sources)}, merged) is None


@pytest.mark.parametrize(
    "sources",
    [
        ["Bob is allergic to peanuts", "Bob likes hiking in the Alps"],
        ["The staging database runs PostgreSQL 15 on port 5432", "Staging backups are encrypted nightly"],
        ["Carol never drinks coffee after lunch", "Carol's team meets in the blue room"],
        ["The invoice tool exports CSV files weekly", "Invoices are approved by the finance lead"],
    ],
)
def test_every_content_word_of_every_source_counts_not_one_example(sources: list[str]) -> None:
    """Not tuned to "allergic to peanuts": the sources joined keep everything; taking out any one content word
    of the joined text (each in turn) is refused, and the refusal names that word."""
    named = {str(i): text for i, text in enumerate(sources)}
    joined = "; ".join(sources)
    assert merge_loss(named, joined) is None
    for word in {w.strip(".,;") for w in joined.split()}:
        if word.casefold() in STOPWORDS or word in ("never", "Bob", "Carol's", "Alps") or not word[0].isalpha():
            continue  # stopwords carry nothing; names and negations are lost_facts' (tested above)
        if word.casefold() in ("likes", "uses", "wants", "prefers"):
            continue  # REWORDABLE
        dropped = " ".join(w for w in joined.split() if w.strip(".,;") != word)
        if set(tokenize(word)) <= set(tokenize(dropped)):
            continue  # still said by another word of the same stem ("Invoices" keeps "invoice")
        why = merge_loss(named, dropped)
        assert why is not None and word.casefold() in why.casefold(), (word, dropped)


def test_a_short_stem_inside_a_longer_word_is_not_the_same_word() -> None:
    assert lost_words({"a": "Bob drives a car"}, "Bob drives a card") == {"a": ["car"]}


def test_the_words_a_detail_already_names_are_not_named_twice() -> None:
    why = merge_loss({"a": "Bob's checkup is on Friday", "b": "Bob is fine"}, "The checkup is on Friday; all fine")
    assert why == "the merged text drops details of its sources: bob"


# ---------------------------------------------------------------------------------------------- issue 45: values


@pytest.mark.parametrize(
    ("a", "b", "reason"),
    [
        ("The standup is at 9am", "The standup is at 10 am", "they give different times: 9am / 10am"),
        ("The team standup is at 9am every weekday", "Team standup at 10:30", "they give different times: 9am / 10:30"),
        (
            "Project deadline is March 15",
            "Project deadline is March 30",
            "they give different dates: March 15 / March 30",
        ),
        (
            "Bob's checkup is on 2026-03-05",
            "Bob's checkup is on 2026-03-12",
            "they give different dates: 2026-03-05 / 2026-03-12",
        ),
        ("Bob weighs 80kg", "Bob weighs 82kg", "they give different amounts in kg: 80kg / 82kg"),
        ("Alice sits on the 3rd floor", "Alice sits on the 4th floor", "they give different ordinals: 3rd / 4th"),
    ],
)
def test_the_same_thing_with_another_time_date_or_amount_is_a_contradiction(a: str, b: str, reason: str) -> None:
    assert contradiction(a, b) == reason
    assert contradiction(b, a) is not None


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("The standup is at 9am", "The standup is at 9:00"),  # one time, written two ways
        ("Standup at 9am, retro at 3pm", "Standup at 9am"),  # one says more
        ("The flight lands at 9am", "The flight departs at 10am"),  # not the same thing
        ("Ticket 5 was closed by Alice", "Ticket 6 was closed by Alice"),  # bare integers: two tickets
    ],
)
def test_one_value_written_twice_more_detail_or_another_subject_is_no_contradiction(a: str, b: str) -> None:
    assert contradiction(a, b) is None
