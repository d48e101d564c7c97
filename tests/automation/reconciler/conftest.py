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


@pytest.fixture
def rig(tmp_path: Path, ledger_url: str) -> Iterator[Rig]:
    app, world = simulated_app(tmp_path, ledger_url)
    ledger = app.ledger
    credentials.new_credential(app, credentials.NewCredential("team-aws", "aws",
                                                              {"profile": "team"}))
    credentials.new_credential(app, credentials.NewCredential(
        "team-gcp", "gcp", {"project": "my-project", "key_file": str(DEMO_CA)}))
    runner = MockEngineRunner(app.home, cloud=world.cloud)
    log: list[tuple[str, str]] = []
    ports = Ports(runner=runner, cluster_for=lambda row: world.cluster,
                  vm_lookup=lambda pool, ids: {a: world.cloud.lookup(a) for a in ids})
    reconciler = Reconciler(app, ports, report=lambda kind, msg, data: log.append((kind, msg)))
    yield Rig(app, world, reconciler, log)
    ledger.dispose()
