"""The facts a dream merge must keep (names, numbers, dates, negations) and when two memories contradict."""

from __future__ import annotations

import pytest

from rockmem_mcp.consolidation.fact_check import contradiction, contradictions, details, lost_facts


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


def test_a_number_with_its_unit_written_on_is_a_fact() -> None:
    """Issue 45: "standup at 9am" and "standup at 10am" merged into the 10am one passed the check."""
    assert {"9am", "10:30pm", "5kg"} <= details("standup at 9am, review at 10:30pm, a 5kg parcel")
    assert lost_facts(["The standup is at 9am", "The standup is at 10am"], "The standup is at 10am") == ["9am"]
    assert "s3" in details("backups go to S3") and "3" not in details("backups go to S3")


def test_a_time_written_with_or_without_a_space_is_one_fact() -> None:
    assert lost_facts(["Standup is at 10am", "Standup is at 10 am"], "Standup is at 10 am") == []
