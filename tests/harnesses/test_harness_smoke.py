"""Tiny runs of every benchmark harness, so they never rot. Structure only: tests never assert timings."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from benchmarks import locomo, longterm
from benchmarks.corpus import Corpus


def test_corpus_is_deterministic() -> None:
    assert list(Corpus(seed=3).records(5)) == list(Corpus(seed=3).records(5))
    assert Corpus(seed=3).queries(4) == Corpus(seed=3).queries(4)


def test_longterm_harness_runs_at_tiny_size(tmp_path: Path) -> None:
    home = longterm.build_home(300, root=tmp_path)
    queries = Corpus(seed=99).queries(10)
    local = longterm.in_process(home, queries)
    assert local["search"]["n"] == 10 and local["durable_save"]["n"] == 200
    stdio = anyio.run(longterm.over_stdio, home, queries[:3], 1)
    assert stdio["search_tool_call_python_sdk_client"]["n"] == 3
    assert longterm.raw_stdio(home, queries[:3])["search_tool_call_raw_jsonrpc"]["n"] == 3


@pytest.mark.skipif(
    not locomo.DEFAULT_DATA.exists(),
    reason=f"LoCoMo evaluation data absent at {locomo.DEFAULT_DATA} (shared/ is not beside the checkout)",
)
def test_locomo_harness_runs_on_one_conversation() -> None:
    report = locomo.run(locomo.DEFAULT_DATA, conversations=1, questions_per=15)
    assert report["questions"] == 15
    for method in ("rockmem_bm25", "plain_bm25"):
        overall = report["methods"][method]["overall"]
        assert overall["questions"] == 15
        recalls = [overall[f"turn_R@{k}"] for k in locomo.KS]
        assert recalls == sorted(recalls) and all(0 <= r <= 1 for r in recalls)
        assert overall["session_R@5"] >= overall["turn_R@5"]  # a turn hit is always a session hit
