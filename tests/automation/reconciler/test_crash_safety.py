"""SIGKILL the reconciler at every step boundary, restart it, and check it converges:
exactly one VM per live attempt, no orphaned VM, no VM bought twice, no pool lost."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from datetime import timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa

from automation.app import App
from automation.catalog.store import data_dir
from automation.ledger import open_ledger, schema
from automation.reconciler.reconcile import Reconciler
from automation.services import credentials, node_pools
from automation.simulators.ports import simulated_ports
from automation.simulators.world import SimWorld, register_simulated_cluster

ANYCLOUD = str(Path(sys.executable).with_name("anycloud"))
M = timedelta(minutes=1)


class Home:
    def __init__(self, root: Path, url: str | None = None) -> None:
        """``url``: the ledger's (by default SQLite in the home, where the CLI finds it)."""
        self.root = root
        self.url = url or f"sqlite:///{root / 'anycloud.db'}"

    def app(self, world: SimWorld) -> App:
        return App(ledger=open_ledger(self.url), clock=world.clock, home=self.root)

    def world(self) -> SimWorld:
        return SimWorld(self.root / "sim")

    def passes(self, n: int) -> None:
        """In-process passes to put the world where a scenario needs it."""
        world = self.world()
        app = self.app(world)
        reconciler = Reconciler(app, simulated_ports(app, world))
        for _ in range(n):
            reconciler.run_once()
            world.advance(M)
        app.ledger.dispose()

    def run(self, *args: str, crash_at: str | None = None) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "ANYCLOUD_HOME": str(self.root)}
        env.pop("ANYCLOUD_DATABASE_URL", None)
        if not self.url.startswith("sqlite:"):
            env["ANYCLOUD_DATABASE_URL"] = self.url
        if crash_at:
            env["ANYCLOUD_CRASH_AT"] = crash_at
        return subprocess.run([ANYCLOUD, *args], env=env, capture_output=True, text=True,
                              timeout=300)


# Each cloud answers a repeated create differently (automation.simulators.cloud): AWS buys
# again, GCP refuses the name, Azure updates in place. anycloud must be safe on all three.
POOLS = {
    "aws": ({"profile": "p"}, "us-east-1", "m7i.large"),
    "gcp": ({"project": "my-project", "key_file": str(data_dir() / "demo" / "ca.pem")},
            "us-central1", "n2-standard-4"),
    "azure": ({"subscription_id": "00000000-0000-0000-0000-000000000001",
               "tenant_id": "00000000-0000-0000-0000-000000000002",
               "client_id": "00000000-0000-0000-0000-000000000003"},
              "eastus", "Standard_D4s_v5"),
}


def make_home(root: Path, *providers: str, url: str | None = None) -> Home:
    """A ledger with a registered simulated cluster and a pool of two VMs per cloud named
    (AWS when none is): ``cpu`` for the first, ``cpu-<cloud>`` for the others."""
    h = Home(root, url)
    world = h.world()
    app = h.app(world)
    register_simulated_cluster(app, root)
    for i, provider in enumerate(providers or ("aws",)):
        options, region, vm_type = POOLS[provider]
        credentials.new_credential(app, credentials.NewCredential(provider, provider, options))
        node_pools.create_node_pool(app, node_pools.CreateNodePool(
            name="cpu" if i == 0 else f"cpu-{provider}", credentials=provider, region=region,
            vm_type=vm_type, min_vms=2, max_vms=2))
    app.ledger.dispose()
    return h


@pytest.fixture
def home(tmp_path: Path) -> Home:
    return make_home(tmp_path)


def crash_then_recover(home: Home, boundary: str, *options: str) -> None:
    # Passes go on (the clock advancing) until the process dies at the boundary.
    crashed = home.run("reconcile", "--once", "--simulate", "--passes", "8", "--advance", "1m",
                       *options, crash_at=boundary)
    assert crashed.returncode == -9, (boundary, crashed.returncode, crashed.stderr[-2000:])
    recovered = home.run("reconcile", "--once", "--simulate", "--passes", "12",
                         "--advance", "1m", *options)
    assert recovered.returncode == 0, recovered.stderr[-2000:]


