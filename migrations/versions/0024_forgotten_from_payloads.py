"""``condensation_forgotten`` becomes a view of the condensations' payloads.

Revision ID: 0024
Revises: 0023
Create Date: 2026-11-26

Each id a ``Condensation`` lists was a row of ``condensation_forgotten`` (with a primary key
and an index of the conversation and id), though the condensation's payload in the log lists
them all: 240 to 305 bytes an event in a condensed conversation. Now ``condensations`` keeps
what the payload does not say, ``not_in_view`` (a JSON array of the listed ids that were not
in the view when it ran), and ``condensation_forgotten`` is a view with the same name and
columns, computed from both (``viewstore.store.database.forgotten``; docs/schema.md).

Online: the instant DDL (the column added, the table renamed ``condensation_forgotten_0023``,
the view made over the moved condensations and the old rows, its SELECT grants those of the
table) is committed first; then each condensation's old rows are moved into its
``not_in_view`` and deleted, a batch of condensations per transaction, and the emptied table
is dropped and the view made over the payloads alone. Reads, appends and ``verify`` are right
at every point; a migration killed half way finishes when run again. Processes of an older
viewstore insert into the table, which is a view now: stop them before this upgrade.

The downgrade makes the table again (not partitioned, on a partitioned store) from the view,
and drops the column.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from viewstore.store.database import forgotten, online_ddl, payload_once, roles

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None


def _ddl(bind: sa.Connection) -> None:
    forgotten.add_not_in_view(bind)  # done by 0022 or 0023 on a store they migrated
    if not forgotten.exists(bind, forgotten.LEGACY):  # not a second run
        rename = f"ALTER TABLE {forgotten.VIEW} RENAME TO {forgotten.LEGACY}"
        forgotten.replace(bind, lambda: op.execute(rename), legacy=True)
    # Revision 0026's DDL, here too: an append made while the batches below run comes from
    # code that writes an event's row without an id or kind.
    payload_once.ids_nullable(bind, nullable=True)


def upgrade() -> None:
    bind = op.get_bind()
    old_rows = forgotten.LEGACY if forgotten.exists(bind, forgotten.LEGACY) else forgotten.VIEW
    if bind.execute(sa.text(f"SELECT 1 FROM {old_rows} LIMIT 1")).first() is None:
        _ddl(bind)
        forgotten.finish(bind)  # nothing to move: the migration stays one transaction
        return
    # Committed here, as in revisions 0022 and 0023: the DDL in a short transaction of its own
    # that locks its tables as appends do, then the batches, each taking the write lock for
    # one short transaction; the migration lock is taken again before the last step.
    online_ddl.run_alone(bind, lambda: _ddl(bind), ("view_entries", "condensations"))
    forgotten.move(bind)
    payload_once.relock(bind)
    forgotten.finish(bind)


_TABLE = """
    CREATE TABLE condensation_forgotten (
        conversation_id VARCHAR(255) NOT NULL,
        seq BIGINT NOT NULL,
        event_id VARCHAR(512) NOT NULL,
        was_in_view BOOLEAN NOT NULL,
        CONSTRAINT pk_condensation_forgotten PRIMARY KEY (conversation_id, seq, event_id),
        CONSTRAINT fk_condensation_forgotten_conversation_id_seq_condensations
            FOREIGN KEY (conversation_id, seq) REFERENCES condensations (conversation_id, seq)
    )
"""


def downgrade() -> None:
    bind = op.get_bind()

    def make_table() -> None:
        op.execute(f"CREATE TABLE {forgotten.LEGACY} AS SELECT * FROM {forgotten.VIEW}")
        op.execute(f"DROP VIEW {forgotten.VIEW}")
        op.execute(_TABLE)
        op.execute(
            "INSERT INTO condensation_forgotten (conversation_id, seq, event_id, was_in_view) "
            f"SELECT conversation_id, seq, event_id, was_in_view FROM {forgotten.LEGACY}"
        )
        op.execute(f"DROP TABLE {forgotten.LEGACY}")
        op.create_index(
            "ix_condensation_forgotten_conversation_id_event_id",
            "condensation_forgotten",
            ["conversation_id", "event_id"],
        )

    forgotten.replace(bind, make_table, legacy=None)
    if bind.dialect.name == "postgresql":  # the writer role of revision 0008 inserted the rows
        database = bind.execute(sa.text("SELECT current_database()")).scalar_one()
        writer = roles.role_name("writer", database)
        if bind.execute(
            sa.text("SELECT 1 FROM pg_roles WHERE rolname = :r"), {"r": writer}
        ).first():
            op.execute(f'GRANT INSERT ON condensation_forgotten TO "{writer}"')
    op.drop_column("condensations", "not_in_view")
