"""End to end in a real browser: Debian's chromium driven by Playwright against a real
``viewstore serve`` process on loopback. The tests also save the screenshots in
docs/screenshots/ that docs/howto-viewer.md shows.

Without chromium or Playwright these skip, unless ``VIEWSTORE_REQUIRE_BROWSER=1`` (set by
.ci/run), which makes that a failure: CI must run them.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from viewstore import EventStore

from ..store._helpers import M
from ._data import INJECTION, Browsed, populate
from ._serve import serving

CHROMIUM = Path("/usr/bin/chromium")
REQUIRE_BROWSER_ENV = "VIEWSTORE_REQUIRE_BROWSER"
SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"


def _unavailable(reason: str) -> None:
    if os.environ.get(REQUIRE_BROWSER_ENV, "").strip() not in ("", "0", "false", "no"):
        pytest.fail(f"{REQUIRE_BROWSER_ENV} is set but the browser tests cannot run: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    try:
        from playwright.sync_api import sync_playwright  # noqa: PLC0415 - optional in dev
    except ImportError as error:
        _unavailable(f"playwright is not installed ({error})")
    if not CHROMIUM.is_file():
        _unavailable(f"{CHROMIUM} is missing (apt-get install chromium)")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        try:
            yield launched
        finally:
            launched.close()


@contextmanager
def _serving(url: str) -> Iterator[str]:
    """``viewstore serve`` on the store at ``url``; its base URL."""
    with serving(url) as served:
        yield served.base


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Browsed]]:
    """``viewstore serve`` on a populated SQLite store; its base URL."""
    url = f"sqlite:///{tmp_path_factory.mktemp('served') / 'store.db'}"
    with EventStore(url) as store:
        browsed = populate(store)
    with _serving(url) as base:
        yield base, browsed


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    opened = context.new_page()
    dialogs: list[str] = []
    opened.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    try:
        yield opened
    finally:
        context.close()
    assert dialogs == [], f"event content opened dialogs: {dialogs}"


def _view_ids(page: Any) -> list[str]:
    ids: list[str] = page.eval_on_selector_all("#view li.ev", "els => els.map(e => e.dataset.id)")
    return ids


def _shot(page: Any, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"))


def test_list_then_a_conversation(page: Any, served: tuple[str, Browsed]) -> None:
    base, browsed = served
    page.goto(base + "/")
    links = page.locator("#conversations a.cid").all_inner_texts()
    assert sorted(links) == sorted([browsed.demo, browsed.ranges, browsed.script])
    _shot(page, "conversations")
    page.fill("input[name=q]", "two")
    page.click("form.search button")
    assert page.locator("#conversations a.cid").all_inner_texts() == [browsed.ranges]
    page.click(f"text={browsed.ranges}")
    page.wait_for_url(f"**/c/{browsed.ranges}")
    assert _view_ids(page) == ["S", "U", "c1-summary", "m1", "m2", "m3"]


def test_next_links_walk_a_long_list_once(page: Any, tmp_path: Path) -> None:
    """A store of 130 conversations behind ``viewstore serve``: clicking "next" until there is
    none shows every conversation once, in the list's order (keyset links: after=); clicking
    "previous" from the last page comes back to the first."""
    url = f"sqlite:///{tmp_path / 'many.db'}"
    with EventStore(url) as store:
        populate(store)
        with store.begin() as conn:
            for i in range(127):
                store.append(f"many-{i:03d}", [M(f"m{i}")], connection=conn)
        whole = [r.id for r in store.conversations(order_by="updated_at", descending=True)]
    with _serving(url) as base:
        page.goto(base + "/")
        walked, pages = [], 0
        while True:
            walked.extend(page.locator("#conversations a.cid").all_inner_texts())
            pages += 1
            following = page.locator("a[rel=next]")
            if following.count() == 0:
                break
            assert "after=" in (following.get_attribute("href") or "")
            following.click()
            page.wait_for_load_state()
        assert walked == whole and pages == 3
        assert "30 of 130" in page.inner_text(".pager")
        for _ in range(2):
            page.locator("a[rel=prev]").click()
            page.wait_for_load_state()
        assert page.locator("#conversations a.cid").all_inner_texts() == whole[:50]
        assert "1-50 of 130" in page.inner_text(".pager")
        assert page.locator("a[rel=prev]").count() == 0


def test_the_list_counts_new_events_as_they_commit(page: Any, tmp_path: Path) -> None:
    """The note above the list (static/follow.js over /api/feed/follow) appears once events
    commit after the page opened, counting them and their conversations."""
    url = f"sqlite:///{tmp_path / 'news.db'}"
    with EventStore(url) as store:
        store.create_schema()
        store.append("old", [M("o1")])
        with _serving(url) as base:
            page.goto(base + "/")
            assert page.locator("#feed-news").is_hidden()
            page.locator("#feed-news[data-following]").wait_for(state="attached")
            store.append("new", [M("n1"), M("n2")])
            store.append("other", [M("x1")])
            note = page.locator("#feed-news a")
            note.wait_for(state="visible")
            # Waited for through Playwright, not a script string: the page's CSP forbids eval.
            from playwright.sync_api import expect  # noqa: PLC0415 - as the fixture imports it

            expect(note).to_have_text("3 new events in 2 conversations: reload", timeout=15_000)


def test_step_to_an_earlier_seq_fetches_the_diff(page: Any, served: tuple[str, Browsed]) -> None:
    base, browsed = served
    page.goto(f"{base}/c/{browsed.ranges}")
    with page.expect_response(lambda r: "/diff?from=11&to=9" in r.url) as diff:
        page.locator("#seq-range").fill("9")
    assert diff.value.ok
    _wait_shown(page, 9)
    assert _view_ids(page) == ["S", "U", "a0", "o0", "m1", "a1", "o1", "m2"]
    assert page.url.endswith(f"/c/{browsed.ranges}?seq=9")
    assert page.is_visible("#flag")  # the request at seq 9 is not handled yet
    page.wait_for_selector("#log li.le.in_view[data-id=a0]")
    # one step forward with the "next" button: the condensation applies
    page.click("#next")
    _wait_shown(page, 10)
    assert _view_ids(page) == ["S", "U", "c1-summary", "m1", "m2"]
    assert not page.is_visible("#flag")
    page.wait_for_selector("#log li.le.forgotten[data-id=a0]")
    assert "forgotten by condensation 10" in page.inner_text("#log li.le[data-id=a0]")
    # a reload of the pasted URL shows the same step, rendered by the server
    page.goto(page.url)
    assert _view_ids(page) == ["S", "U", "c1-summary", "m1", "m2"]


def test_conversation_screenshot(page: Any, served: tuple[str, Browsed]) -> None:
    base, browsed = served
    page.goto(f"{base}/c/{browsed.demo}")
    page.locator("#seq-range").fill(str(browsed.demo_condensation))
    _wait_shown(page, browsed.demo_condensation)
    assert "CondensationSummaryEvent" in page.inner_text("#view")
    _shot(page, "conversation")


def test_condensation_page_lists_the_forgotten_ids(page: Any, served: tuple[str, Browsed]) -> None:
    base, browsed = served
    page.goto(f"{base}/c/{browsed.ranges}/condensation/10")
    assert page.locator("#forgotten li").all_inner_texts() == [
        "positions 2-3 of the view before (2): a0, o0",
        "positions 5-6 of the view before (2): a1, o1",
    ]
    page.goto(f"{base}/c/{browsed.demo}/condensation/{browsed.demo_condensation}")
    shown = page.locator("#forgotten .fid").all_inner_texts()
    assert sorted(shown) == sorted(browsed.demo_forgotten)
    _shot(page, "condensation")


def test_injected_script_does_not_run(page: Any, served: tuple[str, Browsed]) -> None:
    base, browsed = served
    page.goto(f"{base}/c/{browsed.script}")
    assert INJECTION in page.inner_text("#view")
    # rows added by the step control's script are text too
    page.locator("#seq-range").fill("1")
    _wait_shown(page, 1)
    page.locator("#seq-range").fill("3")
    _wait_shown(page, 3)
    assert page.inner_text("#view").count(INJECTION) == 2
    page.goto(f"{base}/c/{browsed.script}/e/U")
    assert INJECTION in page.inner_text("main")
    assert page.evaluate("window.__pwned") is None


def test_required_browser_turns_a_skip_into_a_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(REQUIRE_BROWSER_ENV, raising=False)
    with pytest.raises(pytest.skip.Exception):
        _unavailable("no chromium")
    monkeypatch.setenv(REQUIRE_BROWSER_ENV, "1")
    with pytest.raises(pytest.fail.Exception, match="no chromium"):
        _unavailable("no chromium")


def test_ci_installs_chromium_and_requires_the_browser_tests() -> None:
    ci = (Path(__file__).resolve().parents[2] / ".ci" / "run").read_text(encoding="utf-8")
    assert f"export {REQUIRE_BROWSER_ENV}=1" in ci
    assert "apt-get install -y -q chromium" in ci and "DEBIAN_FRONTEND=noninteractive" in ci


def _wait_shown(page: Any, seq: int) -> None:
    """Until the page shows ``seq``. A selector, not a script: the viewer's
    Content-Security-Policy refuses a string evaluated as JavaScript in the page."""
    page.wait_for_selector(f"#seq-shown:text-is('{seq}')")
