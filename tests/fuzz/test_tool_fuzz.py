"""Property-based fuzzing of every MCP tool and of the import paths (hypothesis).

Each tool's arguments are generated from its input schema (as `list_tools()` gives it), mixing valid calls
with hostile values: path traversal ('../', absolute paths, backslashes, percent-encoding, fullwidth dots),
NUL bytes and control characters, RTL/zero-width/combining/emoji text, 1 MB strings, JSON nested 200 deep,
wrong types, huge/negative/NaN numbers, dates at the ends of datetime's range, missing required and unknown
extra arguments; most calls are valid but for one hostile argument, so that it reaches the code behind the
validation. Every call must end in a result, an error result whose text says what was refused (not the SDK's
bare "Error executing tool X", which stands for a crash), or an MCPError; the server must keep answering
(a cheap call every LIVENESS_EVERY calls and after each tool).

A home is seeded once through the tools (memories, entities, triples, working memory, feedback, a dream
report), with symlinks planted inside it that point at canary files and folders outside it; each tool is
fuzzed on its own copy, by a server of its own. After every call the files beside the home are compared
with how they were: a change there, or a canary's text in an answer, fails that tool's test, naming the
call. Each symlink is then checked on its own with focused calls, and the importers (JSON Lines, a
whole-home backup, the reference server's graph) are fuzzed with generated lines.

FUZZ_EXAMPLES (env ROCKMEM_FUZZ_EXAMPLES, default 500) calls per tool (a fifth of it for the classic set's),
IMPORT_EXAMPLES (env ROCKMEM_FUZZ_IMPORT_EXAMPLES) imports per importer. About 200 calls a second per core (the
SDK's client and server take ~2 ms of each call): ~3 minutes of CPU with the seeding, which pytest-xdist
spreads over the machine's cores. Generation is derandomized (the same calls every run, but for the ids the
server makes) and failures are not shrunk: the failing call is named in the message.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import re
import shutil
import tempfile
import traceback
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import anyio
import anyio.from_thread
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult, TextContent, Tool

from rockmem_mcp.config import Settings
from rockmem_mcp.graph.service import GraphService
from rockmem_mcp.home.transfer import HomeStores, import_jsonl, import_reference_graph
from rockmem_mcp.memory.service import MemoryService
from rockmem_mcp.server import toolsets
from rockmem_mcp.server.app import build_server

pytestmark = pytest.mark.slow  # deselect with -m 'not slow' for a quick run; .ci/run runs it

# 500 since issue 44 (the suite halved): generation is derandomized, so every run sends the same calls and a
# deeper default re-checks, run after run, what it checked once. ROCKMEM_FUZZ_EXAMPLES=2000 runs the deep pass
# (2,000 from the fuzz suite's start, 1,500 from issue 22) before a release or after a change to validation.
FUZZ_EXAMPLES = int(os.environ.get("ROCKMEM_FUZZ_EXAMPLES", "500"))
IMPORT_EXAMPLES = int(os.environ.get("ROCKMEM_FUZZ_IMPORT_EXAMPLES", "250"))
CALLS_PER_EXAMPLE = 10  # calls drawn per hypothesis example: generating them together costs half as much
# The classic set's tools run the functions the general tools (working_memory, graph, dream) call, which get the
# full depth; a fifth of it checks the classic names' own schemas and wiring.
CLASSIC = frozenset(toolsets.TOOLSETS["classic"])
CLASSIC_EXAMPLES = max(CALLS_PER_EXAMPLE, FUZZ_EXAMPLES // 5)
CALL_TIMEOUT_S = 60  # one call; longer counts as the server having stopped answering
LIVENESS_EVERY = 100  # calls between checks that the server still answers a cheap call

# No shrinking: a failure names the one call that broke the contract (its arguments are in the message), and
# shrinking would replay hundreds of batches against a server whose state has moved on.
FUZZ_SETTINGS = settings(
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    deadline=None,
    derandomize=True,
    database=None,
    print_blob=False,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.large_base_example,
        HealthCheck.filter_too_much,
    ],
)

# Text found only in the files outside the home: it must never appear in a tool's answer. It is never part of
# a generated argument, so an error message that echoes an argument cannot produce it.
CANARY = "zqxcanaryzqx"
LINKED_MEMORY_ID = "c0ffee000001"
LINKED_ENTITY_ID = "c0ffee000002"
LINKED_REPORT_ID = "20990101T000000000000Z"
FAR_FUTURE = "2999-01-01T00:00:00Z"


# ---------------------------------------------------------------------------------------------- hostile values
def weighted(*choices: tuple[int, st.SearchStrategy[Any]]) -> st.SearchStrategy[Any]:
    """One of the strategies, picked in proportion to its weight (shrinks towards the first). Each copy is a
    distinct (deferred) strategy, as one_of keeps one of identical ones; deferred also keeps reprs short."""
    return st.one_of([st.deferred(lambda s=s: s) for weight, s in choices for _ in range(weight)])


# fmt: off
FRAGMENTS = (
    "..", "../", "..\\", "/", "\\", "./", "~", "~/", "//", "%2e%2e%2f", "%2F", "%00", "..%c0%af",
    "\x00", "\n", "\r\n", "\t", "\x1b[2J", "\x7f", "\x85", "\u2028",
    "etc", "passwd", "/etc/passwd", "C:\\Windows\\", "\\\\server\\share\\", "file:///", "..;/",
    "shared", "session", "patrol", "subagent", "memory", "evil", "index", "prompts", "knowledge-graph",
    ".json", ".jsonl", ".tmp", ".lock", ".md", "-", "_", ":", ".", " ", "*", "?",
    "\u202e", "\u200b", "\u200d", "\ufeff", "\u2215", "\uff0e\uff0e\uff0f", "\u2024\u2024/", "e\u0301",
    "\U0001f468\u200d\U0001f469\u200d\U0001f467", "\U0001f980", "İ", "ß", "ﬁ", "ǅ", "Ω", "\U0001d5ba", "ℌ",
    "CON", "nul", "lpt1", "{{message}}", "{{recall}}", "%s%n", "$(id)", "`id`", "'; DROP TABLE x;--",
    "<script>", "null", "NaN", "0", "-1", "Alice", "works_on",
)
WHOLE = (
    "", " ", "\t", ".", "..", "...", "../..", "../../../../../../../../etc/passwd", "/etc/passwd", "/", "//",
    "\x00", "a\x00b", "....//....//etc", "..\\..\\..\\windows\\win.ini", "shared/../../../x",
    "session/../../x", "session/..", "shared/", "shared", "shared/.", "shared/..", "subagent/x/../../y",
    "patrol/p", "subagent/t1", "subagent/t1/result", "session/x/y", "evil", "evil/sub", "evil/../../x",
    "memory-rules", "prompts/memory-rules", ".hidden", ".dream", "a/./b", "a//b", "a/", "/a", "a/b/",
    "ａ/ｂ", "~root", "-rf", "--help", "null", "true", "[]", "{}", "0", "1e309",
    "user-preferences/timezone", "project-context/alpha", "Correction", "consolidation", "hybrid", "user",
)
EXTRA_KEY_NAMES = (
    "ctx", "sampled", "home", "path", "__proto__", "constructor", "", "\x00", "../x", "id", "ID", "Content", "_meta",
)
EXTREME_NUMBERS = (
    0, -1, 1, 2**31, 2**53 + 1, 2**63, -(2**63) - 1, 2**64, 10**30, -(10**30), 1e308, -1e308, 5e-324, -0.0,
    math.nan, math.inf, -math.inf,
)
# fmt: on
# Built once and drawn whole, so a 1 MB argument costs the generator nothing; drawn by description, which
# is what a failing example shows (hypothesis prints `huge("'x' * 1_000_001")`, not a megabyte).
HUGE = {
    "'x' * 1_000_001": "x" * 1_000_001,
    "'é' * 500_001": "é" * 500_001,
    "'../' * 333_334": "../" * 333_334,
    "'a/' * 500_001": "a/" * 500_001,
    "'\\U0001f980' * 250_001": "\U0001f980" * 250_001,
    "'word ' * 200_001": "word " * 200_001,
    "'\\x00' * 1_000_001": "\x00" * 1_000_001,
    "'y' * 100_001": "y" * 100_001,  # just past the content limit
    "'z' * 99_990": "z" * 99_990,  # just under it
    "'a' * 301": "a" * 301,  # just past the working-key limit
    "'b' * 201": "b" * 201,  # just past the category and name limits
}


def huge(description: str) -> str:
    return HUGE[description]


HUGE_STRINGS = st.sampled_from(sorted(HUGE)).map(huge)
ODD_TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=30)  # surrogate-free Unicode
# Valid-looking paths and ids ('user-preferences/x1', 'shared/team/plan'), which get past validation.
SEGMENTS = st.text("abcdefghijklmnopqrstuvwxyzABCXYZ0123456789_-.:", min_size=1, max_size=10)
PATH_SHAPED = st.lists(SEGMENTS, min_size=1, max_size=4).map("/".join)
NUMBERS = st.one_of(
    st.integers(),
    st.floats(),
    st.sampled_from(EXTREME_NUMBERS),
)


def _iso(moment: datetime, offset: int | None, sep: str) -> str:
    text = moment.isoformat(sep=sep)
    if offset is None:
        return text
    if offset == 0:
        return text + "Z"
    sign = "+" if offset > 0 else "-"
    return f"{text}{sign}{abs(offset) // 60:02d}:{abs(offset) % 60:02d}"


DATETIMES = weighted(
    (
        3,
        st.builds(
            _iso,
            st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31, 23, 59, 59, 999_999)),
            st.one_of(st.none(), st.integers(-24 * 60 + 1, 24 * 60 - 1)),
            st.sampled_from(["T", " "]),
        ),
    ),
    # The ends of datetime's range with an offset: valid ISO 8601 that leaves the range once made UTC.
    (2, st.builds(_iso, st.sampled_from([datetime.min, datetime.max]), st.integers(-14 * 60, 14 * 60), st.just("T"))),
    (1, st.dates().map(date.isoformat)),
    (
        1,
        st.sampled_from(
            [
                "0001-01-01T00:00:00+14:00",
                "9999-12-31T23:59:59-14:00",
                "9999-12-31T23:59:59.999999Z",
                "0001-01-01T00:00:00Z",
                "2024-02-30T00:00:00Z",
                "2024-13-01T00:00:00Z",
                "2024-01-01T25:00:00Z",
                "+275760-09-13T00:00:00Z",
                "now",
                "yesterday",
                "1700000000",
                "",
            ]
        ),
    ),
)


def texts(pool: Iterable[str] = (), with_huge: bool = True) -> st.SearchStrategy[str]:
    """Strings for any text argument: the given known values (ids, keys, names of this home), path-traversal
    pieces and whole hostile strings, odd Unicode, valid-looking paths, and now and then a huge one."""
    known = list(dict.fromkeys(pool))  # in the order given: the same draws pick the same kinds of value
    pieces = st.lists(st.sampled_from(FRAGMENTS + tuple(known)), min_size=1, max_size=6).map("".join)
    choices = [(3, st.sampled_from(known))] if known else []
    return weighted(
        *choices,
        (2, pieces),
        (2, st.sampled_from(WHOLE)),
        (2, ODD_TEXT),
        (2, PATH_SHAPED),
        *([(1, HUGE_STRINGS)] if with_huge else []),
    )


def _deep(depth: int, as_object: bool) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = {"a": value} if as_object else [value]
    return value


def json_values(strings: st.SearchStrategy[str]) -> st.SearchStrategy[Any]:
    """Any JSON value: scalars of every type, small containers, and nesting up to 200 deep (the SDK client
    refuses to serialize much deeper)."""
    scalars = st.one_of(st.none(), st.booleans(), NUMBERS, strings)
    small = st.recursive(
        scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(strings, inner, max_size=3), max_leaves=4
    )
    deep = st.builds(_deep, st.integers(20, 200), st.booleans())
    return weighted((6, small), (1, deep))


# Unknown arguments, among them the names of the tools' hidden parameters (the MCP context, a resolved one).
EXTRA_KEYS = st.sampled_from(EXTRA_KEY_NAMES) | ODD_TEXT


def big_metadata() -> dict[str, str]:
    return {f"k{i}": "v" * 100 for i in range(200)}  # past the 16 KB metadata limit


# ------------------------------------------------------------------------------------- schema -> strategy
BENIGN_WORDS = ("Alice", "notes", "deploy staging", "user timezone", "RockBot", "preferences", "light mode")
BENIGN_DATETIMES = st.datetimes(datetime(2000, 1, 1), datetime(2100, 1, 1), timezones=st.just(UTC)).map(
    datetime.isoformat
)


@dataclass
class SchemaStrategies:
    """Arguments for a tool from its JSON schema, in one of three styles:

    - "benign": valid, ordinary values (known ids and names of the home, plain words);
    - "typed": every value of its schema type, strings hostile (traversal, NUL, odd Unicode, huge...);
    - "hostile": as typed, plus wrong types at any node, a required argument left out, unknown ones added.

    `arguments` mixes them, most often as a benign call with one argument made hostile, so that one bad value
    is what the tool sees. `hints` maps a parameter (or field) name to values known in the home, e.g. "id" to
    memory ids and "category" to the linked folder's name; "" lists every known value, offered to any string.
    """

    defs: dict[str, Any]
    hints: dict[str, list[str]]
    style: str = "hostile"

    def __post_init__(self) -> None:
        known = self.hints.get("", ())
        self.strings = texts(known)
        self.anything = json_values(texts(known, with_huge=False))
        self.words = weighted((2, st.sampled_from(BENIGN_WORDS)), (1, PATH_SHAPED))

    def arguments(self, schema: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
        benign, typed = (SchemaStrategies(self.defs, self.hints, style) for style in ("benign", "typed"))
        choices = [(4, typed.one_hostile_argument(schema, benign)), (2, typed.object(schema)), (2, self.object(schema))]
        return weighted(*choices, (1, benign.object(schema)))

    def one_hostile_argument(
        self, schema: dict[str, Any], benign: SchemaStrategies
    ) -> st.SearchStrategy[dict[str, Any]]:
        properties = schema.get("properties", {})
        if not properties:
            return benign.object(schema)
        hostile = st.one_of([st.tuples(st.just(name), self.value(spec, name)) for name, spec in properties.items()])
        return st.builds(lambda base, pair: {**base, pair[0]: pair[1]}, benign.object(schema), hostile)

    def value(self, node: dict[str, Any], name: str = "") -> st.SearchStrategy[Any]:
        if self.style != "hostile":
            return self.typed(node, name)
        return weighted((7, self.typed(node, name)), (1, self.anything))

    def typed(self, node: dict[str, Any], name: str = "") -> st.SearchStrategy[Any]:
        if "$ref" in node:
            return self.typed(self.defs[node["$ref"].rsplit("/", 1)[-1]], name)
        if "anyOf" in node:
            return st.one_of([self.typed(option, name) for option in node["anyOf"]])
        if "enum" in node:
            if self.style == "benign":
                return st.sampled_from(node["enum"])
            return weighted((6, st.sampled_from(node["enum"])), (1, self.strings))
        kind = node.get("type")
        if kind == "string":
            return self.string(node, name)
        if kind in ("integer", "number"):
            return self.number(node, kind == "integer")
        if kind == "boolean":
            return st.booleans()
        if kind == "null":
            return st.none()
        if kind == "array":
            return self.array(node, name)
        if kind == "object":
            return self.object(node)
        return self.anything

    def string(self, node: dict[str, Any], name: str) -> st.SearchStrategy[str]:
        known = self.hints.get(name)
        if self.style == "benign":
            if node.get("format") == "date-time":
                return BENIGN_DATETIMES
            return weighted((3, st.sampled_from(known)), (1, self.words)) if known else self.words
        if node.get("format") == "date-time":
            return weighted((3, DATETIMES), (1, self.strings))
        return weighted((4, st.sampled_from(known)), (3, self.strings)) if known else self.strings

    def number(self, node: dict[str, Any], integer: bool) -> st.SearchStrategy[Any]:
        low, high = node.get("minimum", node.get("exclusiveMinimum")), node.get("maximum")
        if integer:
            inside = st.integers(None if low is None else int(low), None if high is None else int(high))
            near = st.integers(None if low is None else int(low) - 3, None if high is None else int(high) + 3)
        else:
            inside = st.floats(low, high, allow_nan=False, exclude_min="exclusiveMinimum" in node)
            near = st.floats(None if low is None else low - 1, None if high is None else high + 1, allow_nan=False)
        if self.style == "benign":
            return inside
        if self.style == "typed":
            return weighted((2, near), (1, NUMBERS))
        return weighted((4, near), (1, NUMBERS))

    def array(self, node: dict[str, Any], name: str) -> st.SearchStrategy[list[Any]]:
        items = node.get("items", {})
        listed = st.lists(self.value(items, name), max_size=4 if self.style != "benign" else 2)
        if self.style == "benign":
            return listed
        choices: list[tuple[int, st.SearchStrategy[Any]]] = [
            (16, listed),
            (1, st.just(None).map(lambda _: [self.minimal(items)] * 1001)),  # past every per-call cap of 1,000
        ]
        if items.get("type") == "string":
            choices.append((1, st.integers(40, 70).map(lambda n: [f"label-{i}" for i in range(n)])))  # tag cap
        return weighted(*choices)

    def minimal(self, node: dict[str, Any]) -> Any:
        """A small valid value (for lists past their length cap, which must not also be huge)."""
        if "$ref" in node:
            return self.minimal(self.defs[node["$ref"].rsplit("/", 1)[-1]])
        if "anyOf" in node:
            return self.minimal(node["anyOf"][0])
        if "enum" in node:
            return node["enum"][0]
        kind = node.get("type")
        if kind == "object":
            properties = node.get("properties", {})
            return {name: self.minimal(properties[name]) for name in node.get("required", [])}
        return {"string": "item", "integer": 1, "number": 0.5, "boolean": True, "array": []}.get(kind)

    def object(self, node: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
        properties = node.get("properties")
        if properties is None:  # a free mapping, e.g. metadata
            extra = node.get("additionalProperties")
            values = self.value(extra) if isinstance(extra, dict) else self.anything
            if self.style == "benign":
                return st.dictionaries(self.words, values, max_size=2)
            mapping = st.dictionaries(self.strings, values, max_size=4)
            return weighted((8, mapping), (1, st.builds(big_metadata)))
        required = sorted(set(node.get("required", [])))
        base = st.fixed_dictionaries(
            {name: self.value(properties[name], name) for name in required},
            optional={name: self.value(spec, name) for name, spec in properties.items() if name not in required},
        )
        if self.style != "hostile":
            return base
        drop = weighted((9, st.none()), (1, st.sampled_from(required))) if required else st.none()
        extra = weighted((6, st.just({})), (1, st.dictionaries(EXTRA_KEYS, self.anything, max_size=2)))
        return st.builds(_mutated, base, drop, extra)


def _mutated(base: dict[str, Any], drop: str | None, extra: dict[str, Any]) -> dict[str, Any]:
    """`base` with one required argument left out and unknown ones added (known names are not overwritten)."""
    arguments = {**{k: v for k, v in extra.items() if k not in base}, **base}
    if drop is not None:
        arguments.pop(drop, None)
    return arguments


def summary(arguments: dict[str, Any], width: int = 80) -> str:
    """Arguments for a report: each value's repr cut to `width` characters."""

    def short(value: Any) -> str:
        try:
            text = repr(value)
        except RecursionError:
            text = f"<{type(value).__name__} nested too deep to print>"
        return text if len(text) <= width else f"{text[:width]}…({len(text):,} chars)"

    return "{" + ", ".join(f"{k!r}: {short(v)}" for k, v in arguments.items()) + "}"


