"""A pool on a VM type only a live refresh knows passes the policy pack too: the pack reads the
shipped catalog, so the pool's stack target tells it of the type (x86_64 only) and its GPUs."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from automation.app import App
from automation.catalog.refresh import store
from automation.catalog.refresh.model import FetchedOffering, FetchedType, Snapshot
from automation.catalog.store import VmType
from automation.engine.mock.runner import MockEngineRunner
from automation.services.node_pools import CreateNodePool, create_node_pool
from automation.services.rollout import check_pool_policy
from automation.stack_targets import pool_target
from policies import PolicyConfigError, check_resources
from policies import config as cfg
from tests.automation.conftest import credential, ready_cluster

AT = datetime(2099, 1, 1, tzinfo=UTC)  # newer than every shipped figure
NEW_CPU = FetchedType(name="m9z.xlarge", arch="x86_64", vcpus=4, memory_gib=32.0)
NEW_GPU = FetchedType(name="g9z.xlarge", arch="x86_64", vcpus=8, memory_gib=64.0, gpus=2,
                      gpu_model="NVIDIA L4", family="gpu")
NEW_ARM = FetchedType(name="m9zg.xlarge", arch="arm64", vcpus=4, memory_gib=16.0)


def refresh(app: App, cred_id: str) -> None:
    types = (FetchedType(name="m5.xlarge", arch="x86_64", vcpus=4, memory_gib=16.0),
             NEW_CPU, NEW_GPU, NEW_ARM)
    store.write_snapshot(app.ledger, Snapshot(
        provider="aws", regions=("us-east-1",), types=types,
        offerings=tuple(FetchedOffering(vm_type=t.name, region="us-east-1",
                                        zones=("us-east-1a",), price_usd_hour=1.0)
                        for t in types),
        sources=("aws ec2:DescribeInstanceTypes",), fetched_at=AT), cred_id)


@pytest.fixture
def refreshed(app: App, kubeconfig: Path) -> App:
    ready_cluster(app, kubeconfig)
    refresh(app, credential(app))
    return App(ledger=app.ledger, clock=app.clock, probe=app.probe, home=app.home)


def pool(app: App, name: str, vm_type: str) -> str:
    return create_node_pool(app, CreateNodePool(
        name=name, credentials="team-aws", region="us-east-1", vm_type=vm_type,
        min_vms=1, max_vms=1)).id


def test_a_pool_on_a_refreshed_type_passes_the_policy_pack(refreshed: App) -> None:
    pool_id = pool(refreshed, "new-cpu", "m9z.xlarge")
    target = pool_target(refreshed, pool_id)
    assert target.policy_config == {
        cfg.VM_TYPE_X86_64: {"extraVmTypes": {"aws": ["m9z.xlarge"]}}}
    report = check_pool_policy(refreshed, pool_id)
    assert report.mandatory == []
    # Without the config the pack would refuse it: the shipped catalog lacks the type.
    run = MockEngineRunner(refreshed.home)
    bare = run.check_policy(run.evaluate(target, reveal_secrets=True))
    assert [f.policy for f in bare if f.enforcement == "mandatory"] == [cfg.VM_TYPE_X86_64]


def test_gpu_counts_of_a_refreshed_type_reach_the_guardrail(refreshed: App) -> None:
    pool_id = pool(refreshed, "new-gpu", "g9z.xlarge")
    config = pool_target(refreshed, pool_id).policy_config
    assert config is not None
    assert config[cfg.GPU_COUNT_GUARDRAIL] == {"gpuPools": {pool_id: 2}}


def test_shipped_types_need_no_config(refreshed: App) -> None:
    assert pool_target(refreshed, pool(refreshed, "old", "m5.xlarge")).policy_config is None


def test_extra_types_add_to_the_default_list_and_arm64_is_never_added(
    refreshed: App, s_vm: dict[str, object]
) -> None:
    from tests.policies.conftest import resource

    vm = s_vm | {"instanceType": "m9z.xlarge"}
    config = {cfg.VM_TYPE_X86_64: {"extraVmTypes": {"aws": ["m9z.xlarge"]}}}
    found = check_resources([resource("aws:ec2/instance:Instance", vm)], config)
    assert [v.policy for v in found if v.policy == cfg.VM_TYPE_X86_64] == []
    # The default list still applies alongside.
    vm_old = s_vm | {"instanceType": "m5.large"}
    assert not [v for v in check_resources([resource("aws:ec2/instance:Instance", vm_old)],
                                           config) if v.policy == cfg.VM_TYPE_X86_64]
    with pytest.raises(PolicyConfigError, match="extraVmTypes"):
        check_resources([resource("aws:ec2/instance:Instance", vm)],
                        {cfg.VM_TYPE_X86_64: {"extraVmTypes": ["m9z.xlarge"]}})
    # An arm64 type a refresh found is not handed to the pack: it stays refused.
    from automation.stack_targets import refreshed_type_policy

    arm = VmType(name="m9zg.xlarge", arch="arm64", vcpus=4, memory_gib=16.0)
    assert refreshed_type_policy("np-x", "aws", arm) is None


@pytest.fixture
def s_vm() -> dict[str, object]:
    from tests.policies.conftest import aws_vm

    return aws_vm()


def test_a_serving_reconciler_sees_a_refresh_from_its_next_pass(tmp_path: Path) -> None:
    from automation.reconciler.reconcile import Reconciler
    from automation.simulators.ports import simulated_ports
    from automation.simulators.world import simulated_app

    app, world = simulated_app(tmp_path)
    reconciler = Reconciler(app, simulated_ports(app, world))
    try:
        assert app.catalog.provider("aws").vm_type("m9z.xlarge") is None  # type: ignore[union-attr]
        refresh(app, credential(app))
        reconciler.run_once()
        assert app.catalog.provider("aws").vm_type("m9z.xlarge") == VmType(
            name="m9z.xlarge", arch="x86_64", vcpus=4, memory_gib=32.0)
    finally:
        reconciler.close()
        app.ledger.dispose()

