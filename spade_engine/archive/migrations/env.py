"""Alembic environment: migrates the connection handed over in ``config.attributes``."""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine

from spade_engine.archive.models import metadata

config = context.config
connection = config.attributes.get("connection")

if connection is None:  # pragma: no cover - only when alembic is driven by hand
    engine = create_engine(config.get_main_option("sqlalchemy.url"))
    with engine.begin() as connection:
        context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
        with context.begin_transaction():
            context.run_migrations()
else:
    context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()
