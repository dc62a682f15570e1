"""`contextfold ui` and `export --html` in a real browser: Debian's chromium, headless, driven by
Playwright (its `executable_path`; no browser is downloaded). The inspector runs as a user runs
it, a `contextfold ui` process on a free port; another process appends while a page is open.

Without chromium or Playwright these tests skip locally and fail under CI=true. Screenshots of
each page are saved under the test's own temporary directory (`artifacts/`).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import _ui
import pytest
from conftest import CORPUS

try:
    from playwright.sync_api import Browser, Locator, Page, expect, sync_playwright
except ImportError:  # pragma: no cover - reported by the fixture
    sync_playwright = None  # type: ignore[assignment]

from contextfold.errors import InvalidInput

WIDE = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if sync_playwright is None:
        _ui.unavailable("Playwright for Python is not installed (pip install -e '.[test]')")
    if not _ui.CHROMIUM.exists():
        _ui.unavailable(f"no chromium at {_ui.CHROMIUM} (apt-get install chromium)")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(_ui.CHROMIUM), args=_ui.CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("artifacts")


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo session (pruned, compacted) and a harness session with a 40,000-line spill."""
    home = tmp_path_factory.mktemp("home")
    _ui.demo_session(home)
    _ui.spill_session(home)
    return home


@pytest.fixture(scope="module")
def inspector(home: Path) -> Iterator[_ui.Inspector]:
    running = _ui.Inspector(home, CONTEXTFOLD_UI_POLL_SECONDS="0.5")
    try:
        yield running
    finally:
        running.close()


def new_page(browser: Browser, viewport: dict[str, int] = WIDE, **options: Any) -> Page:
    return browser.new_context(viewport=viewport, **options).new_page()


def follow(page: Page, target: str | Locator = "button[type=submit]") -> None:
    """Click a link or send a GET form (by default the page's form) and wait until the new page has
    loaded: a screenshot taken while the browser is between two pages fails ("Unable to capture
    screenshot"), and a count or a read that does not wait would read the old page."""
    with page.expect_navigation(wait_until="load"):
        (page.locator(target) if isinstance(target, str) else target).click()


def service_call(home: Path, work: Any) -> Any:
    return _ui.with_service(home, work)


