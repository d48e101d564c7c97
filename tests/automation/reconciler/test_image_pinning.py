"""Images pinned per attempt (issue 9): an attempt's VM is built from the image recorded for
it, so a newer image published later changes no existing VM (plan, preview and the next up
show no change to them) and reaches only new attempts, which record it in their turn."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from click.testing import CliRunner

from automation.engine.mock.model import RegisteredResource
from automation.engine.mock.providers import image_key
from automation.engine.mock.runner import MockEngineRunner
from automation.services.rollout import plan_pool
from automation.stack_targets import pool_target
from stacks.pins import load_pins
from tests.automation.reconciler.conftest import Rig
from tests.automation.reconciler.test_reconcile import attempts

M = timedelta(minutes=1)
VM_TYPE = {"aws": "m7i.large", "gcp": "n2-standard-4", "azure": "Standard_D4s_v5"}
VM_RESOURCE = {
    "aws": "aws:ec2/instance:Instance",
    "gcp": "gcp:compute/instance:Instance",
    "azure": "azure-native:compute:VirtualMachine",
}
PROVIDERS = ("aws", "gcp", "azure")


def cpu_pin_key(provider: str) -> str:
    return image_key(load_pins().images.for_vm(provider, False))


def expected_image(provider: str, newest_id: str) -> str:
    """What an attempt records when built while ``newest_id`` was the newest image."""
    if provider == "azure":
        pin = load_pins().images.azure_cpu
        return f"{pin.publisher}:{pin.offer}:{pin.sku}:{newest_id}"
    return newest_id


def vm_image_input(vm: RegisteredResource) -> Any:
    """The part of a VM's inputs that names its image."""
    if vm.type == VM_RESOURCE["aws"]:
        return vm.inputs["ami"]
    if vm.type == VM_RESOURCE["gcp"]:
        return vm.inputs["bootDisk"]["initializeParams"]["image"]
    return vm.inputs["storageProfile"]["imageReference"]


def vm_of(resources: list[Any], provider: str, attempt_id: str) -> Any:
    (vm,) = [r for r in resources if r.type == VM_RESOURCE[provider] and attempt_id in r.name]
    return vm


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_newer_image_changes_no_vm_and_reaches_only_new_attempts(
    rig: Rig, provider: str
) -> None:
    cloud = rig.world.cloud
    runner = rig.reconciler.ports.runner
    assert isinstance(runner, MockEngineRunner)
    first_image = cloud.newest_image(cpu_pin_key(provider))["id"]

    # A pool of two, one of whose VMs never joins: it is replaced after ten minutes.
    cloud.faults.never_boot_next = 1
    pool = rig.pool("cpu", provider=provider, vm_type=VM_TYPE[provider], count=2)
    rig.passes(5, step=M)
    (doomed_id,) = [v.attempt_id for v in cloud.vms_of_pool(pool) if not v.boots]
    (old,) = [r for r in attempts(rig, pool) if r["id"] != doomed_id]
    rows = attempts(rig, pool)
    assert [r["state"] for r in rows] == ["running", "running"]
    # Every attempt row holds the image its VM was built from.
    assert [r["image"] for r in rows] == [expected_image(provider, first_image)] * 2
    target = pool_target(rig.app, pool)
    assert [a.image for a in target.config.attempts] == [r["image"] for r in rows]
    before = runner.load_state(target)["resources"]
    planned_before = plan_pool(rig.app, pool)

    # The image's owner publishes a newer one.
    newer = cloud.publish_image(provider, "cpu")
    assert cloud.newest_image(cpu_pin_key(provider))["id"] == newer != first_image

    # preview: nothing to do (no VM replaced or updated).
    preview = runner.preview(pool_target(rig.app, pool), diff=True)
    assert preview.summary.changes == 0, preview.diff
    # plan: the existing VMs are planned exactly as they were.
    planned = plan_pool(rig.app, pool)
    assert [r.inputs for r in planned.resources] == [r.inputs for r in planned_before.resources]
    for row in rows:
        vm = vm_of(planned.resources, provider, row["id"])
        if provider == "azure":  # created from `latest`; the version Azure took is recorded
            assert vm_image_input(vm)["version"] == "latest"
        else:
            assert vm_image_input(vm) == row["image"]

    # A new attempt (the replacement of the VM that never joined) takes the newest image;
    # the attempt that stays keeps its VM untouched.
    rig.passes(12, step=M)
    rows = attempts(rig, pool)
    by_id = {r["id"]: r for r in rows}
    (replacement,) = [r for r in rows if r["replaces_attempt_id"] == doomed_id]
    assert replacement["state"] == "running"
    assert replacement["image"] == expected_image(provider, newer)
    assert by_id[old["id"]]["image"] == expected_image(provider, first_image)
    assert by_id[old["id"]]["state"] == "running"
    after = runner.load_state(pool_target(rig.app, pool))["resources"]
    kept = [urn for urn, r in before.items() if r["type"] == VM_RESOURCE[provider]
            and old["id"] in r["name"]]
    assert kept and all(after[urn]["digest"] == before[urn]["digest"] for urn in kept)
    assert cloud.journal.count(("create", old["id"])) == 1  # never bought again


