"""Trigger detection (issue 21): precision and recall per intent on labelled messages, and its cost.

    python -m benchmarks.triggers        # → benchmarks/results/triggers.json

Two labelled sets: `benchmarks/data/trigger_messages.jsonl` (234 messages another engineer wrote from the
issue's text without reading the detector: the honest measure), and the 204 below, written with it:
hand-written cases of every kind — the seed's phrases in
sentences, typographic apostrophes, negations ("don't remember that"), quotes, statements about oneself
("I remember that well"), questions, and everyday messages that name no trigger — plus the same facts said
with each of the seed's phrasings. Each is labelled with the intent a person would read in it. Timing: the
detector alone per message, and recall with and without it is issue 21's to measure once it is wired.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

from benchmarks import speed
from rockmem_mcp.recall.triggers import INTENTS, TriggerDetector

RESULTS = Path(__file__).parent / "results"

FACTS = [
    "I prefer green tea in the morning",
    "my sister's birthday is on March 3",
    "the staging server is kestrel-2",
    "we deploy on Thursdays",
    "Alice leads the billing team",
    "my flight to Lisbon leaves at 9",
    "the API key rotates every month",
    "I'm allergic to peanuts",
    "our standup moved to 10:30",
    "the budget for Q3 is 40k",
]
REMEMBER_FORMS = [
    "Remember that {f}.",
    "Please remember that {f}.",
    "Don't forget: {f}.",
    "Don\u2019t forget that {f}.",
    "Keep in mind that {f}.",
    "Note that {f}.",
    "Important: {f}.",
    "For future reference, {f}.",
    "Save this: {f}.",
    "FYI for later, {f}.",
]
FORGET_FORMS = [
    "Forget about {f}.",
    "Never mind about {f}.",
    "Please disregard what I said: {f}.",
    "That's no longer relevant: {f}.",
    "Ignore what I said about {f}.",
    "Remove from memory that {f}.",
    "Delete the memory about {f}.",
]
HAND: list[tuple[str, str]] = [
    # remember, in the flow of a message
    ("remember", "Oh and remember that the wifi password changed."),
    ("remember", "ok, keep in mind I'm on holiday next week"),
    ("remember", "IMPORTANT: never push to main on Fridays"),
    ("remember", "don't forget to book the venue"),
    ("remember", "Thanks! Also, note that the client renamed the project to Falcon."),
    ("remember", "remember: tabs, not spaces"),
    ("remember", "For future reference the invoice goes to finance@acme.test"),
    ("remember", "Could you save this for me — the gate code is 4412"),
    ("remember", "dont forget the retro is at 3"),
    ("remember", "Do not forget that I'm vegetarian."),
    # forget
    ("forget", "Scratch that, the meeting is not moving."),
    ("forget", "never mind about the hotel booking"),
    ("forget", "Disregard my earlier note on pricing."),
    ("forget", "that is no longer relevant, we cancelled it"),
    ("forget", "Please remove from your memory my old phone number"),
    ("forget", "forget that I said I liked jazz"),
    ("forget", "Delete the memories about the Berlin trip."),
    # reflect
    ("reflect", "Can you reflect on how this week went?"),
    ("reflect", "Please consolidate your memories tonight."),
    ("reflect", "Time to review your memories and tidy up."),
    ("reflect", "clean up your memory, it's getting messy"),
    ("reflect", "Reflect on our last three sprints."),
    # search
    ("search", "What do you remember about Alice?"),
    ("search", "Do you remember the name of that restaurant?"),
    ("search", "what do you know about the billing migration"),
    ("search", "Do you remember what I said about the budget?"),
    ("search", "hey, what do you remember about my travel plans"),
    # negated, quoted, said of oneself: none
    ("none", "Don't remember that, it was a joke."),
    ("none", "No need to note that down."),
    ("none", "You don't need to save this one."),
    ("none", "Never disregard a failing test."),
    ("none", 'She kept saying "remember that" all evening.'),
    ("none", "The song is called \u201cDon't Forget About Me\u201d."),
    ("none", "I remember that trip fondly."),
    ("none", "We note that the tests are flaky."),
    ("none", "I keep in mind all the deadlines myself."),
    ("none", "They forget about lunch when they code."),
    ("none", "He said `scratch that` in the chat."),
    ("none", "I never forget a face."),
    # everyday messages: none
    ("none", "How do I deploy to staging?"),
    ("none", "What's the weather like in Lisbon?"),
    ("none", "Can you refactor this function?"),
    ("none", "The build failed again."),
    ("none", "Let's schedule the review for Monday."),
    ("none", "Write a haiku about autumn."),
    ("none", "Summarise this article for me."),
    ("none", "Why is the test flaky?"),
    ("none", "Thanks, that works!"),
    ("none", "Please rename the variable to user_count."),
    ("none", "The memory usage is too high."),
    ("none", "Reflection in Java is slow."),
    ("none", "Important meeting tomorrow, can you prepare notes?"),
    ("none", "Noted, thanks."),
    ("none", "I forgot my password."),
    ("none", "Keep the tests green."),
    ("none", "Save the file and run it."),
    ("none", "We should review the memory leak."),
    ("none", "Remembering names is hard for me."),
    ("none", "Our future plans include a mobile app."),
]


def labelled() -> list[tuple[str, str]]:
    """Every labelled message: the hand-written ones, then each fact in each remember and forget phrasing, and
    each fact said plainly (none)."""
    messages = list(HAND)
    messages += [("remember", form.format(f=fact)) for form in REMEMBER_FORMS for fact in FACTS]
    messages += [("forget", form.format(f=fact)) for form in FORGET_FORMS for fact in FACTS[:5]]
    messages += [("none", f"{fact[0].upper()}{fact[1:]}.") for fact in FACTS]
    return messages


INDEPENDENT = Path(__file__).parent / "data" / "trigger_messages.jsonl"


def independent() -> list[tuple[str, str]]:
    """The labelled set another engineer wrote from the issue's text without reading the detector."""
    lines = INDEPENDENT.read_text(encoding="utf-8").splitlines()
    return [(record["label"], record["message"]) for record in map(json.loads, filter(str.strip, lines))]


