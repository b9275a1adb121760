"""Full-text search (``store.search``, docs/search.md) against a naive scan of the same store.

Hypothesis builds conversations of messages over a small vocabulary, with condensations that
forget some of them (their summaries searchable too), forks at random seqs and forks of forks,
redactions and compactions; then every query of one or two words, store-wide and in each
conversation, with no window, ``live`` and ``forgotten``, walked page by page, must find
exactly the events a scan of the stored payloads finds: each once, none redacted or compacted
away. On SQLite, PostgreSQL and partitioned PostgreSQL, through both API flavours.
"""

from __future__ import annotations

import contextlib
import json
import re
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from viewstore import EventStore, InvalidArgumentError

VOCABULARY = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot"]
_TOKEN = re.compile(r"[a-z0-9]+")


def _message(eid: str, words: list[str]) -> dict[str, Any]:
    text = "Please " + ", ".join(words) + "!"
    return {
        "id": eid,
        "source": "user",
        "kind": "MessageEvent",
        "llm_message": {"role": "user", "content": [{"type": "text", "text": text}]},
    }


def _condensation(eid: str, forgotten: list[str], words: list[str]) -> dict[str, Any]:
    return {
        "id": eid,
        "source": "environment",
        "kind": "Condensation",
        "forgotten_event_ids": forgotten,
        "summary": "summary: " + " ".join(words),
        "summary_offset": 0,
    }


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _naive(
    store: EventStore, words: list[str], window: str | None, conversation: str | None
) -> set[str]:
    """The ids a scan of every stored payload finds."""
    found: set[str] = set()
    scopes = [conversation] if conversation is not None else store.conversation_ids()
    for scope in scopes:
        origin = store.fork_origin(scope)
        live = set(store.view(scope).event_ids)
        for event in store.events(scope):
            if conversation is None and origin is not None and event.seq <= origin.at_seq:
                continue  # store-wide, each event once: where its log row is
            tokens = {t for s in _strings(event.payload) for t in _TOKEN.findall(s.lower())}
            if not set(words) <= tokens:
                continue
            if conversation is None and window is not None:
                live = set(store.view(event.conversation_id).event_ids)
            entered = event.kind == "MessageEvent"  # every message enters a view
            if window == "live" and event.event_id not in live:
                continue
            if window == "forgotten" and (event.event_id in live or not entered):
                continue
            found.add(event.event_id)
    return found


def _walked(store: EventStore, words: list[str], **options: Any) -> list[str]:
    """Every hit, page by page (three a page)."""
    hits: list[str] = []
    after = None
    ranks: list[float] = []
    while True:
        page = store.search(" ".join(words), limit=3, after=after, **options)
        hits.extend(hit.event_id for hit in page.hits)
        ranks.extend(hit.rank for hit in page.hits)
        if page.next_cursor is None:
            break
        after = page.next_cursor
    assert ranks == sorted(ranks, reverse=True)
    return hits


SETTINGS = settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


