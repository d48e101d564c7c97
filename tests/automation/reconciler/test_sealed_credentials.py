"""A credential whose secret the server holds sealed, through the reconciler and the mock
engine: the secret reaches the stack operation's engine environment and nowhere else (not the
program's config, not the engine's state, not the ledger, not a file under the home), and a
process without the key, or an engine not handed the secret, fails the pool's operation with
a reason instead of running it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import sqlalchemy as sa

from automation.engine.runner import StackTarget
from automation.ledger import schema
from automation.models import SecretMaterial
from automation.reconciler.reconcile import Ports, Reconciler
from automation.reconciler.workers import WorkerRunner
from automation.sealing import SealingKey
from automation.services import credentials, node_pools, pool_status
from automation.stack_targets import pool_target
from tests.automation.conftest import snapshot
from tests.automation.reconciler.conftest import Rig

SECRET = ("NeverOnDisk" * 4)[:40]


@pytest.fixture
def sealed(rig: Rig) -> str:
    rig.app.sealing = SealingKey(os.urandom(32))
    credentials.new_credential(rig.app, credentials.NewCredential(
        "sealed-aws", "aws", {}, SecretMaterial(access_key_id="AKIAIOSFODNN7EXAMPLE",
                                                secret_access_key=SECRET)))
    return node_pools.create_node_pool(rig.app, node_pools.CreateNodePool(
        name="cpu", credentials="sealed-aws", region="us-east-1", vm_type="m7i.large",
        min_vms=2, max_vms=2)).id


def files_holding(root: Path, text: str) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.is_file() and text.encode() in p.read_bytes()]


def test_the_target_carries_the_secret_for_the_engine_only(rig: Rig, sealed: str) -> None:
    target = pool_target(rig.app, sealed)
    assert target.secret_env == {"AWS_ACCESS_KEY_ID": "AKIAIOSFODNN7EXAMPLE",
                                 "AWS_SECRET_ACCESS_KEY": SECRET}
    assert target.config.credential.secret_env == ("AWS_ACCESS_KEY_ID",
                                                   "AWS_SECRET_ACCESS_KEY")
    assert target.config.credential.profile is None
    for shown in (repr(target), target.model_dump_json(), target.config.model_dump_json()):
        assert SECRET not in shown


@pytest.mark.parametrize("in_workers", [False, True], ids=["inline", "worker-process"])
def test_a_pool_on_a_sealed_credential_comes_up_and_the_secret_stays_sealed(
        rig: Rig, sealed: str, in_workers: bool, ledger_url: str) -> None:
    if in_workers:
        runner = WorkerRunner(rig.reconciler.ports.runner, 1)
        rig.reconciler = Reconciler(rig.app, Ports(**{**rig.reconciler.ports.__dict__,
                                                     "runner": runner}))
    try:
        rig.passes(6)
    finally:
        if in_workers:
            runner.close()
    status = pool_status.node_pool_status(rig.app.ledger, sealed)
    assert status.state == "ready" and status.counts.ready == 2, status
    assert files_holding(rig.app.home, SECRET) == []
    assert SECRET not in str(snapshot(rig.app))
    if ledger_url.startswith("sqlite:///"):
        assert SECRET.encode() not in Path(ledger_url.removeprefix("sqlite:///")).read_bytes()


def test_without_the_key_the_pool_waits_with_a_reason(rig: Rig, sealed: str) -> None:
    rig.app.sealing = None
    rig.passes(2)
    status = pool_status.node_pool_status(rig.app.ledger, sealed)
    assert status.counts.ready == 0
    with rig.app.ledger.read() as conn:
        attempts = conn.execute(sa.select(schema.vm_attempts.c.id).where(
            schema.vm_attempts.c.pool_id == sealed)).scalars().all()
    assert attempts and all(rig.world.cloud.lookup(a) == "absent" for a in attempts)
    assert status.last_error_code == "SEALING_KEY_MISSING", status


def test_an_engine_not_handed_the_secret_fails_like_the_provider(rig: Rig, sealed: str) -> None:
    from automation.engine.errors import EngineFailed

    target = pool_target(rig.app, sealed)
    bare = StackTarget(**{**dict(target), "secret_env": {}})
    with pytest.raises(EngineFailed, match="found no credentials: AWS_ACCESS_KEY_ID"):
        rig.reconciler.ports.runner.up(bare)
    assert rig.world.cloud.lookup(target.config.attempts[0].id) in ("absent", None)
