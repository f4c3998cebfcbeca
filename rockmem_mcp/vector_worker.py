"""Embeddings at work: the provider's health, and the background worker that gives every entry a vector.

`Embedder` wraps the configured provider (one per process, shared by every store). It opens lazily, learns
the vector size from a probe, and when the provider fails it says so once in the log and is left alone
for `embedding_retry_after_s`: searches meanwhile rank by BM25 alone instead of waiting.

`VectorWorker` runs one thread per store: it asks the store which entries lack a vector, reuses a cached
`.bin` made from the same text, embeds the rest in batches, and hands the vectors back. A save never waits
for it: the save only notes the time and sets an event, and the worker lets a burst of saves pass
(`quiet_s` without a save, at most `max_delay_s` after the first) before it takes the store's lock, so a
stream of saves is embedded in a few batches instead of one wake-up, lock hand-over and snapshot per save.
Cache files are written after the lock is released, one per vector, so what a process embedded is kept even
when it exits without closing: the next start takes those vectors from the cache instead of the model.
`drain()` runs the same steps in the foreground for `rockmem-mcp reindex --embeddings` and `import`.

A backlog (memories imported without vectors) is embedded between requests: `FOREGROUND` counts the requests
this process is answering, and the worker waits before each batch of a backlog (a start's, or one a full batch
showed; a few fresh saves just go) until none is and none ended in the last
`YIELD_QUIET_S` (a model's calls come in bursts; a batch that began between two of them would take the cores
from the second), at most `YIELD_PATIENCE_S`, so a steady stream of requests still lets the backlog move.

`open_provider(settings)` picks the provider: an endpoint's model, a local model2vec or ONNX model, or the
bundled transformer when none is named; None when `ROCKMEM_EMBEDDING_MODEL=off` (search is then BM25 alone).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np

from rockmem_mcp.errors import EmbeddingError, EmbeddingRefused
from rockmem_mcp.search.embeddings import (
    EmbeddingProvider,
    Model2VecEmbeddings,
    OpenAIEmbeddings,
)
from rockmem_mcp.search.static_model import STATIC, StaticEmbeddings, bundled_path
from rockmem_mcp.search.vectors import VectorFiles

if TYPE_CHECKING:
    from rockmem_mcp.config import Settings

log = logging.getLogger(__name__)

PROBE_TEXT = "rockmem embedding probe"
QUIET_S = 0.05  # a burst of saves is over when none came for this long...
MAX_DELAY_S = 0.5  # ...or this long after it began: a steady stream still gets vectors twice a second
YIELD_QUIET_S = 0.25  # a backlog's next batch waits until no request came for this long...
YIELD_PATIENCE_S = 2.0  # ...but never longer than this


class Foreground:
    """The requests this process is answering; a background batch waits until there are none."""

    def __init__(self, quiet_s: float = YIELD_QUIET_S, patience_s: float = YIELD_PATIENCE_S) -> None:
        self.quiet_s, self.patience_s = quiet_s, patience_s
        self._answering = 0
        self._last_answer = float("-inf")  # time.monotonic() when the latest request ended
        self._lock = threading.Lock()
        self._starting = False

    @contextmanager
    def busy(self) -> Iterator[None]:
        with self._lock:
            self._answering += 1
        try:
            yield
        finally:
            self._done()

    def hold_start(self) -> None:
        """A server is starting: its first answer is a request in flight too (a backlog found by the store's
        opening would otherwise compete with the start). `end_start` ends it; the patience bounds it."""
        with self._lock:
            if not self._starting:
                self._starting = True
                self._answering += 1

    def end_start(self) -> None:
        """The server's first answer is out (again: nothing)."""
        if self._starting:
            with self._lock:
                if not self._starting:
                    return
                self._starting = False
            self._done()

    def _done(self) -> None:
        with self._lock:
            self._answering -= 1
            self._last_answer = time.monotonic()

    def wait_idle(self, stop: threading.Event, quiet_s: float | None = None) -> bool:
        """Until no request is in flight or ended in the last `quiet_s` (default: the instance's) (True), `stop` is
        set, or `patience_s` passed (False)."""
        quiet = self.quiet_s if quiet_s is None else quiet_s
        deadline = time.monotonic() + self.patience_s
        while not stop.is_set():
            now = time.monotonic()
            with self._lock:
                answering, quiet_at = self._answering, self._last_answer + quiet
            if not answering and quiet_at <= now:
                return True
            if answering:
                quiet_at = now + quiet
            wait = min(max(quiet_at - now, 0.01), deadline - now)
            if wait <= 0:
                return False
            stop.wait(wait)
        return False


FOREGROUND = Foreground()  # one per process: every store's worker shares the cores with every request


