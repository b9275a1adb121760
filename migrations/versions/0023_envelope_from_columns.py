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

from viewstore.store.database import forgotten, online_ddl, payload_once

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None


def _ddl(bind: sa.Connection) -> None:
    payload_once.envelope_nullable(bind, nullable=True)  # done by 0022 on a store it migrated
    # Revisions 0024's and 0026's DDL, here too: an append made while the batches below run
    # comes from code that writes an event's row without an id or kind, and a condensation's
    # ``not_in_view``.
    payload_once.ids_nullable(bind, nullable=True)
    forgotten.add_not_in_view(bind)


def upgrade() -> None:
    bind = op.get_bind()
    if bind.execute(sa.text("SELECT 1 FROM view_entries LIMIT 1")).first() is None:
        _ddl(bind)
        return  # a new store: nothing to move, and the migration stays one transaction
    # Committed here, as in revision 0022: the DDL in a short transaction of its own that locks
    # its tables as appends do, then the batches, each taking the write lock for one short
    # transaction; the migration lock is taken again after them.
    online_ddl.run_alone(bind, lambda: _ddl(bind), ("view_entries", "condensations"))
    payload_once.drop_envelopes(bind)
    payload_once.relock(bind)


def downgrade() -> None:
    bind = op.get_bind()
    # Rows appended while the batches ran hold no id or kind (revision 0026's DDL is done
    # above): the envelopes are packed with them.
    payload_once.fill_ids(bind)
    payload_once.fill_envelopes(bind)
    payload_once.envelope_nullable(bind, nullable=False)