# ------------------------------------------------------------------------------- the home and what is around it
def _today() -> str:
    return datetime.now(UTC).date().isoformat()


def _now() -> str:
    return datetime.now(UTC).isoformat()


def _json(value: Any) -> bytes:
    return json.dumps(value).encode() + b"\n"


@dataclass(frozen=True)
class Link:
    """A symlink planted inside the home (path relative to it; '{today}' is the UTC date) pointing at a canary
    outside it: a file holding `content` (valid for the store it sits in, so reading it through the link
    puts CANARY in an answer), or a folder when `content` is None."""

    inside: str
    target: str
    content: Callable[[], bytes] | None


LINKS = {
    "prompt-memory-rules": Link("prompts/memory-rules.md", "memory-rules.md", lambda: f"# {CANARY}\n".encode()),
    "prompt-dream": Link("prompts/dream.md", "dream.md", lambda: f"# {CANARY} {{{{material}}}}\n".encode()),
    "memory-folder": Link("memory/evil", "evil", None),
    "memory-file": Link(
        f"memory/{LINKED_MEMORY_ID}.json",
        "memory.json",
        lambda: _json({"id": LINKED_MEMORY_ID, "content": f"{CANARY} memory", "created_at": _now()}),
    ),
    "working-file": Link(
        "working-memory/shared.json",
        "shared.json",
        lambda: _json(
            {
                "entries": {
                    "shared/team/leak": {
                        "key": "shared/team/leak",
                        "data": f"{CANARY} working",
                        "category": None,
                        "tags": [],
                        "created_at": _now(),
                        "expires_at": FAR_FUTURE,
                    }
                }
            }
        ),
    ),
    "feedback-log": Link(
        "feedback/{today}.jsonl",
        "feedback.jsonl",
        lambda: _json(
            {
                "id": "c0ffee000003",
                "type": "Correction",
                "content": f"{CANARY} feedback",
                "session_id": "s",
                "at": _now(),
            }
        ),
    ),
    "conversation-log": Link(
        "conversations/{today}.jsonl",
        "conversation.jsonl",
        lambda: _json({"session_id": "s", "role": "user", "content": f"{CANARY} turn", "at": _now()}),
    ),
    "dream-report": Link(
        f"dream-reports/{LINKED_REPORT_ID}.json",
        "report.json",
        lambda: _json(
            {
                "id": LINKED_REPORT_ID,
                "dream_pass": "consolidation",
                "mode": "agent",
                "dry_run": True,
                "started_at": _now(),
                "summary": f"{CANARY} report",
            }
        ),
    ),
    "workspace-file": Link("SOUL.md", "SOUL.md", lambda: f"# {CANARY}\nNever sarcastic.\n".encode()),
    "graph-entity": Link(
        f"knowledge-graph/entities/{LINKED_ENTITY_ID}.json",
        "entity.json",
        lambda: _json({"id": LINKED_ENTITY_ID, "name": f"{CANARY} entity", "created_at": _now()}),
    ),
}