OFF = "off"  # ROCKMEM_EMBEDDING_MODEL=off: no embeddings, search by BM25 alone
BUNDLED = "bundled"  # names the default model explicitly: the bundled transformer
ONNX_PREFIX = "onnx:"


def embeddings_on(settings: Settings) -> bool:
    """False only when ROCKMEM_EMBEDDING_MODEL=off; with no setting at all the bundled transformer embeds."""
    return (settings.embedding_model or "").strip().lower() != OFF


def open_provider(settings: Settings) -> EmbeddingProvider | None:
    """The provider the settings name: an endpoint's model, a local model2vec or ONNX model, the static model
    (`static`), or the bundled transformer when none is named (or `bundled`); None when turned off. Raises
    EmbeddingError if unusable."""
    if not embeddings_on(settings):
        return None
    if settings.embedding_endpoint:
        if not settings.embedding_model:
            raise EmbeddingError(
                "ROCKMEM_EMBEDDING_ENDPOINT is set but ROCKMEM_EMBEDDING_MODEL is not: name the model to ask "
                "the endpoint for (e.g. nomic-embed-text for Ollama, text-embedding-3-small for OpenAI)"
            )
        return OpenAIEmbeddings(
            settings.embedding_endpoint,
            settings.embedding_model,
            settings.embedding_api_key,
            batch_size=settings.embedding_batch_size,
            timeout_s=settings.embedding_timeout_s,
            query_timeout_s=settings.embedding_query_timeout_s,
        )
    name = (settings.embedding_model or BUNDLED).strip()
    if name.startswith(ONNX_PREFIX):
        from rockmem_mcp.search.onnx_embeddings import OnnxEmbeddings  # imports onnxruntime only when used

        return OnnxEmbeddings(name)
    if name.lower() == BUNDLED:
        return bundled_provider()
    if name.lower() == STATIC:
        return static_provider()
    return Model2VecEmbeddings(name)


def bundled_provider() -> EmbeddingProvider:
    """The default: the bundled transformer, or the bundled static model where onnxruntime cannot load (a
    platform without its wheel), said once in the log."""
    try:
        from rockmem_mcp.search.onnx_embeddings import DEFAULT, OnnxEmbeddings

        return OnnxEmbeddings(DEFAULT)
    except EmbeddingError as exc:
        log.warning("the bundled transformer cannot run here (%s): embedding with the static model instead", exc)
        return static_provider()


def static_provider() -> EmbeddingProvider:
    try:
        return StaticEmbeddings()
    except (OSError, ValueError) as exc:  # a damaged install: say which file, search goes on by BM25
        raise EmbeddingError(
            f"cannot load the bundled embedding model from {bundled_path()}: {exc} "
            "(reinstall rockmem-mcp, or set ROCKMEM_EMBEDDING_MODEL=off)"
        ) from None


