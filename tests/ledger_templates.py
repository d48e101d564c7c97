"""New test ledgers at the newest schema without running the migrations for each test.

A test's ledger starts empty and ``open_ledger`` migrates it: sixteen alembic scripts, about
0.2 s a test, a third of a pytest worker's own time in a profile of the suite. The result
is the same every time, so each worker migrates once and copies the result:

- SQLite: a ledger file migrated once, copied byte for byte (mode 0600, as ``open_ledger``
  leaves it).
- PostgreSQL: there is no copy of a schema, so the statements the migration sent to the
  server are recorded once (against a schema of their own) and sent again into each new
  schema. They name no schema (the URL's search_path picks it), so the replay builds the
  same tables, indexes and ``alembic_version`` row.

The migrations themselves still run from nothing wherever a test opens a ledger with
``open_ledger`` on an empty URL (tests/automation/test_ledger.py runs them on both
databases, and every test whose ledger is not seeded here), and once per worker here.
"""

from __future__ import annotations

import os
import secrets
import shutil
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from automation.ledger import open_ledger
from automation.ledger.db import Ledger, _sqlite_path, create_engine, migrate

_SEARCH_PATH = "options=-csearch_path%3D"


def in_schema(url: str, schema: str) -> str:
    """``url`` with its connections' search_path set to ``schema``."""
    sep = "&" if "?" in url else "?"
    return f"{url}{sep}{_SEARCH_PATH}{schema}"


def schema_of(url: str) -> str:
    """The schema ``in_schema`` put in ``url``."""
    assert _SEARCH_PATH in url, f"{url}: no schema of its own"
    return url.rsplit(_SEARCH_PATH, 1)[1]


class LedgerTemplates:
    """``postgres_url``: the server's URL (no search_path) the PostgreSQL recording uses."""

    def __init__(self, root: Path, postgres_url: str) -> None:
        self.root = root
        self.postgres_url = postgres_url
        self._sqlite: Path | None = None
        self._statements: list[tuple[str, Any]] | None = None
        self._seeded: set[str] = set()
        self._admin: sa.Engine | None = None  # one per worker: a connection costs ~10 ms

    def seed(self, url: str) -> None:
        """The empty ledger at ``url`` (a new file, or a new PostgreSQL schema) brought to the
        newest schema, as ``open_ledger`` would bring it; once (a test's fixtures may share a
        ledger)."""
        if url in self._seeded:
            return
        self._seeded.add(url)
        if url.startswith("sqlite"):
            self._seed_sqlite(url)
        else:
            self._seed_postgres(url)

    def _seed_sqlite(self, url: str) -> None:
        found = _sqlite_path(url)
        assert found is not None, f"{url}: an in-memory ledger cannot be seeded"
        path = Path(found)
        assert not path.exists(), f"{path} exists: only a new ledger is seeded"
        if self._sqlite is None:
            template = self.root / "template.db"
            open_ledger(f"sqlite:///{template}").dispose()  # the WAL is folded in on close
            self._sqlite = template
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(self._sqlite, path)
        os.chmod(path, 0o600)

    def _seed_postgres(self, url: str) -> None:
        if self._statements is None:
            self._statements = _record_migration(self.postgres_url)
        with self.admin().begin() as conn:
            # The statements name no schema: the search_path puts them in the ledger's own.
            conn.exec_driver_sql(f"SET LOCAL search_path TO {schema_of(url)}")
            cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
            for statement, parameters in self._statements:
                cursor.execute(statement, parameters or None)

    def admin(self) -> sa.Engine:
        """The worker's one engine on the server: it seeds the ledgers and makes and drops
        the tests' schemas."""
        if self._admin is None:
            self._admin = create_engine(self.postgres_url)
        return self._admin

    def close(self) -> None:
        if self._admin is not None:
            self._admin.dispose()


def _record_migration(base: str) -> list[tuple[str, Any]]:
    """What migrating an empty schema sends to the server, recorded in a schema of its own
    (dropped after). A statement holding ``%`` would read differently without its
    parameters: none does, and a migration that adds one fails here, by name."""
    schema = f"tmpl_{secrets.token_hex(6)}"
    admin = create_engine(base)
    with admin.begin() as conn:
        conn.exec_driver_sql(f"CREATE SCHEMA {schema}")
    recorded: list[tuple[str, Any]] = []
    try:
        ledger = Ledger(in_schema(base, schema))
        engine = ledger.engine

        @sa.event.listens_for(engine, "before_cursor_execute")
        def record(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any,
                   executemany: bool) -> None:
            if statement.lstrip()[:6].upper() == "SELECT":
                return  # a read (the version, a table's presence, the lock): nothing to build
            assert not executemany, f"the migration ran executemany: {statement[:200]}"
            assert "%" not in statement, f"cannot replay a statement with %: {statement[:200]}"
            recorded.append((statement, parameters))

        migrate(ledger)
        ledger.dispose()
    finally:
        with admin.begin() as conn:
            conn.exec_driver_sql(f"DROP SCHEMA {schema} CASCADE")
        admin.dispose()
    return recorded
