"""Verify and rebuild: the stored rows against a pure replay of the log.

The projector is deterministic in the log alone (not in how it was split into appends), so the
rows a conversation should have are exactly ``project_from_scratch(log)``: verify compares every
view and index row, alive or closed, with that; rebuild writes it. Verify also checks the hash
chain, every other column the log determines (``derived``), and, given a checkpoint, that the
history it saw is still there unchanged (``anchors``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from sqlalchemy import Connection, Row, delete

from viewstore.domain import chain
from viewstore.domain.chain import GENESIS
from viewstore.domain.errors import ConversationNotFoundError
from viewstore.domain.events import Event, parse_event
from viewstore.domain.projector import Projection, ViewEntry, project_from_scratch
from viewstore.domain.view import View, full_indices
from viewstore.store.adapters import base_state
from viewstore.store.append import masks, rows
from viewstore.store.append.locking import lock_conversation
from viewstore.store.audit import anchors, derived, fork_links, masks_check, sizes_copy
from viewstore.store.audit.anchors import Checkpoint
from viewstore.store.database.schema import manipulation_indices, view_entries
from viewstore.store.lifecycle import forking, redaction
from viewstore.store.read import lineage, reads, sizes
from viewstore.store.records import ConversationReport, Redaction, VerifyReport


def verify(
    conn: Connection,
    keys: Sequence[str] | None,
    against: Checkpoint | None = None,
    chain_key: bytes | None = None,
) -> VerifyReport:
    """Verify ``keys`` (None: every conversation). What one conversation costs does not
    depend on how many others the store holds: only verify of the whole store lists them."""
    report = VerifyReport()
    everything = keys is None
    # Whether this role may read base_states: asked once per call, not per conversation.
    states = base_state.readable(conn)
    if keys is None:
        present = reads.conversation_ids(conn)
        keys = present
        missing = [] if against is None else sorted(set(against.heads) - set(present))
    else:
        # Only a conversation the checkpoint saw may be reported missing (the others raise
        # ConversationNotFoundError): each is looked up by its id alone.
        anchored = set() if against is None else set(against.heads)
        missing = [key for key in keys if key in anchored and not reads.exists(conn, key)]
        keys = [key for key in keys if key not in missing]
    for key in keys:
        report.conversations.append(verify_conversation(conn, key, against, chain_key, states))
    for key in missing:
        assert against is not None
        report.conversations.append(anchors.missing(conn, key, against))
    if everything:  # a size copy left by no conversation
        for key in sizes_copy.orphans(conn):
            problem = "catalogue_sizes holds a copy of a conversation that is not there"
            report.conversations.append(
                ConversationReport(conversation_id=key, version=0, problems=[problem])
            )
    if everything and states:  # a base state written before its conversation's first event
        for key in base_state.without_conversation(conn):
            alone = ConversationReport(conversation_id=key, version=0)
            base_state.check(conn, key, alone, states)
            if not alone.ok:
                report.conversations.append(alone)
    return report


def verify_conversation(
    conn: Connection,
    key: str,
    checkpoint: Checkpoint | None = None,
    chain_key: bytes | None = None,
    base_states_readable: bool | None = None,
) -> ConversationReport:
    conv = reads.conversation_row(conn, key)
    links, readable = fork_links.check(conn, conv)
    report = ConversationReport(conversation_id=key, version=conv.version, problems=links)
    base_state.check(conn, key, report, base_states_readable)
    if not readable:
        return report
    stored = derived.log_rows(conn, conv)
    anchor = None if checkpoint is None else checkpoint.heads.get(key)
    if anchor is not None and checkpoint is not None:
        report.problems.extend(anchors.compare(stored, anchor, checkpoint))
    records = redaction.lineage_records(conn, conv)
    _check_log(conv, stored, records, report, chain_key)
    report.problems.extend(
        masks_check.check(masks.lineage_records(conn, conv), stored, records, chain_key)
    )
    try:
        log = [(row.seq, parse_event(row.payload)) for row in stored]
    except ValueError as error:
        report.problems.append(f"a stored payload no longer parses: {error}")
        return report
    replayed = project_from_scratch(log)
    report.problems.extend(derived.event_columns(stored, log))
    # A fork keeps rows of its own part only: its sources' rows are checked with them.
    start = int(conv.fork_seq or 0)
    own_log = [(seq, event) for seq, event in log if seq > start]
    expected = forking.own_part(replayed, start)
    report.problems.extend(derived.times_and_feed(conv, [r for r in stored if r.seq > start]))
    report.problems.extend(derived.condensation_rows(conn, key, own_log))
    report.problems.extend(derived.forgotten_rows(conn, key, own_log, expected.forgotten))
    _check_rows(conn, key, expected, report)
    report.problems.extend(derived.conversation_columns(conv, expected.state))
    report.problems.extend(sizes_copy.check(conn, conv))
    _check_view(log, report)
    return report


def _check_log(
    conv: Row[Any],
    stored: Sequence[Row[Any]],
    records: dict[int, list[Redaction]],
    report: ConversationReport,
    chain_key: bytes | None,
) -> None:
    version, last_hash = conv.version, conv.last_hash
    previous = GENESIS
    for expected_seq, event in enumerate(stored, start=1):
        if event.seq != expected_seq:
            report.problems.append(f"seq {expected_seq} is missing from the log")
            return
        redacted = records.get(event.seq)
        if redacted:
            problems, note = redaction.check_redacted(event, previous, redacted, chain_key)
            report.notes.append(note)
            if problems:
                report.problems.extend(problems)
                return
            previous = event.hash
            continue
        link = (event.hash, previous, event.seq, event.event_id, event.payload)
        if chain.hash_matches(*link, key=chain_key):
            previous = event.hash
            continue
        if chain_key is not None and chain.hash_matches(*link, key=None):
            report.problems.append(
                f"seq {event.seq} (event {event.event_id!r}): its hash is a plain SHA-256, not "
                "keyed with the chain key: written or rewritten by someone without the key"
            )
            return
        report.problems.append(
            f"hash chain broken at seq {event.seq} (event {event.event_id!r}): the event "
            "or one before it was altered, reordered or removed"
        )
        return
    if len(stored) != version:
        report.problems.append(f"version is {version} but the log holds {len(stored)} events")
    elif stored and last_hash != previous:
        report.problems.append("the conversation's last hash does not match its last event")


def _check_rows(
    conn: Connection, key: str, expected: Projection, report: ConversationReport
) -> None:
    want_entries = {entry.order_key: entry for entry in expected.new_entries}
    try:
        loaded = rows.load_all_entries(conn, key)
    except ValueError as error:
        # A column a row is loaded by (its role) holds no value the store writes: named here,
        # where a read of the view would fail.
        report.problems.append(f"view_entries: a row no longer loads: {error}")
        loaded = None
    have_entries = {entry.order_key: entry for entry in loaded or ()}
    # A read builds each Event from the row's id and its payload (the log's, or a summary's
    # own): both are compared here, so the envelope column (NULL, unread) is not.
    wrong_rows, wrong_copies = _entry_differences(want_entries, have_entries)
    if wrong_rows:
        order_key = min(wrong_rows)
        first = want_entries.get(order_key) or have_entries[order_key]
        report.problems.append(
            f"{len(wrong_rows)} view rows differ from replay (first: event {first.id!r}, "
            f"entered at seq {first.entered_seq})"
        )
    if wrong_copies:
        # What the LLM is sent: the log row each names (or a copy it still carries), or a summary.
        order_key = min(wrong_copies)
        first = have_entries[order_key]
        report.problems.append(
            f"{len(wrong_copies)} view rows read an event that differs from the "
            f"log (first: event {first.id!r}, entered at seq {first.entered_seq}: "
            f"{', '.join(wrong_copies[order_key])})"
        )
    if loaded is not None:
        named = wrong_rows | wrong_copies.keys()
        report.problems.extend(_read_back(conn, key, want_entries, list(have_entries), named))
    want_indices = {(r.position, r.from_seq, r.to_seq) for r in expected.new_indices}
    have_indices = set(rows.load_index_rows(conn, key))
    if want_indices != have_indices:
        diff = sorted(want_indices ^ have_indices, key=lambda r: (r[1], r[0]))
        report.problems.append(
            f"{len(diff)} manipulation-index rows differ from replay "
            f"(first: position {diff[0][0]} from seq {diff[0][1]})"
        )


def _read_back(
    conn: Connection,
    key: str,
    want: dict[str, ViewEntry],
    order_keys: Sequence[str],
    named: set[str],
) -> list[str]:
    """Every row read back as a view read reads it (``reads.read_every_row``: the id and the
    payload the reader is sent, whose kind and fields the Event is built from), against
    replay. The columns checked above are what the read is made of; a read can still go
    wrong over right columns (issue 37: a fork's row holding its payload's copy and no id read
    back with the id None, and verify said ok). ``order_keys``: the rows' keys, in key order,
    read in this transaction's snapshot as the rows below are; ``named``: the keys of rows
    named already, by the columns that make their read wrong."""
    read = reads.read_every_row(conn, key)
    if len(read) != len(order_keys):
        return [f"a view read returns {len(read)} rows where view_entries has {len(order_keys)}"]
    wrong = [
        (order_key, event_id, payload, wanted)
        for order_key, (event_id, payload) in zip(order_keys, read, strict=True)
        if order_key not in named
        and (wanted := want.get(order_key)) is not None
        and (event_id != wanted.id or payload != wanted.payload)
    ]
    if not wrong:
        return []
    order_key, event_id, payload, wanted = wrong[0]
    got = "no payload" if payload is None else "the log's payload"
    if payload is not None and payload != wanted.payload:
        got = "another payload than the log's"
    return [
        f"{len(wrong)} view rows read back otherwise than the log says (first: seq "
        f"{wanted.seq}, order key {order_key}: a view read returns the id {event_id!r} with "
        f"{got}; replay says {wanted.id!r})"
    ]


_COPIES = ("payload", "source", "timestamp", "parent_id")


def _entry_differences(
    want: dict[str, ViewEntry], have: dict[str, ViewEntry]
) -> tuple[set[str], dict[str, list[str]]]:
    """Order keys of rows that differ from replay, and of rows that differ in their copies of
    the event only (with the copied fields that differ)."""
    wrong_rows: set[str] = set()
    wrong_copies: dict[str, list[str]] = {}
    if want == have:
        return wrong_rows, wrong_copies
    for order_key in want.keys() | have.keys():
        wanted, stored = want.get(order_key), have.get(order_key)
        if wanted == stored:
            continue
        if wanted is None or stored is None or _without_copies(wanted) != _without_copies(stored):
            wrong_rows.add(order_key)
        else:
            fields = [name for name in _COPIES if getattr(wanted, name) != getattr(stored, name)]
            wrong_copies[order_key] = fields
    return wrong_rows, wrong_copies


def _without_copies(entry: ViewEntry) -> ViewEntry:
    return replace(entry, payload=None, source=None, timestamp=None, parent_id=None)


def _check_view(log: list[tuple[int, Event]], report: ConversationReport) -> None:
    """Cross-check with the View class, and note where the resume view would differ."""
    events = [event for _, event in log]
    live = View()
    for event in events:
        live.append_event(event)
    if set(live.manipulation_indices) != full_indices(live.events):
        report.problems.append("incremental indices differ from a full recomputation")
    resume = View.from_events(events)
    for round_ in resume.enforcement_rounds:
        report.notes.append(
            f"resume view drops {len(round_.removed)} event(s) by {round_.property}: "
            + ", ".join(round_.removed[:3])
            + (" ..." if len(round_.removed) > 3 else "")
        )


def rebuild(conn: Connection, keys: Sequence[str] | None) -> int:
    """Rewrite the projection rows and carried state; returns how many conversations."""
    count = 0
    for key in keys if keys is not None else reads.conversation_ids(conn):
        # Locked as an append locks it, before the log is read: an append that committed while
        # we waited is then in what we read, and one that comes later waits for our commit.
        # Read unlocked, the version and rows written back would be a snapshot's, older than
        # an append committed in between (its event kept, the version rolled back under it).
        conv = lock_conversation(conn, key)
        if conv is None:
            raise ConversationNotFoundError(key)
        stored = reads.read_events(conn, key)
        projection = forking.own_part(
            project_from_scratch((event.seq, parse_event(event.payload_json)) for event in stored),
            int(conv.fork_seq or 0),
        )
        conn.execute(delete(view_entries).where(view_entries.c.conversation_id == key))
        conn.execute(
            delete(manipulation_indices).where(manipulation_indices.c.conversation_id == key)
        )
        rows.write_projection(conn, key, projection, lineage.segments(conn, conv))
        last_hash = stored[-1].hash if stored else conv.last_hash
        state = projection.state
        rows.save_state(conn, key, state, last_hash, conv.updated_at)
        sizes.recopied(conn, key, state.version, state.tracker.length, conv.updated_at)
        count += 1
    return count
