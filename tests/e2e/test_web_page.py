"""The web page in a real headless browser (Playwright, Debian's Chromium) against `rockmem-mcp ui` started as a
real process on loopback: search, edit, pin, archive, approve and revert driven by clicks, checked on disk and
through the CLI. A screenshot of each tab is kept in test-artifacts/ (ROCKMEM_TEST_ARTIFACTS to move it)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from tests.e2e.browser import CHROMIUM_ARGS, chromium
from tests.test_cli import rockmem

ARTIFACTS = Path(os.environ.get("ROCKMEM_TEST_ARTIFACTS") or Path(__file__).parents[2] / "test-artifacts")
STARTUP_TIMEOUT = 30.0
HOSTILE = "Alice takes her coffee black <img src=x onerror=\"document.title='owned'\"><script>alert(1)</script>"


def cli(home: Path, *args: str, **env: str) -> Any:
    """A rockmem-mcp command on `home` (the page's checks on the files, in this process); its --json output."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("ROCKMEM_")} | env
    done = rockmem("--home", home, *args, "--json", env=environment)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout) if done.stdout.strip() else None


def hits(home: Path, words: str) -> list[dict[str, Any]]:
    """`rockmem-mcp search WORDS --json`: one hit per line."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("ROCKMEM_")}
    done = rockmem("--home", home, "search", words, "--json", env=environment)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


@contextlib.contextmanager
def page_server(home: Path, log: Path, *extra: str, **env: str) -> Iterator[str]:
    """`rockmem-mcp ui --port 0` (or `serve … --ui` when `extra` says so); yields the page's URL as announced."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("ROCKMEM_")} | env
    command = [sys.executable, "-m", "rockmem_mcp", "--home", str(home), *(extra or ("ui", "--port", "0"))]
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   env=environment)  # fmt: skip
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while not (found := re.search(r"web page at (http://\S+/ui/)", log.read_text())):
            assert process.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
        yield found.group(1)
    finally:
        process.terminate()
        process.wait(timeout=20)
    assert "Traceback" not in log.read_text(), log.read_text()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=chromium(), args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 860})
    opened = context.new_page()
    problems: list[str] = []
    opened.on("pageerror", lambda error: problems.append(str(error)))
    try:
        yield opened
    finally:
        context.close()
    assert not problems, problems  # no script error on the page at any point


def shoot(page: Page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"web-page-{name}.png"), full_page=True)


def open_page(page: Page, url: str) -> None:
    page.goto(url)
    page.wait_for_selector("body[data-ready='1']")


def search_for(page: Page, words: str) -> None:
    serial = page.evaluate("document.body.dataset.searchSerial || '0'")
    page.fill("#q", words)
    page.wait_for_function("(before) => Number(document.body.dataset.searchSerial || 0) > Number(before)", arg=serial)


@pytest.fixture
def seeded_home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    cli(home, "add", HOSTILE, "--category", "user-preferences/coffee", "--tag", "coffee")
    cli(home, "add", "The deploy runs on Fridays at 16:00", "--category", "project-context/deploy", "--tag", "ops")
    return home


