"""Embeddings in the memory service: background vectors, the cache, model changes, failures, hybrid search."""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from rockmem_mcp import vector_worker
from rockmem_mcp.config import Settings
from rockmem_mcp.errors import EmbeddingError, InvalidInputError
from rockmem_mcp.memory.service import SNAPSHOT_NAME, MemoryService
from rockmem_mcp.search import static_model
from rockmem_mcp.search.embeddings import Model2VecEmbeddings
from rockmem_mcp.search.onnx_embeddings import OnnxEmbeddings
from rockmem_mcp.search.static_model import StaticEmbeddings
from rockmem_mcp.search.vectors import STAMP_BYTES
from rockmem_mcp.vector_worker import PROBE_TEXT, Embedder, open_provider
from tests.embedding_server import SHARED_MODEL, SHARED_MODEL_MISSING
from tests.unit.helpers import FakeProvider, Services

FAILED = "search ranks by BM25 alone"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def embedder_for(settings: Settings, provider: FakeProvider | None, clock: Clock | None = None) -> Embedder:
    configured = settings.model_copy(update={"embedding_model": "given"})
    return Embedder(configured, opener=lambda _: provider, clock=clock or Clock())


def open_with(services: Services, provider: FakeProvider, **kwargs: object) -> MemoryService:
    return services.open(embedder=embedder_for(services.settings, provider), **kwargs)  # type: ignore[arg-type]


def embedded(service: MemoryService) -> MemoryService:
    assert service.vector_worker.idle.wait(10), "the vector worker did not finish"
    return service


def bin_files(settings: Settings) -> dict[str, int]:
    root = settings.embeddings_dir
    return {p.stem: p.stat().st_size for p in root.glob("*.bin")} if root.exists() else {}


def failure_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if FAILED in r.getMessage()]


# ---------------------------------------------------------------------- background vectors and the cache
def test_saves_get_vectors_in_the_background_and_cached_files(services: Services) -> None:
    provider = FakeProvider(dim=32)
    service = open_with(services, provider)
    saved = [service.save(text) for text in ("green tea in the morning", "deploys go out on fridays")]
    embedded(service)
    assert service.missing_vector_count() == 0
    assert bin_files(services.settings) == {e.id: STAMP_BYTES + 32 * 4 for e in saved}
    record = (services.settings.embeddings_dir / "model.json").read_text()
    assert '"fake-a"' in record and '"dim": 32' in record
    cached = service.vector_files.read(saved[0].id, saved[0].document_text(), 32)
    assert cached is not None
    slot = service.index.bm25.slot_of[saved[0].id]
    assert np.allclose(cached, service.index.vectors.rows([slot])[0], atol=np.abs(cached).max() / 254 + 1e-7)


def test_a_save_never_waits_for_its_embedding(services: Services) -> None:
    gate = threading.Event()  # holds every background embedding call
    service = open_with(services, FakeProvider(gate=gate))
    saved = service.save("the boiler is serviced every october")
    found = service.search("boiler", mode="hybrid")
    # The entry is found by its keywords while its vector is still being made.
    assert [hit.entry.id for hit in found.results] == [saved.id]
    assert found.unembedded == 1
    gate.set()
    embedded(service)
    assert service.search("boiler").unembedded == 0


def test_vectors_survive_a_restart_in_the_snapshot(services: Services) -> None:
    provider = FakeProvider()
    service = embedded(open_with(services, provider))
    service.save("nightly backups at two")
    embedded(service)
    services.close(service)
    again = FakeProvider()
    reopened = embedded(open_with(services, again))
    assert reopened.missing_vector_count() == 0
    assert again.document_calls() == []  # nothing embedded twice


def test_lost_snapshot_reuses_the_cached_vectors(services: Services) -> None:
    service = open_with(services, FakeProvider())
    service.save("nightly backups at two")
    embedded(service)
    services.close(service)
    (services.settings.index_dir / SNAPSHOT_NAME).unlink()
    again = FakeProvider()
    reopened = embedded(open_with(services, again))
    assert reopened.missing_vector_count() == 0
    assert again.document_calls() == []


