"""An event's view row keeps no envelope: a read packs it from the row's and the log's columns.

Revision ID: 0023
Revises: 0022
Create Date: 2026-11-26

Since revision 0003 each view row carried its *envelope*, one text with the event id and the
fields a read rebuilds the ``Event`` from (kind, role, source, timestamp, parent id, tool call
and response ids, thinking), so a view read fetched two columns a row. Every one of those
fields is already a column: the row's own, or since revision 0022 the log's (source,
timestamp, parent id). The envelope was a second copy, about 170 bytes of a 440-byte row. Now
an event's row holds NULL there and a read packs the same text in SQL from the columns (a
fork's copied rows: in Python, from the log its row names); a summary's row keeps its
envelope, since its fields are its own. docs/schema.md gives the measures.

The DDL is instant and committed first (``envelope`` made nullable: PostgreSQL ``DROP NOT
NULL``; SQLite by the table's stored text, as revision 0022 did for ``payload``). Revision 0022
does the same in its own instant DDL since this revision was written: this code writes event
rows without an envelope, and an append made while 0022's batches run must be accepted; a store
that was already at 0022 gets it here. Then, on a
store holding rows, the envelopes of event rows are set to NULL in short transactions
(``viewstore.store.database.payload_once.drop_envelopes``): appends and reads go on meanwhile
(a row that still has its envelope is read by it, and it equals the packed one), and a
migration killed half way finishes when run again. The downgrade writes them back.
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
