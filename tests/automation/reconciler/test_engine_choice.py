"""The engine is chosen, never guessed: attempts record the engine that bought them, a pass
with another engine refuses to act on the pool, and everything the mock engine causes says
mock (report lines, JSON events, ledger events)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from automation.app import App
from automation.cli import cli
from automation.ledger import open_ledger, schema
from automation.reconciler.reconcile import Ports, Reconciler
from automation.services import credentials, node_pools
from automation.simulators.world import SimWorld, register_simulated_cluster
from tests.automation.reconciler.conftest import Rig
from tests.automation.reconciler.test_reconcile import attempts, status


class RefusingRunner:
    """A Pulumi-engine stand-in that must not be asked to do anything."""

    engine = "pulumi"
    cloud_label = None  # the real cloud (``models.recorded_engine``)

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the pass asked the engine to {name}")


def test_attempts_record_the_engine_that_bought_them(rig: Rig) -> None:
    pool = rig.pool("cpu", count=2)
    rig.passes(1)
    assert [r["engine"] for r in attempts(rig, pool)] == ["mock", "mock"]


def test_a_pass_with_another_engine_refuses_to_act_on_the_pool(rig: Rig) -> None:
    pool = rig.pool("cpu", count=1)
    rig.passes(1)  # the mock engine "bought" the VM
    before = attempts(rig, pool)
    ports = Ports(runner=RefusingRunner(),  # type: ignore[arg-type]
                  cluster_for=lambda row: rig.world.cluster,
                  vm_lookup=lambda pool_id, ids: pytest.fail("looked VMs up"))
    (outcome,) = Reconciler(rig.app, ports).run_once()
    assert outcome.skipped == "bought by another engine"
    s = status(rig, pool)
    assert s.last_error_code == "ENGINE_MISMATCH"
    assert "bought by the mock engine" in (s.last_error or "")
    assert "--engine mock" in (s.last_error or "")
    assert attempts(rig, pool) == before  # nothing else written
    # A second pass writes nothing more.
    (again,) = Reconciler(rig.app, ports).run_once()
    assert again.wrote is False


def test_reports_and_ledger_events_name_the_engine(rig: Rig) -> None:
    seen: list[dict[str, Any]] = []
    reconciler = Reconciler(rig.app, rig.reconciler.ports,
                            report=lambda kind, message, data: seen.append(data))
    pool = rig.pool("cpu", count=1)
    reconciler.run_once()
    assert seen and all(d["engine"] == "mock" for d in seen)
    with rig.app.ledger.read() as conn:
        events = conn.execute(sa.select(schema.events).where(
            schema.events.c.subject_id == pool,
            schema.events.c.kind == "attempt_created")).mappings().all()
    assert events and all(e["data"]["engine"] == "mock" for e in events)


def test_simulated_reconcile_labels_every_line_mock(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANYCLOUD_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("ANYCLOUD_DATABASE_URL", raising=False)
    runner = CliRunner()
    # The simulated cluster and a pool, where `reconcile --simulate` finds them.
    home = tmp_path / "home"
    world = SimWorld(home / "sim")
    app = App(ledger=open_ledger(f"sqlite:///{home / 'anycloud.db'}"), clock=world.clock,
              home=home)
    register_simulated_cluster(app, tmp_path)
    credentials.new_credential(app, credentials.NewCredential("aws", "aws", {"profile": "p"}))
    node_pools.create_node_pool(app, node_pools.CreateNodePool(
        name="cpu", credentials="aws", region="us-east-1", vm_type="m7i.large", min_vms=1,
        max_vms=1))
    app.ledger.dispose()

    as_json = runner.invoke(cli, ["reconcile", "--once", "--simulate", "--json"])
    assert as_json.exit_code == 0, as_json.output
    events = [json.loads(line) for line in as_json.stdout.splitlines()
              if line.startswith('{"event"')]
    assert events and all(e["data"]["engine"] == "mock" for e in events)
    text = runner.invoke(cli, ["reconcile", "--once", "--simulate", "--passes", "3",
                               "--advance", "1m"])
    lines = [ln for ln in text.stderr.splitlines() if ln.startswith("[")]
    assert lines and all("[mock engine]" in ln for ln in lines)