def test_an_update_makes_a_new_vector_and_a_stale_cache_is_not_reused(services: Services) -> None:
    provider = FakeProvider()
    service = open_with(services, provider)
    saved = service.save("the office is in lisbon")
    embedded(service)
    bin_path = services.settings.embeddings_dir / f"{saved.id}.bin"
    old_vector = bin_path.read_bytes()
    service.update(saved.id, content="the office moved to porto")
    embedded(service)
    assert "the office moved to porto" in provider.document_calls()
    assert bin_path.read_bytes() != old_vector
    found = service.search("porto", mode="vector", limit=1)
    assert found.results[0].entry.id == saved.id


def test_permanent_delete_removes_the_cached_vector(services: Services) -> None:
    service = open_with(services, FakeProvider())
    saved = service.save("temporary note")
    embedded(service)
    assert saved.id in bin_files(services.settings)
    service.delete(saved.id, permanent=True)
    assert saved.id not in bin_files(services.settings)


def test_a_model_change_rebuilds_every_vector(services: Services, caplog: pytest.LogCaptureFixture) -> None:
    service = open_with(services, FakeProvider("model-a", dim=16))
    saved = [service.save(f"fact number {word}") for word in ("one", "two", "three")]
    embedded(service)
    services.close(service)
    assert set(bin_files(services.settings).values()) == {STAMP_BYTES + 16 * 4}

    caplog.set_level(logging.WARNING)
    provider_b = FakeProvider("model-b", dim=24)
    reopened = embedded(open_with(services, provider_b))
    assert reopened.index.vectors.model_id == "model-b" and reopened.index.vectors.dim == 24
    assert sorted(provider_b.document_calls()) == sorted(e.content for e in saved)
    assert bin_files(services.settings) == {e.id: STAMP_BYTES + 24 * 4 for e in saved}
    assert '"model-b"' in (services.settings.embeddings_dir / "model.json").read_text()
    assert any("embedding model changed" in r.getMessage() for r in caplog.records)


def test_another_process_reuses_the_cached_vector(services: Services) -> None:
    writer = open_with(services, FakeProvider())
    reader_provider = FakeProvider()
    reader = embedded(open_with(services, reader_provider))
    saved = writer.save("shared across processes")
    embedded(writer)
    assert [h.entry.id for h in reader.search("processes").results] == [saved.id]  # reads the journal
    embedded(reader)
    assert reader.missing_vector_count() == 0
    assert reader_provider.document_calls() == []


def test_drain_embeds_everything_in_the_foreground_with_progress(services: Services) -> None:
    service = open_with(services, FakeProvider(), embed_in_background=False)
    service.vector_worker.batch_size = 4
    for i in range(10):
        service.save(f"entry {i}")
    seen: list[tuple[int, int]] = []
    assert service.vector_worker.drain(lambda done, total: seen.append((done, total))) == 10
    assert seen == [(4, 10), (8, 10), (10, 10)]
    assert service.missing_vector_count() == 0


def test_drain_without_a_provider_is_a_clear_error(services: Services) -> None:
    service = services.open(embed_in_background=False)
    with pytest.raises(EmbeddingError, match="ROCKMEM_EMBEDDING_MODEL"):
        service.vector_worker.drain()


# ---------------------------------------------------------------------- modes and fallbacks
def test_modes_and_what_the_reply_says(services: Services) -> None:
    service = embedded(open_with(services, FakeProvider()))
    service.save("green tea in the morning")
    embedded(service)
    assert service.search("tea").mode == "hybrid"
    assert service.search("tea", mode="bm25").mode == "bm25"
    assert service.search("tea", mode="rockbot").mode == "rockbot"
    assert service.search(None).mode == "newest"
    with pytest.raises(InvalidInputError, match="mode must be one of hybrid, bm25, vector, rockbot"):
        service.search("tea", mode="semantic")


def test_without_embeddings_hybrid_is_bm25_and_vector_is_refused(services: Services) -> None:
    service = services.open()
    service.save("green tea in the morning")
    assert service.search("tea").mode == "bm25"
    with pytest.raises(InvalidInputError, match="mode 'vector' needs embeddings"):
        service.search("tea", mode="vector")


