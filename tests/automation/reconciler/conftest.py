"""A reconciler over the real ledger, the mock-engine runner and the simulated world."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest

from automation.app import App
from automation.engine.mock.runner import MockEngineRunner
from automation.reconciler.reconcile import Ports, Reconciler
from automation.services import credentials, node_pools
from automation.simulators.world import SimWorld, simulated_app
from tests.automation.conftest import DEMO_CA
from tests.ledger_templates import LedgerTemplates


@dataclass
class Rig:
    app: App
    world: SimWorld
    reconciler: Reconciler
    log: list[tuple[str, str]]

    def passes(self, n: int = 1, step: timedelta = timedelta(seconds=30)) -> None:
        for _ in range(n):
            self.reconciler.run_once()
            self.world.advance(step)

    def pool(self, name: str, provider: str = "aws", vm_type: str = "m7i.large",
             count: int = 2) -> str:
        region = {"aws": "us-east-1", "gcp": "us-central1", "azure": "eastus"}[provider]
        return node_pools.create_node_pool(self.app, node_pools.CreateNodePool(
            name=name, credentials=f"team-{provider}", region=region, vm_type=vm_type,
            min_vms=count, max_vms=count)).id


def make_rig(root: Path, ledger_url: str | None = None) -> Rig:
    """A reconciler over a ledger (SQLite under ``root`` unless given) with a credential per
    cloud (``team-aws``, ``team-gcp``, ``team-azure``), the mock engine and the simulated
    world (also used by ``benchmarks/bench_adopt.py``)."""
    app, world = simulated_app(root, ledger_url)
    credentials.new_credential(app, credentials.NewCredential("team-aws", "aws",
                                                              {"profile": "team"}))
    credentials.new_credential(app, credentials.NewCredential(
        "team-gcp", "gcp", {"project": "my-project", "key_file": str(DEMO_CA)}))
    credentials.new_credential(app, credentials.NewCredential("team-azure", "azure", {
        "subscription_id": "00000000-0000-0000-0000-000000000001",
        "tenant_id": "00000000-0000-0000-0000-000000000002",
        "client_id": "00000000-0000-0000-0000-000000000003",
    }))
    runner = MockEngineRunner(app.home, cloud=world.cloud)
    log: list[tuple[str, str]] = []
    ports = Ports(runner=runner, cluster_for=lambda row: world.cluster,
                  vm_lookup=lambda pool, ids: {a: world.cloud.lookup(a) for a in ids})
    reconciler = Reconciler(app, ports, report=lambda kind, msg, data: log.append((kind, msg)))
    return Rig(app, world, reconciler, log)


@pytest.fixture
def rig(tmp_path: Path, ledger_url: str, ledger_templates: LedgerTemplates) -> Iterator[Rig]:
    ledger_templates.seed(ledger_url)  # migrated once per worker, copied here
    made = make_rig(tmp_path, ledger_url)
    yield made
    made.app.ledger.dispose()
