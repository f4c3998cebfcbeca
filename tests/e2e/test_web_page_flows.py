"""The web page as a page to keep open (issue 44, item 4), in headless Chromium against `rockmem-mcp ui` as a real
process: paging through every memory and audit line, creating a memory and deleting one for good, confirmations
naming what a revert or an undo changes, `doctor` clean afterwards, the graph's overview, working-memory values,
reviews as before/after texts, and a font stack for emoji. Screenshots of each flow go to test-artifacts/
(ROCKMEM_TEST_ARTIFACTS moves it), named in the assertions that refer to them."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from tests.e2e import test_web_page as shared
from tests.e2e.test_web_page import ARTIFACTS, HOSTILE, cli, hits, open_page, page_server, search_for, shoot

browser, page = shared.browser, shared.page  # the same fixtures: one Chromium per module, one page per test

MANY = 310  # the home: "50 shown of 310" and no way past it


def memory_files(home: Path) -> dict[str, Path]:
    return {path.stem: path for path in (home / "memory").rglob("*.json")}


def audit_lines(home: Path) -> int:
    return sum(1 for line in (home / "meta" / "audit.log").read_text().splitlines() if line.strip())


def doctor_is_clean(home: Path) -> None:
    """`rockmem-mcp doctor` exits 0 (cli() asserts it) and names no finding."""
    report = cli(home, "doctor")
    assert report["findings"] == [], report["findings"]


def test_paging_through_every_memory_and_every_audit_line(page: Page, tmp_path: Path) -> None:
    home = tmp_path / "home"
    lines = tmp_path / "many.jsonl"
    lines.write_text(
        "".join(json.dumps({"content": f"Fact number {n:03d} about the garden"}) + "\n" for n in range(MANY))
    )
    cli(home, "import", str(lines))
    on_disk = memory_files(home)
    assert len(on_disk) == MANY
    with page_server(home, tmp_path / "ui.log") as url:
        open_page(page, url)
        info, results, more = page.locator("#result-info"), page.locator("#results li.result"), page.locator("#more")
        expect(info).to_have_text(f"50 shown of {MANY} · ranking newest")
        expect(more).to_be_visible()
        while results.count() < MANY:  # endless scroll: the button coming into view brings the next page
            shown = results.count()
            more.evaluate("button => button.scrollIntoView()")
            expect(results).not_to_have_count(shown)
        expect(more).to_be_hidden()
        expect(info).to_have_text(f"{MANY} shown of {MANY} · ranking newest")
        listed = results.evaluate_all("items => items.map(item => item.dataset.id)")
        assert sorted(listed) == sorted(on_disk)  # every memory once, none twice
        shoot(page, "paging-memories")

        search_for(page, "garden")  # a search's pages too
        expect(info).to_have_text(re.compile(rf"^50 shown of {MANY} · ranking "))
        # The button's own click, without scrolling it into view: a click that scrolls it there also brings a page
        # by coming into view, and on a busy machine that page could be in before the click's (150 shown).
        more.dispatch_event("click")
        expect(results).to_have_count(100)
        assert len(set(results.evaluate_all("items => items.map(item => item.dataset.id)"))) == 100

        page.click("button[data-tab=audit]")
        logged = audit_lines(home)
        assert logged >= MANY
        entries, audit_more = page.locator("#audit-list li"), page.locator("#audit-more")
        expect(entries).to_have_count(100)
        while entries.count() < logged:
            shown = entries.count()
            audit_more.evaluate("button => button.scrollIntoView()")
            expect(entries).not_to_have_count(shown)
        expect(audit_more).to_be_hidden()
        expect(entries).to_have_count(logged)  # every line of meta/audit.log, the oldest last
        expect(entries.last).to_contain_text("Fact number 000 about the garden")
        shoot(page, "paging-audit")


def test_a_memory_created_then_deleted_for_good_after_a_confirmation_naming_it(page: Page, tmp_path: Path) -> None:
    home = tmp_path / "home"
    cli(home, "add", "Already here")
    text = "Kim's 🎂 birthday is on 3 May " + HOSTILE
    with page_server(home, tmp_path / "ui.log") as url:
        open_page(page, url)
        page.click("#new")
        page.fill("#new-content", text)
        page.fill("#new-category", "people/kim")
        page.fill("#new-tags", "birthday, kim")
        page.click("#new-save")
        expect(page.locator("#new-memory")).to_be_hidden()
        expect(page.locator("#edit-content")).to_have_value(text)  # opened once saved
        entry_id = page.locator("#detail-id").inner_text()
        stored = cli(home, "get", entry_id)
        assert (stored["content"], stored["category"], stored["tags"]) == (text, "people/kim", ["birthday", "kim"])
        expect(page.locator(f"#results li[data-id='{entry_id}'] .content")).to_have_text(text)
        assert page.locator("#results img, #results script").count() == 0 and page.title() == "rockmem"
        shoot(page, "created")

        page.click("#erase")
        dialog = page.locator("#confirm")
        expect(dialog).to_be_visible()
        expect(page.locator("#confirm-title")).to_have_text("Delete this memory for good?")
        expect(page.locator("#confirm-body blockquote")).to_have_text(text)  # names what goes, as text
        expect(page.locator("#confirm-body")).to_contain_text(entry_id)
        assert page.locator("#confirm-body img, #confirm-body script").count() == 0
        shoot(page, "delete-confirmation")
        page.click("#confirm-no")
        expect(dialog).to_be_hidden()
        assert entry_id in memory_files(home)  # cancelled: nothing gone

        page.click("#erase")
        page.click("#confirm-yes")
        expect(page.locator(f"#results li[data-id='{entry_id}']")).to_have_count(0)
        expect(page.locator("#result-info")).to_contain_text(f"deleted {entry_id} for good")
        assert entry_id not in memory_files(home)  # not archived: the file is gone
        assert not (home / ".embeddings" / f"{entry_id}.bin").exists()
        episodes = "".join(p.read_text() for p in (home / "episodes").glob("*.jsonl"))
        assert "birthday" not in episodes and "Already here" in episodes  # its episode went with it
        page.check("#archived")
        expect(page.locator("#results li.result")).to_have_count(1)  # not in the archive either
        expect(page.locator("#results li.result .content")).to_have_text("Already here")
        shoot(page, "deleted")
    doctor_is_clean(home)


def test_undoing_a_run_asks_first_naming_its_changes_and_leaves_doctor_clean(page: Page, tmp_path: Path) -> None:
    home = tmp_path / "home"
    for _ in range(2):
        cli(home, "add", "Gus waters the plants on Sunday")
    cli(home, "add", "Hana plays the cello")
    cli(home, "dream", "--force")  # merges the duplicates into a new memory
    merged = hits(home, "plants")
    assert len(merged) == 1
    merged_id = merged[0]["entry"]["id"]
    cli(home, "reindex", "--embeddings")  # the merged memory has its vector, as a running server gives it one
    vector = home / ".embeddings" / f"{merged_id}.bin"
    assert vector.exists()
    doctor_is_clean(home)
    with page_server(home, tmp_path / "ui.log") as url:
        open_page(page, url)
        page.click("button[data-tab=audit]")
        undo = page.locator("#audit-list li button.undo-run").first
        undo.click()
        expect(page.locator("#confirm")).to_be_visible()
        run = page.locator("#confirm-title").inner_text()
        assert re.fullmatch(r"Undo every change of dream:\S+\?", run), run
        expect(page.locator("#confirm-body li[data-action=MERGE]")).to_contain_text("Gus waters the plants on Sunday")
        expect(page.locator("#confirm-body li[data-action=ARCHIVE]")).to_have_count(2)  # both sources, put back
        shoot(page, "undo-run-confirmation")
        page.click("#confirm-no")
        assert len(hits(home, "plants")) == 1  # cancelled: the merge stands

        undo.click()
        page.click("#confirm-yes")
        expect(page.locator("#audit-list li.done")).to_contain_text("2 restored")
        shoot(page, "undo-run-done")
    assert len(hits(home, "plants")) == 2  # both memories back, the merged one gone
    assert merged_id not in memory_files(home)
    assert not vector.exists()  # its vector went with it
    doctor_is_clean(home)  # before: "orphaned-vector .embeddings/<merged>.bin: its memory is gone", exit 1


def test_the_graph_opens_on_its_busiest_entities_and_working_memory_shows_values(page: Page, tmp_path: Path) -> None:
    home = tmp_path / "home"
    from rockmem_mcp.config import Settings
    from rockmem_mcp.graph.service import GraphService
    from rockmem_mcp.working.service import WorkingMemory

    settings = Settings.load({"home": str(home)})
    graph = GraphService(settings)
    graph.add_triples(
        [
            {"subject": "Payments", "predicate": "uses", "object": name}
            for name in ("Ledger", "Kafka", "Postgres", "Redis")
        ]
        + [{"subject": "Ledger", "predicate": "written_in", "object": "Rust"}]
        + [{"subject": f"Team {n}", "predicate": "owns", "object": f"Service {n}"} for n in range(12)]
    )
    graph.close()
    value = "step one: <b>draft</b>\nstep two: 🚀 ship"
    WorkingMemory(settings, "session/abc").save("draft-plan", value, ttl_minutes=60)
    with page_server(home, tmp_path / "ui.log") as url:
        open_page(page, url)
        page.click("button[data-tab=graph]")  # no entity clicked: the overview is drawn
        canvas = page.locator("#graph-svg[data-view='overview']")
        expect(canvas).to_be_visible()
        nodes = page.locator("#graph-svg g.node")
        expect(nodes).to_have_count(15)  # the 15 busiest of 30
        expect(page.locator("#graph-svg g.node[data-name='Payments'] text")).to_have_text("Payments (4)")
        expect(page.locator("#graph-svg g.node[data-name='Ledger'] text")).to_have_text("Ledger (2)")
        expect(page.locator("#graph-facts")).to_contain_text("Payments —uses→ Kafka")
        expect(page.locator("#graph-hint")).to_contain_text("15 busiest of 30 entities (17 facts)")
        shoot(page, "graph-overview")
        page.locator("#graph-svg g.node[data-name='Ledger']").click()  # its neighbourhood, two hops
        expect(page.locator("#graph-svg[data-view='entity']")).to_be_visible()
        expect(page.locator("#graph-facts")).to_contain_text("Ledger —written_in→ Rust")

        page.click("button[data-tab=working]")
        row = page.locator("#working-table tbody tr")
        expect(row).to_have_count(1)
        expect(row.locator("td.value pre")).to_have_text(value)  # the value, as text
        assert row.locator("td.value b").count() == 0
        shoot(page, "working-values")


def test_a_review_shows_before_and_after_texts_side_by_side(page: Page, tmp_path: Path) -> None:
    home = tmp_path / "home"
    sources = [cli(home, "add", "Bob is allergic to peanuts")["id"] for _ in range(2)]
    cli(home, "add", "Carol works on billing")
    cli(home, "add", "Carol works on billing")
    cli(home, "reflect", "--run", ROCKMEM_REFLECTION_APPROVAL="always")
    pending = cli(home, "reflect")[0]
    merges = [a for a in pending["actions"] if a["kind"] == "merge"]
    bob = next(a for a in merges if set(a["item"]["ids"]) == set(sources))
    from rockmem_mcp.audit.service import Audit
    from rockmem_mcp.config import Settings
    from rockmem_mcp.proposals.service import Proposals

    settings = Settings.load({"home": str(home), "namespace": "subagent/researcher"})
    proposal = Proposals(settings, Audit(settings)).propose_save("The staging database is db-staging-2")
    with page_server(home, tmp_path / "ui.log") as url:
        open_page(page, url)
        page.click("button[data-tab=review]")
        card = page.locator(f".reflection[data-id='{pending['id']}']")
        expect(card.locator("details.summary pre")).to_be_hidden()  # the raw summary folded away, not repeated
        row = card.locator(".action").filter(has=page.locator(f"input[data-action='{bob['id']}']"))
        for source in sources:  # each source by its text, not only its id
            expect(row.locator(f".side.before .source[data-id='{source}'] blockquote")).to_have_text(
                "Bob is allergic to peanuts"
            )
        expect(row.locator(".side.after blockquote")).to_have_text(bob["item"]["content"])
        other = card.locator(".action[data-kind='merge']").filter(has_text="Carol works on billing")
        expect(other.locator(".side.before blockquote")).to_have_count(2)
        proposal_card = page.locator(f".proposal[data-id='{proposal.id}']")
        expect(proposal_card.locator(".side.before")).to_contain_text("(nothing: a new memory)")
        expect(proposal_card.locator(".side.after blockquote")).to_have_text("The staging database is db-staging-2")
        shoot(page, "review-before-after")
        # Approved item by item: only Bob's merge.
        for action in pending["actions"]:
            if action["id"] != bob["id"]:
                card.locator(f"input[data-action='{action['id']}']").uncheck()
        card.locator("button[data-decision=partial]").click()
        expect(page.locator(".reflection")).to_have_count(0)
    assert len(hits(home, "peanuts")) == 1 and len(hits(home, "billing")) == 2
    doctor_is_clean(home)


def test_text_fonts_end_with_colour_emoji_fonts(page: Page, tmp_path: Path) -> None:
    """The page asks for an emoji font after its text fonts; whether one draws depends on the machine (fc-list):
    where Noto Color Emoji is installed, an emoji in a core block's heading is drawn in colour, not as a box."""
    home = tmp_path / "home"
    with page_server(home, tmp_path / "ui.log") as url:
        open_page(page, url)
        family = page.evaluate("getComputedStyle(document.body).fontFamily")
        assert family.index("DejaVu Sans") < family.index('"Noto Color Emoji"'), family
        svg_family = page.evaluate("getComputedStyle(document.querySelector('#graph-svg')).fontFamily")
        assert "Noto Color Emoji" in family and svg_family, svg_family
        try:
            installed = subprocess.run(["fc-list", ":", "family"], capture_output=True, text=True).stdout
        except FileNotFoundError:  # no fontconfig tools: what is installed cannot be told
            installed = ""
        if "Noto Color Emoji" not in installed:
            pytest.skip("the colour check needs the Noto Color Emoji font (apt-get install fonts-noto-color-emoji)")
        coloured = page.evaluate(
            """() => {
              const canvas = document.createElement("canvas");
              canvas.width = canvas.height = 40;
              const context = canvas.getContext("2d");
              context.font = "32px " + getComputedStyle(document.body).fontFamily;
              context.fillText("🎂", 2, 32);
              const data = context.getImageData(0, 0, 40, 40).data;
              for (let i = 0; i < data.length; i += 4) {
                const [r, g, b, a] = data.slice(i, i + 4);
                if (a && (Math.abs(r - g) > 40 || Math.abs(g - b) > 40)) return true;
              }
              return false;
            }"""
        )
        assert coloured, f"an emoji is drawn without colour although Noto Color Emoji is installed ({ARTIFACTS})"