def test_search_edit_pin_archive_and_restore_by_clicks(page: Page, seeded_home: Path, tmp_path: Path) -> None:
    with page_server(seeded_home, tmp_path / "ui.log") as url:
        open_page(page, url)
        search_for(page, "coffee")
        hit = page.locator("#results li.result")
        expect(hit).to_have_count(1)
        # Stored markup is text on the page: no element was made from it, and no script of it ran.
        expect(hit.locator(".content")).to_have_text(HOSTILE)
        assert page.locator("#results img, #results script").count() == 0
        assert page.title() == "rockmem"
        entry_id = hit.get_attribute("data-id")
        assert entry_id

        hit.click()
        expect(page.locator("#detail-id")).to_have_text(entry_id)
        page.fill("#edit-content", "Alice takes her coffee with oat milk")
        page.fill("#edit-tags", "coffee, milk")
        page.click("#save")
        expect(page.locator("#history li")).to_have_count(2)  # both versions, with who made them
        expect(page.locator("#history")).to_contain_text("EDIT by manual")
        stored = cli(seeded_home, "get", entry_id)
        assert stored["content"] == "Alice takes her coffee with oat milk" and stored["tags"] == ["coffee", "milk"]

        page.click("#pin")
        expect(page.locator("#pin")).to_have_text("Unpin")
        assert cli(seeded_home, "get", entry_id)["pinned"] is True
        asked: list[str] = []
        page.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.accept()))
        page.click("#archive")  # a pinned memory: the page asks first
        expect(page.locator("#restore")).to_be_visible()
        assert asked == ["This memory is pinned (in the vault). Archive it anyway?"]
        assert cli(seeded_home, "get", entry_id)["archived_at"] is not None
        search_for(page, "oat milk")
        expect(page.locator("#results li.result")).to_have_count(0)  # archived: out of search
        page.check("#archived")
        expect(page.locator("#results li.result")).to_have_count(1)
        page.click("#restore")
        expect(page.locator("#archive")).to_be_visible()
        assert cli(seeded_home, "get", entry_id)["archived_at"] is None

        # Filters: category, tag and tier narrow the list.
        page.uncheck("#archived")
        page.fill("#q", "")
        page.fill("#category", "project-context")
        page.dispatch_event("#category", "change")
        expect(page.locator("#results li.result")).to_have_count(1)
        expect(page.locator("#results li.result .content")).to_have_text("The deploy runs on Fridays at 16:00")
        page.select_option("#tier", "dormant")
        expect(page.locator("#results li.result")).to_have_count(0)
        shoot(page, "memories")


def test_an_edit_reverted_from_the_audit_timeline(page: Page, seeded_home: Path, tmp_path: Path) -> None:
    entry_id = hits(seeded_home, "deploy")[0]["entry"]["id"]
    with page_server(seeded_home, tmp_path / "ui.log") as url:
        open_page(page, url)
        search_for(page, "deploy")
        page.click(f"#results li[data-id='{entry_id}']")
        page.fill("#edit-content", "The deploy runs on Mondays")
        page.click("#save")
        expect(page.locator("#history li")).to_have_count(2)
        assert cli(seeded_home, "get", entry_id)["content"] == "The deploy runs on Mondays"

        page.click("button[data-tab=audit]")
        edit = page.locator("#audit-list li[data-action='EDIT']").first
        expect(edit).to_contain_text(entry_id)
        edit.locator("button.revert").click()
        # Asked first, with the text now and the text it goes back to; nothing changes until confirmed.
        expect(page.locator("#confirm")).to_be_visible()
        expect(page.locator("#confirm-title")).to_contain_text(entry_id)
        expect(page.locator("#confirm-body .side.before")).to_contain_text("The deploy runs on Mondays")
        expect(page.locator("#confirm-body .side.after")).to_contain_text("The deploy runs on Fridays at 16:00")
        shoot(page, "revert-confirmation")
        page.click("#confirm-no")
        expect(page.locator("#confirm")).to_be_hidden()
        assert cli(seeded_home, "get", entry_id)["content"] == "The deploy runs on Mondays"
        edit.locator("button.revert").click()
        page.click("#confirm-yes")
        expect(page.locator("#audit-list li.done")).to_contain_text("1 restored")
        assert cli(seeded_home, "get", entry_id)["content"] == "The deploy runs on Fridays at 16:00"
        expect(page.locator("#audit-list li[data-action='REVERT']").first).to_be_visible()
        shoot(page, "audit")