def test_provider_failure_falls_back_to_bm25_and_is_logged_once(
    services: Services, caplog: pytest.LogCaptureFixture
) -> None:
    provider = FakeProvider()
    clock = Clock()
    service = services.open(embedder=embedder_for(services.settings, provider, clock))
    saved = service.save("green tea in the morning")
    embedded(service)
    caplog.set_level(logging.WARNING)
    provider.failure = EmbeddingError("endpoint down")
    for _ in range(5):
        found = service.search("green tea")
        assert found.mode == "bm25" and [h.entry.id for h in found.results] == [saved.id]
    assert len(failure_lines(caplog)) == 1
    queries = [c for c in provider.calls if c[1]]
    assert len(queries) == 1  # the failing call; then the provider is left alone while it rests
    clock.now += services.settings.embedding_retry_after_s
    provider.failure = None
    assert service.search("green tea").mode == "hybrid"
    assert any("work again" in r.getMessage() for r in caplog.records)


def test_wrong_dimension_from_the_provider_falls_back_to_bm25(
    services: Services, caplog: pytest.LogCaptureFixture
) -> None:
    provider = FakeProvider(dim=16)
    service = embedded(open_with(services, provider))
    service.save("green tea in the morning")
    embedded(service)
    caplog.set_level(logging.WARNING)
    provider.dim_override = 8
    assert service.search("green tea").mode == "bm25"
    assert service.search("green tea").mode == "bm25"
    assert len(failure_lines(caplog)) == 1
    assert "8-dimensional" in failure_lines(caplog)[0]


def test_an_unusable_local_model_warns_once_and_search_stays_bm25(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = Settings(home=tmp_path / "home", embedding_model=str(tmp_path / "no-such-model"))
    caplog.set_level(logging.WARNING)
    service = MemoryService(settings)
    try:
        service.save("green tea in the morning")
        assert service.vector_worker.idle.wait(10)
        assert service.search("tea").mode == "bm25"
        assert service.search("tea").mode == "bm25"
    finally:
        service.close()
    warnings = [r.getMessage() for r in caplog.records if "embeddings are off" in r.getMessage()]
    assert len(warnings) == 1 and "no-such-model" in warnings[0]


def test_endpoint_without_a_model_name_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(EmbeddingError, match="ROCKMEM_EMBEDDING_MODEL is not"):
        open_provider(Settings(home=tmp_path, embedding_endpoint="http://127.0.0.1:9"))  # embeddings: the default


def test_no_settings_means_the_bundled_transformer_and_static_is_one_setting_away(tmp_path: Path) -> None:
    provider = open_provider(Settings(home=tmp_path))  # embeddings: the default
    assert isinstance(provider, OnnxEmbeddings) and provider.model_id == "onnx:minilm-l3-int8@1+whole-known"
    assert isinstance(open_provider(Settings(home=tmp_path, embedding_model="Bundled")), OnnxEmbeddings)
    static = open_provider(Settings(home=tmp_path, embedding_model="static"))
    assert isinstance(static, StaticEmbeddings)
    assert static.model_id == "static:rockmem-minilm-l6-static-256-sif3+whole-known"


def test_without_onnxruntime_the_default_falls_back_to_the_static_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # what a platform without its wheel looks like
    with caplog.at_level(logging.WARNING):
        assert isinstance(open_provider(Settings(home=tmp_path)), StaticEmbeddings)  # embeddings: the default
    assert "static model instead" in caplog.text


@pytest.mark.parametrize("off", ["off", "OFF", " off "])
def test_off_means_no_provider_even_with_an_endpoint(tmp_path: Path, off: str) -> None:
    settings = Settings(home=tmp_path, embedding_model=off, embedding_endpoint="http://127.0.0.1:9")
    assert open_provider(settings) is None
    assert not Embedder(settings).configured


def test_with_no_settings_saves_get_bundled_vectors_and_hybrid_finds_a_paraphrase(tmp_path: Path) -> None:
    service = MemoryService(Settings(home=tmp_path / "home"), embed_in_background=False)  # embeddings: the default
    try:
        taxes = service.save("Quarterly taxes are due on the fifteenth")
        service.save("The staging deploy needs the VPN turned on first")
        service.vector_worker.drain()
        assert service.missing_vector_count() == 0
        assert service.search("When do I have to pay the IRS?", mode="bm25").results == []
        hybrid = service.search("When do I have to pay the IRS?")
        assert hybrid.mode == "hybrid" and [hit.entry.id for hit in hybrid.results][:1] == [taxes.id]
    finally:
        service.close()


def test_a_broken_static_model_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vector_worker, "bundled_path", lambda: tmp_path / "missing")
    monkeypatch.setattr(static_model, "bundled_path", lambda: tmp_path / "missing")
    with pytest.raises(EmbeddingError, match="ROCKMEM_EMBEDDING_MODEL=off"):
        open_provider(Settings(home=tmp_path, embedding_model="static"))


