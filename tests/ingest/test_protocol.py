"""The ingest's refusals, in process (Starlette's TestClient, no agent server needed): a post
without the token, with a bad conversation id, malformed JSON, a body or batch over the limits,
or from no configured source gets a 4xx with a one-line reason and stores nothing. Security
headers on every answer, the ingest's and the viewer's; the viewer's optional token."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from viewstore import EventStore
from viewstore.ingest.app import Limits, create_app
from viewstore.ingest.pull import changes_state
from viewstore.ingest.sources import Source, Sources
from viewstore.web import create_app as create_viewer

TOKEN = "s3cret-token"
HEX = "0" * 31 + "1"
AUTH = {"Authorization": f"Bearer {TOKEN}", "X-Viewstore-Source": "one"}
EVENT = {"kind": "MessageEvent", "id": "e1", "source": "user"}


@pytest.fixture
def store(sqlite_url: str) -> Iterator[EventStore]:
    with EventStore(sqlite_url) as opened:
        opened.create_schema()
        yield opened


@pytest.fixture
def client(store: EventStore) -> Iterator[TestClient]:
    # Port 9 (discard) answers nothing: a post that got past the checks would fail with 502.
    sources = Sources({"one": Source("one", "http://127.0.0.1:9")})
    app = create_app(
        store, token=TOKEN, sources=sources, limits=Limits(max_body_bytes=2000, max_batch=3)
    )
    with TestClient(app, raise_server_exceptions=False) as test_client:
        yield test_client


def _refused(answer: object, status: int, words: str) -> None:
    response = answer
    assert response.status_code == status, response.text  # type: ignore[attr-defined]
    body = response.json()  # type: ignore[attr-defined]
    assert body["status"] == status and words in body["error"] and "\n" not in body["error"]


@pytest.mark.parametrize(
    "headers",
    [{}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}, {"Authorization": "Basic x"}],
)
def test_no_token_no_write(client: TestClient, store: EventStore, headers: dict[str, str]) -> None:
    answer = client.post(f"/events/{HEX}", json=[EVENT], headers=headers)
    _refused(answer, 401, "token")
    assert answer.headers["www-authenticate"].startswith("Bearer")
    _refused(client.post("/conversations", json={"id": HEX}, headers=headers), 401, "token")
    assert store.conversation_ids() == []


@pytest.mark.parametrize(
    ("path", "body", "status", "words"),
    [
        (f"/events/{'A' * 32}", json.dumps([EVENT]), 400, "32 lowercase hex"),
        ("/events/not-a-uuid", json.dumps([EVENT]), 400, "32 lowercase hex"),
        (f"/events/{HEX}", "[{", 400, "not valid JSON"),
        (f"/events/{HEX}", json.dumps({"id": "e1"}), 400, "JSON list"),
        (f"/events/{HEX}", json.dumps([EVENT] * 4), 400, "at most 3 events"),
        (f"/events/{HEX}", json.dumps([{"kind": "MessageEvent"}]), 400, "event #0"),
        (f"/events/{HEX}", json.dumps([{**EVENT, "pad": "x" * 3000}]), 413, "2000 bytes"),
        ("/conversations", "nope", 400, "not valid JSON"),
        ("/conversations", json.dumps({"id": "x"}), 400, "UUID"),
    ],
)
def test_bad_posts_are_refused(  # noqa: PLR0917 (parametrized)
    client: TestClient, store: EventStore, path: str, body: str, status: int, words: str
) -> None:
    _refused(client.post(path, content=body, headers=AUTH), status, words)
    assert store.conversation_ids() == []


def test_a_post_from_no_known_source_is_refused(client: TestClient, store: EventStore) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    _refused(client.post(f"/events/{HEX}", json=[EVENT], headers=headers), 400, "X-Viewstore")
    headers["X-Viewstore-Source"] = "other"
    _refused(client.post(f"/events/{HEX}", json=[EVENT], headers=headers), 400, "X-Viewstore")
    assert store.conversation_ids() == []


def test_a_post_under_another_sources_name_is_refused(store: EventStore, sqlite_url: str) -> None:
    """The webhook adds its server's session key: a post naming one source while carrying
    another's key is a server posting under another's name."""
    sources = Sources(
        {
            "one": Source("one", "http://127.0.0.1:9", "key-one"),
            "two": Source("two", "http://127.0.0.1:9", "key-two"),
        }
    )
    app = create_app(store, token=TOKEN, sources=sources)
    with TestClient(app, raise_server_exceptions=False) as test_client:
        headers = {**AUTH, "X-Session-API-Key": "key-two"}
        _refused(test_client.post(f"/events/{HEX}", json=[EVENT], headers=headers), 403, "'two'")
        _refused(
            test_client.post("/conversations", json={"id": HEX}, headers=headers), 403, "'two'"
        )
        # its own key, or a key of no configured source, passes on to its server (port 9: 502)
        for key in ("key-one", "another-key-of-one"):
            headers = {**AUTH, "X-Session-API-Key": key}
            answer = test_client.post(f"/events/{HEX}", json=[EVENT], headers=headers)
            _refused(answer, 502, "agent server one")
        metrics = test_client.get("/metrics", headers=AUTH).text
    assert 'viewstore_ingest_refusals_total{source="-",reason="not_owner"} 2' in metrics
    assert store.conversation_ids() == []


@pytest.mark.parametrize(
    ("event_id", "words"),
    [
        ("\\ud800", "lone surrogate"),
        ("a\\u0000b", "not allowed"),
        ("a/b", "not allowed"),
        ("", "must not be empty"),
        ("x" * 513, "the limit is 512"),
    ],
)
def test_bad_event_ids_are_a_400(
    client: TestClient, store: EventStore, event_id: str, words: str
) -> None:
    body = f'[{{"id": "{event_id}", "kind": "MessageEvent"}}]'
    _refused(client.post(f"/events/{HEX}", content=body, headers=AUTH), 400, words)
    kind = f'[{{"id": "e1", "kind": "{event_id or "x" * 300}"}}]'
    _refused(client.post(f"/events/{HEX}", content=kind, headers=AUTH), 400, "kind")
    assert store.conversation_ids() == []


def test_an_unreachable_agent_server_is_a_502_and_no_write(
    client: TestClient, store: EventStore
) -> None:
    _refused(client.post(f"/events/{HEX}", json=[EVENT], headers=AUTH), 502, "agent server one")
    assert store.conversation_ids() == []


def test_security_headers_everywhere(client: TestClient, sqlite_url: str) -> None:
    answers = [
        client.get("/health"),
        client.post(f"/events/{HEX}", json=[EVENT]),
        client.post(f"/events/{HEX}", content="[", headers=AUTH),
    ]
    viewer = create_viewer(sqlite_url)
    with TestClient(viewer) as browser:
        answers += [browser.get("/"), browser.get("/api/conversations"), browser.get("/nope")]
    for answer in answers:
        assert "frame-ancestors 'none'" in answer.headers["content-security-policy"]
        assert answer.headers["x-content-type-options"] == "nosniff"
        assert answer.headers["x-frame-options"] == "DENY"


def test_the_viewer_token(store: EventStore, sqlite_url: str) -> None:
    viewer = create_viewer(sqlite_url, token="view-token")
    with TestClient(viewer, follow_redirects=False) as browser:
        assert browser.get("/").status_code == 401
        assert browser.get("/api/conversations").status_code == 401
        assert browser.get("/?token=wrong").status_code == 401
        bearer = {"Authorization": "Bearer view-token"}
        assert browser.get("/api/conversations", headers=bearer).status_code == 200
        redirect = browser.get("/?token=view-token&sort=id")
        assert redirect.status_code == 303 and redirect.headers["location"] == "/?sort=id"
        assert "HttpOnly" in redirect.headers["set-cookie"]
        assert browser.get("/").status_code == 200  # the cookie carries it now


def test_sources_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    file = tmp_path / "sources.toml"
    file.write_text(
        '[sources.a]\nurl = "http://10.0.0.5:8000/"\nsession_api_key_env = "A_KEY"\n'
        '[sources.b]\nurl = "https://b.example"\n'
    )
    monkeypatch.setenv("A_KEY", "key-a")
    monkeypatch.setenv("VIEWSTORE_INGEST_SOURCES", str(file))
    sources = Sources.load()
    assert sources.by_name["a"] == Source("a", "http://10.0.0.5:8000", "key-a")
    assert sources.for_request({"x-session-api-key": "key-a"}) == sources.by_name["a"]
    assert sources.for_request({"x-viewstore-source": "b"}) == sources.by_name["b"]
    assert sources.for_request({"x-session-api-key": "other"}) is None
    monkeypatch.delenv("A_KEY")
    with pytest.raises(ValueError, match="A_KEY"):
        Sources.load()


def test_which_batches_refresh_the_conversation_info() -> None:
    """A state update refreshes the info unless it is one the catalogue keeps nothing of (the
    ``stats`` update the agent server logs after every LLM call)."""
    stats = {"kind": "ConversationStateUpdateEvent", "id": "s1", "key": "stats", "value": {}}
    status = {**stats, "id": "s2", "key": "execution_status", "value": "finished"}
    snapshot = {**stats, "id": "s3", "key": "full_state", "value": {}}
    assert not changes_state([EVENT, stats])
    assert changes_state([EVENT, stats, status])
    assert changes_state([snapshot])
    assert not changes_state([EVENT])