def test_search_finds_what_a_scan_finds(store: EventStore, sweep_step: int) -> None:
    @settings(SETTINGS, max_examples=max(2, SETTINGS.max_examples // sweep_step))
    @given(st.data())
    def run(data: st.DataObject) -> None:
        run_id = uuid.uuid4().hex[:6]
        counter = iter(range(10**6))
        conversations = [f"{run_id}-c"]
        texts = st.lists(st.sampled_from(VOCABULARY), min_size=1, max_size=3)
        store.append(conversations[0], _message(f"{run_id}e{next(counter)}", data.draw(texts)))
        for _ in range(data.draw(st.integers(4, 14))):
            target = data.draw(st.sampled_from(conversations))
            action = data.draw(
                st.sampled_from(["append", "append", "append", "condense", "fork", "redact"])
            )
            if action == "append":
                store.append(target, _message(f"{run_id}e{next(counter)}", data.draw(texts)))
            elif action == "condense":
                ids = [i for i in store.view(target).event_ids if not i.endswith("-summary")]
                if ids:
                    forget = data.draw(st.lists(st.sampled_from(ids), min_size=1, unique=True))
                    eid = f"{run_id}k{next(counter)}"
                    store.append(target, _condensation(eid, forget, data.draw(texts)))
            elif action == "fork":
                version = len(store.events(target))
                if version:
                    new = f"{run_id}-f{next(counter)}"
                    store.fork(target, data.draw(st.integers(1, version)), new)
                    conversations.append(new)
            else:
                stored = [e for e in store.events(target) if e.kind == "MessageEvent"]
                if stored:
                    chosen = data.draw(st.sampled_from(stored))
                    with contextlib.suppress(InvalidArgumentError):  # redacted already
                        store.redact(target, chosen.event_id, reason="test")
        if data.draw(st.booleans()):
            store.compact(older_than=timedelta(0), min_freed=-(10**6))
        words = data.draw(st.lists(st.sampled_from(VOCABULARY), min_size=1, max_size=2))
        for window in (None, "live", "forgotten"):
            for scope in (None, data.draw(st.sampled_from(conversations))):
                got = _walked(store, words, window=window, conversation_id=scope)
                assert len(got) == len(set(got)), "a hit twice"
                mine = {i for i in got if i.startswith(run_id)}
                expected = {i for i in _naive(store, words, window, scope) if i.startswith(run_id)}
                assert mine == expected, (words, window, scope)

    run()


def test_a_hit_says_where_and_what(store: EventStore) -> None:
    store.append("c", [_message("m1", ["git", "push", "force"]), _message("m2", ["status"])])
    store.append("c", _condensation("k1", ["m1"], ["pushed"]))
    [hit] = store.search("git push").hits
    assert (hit.conversation_id, hit.seq, hit.event_id, hit.kind) == ("c", 1, "m1", "MessageEvent")
    assert hit.source == "user" and hit.snippet == "Please git, push, force!"
    assert hit.in_live_view is False and hit.rank > 0
    assert [h.event_id for h in store.search("status").hits] == ["m2"]
    assert store.search("status").hits[0].in_live_view is True
    assert [h.event_id for h in store.search("pushed").hits] == ["k1"]
    assert [h.event_id for h in store.search("please", kinds=["MessageEvent"]).hits] == [
        "m1",
        "m2",
    ] or {h.event_id for h in store.search("please", kinds=["MessageEvent"]).hits} == {"m1", "m2"}
    assert store.search("please", sources=["agent"]).hits == []
    later = datetime.now(UTC) + timedelta(minutes=1)
    assert store.search("please", since=later).hits == []
    assert len(store.search("please", until=later).hits) == 2


def test_redacted_and_masked_text_is_never_found(store: EventStore) -> None:
    store.append("c", [_message("m1", ["secretword"]), _message("m2", ["other"])])
    assert [h.event_id for h in store.search("secretword").hits] == ["m1"]
    store.redact("c", "m1", reason="test")
    assert store.search("secretword").hits == []
    store.erase("c", reason="test")
    assert store.search("other").hits == []


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"query": "   "}, "needs a word"),
        ({"query": "x" * 501}, "at most 500"),
        ({"query": "a", "window": "soon"}, "window must be one of"),
        ({"query": "a", "limit": 0}, "limit"),
        ({"query": "a", "limit": 201}, "at most 200"),
        ({"query": "a", "after": "s1.bm90IGpzb24"}, "not a search position|does not decode"),
        ({"query": "a", "after": "c1.x"}, "cursor a search returned"),
        ({"query": "a", "kinds": "MessageEvent"}, "list of strings"),
    ],
)
def test_a_bad_search_is_a_typed_error(
    store: EventStore, options: dict[str, Any], message: str
) -> None:
    rest = dict(options)  # the same dict serves every layout and flavour
    query = rest.pop("query")
    with pytest.raises(InvalidArgumentError, match=message):
        store.search(query, **rest)


def test_a_payload_with_a_nul_escape_is_searchable(store: EventStore) -> None:
    event = _message("m1", ["nulword"])
    event["llm_message"]["content"][0]["text"] += "\u0000 tail"
    store.append("c", [event])
    assert json.loads(store.events("c")[0].payload_json)["id"] == "m1"
    assert [h.event_id for h in store.search("nulword").hits] == ["m1"]
