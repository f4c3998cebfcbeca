"""SIGKILL during write storms (issue 8, crash safety).

A server process is spoken to in raw JSON-RPC lines, so it can be killed at any moment: lanes of concurrent
writes (saves, updates that may move a file, permanent deletes, feedback, working memory, triples) run until a
seeded random SIGKILL. A write counts as acknowledged when its response line reached the
client (including lines still in the pipe when the process died). After every kill the files are checked, the
server is started again and must return every acknowledged write; derived indexes (snapshots, journals) must
notice they are behind or gone and catch up. The other tests set up, on disk, exactly what a kill leaves at
chosen moments (a temp file mid-write, a file written but not journaled, a move half done).
"""

from __future__ import annotations

import itertools
import json
import os
import random
import re
import shutil
import signal
import sys
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream

from rockmem_mcp.audit.log import AuditLog
from rockmem_mcp.config import Settings
from rockmem_mcp.graph.service import GraphService
from rockmem_mcp.memory.service import MemoryService
from tests.e2e.classic import general, unwrapped
from tests.e2e.disk_checks import temp_files, unparsable

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

ROUNDS = 10
SEED = 20240809
LANES = 6  # concurrent requests in flight during a storm
KILL_AFTER = (0.1, 0.6)  # seconds of storm before the SIGKILL (seeded)
CATEGORIES = [None, "crash/alpha", "crash/beta"]
HUB = "Crash hub"
WORKING_ENV = {"ROCKMEM_WORKING_MAX_ENTRIES": "100000"}  # no eviction: every acknowledged key must stay
# Odd rounds snapshot and rotate the journal all the time, so kills also land in those.
BUSY_INDEX_ENV = {"ROCKMEM_SNAPSHOT_EVERY_CHANGES": "20", "ROCKMEM_JOURNAL_ROTATE_BYTES": "1000"}
MEMORY_SNAPSHOT = Path("index/memory-index.npz")
KEEP_SNAPSHOT_AFTER = 2  # a copy of the index snapshot as it was after this round's kill ...
RESTORE_SNAPSHOT_BEFORE = 7  # ... is put back before this round's restart: a snapshot far behind the journal
DAMAGE_SNAPSHOT_BEFORE = 4  # the snapshot is overwritten with garbage before this round's restart


# ---------------------------------------------------------------------------------------------- raw client
class ServerGone(Exception):
    """The process died before answering: the request may or may not have taken effect."""


