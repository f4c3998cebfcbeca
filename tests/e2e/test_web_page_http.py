"""The web page's guards over real loopback HTTP (no browser needed): writes need the page's own header, other
sites and other Host names are refused, a token is asked for where one is set, and beside streamable HTTP the page
works on the same running services as MCP."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from mcp import Client

from tests.e2e.test_web_page import page_server

pytestmark = pytest.mark.anyio
TOKEN = "a-long-enough-test-token-0123456789"


def test_writes_need_the_page_header_and_this_origin(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with page_server(home, tmp_path / "ui.log") as url:
        listed = httpx.get(url + "api/memories")
        assert listed.status_code == 200 and listed.json()["results"] == []
        assert "script-src 'self'" in listed.headers["content-security-policy"]
        assert listed.headers["x-frame-options"] == "DENY"

        body = {"text": "hello"}
        refused = httpx.post(url + "api/tokens", json=body)  # a plain cross-site form could send this much
        assert refused.status_code == 403 and "x-rockmem-ui" in refused.json()["error"]
        other_site = httpx.post(url + "api/tokens", json=body,
                                headers={"x-rockmem-ui": "1", "origin": "http://evil.example"})  # fmt: skip
        assert other_site.status_code == 403 and "evil.example" in other_site.json()["error"]
        same = httpx.post(url + "api/tokens", json=body, headers={"x-rockmem-ui": "1", "origin": url.split("/ui")[0]})
        assert same.status_code == 200 and same.json()["tokens"] > 0

        # DNS rebinding: a page served as another name is refused before anything is read
        rebound = httpx.get(url + "api/memories", headers={"host": "evil.example"})
        assert rebound.status_code == 421

        missing = httpx.get(url + "api/memories/0123456789ab")
        assert missing.status_code == 404 and "0123456789ab" in missing.json()["error"]
        bad = httpx.get(url + "api/memories", params={"tier": "sleepy"})
        assert bad.status_code == 400 and "tier must be one of" in bad.json()["error"]
        not_json = httpx.post(url + "api/core", content=b"{", headers={"x-rockmem-ui": "1"})
        assert not_json.status_code == 400 and "not JSON" in not_json.json()["error"]


def test_a_token_is_asked_for_and_kept_in_a_cookie(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with page_server(home, tmp_path / "ui.log", ROCKMEM_AUTH_TOKEN=TOKEN) as url:
        assert httpx.get(url).status_code == 401
        assert httpx.get(url + "api/status").status_code == 401
        assert httpx.get(url, params={"token": "wrong-token-but-long-enough"}).status_code == 401
        with httpx.Client() as browser_like:
            signed = browser_like.get(url, params={"token": TOKEN, "tab": "core"})
            assert signed.status_code == 303 and signed.headers["location"] == "/ui/?tab=core"  # token not kept
            cookie = signed.headers["set-cookie"].lower()
            assert "httponly" in cookie and "samesite=strict" in cookie
            assert browser_like.get(url + "api/status").status_code == 200
        bearer = httpx.get(url + "api/status", headers={"authorization": f"Bearer {TOKEN}"})
        assert bearer.status_code == 200


def test_beyond_loopback_without_a_token_it_refuses_to_start(tmp_path: Path) -> None:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("ROCKMEM_")}
    done = subprocess.run(
        [sys.executable, "-m", "rockmem_mcp", "--home", str(tmp_path / "home"), "ui", "--host", "0.0.0.0"],
        capture_output=True, text=True, env=environment, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.strip().startswith("rockmem-mcp: refusing to serve on 0.0.0.0 without a token")
    assert "Traceback" not in done.stderr


async def test_beside_streamable_http_the_page_sees_what_mcp_wrote(tmp_path: Path, call) -> None:
    home = tmp_path / "home"
    serve = ("serve", "--transport", "streamable-http", "--port", "0", "--ui")
    with page_server(home, tmp_path / "serve.log", *serve) as url:
        async with Client(url.replace("/ui/", "/mcp")) as client:
            saved = await call(client, "save_memory", content="Saved over MCP, seen on the page")
            async with httpx.AsyncClient() as http:
                listed = (await http.get(url + "api/memories", params={"q": "seen page"})).json()
                assert [hit["entry"]["id"] for hit in listed["results"]] == [saved["id"]]
                edited = await http.post(url + f"api/memories/{saved['id']}", json={"content": "Changed on the page"},
                                         headers={"x-rockmem-ui": "1"})  # fmt: skip
                assert edited.status_code == 200
            assert (await call(client, "get_memory", id=saved["id"]))["content"] == "Changed on the page"