@pytest.mark.parametrize("provider", PROVIDERS)
def test_plan_and_preview_through_the_cli_show_no_change_to_existing_vms(
    rig: Rig, provider: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    pool = rig.pool("cpu", provider=provider, vm_type=VM_TYPE[provider], count=1)
    rig.passes(6, step=M)
    (row,) = attempts(rig, pool)
    assert row["state"] == "running" and row["image"]
    rig.world.cloud.publish_image(provider, "cpu")

    # The CLI opens its own ledger and runner: the rig's ledger and home, and a mock engine
    # whose cloud is the rig's (it published the newer image).
    from automation.cli import cli
    from automation.engine import select

    monkeypatch.setenv("ANYCLOUD_HOME", str(rig.app.home))
    monkeypatch.setenv("ANYCLOUD_DATABASE_URL",
                       rig.app.ledger.engine.url.render_as_string(hide_password=False))
    monkeypatch.setattr(select, "make_runner", lambda home, requested=None, cloud=None:
                        MockEngineRunner(home, cloud=rig.world.cloud))

    preview = CliRunner().invoke(cli, ["node-pool", "preview", pool, "--engine", "mock",
                                       "--json", "--detailed-exitcode"])
    assert preview.exit_code == 0, preview.output  # 2 would mean changes
    (result,) = json.loads(preview.stdout)
    assert result["engine"] == "mock" and result["summary"]["create"] == 0
    assert result["summary"]["update"] == 0 and result["summary"]["replace"] == 0

    plan = CliRunner().invoke(cli, ["node-pool", "plan", pool, "--json"])
    assert plan.exit_code == 0, plan.output
    (vm,) = [r for r in json.loads(plan.stdout)["resources"]
             if r["type"] == VM_RESOURCE[provider]]
    if provider == "aws":
        assert vm["inputs"]["ami"] == row["image"]
    elif provider == "gcp":
        assert vm["inputs"]["bootDisk"]["initializeParams"]["image"] == row["image"]
    else:
        assert vm["inputs"]["storageProfile"]["imageReference"]["version"] == "latest"


def test_attempts_running_before_images_were_recorded_get_theirs_at_the_next_up(
    rig: Rig,
) -> None:
    """Rows from before migration 0004 hold no image: the next successful up records the
    image the stack left their VM built from, and from then on it is kept."""
    import sqlalchemy as sa

    from automation.ledger import schema

    pool = rig.pool("cpu", count=1)
    rig.passes(6, step=M)
    (row,) = attempts(rig, pool)
    recorded = row["image"]
    with rig.app.ledger.write() as conn:
        conn.execute(schema.vm_attempts.update().values(image=None))
        conn.execute(schema.node_pools.update().values(applied_digest=None))  # apply again
    rig.passes(1)
    (row,) = attempts(rig, pool)
    assert row["image"] == recorded and row["state"] == "running"
    with rig.app.ledger.read() as conn:
        events = conn.execute(sa.select(schema.events.c.kind).where(
            schema.events.c.subject_id == pool)).scalars().all()
    assert events.count("vm_running") == 1  # not reported running a second time


# ------------------------------------------------------------------ unverified images


def test_create_and_plan_warn_about_an_image_not_verified_first_hand(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    from automation import stack_targets
    from automation.services import node_pools

    created = node_pools.create_node_pool(rig.app, node_pools.CreateNodePool(
        name="gpu", credentials="team-gcp", region="us-central1", vm_type="g2-standard-4",
        min_vms=1, max_vms=1))
    (warning,) = node_pools.create_warnings(rig.app, created)
    assert load_pins().images.gcp_gpu.verified is False
    assert load_pins().images.gcp_gpu.image in warning
    assert "not verified first-hand" in warning
    assert stack_targets.pool_warnings(rig.app, created.id) == [warning]  # what plan shows
    assert stack_targets.pool_warnings(rig.app, "gpu") == [warning]  # by name too

    # A pin checked first-hand warns about nothing.
    pins = load_pins()
    checked = pins.model_copy(update={"images": pins.images.model_copy(update={
        "gcp_gpu": pins.images.gcp_gpu.model_copy(update={"verified": True})})})
    monkeypatch.setattr("stacks.pins.load_pins", lambda *a, **k: checked)
    assert stack_targets.pool_warnings(rig.app, created.id) == []
    assert stack_targets.image_warnings("lambda", 1) == []  # no images pinned there
