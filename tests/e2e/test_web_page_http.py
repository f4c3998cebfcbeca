"""The web page's guards over real loopback HTTP (no browser needed): writes need the page's own header, other
sites and other Host names are refused, a token is asked for where one is set, and beside streamable HTTP the page
works on the same running services as MCP."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from mcp import Client

from tests.e2e.test_web_page import page_server
from tests.test_cli import clean_env, rockmem

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


def _post(url: str, path: str, body: object, **headers: str) -> httpx.Response:
    return httpx.post(url + path, json=body, headers={"x-rockmem-ui": "1", **headers}, timeout=60)


def test_changes_are_typed_exactly_as_the_tools_type_them(tmp_path: Path) -> None:
    home = tmp_path / "home"
    saved = json.loads(rockmem("--home", home, "add", "Ada drinks tea", "--pin", "--json", env=clean_env()).stdout)
    environment = clean_env(ROCKMEM_HOME=str(home))
    proposal = subprocess.run(
        [sys.executable, "-c", "from rockmem_mcp.config import Settings; from rockmem_mcp.audit.service import Audit;"
         "from rockmem_mcp.proposals.service import Proposals; s = Settings.load({'namespace': 'subagent/r'});"
         "print(Proposals(s, Audit(s)).propose_save('The sky is green').id)"],
        capture_output=True, text=True, env=environment, check=True,
    ).stdout.strip()  # fmt: skip
    with page_server(home, tmp_path / "ui.log") as url:
        memory = f"api/memories/{saved['id']}"
        for body, wanted in [
            ({"pinned": "false"}, "pinned: Input should be a valid boolean"),
            ({"restore": "false"}, "restore: Input should be a valid boolean"),
            ({"importance": "0.9"}, "importance: Input should be a valid number"),
            ({"tags": "a,b"}, "tags: Input should be a valid list"),
            ({"colour": "red"}, "colour: Extra inputs are not permitted"),
        ]:
            refused = _post(url, memory, body)
            assert refused.status_code == 400 and refused.json()["error"].startswith(wanted), refused.text
        # archiving a pinned memory needs confirm_pinned itself, as a boolean
        assert _post(url, memory + "/archive", {"pinned": "false"}).status_code == 400
        assert _post(url, memory + "/archive", {}).status_code == 400
        assert _post(url, memory + "/archive", {"confirm_pinned": "yes"}).status_code == 400
        assert json.loads(rockmem("--home", home, "get", saved["id"], "--json", env=clean_env()).stdout)["pinned"]

        # The review tool's stores only: a sub-agent's text never goes into core memory from the page.
        for store in ("core", "bogus", 5, ["vault"]):
            refused = _post(url, f"api/proposals/{proposal}", {"action": "commit", "store": store})
            assert refused.status_code == 400 and refused.json()["error"].startswith("store: Input should be")
        assert _post(url, f"api/proposals/{proposal}", {"action": "reject", "reason": ["x"]}).status_code == 400
        assert _post(url, "api/tokens", {"text": ["a", "b"]}).status_code == 400
        assert _post(url, "api/core", {"block": ["Identity"], "version": "x", "text": ""}).status_code == 400
        assert _post(url, "api/revert", {"item": "memory/x.json", "to": 5}).status_code == 400
        assert httpx.get(url + "api/graph", params={"entity": "x", "hops": "abc"}).status_code == 400

        huge = httpx.post(url + "api/tokens", content=b'{"text": "' + b"a" * 5_000_000 + b'"}',
                          headers={"x-rockmem-ui": "1", "content-type": "application/json"})  # fmt: skip
        assert huge.status_code == 413
    assert "Traceback" not in (tmp_path / "ui.log").read_text()


def test_an_edit_of_a_memory_changed_since_it_was_read_is_refused(tmp_path: Path) -> None:
    home = tmp_path / "home"
    saved = json.loads(rockmem("--home", home, "add", "Ada drinks tea", "--json", env=clean_env()).stdout)
    read_at = saved["created_at"]
    rockmem("--home", home, "add", "unrelated", env=clean_env())
    with page_server(home, tmp_path / "ui.log") as url:
        memory = f"api/memories/{saved['id']}"
        assert _post(url, memory, {"tags": ["agent-added"]}).status_code == 200  # an agent's change meanwhile
        stale = _post(url, memory, {"content": "Ada drinks coffee", "read_version": read_at})
        assert stale.status_code == 409 and "changed since you opened it" in stale.json()["error"]
        fresh = httpx.get(url + memory).json()["entry"]
        done = _post(url, memory, {"content": "Ada drinks coffee", "read_version": fresh["updated_at"]})
        assert done.status_code == 200
        assert done.json()["tags"] == ["agent-added"] and done.json()["content"] == "Ada drinks coffee"


def test_tiers_are_browsed_across_the_whole_store_and_a_to_date_includes_its_day(tmp_path: Path) -> None:
    home = tmp_path / "home"
    lines = [json.dumps({"content": f"recent note {i}"}) for i in range(230)]
    old = {"created_at": "2023-01-01T00:00:00Z", "last_seen_at": "2023-01-01T00:00:00Z", "importance": 0.5}
    lines += [json.dumps({"content": f"forgotten fact {i}", **old})
              for i in range(3)]  # fmt: skip
    rockmem("--home", home, "import", "-", env=clean_env(), stdin="\n".join(lines) + "\n")
    with page_server(home, tmp_path / "ui.log") as url:
        found = httpx.get(url + "api/memories", params={"tier": "archive_candidate"}).json()
        assert sorted(hit["entry"]["content"] for hit in found["results"]) == [f"forgotten fact {i}" for i in range(3)]
        assert found["total"] == 3
        newest = httpx.get(url + "api/memories", params={"limit": "1"}).json()["results"][0]["entry"]
        created = newest["created_at"][:10]  # the imports' day, as the page's date picker gives it
        same_day = httpx.get(url + "api/memories", params={"after": created, "before": created, "limit": "200"})
        assert same_day.json()["total"] == 230


def test_the_sign_in_cookie_is_the_pages_own_and_the_token_stays_out_of_logs(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with page_server(home, tmp_path / "ui.log", ROCKMEM_AUTH_TOKEN=TOKEN, ROCKMEM_LOG_LEVEL="INFO") as url:
        assert "?token=<ROCKMEM_AUTH_TOKEN>" in (tmp_path / "ui.log").read_text()  # the announced link says how
        port = url.split(":")[2].split("/")[0]
        with httpx.Client() as browser_like:
            signed = browser_like.get(url, params={"token": TOKEN})
            cookie = signed.headers["set-cookie"]
            assert cookie.startswith(f"rockmem_ui_{port}=") and "Path=/ui" in cookie and TOKEN not in cookie
            again = browser_like.get(url, params={"token": TOKEN})  # signed in already: still taken out
            assert again.status_code == 303 and "token" not in again.headers["location"]
    log = (tmp_path / "ui.log").read_text()
    assert "token=REDACTED" in log and TOKEN not in log


def test_ui_on_stdio_is_refused_in_one_line(tmp_path: Path) -> None:
    done = rockmem("--home", tmp_path / "home", "serve", "--ui", env=clean_env(), stdin="")
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "--transport streamable-http" in done.stderr


@pytest.mark.parametrize(
    "where", [("ui", "--host", "0.0.0.0"), ("ui",), ("serve", "--transport", "streamable-http", "--ui")]
)
def test_with_tenants_the_page_needs_its_own_token_on_every_listener(tmp_path: Path, where: tuple[str, ...]) -> None:
    """Tenants' tokens reach their own homes; the page shows the server's own: without ROCKMEM_AUTH_TOKEN it is never
    served, beyond loopback or on it, by `ui` or beside MCP (issue 45: `ui --host 0.0.0.0` served it to anyone)."""
    tenants = tmp_path / "tenants.json"
    environment = {k: v for k, v in os.environ.items() if not k.startswith("ROCKMEM_")}
    made = subprocess.run(
        [sys.executable, "-m", "rockmem_mcp", "--home", str(tmp_path / "home"), "tenants", "add", "acme"],
        capture_output=True, text=True, env={**environment, "ROCKMEM_TENANTS_FILE": str(tenants)}, timeout=60,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    done = subprocess.run(
        [sys.executable, "-m", "rockmem_mcp", "--home", str(tmp_path / "home"), *where, "--port", "0"],
        capture_output=True, text=True, env={**environment, "ROCKMEM_TENANTS_FILE": str(tenants)}, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "refusing to serve the web page" in done.stderr and "ROCKMEM_AUTH_TOKEN" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_contradiction_a_dream_found_waits_on_the_review_tab_until_the_user_decides(tmp_path: Path) -> None:
    """Issue 45: "standup at 9am" / "… at 10am" are not merged; the review tab lists them, both texts side by side,
    until the user archives the wrong one."""
    home = tmp_path / "home"
    for text in ("The team standup is at 9am", "The team standup is at 10am"):
        assert rockmem("--home", home, "add", text, env=clean_env(ROCKMEM_EMBEDDING_MODEL="off")).returncode == 0
    dreamt = rockmem("--home", home, "dream", env=clean_env(ROCKMEM_EMBEDDING_MODEL="off"))
    assert dreamt.returncode == 0, dreamt.stderr
    with page_server(home, tmp_path / "ui.log", ROCKMEM_EMBEDDING_MODEL="off") as url:
        review = httpx.get(url + "api/review").json()
        [conflict] = review["contradictions"]
        assert conflict["reason"] == "they give different times: 9am / 10am"
        assert [m["text"] for m in conflict["memories"]] == [f"The team standup is at {t}" for t in ("9am", "10am")]
        wrong = conflict["ids"][0]
        archived = httpx.post(url + f"api/memories/{wrong}/archive", json={"reason": "the user chose 10am"},
                              headers={"x-rockmem-ui": "1"})  # fmt: skip
        assert archived.status_code == 200, archived.text
        assert httpx.get(url + "api/review").json()["contradictions"] == []