def test_reflection_and_proposals_approved_by_clicks(page: Page, tmp_path: Path) -> None:
    home = tmp_path / "home"
    for _ in range(2):  # a duplicate: the reflection proposes to merge it
        cli(home, "add", "Bob is allergic to peanuts", "--category", "people/bob")
    cli(home, "reflect", "--run", ROCKMEM_REFLECTION_APPROVAL="always")
    pending = cli(home, "reflect")
    assert len(pending) == 1 and pending[0]["actions"]
    # Two sub-agent proposals, filed as a gated sub-agent's save_memory files them.
    from rockmem_mcp.audit.service import Audit
    from rockmem_mcp.config import Settings
    from rockmem_mcp.proposals.service import Proposals

    settings = Settings.load({"home": str(home), "namespace": "subagent/researcher"})
    proposals = Proposals(settings, Audit(settings))
    kept = proposals.propose_save("The staging database is db-staging-2", category="project-context/db")
    dropped = proposals.propose_save("Bob likes peanuts")

    with page_server(home, tmp_path / "ui.log") as url:
        open_page(page, url)
        expect(page.locator("#review-count")).to_have_text("3")
        page.click("button[data-tab=review]")
        card = page.locator(f".reflection[data-id='{pending[0]['id']}']")
        expect(card).to_contain_text("merge")
        shoot(page, "review")
        card.locator("button[data-decision=approve]").click()
        expect(page.locator(".reflection")).to_have_count(0)

        page.locator(f".proposal[data-id='{kept.id}'] button.primary").click()
        expect(page.locator(f".proposal[data-id='{kept.id}']")).to_have_count(0)
        page.locator(f".proposal[data-id='{dropped.id}'] input.reason").fill("contradicts the allergy")
        page.locator(f".proposal[data-id='{dropped.id}'] button.danger").click()
        expect(page.locator(".proposal")).to_have_count(0)

    assert cli(home, "reflect", pending[0]["id"])[0]["status"] == "approved"
    assert len(hits(home, "peanuts")) == 1  # the duplicate was merged
    assert hits(home, "staging database")[0]["entry"]["content"].startswith("The staging")
    decided = {p["id"]: p["status"] for p in cli(home, "proposals", "list", "--all")["proposals"]}
    assert decided == {kept.id: "committed", dropped.id: "rejected"}


def test_reflection_partly_approved_and_rejected(page: Page, tmp_path: Path) -> None:
    home = tmp_path / "home"
    for text in ("Carol works on the billing service", "Dan prefers tea over coffee"):
        for _ in range(2):
            cli(home, "add", text)
    cli(home, "reflect", "--run", ROCKMEM_REFLECTION_APPROVAL="always")
    first = cli(home, "reflect")[0]
    assert len(first["actions"]) >= 2
    with page_server(home, tmp_path / "ui.log") as url:
        open_page(page, url)
        page.click("button[data-tab=review]")
        card = page.locator(f".reflection[data-id='{first['id']}']")
        card.locator(f"input[data-action='{first['actions'][0]['id']}']").uncheck()
        card.locator("button[data-decision=partial]").click()
        expect(page.locator(".reflection")).to_have_count(0)
    resolved = cli(home, "reflect", first["id"])[0]
    assert resolved["status"] == "partial"
    outcomes = {a["id"]: a["outcome"] for a in resolved["actions"]}
    assert outcomes[first["actions"][0]["id"]] == "not chosen"
    assert all(o == "applied" for i, o in outcomes.items() if i != first["actions"][0]["id"])

    cli(home, "add", "Erin owns the release checklist")
    cli(home, "add", "Erin owns the release checklist")
    cli(home, "reflect", "--run", ROCKMEM_REFLECTION_APPROVAL="always")
    second = cli(home, "reflect")[0]
    with page_server(home, tmp_path / "ui2.log") as url:
        open_page(page, url)
        page.click("button[data-tab=review]")
        card = page.locator(f".reflection[data-id='{second['id']}']")
        card.locator("button[data-decision=reject]").click()  # no reason: the service's refusal is shown
        expect(page.locator("#error")).to_be_visible()
        card.locator("input.reason").fill("keep both for now")
        card.locator("button[data-decision=reject]").click()
        expect(page.locator(".reflection")).to_have_count(0)
    assert cli(home, "reflect", second["id"])[0]["status"] == "rejected"
    assert len(hits(home, "release checklist")) == 2


