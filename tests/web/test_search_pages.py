"""Full-text search in the viewer: ``/api/search`` (the store's ``SearchPage`` as JSON) and the
``/search`` page, on every layout the web tests run (Starlette's TestClient)."""

from __future__ import annotations

import html
import re
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from starlette.testclient import TestClient

from viewstore import EventStore
from viewstore.web import create_app

from ..store._helpers import A, C, M, O, S, U
from ._data import INJECTION, Browsed
from .test_api_schema import CHECKS

FINDER = "finder"


@pytest.fixture
def finder(db_url: str, browsed: Browsed) -> str:
    """A conversation whose events say "zebra", two of them forgotten by a condensation."""
    with EventStore(db_url) as store:
        store.append(
            FINDER,
            [
                S("S"),
                U("U", "find the zebra"),
                A("a0", "tc0", "r0"),
                O("o0", "tc0", "a zebra crossing, forgotten later"),
                M("m1", "the zebra is striped"),
                C("c1", ["a0", "o0"], "one tool call", 2),
                M("m2", "zebra again"),
            ],
        )
    return FINDER


def _search(client: TestClient, **query: Any) -> Any:
    answer = client.get("/api/search", params=query)
    assert answer.status_code == 200, answer.text
    return answer.json()


def _ids(found: Any) -> set[str]:
    return {hit["event_id"] for hit in found["hits"]}


def test_api_answers_the_stores_search(client: TestClient, db_url: str, finder: str) -> None:
    found = _search(client, q="zebra")
    with EventStore(db_url) as store:
        assert found == store.search("zebra").to_dict()
    assert _ids(found) == {"U", "o0", "m1", "m2"} and found["next_cursor"] is None
    assert all("zebra" in hit["snippet"].lower() for hit in found["hits"])
    ranks = [hit["rank"] for hit in found["hits"]]
    assert ranks == sorted(ranks, reverse=True)
    assert {h["event_id"]: h["in_live_view"] for h in found["hits"]}["o0"] is False


def test_api_pages_with_after(client: TestClient, finder: str) -> None:
    whole = [(h["conversation_id"], h["seq"]) for h in _search(client, q="zebra")["hits"]]
    walked: list[tuple[str, int]] = []
    after: str | None = None
    while True:
        query: dict[str, Any] = {"q": "zebra", "limit": 1}
        if after is not None:
            query["after"] = after
        found = _search(client, **query)
        walked.extend((h["conversation_id"], h["seq"]) for h in found["hits"])
        after = found["next_cursor"]
        if after is None:
            break
    assert walked == whole and len(walked) == 4


def test_api_filters(client: TestClient, finder: str, browsed: Browsed) -> None:
    assert _ids(_search(client, q="zebra", window="forgotten")) == {"o0"}
    assert _ids(_search(client, q="zebra", window="live")) == {"U", "m1", "m2"}
    assert _ids(_search(client, q="zebra", kind="MessageEvent", source="agent")) == {"m1", "m2"}
    both = client.get("/api/search?q=zebra&kind=ObservationEvent&kind=MessageEvent").json()
    assert _ids(both) == {"U", "o0", "m1", "m2"}
    assert _ids(_search(client, q="zebra", conversation=browsed.ranges)) == set()
    assert _ids(_search(client, q="looked", conversation=browsed.ranges)) == {"m1", "m2"}


@pytest.mark.parametrize(
    ("query", "status", "said"),
    [
        ({}, 400, "q is required"),
        ({"q": "!!"}, 400, "needs a word"),
        ({"q": "zebra", "window": "later"}, 400, "window must be one of"),
        ({"q": "zebra", "limit": "0"}, 400, "limit"),
        ({"q": "zebra", "limit": "201"}, 400, "at most 200"),
        ({"q": "zebra", "limit": "ten"}, 400, "limit must be a non-negative integer"),
        ({"q": "zebra", "after": "nonsense"}, 400, "after must be a cursor"),
        ({"q": "zebra", "kind": "a\x00b"}, 400, "without NUL"),
        ({"q": "zebra", "conversation": "a/b"}, 400, "conversation id"),
        ({"q": "zebra", "conversation": "nobody"}, 404, "nobody"),
    ],
)
def test_api_refuses_a_bad_parameter(
    client: TestClient, finder: str, query: dict[str, str], status: int, said: str
) -> None:
    answer = client.get("/api/search", params=query)
    assert answer.status_code == status
    body = answer.json()
    assert body["status"] == status and said in body["error"], body


def test_api_answers_match_the_schema(db_url: str, finder: str) -> None:
    api = schemathesis.openapi.from_asgi("/api/openapi.json", create_app(db_url))
    operation = api["/api/search"]["GET"]
    real = operation.Case(query={"q": "zebra", "window": "live", "limit": 2})
    assert real.call_and_validate(checks=CHECKS).json()["hits"]

    @given(case=operation.as_strategy())
    @settings(
        max_examples=25, deadline=None, database=None, suppress_health_check=list(HealthCheck)
    )
    def check(case: Any) -> None:
        case.call_and_validate(checks=CHECKS)

    check()


