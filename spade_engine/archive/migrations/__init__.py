"""Alembic migrations of the archive schema (revision ids ``0001``, ``0002``...).

Run through :func:`spade_engine.archive.db.migrate` or ``spade-engine archive migrate``; there is
no alembic.ini, the script location is this folder.
"""
