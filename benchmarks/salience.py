"""Salience over 90 simulated days: used memories outrank equally relevant unused ones; dormant ones leave recall.

    python -m benchmarks.salience                      # the simulation, salience on and off → salience-90d.json
    python -m benchmarks.salience --speed 100k         # also search p50 on/off, alternating → salience-speed-100k.json

The simulation runs MemoryService and Recall on an injected clock (no sleeping). Day 0: 300 pairs of twins
are saved — two memories with the same sentence about a unique key word (so a question about it scores both
exactly alike under BM25: same words, same length) and each a different two-word contact code — plus 2,700
corpus facts (benchmarks/corpus.py). Every pair's "used" member (which one was saved first is random, so
ties break either way) is read every 2–5 days through one of three channels, 100 pairs each: `get` by id,
`search` for its contact code (the tool's path: reinforce=True) and `recall` of a message naming the code.
Those reads never match the twin, so 3,000 memories are never read. On days 7, 30, 60 and 90 every pair's
question is asked (a measuring search: reinforce=False) and the ranks of both twins are recorded. On day 90
the tiers of all memories are counted, and 300 never-read memories are looked for with their own full text
as the query: in a default search, in recall, and in a search with include_dormant (the control). The same
simulation runs with salience off (`ROCKMEM_SALIENCE=false`). os.fsync is counted per thread throughout:
the calling thread of search, get and recall must never fsync (reinforcement is written by the background
flusher). BM25 ranking (no embedding model), so equal relevance is exact.

`--speed SIZE` builds a corpus home of that size once (benchmarks/speed.py's build worker), then runs
speed.py's search worker alternately with salience on and off (`--rounds` each, fresh processes), then
opens the home twice in one process (on and off) and times every query on both back to back: that
interleaved ratio is the one to read on a noisy machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import speed
from benchmarks.corpus import NOUNS, TOOLS, WEEKDAYS, Corpus
from rockmem_mcp.config import Settings
from rockmem_mcp.memory.service import MemoryService
from rockmem_mcp.recall.service import Recall
from rockmem_mcp.search.memory_index import SalienceView, SearchFilter
from rockmem_mcp.search.salience import TIERS, tier
from rockmem_mcp.working.service import WorkingMemory

RESULTS = Path(__file__).parent / "results"
START = datetime(2026, 1, 5, 8, 0, tzinfo=UTC)
CHANNELS = ("get", "search", "recall")
PROBE_DAYS = (7, 30, 60, 90)
DAYS = 90
PROBE_LIMIT = 10
SPEED_MEASURES = ("search_20_results", "search_20_reinforced", "index_top10", "durable_save")  # speed.py's keys
_SYLLABLES = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]

# A pair shares its sentence (key word and all); the question asks about it. Same words, same length.
PAIR_TEMPLATES = (
    ("The {key} {noun} runbook lives in {file} and is checked by {tool} on {weekday}s.",
     "Where does the {key} {noun} runbook live?"),
    ("Budget for the {key} {noun} is {money} per month, approved on {weekday}.",
     "What is the budget for the {key} {noun}?"),
    ("The weekly {key} sync is on {weekday} at {time} about the {noun} with {tool}.",
     "When is the weekly {key} sync?"),
)  # fmt: skip


class SimClock:
    """The injected clock: the simulation sets the time; nothing sleeps."""

    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now


@dataclass
class Pair:
    key: str
    question: str
    channel: str
    used_id: str
    twin_id: str
    used_code: str  # the two words only the used member holds: how it is read
    period: int  # read every this many days
    phase: int
    used_saved_first: bool


class FsyncCounter:
    """Counts os.fsync calls per thread; `calling` is the thread whose calls must not fsync."""

    def __init__(self) -> None:
        self.by_thread: Counter[str] = Counter()
        self.in_calls = 0
        self._calling: int | None = None
        self._original = os.fsync

    def __enter__(self) -> FsyncCounter:
        original = self._original

        def counting(fd: int) -> None:
            thread = threading.current_thread()
            self.by_thread[thread.name] += 1
            if thread.ident == self._calling:
                self.in_calls += 1
            original(fd)

        os.fsync = counting  # type: ignore[assignment]
        return self

    def __exit__(self, *exc: object) -> None:
        os.fsync = self._original

    @contextmanager
    def call(self) -> Iterator[None]:
        """Inside: a read on the request path (search, get, recall)."""
        self._calling = threading.get_ident()
        try:
            yield
        finally:
            self._calling = None


def words(rng: random.Random, count: int, taken: set[str]) -> list[str]:
    made = []
    while len(made) < count:
        word = "".join(rng.choice(_SYLLABLES) for _ in range(4))
        if word not in taken:
            taken.add(word)
            made.append(word)
    return made


def make_pairs(memory: MemoryService, pairs: int, filler: int, seed: int) -> tuple[list[Pair], list[str]]:
    """Save the twins and the corpus facts (at the clock's now); returns the pairs and the filler ids."""
    rng = random.Random(seed)
    corpus = Corpus(seed=seed)
    taken = {p.lower() for p in corpus.projects}
    entries, made = [], []
    for i in range(pairs):
        key, u1, u2, t1, t2 = words(rng, 5, taken)
        template, question = PAIR_TEMPLATES[i % len(PAIR_TEMPLATES)]
        slots, noun = corpus.slots(), rng.choice(NOUNS)
        shared = template.format(
            key=key.capitalize(), noun=noun, file=slots["file"], tool=rng.choice(TOOLS),
            weekday=rng.choice(WEEKDAYS), money=slots["money"], time=slots["time"],
        )  # fmt: skip
        used = memory.prepare_entry({"content": f"{shared} Contact: {u1} {u2}.", "category": "projects"})
        twin = memory.prepare_entry({"content": f"{shared} Contact: {t1} {t2}.", "category": "projects"})
        first = rng.random() < 0.5
        entries += [used, twin] if first else [twin, used]
        made.append(
            Pair(
                key, question.format(key=key.capitalize(), noun=noun),
                CHANNELS[i % len(CHANNELS)], used.id, twin.id, f"{u1} {u2}", rng.randint(2, 5), rng.randint(0, 4),
                first,
            )
        )  # fmt: skip
    fillers = [
        memory.prepare_entry({"content": r["content"], "category": r["category"]}) for r in corpus.records(filler)
    ]
    for i in range(0, len(entries), 500):
        memory.save_many(entries[i : i + 500])
    for i in range(0, len(fillers), 500):
        memory.save_many(fillers[i : i + 500])
    return made, [e.id for e in fillers]


def ranks(memory: MemoryService, pair: Pair) -> tuple[int | None, int | None]:
    hits = [r.entry.id for r in memory.search(pair.question, limit=PROBE_LIMIT).results]
    return (
        hits.index(pair.used_id) if pair.used_id in hits else None,
        hits.index(pair.twin_id) if pair.twin_id in hits else None,
    )


def probe(memory: MemoryService, pairs: list[Pair]) -> dict[str, Any]:
    """Every pair's question, measured without reinforcing: does the used twin outrank the unused one?"""
    by_channel: dict[str, Counter[str]] = defaultdict(Counter)
    for pair in pairs:
        used, twin = ranks(memory, pair)
        for group in ("all", pair.channel):
            c = by_channel[group]
            c["pairs"] += 1
            c["used_found"] += used is not None
            c["twin_shown"] += twin is not None
            c["used_above_twin"] += used is not None and (twin is None or used < twin)
            c["used_first"] += used == 0
    return {
        group: {"pairs": c["pairs"]} | {k: round(c[k] / c["pairs"], 3) for k in c if k != "pairs"}
        for group, c in by_channel.items()
    }


def tier_counts(memory: MemoryService, ids: list[str], clock: SimClock) -> dict[str, int]:
    s = memory.settings
    view = SalienceView(clock().timestamp(), s.salience_lambda, s.salience_floor, include_dormant=True)
    slots = np.array([memory.index.bm25.slot_of[i] for i in ids], dtype=np.int64)
    values = memory.index.salience(slots, view)
    counted = Counter(tier(float(v)) for v in values)
    return {t: counted.get(t, 0) for t in TIERS}


def simulate(root: Path, salience: bool, pairs: int, filler: int, seed: int) -> dict[str, Any]:
    home = root / f"salience-home-{'on' if salience else 'off'}"
    shutil.rmtree(home, ignore_errors=True)
    clock = SimClock(START)
    settings = Settings.load({"home": home, "salience": salience, "embedding_model": "off"}, env={})
    started = time.perf_counter()
    with FsyncCounter() as fsyncs:
        memory = MemoryService(settings, clock=clock)
        recall = Recall(memory, clock=clock)
        working = WorkingMemory(settings, "session/sim", clock=clock)
        made, filler_ids = make_pairs(memory, pairs, filler, seed)
        fsyncs.by_thread.clear()  # the saves' fsyncs are not the question
        rng = random.Random(seed + 1)
        reads: Counter[str] = Counter()
        read_s: dict[str, list[float]] = defaultdict(list)
        probes: dict[int, dict[str, Any]] = {}
        for day in range(1, DAYS + 1):
            due = [p for p in made if (day - p.phase) % p.period == 0]
            moments = sorted(rng.uniform(0, 10 * 3600) for _ in due)
            rng.shuffle(due)
            for n, (pair, second) in enumerate(zip(due, moments, strict=True)):
                clock.now = START + timedelta(days=day, seconds=second)
                t = time.perf_counter()
                with fsyncs.call():
                    if pair.channel == "get":
                        memory.get(pair.used_id, reinforce=True)
                    elif pair.channel == "search":
                        found = memory.search(pair.used_code, limit=PROBE_LIMIT, reinforce=True).results
                        got = [r.entry.id for r in found]
                    else:
                        block = recall.build(f"what was {pair.used_code} about?", f"sim-{day}-{n}", working)
                        got = [m.id for m in block.memories]
                    if pair.channel != "get":  # the read reached the used twin and left the other alone
                        assert pair.used_id in got and pair.twin_id not in got, (pair, got)
                read_s[pair.channel].append(time.perf_counter() - t)
                reads[pair.channel] += 1
            if day in PROBE_DAYS:
                clock.now = START + timedelta(days=day, hours=23)
                with fsyncs.call():
                    probes[day] = probe(memory, made)
        memory.reinforcer.flush()
        never_read = [p.twin_id for p in made] + filler_ids
        tiers = {
            "used": tier_counts(memory, [p.used_id for p in made], clock),
            "twins": tier_counts(memory, [p.twin_id for p in made], clock),
            "corpus_facts": tier_counts(memory, filler_ids, clock),
        }
        looked_for = recall_of_never_read(memory, recall, working, never_read, rng, fsyncs)
        memory.close()
    shutil.rmtree(home, ignore_errors=True)
    return {
        "salience": salience,
        "reads": dict(reads),
        "read_p50_ms": {c: round(statistics.median(v) * 1e3, 3) for c, v in read_s.items()},
        "probes": {f"day_{d}": p for d, p in probes.items()},
        "tiers_day_90": tiers,
        "never_read_day_90": looked_for,
        "fsync": {
            "on_the_calling_thread_during_reads": fsyncs.in_calls,
            "by_thread": dict(fsyncs.by_thread),
        },
        "seconds": round(time.perf_counter() - started, 1),
    }


def recall_of_never_read(
    memory: MemoryService, recall: Recall, working: WorkingMemory, never_read: list[str], rng: random.Random,
    fsyncs: FsyncCounter, sample: int = 300,
) -> dict[str, Any]:  # fmt: skip
    """Never-read memories looked for by their own full text: how many still surface."""
    chosen = rng.sample(never_read, min(sample, len(never_read)))
    found = Counter()
    for n, entry_id in enumerate(chosen):
        text = memory.get(entry_id).content
        with fsyncs.call():
            default = {r.entry.id: r.tier for r in memory.search(text, limit=PROBE_LIMIT).results}
            asked = [r.entry.id for r in memory.search(text, limit=PROBE_LIMIT, include_dormant=True).results]
            block = recall.build(text, f"probe-{n}", working, delta=False)
        found["in_default_search"] += entry_id in default
        found["in_search_include_dormant"] += entry_id in asked
        found["in_recall"] += entry_id in {m.id for m in block.memories}
        found["dormant_hits_in_default_search"] += sum(t not in ("active", "fading") for t in default.values())
    return {"looked_for": len(chosen)} | dict(found)


# ------------------------------------------------------------------------------------------------ speed
def speed_ab(size: int, root: Path, queries: int, rounds: int) -> dict[str, Any]:
    """Search at `size` with salience on and off, alternating fresh worker processes on one home."""
    work = root / f"salience-speed-{speed.label(size)}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    corpus = speed.write_jsonl(work / "corpus.jsonl", size)
    built = speed.run_worker("rockmem-build", corpus, work, queries)
    runs: dict[str, list[dict[str, Any]]] = {"on": [], "off": []}
    for r in range(rounds):
        for side in ("on", "off") if r % 2 == 0 else ("off", "on"):
            print(f"[{speed.label(size)}] search, salience {side} ...", file=sys.stderr, flush=True)
            extra = ["--no-salience"] if side == "off" else []
            runs[side].append(speed.run_worker("rockmem-search", corpus, work, queries, extra))
    print(f"[{speed.label(size)}] search, salience on and off interleaved ...", file=sys.stderr, flush=True)
    same_process = interleaved(work / "rockmem-home", Corpus(seed=speed.QUERY_SEED).queries(queries))
    shutil.rmtree(work, ignore_errors=True)
    medians = {
        side: {m: round(statistics.median(run[m]["p50_ms"] for run in done), 3) for m in SPEED_MEASURES}
        for side, done in runs.items()
    }
    return {
        "benchmark": "salience-speed",
        "size": size,
        "date": time.strftime("%Y-%m-%d"),
        "machine": machine(),
        "import_s": built["import_s"],
        "rounds": rounds,
        "p50_ms_per_run": {
            side: {m: [run[m]["p50_ms"] for run in done] for m in SPEED_MEASURES} for side, done in runs.items()
        },
        "median_p50_ms": medians,
        "ratios_on_over_off": {m: round(medians["on"][m] / medians["off"][m], 3) for m in SPEED_MEASURES},
        "interleaved_one_process": same_process,
    }


def interleaved(home: Path, queries: list[str], passes: int = 2) -> dict[str, Any]:
    """Both settings open on one home in one process, each query timed on both sides back to back (the side
    that goes first alternates): the machine's drift, which moves separate runs by ×2 here, cancels out."""
    sides = {
        "on": MemoryService(speed.home_settings(home)),
        "off": MemoryService(speed.home_settings(home, salience=False)),
    }
    everything = SearchFilter()
    calls: dict[str, Callable[[MemoryService, str], object]] = {
        "search_20_results": lambda m, q: m.search(q, limit=20),
        "search_20_reinforced": lambda m, q: m.search(q, limit=20, reinforce=True),
        "index_top10": lambda m, q: m.index.search(q, everything, 10, salience=m.salience_view()),
    }
    samples: dict[str, dict[str, list[float]]] = {name: {"on": [], "off": []} for name in calls}
    for n in range(passes * len(queries)):
        query = queries[n % len(queries)]
        for name, call in calls.items():
            for side in ("on", "off") if n % 2 == 0 else ("off", "on"):
                t = time.perf_counter()
                call(sides[side], query)
                samples[name][side].append(time.perf_counter() - t)
    for memory in sides.values():
        memory.close()
    result: dict[str, Any] = {}
    for name, by_side in samples.items():
        p50 = {side: round(statistics.median(v) * 1e3, 3) for side, v in by_side.items()}
        result[name] = {"p50_ms": p50, "on_over_off": round(p50["on"] / p50["off"], 3), "n": len(by_side["on"])}
    return result


def machine() -> dict[str, Any]:
    return {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()}


def table(report: dict[str, Any]) -> str:
    lines = ["salience  day  pairs: used above twin  used first  twin shown   (get / search / recall: used above twin)"]
    for run in report["runs"]:
        for day, p in run["probes"].items():
            per = " / ".join(f"{p[c]['used_above_twin']:.2f}" for c in CHANNELS)
            a = p["all"]
            lines.append(
                f"{'on ' if run['salience'] else 'off'}       {day[4:]:>3}  {a['used_above_twin']:>22.3f}"
                f"  {a['used_first']:>9.3f}  {a['twin_shown']:>10.3f}   {per}"
            )
    for run in report["runs"]:
        side = "on " if run["salience"] else "off"
        lines.append(f"salience {side} day 90 tiers: " + "; ".join(f"{g} {t}" for g, t in run["tiers_day_90"].items()))
        lines.append(f"salience {side} never-read looked for by their text: {run['never_read_day_90']}")
        lines.append(f"salience {side} fsync: {run['fsync']}")
    return "\n".join(lines)


def run(root: Path, pairs: int = 300, filler: int = 2_700, seed: int = 18) -> dict[str, Any]:
    return {
        "benchmark": "salience-90-days",
        "date": time.strftime("%Y-%m-%d"),
        "machine": machine(),
        "pairs": pairs,
        "never_read": pairs + filler,
        "days": DAYS,
        "runs": [simulate(root, salience, pairs, filler, seed) for salience in (True, False)],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=300, help="twins; one of each pair is read repeatedly")
    parser.add_argument("--filler", type=int, default=2_700, help="corpus facts never read")
    parser.add_argument("--speed", type=speed.parse_size, help="also time search on/off at this size (e.g. 100k)")
    parser.add_argument("--speed-only", action="store_true", help="only the speed comparison")
    parser.add_argument("--rounds", type=int, default=2, help="speed: worker runs per side, alternating")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--root", type=Path, default=Path(tempfile.gettempdir()), help="where work files go")
    args = parser.parse_args()
    RESULTS.mkdir(exist_ok=True)
    if not args.speed_only:
        report = run(args.root, args.pairs, args.filler)
        (RESULTS / "salience-90d.json").write_text(json.dumps(report, indent=2) + "\n")
        print(table(report))
    if args.speed:
        report = speed_ab(args.speed, args.root, args.queries, args.rounds)
        (RESULTS / f"salience-speed-{speed.label(args.speed)}.json").write_text(json.dumps(report, indent=2) + "\n")
        shown = ("median_p50_ms", "ratios_on_over_off", "interleaved_one_process")
        print(json.dumps({k: report[k] for k in shown}, indent=2))


if __name__ == "__main__":
    main()