def _hits(page: str) -> list[tuple[str, str]]:
    """(link, snippet HTML) of each hit on the page."""
    return re.findall(
        r'<a class="hit-link" href="([^"]+)">.*?<p class="snippet[^"]*">(.*?)</p>', page, re.S
    )


def test_page_shows_hits_with_marks_and_links(client: TestClient, finder: str) -> None:
    answer = client.get("/search", params={"q": "Zebra striped"})
    assert answer.status_code == 200
    ((link, snippet),) = _hits(answer.text)
    assert link == f"/c/{FINDER}?seq=5#log-5"
    assert snippet == "the <mark>zebra</mark> is <mark>striped</mark>"
    assert 'value="Zebra striped"' in answer.text and "in the live view" in answer.text
    target = client.get(html.unescape(link).split("#")[0]).text
    row = re.search(r'<li class="le ([^"]*)" data-seq="5"[^>]*>(.*?)</li>', target, re.S)
    assert row is not None and "current" in row.group(1) and 'id="log-5"' in row.group(2)
    forgotten = client.get("/search", params={"q": "crossing"}).text
    assert "not in the live view" in forgotten and f"/c/{FINDER}?seq=4#log-4" in forgotten


def test_page_escapes_payload_text(client: TestClient, db_url: str, browsed: Browsed) -> None:
    said = "quagga says " + INJECTION + " & <b>bold</b>"
    with EventStore(db_url) as store:
        store.append("escaper", [S("S"), M("x1", said)])
    page = client.get("/search", params={"q": "quagga"}).text
    ((_, snippet),) = _hits(page)
    assert "<script" not in snippet and "<img" not in snippet and "<b>" not in snippet
    assert snippet.startswith("<mark>quagga</mark> says &lt;script&gt;window.__pwned = 1")
    assert re.sub(r"</?mark>", "", html.unescape(snippet)) == said
    assert "<script>window" not in page and "<img src=x" not in page


def test_page_next_link_carries_after_and_the_filters(client: TestClient, finder: str) -> None:
    first = client.get("/search", params={"q": "zebra", "kind": "MessageEvent", "limit": 1}).text
    found = re.search(r'<a rel="next" href="([^"]+)">', first)
    assert found is not None
    following = html.unescape(found.group(1))
    assert "after=s1." in following and "kind=MessageEvent" in following and "limit=1" in following
    seen = [link for link, _ in _hits(first)]
    while following:
        page = client.get(following).text
        seen.extend(link for link, _ in _hits(page))
        more = re.search(r'<a rel="next" href="([^"]+)">', page)
        following = html.unescape(more.group(1)) if more else ""
    assert sorted(seen) == sorted(f"/c/{FINDER}?seq={s}#log-{s}" for s in (2, 5, 7))


def test_page_kind_field_takes_several(client: TestClient, finder: str) -> None:
    page = client.get("/search", params={"q": "zebra", "kind": "ObservationEvent, MessageEvent"})
    assert len(_hits(page.text)) == 4
    assert 'value="ObservationEvent, MessageEvent"' in page.text


def test_page_says_when_nothing_matches(client: TestClient, finder: str) -> None:
    page = client.get("/search", params={"q": "zebra unicorn"})
    assert page.status_code == 200 and _hits(page.text) == []
    assert "No events hold every word of “zebra unicorn”." in page.text
    filtered = client.get("/search", params={"q": "zebra", "window": "forgotten", "kind": "X"})
    assert "No events hold every word of “zebra” with these filters." in filtered.text


@pytest.mark.parametrize(
    ("query", "status", "said"),
    [
        ({"q": ""}, 400, "a search query needs a word"),
        ({"q": "zebra", "conversation": "nobody"}, 404, "nobody"),
        ({"q": "zebra", "limit": "500"}, 400, "limit must be at most 200"),
    ],
)
def test_page_shows_a_refused_search_above_its_form(
    client: TestClient, finder: str, query: dict[str, str], status: int, said: str
) -> None:
    page = client.get("/search", params=query)
    assert page.status_code == status and "Traceback" not in page.text
    message = page.text.split('<p class="message" id="search-error" role="alert">', 1)[1]
    assert said in html.unescape(message.split("</p>", 1)[0])
    assert '<form class="find"' in page.text and _hits(page.text) == []


def test_page_refuses_a_malformed_url(client: TestClient) -> None:
    page = client.get("/search", params={"q": "zebra", "window": "soon"})
    assert page.status_code == 400 and '<p class="message">' in page.text
    assert "window must be one of" in page.text


def test_page_opens_empty_and_is_linked(client: TestClient, finder: str) -> None:
    page = client.get("/search").text
    assert '<input id="q" type="search" name="q" value="" autofocus>' in page
    assert "search-error" not in page and 'id="hits"' not in page and "No events" not in page
    assert '<label class="words">Words' in page
    assert '<a class="find" href="/search">' in client.get("/").text
    conversation = client.get(f"/c/{FINDER}").text
    assert f'href="/search?conversation={FINDER}"' in conversation
    scoped = client.get("/search", params={"conversation": FINDER}).text
    assert f'value="{FINDER}"' in scoped and 'id="hits"' not in scoped
