"""The viewer's ``?token=`` redirect goes to a path of this site only (issue 37).

A browser that opens ``/anything?token=T`` gets the cookie and a 303 to the same address
without the token. That address must never name another host (``//evil.example/``,
``/%2F%2Fevil.example%2F``, ``/\\evil.example/``, an absolute-form target), must keep ids that
hold ``?``, ``#`` or ``%2F`` whole, and a path with a control character is a one-line 400
(it once became a Location header the server refused to send, dropping the connection).
Checked in process (Starlette's TestClient) and on a real server over a raw socket, whose
request line is exactly the bytes below."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote, urljoin, urlsplit

import pytest
from starlette.testclient import TestClient

from viewstore import EventStore
from viewstore.web import create_app

from ._serve import Served, raw_get, serving

TOKEN = "s3cret"
ODD_CONVERSATION = "a?b#c"  # a conversation id may hold any of these
ODD_EVENT = "x#y?w%2F"  # and an event id these and an escape-like "%2F"
ODD_PAGE = f"/c/{quote(ODD_CONVERSATION, safe='')}/e/{quote(ODD_EVENT, safe='')}"
SITE = "http://viewer.local/"

#: request path (as sent, before ``?token=``) -> the Location the viewer must answer
OFF_SITE = {
    "//evil.example/": "/evil.example/",
    "///evil.example/x": "/evil.example/x",
    "/%2F%2Fevil.example%2F": "/%2F%2Fevil.example%2F",
    "/\\evil.example/": "/%5Cevil.example/",
    "/\\\\evil.example/": "/%5C%5Cevil.example/",
    "/%5Cevil.example/": "/%5Cevil.example/",
    "/%zz/%": "/%25zz/%25",
}


def _on_site(location: str) -> None:
    """A path of this site: one leading slash, printable ASCII, the same host once resolved."""
    assert location.startswith("/") and location[1:2] not in ("/", "\\"), location
    assert location.isascii() and location.isprintable() and " " not in location, location
    resolved = urlsplit(urljoin(SITE, location))
    assert (resolved.scheme, resolved.netloc) == ("http", "viewer.local"), location


def _one_line_error(body: bytes, status: int) -> str:
    assert body.count(b"\n") == 0
    found = json.loads(body)
    assert found["status"] == status
    message: str = found["error"]
    return message


@pytest.fixture
def odd_store(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'odd.db'}"
    with EventStore(url) as store:
        store.create_schema()
        store.append(
            ODD_CONVERSATION, [{"kind": "MessageEvent", "id": ODD_EVENT, "source": "user"}]
        )
    return url


@pytest.fixture
def client(odd_store: str) -> Iterator[TestClient]:
    app = create_app(odd_store, token=TOKEN)
    with TestClient(app, base_url=SITE.rstrip("/"), follow_redirects=False) as opened:
        yield opened


@pytest.fixture
def served(odd_store: str) -> Iterator[Served]:
    with serving(odd_store, env={"VIEWSTORE_SERVE_TOKEN": TOKEN}) as running:
        yield running


@pytest.mark.parametrize(("path", "expected"), OFF_SITE.items())
def test_in_process_the_redirect_stays_on_the_site(
    client: TestClient, path: str, expected: str
) -> None:
    answer = client.get(f"{SITE.rstrip('/')}{path}?token={TOKEN}")
    assert answer.status_code == 303
    assert answer.headers["location"] == expected
    _on_site(answer.headers["location"])


@pytest.mark.parametrize(("path", "expected"), OFF_SITE.items())
def test_on_a_server_the_redirect_stays_on_the_site(
    served: Served, path: str, expected: str
) -> None:
    answer = raw_get(served, f"{path}?token={TOKEN}".encode())
    assert answer.status == 303
    assert answer.headers["location"] == expected
    _on_site(answer.headers["location"])


def test_an_absolute_form_target_redirects_to_a_path(served: Served) -> None:
    """``GET http://evil.example/x`` reaches the app with that as its path."""
    answer = raw_get(served, f"http://evil.example/x?token={TOKEN}".encode())
    assert answer.status == 303
    assert answer.headers["location"] == "/http://evil.example/x"
    _on_site(answer.headers["location"])


def test_ids_with_query_and_fragment_characters_stay_whole(
    client: TestClient, served: Served
) -> None:
    """The address comes from the raw path, escapes kept: ``%3F`` is not turned into a
    query, ``%23`` into a fragment, nor ``%2F`` into another path segment."""
    target = f"{ODD_PAGE}?seq=1&token={TOKEN}&q=%2B+%26"
    expected = f"{ODD_PAGE}?seq=1&q=%2B+%26"
    in_process = client.get(target)
    on_server = raw_get(served, target.encode())
    for location in (in_process.headers["location"], on_server.headers["location"]):
        assert location == expected
        _on_site(location)
    cookie = {"Cookie": f"viewstore_token={TOKEN}"}
    page = raw_get(served, expected.encode(), cookie)
    assert page.status == 200
    assert f"<dt>id</dt><dd>{ODD_EVENT}</dd>" in page.body.decode()
    api = raw_get(served, f"/api{ODD_PAGE}".encode(), cookie)
    assert api.status == 200
    found = json.loads(api.body)
    assert (found["conversation_id"], found["event_id"]) == (ODD_CONVERSATION, ODD_EVENT)


def test_other_parameters_keep_their_escapes(client: TestClient) -> None:
    answer = client.get(f"/?q=%0D%0A&token={TOKEN}&sort=id&token=other&order=asc&token={TOKEN}")
    assert answer.status_code == 303
    assert answer.headers["location"] == "/?q=%0D%0A&sort=id&order=asc"


@pytest.mark.parametrize("path", ["/%0D%0Aset-cookie:%20x=y", "/a%00b", "/c/x%0Ay", "/%7F", "/%09"])
def test_a_control_character_in_the_path_is_a_400(
    client: TestClient, served: Served, path: str
) -> None:
    target = f"{path}?token={TOKEN}"
    in_process = client.get(target)
    assert in_process.status_code == 400
    assert "location" not in in_process.headers
    assert "control character" in _one_line_error(in_process.content, 400)
    on_server = raw_get(served, target.encode())  # answered, not a dropped connection
    assert on_server.status == 400
    assert "location" not in on_server.headers
    assert "control character" in _one_line_error(on_server.body, 400)
    assert not [line for line in served.log_lines() if "Traceback" in line or "ERROR" in line]


def test_a_raw_carriage_return_never_reaches_a_location(served: Served) -> None:
    """CR inside the request line: the HTTP parser refuses the request itself."""
    answer = raw_get(served, f"/a\rb?token={TOKEN}".encode())
    assert answer.status == 400
    assert "location" not in answer.headers


def test_a_wrong_token_is_still_refused(client: TestClient) -> None:
    answer = client.get(f"{SITE.rstrip('/')}//evil.example/?token=wrong")
    assert answer.status_code == 401
    assert "location" not in answer.headers
