"""The crash-safety scenarios of ``test_crash_safety`` on the real Pulumi engine:
``reconcile --simulate --engine pulumi`` runs every stack on the CLI and plugins
``tools/build.py`` built, the cloud calls answered by the stand-in plugins from the same
simulated cloud, and what the stacks write to Kubernetes goes to a local API server.

What only this proves: a SIGKILL of the reconciler, or of the ``pulumi`` process itself,
leaves the real engine's checkpoint with pending operations (and a lock, and orphaned
plugins) that anycloud settles through its recovery invokes, with nothing bought twice and
nothing orphaned. The mock engine's imitation of pending operations proves it only of the
imitation. Each case costs ~1 minute; the boundaries here are those where the engine's
own bookkeeping is what recovery reads (the others are the ledger's, engine-blind, and
covered on the mock engine).
"""

from __future__ import annotations

import json
import shutil
from datetime import timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa

from automation.ledger import open_ledger, schema
from automation.services import node_pools
from tests.automation.reconciler.test_crash_safety import (
    Home,
    crash_then_recover,
    invariants,
    make_home,
)
from tests.conftest import missing

pytestmark = [pytest.mark.kube, pytest.mark.engine, pytest.mark.slow]

REAL = ("--engine", "pulumi")


@pytest.fixture(autouse=True)
def built_tools() -> None:
    from automation.devcluster.binaries import ToolMissing
    from automation.devcluster.engine_env import local_tools

    try:
        local_tools()
    except ToolMissing as exc:
        missing(exc.message)


def _engine_state(home: Home) -> Path:
    return home.root / "sim" / "engine" / "state"


def _run(home: Home, passes: int, *options: str, crash_at: str | None = None,
         advance: str = "1m") -> str:
    """``passes`` passes on the real engine; what the reconciler said (stderr)."""
    done = home.run("reconcile", "--once", "--simulate", *REAL, "--passes", str(passes),
                    "--advance", advance, *options, crash_at=crash_at)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stderr


@pytest.mark.parametrize(("boundary", "providers"), [
    ("mid-network-create", ("aws",)),
    ("after-stack-up", ("aws",)),
    # Three pools side by side, in workers: AWS buys again on a repeated create, GCP
    # refuses the name, Azure updates in place.
    ("mid-vm-create", ("aws", "gcp", "azure")),
])
def test_create_killed_at_a_boundary(tmp_path: Path, boundary: str,
                                     providers: tuple[str, ...]) -> None:
    """The reconciler SIGKILLed (and with it its workers, their engines and plugins, and the
    local API server) while pools of two are first bought."""
    home = make_home(tmp_path, *providers)
    crash_then_recover(home, boundary, *REAL, "--concurrency", "3")
    invariants(home, "ready")
    assert (_engine_state(home)).is_dir()  # the real engine's state, not the mock's
    assert not (home.root / "mock-engine").exists()


def test_the_engine_killed_mid_up_leaves_pending_creates_that_recovery_settles(
        tmp_path: Path) -> None:
    """``pulumi`` itself SIGKILLed once the cloud bought a VM, on every up of a run: its
    checkpoint keeps the create pending, the stack locked, and the plugins orphaned. The
    reconciler survives each, records the failure, and the next run settles the pending
    creates by looking the VMs up. A retried attempt gets a new bootstrap token, which
    replaces its VM (create before delete): never two VMs for one attempt at once, every one
    replaced deleted, none orphaned."""
    home = make_home(tmp_path)
    said = _run(home, 3, crash_at="engine-killed-mid-up")
    assert "provider failure 1 in a row: pulumi failed on stack" in said, said[-3000:]
    assert "the pulumi process was killed by signal 9" in said, said[-3000:]
    _run(home, 16)
    invariants(home, "ready", replacements=True)


def test_three_clouds_at_once_with_their_engines_killed(tmp_path: Path) -> None:
    """``--concurrency 3``: a pool per cloud in worker processes, each engine killed once
    the cloud bought a VM, on every up of two passes; the second pass's ups are the
    replacements a new bootstrap token asks for (create-before-delete), killed too."""
    home = make_home(tmp_path, "aws", "gcp", "azure")
    said = _run(home, 2, "--concurrency", "3", crash_at="engine-killed-mid-up")
    assert said.count("provider failure 1 in a row") == 3, said[-3000:]
    _run(home, 16, "--concurrency", "3")
    invariants(home, "ready", replacements=True)