# ---------------------------------------------------------------------- the shared local model
@pytest.mark.skipif(not SHARED_MODEL.exists(), reason=SHARED_MODEL_MISSING)
def test_local_model_vectors_are_unit_float32() -> None:
    vectors = Model2VecEmbeddings(str(SHARED_MODEL)).embed(["my cat", "a tabby naps"])
    assert vectors.dtype == np.float32 and vectors.shape == (2, 256)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


@pytest.mark.skipif(not SHARED_MODEL.exists(), reason=SHARED_MODEL_MISSING)
def test_hybrid_finds_a_paraphrase_that_bm25_misses(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path / "home", embedding_model=str(SHARED_MODEL))
    service = MemoryService(settings, embed_in_background=False)
    try:
        cat = service.save("Whiskerino, the tabby, naps on the windowsill every afternoon")
        for text in ("The staging deploy needs the VPN turned on first", "Quarterly taxes are due on the fifteenth"):
            service.save(text)
        service.vector_worker.drain()
        assert service.search("my cat", mode="bm25").results == []
        hybrid = service.search("my cat")
        assert hybrid.mode == "hybrid" and [h.entry.id for h in hybrid.results] == [cat.id]
    finally:
        service.close()


def test_a_search_does_not_wait_long_for_a_provider_still_opening(services: Services) -> None:
    opening, release = threading.Event(), threading.Event()
    provider = FakeProvider()

    def slow_open(_: Settings) -> FakeProvider:  # a model still downloading or loading
        opening.set()
        assert release.wait(30)
        return provider

    settings = services.settings.model_copy(update={"embedding_model": "slow", "embedding_query_timeout_s": 0.1})
    service = services.open(settings=settings, embedder=Embedder(settings, opener=slow_open))
    saved = service.save("green tea in the morning")
    assert opening.wait(10)
    found = service.search("green tea")
    assert found.mode == "bm25" and [h.entry.id for h in found.results] == [saved.id]
    release.set()
    embedded(service)
    assert service.search("green tea").mode == "hybrid"


def test_without_embeddings_configured_vectors_stay_on_disk_but_out_of_memory(services: Services) -> None:
    service = open_with(services, FakeProvider())
    service.save("green tea in the morning")
    embedded(service)
    services.close(service)
    plain = services.open()
    assert plain.index.vectors.dim == 0  # a 100k home would otherwise carry 100 MB it cannot use
    plain.save("another note")  # its close writes a snapshot without vectors
    services.close(plain)
    provider = FakeProvider()
    again = embedded(open_with(services, provider))
    assert again.missing_vector_count() == 0
    assert provider.document_calls() == ["another note"]  # the first entry's vector came from the cache


def test_one_refused_entry_does_not_block_the_others_or_rest_the_provider(
    services: Services, caplog: pytest.LogCaptureFixture
) -> None:
    provider = FakeProvider()
    provider.refuse = ("POISON",)
    service = open_with(services, provider, embed_in_background=False)
    service.vector_worker.batch_size = 8
    saved = [service.save(f"note {i}" + (" POISON" if i == 2 else "")) for i in range(20)]
    caplog.set_level(logging.WARNING)
    service.vector_worker.drain()
    assert service.missing_vector_count() == 1  # only the refused one
    assert any(saved[2].id in r.getMessage() and "refused" in r.getMessage() for r in caplog.records)
    assert failure_lines(caplog) == []  # the provider was not put to rest
    assert service.search("note").mode == "hybrid"
    service.update(saved[2].id, content="note 2, fixed")  # a changed entry gets a new try
    service.vector_worker.drain()
    assert service.missing_vector_count() == 0


def test_a_query_the_provider_refuses_is_ranked_by_bm25_without_resting_it(services: Services) -> None:
    provider = FakeProvider()
    service = embedded(open_with(services, provider))
    service.save("green tea in the morning")
    embedded(service)
    provider.refuse = ("unembeddable",)
    assert service.search("green tea unembeddable").mode == "bm25"
    provider.refuse = ()
    assert service.search("green tea").mode == "hybrid"


