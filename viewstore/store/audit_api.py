"""``EventStore``'s audit methods: the log replayed by the pure engine (live and resume
semantics), ``verify``, ``checkpoint`` and ``rebuild``."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from viewstore.domain.kinds import STATE_UPDATE_KIND
from viewstore.store.inputs import check_integer, conversation_key
from viewstore.store.read import reads
from viewstore.store.read.stored_events import StoredEvents
from viewstore.store.records import MaskRecord, StoredView, VerifyReport
from viewstore.store.store_core import ConversationId, StoreCore

if TYPE_CHECKING:
    from viewstore.domain.events import Event
    from viewstore.domain.view import View

# Start-up time: the replay engine, verify, checkpoint and rebuild (and the events model) are
# imported when called, as the append machinery is (see event_store).


class AuditMethods(StoreCore):
    def _log(self, key: str, as_of: int | None = None) -> tuple[int, list[Event]]:
        from viewstore.domain.events import parse_event  # noqa: PLC0415 - start-up time (event_store)

        if as_of is not None:
            check_integer("as_of", as_of)
        with self._read() as conn:
            version = reads.conversation_row(conn, key).version
            if as_of is not None:
                self._check_seq(conn, key, as_of)
            stored = reads.read_events(conn, key, upto=as_of)
        return (version if as_of is None else as_of), [
            parse_event(event.payload_json) for event in stored
        ]

    def resume_view(
        self, conversation_id: ConversationId, *, skip_state_updates: bool = False
    ) -> StoredView:
        """The resume semantics: ``View.from_events`` over the whole log. Computed from the
        stored rows: the live view less what enforcement removes, which reads only the stretch
        of the log around the view's tool events (``viewstore.store.read.resume_check``), not the
        history.

        ``skip_state_updates``: over the log without its ``ConversationStateUpdateEvent``s,
        which is what the OpenHands SDK's cold load computes for a log that is one branch
        (its active branch leaves them out: docs/semantics.md §9).
        """
        from viewstore.domain.view import IndexTracker, View  # noqa: PLC0415 - start-up time (event_store)
        from viewstore.store.read import resume_check  # noqa: PLC0415 - start-up time (event_store)

        key = conversation_key(conversation_id)
        with self._read() as conn:
            live = reads.read_view(conn, key, None)
            found = resume_check.resume_items(conn, key, skip_state_updates=skip_state_updates)
        if found is None:  # rows the projector never leaves: enforce over the whole log
            version, log = self._log(key)
            if skip_state_updates:
                log = [event for event in log if event.kind != STATE_UPDATE_KIND]
            return _stored(key, version, View.from_events(log), None)
        current, kept = found
        if len(kept) == len(current):
            return live
        assert isinstance(live.events, StoredEvents)
        survivors = {id(item) for item in kept}  # enforcement keeps the very items
        positions = [i for i, item in enumerate(current) if id(item) in survivors]
        _, indices = IndexTracker.scan(kept)
        return replace(live, events=live.events.at(positions), manipulation_indices=sorted(indices))

    def replay(self, conversation_id: ConversationId, *, as_of: int | None = None) -> StoredView:
        """The live view recomputed from the log by the pure engine (no view rows read)."""
        from viewstore.domain.view import View  # noqa: PLC0415 - start-up time (event_store)

        key = conversation_key(conversation_id)
        version, log = self._log(key, as_of)
        view = View()
        for event in log:
            view.append_event(event)
        return _stored(key, version, view, as_of)

    def verify(
        self, conversation_id: ConversationId | None = None, *, against: Any = None
    ) -> VerifyReport:
        """Check the hash chain, that every column derived from the log equals what the log
        says, that every view and index row equals a pure replay, and that each stored base
        state is a JSON object (one that is not also makes ``base_state()`` raise).

        ``against``: a checkpoint (``checkpoint()``'s dict or its JSON text). Every history it
        saw must still be there, unchanged up to its head, under the same conversation id;
        ``CheckpointError`` if it is not a checkpoint or its digest does not match.
        """
        from viewstore.store.audit import anchors, audit  # noqa: PLC0415 - start-up time (event_store)

        keys = None if conversation_id is None else [conversation_key(conversation_id)]
        anchor = None if against is None else anchors.parse(against)
        with self._read() as conn:
            return audit.verify(conn, keys, anchor, self._chain_key)

    def masks(self, conversation_id: ConversationId) -> list[MaskRecord]:
        """What masking changed in the conversation's events before they were stored (its
        shared prefix included), in seq order (docs/masking.md)."""
        from viewstore.store.append import masks  # noqa: PLC0415 - start-up time (event_store)

        key = conversation_key(conversation_id)
        with self._read() as conn:
            return masks.lineage_records(conn, reads.conversation_row(conn, key))

    def checkpoint(self) -> dict[str, Any]:
        """The chain head (seq, hash, recorded time) of every conversation, one digest over
        them all and the time, as a JSON-serialisable dict: keep it outside the database and
        pass it to ``verify(against=...)`` later (see docs/threat-model.md)."""
        from viewstore.store.audit import anchors  # noqa: PLC0415 - start-up time (event_store)

        with self._read() as conn:
            return anchors.take(conn)

    def rebuild(self, conversation_id: ConversationId | None = None) -> int:
        """Rewrite the view and index rows of one or every conversation from the log."""
        from viewstore.store.audit import audit  # noqa: PLC0415 - start-up time (event_store)

        keys = None if conversation_id is None else [conversation_key(conversation_id)]
        self._tails.clear()  # a rebuild rewrites the carried state from the log
        with self._write() as conn:
            return audit.rebuild(conn, keys)


def _stored(key: str, version: int, view: View, as_of: int | None) -> StoredView:
    return StoredView(
        conversation_id=key,
        version=version,
        events=view.events,
        manipulation_indices=sorted(view.manipulation_indices),
        unhandled_condensation_request=view.unhandled_condensation_request,
        as_of=as_of,
    )