def test_core_graph_working_and_salience_tabs(page: Page, tmp_path: Path) -> None:
    home = tmp_path / "home"
    cli(home, "add", "Frank leads the payments team", "--category", "people/frank")
    from rockmem_mcp.config import Settings
    from rockmem_mcp.graph.service import GraphService
    from rockmem_mcp.working.service import WorkingMemory

    settings = Settings.load({"home": str(home)})
    graph = GraphService(settings)
    graph.add_triples([
        {"subject": "Frank", "predicate": "leads", "object": "Payments"},
        {"subject": "Payments", "predicate": "depends_on", "object": "Ledger"},
        {"subject": "Ledger", "predicate": "written_in", "object": "Rust"},
    ])  # fmt: skip
    graph.close()
    WorkingMemory(settings, "session/abc").save("draft-plan", "step one, step two", ttl_minutes=60)

    with page_server(home, tmp_path / "ui.log") as url:
        open_page(page, url)
        page.click("button[data-tab=core]")
        identity = page.locator("textarea[data-block='Identity']")
        count = page.locator(".count[data-block='Identity']")
        expect(count).to_have_text("0 / 500 tokens")
        identity.fill("The user is Frank, who leads payments.")
        expect(count).not_to_have_text("0 / 500 tokens")  # counted live, before any save
        live = count.inner_text()
        page.click("text=Save Identity")
        expect(page.locator("#core-total")).not_to_have_text("0 of 3000 tokens in all")
        expect(page.locator(".count[data-block='Identity']")).to_have_text(live)  # the live count was the saved one
        assert cli(home, "core")["blocks"][0]["lines"] == ["The user is Frank, who leads payments."]
        shoot(page, "core")

        page.click("button[data-tab=graph]")
        page.click("#entity-list button:text-is('Frank')")
        nodes = page.locator("#graph-svg g.node")
        expect(nodes).to_have_count(3)  # Frank, Payments, Ledger: two hops
        page.locator("#graph-svg g.node[data-name='Ledger']").click()  # expand: Rust comes in
        expect(nodes).to_have_count(4)
        expect(page.locator("#graph-facts")).to_contain_text("Ledger —written_in→ Rust")
        shoot(page, "graph")

        page.click("button[data-tab=working]")
        row = page.locator("#working-table tbody tr")
        expect(row).to_have_count(1)
        expect(row).to_contain_text("session/abc/draft-plan")
        expect(row.locator("td.left")).to_have_text(re.compile(r"^(59m|1h0m)\d+s$"))

        page.click("button[data-tab=salience]")
        expect(page.locator("text.tier-count[data-tier=active]")).to_have_text("1")
        shoot(page, "salience")


def test_page_paints_and_searches_quickly_in_the_browser(page: Page, seeded_home: Path, tmp_path: Path) -> None:
    """The browser's own timings on a small home, as a smoke check of what benchmarks/web_page.py measures at
    100k (BENCHMARKS.md): first contentful paint and a search from keystroke to rendered list."""
    with page_server(seeded_home, tmp_path / "ui.log") as url:
        open_page(page, url)
        paint = page.evaluate(
            "performance.getEntriesByType('paint').find(e => e.name === 'first-contentful-paint')?.startTime ?? -1"
        )
        assert paint > 0
        search_for(page, "deploy")
        assert float(page.evaluate("document.body.dataset.searchMs")) > 0


def test_reflection_approved_with_a_change_typed_on_the_page(page: Page, tmp_path: Path) -> None:
    home = tmp_path / "home"
    for _ in range(2):
        cli(home, "add", "Bob is allergic to peanuts")
    cli(home, "reflect", "--run", ROCKMEM_REFLECTION_APPROVAL="always")
    pending = cli(home, "reflect")[0]
    merge = pending["actions"][0]
    assert merge["kind"] == "merge"
    with page_server(home, tmp_path / "ui.log") as url:
        open_page(page, url)
        page.click("button[data-tab=review]")
        card = page.locator(f".reflection[data-id='{pending['id']}']")
        card.locator("button:text-is('change')").click()
        changed = {**merge["item"], "content": "Bob has a severe peanut allergy (carries an EpiPen)"}
        card.locator(f"textarea[data-action='{merge['id']}']").fill(json.dumps(changed))
        card.locator("button[data-decision=approve_with_changes]").click()
        expect(page.locator(".reflection")).to_have_count(0)
    assert cli(home, "reflect", pending["id"])[0]["status"] == "approved"
    found = hits(home, "peanut")
    assert [hit["entry"]["content"] for hit in found] == ["Bob has a severe peanut allergy (carries an EpiPen)"]


