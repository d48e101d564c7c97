from __future__ import annotations

import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from alembic.config import Config
from alembic.script import ScriptDirectory

from automation.ledger import db, open_ledger, schema
from automation.ledger.db import SCHEMA_REVISION, current_revision

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def test_schema_revision_is_the_migrations_head() -> None:
    cfg = Config()
    cfg.set_main_option("script_location", str(Path(db.__file__).with_name("migrations")))
    assert ScriptDirectory.from_config(cfg).get_current_head() == SCHEMA_REVISION


def test_migrations_build_the_declared_schema(ledger_url: str) -> None:
    ledger = open_ledger(ledger_url)
    with ledger.read() as conn:
        inspector = sa.inspect(conn)
        for table in schema.metadata.sorted_tables:
            declared = {c.name for c in table.columns}
            assert {c["name"] for c in inspector.get_columns(table.name)} == declared, table.name
            declared_idx = {i.name for i in table.indexes}
            assert declared_idx <= {i["name"] for i in inspector.get_indexes(table.name)}
        assert current_revision(conn) == SCHEMA_REVISION
    ledger.dispose()


def test_reopen_is_a_no_op_and_concurrent_opens_migrate_once(ledger_url: str) -> None:
    errors: list[BaseException] = []

    def opener() -> None:
        try:
            open_ledger(ledger_url).dispose()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=opener) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    ledger = open_ledger(ledger_url)
    with ledger.read() as conn:
        assert conn.exec_driver_sql("SELECT count(*) FROM alembic_version").scalar() == 1
    ledger.dispose()


def test_live_names_are_unique_in_the_database_itself(ledger_url: str) -> None:
    ledger = open_ledger(ledger_url)
    row = dict(name="prod", server_url="https://x", org_id="org-1", created_at=NOW,
               updated_at=NOW)
    with ledger.write() as conn:
        conn.execute(schema.orgs.insert().values(id="org-1", name="default", created_at=NOW,
                                                 updated_at=NOW))
        conn.execute(schema.clusters.insert().values(id="cl-1", state="ready", **row))
        conn.execute(schema.clusters.insert().values(id="cl-0", state="deleted", **row))
    with pytest.raises(sa.exc.IntegrityError), ledger.write() as conn:
        conn.execute(schema.clusters.insert().values(id="cl-2", state="pending", **row))
    ledger.dispose()


def test_times_round_trip_as_aware_utc(ledger_url: str) -> None:
    ledger = open_ledger(ledger_url)
    with ledger.write() as conn:
        conn.execute(schema.events.insert().values(
            at=NOW, subject_kind="x", subject_id="y", kind="k", message="m"
        ))
        at = conn.execute(sa.select(schema.events.c.at)).scalar_one()
    assert at == NOW and at.tzinfo is not None
    with pytest.raises(sa.exc.StatementError, match="naive"), ledger.write() as conn:
        conn.execute(schema.events.insert().values(
            at=datetime(2026, 1, 1), subject_kind="x", subject_id="y", kind="k", message="m"
        ))
    ledger.dispose()


def test_sqlite_file_is_private(sqlite_url: str) -> None:
    open_ledger(sqlite_url).dispose()
    path = Path(sa.engine.make_url(sqlite_url).database or "")
    assert path.stat().st_mode & 0o077 == 0


def test_refuses_to_run_on_a_newer_or_unknown_schema_without_migrating(sqlite_url: str) -> None:
    open_ledger(sqlite_url).dispose()
    engine = sa.create_engine(sqlite_url)
    with engine.begin() as conn:
        conn.exec_driver_sql("UPDATE alembic_version SET version_num = '9999'")
    engine.dispose()
    from automation.errors import AnycloudError

    with pytest.raises(AnycloudError, match="schema is at 9999"):
        open_ledger(sqlite_url, migrate_schema=False)
    with pytest.raises(AnycloudError, match="cannot migrate the ledger"):
        open_ledger(sqlite_url)


def test_upgrade_from_0001_keeps_rows_and_fills_defaults(ledger_url: str) -> None:
    from alembic import command

    from automation.ledger.db import Ledger

    ledger = Ledger(ledger_url)
    cfg = Config()
    cfg.set_main_option("script_location", str(Path(db.__file__).with_name("migrations")))
    with ledger.write() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "0001")
        conn.exec_driver_sql(
            "INSERT INTO clusters (id, name, state, server_url, created_at, updated_at) "
            "VALUES ('cl-1', 'c', 'ready', 'https://x', '2026-01-01', '2026-01-01')"
        )
        conn.exec_driver_sql(
            "INSERT INTO credentials (id, name, provider, reference, state, created_at) "
            "VALUES ('cr-1', 'k', 'aws', '{}', 'active', '2026-01-01')"
        )
        conn.exec_driver_sql(
            "INSERT INTO node_pools (id, name, cluster_id, credential_id, provider, region, "
            "vm_type, min_vms, max_vms, state, hosts_service, consecutive_failures, created_at, "
            "updated_at) VALUES ('np-1', 'p', 'cl-1', 'cr-1', 'aws', 'us-east-1', 'm7i.large', "
            "1, 1, 'pending', false, 0, '2026-01-01', '2026-01-01')"
        )
    ledger.dispose()
    upgraded = open_ledger(ledger_url)
    with upgraded.read() as conn:
        row = conn.execute(sa.select(schema.node_pools)).mappings().one()
        assert current_revision(conn) == SCHEMA_REVISION
    assert (row["id"], row["replacements_in_row"], row["network_removed"]) == ("np-1", 0, False)
    upgraded.dispose()


def test_a_locked_answer_while_a_new_sqlite_file_is_opened_is_tried_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # SQLite can answer "database is locked" at once (without its busy timeout) while other
    # connections open a new file; CI saw it once in the four-thread test above.
    real, calls = db.current_revision, []

    def locked_twice(conn: Any) -> str | None:
        calls.append(1)
        if len(calls) <= 2:
            raise sa.exc.OperationalError("SELECT", {}, Exception("database is locked"))
        return real(conn)

    monkeypatch.setattr(db, "current_revision", locked_twice)
    open_ledger(f"sqlite:///{tmp_path / 'ledger.db'}").dispose()
    assert len(calls) == 4  # two locked answers, the read, then the migration's own read
    from automation.errors import AnycloudError

    monkeypatch.setattr(db, "current_revision", lambda conn: (_ for _ in ()).throw(
        sa.exc.OperationalError("SELECT", {}, Exception("disk I/O error"))))
    with pytest.raises(AnycloudError, match="disk I/O error"):
        open_ledger(f"sqlite:///{tmp_path / 'other.db'}")
