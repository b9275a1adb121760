"""The search page in a real browser (chromium through Playwright, as test_browser.py): used
from the keyboard only, and at a phone's width."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from viewstore import EventStore

from ..store._helpers import M, S
from ._data import Browsed
from ._serve import serving
from .test_browser import browser, page, served  # noqa: F401 - the fixtures, shared

LONG_ID = "a-conversation-id-as-long-as-the-store-allows-" + "x" * 200


def _expect() -> Any:
    from playwright.sync_api import expect  # noqa: PLC0415 - as test_browser.py imports it

    return expect


def test_search_and_follow_a_hit_by_keyboard(page: Any, served: tuple[str, Browsed]) -> None:  # noqa: F811
    base, browsed = served
    page.goto(base + "/search")
    page.keyboard.type("looked AGAIN")  # the words box has the focus as the page opens
    page.keyboard.press("Enter")
    page.wait_for_url("**/search?q=looked+AGAIN**")
    hits = page.locator("#hits li.hit")
    _expect()(hits).to_have_count(1)
    assert page.locator("#hits mark").all_inner_texts() == ["looked", "again"]
    assert "in the live view" in hits.inner_text()
    for _ in range(20):  # Tab through the header and the form to the hit's link
        page.keyboard.press("Tab")
        if page.locator("#hits a.hit-link:focus").count():
            break
    else:
        raise AssertionError("Tab never reached the hit's link")
    page.keyboard.press("Enter")
    page.wait_for_url(f"**/c/{browsed.ranges}?seq=8#log-8")
    page.wait_for_selector("#seq-shown:text-is('8')")
    row = page.locator("#log li.le.current[data-seq='8']")
    _expect()(row).to_have_count(1)
    _expect()(page.locator("#log a.seq:target")).to_have_text("8")
    _expect()(row).to_be_in_viewport()


def test_search_page_fits_a_phone(browser: Any, tmp_path: Path) -> None:  # noqa: F811
    """390 px wide, with a long conversation id and a long unbroken word in the hit: the page
    wraps them rather than scrolling sideways."""
    url = f"sqlite:///{tmp_path / 'narrow.db'}"
    with EventStore(url) as store:
        store.create_schema()
        store.append(LONG_ID, [S("S"), M("m1", "needle " + "y" * 300 + " and more words")])
    context = browser.new_context(viewport={"width": 390, "height": 844})
    try:
        phone = context.new_page()
        with serving(url) as served_here:
            phone.goto(served_here.base + "/search?q=needle")
            _expect()(phone.locator("#hits li.hit")).to_have_count(1)
            for where in ("/search?q=needle", "/search", "/search?q=%21%21"):
                phone.goto(served_here.base + where)
                wide = phone.evaluate("() => document.documentElement.scrollWidth")
                assert wide <= 390, f"{where} is {wide} px wide"
    finally:
        context.close()