@pytest.mark.postgres
def test_delete_killed_after_the_release_write_on_postgres(tmp_path: Path,
                                                          postgres_url: str) -> None:
    """A pool's whole life on a PostgreSQL ledger: bought, a VM that never joins replaced,
    ready, deleted with the reconciler killed once the release is written, and every VM and
    network resource gone."""
    home = make_home(tmp_path, url=postgres_url)
    world = home.world()
    world.cloud.faults.never_boot_next = 1
    world.cloud.save()
    said = _run(home, 16)
    invariants(home, "ready")
    world = home.world()
    assert len(world.cloud.vms) == 3, said[-3000:]  # the one that never joined, replaced
    assert sorted(v.state == "running" for v in world.cloud.vms.values()) == [
        False, True, True], said[-3000:]
    world = home.world()
    app = home.app(world)
    node_pools.delete_node_pool(app, "cpu")
    app.ledger.dispose()
    crash_then_recover(home, "after-release-write", *REAL)
    invariants(home, "deleted")
    resources = home.world().cloud.resources.values()
    assert resources and all(r["state"] != "live" for r in resources)


def test_lost_state_is_refused_then_adopted_from_the_command_line(tmp_path: Path) -> None:
    """Issue 34's scenario on the real engine: the state lost, the pool's error
    ``STATE_MISSING`` (no VM bought again), ``node-pool adopt`` rebuilds it by ``stack
    import`` from what the stand-in cloud holds, and the pool is deleted to the end."""
    home = make_home(tmp_path)
    said = _run(home, 6)
    invariants(home, "ready")
    # Where the user reads it: the real engine, over the stand-in cloud, bought nothing.
    assert "[pulumi engine, stand-in cloud] cpu: provisioning → ready" in said, said[-2000:]
    status = home.run("node-pool", "status", "cpu").stdout
    assert "pulumi, stand-in cloud (simulated VMs: nothing was bought)" in status, status
    assert "simulated: the stand-in cloud bought nothing" in status, status
    # The mock engine leaves the pool alone, and says which engine to run.
    mock = home.run("reconcile", "--once", "--simulate", "--json")
    assert mock.returncode == 0, mock.stderr[-2000:]
    ledger = open_ledger(home.url)
    with ledger.read() as conn:
        pool = conn.execute(sa.select(schema.node_pools)).mappings().one()
    ledger.dispose()
    assert pool["last_error_code"] == "ENGINE_MISMATCH", pool["last_error"]
    assert "--simulate --engine pulumi" in pool["last_error"]
    shutil.rmtree(_engine_state(home))
    # The drift check compares with the state: a lost one is the answer, in text and JSON.
    drift = home.run("node-pool", "status", "cpu", "--check-drift", "--simulate", *REAL)
    assert "Drift: STATE_MISSING" in drift.stdout, drift.stdout + drift.stderr[-2000:]
    assert "stand-in cloud: pulumi engine" in drift.stdout, drift.stdout
    drift_doc = json.loads(home.run("node-pool", "status", "cpu", "--check-drift",
                                    "--simulate", *REAL, "--json").stdout)
    assert drift_doc["drift"]["errorCode"] == "STATE_MISSING"
    assert drift_doc["drift"]["source"] == "stand-in cloud"
    assert drift_doc["engine"] == "standin" and drift_doc["drift"]["changes"] == []
    world = home.world()
    vm = next(iter(world.cloud.vms.values()))
    world.cloud.delete_resource(vm.resource_type, vm.id)  # a VM lost: a replacement wanted
    world.advance(timedelta(minutes=11))
    _run(home, 4, advance="5m")
    ledger = open_ledger(home.url)
    with ledger.read() as conn:
        pool = conn.execute(sa.select(schema.node_pools)).mappings().one()
    ledger.dispose()
    assert pool["last_error_code"] == "STATE_MISSING", pool["last_error"]
    adopted = home.run("node-pool", "adopt", "cpu", "--simulate", *REAL, "--json")
    assert adopted.returncode == 0, adopted.stderr[-3000:]
    doc = json.loads(adopted.stdout)
    assert doc["operation"] == "adopt" and doc["engine"] == "pulumi" and doc["summary"]["same"]
    _run(home, 8)
    invariants(home, "ready")
    # Every event on one clock, the simulated world's: newest first is newest first.
    history = json.loads(home.run("node-pool", "history", "cpu", "--json").stdout)
    times = [e["at"] for e in history["events"]]
    assert times == sorted(times, reverse=True) and "state_adopted" in {
        e["kind"] for e in history["events"]}
    world = home.world()
    app = home.app(world)
    node_pools.delete_node_pool(app, "cpu")
    app.ledger.dispose()
    _run(home, 6)
    invariants(home, "deleted")