class Sandbox:
    """root/home (the data home, with the links planted) beside root/outside (the canaries)."""

    def __init__(self, root: Path, links: Iterable[Link], template: Sandbox | None = None) -> None:
        """A fresh sandbox, or a copy of `template` (home and canaries as they are now) with its links
        pointing at the copy's canaries."""
        self.root, self.home, self.outside = root, root / "home", root / "outside"
        self.links = list(links)
        if template is not None:
            shutil.copytree(template.root, root, symlinks=True, dirs_exist_ok=True)
        else:
            self.outside.mkdir(parents=True)
        for link in self.links:
            target = self.outside / link.target
            if template is None and link.content is None:
                target.mkdir()
                (target / "canary.txt").write_text(CANARY)
            elif template is None:
                target.write_bytes(link.content())
            inside = self.home / link.inside.format(today=_today())
            inside.parent.mkdir(parents=True, exist_ok=True)
            inside.unlink(missing_ok=True)
            os.symlink(target, inside)
        self.baseline = self.snapshot()

    def snapshot(self) -> dict[str, tuple[int, int, int, str]]:
        """Every path under root except the home: (inode, size, mtime, link target); links are not followed.
        Taken after every call, so scandir and plain strings (os.walk and relpath cost ~1 ms here)."""
        found: dict[str, tuple[int, int, int, str]] = {}
        stack = [("", str(self.root))]
        while stack:
            relative, directory = stack.pop()
            for item in os.scandir(directory):
                if not relative and item.name == "home":
                    continue
                name = relative + item.name
                info = item.stat(follow_symlinks=False)
                link = item.is_symlink()
                found[name] = (info.st_ino, info.st_size, info.st_mtime_ns, os.readlink(item.path) if link else "")
                if not link and item.is_dir(follow_symlinks=False):
                    stack.append((name + "/", item.path))
        return found

    @staticmethod
    def differences(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
        return sorted(
            [f"created {p}" for p in after.keys() - before.keys()]
            + [f"removed {p}" for p in before.keys() - after.keys()]
            + [f"changed {p}" for p in before.keys() & after.keys() if before[p] != after[p]]
        )


def grouped(change: str) -> str:
    """One line for all the files made in a linked folder: 'created outside/evil/<id>.json'."""
    return re.sub(r"^(\w+ outside/[^/]+(?:/[^/]+)*)/[^/]+\.json$", r"\1/<id>.json", change)


# ------------------------------------------------------------------------------------------ the server
class CrashLog(logging.Handler):
    """Collects the tracebacks the SDK logs when a tool raises something it did not mean to."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def text(self) -> str:
        return "\n".join(
            "".join(traceback.format_exception(*r.exc_info)) if r.exc_info else r.getMessage() for r in self.records
        )


class Server:
    """A server on the sandbox's home with one connected in-memory client, on an event loop of its own
    (an anyio blocking portal), so synchronous hypothesis tests can call it."""

    def __init__(self, sandbox: Sandbox, history: bool = True) -> None:
        self.sandbox = sandbox
        self.settings = Settings.load(
            {"home": sandbox.home, "conversation_log": True, "toolsets": "all", "audit_git": history}, env={}
        )
        self._stack = ExitStack()
        self.portal = self._stack.enter_context(anyio.from_thread.start_blocking_portal())
        self.client = self._stack.enter_context(
            self.portal.wrap_async_context_manager(Client(build_server(self.settings)))
        )
        self.crashes = CrashLog()
        self._logger = logging.getLogger("mcp.server.mcpserver.server")
        self._logger.addHandler(self.crashes)
        self._stack.callback(self._logger.removeHandler, self.crashes)
        self.tools = {tool.name: tool for tool in self.portal.call(self._list_tools)}

    def close(self) -> None:
        self._stack.close()

    async def _list_tools(self) -> list[Tool]:
        with anyio.fail_after(CALL_TIMEOUT_S):
            return (await self.client.list_tools()).tools

    async def _call(self, name: str, arguments: dict[str, Any]) -> CallToolResult:
        with anyio.fail_after(CALL_TIMEOUT_S):
            return await self.client.call_tool(name, arguments)

    async def _prompt(self, name: str) -> str:
        with anyio.fail_after(CALL_TIMEOUT_S):
            result = await self.client.get_prompt(name, {})
        return "\n".join(m.content.text for m in result.messages if isinstance(m.content, TextContent))

    def call(self, name: str, arguments: dict[str, Any]) -> CallToolResult | MCPError:
        self.crashes.records.clear()
        try:
            return self.portal.call(self._call, name, arguments)
        except MCPError as exc:
            return exc
        except TimeoutError:
            raise AssertionError(
                f"{name} did not answer within {CALL_TIMEOUT_S}s: the server stopped answering; "
                f"arguments: {summary(arguments)}"
            ) from None

    def prompt(self, name: str) -> str:
        return self.portal.call(self._prompt, name)

    def assert_alive(self) -> None:
        result = self.call("list_memory_categories", {})
        assert isinstance(result, CallToolResult) and not result.is_error, f"the server stopped answering: {result}"


@contextmanager
def running(sandbox: Sandbox, history: bool = True) -> Iterator[Server]:
    server = Server(sandbox, history)
    try:
        yield server
    finally:
        server.close()


def result_text(result: CallToolResult | MCPError) -> str:
    if isinstance(result, MCPError):
        return result.error.message
    return "\n".join(c.text for c in result.content if isinstance(c, TextContent))


def problem_with(name: str, result: CallToolResult | MCPError, crashes: CrashLog) -> str | None:
    """Why this answer breaks the contract (a result, a clear error result, or an MCPError), or None."""
    if isinstance(result, MCPError):
        return None if result.error.message.strip() else "an MCPError without a message"
    if not isinstance(result, CallToolResult):
        return f"an answer of type {type(result).__name__}"
    text = result_text(result)
    if not result.is_error:
        return None if result.structured_content is not None else "a success without structured content"
    prefix = f"Error executing tool {name}"
    if crashes.records or text.strip() == prefix:
        return f"a crash (an unexpected exception, reported as {text!r}):\n{crashes.text()}"
    if not text.startswith(prefix + ": ") or not text[len(prefix) + 2 :].strip():
        return f"an error result without a clear message: {text[:300]!r}"
    return None


# -------------------------------------------------------------------- what every fuzzed call is checked for
@dataclass
class Findings:
    """Calls that changed something outside the home or returned a canary's text, across the fuzz tests."""

    calls: int = 0
    outside: dict[str, list[str]] = field(default_factory=dict)  # "tool: change" -> arguments of the first
    leaks: dict[str, list[str]] = field(default_factory=dict)  # tool -> arguments of the calls

    def report(self) -> str:
        lines = [f"{len(v)} call(s) {k}; first: {v[0]}" for k, v in sorted(self.outside.items())]
        lines += [f"{len(v)} answer(s) of {k} held the canary; first: {v[0]}" for k, v in sorted(self.leaks.items())]
        return "\n".join(lines)


class Watcher:
    """Calls tools on a server and checks every answer and what is around the home."""

    def __init__(self, server: Server, findings: Findings) -> None:
        self.server, self.findings = server, findings
        self.seen = server.sandbox.baseline
        self.calls = 0

    def call(self, name: str, arguments: dict[str, Any], label: str = "") -> CallToolResult | MCPError:
        """`label` names the call in findings (default the tool's name)."""
        label = label or name
        result = self.server.call(name, arguments)
        self.calls += 1
        self.findings.calls += 1
        problem = problem_with(name, result, self.server.crashes)
        assert problem is None, f"{name} answered with {problem}\narguments: {summary(arguments)}"
        now = self.server.sandbox.snapshot()
        if now != self.seen:
            for change in Sandbox.differences(self.seen, now):
                self.findings.outside.setdefault(f"{label}: {grouped(change)}", []).append(summary(arguments))
            self.seen = now
        if CANARY in result_text(result):
            self.findings.leaks.setdefault(label, []).append(summary(arguments))
        if self.calls % LIVENESS_EVERY == 0:
            self.server.assert_alive()
        return result

    def ok(self, name: str, **arguments: Any) -> dict[str, Any]:
        result = self.call(name, arguments, label=f"{name} (seeding)")
        assert isinstance(result, CallToolResult) and not result.is_error, f"seeding {name}: {result_text(result)}"
        assert result.structured_content is not None
        return result.structured_content


SEED_MEMORIES = [
    dict(content="Alice prefers dark mode in every editor", category="user-preferences/ui", tags=["ui", "Alice"]),
    dict(content="Deploys to staging go through RockBot", category="project-context/rockbot", importance=0.9),
    dict(content="Don't run rm -rf ../ in CI — instead clean the workspace", category="anti-patterns/shell"),
    dict(content="The timezone is Europe/Paris \U0001f980", category="user-preferences/timezone", tags=["tz"]),
    dict(content="\u202eRTL override\u202c and zero\u200bwidth and e\u0301 combining", tags=["unicode"]),
    dict(content="a path in content: ../../../../etc/passwd and C:\\Windows", metadata={"source": "../x"}),
    dict(content="NUL \x00 byte and \x1b[31m escape inside content", category="odd"),
    dict(content="template-looking text {{recall}} {{message}}", category="odd/templates"),
    dict(content="Omega Ω project uses Node.js 20 and S3", category="project-context/omega", tags=["Ω"]),
    dict(content="Alice works on RockBot with Bob", category="project-context/rockbot"),
]


def seed(watcher: Watcher) -> dict[str, list[str]]:
    """Give the home something to find, update, delete and merge. Returns known values per parameter name
    (ids, categories, keys, entity names...), the planted links' names among them; "" holds them all."""
    hints: dict[str, dict[str, None]] = {}  # ordered sets: seeding order, not the random ids, decides the order

    def known(names: str, *values: str) -> None:
        for name in names.split():
            hints.setdefault(name, {}).update(dict.fromkeys(values))

    for memory in SEED_MEMORIES:
        entry = watcher.ok("save_memory", **memory)
        known("id ids", entry["id"])
        known("category", entry["category"] or "")
    archived = watcher.ok("save_memory", content="an archived memory about Alice")["id"]
    watcher.ok("delete_memory", id=archived, reason="seeded archive")
    known("id ids", archived, LINKED_MEMORY_ID)
    known("category", "evil", "evil/sub", "evil/../..", "odd/../evil")
    names = ["Alice", "Bob", "RockBot", "Ω Omega", "../../etc/passwd", "\U0001f980 Crab", "Robert'); DROP TABLE x;--"]
    added = watcher.ok("add_entities", entities=[{"name": n, "aliases": [n.lower()]} for n in names])
    entity_ids = [e["entity"]["id"] for e in added["entities"]]
    known("name_or_id start keep merge subject object name aliases", *names, *entity_ids, LINKED_ENTITY_ID)
    triples = watcher.ok(
        "add_triples",
        triples=[
            {"subject": "Alice", "predicate": "works on", "object": "RockBot"},
            {"subject": "Bob", "predicate": "works_on", "object": "RockBot", "confidence": 0.4},
            {"subject": "RockBot", "predicate": "depends on", "object": "Ω Omega"},
            {"subject": "../../etc/passwd", "predicate": "points to", "object": "\U0001f980 Crab"},
        ],
    )
    known("id drop_triples", *(t["fact"]["id"] for t in triples["triples"]))
    known("predicate", "works_on", "depends on", "../..")
    namespace = ""
    for key in ("notes", "shared/team/plan", "shared/topic/deep"):
        saved = watcher.ok("save_to_working_memory", key=key, data=f"working {key} Alice", tags=["w"])
        known("key", key, saved["entry"]["key"])
        namespace = "/".join(saved["entry"]["key"].split("/")[:2]) if key == "notes" else namespace
    known("key", "shared/team/leak", "shared/x/../../leak", f"{namespace}/../../shared/team/leak")
    known("namespace", "shared", "session", "patrol", "subagent", "shared/topic", namespace, "session/../shared")
    # Today's conversation and feedback logs are planted links: recording to them is refused, clearly.
    for name, arguments in (
        ("record_turn", {"role": "user", "content": "Alice asked about RockBot", "session_id": "chat-1"}),
        ("record_feedback", {"type": "Correction", "content": "Alice said: not dark mode, light mode"}),
    ):
        refused = watcher.call(name, arguments, label=f"{name} (seeding)")
        assert isinstance(refused, CallToolResult) and refused.is_error and "symbolic link" in result_text(refused)
    report = watcher.ok("dream", mode="deterministic", dry_run=True)["report"]
    known("report_id", report["id"], LINKED_REPORT_ID, "../dream-reports/" + LINKED_REPORT_ID)
    known("session_id", "chat-1", namespace.replace("/", ":"), "chat-1/../x")
    sandbox = watcher.server.sandbox
    paths = [str(p) for p in (sandbox.outside, sandbox.outside / "memory.json", sandbox.root / "new-file")]
    known("", *paths, "../../outside", "../../../outside/evil", "../outside/memory", "../../outside/shared")
    for values in list(hints.values()):
        known("", *values)
    return {name: [v for v in values if v] for name, values in hints.items()}


# ------------------------------------------------------------------------------------------ the tool list
def _list_tools() -> dict[str, Tool]:
    with tempfile.TemporaryDirectory() as directory:
        settings = Settings.load({"home": Path(directory) / "home", "toolsets": "all"}, env={})

        async def listing() -> list[Tool]:
            async with Client(build_server(settings)) as client:
                return (await client.list_tools()).tools

        return {tool.name: tool for tool in anyio.run(listing)}


TOOLS = _list_tools()


def test_the_tool_list_is_read_from_the_server() -> None:
    assert len(TOOLS) >= 27
    assert all(tool.input_schema.get("type") == "object" for tool in TOOLS.values())


@dataclass(frozen=True)
class Seeded:
    sandbox: Sandbox
    hints: dict[str, list[str]]


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Seeded:
    """A home seeded once (through the tools, links planted), copied for each tool's fuzzing."""
    sandbox = Sandbox(tmp_path_factory.mktemp("seeded"), LINKS.values())
    findings = Findings()
    with running(sandbox) as server:
        hints = seed(Watcher(server, findings))
    assert_stayed_in_the_home(findings)
    return Seeded(sandbox, hints)


HISTORY_TOOLS = {"audit", "revert"}


@pytest.mark.parametrize("name", sorted(TOOLS))
def test_fuzzed_calls_get_a_result_or_a_clear_error(name: str, seeded: Seeded, tmp_path: Path) -> None:
    """FUZZ_EXAMPLES generated calls of one tool; the server answers each one and is still up after."""
    sandbox = Sandbox(tmp_path, LINKS.values(), template=seeded.sandbox)
    findings = Findings()
    # The git history commits as every dream run starts (~35 ms a call, 70 s for 2,000 apply_dream calls): it is
    # on for the tools that read it; the others fuzz the same code with the audit log on and git off.
    with running(sandbox, history=name in HISTORY_TOOLS) as server:
        watcher = Watcher(server, findings)
        tool = server.tools[name]
        # Absolute paths among the known values name this copy's canaries, watched after every call.
        here = {k: [v.replace(str(seeded.sandbox.root), str(tmp_path)) for v in vs] for k, vs in seeded.hints.items()}
        arguments = SchemaStrategies(tool.input_schema.get("$defs", {}), here).arguments(tool.input_schema)
        calls = st.lists(arguments, min_size=CALLS_PER_EXAMPLE, max_size=CALLS_PER_EXAMPLE)

        examples = CLASSIC_EXAMPLES if name in CLASSIC else FUZZ_EXAMPLES

        @settings(FUZZ_SETTINGS, max_examples=-(-examples // CALLS_PER_EXAMPLE))
        @given(calls=calls)
        def fuzz(calls: list[dict[str, Any]]) -> None:
            for one in calls:
                watcher.call(name, one)

        fuzz()
        server.assert_alive()
    assert findings.calls >= examples
    assert_stayed_in_the_home(findings)


# ------------------------------------------------------------------------------------ nothing outside the home
_PASSWD = Path("/etc/passwd")
_PASSWD_DIGEST = hashlib.sha256(_PASSWD.read_bytes()).hexdigest() if _PASSWD.exists() else None
_CWD_NAMES = set(os.listdir())


def assert_stayed_in_the_home(findings: Findings) -> None:
    """Nothing beside the home changed and no canary reached an answer (through the links planted in it);
    hostile absolute and relative paths ('/etc/passwd', '../..') reached neither /etc nor the cwd."""
    assert not findings.outside and not findings.leaks, (
        "calls went outside the home (through the symlinks planted in it):\n" + findings.report()
    )
    if _PASSWD_DIGEST is not None:
        assert hashlib.sha256(_PASSWD.read_bytes()).hexdigest() == _PASSWD_DIGEST
    # The suite's own folders, made by other tests running beside (test-artifacts: the browser tests' screenshots)
    own = {".pytest_cache", ".hypothesis", "__pycache__", ".ruff_cache", "test-artifacts"}
    created = set(os.listdir()) - _CWD_NAMES - own
    assert not created, f"created in the working directory: {sorted(created)}"


# ------------------------------------------------------------------------- symlinks inside the home, one by one
# case -> (links planted, calls); "{id}" in an argument is replaced by a memory saved first.
TOOL_CALLS = list[tuple[str, dict[str, Any]]]
SYMLINK_CASES: dict[str, tuple[list[str], TOOL_CALLS]] = {
    "prompts": (
        ["prompt-memory-rules", "prompt-dream"],
        [("dream", {"mode": "agent"}), ("dream", {"mode": "deterministic"}), ("prompt", {"name": "memory-rules"})],
    ),
    "memory-folder": (
        ["memory-folder"],
        [
            ("save_memory", {"content": "filed under the linked folder", "category": "evil"}),
            ("save_memory", {"content": "filed under a folder in it", "category": "evil/sub"}),
            ("update_memory", {"id": "{id}", "category": "evil"}),
            ("apply_dream", {"plan": {"creates": [{"content": "a created preference", "category": "evil"}]}}),
        ],
    ),
    "memory-file": (
        ["memory-file"],
        [("get_memory", {"id": LINKED_MEMORY_ID}), ("search_memory", {}), ("search_memory", {"query": "memory"})],
    ),
    "working-file": (
        ["working-file"],
        [
            ("get_from_working_memory", {"key": "shared/team/leak"}),
            ("search_working_memory", {"namespace": "shared"}),
            ("save_to_working_memory", {"key": "shared/team/new", "data": "d"}),
        ],
    ),
    "feedback-log": (
        ["feedback-log"],
        [
            ("record_feedback", {"type": "Correction", "content": "appended to the linked log"}),
            ("dream", {"mode": "agent", "dream_pass": "anti-patterns"}),
        ],
    ),
    "conversation-log": (
        ["conversation-log"],
        [
            ("record_turn", {"role": "user", "content": "appended to the linked log"}),
            ("dream", {"mode": "agent", "dream_pass": "preferences"}),
        ],
    ),
    "dream-report": (
        ["dream-report"],
        [("get_dream_report", {"report_id": LINKED_REPORT_ID}), ("get_dream_report", {})],
    ),
    "workspace-file": (
        ["workspace-file"],
        [
            ("search_memory", {"query": "never sarcastic"}),
            ("write_workspace_file", {"name": "SOUL.md", "content": "replaces the link itself"}),
        ],
    ),
    "graph-entity": (
        ["graph-entity"],
        [("get_entity", {"name_or_id": LINKED_ENTITY_ID}), ("find_entities", {})],
    ),
}


def _filled(value: Any, memory_id: str) -> Any:
    if isinstance(value, str):
        return value.replace("{id}", memory_id)
    if isinstance(value, dict):
        return {k: _filled(v, memory_id) for k, v in value.items()}
    if isinstance(value, list):
        return [_filled(v, memory_id) for v in value]
    return value


@pytest.mark.parametrize("case", sorted(SYMLINK_CASES))
def test_a_symlink_inside_the_home_is_not_followed_out_of_it(case: str, tmp_path: Path) -> None:
    links, calls = SYMLINK_CASES[case]
    sandbox = Sandbox(tmp_path, [LINKS[name] for name in links])
    findings = Findings()
    with running(sandbox) as server:
        watcher = Watcher(server, findings)
        memory_id = watcher.ok("save_memory", content="a memory to refile")["id"]
        for name, arguments in calls:
            if name == "prompt":
                if CANARY in server.prompt(arguments["name"]):
                    findings.leaks.setdefault(f"prompt {arguments['name']}", []).append("{}")
            else:
                watcher.call(name, _filled(arguments, memory_id))
    assert not findings.outside and not findings.leaks, (
        f"a symlink planted in the home ({', '.join(LINKS[n].inside for n in links)}) was followed out of it:\n"
        + findings.report()
    )


# --------------------------------------------------------------------------------------- focused crash checks
@pytest.mark.parametrize("argument", ["created_after", "created_before"])
@pytest.mark.parametrize("moment", ["0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00"])
def test_search_memory_refuses_a_date_out_of_range_in_utc_with_a_clear_error(
    argument: str, moment: str, tmp_path: Path
) -> None:
    """Found by the fuzzing (fixed since): valid ISO 8601 with an offset, but outside datetime's range once
    converted to UTC, crashed search_memory (OverflowError, reported as a bare "Error executing tool")."""
    with running(Sandbox(tmp_path, [])) as server:
        result = server.call("search_memory", {"query": "anything", argument: moment})
        problem = problem_with("search_memory", result, server.crashes)
        server.assert_alive()
    assert problem is None, f"search_memory({argument}={moment!r}) answered with {problem}"


SMALL_HOME = [f"memory number {i} about alpha beta gamma delta epsilon" for i in range(20)]  # 140 word pairs


def test_a_small_home_writes_its_index_snapshot(tmp_path: Path) -> None:
    """Found by the fuzzing (fixed since): with 128 to 254 adjacent word pairs over all memories (here 20 short
    memories), writing the index snapshot failed (bm25._hot_pairs sliced with a negative bound below
    HOT_PAIR_DOCS pairs), so the server raised as it shut down and a home without a snapshot could not open."""
    sandbox = Sandbox(tmp_path, [])
    server = Server(sandbox)
    for content in SMALL_HOME:
        assert problem_with("save_memory", server.call("save_memory", {"content": content}), server.crashes) is None
    try:
        server.close()
    except Exception as exc:
        pytest.fail(f"the server failed as it shut down: {traceback.format_exception_only(exc)[-1]}")
    shutil.rmtree(sandbox.home / "index")
    try:
        Server(sandbox).close()
    except Exception as exc:
        pytest.fail(f"the server could not start on a home without an index: {traceback.format_exception_only(exc)}")


# ------------------------------------------------------------------------------------------- the import paths
def one_field_changed(bases: list[dict[str, Any]], strings: st.SearchStrategy[str]) -> st.SearchStrategy[Any]:
    """A valid record (one of `bases`) with one field given a hostile value, dropped, or added."""
    hostile = weighted((4, strings), (1, json_values(strings)), (1, DATETIMES), (1, NUMBERS), (1, st.just(DROP)))
    fields = sorted({name for base in bases for name in base} | {"store", "type", "extra"})
    return st.builds(_changed, st.sampled_from(bases), st.sampled_from(fields), hostile)


DROP = object()  # as a hostile value: the field is left out


def _changed(base: dict[str, Any], name: str, value: Any) -> dict[str, Any]:
    record = dict(base)
    if value is DROP:
        record.pop(name, None)
    else:
        record[name] = value
    return record


NOW = datetime.now(UTC).isoformat()
MEMORY_RECORDS = [
    {"content": "an imported memory about Alice"},
    {
        "content": "an imported preference: light mode",
        "category": "imported/preferences",
        "tags": ["ui"],
        "metadata": {"source": "backup"},
        "importance": 0.7,
        "created_at": "2024-05-01T09:00:00Z",
        "id": "c0ffee0000d1",
    },
    {"content": "filed under the linked folder", "category": "evil"},
    {"content": "filed under a folder in the linked one", "category": "evil/sub", "id": "c0ffee0000d2"},
]
REFERENCE_RECORDS = [
    {"type": "entity", "name": "John_Smith", "entityType": "person", "observations": ["likes tea", "lives in Oslo"]},
    {"type": "entity", "name": "Acme Corp", "entityType": "organization", "observations": []},
    {"type": "relation", "from": "John_Smith", "to": "Acme Corp", "relationType": "works at"},
]
STORE_RECORDS = [
    {"store": "entity", "id": "c0ffee0000a1", "name": "Imported", "type": "person", "created_at": NOW},
    {"store": "entity", "id": "c0ffee0000a2", "name": "Other", "aliases": ["o"], "metadata": {"k": "v"}}
    | {"created_at": NOW},
    {
        "store": "triple",
        "id": "c0ffee0000b1",
        "subject": "c0ffee0000a1",
        "predicate": "knows",
        "object": "c0ffee0000a2",
        "confidence": 0.9,
        "created_at": NOW,
    },
    {"store": "working", "key": "shared/team/imported", "data": "d", "tags": []}
    | {"created_at": NOW, "expires_at": FAR_FUTURE},
    {"store": "working", "key": "shared/team/leak", "data": "d", "created_at": NOW, "expires_at": FAR_FUTURE},
    {"store": "feedback", "id": "c0ffee0000c1", "type": "Correction", "content": "c", "session_id": "s", "at": NOW},
]


def _entry_record(strings: st.SearchStrategy[str]) -> st.SearchStrategy[dict[str, Any]]:
    anything = json_values(strings)
    field_values = {
        "content": weighted((4, strings), (1, anything)),
        "id": weighted((3, strings), (1, anything)),
        "category": weighted((3, strings), (1, anything)),
        "tags": weighted((3, st.lists(strings, max_size=4)), (1, anything)),
        "metadata": weighted((3, st.dictionaries(strings, strings, max_size=3)), (1, anything)),
        "importance": weighted((3, NUMBERS), (1, anything)),
        "created_at": weighted((3, DATETIMES), (1, anything)),
        "updated_at": DATETIMES,
        "archived_at": DATETIMES,
        "superseded_by": strings,
        "reinforcement_count": NUMBERS,
        "last_seen_at": DATETIMES,
    }
    random = st.fixed_dictionaries({}, optional=field_values)
    return weighted((3, one_field_changed(MEMORY_RECORDS, strings)), (1, random))


def _graph_record(strings: st.SearchStrategy[str]) -> st.SearchStrategy[dict[str, Any]]:
    anything = json_values(strings)
    text_or_any = weighted((4, strings), (1, anything))
    random = st.fixed_dictionaries(
        {"type": weighted((6, st.sampled_from(["entity", "relation"])), (1, text_or_any))},
        optional={
            "name": text_or_any,
            "entityType": weighted((2, st.sampled_from(["person", "Project Thing", "concept"])), (2, text_or_any)),
            "observations": weighted((4, st.lists(strings, max_size=4)), (1, anything)),
            "from": text_or_any,
            "to": text_or_any,
            "relationType": text_or_any,
        },
    )
    return weighted((3, one_field_changed(REFERENCE_RECORDS, strings)), (1, random))


def _backup_record(strings: st.SearchStrategy[str]) -> st.SearchStrategy[dict[str, Any]]:
    """Lines of a whole-home backup: memories and store-tagged entities, triples, working entries, feedback."""
    return weighted((4, one_field_changed(STORE_RECORDS, strings)), (1, one_field_changed(MEMORY_RECORDS, strings)))


def _dumped(record: dict[str, Any]) -> str:
    return json.dumps(record, ensure_ascii=False)  # NaN and Infinity as Python writes them


BIG_LINES = {
    "'[' * 100_000 + ']' * 100_000": "[" * 100_000 + "]" * 100_000,
    "content: '[' * 5_000 + ']' * 5_000": '{"content": ' + "[" * 5_000 + "]" * 5_000 + "}",
    "entity name: '{' * 3_000 + '}' * 3_000": '{"type": "entity", "name": ' + "{" * 3_000 + "}" * 3_000 + "}",
    "content: 'x' * 1_000_001": '{"content": "' + "x" * 1_000_001 + '"}',
    "observation: 'o' * 1_000_001": '{"type": "entity", "name": "big", "observations": ["' + "o" * 1_000_001 + '"]}',
}


def big_line(description: str) -> str:
    return BIG_LINES[description]


MALFORMED = weighted(
    (
        4,
        st.sampled_from(
            [
                "{",
                "[",
                "}",
                "{not json",
                "null",
                "[]",
                "[1, 2]",
                "1",
                '"text"',
                "true",
                '{"content": }',
                '{"content": "unterminated',
                '\ufeff{"content": "after a BOM"}',
                '{"content": "a"} trailing',
                '{"content": "x", "content": 1}',
                '{"content": NaN}',
                '{"content": "x", "importance": Infinity}',
                "\x00",
                "   ",
                "",
            ]
        ),
    ),
    (1, st.sampled_from(sorted(BIG_LINES)).map(big_line)),
)


def import_lines(record: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[list[str | bytes]]:
    text_line = weighted((5, record.map(_dumped)), (2, MALFORMED), (1, ODD_TEXT))
    byte_line = weighted(
        (3, text_line.map(lambda line: line.encode("utf-8"))),
        (1, st.binary(max_size=40)),
        (1, st.sampled_from([b"\xff\xfe{", b'{"content": "\xc3"}', b"\xed\xa0\x80", b"\x00\x00"])),
    )
    return st.lists(weighted((3, text_line), (1, byte_line)), max_size=6)


def _blank(line: str | bytes) -> bool:
    try:
        text = line.decode("utf-8") if isinstance(line, bytes) else line
    except UnicodeDecodeError:
        return False
    return not text.strip()


def _import_pool(sandbox: Sandbox) -> set[str]:
    return {"evil", "evil/sub", LINKED_MEMORY_ID, str(sandbox.outside), "../../outside", "keepthisid01", "Alice"}


class OutsideWatch:
    """What changed beside the home, with the first lines that changed it."""

    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox, self.seen = sandbox, sandbox.baseline
        self.changes: dict[str, str] = {}

    def check(self, lines: list[str | bytes]) -> None:
        now = self.sandbox.snapshot()
        for change in Sandbox.differences(self.seen, now):
            self.changes.setdefault(grouped(change), repr([line[:120] for line in lines])[:600])
        self.seen = now

    def report(self) -> str:
        return "\n".join(f"{change}; by the lines {lines}" for change, lines in sorted(self.changes.items()))


def check_import_errors(errors: list[Any], lines: list[str | bytes]) -> None:
    numbers = [error.line for error in errors]
    assert numbers == sorted(numbers) and all(1 <= n <= len(lines) for n in numbers), numbers
    assert all(e.error.strip() and "\n" not in e.error for e in errors), errors


def test_import_jsonl_reports_bad_lines_and_never_raises(tmp_path: Path) -> None:
    sandbox = Sandbox(tmp_path, [LINKS["memory-folder"]])
    memory = MemoryService(Settings.load({"home": sandbox.home}, env={}))
    watch = OutsideWatch(sandbox)
    try:

        @settings(FUZZ_SETTINGS, max_examples=IMPORT_EXAMPLES)
        @given(lines=import_lines(_entry_record(texts(_import_pool(sandbox)))))
        def fuzz(lines: list[str | bytes]) -> None:
            report = import_jsonl(memory, lines)
            check_import_errors(report.errors, lines)
            assert len(set(e.line for e in report.errors)) == len(report.errors)
            assert report.imported + len(report.errors) == sum(not _blank(line) for line in lines)
            watch.check(lines)

        fuzz()
    finally:
        memory.close()
    assert not watch.changes, f"import_jsonl wrote outside the home (through a symlink in it):\n{watch.report()}"


@dataclass
class OpenHome:
    sandbox: Sandbox
    settings: Settings
    memory: MemoryService
    graph: GraphService
    watch: OutsideWatch


@contextmanager
def open_home(root: Path, links: list[str]) -> Iterator[OpenHome]:
    """A sandbox with these links planted, its memory and graph services open (closed after)."""
    sandbox = Sandbox(root, [LINKS[name] for name in links])
    home_settings = Settings.load({"home": sandbox.home}, env={})
    memory = MemoryService(home_settings)
    graph = GraphService(home_settings)
    try:
        yield OpenHome(sandbox, home_settings, memory, graph, OutsideWatch(sandbox))
    finally:
        graph.close()
        memory.close()


def test_import_reference_graph_reports_bad_lines_and_never_raises(tmp_path: Path) -> None:
    with open_home(tmp_path, ["memory-folder"]) as home:

        @settings(FUZZ_SETTINGS, max_examples=IMPORT_EXAMPLES)
        @given(lines=import_lines(_graph_record(texts(_import_pool(home.sandbox)))))
        def fuzz(lines: list[str | bytes]) -> None:
            report = import_reference_graph(home.graph, home.memory, lines)
            check_import_errors(report.errors, lines)
            assert report.entities_created <= report.entities and report.triples_created <= report.triples
            assert report.entities + report.triples <= sum(not _blank(line) for line in lines)
            home.watch.check(lines)

        fuzz()
    watch = home.watch
    assert not watch.changes, f"import_reference_graph wrote outside the home:\n{watch.report()}"


# Read tools run over a home a fuzzed backup was restored into: what it let in must not break them.
AFTER_RESTORE: TOOL_CALLS = [
    ("find_entities", {}),
    ("find_entities", {"query": "Imported Other"}),
    ("get_entity", {"name_or_id": "Imported"}),
    ("traverse_graph", {"start": "c0ffee0000a1", "max_hops": 3}),
    ("recall", {"message": "What do Imported and Other know? Alice?"}),
    ("search_memory", {}),
    ("list_working_memory", {"namespace": "shared"}),
    ("search_working_memory", {"namespace": "shared", "query": "d"}),
    ("get_from_working_memory", {"key": "shared/team/imported"}),
    ("dream", {"mode": "agent", "dream_pass": "entities"}),
    ("dream", {"mode": "agent", "dream_pass": "graph"}),
    ("dream", {"mode": "agent", "dream_pass": "anti-patterns"}),
    ("dream", {"mode": "deterministic", "dry_run": True}),
]


def test_restoring_a_backup_reports_bad_lines_and_leaves_a_working_home(tmp_path: Path) -> None:
    """import_jsonl with the other stores (`rockmem-mcp import` of an export): store-tagged entities, triples,
    working entries and feedback besides memories. Then the read tools still answer over what was restored."""
    with open_home(tmp_path, ["memory-folder", "working-file", "feedback-log"]) as home:

        @settings(FUZZ_SETTINGS, max_examples=IMPORT_EXAMPLES)
        @given(lines=import_lines(_backup_record(texts(_import_pool(home.sandbox)))))
        def fuzz(lines: list[str | bytes]) -> None:
            report = import_jsonl(home.memory, lines, others=HomeStores(home.settings, home.graph))
            check_import_errors(report.errors, lines)
            assert report.imported + len(report.errors) <= sum(not _blank(line) for line in lines)
            assert all(reason.strip() for reason in report.skipped), report.skipped
            home.watch.check(lines)

        fuzz()
    sandbox, watch = home.sandbox, home.watch
    findings = Findings()
    with running(sandbox) as server:
        watcher = Watcher(server, findings)
        for name, arguments in AFTER_RESTORE:
            watcher.call(name, arguments)
    assert not watch.changes, f"restoring a backup wrote outside the home:\n{watch.report()}"
    assert not findings.outside and not findings.leaks, findings.report()


@pytest.mark.parametrize("importer", ["jsonl", "reference-graph"])
@pytest.mark.parametrize(
    "line", ["[" * 100_000 + "]" * 100_000, '{"content": ' + "[" * 5_000 + "]" * 5_000 + "}"], ids=["array", "field"]
)
def test_a_deeply_nested_line_is_reported_not_raised(importer: str, line: str, tmp_path: Path) -> None:
    """Found by the fuzzing (fixed since): JSON nested deeper than the parser's recursion limit raised
    RecursionError out of both importers; it is a bad line like any other."""
    home_settings = Settings.load({"home": tmp_path / "home"}, env={})
    memory = MemoryService(home_settings)
    graph = GraphService(home_settings)
    good = json.dumps({"content": "a good line", "type": "entity", "name": "Alice"})
    try:
        if importer == "jsonl":
            report = import_jsonl(memory, [line, good])
            assert report.imported == 1
        else:
            report = import_reference_graph(graph, memory, [line, good])
            assert report.entities == 1
        assert [error.line for error in report.errors] == [1]
    finally:
        graph.close()
        memory.close()


@pytest.mark.parametrize("store", [[], {}, ["entity"], 1, None, True], ids=repr)
def test_a_backup_line_whose_store_is_not_text_is_reported_not_raised(store: Any, tmp_path: Path) -> None:
    """Found by the fuzzing: HomeStores.add looks the "store" value up in a dict, so a list or an object
    there raises TypeError out of import_jsonl (`rockmem-mcp import`) instead of being a bad line."""
    home_settings = Settings.load({"home": tmp_path / "home"}, env={})
    memory = MemoryService(home_settings)
    graph = GraphService(home_settings)
    lines = [json.dumps({"store": store, "id": "c0ffee0000a1"}), json.dumps({"content": "a good line"})]
    try:
        report = import_jsonl(memory, lines, others=HomeStores(home_settings, graph))
    finally:
        graph.close()
        memory.close()
    assert report.imported == 1
    assert [error.line for error in report.errors] == [1]