def run() -> dict[str, Any]:
    return {
        "benchmark": "triggers",
        "date": time.strftime("%Y-%m-%d"),
        "written_with_the_detector": score(labelled()),
        "independent": score(independent()),
    }


def score(messages: list[tuple[str, str]]) -> dict[str, Any]:
    detector = TriggerDetector()
    found = [detector.detect(text).intent for _, text in messages]
    counts: dict[str, Counter[str]] = {intent: Counter() for intent in INTENTS}
    errors = []
    for (expected, text), got in zip(messages, found, strict=True):
        for intent in INTENTS:
            if got == intent and expected == intent:
                counts[intent]["tp"] += 1
            elif got == intent:
                counts[intent]["fp"] += 1
            elif expected == intent:
                counts[intent]["fn"] += 1
        if got != expected:
            errors.append({"message": text, "expected": expected, "got": got})
    scores = {
        intent: {
            "labelled": sum(1 for e, _ in messages if e == intent),
            "precision": round(c["tp"] / (c["tp"] + c["fp"]), 3) if c["tp"] + c["fp"] else None,
            "recall": round(c["tp"] / (c["tp"] + c["fn"]), 3) if c["tp"] + c["fn"] else None,
        }
        for intent, c in counts.items()
    }
    samples = []
    for _ in range(5):
        for _, text in messages:
            started = time.perf_counter()
            detector.detect(text)
            samples.append(time.perf_counter() - started)
    return {
        "messages": len(messages),
        "by_label": dict(Counter(label for label, _ in messages)),
        "scores": scores,
        "accuracy": round(sum(1 for (e, _), g in zip(messages, found, strict=True) if e == g) / len(messages), 3),
        "detect": speed.percentiles(samples),
        "errors": errors,
    }


def main() -> None:
    report = run()
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "triggers.json").write_text(json.dumps(report, indent=2) + "\n")
    for name in ("written_with_the_detector", "independent"):
        part = report[name]
        print(name, json.dumps({k: v for k, v in part.items() if k != "errors"}))
        for error in part["errors"]:
            print(f"  {error['expected']:>8} → {error['got']:<8} {error['message']}")


if __name__ == "__main__":
    main()
