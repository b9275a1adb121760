"""An event's view row names its event by seq: no copy of its id or kind.

Revision ID: 0026
Revises: 0025
Create Date: 2026-11-27

Every ``view_entries`` row carried its event's id and kind, which its log row holds too (found
by the row's ``seq`` in its conversation's log, or its ``holder``'s): about 50 bytes of a
140-byte row, on every row an event ever had. Now an event's row leaves both NULL and a
reader takes them from the log row it joins for the payload anyway
(``viewstore.store.read.logged_ids``); a summary's row keeps its own (the log has no row of
it). What the view rules read without the log stays in the row: role, tool-call and LLM
response ids, thinking flag, lifetime.

The DDL is instant and committed first: both columns made nullable (PostgreSQL ``DROP NOT
NULL``; SQLite by the table's stored text, as revisions 0022 and 0023 did) and the analysts'
views ``attention_window`` and ``view_history`` made again to take the id and kind from the log
(their grants kept). Then, on a store holding rows, batches of view rows drop their copies in
short transactions (``viewstore.store.database.payload_once.drop_ids``): appends and reads go
on meanwhile (a row still holding its copies is read by them, which equal the log's), and a
migration killed half way finishes when run again. The downgrade writes the copies back from
the log. docs/schema.md gives the measures.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from viewstore.store.database import analyst_views, online_ddl, payload_once

revision = "0026"
down_revision = "0025"
branch_labels = None
depends_on = None


def _ddl(bind: sa.Connection) -> None:
    payload_once.ids_nullable(bind, nullable=True)
    analyst_views.replace(bind, ids_from_log=True)


def upgrade() -> None:
    bind = op.get_bind()
    if bind.execute(sa.text("SELECT 1 FROM view_entries LIMIT 1")).first() is None:
        _ddl(bind)
        return  # a new store: nothing to move, and the migration stays one transaction
    # As in revision 0022: the DDL in a short transaction of its own that locks its tables as
    # appends do, then the batches.
    online_ddl.run_alone(bind, lambda: _ddl(bind), ("view_entries",))
    payload_once.drop_ids(bind)
    payload_once.relock(bind)


def downgrade() -> None:
    bind = op.get_bind()
    payload_once.fill_ids(bind)
    analyst_views.replace(bind, ids_from_log=False)
    payload_once.ids_nullable(bind, nullable=False)
