"""The HTML pages over a real store on SQLite and PostgreSQL (Starlette's TestClient)."""

from __future__ import annotations

import html
import re
from datetime import timedelta

import pytest
from starlette.testclient import TestClient

from viewstore import EventStore, MaskingRules
from viewstore.store.read.catalogue import CatalogueCount
from viewstore.store.records import SourceInfo
from viewstore.web import create_app, details
from viewstore.web.details import SORTS

from ._data import INJECTION, Browsed


def _view_ids(page: str) -> list[str]:
    """The event ids of the view column, in order."""
    view = page.split('id="view"', 1)[1].split("</ol>", 1)[0]
    return re.findall(r'<li class="ev [^"]*" data-id="([^"]+)"', view)


def _cuts(page: str) -> list[int]:
    view = page.split('id="view"', 1)[1].split("</ol>", 1)[0]
    return [int(p) for p in re.findall(r'<li class="cut" data-pos="(\d+)"', view)]


def _log_rows(page: str) -> dict[str, str]:
    """event id -> the log row's text (its state words)."""
    rows = re.findall(
        r'<li class="le ([^"]*)" data-seq="\d+" data-id="([^"]+)">(.*?)</li>', page, re.S
    )
    return {eid: cls + " " + re.sub(r"<[^>]+>", " ", body) for cls, eid, body in rows}


def test_list_searches_sorts_and_pages(client: TestClient, browsed: Browsed) -> None:
    page = client.get("/").text
    for cid in (browsed.demo, browsed.ranges, browsed.script):
        assert f'href="/c/{cid}"' in page
    found = client.get("/", params={"q": "two"}).text
    assert browsed.ranges in found and browsed.demo not in found
    ordered = client.get("/", params={"sort": "events", "order": "desc"}).text
    assert (
        ordered.index(browsed.demo) < ordered.index(browsed.ranges) < ordered.index(browsed.script)
    )
    ascending = client.get("/", params={"sort": "id", "order": "asc"}).text
    assert ascending.index(browsed.demo) < ascending.index(browsed.script)


def test_list_shows_what_an_agent_server_said(db_url: str, browsed: Browsed) -> None:
    with EventStore(db_url) as store:
        store.hand_over(browsed.script, "sandbox-3")  # it holds events no server was the source of
        store.save_conversation_info(
            SourceInfo(
                browsed.script, "sandbox-3", title="Port <the> tests", execution_status="idle"
            )
        )
    with TestClient(create_app(db_url)) as client:
        page = client.get("/", params={"sort": "id", "order": "asc"}).text
        row = next(r for r in page.split("<tr>") if f'href="/c/{browsed.script}"' in r)
        assert "sandbox-3" in row and "idle" in row and "Port &lt;the&gt; tests" in row
        shown = client.get(f"/c/{browsed.script}").text
        assert 'id="agent"' in shown and "sandbox-3, idle" in shown
        assert 'id="agent"' not in client.get(f"/c/{browsed.demo}").text
        other = next(r for r in page.split("<tr>") if f'href="/c/{browsed.demo}"' in r)
        assert "sandbox" not in other
        listed = client.get("/api/conversations", params={"sort": "id", "order": "asc"}).json()
        fed = next(c for c in listed["conversations"] if c["conversation_id"] == browsed.script)
        assert (fed["agent_server"], fed["execution_status"], fed["title"]) == (
            "sandbox-3",
            "idle",
            "Port <the> tests",
        )


def _row(page: str, key: str) -> str:
    return next(r for r in page.split("<tr>") if f'class="cid" href="/c/{key}"' in r)


def _cell_texts(row: str) -> list[list[str]]:
    """The words of each cell of a list row."""
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
    return [html.unescape(re.sub(r"<[^>]+>", " ", c)).split() for c in cells]