def test_signing_in_with_the_token_link_in_the_browser(page: Page, tmp_path: Path) -> None:
    token = "a-long-enough-browser-token-0123456789"
    home = tmp_path / "home"
    cli(home, "add", "Only for the signed-in")
    with page_server(home, tmp_path / "ui.log", ROCKMEM_AUTH_TOKEN=token) as url:
        assert f"{url}?token=<ROCKMEM_AUTH_TOKEN>" in (tmp_path / "ui.log").read_text()  # the start line says how
        base = url
        refused = page.goto(base)
        assert refused is not None and refused.status == 401
        open_page(page, base + "?token=" + token)
        assert "token" not in page.url  # dropped from the address and the history
        expect(page.locator("#results li.result .content")).to_have_text("Only for the signed-in")


def test_browsing_episodes_procedures_tags_and_dates(page: Page, tmp_path: Path) -> None:
    home = tmp_path / "home"
    cli(home, "add", "Packed the winter tyres", "--tag", "car")
    cli(home, "add", "Booked the dentist", "--tag", "health")
    from rockmem_mcp.config import Settings
    from rockmem_mcp.procedures.service import Procedures

    settings = Settings.load({"home": str(home)})
    procedures = Procedures(settings)
    procedures.save("Release the app", ["release"], ["tag the build", "publish"])
    procedures.close()
    with page_server(home, tmp_path / "ui.log") as url:
        open_page(page, url)
        page.fill("#tag", "car")
        page.dispatch_event("#tag", "change")
        expect(page.locator("#results li.result")).to_have_count(1)
        expect(page.locator("#results li.result .content")).to_have_text("Packed the winter tyres")
        page.fill("#tag", "")
        page.fill("#after", "2999-01-01")
        page.dispatch_event("#after", "change")
        expect(page.locator("#results li.result")).to_have_count(0)
        page.fill("#after", "")
        page.dispatch_event("#after", "change")
        expect(page.locator("#results li.result")).to_have_count(2)

        page.select_option("#store", "episodes")  # each save logged its episode
        expect(page.locator("#results li.result")).to_have_count(2)
        expect(page.locator("#results")).to_contain_text("Booked the dentist")
        assert page.locator("#tier").is_disabled() and page.locator("#category").is_disabled()
        page.select_option("#store", "procedures")
        expect(page.locator("#results li.result")).to_have_count(1)
        expect(page.locator("#results")).to_contain_text("Release the app")
        expect(page.locator("#results")).to_contain_text("release")


def test_a_dream_run_undone_and_the_salience_picture_over_time(page: Page, tmp_path: Path) -> None:
    home = tmp_path / "home"
    for _ in range(2):
        cli(home, "add", "Gus waters the plants on Sunday")
    cli(home, "add", "Hana plays the cello")
    cli(home, "dream", "--force")  # merges the duplicates; its decay pass records the tiers
    assert len(hits(home, "plants")) == 1
    with page_server(home, tmp_path / "ui.log") as url:
        open_page(page, url)
        page.click("button[data-tab=salience]")
        expect(page.locator("#tiers-history rect")).not_to_have_count(0)
        assert page.locator("#tiers-history rect").count() == 8  # the dream's pass and now, four tiers each
        expect(page.locator("#tiers-history")).not_to_contain_text("no decay pass yet")
        shoot(page, "salience-over-time")

        page.click("button[data-tab=audit]")
        undo = page.locator("#audit-list li button:text-is('Undo the whole run')").first
        expect(undo).to_be_visible()
        undo.click()
        page.click("#confirm-yes")  # what it asks is checked in test_web_page_flows.py
        expect(page.locator("#audit-list li[data-action='REVERT']").first).to_be_visible()
    assert len(hits(home, "plants")) == 2  # the merge undone: both memories back


def test_proposals_deferred_and_committed_to_another_store(page: Page, tmp_path: Path) -> None:
    home = tmp_path / "home"
    from rockmem_mcp.audit.service import Audit
    from rockmem_mcp.config import Settings
    from rockmem_mcp.proposals.service import Proposals

    settings = Settings.load({"home": str(home), "namespace": "subagent/scout"})
    proposals = Proposals(settings, Audit(settings))
    later = proposals.propose_save("The office moves in March")
    vault = proposals.propose_save("The wifi password lives in the team vault")
    with page_server(home, tmp_path / "ui.log") as url:
        open_page(page, url)
        page.click("button[data-tab=review]")
        page.locator(f".proposal[data-id='{later.id}'] button:text-is('Defer')").click()
        expect(page.locator(f".proposal[data-id='{later.id}'] .badge")).to_have_text("deferred")
        card = page.locator(f".proposal[data-id='{vault.id}']")
        card.locator("select.store").select_option("vault")
        card.locator("button.primary").click()
        expect(card).to_have_count(0)
    pinned = hits(home, "wifi password")
    assert pinned[0]["entry"]["pinned"] is True  # the vault: a pinned memory
    statuses = {p["id"]: p["status"] for p in cli(home, "proposals", "list", "--all")["proposals"]}
    assert statuses == {later.id: "deferred", vault.id: "committed"}