class Embedder:
    def __init__(
        self,
        settings: Settings,
        opener: Callable[[Settings], EmbeddingProvider | None] = open_provider,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self.configured = embeddings_on(settings)  # the bundled transformer unless ROCKMEM_EMBEDDING_MODEL=off
        self._opener = opener
        self._clock = clock
        self._open_lock = threading.Lock()
        self._opened = False
        self.provider: EmbeddingProvider | None = None
        self.model_id = ""
        self.dim = 0  # known after the first successful call
        self._down_until = 0.0
        self._down = False

    @property
    def ready(self) -> bool:
        """Vectors can be asked for now: opened, size known, and not resting after a failure."""
        return self.dim > 0 and (not self._down or self._clock() >= self._down_until)

    def open(self, wait_s: float | None = None) -> bool:
        """Build the provider once (may load a model: the worker thread does it). False if unusable, or
        if another thread is still opening it after `wait_s` seconds."""
        if not self._open_lock.acquire(timeout=-1 if wait_s is None else wait_s):
            return False
        try:
            if not self._opened:
                self._opened = True
                try:
                    self.provider = self._opener(self.settings) if self.configured else None
                except EmbeddingError as exc:
                    log.warning("embeddings are off, search uses BM25 alone: %s", exc)
                if self.provider is not None:
                    self.model_id = self.provider.model_id
            return self.provider is not None
        finally:
            self._open_lock.release()

    def probe(self, interactive: bool = False) -> bool:
        """Learn the vector size with one small call; False (logged once) if the provider fails."""
        if self.dim:
            return True
        try:
            probe = self._provider().embed([PROBE_TEXT], interactive=interactive)
            self.dim = self._checked(probe, 1, expect_dim=False).shape[1]
        except EmbeddingError as exc:
            self.failed(exc)
            return False
        self._recovered()
        return True

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors for entries (retries allowed). Raises EmbeddingError; the caller reports it via failed()."""
        vectors = self._checked(self._provider().embed(texts), len(texts))
        self._recovered()
        return vectors

    def embed_query(self, text: str) -> np.ndarray | None:
        """The query's vector, or None when embeddings are off, resting, or failing now (then logged once).

        The first query may wait for the provider to open (a local model loads in well under a second);
        from then on a query costs one embedding call.
        """
        vectors = self.embed_now([text])
        return None if vectors is None else vectors[0]

    def embed_now(self, texts: Sequence[str]) -> np.ndarray | None:
        """Vectors for a search that waits on them (one attempt, the short query timeout), or None as for
        embed_query; texts the provider refuses give None for this call only."""
        if not self.configured:
            return None
        wait_s = self.settings.embedding_query_timeout_s
        if not self.dim and not self._down and not (self.open(wait_s) and self.probe(interactive=True)):
            return None
        if not self.ready:
            return None
        try:
            vectors = self._checked(self._provider().embed(texts, interactive=True), len(texts))
        except EmbeddingRefused as exc:  # these texts only (odd characters, too long for the endpoint)
            log.info("no vectors for this search, ranked by BM25: %s", exc)
            return None
        except EmbeddingError as exc:
            self.failed(exc)
            return None
        self._recovered()
        return vectors

    def failed(self, exc: EmbeddingError) -> None:
        self._down_until = self._clock() + self.settings.embedding_retry_after_s
        if not self._down:
            self._down = True
            log.warning(
                "embeddings failed, so search ranks by BM25 alone until they work again (next try in %gs): %s",
                self.settings.embedding_retry_after_s,
                exc,
            )

    def _recovered(self) -> None:
        if self._down:
            self._down = False
            log.warning("embeddings work again; hybrid search resumes")

    def _provider(self) -> EmbeddingProvider:
        if self.provider is None:
            raise EmbeddingError("no embedding provider is configured")
        return self.provider

    def _checked(self, vectors: np.ndarray, count: int, expect_dim: bool = True) -> np.ndarray:
        if vectors.ndim != 2 or len(vectors) != count:
            raise EmbeddingError(f"the embedding provider returned {vectors.shape} for {count} texts")
        if expect_dim and vectors.shape[1] != self.dim:
            raise EmbeddingError(
                f"the embedding provider now returns {vectors.shape[1]}-dimensional vectors, not {self.dim}: "
                "if the model changed, restart rockmem (vectors are rebuilt for a new model name)"
            )
        return vectors


@dataclass(frozen=True)
class VectorJob:
    key: str
    slot: int
    generation: int  # of the store's index: a reloaded index makes the job void
    text: str  # what to embed


class VectorSource(Protocol):
    """What a store offers its vector worker. All methods are called with `lock` held."""

    lock: threading.RLock

    def adopt_vectors(self, model_id: str, dim: int) -> None: ...

    def missing_vectors(self, limit: int) -> list[VectorJob]: ...

    def store_vectors(self, jobs: list[VectorJob], vectors: np.ndarray) -> list[VectorJob]: ...

    def refuse_vector(self, job: VectorJob) -> None: ...

    def missing_vector_count(self) -> int: ...

    def vectors_settled(self) -> None: ...


class VectorWorker:
    def __init__(
        self,
        embedder: Embedder,
        source: VectorSource,
        files: VectorFiles,
        clock: Callable[[], float] = time.monotonic,
        foreground: Foreground = FOREGROUND,
    ) -> None:
        self.embedder = embedder
        self.foreground = foreground
        self.source = source
        self.files = files
        self.batch_size = embedder.settings.embedding_batch_size
        self.quiet_s = QUIET_S
        self.max_delay_s = MAX_DELAY_S
        self.clock = clock  # seconds, for letting a burst pass (tests hold it still)
        self._last_wake = 0.0  # clock() at the latest wake()
        self._burst_began: float | None = None  # clock() at the first wake() since the worker last took entries
        self._wake = threading.Event()
        self._stop = threading.Event()
        self.embedded = 0  # vectors made by the provider, and taken from the cache, since start
        self.reused = 0
        self.idle = threading.Event()  # set while nothing is missing or no thread runs (tests await it)
        self.idle.set()
        self._running = False
        self._files_adopted: tuple[str, int] | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._running = True
        self.idle.clear()
        self._thread = threading.Thread(target=self._run, name="rockmem-vectors", daemon=True)
        self._thread.start()

    def wake(self) -> None:
        """New entries may lack vectors (called with the store's lock held). While the worker lets a burst
        pass it waits on a timer, not on this event, so a save in a burst wakes no thread."""
        if self._running:
            self._last_wake = self.clock()
            if self._burst_began is None:
                self._burst_began = self._last_wake
            self.idle.clear()
            self._wake.set()

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop the thread; one stuck in a slow endpoint's retries is left behind (a daemon: it only
        ever writes cache files, atomically)."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout_s)

    def _run(self) -> None:
        try:
            if not self.embedder.open():
                return
            backlog = True  # until a step shows otherwise: a start may find many memories without vectors
            while not self._stop.is_set():
                if not self._prepare():
                    self._stop.wait(self.embedder.settings.embedding_retry_after_s)
                    continue
                self._wake.clear()
                self._burst_began = None  # a wake() from here on starts the next burst
                if backlog:  # it moves between requests, not during them (a few new saves just go)
                    self.foreground.wait_idle(self._stop)
                try:
                    done = self.step()
                except EmbeddingError as exc:
                    self.embedder.failed(exc)
                    self._stop.wait(self.embedder.settings.embedding_retry_after_s)
                    continue
                backlog = done >= self.batch_size
                if backlog:
                    continue  # the next batch as soon as no request is being answered
                if not done and not self._stop.is_set():  # a stop() before the clear above left no wake-up
                    self._wake.wait()
                self._let_burst_pass()  # after a part batch too: entries saved meanwhile wait for the rest
        except Exception:  # a bug here must not take the server down; searches continue on BM25
            log.exception("the embedding worker stopped; search continues on BM25 for entries without vectors")
        finally:
            self._running = False
            self.idle.set()

    def _let_burst_pass(self) -> None:
        """Sleep until no wake() came for `quiet_s`, or `max_delay_s` after the first (a stop ends it). The first
        wake()'s own time, not the moment this thread got to run after it: on a busy machine that can be much
        later, and a steady stream of saves would then wait longer than `max_delay_s` for its vectors."""
        began = self._burst_began
        give_up = (self.clock() if began is None else began) + self.max_delay_s
        while not self._stop.is_set():
            wait = min(self._last_wake + self.quiet_s, give_up) - self.clock()
            if wait <= 0:
                return
            self._stop.wait(wait)

    def _prepare(self) -> bool:
        if not self.embedder.probe():
            return False
        model = (self.embedder.model_id, self.embedder.dim)
        with self.source.lock:  # every time: a reloaded index may carry another model's vectors
            self.source.adopt_vectors(*model)
        if self._files_adopted != model:  # once: the cache is checked against the model at start
            self.files.adopt(*model)
            self._files_adopted = model
        return True

    def step(self) -> int:
        """Give one batch of entries their vectors; returns how many were looked at (0: none missing)."""
        with self.source.lock:  # wake() runs under this lock too, so `idle` never hides new work
            jobs = self.source.missing_vectors(self.batch_size)
            if not jobs and self._running:
                self.source.vectors_settled()
                self.idle.set()
        if not jobs:
            return 0
        dim = self.embedder.dim
        vectors = np.zeros((len(jobs), dim), dtype=np.float32)
        made: list[int] = []
        for i, job in enumerate(jobs):
            cached = self.files.read(job.key, job.text, dim)
            if cached is not None:
                vectors[i] = cached
            else:
                made.append(i)
        refused = self._embed(jobs, made, vectors)
        self.embedded += len(made) - len(refused)
        self.reused += len(jobs) - len(made)
        done = [i for i in range(len(jobs)) if i not in refused]
        with self.source.lock:
            for i in refused:
                self.source.refuse_vector(jobs[i])
            kept = {job.key for job in self.source.store_vectors([jobs[i] for i in done], vectors[done])}
        # After the lock: file creation is slow on some disks, and the stamp ties each vector to its text.
        for i in made:
            if jobs[i].key in kept:
                self.files.write(jobs[i].key, jobs[i].text, vectors[i])
        return len(jobs)

    def _embed(self, jobs: list[VectorJob], made: list[int], vectors: np.ndarray) -> set[int]:
        """Fill vectors[made]; returns the positions the provider refused (one bad entry never blocks the rest)."""
        if not made:
            return set()
        try:
            vectors[made] = self.embedder.embed_documents([jobs[i].text for i in made])
            return set()
        except EmbeddingRefused:
            if len(made) == 1:
                log.warning("the embedding provider refused memory %s; it is found by keywords only", jobs[made[0]].key)
                return set(made)
        refused: set[int] = set()
        for i in made:  # find the culprits one by one
            refused |= self._embed(jobs, [i], vectors)
        return refused

    def drain(self, progress: Callable[[int, int], None] | None = None) -> int:
        """Embed everything missing now, in the calling thread; returns how many got vectors."""
        if not self.embedder.open():
            raise EmbeddingError("no embedding provider is configured (set ROCKMEM_EMBEDDING_MODEL or _ENDPOINT)")
        if not self._prepare():
            raise EmbeddingError("the embedding provider is not answering; see the log above")
        with self.source.lock:
            total = self.source.missing_vector_count()
        done = 0
        while count := self.step():
            done += count
            if progress is not None:
                progress(done, total)
        return done
