"""A node pool created on a cluster while ``cluster move`` runs: the pool ends in the org its
cluster ends in, never the one the cluster left (issue 52). PostgreSQL, where the two run at
once (SQLite runs one write transaction at a time)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from automation.app import App
from automation.errors import AnycloudError
from automation.ledger import schema
from automation.services import clusters, credentials, node_pools, org_moves, projects
from tests.automation.conftest import DEMO_CA

ON_POSTGRES = [pytest.param("postgres", marks=pytest.mark.postgres)]


def _pool(name: str, cred: str) -> node_pools.CreateNodePool:
    return node_pools.CreateNodePool(name=name, cluster="prod", credentials=cred,
                                     region="us-east-1", vm_type="m7i.large", min_vms=1,
                                     max_vms=1)


def _waiting_on_a_lock(app: App, seconds: float = 20.0) -> None:
    """Until another session of this database waits on a row lock."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with app.ledger.read() as conn:
            waiting = conn.execute(sa.text(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND wait_event_type = 'Lock'")).scalar_one()
        if waiting:
            return
        time.sleep(0.05)
    raise AssertionError("the pool's creation never waited for the move")


@pytest.mark.parametrize("ledger_url", ON_POSTGRES, indirect=True)
@pytest.mark.parametrize("cred", ["moving", "staying"])
def test_a_pool_made_during_a_move_takes_the_clusters_new_org(
        app: App, kubeconfig: Path, monkeypatch: pytest.MonkeyPatch, cred: str) -> None:
    """The move is held open after its writes (before its commit) while a pool is created
    on the cluster with a credential that moves with it (``moving``: the pool is made, in the
    new org) or one that stays behind (``staying``: refused, the orgs differ)."""
    projects.create_org(app, "alpha")
    projects.create_org(app, "beta")
    clusters.register_cluster(app, clusters.RegisterCluster(
        name="prod", kubeconfig=kubeconfig, kubernetes_version="v1.36.2+k3s1",
        ca_file=DEMO_CA, offline=True, org="alpha"))
    for name in ("moving", "staying"):
        credentials.new_credential(app, credentials.NewCredential(
            name, "aws", {"profile": name}, org="alpha"))
    node_pools.create_node_pool(app, _pool("first", "moving"))  # takes `moving` along

    inside, go = threading.Event(), threading.Event()
    record = org_moves._record

    def held_open(*args: Any) -> None:
        record(*args)
        inside.set()
        assert go.wait(30)

    monkeypatch.setattr(org_moves, "_record", held_open)
    outcome: dict[str, Any] = {}

    def move() -> None:
        outcome["move"] = org_moves.move_cluster(app, "prod", "beta")

    def create() -> None:
        try:
            outcome["pool"] = node_pools.create_node_pool(app, _pool("second", cred))
        except AnycloudError as exc:
            outcome["pool"] = exc

    mover = threading.Thread(target=move)
    mover.start()
    assert inside.wait(30)
    creator = threading.Thread(target=create)
    creator.start()
    _waiting_on_a_lock(app)  # the creation waits for the move's transaction
    go.set()
    mover.join(30)
    creator.join(30)
    assert not mover.is_alive() and not creator.is_alive()

    beta = projects.get_org(app, "beta").id
    assert outcome["move"].org_id == beta
    with app.ledger.read() as conn:
        orgs = dict(conn.execute(sa.select(schema.node_pools.c.name,
                                           schema.node_pools.c.org_id)).all())
    if cred == "moving":
        assert not isinstance(outcome["pool"], Exception), outcome["pool"]
        assert orgs == {"first": beta, "second": beta}
    else:
        refused = outcome["pool"]
        assert isinstance(refused, AnycloudError) and refused.field == "--credentials"
        assert orgs == {"first": beta}
