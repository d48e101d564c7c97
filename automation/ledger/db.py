"""Opening the ledger: engine set-up per dialect, transactions, and the schema check.

Writers serialise on the rows they touch: ``SELECT … FOR UPDATE`` on PostgreSQL, and on
SQLite every write transaction starts with ``BEGIN IMMEDIATE`` (one writer at a time), so
the same service code gives the same guarantees on both.

SQLAlchemy costs ~200 ms to import, most of the 300 ms budget of ``node-pool list``; so the
engine is built on first use, and the hot read paths (``query``) and the schema check go
straight through the DB-API driver with plain, dialect-neutral SQL.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from functools import cached_property
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from automation.errors import AnycloudError

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection, Engine

# The newest migration; tests check it against the migration scripts' head.
SCHEMA_REVISION = "0019"
_MIGRATION_LOCK_KEY = 0x616E79636C6F7564  # "anycloud", for pg_advisory_xact_lock
_NAMED_PARAM = re.compile(r"(?<!:):(\w+)")


def _sqlite_path(url: str) -> str | None:
    """The file of a sqlite:/// URL, None for an in-memory database."""
    path = url.split("///", 1)[1] if "///" in url else ""
    return None if path in ("", ":memory:") else path.split("?", 1)[0]


def _libpq_url(url: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(scheme="postgresql"))


class Ledger:
    def __init__(self, url: str) -> None:
        self.url = url
        self.dialect = "sqlite" if url.startswith("sqlite") else "postgresql"

    @cached_property
    def engine(self) -> Engine:
        return create_engine(self.url)

    @contextmanager
    def write(self) -> Iterator[Connection]:
        """A transaction that will write; committed on success, rolled back on error."""
        with self.engine.begin() as conn:
            yield conn

    @contextmanager
    def read(self) -> Iterator[Connection]:
        """A read-only transaction (no write lock on SQLite)."""
        with self.engine.connect().execution_options(anycloud_read=True) as conn, conn.begin():
            yield conn

    def query(self, sql: str, params: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        """One read-only statement through the bare driver; ``:name`` parameters."""
        if self.dialect == "sqlite":
            import sqlite3

            path = _sqlite_path(self.url)
            if path is None or not os.path.exists(path):
                raise AnycloudError(f"no ledger at {self.url}")
            conn = sqlite3.connect(path, timeout=60)
            try:
                conn.row_factory = sqlite3.Row
                return [dict(r) for r in conn.execute(sql, dict(params or {}))]
            finally:
                conn.close()
        import psycopg
        from psycopg.rows import dict_row

        with psycopg.connect(_libpq_url(self.url), autocommit=True, row_factory=dict_row) as pg:
            return list(pg.execute(_NAMED_PARAM.sub(r"%(\1)s", sql), dict(params or {})))

    def dispose(self) -> None:
        if "engine" in self.__dict__:
            self.engine.dispose()


def _sqlite_engine(url: str) -> Engine:
    import sqlalchemy as sa

    path = _sqlite_path(url)
    if path:
        os.makedirs(os.path.dirname(os.path.abspath(path)), mode=0o700, exist_ok=True)
    engine = sa.create_engine(url, connect_args={"timeout": 60})

    @sa.event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        # Let SQLAlchemy's "begin" event issue BEGIN, instead of pysqlite guessing.
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA foreign_keys=ON")
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA busy_timeout=60000")
        cur.close()

    @sa.event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        read_only = conn.get_execution_options().get("anycloud_read")
        conn.exec_driver_sql("BEGIN" if read_only else "BEGIN IMMEDIATE")

    return engine


def create_engine(url: str) -> Engine:
    import sqlalchemy as sa

    if url.startswith("sqlite"):
        return _sqlite_engine(url)
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url.removeprefix("postgresql://")
    return sa.create_engine(url, pool_pre_ping=True)


def current_revision(conn: Connection) -> str | None:
    import sqlalchemy as sa

    if not sa.inspect(conn).has_table("alembic_version"):
        return None
    return conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalar()


def migrate(ledger: Ledger) -> None:
    """Bring the schema to the newest revision; safe when several processes race to do it."""
    import sqlalchemy as sa
    from alembic import command  # imported only when a migration is due: ~300 ms
    from alembic.config import Config
    from alembic.util import CommandError

    cfg = Config()
    cfg.set_main_option(
        "script_location", os.path.join(os.path.dirname(__file__), "migrations")
    )
    with ledger.write() as conn:
        if ledger.dialect == "postgresql":
            conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": _MIGRATION_LOCK_KEY})
        if current_revision(conn) == SCHEMA_REVISION:
            return
        cfg.attributes["connection"] = conn
        try:
            command.upgrade(cfg, "head")
        except CommandError as exc:  # e.g. a ledger written by a newer anycloud
            raise AnycloudError(f"cannot migrate the ledger: {exc}") from exc


def _fast_revision(ledger: Ledger) -> str | None:
    """The schema revision through the bare driver; None when it cannot be read that way."""
    try:
        rows = ledger.query("SELECT version_num FROM alembic_version")
    except Exception:  # no file, no table, no server: the full path below says which
        return None
    return rows[0]["version_num"] if rows else None


def _read_revision(ledger: Ledger, url: str, attempts: int = 6) -> str | None:
    """The schema revision, through SQLAlchemy. SQLite may answer "database is locked" at
    once, without waiting out the busy timeout, while other connections open a new file at
    the same moment (the journal mode switch; SQLite's docs: retry the transaction): tried
    again a few times, 0.1 s, 0.2 s, ... apart, before it is reported."""
    import time

    import sqlalchemy as sa

    for attempt in range(attempts):
        try:
            with ledger.read() as conn:
                return current_revision(conn)
        except sa.exc.OperationalError as exc:
            locked = ledger.dialect == "sqlite" and "database is locked" in str(exc.orig)
            if not locked or attempt == attempts - 1:
                raise AnycloudError(
                    f"cannot open the ledger at {_redact(url)}: {exc.orig}") from exc
            time.sleep(0.1 * 2 ** attempt)
    raise AssertionError("unreachable")


def open_ledger(url: str, *, migrate_schema: bool = True) -> Ledger:
    ledger = Ledger(url)
    if _fast_revision(ledger) == SCHEMA_REVISION:
        return ledger
    revision = _read_revision(ledger, url)
    if revision != SCHEMA_REVISION:
        if not migrate_schema:
            raise AnycloudError(
                f"ledger schema is at {revision}, this anycloud needs {SCHEMA_REVISION}"
            )
        migrate(ledger)
    path = _sqlite_path(url)
    if path:
        # The ledger holds no secrets, but pool and cluster names are still nobody else's.
        os.chmod(path, 0o600)
    return ledger


def _redact(url: str) -> str:
    import sqlalchemy as sa

    return sa.engine.make_url(url).render_as_string(hide_password=True)