def test_list_names_each_conversation_and_its_last_activity(
    client: TestClient, browsed: Browsed
) -> None:
    """Issue 39: a title (no agent server here: the first user message), last activity and
    creation with their zone, "-" where no agent server said anything, "no" request."""
    page = client.get("/", params={"sort": "id", "order": "asc"}).text
    demo = _row(page, browsed.demo)
    assert "The CI build is red. Run the test suite and fix what fails." in demo
    assert 'title="first user message"' in demo
    cells = _cell_texts(demo)
    for when in (cells[1], cells[2]):  # last activity, created
        assert len(when) == 2 and when[1].endswith("Z") and len(when[1]) == 9, cells
    assert cells[5:] == [["no"], ["-"], ["-"]], cells  # request, agent server, status
    assert "please fix the bug" in _row(page, browsed.ranges)
    assert _cell_texts(_row(page, browsed.ranges))[5] == ["no"]  # its request was handled
    script = _row(page, browsed.script)
    assert "&lt;script&gt;window.__pwned" in script and "<script>window" not in script
    listed = client.get("/api/conversations", params={"sort": "id", "order": "asc"}).json()
    record = next(c for c in listed["conversations"] if c["conversation_id"] == browsed.demo)
    assert record["display_title"] == record["first_message"]
    assert record["first_message"].startswith("The CI build is red.")


def test_list_pages_past_fifty(db_url: str, browsed: Browsed) -> None:
    with EventStore(db_url) as store:
        for i in range(52):
            store.append(
                f"bulk-{i:03d}",
                [
                    {
                        "kind": "MessageEvent",
                        "id": f"m{i}",
                        "source": "user",
                        "llm_message": {"role": "user", "content": []},
                    }
                ],
            )
    with TestClient(create_app(db_url)) as client:
        first = client.get("/", params={"sort": "id", "order": "asc"}).text
        assert "1-50 of 55" in first and 'rel="next"' in first
        second = client.get("/", params={"sort": "id", "order": "asc", "offset": 50}).text
        assert "51-55 of 55" in second and "two-ranges" in second and "bulk-000" not in second


def test_conversation_now_and_at_an_earlier_seq(
    client: TestClient, browsed: Browsed, db_url: str
) -> None:
    with EventStore(db_url) as store:
        now, before = store.view(browsed.ranges), store.view(browsed.ranges, as_of=9)
    page = client.get(f"/c/{browsed.ranges}").text
    assert _view_ids(page) == now.event_ids
    assert _cuts(page) == now.manipulation_indices
    assert "two tool calls, both ok" in page  # the summary is rendered
    earlier = client.get(f"/c/{browsed.ranges}", params={"seq": 9}).text
    assert _view_ids(earlier) == before.event_ids == ["S", "U", "a0", "o0", "m1", "a1", "o1", "m2"]
    assert _cuts(earlier) == before.manipulation_indices
    assert 'id="flag" class="flag">' in earlier  # the request at 9 is not yet handled
    assert 'id="flag" class="flag" hidden>' in page
    assert 'href="/c/two-ranges?seq=8"' in earlier and 'href="/c/two-ranges?seq=10"' in earlier


def test_log_greys_what_is_out_of_the_view_and_names_the_condensation(
    client: TestClient, browsed: Browsed
) -> None:
    rows = _log_rows(client.get(f"/c/{browsed.ranges}").text)
    for eid in ("a0", "o0", "a1", "o1"):
        assert rows[eid].startswith("forgotten")
        assert "forgotten by condensation 10" in rows[eid]
    assert rows["m1"].startswith("in_view") and rows["req"].startswith("not_in_view")
    assert "what it changed" in rows["c1"]
    at_9 = _log_rows(client.get(f"/c/{browsed.ranges}", params={"seq": 9}).text)
    assert at_9["a0"].startswith("in_view") and at_9["c1"].startswith("later")


def test_log_is_paged(client: TestClient, browsed: Browsed) -> None:
    page = client.get(f"/api/c/{browsed.ranges}/log", params={"after": 4, "limit": 3}).json()
    assert [e["seq"] for e in page["events"]] == [5, 6, 7]
    html_page = client.get(f"/c/{browsed.ranges}", params={"seq": 11, "log": 8}).text
    assert set(_log_rows(html_page)) == {"req", "c1", "m3"}
    assert "← earlier" in html_page


