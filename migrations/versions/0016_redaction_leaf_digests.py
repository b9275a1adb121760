"""Redaction records keep the leaf digests of the strings they replaced.

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-25

Events appended from now on are hashed under chain scheme 2 (``viewstore/domain/chain.py``): over
the digest of their exact text and over a *content root*, the digest of their JSON value with
every string value replaced by that string's leaf digest. A redaction of such an event records
in ``leaf_digests`` (JSON text: an object of leaf digests by JSON Pointer) the digest of each
string it replaced, and its record hash covers the column. ``verify`` rebuilds the root from
the redacted payload and those digests: a payload rewritten anywhere but at the recorded
pointers, or there to anything but the marker, no longer gives the event's chain hash
(docs/lifecycle.md).

Records written before this revision keep NULL there and the record hash they had. No events
column is added: a redacted event tells its scheme by its records, an unredacted one is
accepted under either scheme. Downgrading drops the column and with it the only way to check
those redactions (their record hashes then no longer match, which ``verify`` reports).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # A nullable column without a default: no table rewrite on either backend, and on a
    # partitioned or distributed table the parent's ALTER reaches every partition and shard.
    op.add_column("redactions", sa.Column("leaf_digests", sa.Text(), nullable=True))


def downgrade() -> None:
    # ALTER TABLE ... DROP COLUMN (SQLite 3.35 or later): a batch copy would drop the table's
    # append-only triggers with the old table.
    op.drop_column("redactions", "leaf_digests")