def test_entries_whose_files_vanished_do_not_stall_the_backfill(services: Services) -> None:
    service = open_with(services, FakeProvider(), embed_in_background=False)
    service.vector_worker.batch_size = 4
    saved = [service.save(f"note {i}") for i in range(10)]
    for entry in saved[:6]:  # removed by hand: more than a batch of missing slots leads nowhere
        service.files.path_for(entry.id, None).unlink()
    assert service.vector_worker.drain() == 4
    assert service.missing_vector_count() == 0


def test_vectors_made_for_an_index_that_was_since_reloaded_are_dropped(services: Services) -> None:
    service = open_with(services, FakeProvider(), embed_in_background=False)
    service.save("green tea in the morning")
    service.embedder.open()
    service.embedder.probe()
    service.adopt_vectors(service.embedder.model_id, service.embedder.dim)
    with service.lock:
        jobs = service.missing_vectors(10)
    service._generation += 1  # what a journal-gap reload does
    vectors = np.ones((1, service.embedder.dim), dtype=np.float32)
    with service.lock:
        assert service.store_vectors(jobs, vectors) == []
    assert service.missing_vector_count() == 1


def test_an_unwritable_cache_folder_costs_the_cache_not_the_vectors(services: Services) -> None:
    services.settings.home.mkdir(parents=True, exist_ok=True)
    services.settings.embeddings_dir.write_text("not a folder")
    service = open_with(services, FakeProvider())
    service.save("green tea in the morning")
    embedded(service)
    assert service.missing_vector_count() == 0
    assert service.search("tea").mode == "hybrid"


def test_a_stop_while_the_worker_probes_its_model_ends_the_worker(services: Services) -> None:
    """A model that loads or probes slowly (the ONNX one): stop() arriving meanwhile still ends the thread,
    which once cleared the wake-up after it and slept until the join gave up."""
    gate = threading.Event()
    service = open_with(services, FakeProvider(gate=gate))
    worker = service.vector_worker
    stopper = threading.Thread(target=worker.stop, kwargs={"timeout_s": 10})
    stopper.start()
    assert worker._stop.wait(10)  # stop() has signalled while the probe is held at the gate
    gate.set()
    stopper.join(15)
    assert worker._thread is not None and not worker._thread.is_alive()


# ---------------------------------------------------------------------- bursts of saves, the cache off the lock
class Watched(FakeProvider):
    """Sets `embedded_entries` once it has embedded texts of entries (the probe does not count)."""

    def __init__(self) -> None:
        super().__init__()
        self.embedded_entries = threading.Event()

    def embed(self, texts: Sequence[str], *, interactive: bool = False) -> np.ndarray:
        vectors = super().embed(texts, interactive=interactive)
        if not interactive and list(texts) != [PROBE_TEXT]:
            self.embedded_entries.set()
        return vectors


def entry_batches(provider: FakeProvider) -> list[list[str]]:
    return [texts for texts, interactive in provider.calls if not interactive and texts != [PROBE_TEXT]]


def held_clock(service: MemoryService) -> Clock:
    """The worker's clock, held still: a burst of saves is over when the test moves it on."""
    clock = Clock()
    service.vector_worker.clock = clock
    service.vector_worker.quiet_s, service.vector_worker.max_delay_s = 0.05, 0.5
    return clock


def test_a_burst_of_saves_is_embedded_in_one_batch_once_it_is_over(services: Services) -> None:
    provider = FakeProvider()
    service = embedded(open_with(services, provider))
    clock = held_clock(service)
    saved = [service.save(f"note {i} on the boiler service") for i in range(10)]
    assert service.missing_vector_count() == 10  # the saves returned; nothing embedded during the burst
    clock.now += 0.05  # no save for the quiet time: the burst is over
    embedded(service)
    assert entry_batches(provider) == [[e.document_text() for e in saved]]
    assert service.missing_vector_count() == 0


