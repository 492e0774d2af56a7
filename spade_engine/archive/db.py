"""Opening the archive database: engine from a URL or path, schema version check, migrations.

SQLite is the default (``sqlite:///<run dir>/archive.sqlite``); PostgreSQL is used by URL
(``postgresql://`` or ``postgresql+psycopg://``). A database is created at the current schema
when empty; a database at an older Alembic revision is refused with a message naming
``spade-engine archive migrate``, never written to (no silent corruption).
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, event, inspect
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import SQLAlchemyError

from ..errors import SpadeError
from .models import SCHEMA_VERSION

__all__ = [
    "ArchiveError",
    "ArchiveSchemaError",
    "ARCHIVE_FILENAME",
    "resolve_url",
    "make_engine",
    "open_engine",
    "schema_revision",
    "migrate",
    "safe_url",
]

ARCHIVE_FILENAME = "archive.sqlite"
MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"


class ArchiveError(SpadeError):
    """The archive database cannot be opened or used."""


class ArchiveSchemaError(ArchiveError):
    """The archive database is at another schema version than this engine uses."""


def resolve_url(url_or_path: str | Path) -> str:
    """A SQLAlchemy URL: URLs pass through (``postgresql://`` gets the psycopg driver); a path
    becomes ``sqlite:///path``; a directory means ``<dir>/archive.sqlite``."""
    text = str(url_or_path)
    if "://" in text:
        if text.startswith("postgresql://") or text.startswith("postgres://"):
            text = "postgresql+psycopg://" + text.split("://", 1)[1]
        return text
    path = Path(text)
    if path.is_dir():
        path = path / ARCHIVE_FILENAME
    return f"sqlite:///{path}"


def safe_url(url: str) -> str:
    """The URL with any password hidden (for messages)."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001
        return url


def make_engine(url: str) -> Engine:
    """A SQLAlchemy engine; SQLite files get WAL mode and a busy timeout."""
    try:
        u = make_url(url)
    except Exception as exc:  # noqa: BLE001
        raise ArchiveError(f"invalid archive URL {url!r}: {exc}") from None
    if u.get_backend_name() == "sqlite":
        if u.database:
            Path(u.database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})

        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn, _rec):  # pragma: no cover - trivial
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.close()

        return engine
    return create_engine(url, pool_pre_ping=True)


def _alembic_config(connection=None) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


def head_revision() -> str:
    return ScriptDirectory.from_config(_alembic_config()).get_current_head() or SCHEMA_VERSION


def schema_revision(engine: Engine) -> tuple[str | None, bool]:
    """(Alembic revision of the database or None, whether it holds any archive table)."""
    try:
        with engine.connect() as conn:
            rev = MigrationContext.configure(conn).get_current_revision()
            tables = set(inspect(conn).get_table_names())
    except SQLAlchemyError as exc:
        raise ArchiveError(f"cannot open archive {safe_url(str(engine.url))}: {exc.__class__.__name__}: {exc}") from None
    return rev, bool(tables & {"environments", "plays", "policy_versions", "projection_state"})


def migrate(engine: Engine, revision: str = "head") -> tuple[str | None, str]:
    """Upgrade the database to ``revision``; returns (from, to) revisions."""
    before, _ = schema_revision(engine)
    try:
        with engine.begin() as conn:
            command.upgrade(_alembic_config(conn), revision)
    except SQLAlchemyError as exc:
        raise ArchiveError(f"migrating {safe_url(str(engine.url))} failed: {exc}") from None
    after, _ = schema_revision(engine)
    return before, after or ""


def open_engine(url_or_path: str | Path, *, create: bool = True) -> Engine:
    """An engine on an archive at the current schema version.

    An empty database is created at the current schema (with ``create``); an older revision
    raises :class:`ArchiveSchemaError` with the migration command; a newer or unknown one too.
    """
    url = resolve_url(url_or_path)
    engine = make_engine(url)
    rev, has_tables = schema_revision(engine)
    head = head_revision()
    where = safe_url(url)
    if rev == head:
        return engine
    if rev is None and not has_tables:
        if not create:
            engine.dispose()
            raise ArchiveError(f"no archive at {where}")
        migrate(engine, "head")
        return engine
    engine.dispose()
    if rev is None:
        raise ArchiveSchemaError(
            f"{where} holds tables but no archive schema version; it is not a spade-engine archive "
            f"(move it away, or rebuild the archive with `spade-engine replay`)"
        )
    known = {s.revision for s in ScriptDirectory.from_config(_alembic_config()).walk_revisions()}
    if rev in known:
        raise ArchiveSchemaError(
            f"archive {where} has schema version {rev}, this engine uses {head}: "
            f"run `spade-engine archive migrate --url {where}` (or rebuild it with `spade-engine replay`)"
        )
    raise ArchiveSchemaError(
        f"archive {where} has schema version {rev}, newer than this engine knows ({head}); upgrade spade-engine"
    )