def test_view_renders_messages_tool_calls_observations_errors(
    client: TestClient, browsed: Browsed
) -> None:
    page = html.unescape(client.get(f"/c/{browsed.demo}").text)
    assert "You are OpenHands agent" in page  # system prompt
    assert "The CI build is red" in page  # user message
    assert "call terminal" in page and '"command": "python -m pytest -q"' in page  # arguments
    assert "42 passed in 3.10s" in page  # observation
    assert "Tool execution timed out after 120s." in page  # agent error
    assert "Ran the tests: test_config.py::test_load fails" in page  # the summary


def test_condensation_page_groups_forgotten_into_view_ranges(
    client: TestClient, browsed: Browsed
) -> None:
    page = client.get(f"/c/{browsed.ranges}/condensation/10").text
    forgotten = page.split('id="forgotten"', 1)[1].split("</ul>", 1)[0]
    items = re.findall(r"<li>(.*?)</li>", forgotten, re.S)
    texts = [re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", item)).strip() for item in items]
    assert texts == [
        "positions 2-3 of the view before (2) : a0 , o0",
        "positions 5-6 of the view before (2) : a1 , o1",
    ]
    assert "two tool calls, both ok" in page
    assert '<strong id="summary-position">2</strong>' in page
    diff = re.findall(r'<li class="(same|removed|added)" data-id="([^"]+)"', page)
    assert [d for d in diff if d[0] != "same"] == [
        ("removed", "a0"),
        ("removed", "o0"),
        ("added", "c1-summary"),
        ("removed", "a1"),
        ("removed", "o1"),
    ]
    demo = client.get(f"/c/{browsed.demo}/condensation/{browsed.demo_condensation}").text
    for eid in browsed.demo_forgotten:
        assert eid in demo


def test_audit_page_shows_verify_and_live_vs_resume(client: TestClient, browsed: Browsed) -> None:
    page = client.get(f"/c/{browsed.demo}/audit").text
    assert "OK: hash chain and view rows match a replay" in page
    data = client.get(f"/api/c/{browsed.demo}/audit").json()
    assert data["verify"]["ok"] is True
    assert data["live"]["length"] > 0
    assert {row["op"] for row in data["diff"]} <= {"same", "folded", "removed", "added"}


def test_event_page(client: TestClient, browsed: Browsed) -> None:
    forgotten = browsed.demo_forgotten[0]
    page = client.get(f"/c/{browsed.demo}/e/{forgotten}").text
    assert f"forgotten by condensation {browsed.demo_condensation}" in page
    assert "not in the live view" in page
    assert client.get(f"/c/{browsed.ranges}/e/m3").status_code == 200


def test_event_text_is_escaped(client: TestClient, browsed: Browsed) -> None:
    for path in (f"/c/{browsed.script}", f"/c/{browsed.script}/e/U", "/?q=%3Cscript%3E"):
        page = client.get(path).text
        assert "<script>window" not in page and "<img src=x" not in page
    page = client.get(f"/c/{browsed.script}").text
    assert html.escape(INJECTION, quote=False) in page.replace("&#34;", '"')


@pytest.mark.parametrize(
    ("path", "status", "words"),
    [
        ("/c/missing", 404, "missing"),
        ("/c/two-ranges?seq=12", 404, "out of range"),
        ("/c/two-ranges?seq=-1", 400, "non-negative integer"),
        ("/c/two-ranges?seq=abc", 400, "non-negative integer"),
        ("/c/two-ranges?log=99", 404, "out of range"),
        ("/c/two-ranges/condensation/3", 404, "no condensation at seq 3"),
        ("/c/two-ranges/condensation/x", 400, "non-negative integer"),
        ("/c/two-ranges/condensation/99999999999999999999", 400, "non-negative integer"),
        ("/c/two-ranges/e/nope", 404, "no event"),
        ("/c/%01bad", 400, "control character"),
        ("/c/two-ranges?seq=%00", 400, "non-negative integer"),
        ("/?sort=nope", 400, "sort must be one of"),
        ("/?q=%00", 400, "without NUL"),
        ("/?offset=x", 400, "offset"),
        ("/nowhere", 404, "Not Found"),
        ("/api/c/missing/view", 404, "missing"),
        ("/api/c/two-ranges/diff?from=1", 400, "from and to are required"),
        ("/api/c/two-ranges/diff?from=1&to=50", 404, "out of range"),
        ("/api/conversations?limit=0", 400, "limit"),
    ],
)
def test_bad_input_is_a_clear_page_never_a_traceback(
    client: TestClient, browsed: Browsed, path: str, status: int, words: str
) -> None:
    answer = client.get(path)
    assert answer.status_code == status, answer.text
    assert words in html.unescape(answer.text)
    assert "Traceback" not in answer.text
    if path.startswith("/api/"):
        assert answer.json()["status"] == status


def test_diff_api_has_only_the_changed_rows(client: TestClient, browsed: Browsed) -> None:
    diff = client.get(f"/api/c/{browsed.ranges}/diff", params={"from": 9, "to": 11}).json()
    assert sorted(diff["removed"]) == ["a0", "a1", "o0", "o1"]
    assert [row["event_id"] for row in diff["added"]] == ["c1-summary", "m3"]
    now = client.get(f"/api/c/{browsed.ranges}/view").json()
    assert diff["order"] == [e["event_id"] for e in now["events"]]
    assert diff["manipulation_indices"] == now["manipulation_indices"]
    back = client.get(f"/api/c/{browsed.ranges}/diff", params={"from": 11, "to": 9}).json()
    assert sorted(back["removed"]) == ["c1-summary", "m3"]
    assert [row["event_id"] for row in back["added"]] == ["a0", "o0", "a1", "o1"]


def test_static_assets_are_served_locally(client: TestClient) -> None:
    assert client.get("/static/step.js").status_code == 200
    css = client.get("/static/style.css")
    assert css.status_code == 200 and "http" not in css.text
    assert "http" not in client.get("/").text.split("<body>")[0]  # nothing fetched elsewhere


def test_a_long_view_is_paged(db_url: str, browsed: Browsed) -> None:
    from ..store._helpers import history  # noqa: PLC0415

    with EventStore(db_url) as store:
        store.append("long", history(300))  # a view of 603 events
        ids = store.view("long").event_ids
    with TestClient(create_app(db_url)) as client:
        page = client.get("/c/long").text
        assert _view_ids(page) == ids[103:]  # the last 500
        assert 'data-windowed="1"' in page and "positions 103-602 of 603" in page
        first = client.get("/c/long", params={"first": 0}).text
        assert _view_ids(first) == ids[:500]
        view = client.get("/api/c/long/view", params={"first": 500}).json()
        assert [e["event_id"] for e in view["events"]] == ids[500:]
        assert (view["length"], view["first"]) == (603, 500)
        assert client.get("/c/long", params={"first": 603}).status_code == 404


def test_a_fork_shows_its_origin_and_its_redactions(db_url: str, browsed: Browsed) -> None:
    with EventStore(db_url) as store:
        fork = store.fork(browsed.ranges, 9, "ranges-retry")
        store.redact(browsed.ranges, "U", reason="pasted a key")
        shared = store.view(fork, as_of=5).event_ids
    with TestClient(create_app(db_url)) as client:
        page = client.get(f"/c/{fork}").text
        assert 'href="/c/two-ranges?seq=9">two-ranges</a>' in page
        assert "1 redaction(s): seq 2 (pasted a key)" in " ".join(html.unescape(page).split())
        assert _view_ids(client.get(f"/c/{fork}", params={"seq": 5}).text) == shared
        assert 'id="origin"' not in client.get(f"/c/{browsed.ranges}").text


def _fill_bulk(db_url: str, count: int) -> None:
    with EventStore(db_url) as store, store.begin() as conn:
        for i in range(count):
            store.append(
                f"bulk-{i:03d}",
                [
                    {
                        "kind": "MessageEvent",
                        "id": f"m{i}-{j}",
                        "source": "user",
                        "llm_message": {"role": "user", "content": []},
                    }
                    for j in range(1 + i % 3)
                ],
                connection=conn,
            )


def _listed(page: str) -> list[str]:
    return re.findall(r'<a class="cid" href="/c/([^"]+)"', page)


def _link(page: str, rel: str) -> str | None:
    found = re.search(rf'<a rel="{rel}" href="([^"]+)"', page)
    return html.unescape(found.group(1)) if found else None


@pytest.mark.parametrize("sort", ["id", "updated", "events"])
@pytest.mark.parametrize("order", ["asc", "desc"])
def test_next_links_walk_every_conversation_once(
    db_url: str, browsed: Browsed, sort: str, order: str
) -> None:
    """The list's next and previous links are keyset cursors (after=/before=): walking by next
    lists each conversation once, in the API's order; walking back by previous returns the
    same pages."""
    _fill_bulk(db_url, 117)
    with EventStore(db_url) as store:
        whole = [
            r.id for r in store.conversations(order_by=SORTS[sort], descending=order == "desc")
        ]
    assert len(whole) == 120
    with TestClient(create_app(db_url)) as client:
        url: str | None = f"/?sort={sort}&order={order}"
        pages: list[list[str]] = []
        while url is not None:
            page = client.get(url)
            assert page.status_code == 200, page.text
            pages.append(_listed(page.text))
            assert "of 120" in page.text
            next_url = _link(page.text, "next")
            assert next_url is None or "after=" in next_url
            url = next_url
        walked = [cid for listed in pages for cid in listed]
        assert walked == whole
        assert [len(listed) for listed in pages] == [50, 50, 20]
        assert "1-50 of 120" in client.get(f"/?sort={sort}&order={order}").text
        # back from the last page by previous links: the same pages, then the first one
        back: list[list[str]] = []
        url = _link(page.text, "prev")
        while url is not None:
            assert "before=" in url
            text = client.get(url).text
            back.append(_listed(text))
            url = _link(text, "prev")
        assert back == pages[-2::-1]
        assert "1-50 of 120" in text  # the first page again, positioned
        # the JSON API pages the same way
        api, cursor, ids = "/api/conversations", None, []
        while True:
            query = {"sort": sort, "order": order, "limit": 40, "after": cursor}
            answer = client.get(api, params={k: v for k, v in query.items() if v}).json()
            ids.extend(c["conversation_id"] for c in answer["conversations"])
            assert answer["total"] == 120 and answer["total_exact"] is True
            if (cursor := answer["next_cursor"]) is None:
                break
        assert ids == whole
        # an offset link (older bookmarks) still works, its links are cursors
        third = client.get("/", params={"sort": sort, "order": order, "offset": 100}).text
        assert _listed(third) == whole[100:] and "101-120 of 120" in third
        assert _link(third, "next") is None and "before=" in (_link(third, "prev") or "")


def test_a_bad_cursor_is_a_400(client: TestClient, browsed: Browsed) -> None:
    first = client.get("/api/conversations", params={"sort": "id", "limit": 1}).json()
    cursor = first["next_cursor"]
    assert cursor
    for path, words in (
        (f"/?sort=updated&after={cursor}", "not of the order by updated_at"),
        ("/?after=nonsense", "after must be a cursor"),
        (f"/api/conversations?sort=id&after={cursor}&before={cursor}", "not both"),
        ("/api/conversations?before=" + "c" * 3000, "at most 2048"),
    ):
        answer = client.get(path)
        assert answer.status_code == 400, (path, answer.text)
        assert words in html.unescape(answer.text)


@pytest.mark.postgres
@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)
def test_the_header_shows_an_estimate_above_the_limit(
    db_url: str, browsed: Browsed, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On PostgreSQL the header is the planner's estimate ("about N") above
    EXACT_COUNT_UP_TO, the count at or below it; the rows are the same."""
    _fill_bulk(db_url, 117)
    with EventStore(db_url) as store:
        # before any ANALYZE (autovacuum may not have run): the collector's live rows
        rough = store.conversation_count_estimate(exact_up_to=20)
        assert not rough.exact and 100 <= rough.count <= 140
        with store.engine.begin() as conn:
            conn.exec_driver_sql("ANALYZE conversations")
        assert store.conversation_count_estimate().exact
        rough = store.conversation_count_estimate(exact_up_to=20)
        assert not rough.exact and 100 <= rough.count <= 140
        found = store.conversation_count_estimate(search="bulk-0", exact_up_to=2)
        assert not found.exact and found.count > 2
    with TestClient(create_app(db_url)) as client:
        assert "(120)" in client.get("/").text
        monkeypatch.setattr(details, "EXACT_COUNT_UP_TO", 20)
        page = client.get("/").text
        assert re.search(r"\(about 1[0-4]0\)", page) and "of about 1" in page, page
        answer = client.get("/api/conversations").json()
        assert answer["total_exact"] is False and answer["total_text"].startswith("about ")
        assert len(answer["conversations"]) == 50
        # a search the planner puts at or below the limit is counted
        assert "(1)" in client.get("/", params={"q": "two-ranges"}).text


def test_sqlite_counts_up_to_the_limit_then_estimates_from_above(sqlite_url: str) -> None:
    """SQLite counts at most ``exact_up_to + 1`` rows; above the limit the header gets the
    largest rowid, never below the count (after an erasure too); a filtered count is exact."""
    with EventStore(sqlite_url) as store:
        store.create_schema()
        for n in range(5):
            store.append(f"c{n}", [{"kind": "MessageEvent", "id": "m"}])
        assert store.conversation_count_estimate(exact_up_to=5) == CatalogueCount(5, True)
        assert store.conversation_count_estimate(exact_up_to=4) == CatalogueCount(5, False)
        store.erase("c4", reason="test")
        store.erase("c1", reason="test")
        left = store.conversation_count()
        rough = store.conversation_count_estimate(exact_up_to=0)
        assert not rough.exact and left <= rough.count <= 5
        assert store.conversation_count_estimate(exact_up_to=left) == CatalogueCount(left, True)
        found = store.conversation_count_estimate(search="c3", exact_up_to=0)
        assert found == CatalogueCount(1, True)


def test_compacted_events_are_shown_as_such(db_url: str, browsed: Browsed) -> None:
    """The page counts what retention compacted apart from redactions, and a view of a time
    a compacted event was in it shows the event, its text as [compacted]: no gap."""
    with EventStore(db_url) as store:
        store.append(
            "kept",
            [{"kind": "MessageEvent", "id": "k-u", "source": "user", "llm_message": {
                "role": "user", "content": [{"type": "text", "text": "my key sk-1"}]}}],
        )  # fmt: skip
        store.append(
            "kept",
            [
                {"kind": "MessageEvent", "id": "k-m", "source": "agent", "extended_content": [
                    {"type": "text", "text": "an answer long forgotten"}]},
                {"kind": "Condensation", "id": "k-c", "source": "environment",
                 "forgotten_event_ids": ["k-m"]},
            ],
        )  # fmt: skip
        store.redact("kept", "k-u", reason="pasted a key")
        report = store.compact("kept", older_than=timedelta(0), min_freed=-(10**6))
        assert report.events == 1
    with TestClient(create_app(db_url)) as client:
        page = " ".join(html.unescape(client.get("/c/kept").text).split())
        assert "1 redaction(s): seq 1 (pasted a key)" in page
        assert "1 event(s) compacted by retention (compact after 0s)" in page
        then = html.unescape(client.get("/c/kept", params={"seq": 2}).text)
        assert _view_ids(then) == ["k-u", "k-m"]
        assert "[compacted]" in then and "long forgotten" not in then


def test_masked_events_are_counted_with_their_rules(db_url: str, browsed: Browsed) -> None:
    """An event masking changed (docs/masking.md) shows its mark, and the page counts the
    masked events with the rules that matched."""
    rules = MaskingRules.from_toml('use = ["common"]')
    with EventStore(db_url, masking=rules) as store:
        store.append(
            "masked",
            [{"kind": "MessageEvent", "id": "s-u", "source": "user", "llm_message": {
                "role": "user", "content": [{"type": "text", "text": "token ghp_" + "k" * 36}]}}],
        )  # fmt: skip
    with TestClient(create_app(db_url)) as client:
        page = " ".join(html.unescape(client.get("/c/masked").text).split())
        assert "1 event(s) masked before they were stored (github-token): seq 1" in page
        assert "[masked:github-token]" in page and "k" * 36 not in page
