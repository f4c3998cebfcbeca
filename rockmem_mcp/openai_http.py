"""POSTing JSON to OpenAI-compatible endpoints (embeddings, chat completions): one place for URLs, retries,
backoff and how failures are told apart."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import httpx

RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})


class EndpointFailed(Exception):
    """No usable answer after every attempt (unreachable, timed out, 408/409/429/5xx, not JSON)."""


class EndpointRefused(Exception):
    """The endpoint answered 4xx: retrying the same request will not help."""


def endpoint_url(endpoint: str, path: str) -> str:
    """Accept a base URL ('http://host:11434', '.../v1') or the full URL ending in `path` ('embeddings')."""
    url = endpoint.rstrip("/")
    if url.endswith(f"/{path}"):
        return url
    return f"{url}/{path}" if url.endswith("/v1") else f"{url}/v1/{path}"


def http_client(timeout_s: float, api_key: str | None) -> httpx.Client:
    """A client for one endpoint. httpx is imported here, not at start: it costs ~65 ms of a stdio server's
    start (its command-line module imports pygments), and most servers never call an endpoint."""
    import httpx

    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    return httpx.Client(timeout=timeout_s, headers=headers)


def post_json(
    client: httpx.Client, url: str, payload: dict[str, object], *, attempts: int, timeout: float, backoff_s: float
) -> dict:
    """POST with retries (backoff doubling) on connection errors, timeouts and 408/409/429/5xx."""
    import httpx  # loaded by http_client already: a dictionary lookup

    problem = ""
    for attempt in range(attempts):
        if attempt:
            time.sleep(backoff_s * 2 ** (attempt - 1))
        try:
            response = client.post(url, json=payload, timeout=timeout)
        except httpx.TimeoutException:
            problem = f"timed out after {timeout}s"
            continue
        except httpx.TransportError as exc:
            problem = f"unreachable ({exc.__class__.__name__}: {exc})"
            continue
        if response.status_code in RETRY_STATUS:
            problem = f"HTTP {response.status_code}: {response.text[:200]}"
            continue
        if response.status_code >= 400:
            raise EndpointRefused(f"HTTP {response.status_code}: {response.text[:200]}")
        try:
            return response.json()
        except ValueError:
            problem = "the answer was not JSON"
            continue
    raise EndpointFailed(f"failed {attempts} time(s); last: {problem}")