def test_a_steady_stream_of_saves_still_gets_vectors_within_the_longest_delay(services: Services) -> None:
    provider = Watched()
    service = embedded(open_with(services, provider))
    clock = held_clock(service)
    start = clock.now
    stream = []
    for k in range(13):  # one save every 0.04 s: never quiet for 0.05 s
        clock.now = start + k * 0.04
        stream.append(service.save(f"reading {k} of the boiler pressure"))
    clock.now = start + 0.5  # the longest delay after the first save, and the last one 0.02 s ago
    assert provider.embedded_entries.wait(10), "a stream that never pauses got no vectors"
    later = [service.save(f"reading {k} of the boiler pressure") for k in (13, 14)]
    clock.now += 1.0
    embedded(service)
    assert entry_batches(provider) == [[e.document_text() for e in stream], [e.document_text() for e in later]]


def test_a_save_never_waits_for_the_cache_file_of_a_vector(services: Services, monkeypatch: pytest.MonkeyPatch) -> None:
    """Cache files are written after the store's lock is released: a slow disk delays the cache, not saves."""
    service = embedded(open_with(services, FakeProvider()))
    writing, written = threading.Event(), threading.Event()
    release = threading.Event()
    write = service.vector_files.write

    def slow_write(*args: object) -> None:
        writing.set()
        release.wait(5)
        write(*args)  # type: ignore[arg-type]
        written.set()

    monkeypatch.setattr(service.vector_files, "write", slow_write)
    first = service.save("the boiler is serviced every october")
    assert writing.wait(10)
    second = service.save("the chimney is swept every spring")
    assert not written.is_set(), "the save waited for the vector cache's file write"
    release.set()
    embedded(service)
    assert service.missing_vector_count() == 0
    assert {first.id, second.id} <= set(bin_files(services.settings))


def test_a_few_saves_vectors_do_not_rewrite_the_snapshot_and_survive_a_crash_in_the_cache(
    services: Services,
) -> None:
    service = embedded(open_with(services, FakeProvider()))
    snapshot = services.settings.index_dir / SNAPSHOT_NAME
    written = (snapshot.stat().st_ino, snapshot.stat().st_mtime_ns)
    for text in ("green tea in the morning", "deploys go out on fridays", "the cat is called miso"):
        service.save(text)
    embedded(service)
    if service._snapshot_thread is not None:  # a background rewrite, if one was started
        service._snapshot_thread.join()
    assert service.missing_vector_count() == 0
    assert (snapshot.stat().st_ino, snapshot.stat().st_mtime_ns) == written  # one rewrite per save, before
    # A crash now (no close, no snapshot with the vectors): the next start takes them from the cache files.
    again = FakeProvider()
    after_crash = embedded(open_with(services, again))
    assert after_crash.missing_vector_count() == 0
    assert again.document_calls() == []


def test_a_cached_vector_of_a_text_the_entry_no_longer_has_is_never_reused(services: Services) -> None:
    """A vector cached just after an update (by a worker that embedded the text before it) is newer than
    the entry's file but not of its text: the stamp, not the file's age, decides."""
    service = open_with(services, FakeProvider())
    saved = service.save("the office is in lisbon")
    embedded(service)
    bin_path = services.settings.embeddings_dir / f"{saved.id}.bin"
    of_lisbon = bin_path.read_bytes()
    service.update(saved.id, content="the office moved to porto")
    embedded(service)
    services.close(service)
    bin_path.write_bytes(of_lisbon)  # written after the update
    (services.settings.index_dir / SNAPSHOT_NAME).unlink()
    again = FakeProvider()
    reopened = embedded(open_with(services, again))
    assert [t for t in again.document_calls() if "porto" in t] != []
    assert reopened.search("porto", mode="vector", limit=1).results[0].entry.id == saved.id


def test_torn_or_damaged_cache_files_are_embedded_again_and_never_break_a_start(services: Services) -> None:
    service = open_with(services, FakeProvider())
    saved = [service.save(text) for text in ("green tea in the morning", "deploys go out on fridays", "miso")]
    embedded(service)
    services.close(service)
    torn, damaged, kept = (services.settings.embeddings_dir / f"{e.id}.bin" for e in saved)
    torn.write_bytes(torn.read_bytes()[:20])  # a crash while the cache file was written
    data = bytearray(damaged.read_bytes())
    data[-3] ^= 0x55  # the right size, the wrong bytes
    damaged.write_bytes(bytes(data))
    (services.settings.index_dir / SNAPSHOT_NAME).unlink()
    again = FakeProvider()
    reopened = embedded(open_with(services, again))
    assert sorted(again.document_calls()) == sorted(e.document_text() for e in saved[:2])
    assert reopened.missing_vector_count() == 0
    assert kept.exists() and len(torn.read_bytes()) == len(kept.read_bytes())  # the torn file is made again


