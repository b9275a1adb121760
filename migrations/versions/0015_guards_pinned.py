"""Guards pinned: fork links immutable, every guard's names qualified and search_path set.

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-25

(Being written: see issue 26, items 3 and 5.)
"""

from __future__ import annotations

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