def invariants(home: Home, expect_state: str, *, replacements: bool = False) -> None:
    """``replacements``: an attempt retried after a failed run gets a new bootstrap token,
    which replaces its VM (create before delete): a second create of an attempt is then
    allowed when the first VM was deleted (never two at once)."""
    world = home.world()
    ledger = open_ledger(home.url)
    with ledger.read() as conn:
        pools = conn.execute(sa.select(schema.node_pools)).mappings().all()  # no pool lost
        rows = conn.execute(sa.select(schema.vm_attempts)).mappings().all()
    ledger.dispose()
    for pool in pools:
        assert pool["state"] == expect_state, (pool["name"], pool["state"], pool["last_error"])
    live = {r["id"] for r in rows if r["state"] in ("pending", "creating", "running")}
    running_vms = [v for v in world.cloud.vms.values() if v.state == "running"]
    # No orphan: every VM the cloud runs belongs to a live attempt.
    assert {v.attempt_id for v in running_vms} <= live
    # Exactly one VM per live attempt, and no attempt ever bought twice.
    assert Counter(v.attempt_id for v in running_vms) == Counter(live)
    creates = Counter(a for verb, a in world.cloud.journal if verb == "create")
    if replacements:
        creates.subtract(Counter(a for verb, a in world.cloud.journal if verb == "delete"))
        assert all(n <= 1 for n in creates.values()), creates
    else:
        assert all(n == 1 for n in creates.values()), creates
    if expect_state == "ready":
        assert len(live) == sum(pool["max_vms"] for pool in pools)
    if expect_state == "deleted":
        assert live == set() and running_vms == []


# mid-network-create, mid-vm-create and after-stack-up, and the lost state adopted from the
# command line, run on the real engine (test_crash_safety_real_engine), which proves them of
# the engine's own pending operations; mid-stack-up is the mock engine's own boundary.
@pytest.mark.parametrize("boundary", ["after-attempt-write", "mid-stack-up", "after-ledger-sync"])
def test_create(home: Home, boundary: str) -> None:
    crash_then_recover(home, boundary)
    invariants(home, "ready")


@pytest.mark.parametrize("provider", ["gcp", "azure"])
@pytest.mark.parametrize("boundary", ["mid-network-create", "mid-stack-up"])
def test_create_on_the_other_clouds(tmp_path: Path, provider: str, boundary: str) -> None:
    home = make_home(tmp_path, provider)
    crash_then_recover(home, boundary)
    invariants(home, "ready")


@pytest.mark.parametrize("boundary", ["mid-stack-up"])
def test_create_on_three_clouds_at_once(tmp_path: Path, boundary: str) -> None:
    # Pools side by side in worker processes. mid-vm-create kills the reconciler (the cloud
    # answers in its process) and with it its workers; mid-stack-up kills one worker only,
    # which the reconciler survives: the command goes on, so it is run to its end first.
    # Every worker dies at that boundary, so three passes are three rounds of kills, the
    # later ones on stacks an earlier kill left mid-update (more rounds repeat the third).
    home = make_home(tmp_path, "aws", "gcp", "azure")
    if boundary == "mid-stack-up":
        survived = home.run("reconcile", "--once", "--simulate", "--passes", "3",
                            "--advance", "1m", "--concurrency", "3", crash_at=boundary)
        assert survived.returncode == 0, survived.stderr[-2000:]
    else:
        crash_then_recover(home, boundary, "--concurrency", "3")
    home.run("reconcile", "--once", "--simulate", "--passes", "6", "--advance", "1m",
             "--concurrency", "3")
    invariants(home, "ready")


@pytest.mark.parametrize("boundary", ["after-release-write", "after-attempt-write",
                                      "mid-vm-create", "mid-stack-up"])
def test_replacement(home: Home, boundary: str) -> None:
    world = home.world()
    world.cloud.faults.never_boot_next = 1
    world.cloud.save()
    home.passes(1)  # both VMs bought; one will never join
    world = home.world()
    world.advance(10 * M)  # the next pass replaces it
    crash_then_recover(home, boundary)
    invariants(home, "ready")


@pytest.mark.parametrize("boundary", ["after-release-write", "mid-stack-up",
                                      "after-node-removed", "after-destroy"])
def test_delete(home: Home, boundary: str) -> None:
    home.passes(6)
    world = home.world()
    app = home.app(world)
    node_pools.delete_node_pool(app, "cpu")
    app.ledger.dispose()
    crash_then_recover(home, boundary)
    invariants(home, "deleted")


def test_serve_runs_passes_until_sigterm(home: Home) -> None:
    import signal
    import time

    env = {**os.environ, "ANYCLOUD_HOME": str(home.root)}
    env.pop("ANYCLOUD_DATABASE_URL", None)
    proc = subprocess.Popen([ANYCLOUD, "serve", "--simulate", "--interval", "0.2",
                             "--speed", "300"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    ready = False
    while time.monotonic() < deadline and not ready:
        time.sleep(1)
        ledger = open_ledger(home.url)
        with ledger.read() as conn:
            ready = conn.execute(sa.select(schema.node_pools.c.state)).scalar_one() == "ready"
        ledger.dispose()
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert ready, err[-2000:]
    assert proc.returncode == 0 and "reconciling every 0.2s (simulated)" in err