def test_saving_one_core_block_keeps_what_is_typed_in_another(page: Page, tmp_path: Path) -> None:
    home = tmp_path / "home"
    with page_server(home, tmp_path / "ui.log") as url:
        open_page(page, url)
        page.click("button[data-tab=core]")
        page.locator("textarea[data-block='Persona']").fill("Prefers short answers")
        page.locator("textarea[data-block='Identity']").fill("Ivo, a translator")
        page.click("text=Save Identity")
        expect(page.locator("#core-total")).not_to_have_text("0 of 3000 tokens in all")
        expect(page.locator("textarea[data-block='Persona']")).to_have_value("Prefers short answers")
        page.click("text=Save Persona")  # the version moved on with the first save: the second is not refused
        expect(page.locator(".count[data-block='Persona']")).not_to_have_text("0 / 500 tokens")
    blocks = {b["name"]: b["lines"] for b in cli(home, "core")["blocks"]}
    assert blocks["Identity"] == ["Ivo, a translator"] and blocks["Persona"] == ["Prefers short answers"]


def test_an_agents_change_made_while_the_page_is_open_is_not_overwritten(page: Page, tmp_path: Path) -> None:
    home = tmp_path / "home"
    entry = cli(home, "add", "Jo likes jazz")
    with page_server(home, tmp_path / "ui.log") as url:
        open_page(page, url)
        page.click(f"#results li[data-id='{entry['id']}']")
        expect(page.locator("#detail-id")).to_have_text(entry["id"])
        # Meanwhile an agent (another process on the same home) files it elsewhere.
        from rockmem_mcp.config import Settings
        from rockmem_mcp.memory.service import MemoryService

        agent = MemoryService(Settings.load({"home": str(home)}), embed_in_background=False)
        agent.update(entry["id"], category="music", tags=["jazz"])
        agent.close()
        page.fill("#edit-content", "Jo likes jazz and blues")
        page.click("#save")
        expect(page.locator("#error")).to_contain_text("changed since you opened it")
        page.click(f"#results li[data-id='{entry['id']}']")  # open it again: the agent's change is shown
        expect(page.locator("#edit-category")).to_have_value("music")
        page.fill("#edit-content", "Jo likes jazz and blues")
        page.click("#save")
        expect(page.locator("#error")).to_be_hidden()
    stored = cli(home, "get", entry["id"])
    assert (stored["content"], stored["category"], stored["tags"]) == ("Jo likes jazz and blues", "music", ["jazz"])


def test_a_contradiction_decided_by_a_click_on_the_review_tab(page: Page, tmp_path: Path) -> None:
    """Issue 45: a reflection never merges "standup at 9am" with "… at 10am"; the review tab shows both, and the
    user's click archives the wrong one."""
    home = tmp_path / "home"
    cli(home, "add", "The team standup is at 9am", "--category", "work")
    cli(home, "add", "The team standup is at 10am", "--category", "work")
    cli(home, "reflect", "--run")
    with page_server(home, tmp_path / "ui.log") as url:
        open_page(page, url)
        page.click("button[data-tab=review]")
        card = page.locator(".contradiction")
        expect(card).to_contain_text("they give different times: 9am / 10am")
        expect(card.locator("blockquote")).to_have_text(["The team standup is at 9am", "The team standup is at 10am"])
        shoot(page, "contradiction")
        card.locator("button[data-archive]").first.click()  # the older one's: 9am
        expect(page.locator(".contradiction")).to_have_count(0)
    assert [h["entry"]["content"] for h in hits(home, "standup")] == ["The team standup is at 10am"]
