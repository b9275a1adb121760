"""``live_equals_resume`` answers, from narrow columns, what comparing the live view with a
full ``resume_view()`` answers: on every reference vector, after every event."""

from __future__ import annotations

import json
from pathlib import Path

from viewstore import EventStore


def test_agrees_with_a_full_resume_on_every_vector(db_url: str, vectors_dir: Path) -> None:
    store = EventStore(db_url)
    store.create_schema()
    cases = sorted((vectors_dir / "cases").glob("*.jsonl"))[:8]
    seen = {True: 0, False: 0}
    for case in cases:
        conversation = case.stem
        for line in case.read_text().splitlines():
            store.append(conversation, json.loads(line))
            live, resume = store.view(conversation), store.resume_view(conversation)
            same = (live.event_ids, live.manipulation_indices) == (
                resume.event_ids,
                resume.manipulation_indices,
            )
            assert store.live_equals_resume(conversation) is same, (case.name, live.version)
            seen[same] += 1
    assert seen[True] and seen[False]  # the vectors exercise both answers
    store.close()
