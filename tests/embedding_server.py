"""A real OpenAI-compatible `/v1/embeddings` server on loopback, scripted by the tests.

It answers from `replies` (consumed in order, the last one repeating): a function from the request body
to (status, JSON body or raw text); status 0 hangs until the server closes (a timeout). `model_reply`
serves real vectors from the shared model2vec model when it is present, else from `hashed_vectors`.
"""

from __future__ import annotations

import json
import re
import threading
import zlib
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np

Reply = Callable[[dict], tuple[int, object]]  # request body -> (status, JSON body or raw text)

SHARED_MODEL = Path(__file__).resolve().parents[2] / "shared" / "models" / "m2v-minilm-l6-256"
SHARED_MODEL_MISSING = f"the shared model2vec model is absent at {SHARED_MODEL} (no shared/ beside the checkout)"


def vectors_for(body: dict, dim: int = 3) -> tuple[int, object]:
    """A well-behaved server: vector i is (len(text), i, 1, ...), returned in reverse index order."""
    data = [
        {"index": i, "embedding": [float(len(text)), float(i), *([1.0] * (dim - 2))]}
        for i, text in enumerate(body["input"])
    ]
    return 200, {"object": "list", "data": data[::-1], "model": body["model"]}


def hashed_vectors(texts: Sequence[str], dim: int = 64) -> np.ndarray:
    """Deterministic bag-of-words vectors: texts sharing words are similar (no model needed)."""
    out = np.zeros((len(texts), dim), dtype=np.float32)
    for row, text in enumerate(texts):
        for word in re.findall(r"\w+", text.lower()):
            out[row, zlib.crc32(word.encode()) % dim] += 1.0
    out[:, 0] += 0.01  # never all zero
    return out / np.linalg.norm(out, axis=1, keepdims=True)


CONCEPTS = (
    ("cat", "cats", "kitten", "tabby", "whiskerino", "feline"),
    ("deploy", "staging", "vpn", "release"),
    ("tax", "taxes", "invoice", "quarterly"),
)


def concept_vectors(texts: Sequence[str]) -> np.ndarray:
    """A tiny "meaning" model: words of one concept share a direction, so "my cat" is close to "the tabby"
    though they share no word (deterministic, no model needed)."""
    out = np.full((len(texts), len(CONCEPTS) + 1), 0.01, dtype=np.float32)  # the last: "no concept"
    for row, text in enumerate(texts):
        for word in re.findall(r"\w+", text.lower()):
            for dim, words in enumerate(CONCEPTS):
                out[row, dim] += word in words
        out[row, -1] += out[row, :-1].max() < 1
    return out / np.linalg.norm(out, axis=1, keepdims=True)


def local_embedder() -> Callable[[Sequence[str]], np.ndarray]:
    """The shared model's encoder when present, else hashed_vectors."""
    if SHARED_MODEL.exists():
        from model2vec import StaticModel

        model = StaticModel.from_pretrained(str(SHARED_MODEL))
        return lambda texts: np.asarray(model.encode(list(texts)), dtype=np.float32)
    return hashed_vectors


def model_reply(embed: Callable[[Sequence[str]], np.ndarray], dim: int | None = None) -> Reply:
    """Answer like an OpenAI-compatible server with `embed`'s vectors (cut to `dim` if given: a wrong size)."""

    def reply(body: dict) -> tuple[int, object]:
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        vectors = embed(texts)[:, :dim] if dim else embed(texts)
        data = [{"object": "embedding", "index": i, "embedding": v.tolist()} for i, v in enumerate(vectors)]
        return 200, {"object": "list", "data": data, "model": body["model"]}

    return reply


class EmbeddingServer:
    def __init__(self) -> None:
        self.replies: list[Reply] = []
        self.requests: list[tuple[dict, dict[str, str]]] = []
        self.release = threading.Event()  # a handler told to hang waits on this
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append((body, dict(self.headers)))
                reply = outer.replies.pop(0) if len(outer.replies) > 1 else outer.replies[0]
                status, payload = reply(body)
                if status == 0:  # hang until the server closes
                    outer.release.wait()
                    return
                raw = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def close(self) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()