def cli_json(home: Path, *args: str) -> Any:
    done = subprocess.run(
        [sys.executable, "-m", "contextfold", "--home", str(home), *args, "--json"],
        capture_output=True,
        text=True,
        env=_ui.env(),
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def no_horizontal_scroll(page: Page) -> bool:
    return bool(page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1"))


# -- the pages -------------------------------------------------------------------------------------


def test_the_breakdown_on_the_page_sums_to_what_status_reports(browser, inspector, home, artifacts):
    page = new_page(browser)
    for session in ("demo", "harness-spill"):
        page.goto(f"{inspector.url}/s/{session}")
        cells = page.locator("#breakdown tbody td[data-tokens]")
        total = sum(int(v) for v in cells.evaluate_all("cells => cells.map(c => c.dataset.tokens)"))
        status = cli_json(home, "stats", session)
        assert total == status["tokens_in_view"]
        assert int(page.locator("#tokens-in-view").get_attribute("data-tokens") or -1) == status["tokens_in_view"]
        assert page.locator(".msg").count() == cli_json(home, "show", session, "--breakdown")["messages_in_view"]
        assert no_horizontal_scroll(page)
        page.screenshot(path=artifacts / f"session-{session}.png")
    page.locator(".msg summary").first.focus()
    page.keyboard.press("Enter")  # a folded message opens from the keyboard
    assert page.locator(".msg details").first.get_attribute("open") is not None


def test_the_sessions_page_lists_every_session_by_activity_with_its_source(browser, inspector, artifacts):
    page = new_page(browser)
    page.goto(inspector.url + "/")
    rows = page.locator("table.sessions tbody tr")
    assert rows.count() == 2
    assert "harness-spill" in rows.nth(0).inner_text()  # written last: most recent activity first
    assert "harness" in rows.nth(0).inner_text() and "demo" in rows.nth(1).inner_text()
    page.keyboard.press("/")
    assert page.evaluate("document.activeElement.id") == "q"
    page.keyboard.type("spill")
    page.keyboard.press("Enter")
    page.wait_for_url("**/?q=spill*")
    assert page.locator("table.sessions tbody tr").count() == 1
    page.screenshot(path=artifacts / "sessions.png")


def test_a_summary_citation_opens_the_cited_message_in_the_stored_history(browser, inspector, home, artifacts):
    page = new_page(browser)
    page.goto(f"{inspector.url}/s/demo/summary")
    citation = page.locator("a.cite").first
    seq = int(citation.inner_text().removeprefix("m"))
    citation.click()
    page.wait_for_url(f"**/history?at=m{seq}#m{seq}")
    target = page.locator(f"li#m{seq}")
    assert target.is_visible()
    stored = service_call(home, lambda s: s.search_history("demo", at=f"m{seq}", limit=1))
    header, first_line = stored.text.splitlines()[:2]
    assert header.endswith(", hidden")  # compaction hid it from the view; the page shows it anyway
    assert "hidden from view" in target.inner_text()
    assert first_line.strip()[:60] in target.inner_text()
    page.screenshot(path=artifacts / "summary-citation.png")
    page.goto(f"{inspector.url}/s/demo/summary")
    page.screenshot(path=artifacts / "summary.png")


def test_a_spilled_output_reads_by_line_range_and_searches_like_read_output(browser, inspector, home, artifacts):
    page = new_page(browser)
    page.goto(f"{inspector.url}/s/harness-spill/outputs")
    page.screenshot(path=artifacts / "outputs.png")
    follow(page, page.locator("table.list a[href^='/o/']").first)
    page.fill("#offset", "39990")
    page.fill("#limit", "11")
    follow(page)
    lines = page.locator("#read").inner_text().splitlines()
    assert lines[0].startswith("39990\t") and lines[-1].startswith("40000\t") and len(lines) == 11
    assert "line 39990 of the build log" in lines[0]
    assert "[Output truncated" in page.locator("#preview").inner_text() or page.locator("#preview").inner_text()
    page.fill("#offset", "")
    page.fill("#limit", "")
    page.fill("#pattern", r"ERROR \w+")
    page.fill("#context", "1")
    follow(page)
    found = page.locator("#read").inner_text()
    assert "9999:line 09999 of the build log ERROR disk full" in found and "9998-" in found
    page.screenshot(path=artifacts / "output-search.png")
    # A bad pattern: the page says what read_output says, word for word.
    output_id = page.url.split("/o/")[1].split("?")[0]
    page.fill("#pattern", "(unclosed")
    follow(page)
    with pytest.raises(InvalidInput) as refused:
        service_call(home, lambda s: s.read_output(output_id, pattern="(unclosed"))
    assert page.locator("#error").inner_text() == str(refused.value)


def test_history_search_links_each_hit_to_the_message(browser, inspector, artifacts):
    page = new_page(browser)
    page.goto(f"{inspector.url}/s/demo/search")
    page.fill("#pattern", "content-length")
    follow(page)
    page.screenshot(path=artifacts / "search.png")
    first = page.locator("ol.hits li a").first
    ref = first.inner_text()
    first.click()
    page.wait_for_url(f"**#{ref}")
    assert page.locator(f"li#{ref}").is_visible()


def test_the_life_plot_marks_the_compaction_and_opens_its_before_and_after(browser, inspector, artifacts):
    page = new_page(browser)
    page.goto(f"{inspector.url}/s/demo/life")
    marks = page.locator("svg.plot a.ev-compaction")
    assert marks.count() == 1
    marks.first.click()
    details = page.locator("details.event[open]")
    expect(details).to_have_count(1)  # opened on `hashchange`, which fires after the click returns
    text = details.inner_text()
    assert "extractive" in text and "Before / after" in text and "Removed from view" in text
    page.screenshot(path=artifacts / "life.png")


def test_readable_at_phone_width_and_in_the_dark(browser, inspector, artifacts):
    page = new_page(browser, PHONE, color_scheme="dark")
    for path in ("/", "/s/demo", "/s/demo/life", "/s/demo/summary", "/s/harness-spill/outputs"):
        page.goto(inspector.url + path)
        assert no_horizontal_scroll(page), path
    background = page.evaluate("getComputedStyle(document.body).backgroundColor")
    assert background == "rgb(20, 22, 26)"  # the dark palette
    page.screenshot(path=artifacts / "phone-dark.png", full_page=False)
    page.keyboard.press("t")  # the theme switch, from the keyboard
    assert page.evaluate("getComputedStyle(document.body).backgroundColor") == "rgb(247, 247, 245)"


def test_the_tokens_in_view_change_on_the_open_page_when_another_process_appends(browser, inspector, home):
    page = new_page(browser)
    page.goto(f"{inspector.url}/s/harness-spill")
    outputs = page.context.new_page()
    outputs.goto(f"{inspector.url}/s/harness-spill/outputs")
    assert outputs.locator("table.list tbody tr").count() == 1
    before = int(page.locator("#tokens-in-view").get_attribute("data-tokens") or 0)
    messages = page.locator(".msg").count()
    script = textwrap.dedent(
        f"""
        import asyncio
        from contextfold.config import load_settings
        from contextfold.service.facade import ContextService
        CALL = {{"id": "call_2", "type": "function", "function": {{"name": "bash", "arguments": '{{"cmd": "df -h"}}'}}}}
        async def main():
            async with await ContextService.open(load_settings({{"home": {str(home)!r}}})) as service:
                await service.append("harness-spill", [
                    {{"role": "user", "content": "Now free some disk space. " * 50}},
                    {{"role": "assistant", "content": None, "tool_calls": [CALL]}},
                    {{"role": "tool", "tool_call_id": "call_2", "content": "\\n".join(f"disk {{i}}" for i in range(5000))}},
                ])
        asyncio.run(main())
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=_ui.env(), timeout=120)
    assert done.returncode == 0, done.stderr
    after = cli_json(home, "stats", "harness-spill")["tokens_in_view"]
    assert after > before
    # No reload: each page's own polling swaps in what changed.
    # Locator expectations, not wait_for_function: the page's CSP forbids evaluating a string.
    expect(page.locator("#tokens-in-view")).to_have_attribute("data-tokens", str(after), timeout=60_000)
    assert page.locator(".msg").count() == messages + 2
    expect(outputs.locator("table.list tbody tr")).to_have_count(2, timeout=60_000)


# -- the export ------------------------------------------------------------------------------------


def test_the_export_opens_offline_from_a_file_with_the_same_summary_and_citations(
    browser, inspector, home, tmp_path, artifacts
):
    target = tmp_path / "demo.html"
    done = subprocess.run(
        [sys.executable, "-m", "contextfold", "--home", str(home), "export", "demo", "--html", str(target)],
        capture_output=True,
        text=True,
        env=_ui.env(),
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    live = new_page(browser)
    live.goto(f"{inspector.url}/s/demo/summary")
    summary = live.locator("article.summary .md").first.inner_text()
    citations = live.locator("article.summary a.cite").all_inner_texts()

    context = browser.new_context(viewport=WIDE, offline=True)
    asked: list[str] = []
    context.on("request", lambda request: asked.append(request.url))
    page = context.new_page()
    page.goto(target.as_uri())
    assert [url for url in asked if not url.startswith("file:")] == []
    assert page.locator("#summary article.summary .md").first.inner_text() == summary
    assert page.locator("#summary article.summary a.cite").all_inner_texts() == citations
    first = page.locator("#summary a.cite").first
    seq = first.inner_text()
    first.click()
    assert page.evaluate("location.hash") == f"#{seq}"
    assert page.locator(f"li#{seq}").is_visible()
    assert page.locator(f"li#{seq}").inner_text().strip()
    sums = page.locator("#breakdown tbody td[data-tokens]").evaluate_all("c => c.map(x => +x.dataset.tokens)")
    assert sum(sums) == cli_json(home, "stats", "demo")["tokens_in_view"]
    page.screenshot(path=artifacts / "export.png")
    assert [url for url in asked if not url.startswith("file:")] == []


# -- a real Claude Code import ---------------------------------------------------------------------


@pytest.mark.corpus
def test_a_claude_code_import_shows_its_own_compaction(browser, tmp_path, artifacts):
    from _handover import compacted_transcripts

    if not CORPUS.is_dir():
        pytest.skip(f"the shared corpus is not at {CORPUS}")
    transcript = min(compacted_transcripts(), key=lambda p: (p.stat().st_size, str(p)))
    home = tmp_path / "home"
    _ui.spill_session(home)
    imported = cli_json(home, "import", str(transcript))
    assert imported["compactions"] >= 1
    running = _ui.Inspector(home)
    try:
        page = new_page(browser)
        page.goto(running.url + "/")
        row = page.locator("table.sessions tbody tr", has_text=imported["session_id"])
        assert "import (Claude Code)" in row.inner_text()
        assert page.locator("table.sessions tbody tr", has_text="harness-spill").count() == 1
        page.screenshot(path=artifacts / "sessions-corpus.png")
        follow(page, row.locator("a").first)
        sums = page.locator("#breakdown tbody td[data-tokens]").evaluate_all("c => c.map(x => +x.dataset.tokens)")
        assert sum(sums) == cli_json(home, "stats", imported["session_id"])["tokens_in_view"]
        follow(page, "nav.tabs >> text=Life")
        agent = page.locator("svg.plot a.ev-compaction")
        assert agent.count() == imported["compactions"]
        agent.first.click()
        assert "Claude Code (its own compaction)" in page.locator("details.event[open]").inner_text()
        follow(page, "nav.tabs >> text=Summary")
        assert page.locator("article.summary").count() == imported["compactions"]
        # What Claude Code's own summary lacked, found by code in the history it replaced.
        dropped = page.locator("article.summary section.dropped").first
        assert "Dropped by the agent" in dropped.inner_text()
        assert dropped.locator("li").count() > 0
        page.screenshot(path=artifacts / "summary-corpus.png")
    finally:
        running.close()


# -- tenants over HTTP -------------------------------------------------------------------------------


def add_token(home: Path, tenant: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "contextfold", "--home", str(home), "token", "add", tenant],
        capture_output=True,
        text=True,
        env=_ui.env(),
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()[1].strip()


def test_off_loopback_it_refuses_to_start_without_tokens(tmp_path):
    home = tmp_path / "home"
    _ui.spill_session(home)
    done = subprocess.run(
        [sys.executable, "-m", "contextfold", "--home", str(home), "ui", "--no-open", "--host", "0.0.0.0"],
        capture_output=True,
        text=True,
        env=_ui.env(),
        timeout=60,
    )
    assert done.returncode == 2
    assert "refusing to serve on 0.0.0.0 without bearer tokens" in done.stderr


def test_a_tenant_gets_not_found_for_another_tenants_session_output_and_search(browser, tmp_path, artifacts):
    home = tmp_path / "home"
    theirs = _ui.spill_session(home, "private", lines=3_000, owner="alice")
    alice, bob = add_token(home, "alice"), add_token(home, "bob")
    running = _ui.Inspector(home, "--host", "0.0.0.0")
    try:
        # No token: the sign-in page, nothing else.
        anonymous = new_page(browser)
        refused = anonymous.goto(running.url + "/s/private")
        assert refused is not None and refused.status == 401
        assert "private" not in anonymous.content()

        bobs = new_page(browser, extra_http_headers={"Authorization": f"Bearer {bob}"})
        bobs.goto(running.url + "/")
        assert bobs.locator("table.sessions tbody tr").count() == 0
        pairs = [
            ("/s/private", "/s/nobody-has-this"),
            ("/s/private/summary", "/s/nobody-has-this/summary"),
            ("/s/private/outputs", "/s/nobody-has-this/outputs"),
            ("/s/private/search?pattern=ERROR", "/s/nobody-has-this/search?pattern=ERROR"),
            ("/s/private/history?at=m2", "/s/nobody-has-this/history?at=m2"),
            ("/s/private/live", "/s/nobody-has-this/live"),
            (f"/o/{theirs}", "/o/out_01NOBODYHASTHIS000000000000"),
            (f"/o/{theirs}?offset=1&limit=5", "/o/out_01NOBODYHASTHIS000000000000?offset=1&limit=5"),
            (f"/o/{theirs}?pattern=ERROR", "/o/out_01NOBODYHASTHIS000000000000?pattern=ERROR"),
        ]
        for other, unknown in pairs:
            a = bobs.goto(running.url + other)
            assert a is not None
            a_status, a_body, a_length = a.status, a.body(), a.headers.get("content-length")
            b = bobs.goto(running.url + unknown)
            assert b is not None
            assert a_status == b.status == 404, other
            assert a_body == b.body(), other
            assert a_length == b.headers.get("content-length")
        bobs.screenshot(path=artifacts / "not-found.png")

        # Alice signs in with her token (the cookie the sign-in page sets) and sees her session.
        alices = new_page(browser)
        alices.goto(running.url + "/")
        alices.fill("#token", alice)
        alices.click("#signin button")
        alices.wait_for_selector("table.sessions")
        assert alices.locator("table.sessions tbody tr", has_text="private").count() == 1
        read = alices.goto(f"{running.url}/o/{theirs}?offset=2990&limit=11")
        assert read is not None and read.status == 200
        assert alices.locator("#read").inner_text().splitlines()[-1].startswith("3000\t")
        # Nothing writes: a POST is refused whoever sends it.
        posted = alices.request.post(running.url + "/s/private", headers={"Authorization": f"Bearer {alice}"})
        assert posted.status == 405
    finally:
        running.close()