class RawServer:
    """A stdio server process driven with JSON-RPC lines; requests may be in flight concurrently."""

    def __init__(self, process: Process) -> None:
        self.process = process
        self._ids = itertools.count(1)
        self._waiting: dict[int, anyio.Event] = {}
        self._answers: dict[int, dict[str, Any]] = {}
        self.gone = False
        self.read_all = anyio.Event()

    async def read(self) -> None:
        assert self.process.stdout is not None
        stdout = BufferedByteReceiveStream(self.process.stdout)
        try:
            while True:
                message = json.loads(await stdout.receive_until(b"\n", 100_000_000))
                waiting = self._waiting.pop(message.get("id"), None)
                if waiting is not None:
                    self._answers[message["id"]] = message
                    waiting.set()
        except (anyio.EndOfStream, anyio.IncompleteRead, anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass
        finally:
            self.gone = True
            for waiting in self._waiting.values():
                waiting.set()
            self.read_all.set()

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if self.gone:
            raise ServerGone
        number = next(self._ids)
        answered = self._waiting[number] = anyio.Event()
        line = json.dumps({"jsonrpc": "2.0", "id": number, "method": method, "params": params}).encode() + b"\n"
        assert self.process.stdin is not None
        try:
            await self.process.stdin.send(line)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            self._waiting.pop(number, None)
            raise ServerGone from None
        await answered.wait()
        answer = self._answers.pop(number, None)
        if answer is None:
            raise ServerGone
        assert "error" not in answer, f"{method} {params}: {answer['error']}"
        return answer["result"]

    async def call(self, tool: str, **arguments: Any) -> dict[str, Any]:
        """A tool call that must succeed (ServerGone if the process died first)."""
        name, arguments = general(tool, arguments)
        result = await self.request("tools/call", {"name": name, "arguments": arguments})
        assert not result["isError"], f"{tool}({arguments}) failed: {result['content'][0]['text']}"
        return unwrapped(tool, result["structuredContent"])

    async def calls(self, requests: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
        """Many tool calls in flight at once (pipelined); results in order."""
        results: list[dict[str, Any]] = [{}] * len(requests)
        limit = anyio.CapacityLimiter(16)

        async def one(n: int, tool: str, arguments: dict[str, Any]) -> None:
            async with limit:
                results[n] = await self.call(tool, **arguments)

        async with anyio.create_task_group() as tg:
            for n, (tool, arguments) in enumerate(requests):
                tg.start_soon(one, n, tool, arguments)
        return results

    async def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        await self.process.wait()
        await self.read_all.wait()  # every answer written before the kill has been read


@asynccontextmanager
async def raw_server(home: Path, log: Path, **env: str) -> AsyncIterator[RawServer]:
    """Start `python -m rockmem_mcp --home HOME`, initialize, yield; on exit close stdin and wait (if alive)."""
    command = [sys.executable, "-m", "rockmem_mcp", "--home", str(home)]
    with log.open("a") as errors:
        process = await anyio.open_process(command, stderr=errors, env={**os.environ, **env})
        async with process, anyio.create_task_group() as tg:
            server = RawServer(process)
            tg.start_soon(server.read)
            with anyio.fail_after(60):
                client = {"name": "crash", "version": "0"}
                await server.request(
                    "initialize", {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": client}
                )
                assert process.stdin is not None
                await process.stdin.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
            try:
                yield server
            finally:
                if process.returncode is None:
                    await process.stdin.aclose()  # EOF: a clean shutdown (final snapshots written)
                    with anyio.fail_after(30):
                        assert await process.wait() == 0
                    await server.read_all.wait()


# ---------------------------------------------------------------------------------------------- ledger
State = tuple[str, str | None]  # content, category


@dataclass
class Memory:
    id: str
    tag: str
    states: set[State]  # what the entry may hold now: one state, or old and new of an update cut off by a kill
    words: dict[State, str]  # the unique word of each state's content
    may_be_gone: bool = False  # a permanent delete of it was cut off by a kill: present or gone, both fine

    @property
    def certain(self) -> bool:
        return len(self.states) == 1 and not self.may_be_gone


@dataclass
class Ledger:
    memories: dict[str, Memory] = field(default_factory=dict)
    saved: set[str] = field(default_factory=set)  # every acknowledged save_memory's id (for the audit log)
    working: dict[str, str] = field(default_factory=dict)  # acknowledged shared/… key -> data
    triples: set[str] = field(default_factory=set)  # acknowledged triple ids (all end at HUB)
    erased: set[str] = field(default_factory=set)  # memories whose permanent delete was acknowledged
    feedback: set[str] = field(default_factory=set)  # acknowledged feedback ids
    unanswered: int = 0  # writes in flight at a kill
    landed: int = 0  # of those saves, how many turned out to be on disk (found after the restart)
    busy: set[str] = field(default_factory=set)  # memories an update is in flight for
    leftover_temp: list[str] = field(default_factory=list)  # temp files found right after kills

    def latest(self, round_: int) -> list[Memory]:
        return [m for m in self.memories.values() if m.tag.startswith(f"r{round_}l")]


@dataclass
class UnderWay:
    """A round's storm is under way once it has 2 x LANES acknowledged writes, a permanent delete and a feedback
    among them: only then does the seeded wait before the kill begin, so a slow start (a loaded machine) cannot
    leave a round without the writes the final checks count."""

    event: anyio.Event = field(default_factory=anyio.Event)
    writes: int = 0
    kinds: set[str] = field(default_factory=set)

    def acknowledged(self, kind: str) -> None:
        self.writes += 1
        self.kinds.add(kind)
        if self.writes >= 2 * LANES and {"erase", "feedback"} <= self.kinds:
            self.event.set()


class StormLane:
    def __init__(self, server: RawServer, round_: int, lane: int, ledger: Ledger, under_way: UnderWay) -> None:
        self.server = server
        self.round = round_
        self.lane = lane
        self.ledger = ledger
        self.under_way = under_way
        self.rng = random.Random(f"{SEED}-{round_}-{lane}")

    async def run(self) -> None:
        try:
            for n in itertools.count():
                roll = self.rng.random()
                if roll < 0.55:
                    kind = await self.save(n)
                elif roll < 0.68:
                    kind = await self.update(n)
                elif roll < 0.73:
                    kind = await self.erase(n)
                elif roll < 0.76:
                    signal = await self.server.call("record_feedback", type="Correction", content=f"feedback {n}")
                    self.ledger.feedback.add(signal["id"])
                    kind = "feedback"
                elif roll < 0.87:
                    key = f"shared/crash/r{self.round}l{self.lane}n{n}"
                    data = f"working value {key}"
                    await self.server.call("save_to_working_memory", key=key, data=data, ttl_minutes=600)
                    self.ledger.working[key] = data
                    kind = "working"
                else:
                    triple = {"subject": f"Crash r{self.round} l{self.lane} n{n}", "predicate": "feeds", "object": HUB}
                    added = await self.server.call("add_triples", triples=[triple])
                    self.ledger.triples.add(added["triples"][0]["fact"]["id"])
                    kind = "triple"
                self.under_way.acknowledged(kind)
        except ServerGone:
            self.ledger.unanswered += 1

    async def save(self, n: int) -> str:
        word = f"cr{self.round}l{self.lane}n{n}"
        state = (f"Round {self.round} lane {self.lane} crash fact {word}", self.rng.choice(CATEGORIES))
        tag = f"r{self.round}l{self.lane}"
        saved = await self.server.call("save_memory", content=state[0], category=state[1], tags=[tag])
        self.ledger.memories[saved["id"]] = Memory(saved["id"], tag, {state}, {state: word})
        self.ledger.saved.add(saved["id"])
        return "save"

    async def update(self, n: int) -> str:
        idle = sorted(self.ledger.memories.keys() - self.ledger.busy)
        if not idle:
            return await self.save(n)
        memory = self.ledger.memories[self.rng.choice(idle)]
        word = f"cr{self.round}l{self.lane}n{n}u"
        old_category = next(iter(memory.states))[1]
        category = self.rng.choice(CATEGORIES) if self.rng.random() < 0.4 else old_category
        state = (f"Round {self.round} lane {self.lane} corrected crash fact {word}", category)
        memory.words[state] = word
        self.ledger.busy.add(memory.id)
        try:
            memory.states.add(state)  # from here on the file may hold either
            await self.server.call("update_memory", id=memory.id, content=state[0], category=category or "")
            memory.states = {state}
        finally:
            self.ledger.busy.discard(memory.id)
        return "update"

    async def erase(self, n: int) -> str:
        idle = sorted(self.ledger.memories.keys() - self.ledger.busy)
        if not idle:
            return await self.save(n)
        memory = self.ledger.memories[self.rng.choice(idle)]
        self.ledger.busy.add(memory.id)  # for good if the kill cuts this off: never touched again
        memory.may_be_gone = True
        await self.server.call("delete_memory", id=memory.id, permanent=True)
        del self.ledger.memories[memory.id]
        self.ledger.erased.add(memory.id)
        self.ledger.busy.discard(memory.id)
        return "erase"


async def storm(server: RawServer, round_: int, ledger: Ledger, kill_after: float) -> None:
    under_way = UnderWay()
    async with anyio.create_task_group() as tg:
        for lane in range(LANES):
            tg.start_soon(StormLane(server, round_, lane, ledger, under_way).run)
        with anyio.fail_after(120):  # the lanes stop only at the kill: a server gone early would hang here
            await under_way.event.wait()
        await anyio.sleep(kill_after)  # the storm runs on for a seeded while, then the kill
        await server.kill()


# ---------------------------------------------------------------------------------------------- checks
async def explain_count(server: RawServer, ledger: Ledger, tree: dict[str, Any]) -> None:
    """Fail saying which memories the category count left out or added (seen once, under load, in CI)."""
    sure = [m for m in ledger.memories.values() if not m.may_be_gone]
    entries = await server.calls([("get_memory", {"id": m.id}) for m in sure])
    states = {m.id: (e.get("archived_at"), e.get("superseded_by")) for m, e in zip(sure, entries, strict=True)}
    inactive = {entry_id: state for entry_id, state in states.items() if any(state)}
    raise AssertionError(
        f"the index counts other entries than the files hold: {len(sure)} sure, {len(ledger.memories)} possible, "
        f"{tree['total']} counted ({tree}); archived or superseded among the sure: {inactive}"
    )


async def check_server(server: RawServer, ledger: Ledger, rounds: range) -> None:
    """The (re)started server returns every acknowledged write: by tag listing, exact words, id, graph, working."""
    # Every lane's tag, not only those with an acknowledged save: a lane whose only save was cut off by the kill
    # may still have landed it, and the count below must know it.
    tags = [f"r{round_}l{lane}" for round_ in rounds for lane in range(LANES)]
    listings = await server.calls([("search_memory", {"tags": [t], "limit": 200}) for t in tags])
    for tag, found in zip(tags, listings, strict=True):
        assert found["total_matches"] < 200
        entries = {hit["entry"]["id"]: hit["entry"] for hit in found["results"]}
        for memory in (m for m in ledger.memories.values() if m.tag == tag):
            if memory.may_be_gone and memory.id not in entries:
                continue
            assert memory.id in entries, f"acknowledged memory {memory.id} ({tag}) not found after the restart"
            state = (entries[memory.id]["content"], entries[memory.id]["category"])
            assert state in memory.states, f"{memory.id}: {state} is none of {memory.states}"
        assert not entries.keys() & ledger.erased, "an acknowledged permanent delete is undone after the restart"
        for entry_id, entry in entries.items():  # a save cut off by the kill that landed anyway
            if entry_id not in ledger.memories:
                state = (entry["content"], entry["category"])
                ledger.memories[entry_id] = Memory(entry_id, tag, {state}, {state: entry["content"].split()[-1]})
                ledger.landed += 1

    newest = [m for m in ledger.latest(rounds[-1]) if not m.may_be_gone]
    for memory, entry in zip(newest, await server.calls([("get_memory", {"id": m.id}) for m in newest]), strict=True):
        assert (entry["content"], entry["category"]) in memory.states
    certain = [m for m in newest if m.certain]
    for start in range(0, len(certain), 25):
        batch = certain[start : start + 25]
        query = " ".join(m.words[next(iter(m.states))] for m in batch)
        found = await server.call("search_memory", query=query, limit=200)
        assert {hit["entry"]["id"] for hit in found["results"]} == {m.id for m in batch}, "the index lags the files"
    tree = await server.call("list_memory_categories")
    sure = sum(not m.may_be_gone for m in ledger.memories.values())
    if not sure <= tree["total"] <= len(ledger.memories):
        await explain_count(server, ledger, tree)

    listed = await server.call("list_working_memory", namespace="shared")
    assert ledger.working.keys() <= {e["key"] for e in listed["entries"]}, "acknowledged working memory lost"
    keys = [k for k in ledger.working if k.startswith(f"shared/crash/r{rounds[-1]}l")]
    for key, got in zip(keys, await server.calls([("get_from_working_memory", {"key": k}) for k in keys]), strict=True):
        assert got["data"] == ledger.working[key]
    if ledger.triples:
        facts = {f["id"] for f in (await server.call("get_entity", name_or_id=HUB))["facts"]}
        assert ledger.triples <= facts, f"acknowledged triples lost: {ledger.triples - facts}"


def check_disk(home: Path, ledger: Ledger) -> None:
    """Right after a kill: every file parses, every acknowledged write is in its file."""
    ledger.leftover_temp += [str(p.relative_to(home)) for p in temp_files(home)]
    assert unparsable(home) == []
    on_disk: dict[str, set[str]] = {}
    for path in (home / "memory").rglob("*.json"):
        on_disk.setdefault(path.stem, set()).add(json.loads(path.read_bytes())["content"])
    for memory in ledger.memories.values():
        contents = on_disk.get(memory.id, set())
        if memory.may_be_gone and not contents:
            continue
        assert contents & {content for content, _ in memory.states}, f"{memory.id} is not on disk as acknowledged"
    assert not on_disk.keys() & ledger.erased, "a file of an acknowledged permanent delete is back"
    logs = (home / "feedback").glob("*.jsonl")
    logged = {json.loads(line)["id"] for log in logs for line in log.read_bytes().splitlines()}
    assert ledger.feedback <= logged, "acknowledged feedback lost"
    triples = {p.stem for p in (home / "knowledge-graph" / "triples").glob("*.json")}
    assert ledger.triples <= triples
    if ledger.working:
        shared = json.loads((home / "working-memory" / "shared.json").read_bytes())["entries"]
        assert ledger.working.keys() <= shared.keys()
    check_audit(home, ledger, on_disk.keys(), logged)


def check_audit(home: Path, ledger: Ledger, memory_ids: Iterable[str], feedback_ids: set[str]) -> None:
    """Right after a kill, meta/audit.log: every acknowledged save, permanent delete, feedback and triple has
    its line (a line is written before the change is acknowledged), and every line that says something was
    created names what is on disk (a line is written only once the change is: never for one that did not
    happen). A change the kill cut off between its file and its line has no line: it was never acknowledged."""
    lines = list(AuditLog(home / "meta" / "audit.log").lines())
    created: dict[str, str] = {}  # memory id -> the file its CREATE line names
    deleted: set[str] = set()
    appended: set[str] = set()  # feedback ids the APPEND lines name
    for line in lines:
        stem = line.file.rsplit("/", 1)[-1].removesuffix(".json")
        if line.file.startswith("memory/") and line.action == "CREATE":
            created[stem] = line.file
        elif line.file.startswith("memory/") and line.action == "DELETE":
            deleted.add(stem)
        elif line.file.startswith("feedback/") and line.action == "APPEND":
            appended.update(re.findall(r"\[([0-9a-f]{12})\]", line.summary))
        elif line.file.startswith("knowledge-graph/") and line.action == "CREATE":
            assert (home / line.file).exists(), f"audit line for a graph record that is not there: {line.file}"
    missing = {i for i in ledger.saved if not re.fullmatch(rf"memory/(.+/)?{i}\.json", created.get(i, ""))}
    assert not missing, f"acknowledged saves without their CREATE line: {sorted(missing)[:5]}"
    assert ledger.erased <= deleted, "an acknowledged permanent delete has no DELETE line"
    assert ledger.feedback <= appended, "acknowledged feedback without its APPEND line"
    triples = {line.file for line in lines if line.action == "CREATE" and "/triples/" in line.file}
    assert {f"knowledge-graph/triples/{t}.json" for t in ledger.triples} <= triples
    on_disk = set(memory_ids)
    cut_off = {m.id for m in ledger.memories.values() if m.may_be_gone}  # a delete the kill cut short
    phantom = created.keys() - on_disk - deleted - cut_off
    assert not phantom, f"CREATE lines for memories that are not on disk: {sorted(phantom)[:5]}"
    assert appended <= feedback_ids, "APPEND lines for feedback that is not in its log"


# ---------------------------------------------------------------------------------------------- tests
async def test_sigkill_during_write_storms_loses_no_acknowledged_write(home, tmp_path) -> None:
    ledger = Ledger()
    rng = random.Random(SEED)
    log = tmp_path / "servers.stderr"
    kept = tmp_path / "kept-memory-index.npz"
    for round_ in range(ROUNDS):
        if round_ == DAMAGE_SNAPSHOT_BEFORE:
            (home / MEMORY_SNAPSHOT).write_bytes(b"PK\x03\x04 not a snapshot any more")
        if round_ == RESTORE_SNAPSHOT_BEFORE:
            shutil.copyfile(kept, home / MEMORY_SNAPSHOT)
        env = {**WORKING_ENV, **(BUSY_INDEX_ENV if round_ % 2 else {})}
        left = temp_files(home)
        async with raw_server(home, log, **env) as server:
            # Started and alone on the home: what the last kill left half-written is gone before any call. (Only
            # those: the new server's own background writes, its critical-file record, may be under way.)
            survived = [path for path in left if path.exists()]
            assert survived == [], f"temp files left by the kill before round {round_} survived the restart"
            if round_ == 0:
                await server.call("add_entities", entities=[{"name": HUB}])
            else:
                await check_server(server, ledger, range(round_))
            await storm(server, round_, ledger, rng.uniform(*KILL_AFTER))
        check_disk(home, ledger)
        if round_ == KEEP_SNAPSHOT_AFTER:
            shutil.copyfile(home / MEMORY_SNAPSHOT, kept)

    async with raw_server(home, log, **WORKING_ENV) as server:
        assert temp_files(home) == [], "temp files left by the last kill survived the restart"
        await check_server(server, ledger, range(ROUNDS))
    assert unparsable(home) == [] and temp_files(home) == []
    print(
        f"{ROUNDS} kills: {len(ledger.memories)} memories ({ledger.landed} landed unanswered), "
        f"{len(ledger.erased)} erased, {len(ledger.feedback)} feedback, {len(ledger.working)} "
        f"working-memory keys, {len(ledger.triples)} triples; {ledger.unanswered} writes cut off; "
        f"temp files left by kills (all removed on restart): {ledger.leftover_temp}"
    )
    assert len(ledger.memories) > 10 * ROUNDS and ledger.unanswered >= ROUNDS
    assert len(ledger.erased) >= ROUNDS and len(ledger.feedback) >= ROUNDS
    errors = log.read_text()
    assert "Traceback" not in errors
    assert "memory-index.npz is damaged" in errors  # the damaged snapshot was noticed (and rebuilt, as checked)


async def test_temp_files_of_interrupted_writes_are_removed_on_start(home, tmp_path) -> None:
    """A kill inside an atomic write leaves `.name.xxxx.tmp` (partial bytes) beside the target, in any store."""
    entry = {"id": "0123456789ab", "content": "Kept through the clean-up", "category": "notes", "tags": []}
    entry |= {"created_at": "2026-01-01T00:00:00Z", "metadata": {}, "importance": 0.5}
    (home / "memory" / "notes").mkdir(parents=True)
    (home / "memory" / "notes" / "0123456789ab.json").write_text(json.dumps(entry))
    folders = ["memory", "memory/notes", "working-memory", "knowledge-graph/entities", "knowledge-graph/triples"]
    folders += ["index", "index/graph", "embeddings"]
    planted = []
    for n, folder in enumerate(folders):
        for age in (0, 7200):  # just now (the usual case: restarted right after the crash) and two hours ago
            path = home / folder / f".{n:012x}.json.{age:08x}.tmp"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b'{"id": "' + bytes(f"{n:012x}", "ascii") + b'", "content": "half a wri')
            os.utime(path, (path.stat().st_atime - age, path.stat().st_mtime - age))
            planted.append(path)
    others = [home / "working-memory" / ".shared.lock", home / "quarantine" / "memory" / ".kept.json.0a0b0c0d.tmp"]
    for path in others:  # a lock file, and what doctor --fix set aside: not temp files of ours
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"")

    async with raw_server(home, tmp_path / "server.stderr") as server:
        left = [str(p.relative_to(home)) for p in planted if p.exists()]
        assert left == [], f"temp files not removed on start: {left}"
        assert all(p.exists() for p in others)
        assert (await server.call("get_memory", id="0123456789ab"))["content"] == "Kept through the clean-up"
        found = await server.call("search_memory", query="clean-up")
        assert [h["entry"]["id"] for h in found["results"]] == ["0123456789ab"]


def rewrite(path: Path, changes: dict[str, Any], to: Path | None = None) -> dict[str, Any]:
    """Replace a record file atomically with changed fields (as the server's own write would leave it)."""
    data = {**json.loads(path.read_bytes()), **changes}
    target = to or path
    target.parent.mkdir(parents=True, exist_ok=True)
    temp = target.with_name(f".{target.name}.planted.tmp")
    temp.write_text(json.dumps(data, indent=2) + "\n")
    os.replace(temp, target)
    return data


async def test_writes_cut_off_between_file_and_journal_are_caught_up_on_restart(home, tmp_path) -> None:
    """A kill after a write's file is in place but before its journal record (or, for a move, before the old file
    is removed) leaves the states set up here; a restart must serve the files' truth and keep later writes."""
    log = tmp_path / "servers.stderr"
    # Written and closed cleanly (in this process, to save a server start): both index snapshots hold it all.
    settings = Settings.load({"home": home}, env={})
    memory_service, graph_service = MemoryService(settings), GraphService(settings)
    try:
        saved = {
            name: memory_service.save(f"{name} original wording kw{name}", "crash/alpha").model_dump(mode="json")
            for name in ("updated", "archived", "moved", "erased")
        }
        fact = graph_service.add_triples([{"subject": "Seed", "predicate": "feeds", "object": HUB}]).triples[0].fact
        hub_id, triple_id = fact.object_id, fact.id
    finally:
        graph_service.close()
        memory_service.close()
    assert (home / MEMORY_SNAPSHOT).exists() and (home / "index" / "graph-snapshot.jsonl").exists()
    now = datetime.now(UTC).isoformat()  # the cut-off writes come after everything above

    memory = home / "memory"
    alpha = {name: memory / "crash" / "alpha" / f"{entry['id']}.json" for name, entry in saved.items()}
    graph = home / "knowledge-graph"
    # save_memory killed before journaling: a new file only.
    new_id = "0000aaaa0001"
    rewrite(
        alpha["updated"],
        {"id": new_id, "content": "planted wording kwplanted", "category": "crash/beta", "created_at": now},
        to=memory / "crash" / "beta" / f"{new_id}.json",
    )
    # add_triples killed before journaling: an entity and a triple file only.
    entity = rewrite(
        next((graph / "entities").glob("*.json")),
        {"id": "0000bbbb0001", "name": "Planted entity", "aliases": [], "created_at": now},
        to=graph / "entities" / "0000bbbb0001.json",
    )
    rewrite(
        graph / "triples" / f"{triple_id}.json",
        {"id": "0000cccc0001", "subject": entity["id"], "object": hub_id, "predicate": "planted_by"},
        to=graph / "triples" / "0000cccc0001.json",
    )
    # update_memory and delete_memory killed before journaling: the file changed in place.
    rewrite(alpha["updated"], {"content": "updated corrected wording kwupdatednew", "updated_at": now})
    rewrite(alpha["archived"], {"archived_at": now, "archive_reason": "deleted with delete_memory"})
    # update_memory moving an entry killed between writing the new file and removing the old one.
    for name in ("moved", "erased"):
        rewrite(
            alpha[name],
            {"content": f"{name} unacknowledged wording kw{name}new", "category": "crash/beta", "updated_at": now},
            to=memory / "crash" / "beta" / alpha[name].name,
        )

    problems: list[str] = []

    def expect(ok: bool, problem: str) -> None:
        if not ok:
            problems.append(problem)

    async def ids(server: RawServer, query: str, **options: Any) -> list[str]:
        found = await server.call("search_memory", query=query, **options)
        return [hit["entry"]["id"] for hit in found["results"]]

    async with raw_server(home, log) as server:
        expect(await ids(server, "kwplanted") == [new_id], "a saved file the journal never heard of is not found")
        planted = await server.call("get_entity", name_or_id="Planted entity")
        expect([f["id"] for f in planted["facts"]] == ["0000cccc0001"], "a graph triple never journaled is missing")

        updated = saved["updated"]["id"]
        expect(
            await ids(server, "kwupdatednew") == [updated],
            "an entry changed on disk (update killed before journaling) is not found by its new words",
        )
        expect(
            await ids(server, "kwupdated") == [],
            "an entry changed on disk (update killed before journaling) is still found by words it no longer has",
        )
        archived = saved["archived"]["id"]
        expect(await ids(server, "kwarchived", include_archived=True) == [archived], "an archived file is not found")
        expect(
            await ids(server, "kwarchived") == [],
            "an entry archived on disk (delete killed before journaling) is still returned by default searches",
        )
        expect(
            (await server.call("list_memory_categories"))["total"] == 4,
            "the category counts disagree with the files (expected 4 live entries)",
        )

        # Acknowledged now, whichever copy of the half-moved entries the server took: archive one, erase the other.
        await server.call("delete_memory", id=saved["moved"]["id"], reason="acknowledged archive")
        await server.call("delete_memory", id=saved["erased"]["id"], permanent=True)

    async with raw_server(home, log) as server:  # a plain restart (snapshot + journal)
        erased = await server.request("tools/call", {"name": "get_memory", "arguments": {"id": saved["erased"]["id"]}})
        expect(erased["isError"], "a permanently deleted entry is back after a restart (its half-moved copy)")

    (home / MEMORY_SNAPSHOT).unlink()  # any rebuild from the files (damaged snapshot, journal gap, doctor --fix)
    async with raw_server(home, log) as server:
        moved = await server.call("get_memory", id=saved["moved"]["id"])
        expect(
            moved["archived_at"] is not None and moved["archive_reason"] == "acknowledged archive",
            f"an acknowledged archive is undone by an index rebuild (now: {moved['content']!r}, "
            f"category {moved['category']!r}, archived_at {moved['archived_at']})",
        )
        erased = await server.request("tools/call", {"name": "get_memory", "arguments": {"id": saved["erased"]["id"]}})
        expect(erased["isError"], "a permanently deleted entry is back after an index rebuild (its half-moved copy)")
        expect(await ids(server, "kwupdatednew") == [updated], "after a rebuild the changed entry is still not found")

    assert problems == [], "\n".join(problems)
