"""Opening the ledger: engine set-up per dialect, transactions, and the schema check.

Writers serialise on the rows they touch: ``SELECT … FOR UPDATE`` on PostgreSQL, and on
SQLite every write transaction starts with ``BEGIN IMMEDIATE`` (one writer at a time), so
the same service code gives the same guarantees on both.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from automation.errors import AnycloudError

# The newest migration; tests check it against the migration scripts' head.
SCHEMA_REVISION = "0001"
_MIGRATION_LOCK_KEY = 0x616E79636C6F7564  # "anycloud", for pg_advisory_xact_lock


class Ledger:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    @contextmanager
    def write(self) -> Iterator[Connection]:
        """A transaction that will write; committed on success, rolled back on error."""
        with self.engine.begin() as conn:
            yield conn

    @contextmanager
    def read(self) -> Iterator[Connection]:
        """A read-only transaction (no write lock on SQLite)."""
        with self.engine.connect().execution_options(anycloud_read=True) as conn:
            with conn.begin():
                yield conn

    def dispose(self) -> None:
        self.engine.dispose()


def _sqlite_engine(url: str) -> Engine:
    path = sa.engine.make_url(url).database
    if path and path != ":memory:":
        Path(path).parent.mkdir(mode=0o700, parents=True, exist_ok=True)
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
    if url.startswith("sqlite"):
        return _sqlite_engine(url)
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url.removeprefix("postgresql://")
    return sa.create_engine(url, pool_pre_ping=True)


def current_revision(conn: Connection) -> str | None:
    if not sa.inspect(conn).has_table("alembic_version"):
        return None
    return conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalar()


def migrate(ledger: Ledger) -> None:
    """Bring the schema to the newest revision; safe when several processes race to do it."""
    from alembic import command  # imported only when a migration is due: ~300 ms
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(Path(__file__).with_name("migrations")))
    with ledger.write() as conn:
        if ledger.dialect == "postgresql":
            conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": _MIGRATION_LOCK_KEY})
        if current_revision(conn) == SCHEMA_REVISION:
            return
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "head")


def open_ledger(url: str, *, migrate_schema: bool = True) -> Ledger:
    ledger = Ledger(create_engine(url))
    try:
        with ledger.read() as conn:
            revision = current_revision(conn)
    except sa.exc.OperationalError as exc:
        raise AnycloudError(f"cannot open the ledger at {_redact(url)}: {exc.orig}") from exc
    if revision != SCHEMA_REVISION:
        if not migrate_schema:
            raise AnycloudError(f"ledger schema is at {revision}, this anycloud needs "
                                f"{SCHEMA_REVISION}: run `anycloud ledger migrate`")
        migrate(ledger)
    if url.startswith("sqlite:///") and not url.endswith(":memory:"):
        # The ledger holds no secrets, but pool and cluster names are still nobody else's.
        os.chmod(sa.engine.make_url(url).database or "", 0o600)
    return ledger


def _redact(url: str) -> str:
    return sa.engine.make_url(url).render_as_string(hide_password=True)