def test_the_longest_delay_counts_from_the_first_save_not_from_when_the_worker_got_to_run(
    services: Services,
) -> None:
    """On a busy machine the worker may run well after the save that woke it. A stream of saves must still get
    its vectors `max_delay_s` after its first save: the worker counts from that save's time (a held clock here,
    so a deadline counted from when the worker ran would never come)."""
    service = embedded(open_with(services, FakeProvider()))
    worker = service.vector_worker
    clock = held_clock(service)
    start = clock.now
    worker.wake()  # the first save of a stream, at `start`
    for k in range(1, 6):
        clock.now = start + k * 0.04
        worker.wake()
    passed = threading.Event()
    late = threading.Thread(target=lambda: (worker._let_burst_pass(), passed.set()), daemon=True)
    late.start()  # the worker gets to run only now, 0.2 s into the stream
    for k in range(6, 13):
        clock.now = start + k * 0.04
        worker.wake()
    clock.now = start + 0.5  # max_delay_s after the first save; the last one 0.02 s ago
    assert passed.wait(5), "the burst was still being waited for max_delay_s after its first save"
    worker.stop()
    late.join(1)


def test_a_backlog_waits_for_the_requests_being_answered(services: Services) -> None:
    """Issue 46: a backfill yields to requests. While one is in flight the worker embeds nothing; once it has
    ended (and a quiet moment passed) the backlog moves."""
    writer = services.open()  # no provider: saved without vectors, a backlog for the next start
    for i in range(5):
        writer.save(f"backlog memory number {i}", category="notes")
    writer.close()
    provider = FakeProvider()
    service = open_with(services, provider, embed_in_background=False)
    foreground = vector_worker.Foreground(quiet_s=0.05, patience_s=600)
    worker = vector_worker.VectorWorker(service.embedder, service, service.vector_files, foreground=foreground)
    with foreground.busy():
        worker.start()
        assert not worker.idle.wait(0.5), "the backlog was embedded while a request was being answered"
        assert provider.document_calls() == []
    assert worker.idle.wait(10), "the backlog did not move once the request was answered"
    assert len(provider.document_calls()) == 5
    worker.stop()
    service.close()


def waits(foreground: vector_worker.Foreground, stop: threading.Event) -> bool:
    """Whether wait_idle is still waiting after a moment."""
    waiting = threading.Thread(target=foreground.wait_idle, args=(stop,), daemon=True)
    waiting.start()
    waiting.join(0.5)
    return waiting.is_alive()


def test_the_wait_for_requests_ends_when_idle_at_a_stop_or_out_of_patience() -> None:
    patient = vector_worker.Foreground(quiet_s=600, patience_s=600)
    assert not waits(patient, threading.Event())  # nothing answered yet: no wait
    stop = threading.Event()
    with patient.busy():
        assert waits(patient, stop)
        stop.set()
        assert not waits(patient, stop)
    assert waits(patient, threading.Event())  # the quiet moment after a request
    impatient = vector_worker.Foreground(quiet_s=600, patience_s=0.05)
    with impatient.busy():
        assert not waits(impatient, threading.Event())


def test_the_wait_for_requests_says_whether_it_found_the_process_idle() -> None:
    quick = vector_worker.Foreground(quiet_s=0.01, patience_s=0.05)
    assert quick.wait_idle(threading.Event()) is True  # nothing in flight
    with quick.busy():
        assert quick.wait_idle(threading.Event()) is False  # out of patience, a request still in flight
        stopped = threading.Event()
        stopped.set()
        assert quick.wait_idle(stopped) is False


def test_a_caller_may_ask_for_a_longer_quiet_moment_than_the_instances() -> None:
    """The collector's first pass after a start waits for calls to pause longer than a backlog batch does
    (server/app.py, COLLECT_AFTER_QUIET_S), so a process that ends soon after its calls never makes it."""
    quick = vector_worker.Foreground(quiet_s=0.01, patience_s=0.2)
    with quick.busy():
        pass  # a request just ended
    assert quick.wait_idle(threading.Event(), quiet_s=600) is False  # out of patience before so long a quiet
    assert quick.wait_idle(threading.Event()) is True  # the instance's own quiet moment came
