"""View rows keep no envelope: a read builds each Event from its payload.

Revision ID: 0023
Revises: 0022
Create Date: 2026-11-26

Since revision 0003 each view row carried its *envelope*, one text with the event id and the
fields a read rebuilt the ``Event`` from (kind, role, source, timestamp, parent id, tool call
and response ids, thinking), so a view read fetched two columns a row and parsed a short
array. Every one of those fields is in the event's payload, which the read fetches anyway
(since revision 0022, from the log), and most are columns of the row or of the log too: the
envelope was one more copy, about 170 bytes of a 440-byte row. Now a read fetches the row's
event id and the payload, and builds the Event from the payload when it is first asked for;
the column stays, NULL (dropping it would rewrite the whole table on SQLite).

The DDL is instant and committed first (``envelope`` made nullable: PostgreSQL ``DROP NOT
NULL``; SQLite by the table's stored text, as revision 0022 did for ``payload``). Revision 0022
does the same in its own instant DDL since this revision was written: this code writes rows
without an envelope, and an append made while 0022's batches run must be accepted; a store
that was already at 0022 gets it here. Then, on a store holding rows, the envelopes are set to
NULL in short transactions (``viewstore.store.database.payload_once.drop_envelopes``): appends
and reads go on meanwhile (no read uses them any more), and a migration killed half way
finishes when run again. The downgrade packs them again from the rows and the log.
docs/schema.md gives the measures.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from viewstore.store.database import payload_once

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None


def upgrade() -> None:
    bind = op.get_bind()
    payload_once.envelope_nullable(bind, nullable=True)  # done by 0022 on a store it migrated
    # Revision 0026's DDL, here too: an append made while the batches below run comes from
    # code that writes an event's row without an id or kind.
    payload_once.ids_nullable(bind, nullable=True)
    if bind.execute(sa.text("SELECT 1 FROM view_entries LIMIT 1")).first() is None:
        return  # a new store: nothing to move, and the migration stays one transaction
    # Committed here, as in revision 0022: the batches take the write lock for one short
    # transaction each, and the migration lock is taken again after them.
    bind.commit()
    payload_once.drop_envelopes(bind)
    payload_once.relock(bind)


def downgrade() -> None:
    bind = op.get_bind()
    payload_once.fill_envelopes(bind)
    payload_once.envelope_nullable(bind, nullable=False)
