"""FIFOs, sockets and devices inside the data home: nothing waits on them, doctor reports and quarantines them.

A FIFO opened for reading without a writer blocks forever; before rockmem checked the type of what it opens,
one FIFO named like a memory, graph or prompt file hung the server's start, `doctor` and every prompt read.
Each process here runs under a timeout, so a hang fails the test instead of hanging the suite.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from rockmem_mcp.consolidation.templates import Templates

pytestmark = pytest.mark.anyio

MEMORY_ID = "0123456789ab"
PROCESS_TIMEOUT_S = 60


def rockmem(home: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ROCKMEM_")}
    return subprocess.run(
        [sys.executable, "-m", "rockmem_mcp", "--home", str(home), *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        timeout=PROCESS_TIMEOUT_S,  # a hang fails here
        check=False,
    )


@pytest.fixture
def odd_home(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Path]]:
    """A home with one real memory, and a FIFO, a socket or a device where memory, graph and prompt files go."""
    imported = rockmem(home, "import", "-", stdin=json.dumps({"content": "the ferry leaves at nine"}) + "\n")
    assert imported.returncode == 0, imported.stderr
    for folder in ("memory/travel", "knowledge-graph/entities", "knowledge-graph/triples", "prompts"):
        (home / folder).mkdir(parents=True, exist_ok=True)
    odd = {
        "memory FIFO": home / "memory" / f"{MEMORY_ID}.json",
        "memory device": home / "memory" / "travel" / "ba9876543210.json",
        "entity FIFO": home / "knowledge-graph" / "entities" / "aaaaaaaaaaaa.json",
        "prompt FIFO": home / "prompts" / "memory-rules.md",
        "triple socket": home / "knowledge-graph" / "triples" / "bbbbbbbbbbbb.json",
    }
    for name, path in odd.items():
        if "FIFO" in name:
            os.mkfifo(path)
        elif "device" in name:
            os.mknod(path, stat.S_IFCHR | 0o600, os.makedev(1, 3))  # /dev/null's numbers (the tests run as root)
    monkeypatch.chdir(odd["triple socket"].parent)  # a socket path is limited to 108 bytes: bind a short one
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listening:
        listening.bind(odd["triple socket"].name)
        listening.listen()
        yield odd


async def test_a_server_starts_answers_and_renders_prompts_beside_special_files(odd_home, home, stdio_server, call):
    with anyio.fail_after(PROCESS_TIMEOUT_S):
        async with stdio_server(home) as client:
            found = await call(client, "search_memory", query="ferry")
            assert [r["entry"]["content"] for r in found["results"]] == ["the ferry leaves at nine"]
            missing = await client.call_tool("get_memory", {"id": MEMORY_ID})  # the FIFO named like a memory
            assert missing.is_error and MEMORY_ID in missing.content[0].text
            rules = (await client.get_prompt("memory-rules", {})).messages[0].content.text
            assert rules == Templates(home / "no-overrides").text("memory-rules")  # the shipped text
            triple = {"subject": "Ferry", "predicate": "leaves_at", "object": "Nine"}
            made = await call(client, "add_triples", triples=[triple])  # the graph opened beside its odd files
            assert made["created_entities"] == ["Ferry", "Nine"]
    log = stdio_server.logs[0].read_text()
    assert "FIFO (named pipe), not a regular file" in log and "Traceback" not in log


def test_doctor_reports_special_files_and_fix_quarantines_them(odd_home, home) -> None:
    found = rockmem(home, "doctor", "--json")
    assert found.returncode == 1, found.stderr
    findings = {f["path"]: f for f in json.loads(found.stdout)["findings"]}
    for path in odd_home.values():
        relative = str(path.relative_to(home))
        assert findings[relative]["kind"] == "special-file", findings
    assert "FIFO (named pipe)" in findings["prompts/memory-rules.md"]["detail"]
    assert "socket" in findings["knowledge-graph/triples/bbbbbbbbbbbb.json"]["detail"]
    assert "character device" in findings["memory/travel/ba9876543210.json"]["detail"]
    assert not [f for f in findings.values() if f["kind"] == "malformed"]  # reported once, as what they are

    fixed = json.loads(rockmem(home, "doctor", "--json", "--fix").stdout)
    for path in odd_home.values():
        relative = path.relative_to(home)
        assert not os.path.lexists(path)
        assert stat.S_IFMT(os.lstat(home / fixed["quarantine"] / relative).st_mode) != stat.S_IFREG
    again = rockmem(home, "doctor")
    assert again.returncode == 0 and "healthy" in again.stderr, again.stdout + again.stderr
