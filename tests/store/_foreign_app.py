"""Another application managed by its own Alembic, for the shared-database tests.

It keeps its revision in Alembic's default ``alembic_version`` table and owns a table named
``events`` (and ``users``), like many applications do. Its migration scripts are written to a
folder at test time; ``upgrade`` runs them through Alembic's own command API.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy.engine import make_url

FIRST = "f0a1c0ffee01"
SECOND = "f0a1c0ffee02"

_ENV = """
from alembic import context
from sqlalchemy import create_engine

engine = create_engine(context.config.get_main_option("sqlalchemy.url"))
with engine.connect() as connection:
    context.configure(connection=connection)
    with context.begin_transaction():
        context.run_migrations()
engine.dispose()
"""

_FIRST = f'''
from alembic import op
import sqlalchemy as sa

revision = "{FIRST}"
down_revision = None


def upgrade():
    op.create_table(
        "events",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("title", sa.Text, nullable=False),
    )
    op.execute("INSERT INTO events (id, title) VALUES (1, 'launch party')")


def downgrade():
    op.drop_table("events")
'''

_SECOND = f'''
from alembic import op
import sqlalchemy as sa

revision = "{SECOND}"
down_revision = "{FIRST}"


def upgrade():
    op.create_table("users", sa.Column("id", sa.Integer, primary_key=True))


def downgrade():
    op.drop_table("users")
'''


def write_app(folder: Path) -> Path:
    """The application's migration folder (both revisions)."""
    (folder / "versions").mkdir(parents=True)
    (folder / "env.py").write_text(_ENV, encoding="utf-8")
    (folder / "versions" / "first.py").write_text(_FIRST, encoding="utf-8")
    (folder / "versions" / "second.py").write_text(_SECOND, encoding="utf-8")
    return folder


def upgrade(folder: Path, url: str, revision: str) -> None:
    config = Config()
    config.set_main_option("script_location", str(folder))
    sa_url = make_url(url)
    if sa_url.drivername == "postgresql":
        sa_url = sa_url.set(drivername="postgresql+psycopg")
    rendered = sa_url.render_as_string(hide_password=False).replace("%", "%%")
    config.set_main_option("sqlalchemy.url", rendered)
    command.upgrade(config, revision)
