"""Images per attempt in the node-pool stack program and the simulated cloud: the newest image
is looked up only for attempts with none recorded, every other attempt's VM is built from its
own, and each attempt's image is exported for the ledger."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from automation.engine.mock.model import ProgramRun
from automation.engine.mock.program import run_program
from automation.engine.mock.providers import MockProviders, image_key
from automation.engine.mock.runner import MockEngineRunner
from automation.engine.runner import StackKind, StackTarget
from components.pins import GcpImage
from stacks import node_pool
from stacks.config import AttemptSpec, NodePoolStackConfig
from stacks.pins import load_pins

PINS = load_pins()
ISSUED = datetime(2026, 11, 30, tzinfo=UTC)
VM = {
    "aws": "aws:ec2/instance:Instance",
    "gcp": "gcp:compute/instance:Instance",
    "azure": "azure-native:compute:VirtualMachine",
}
LOOKUP = {"aws": "aws:ec2/getAmi:getAmi", "gcp": "gcp:compute/getImage:getImage"}
RECORDED = {
    "aws": "ami-0recorded0000000",
    "gcp": "https://www.googleapis.com/compute/v1/projects/ubuntu-os-cloud/global/images/"
    "ubuntu-2404-lts-amd64-v20250101",
    "azure": "Canonical:ubuntu-24_04-lts:server:24.04.202501010",
}


def with_attempts(config: NodePoolStackConfig, *attempts: AttemptSpec) -> NodePoolStackConfig:
    return config.model_copy(update={"attempts": attempts})


def run(config: NodePoolStackConfig, cloud: MockProviders | None = None) -> ProgramRun:
    return run_program(node_pool.build_program(config), cloud=cloud or MockProviders())


def vm_for(run_: ProgramRun, provider: str, attempt_id: str) -> Any:
    (vm,) = [r for r in run_.of_type(VM[provider]) if attempt_id in r.name]
    return vm


def image_input(vm: Any) -> Any:
    if vm.type == VM["aws"]:
        return vm.inputs["ami"]
    if vm.type == VM["gcp"]:
        return vm.inputs["bootDisk"]["initializeParams"]["image"]
    return vm.inputs["storageProfile"]["imageReference"]


def new(attempt_id: str) -> AttemptSpec:
    return AttemptSpec(id=attempt_id, token_issued_at=ISSUED)


def recorded(attempt_id: str, provider: str) -> AttemptSpec:
    return AttemptSpec(id=attempt_id, needs_token=False, image=RECORDED[provider])


@pytest.mark.parametrize("provider", ["aws", "gcp", "azure"])
def test_new_attempts_take_the_newest_image_and_export_it(
    config_for: Any, provider: str
) -> None:
    cloud = MockProviders()
    newer = cloud.publish_image(provider, "cpu")
    result = run(with_attempts(config_for(provider), new("at-a"), new("at-b")), cloud)
    exported = {a: out["image"] for a, out in result.outputs["attempts"].items()}
    if provider == "azure":
        pin = PINS.images.azure_cpu
        assert exported == dict.fromkeys(
            ("at-a", "at-b"), f"{pin.publisher}:{pin.offer}:{pin.sku}:{newer}")
        for a in ("at-a", "at-b"):  # Azure resolves `latest` when it creates the VM
            assert image_input(vm_for(result, provider, a))["version"] == "latest"
    else:
        assert exported == {"at-a": newer, "at-b": newer}
        assert [image_input(vm_for(result, provider, a)) for a in ("at-a", "at-b")] == [
            newer, newer]
        # One lookup for the whole pool, not one per VM.
        assert [i["token"] for i in result.invokes].count(LOOKUP[provider]) == 1


@pytest.mark.parametrize("provider", ["aws", "gcp", "azure"])
def test_recorded_attempts_keep_their_image_and_look_nothing_up(
    config_for: Any, provider: str
) -> None:
    cloud = MockProviders()
    cloud.publish_image(provider, "cpu")
    result = run(with_attempts(config_for(provider), recorded("at-a", provider)), cloud)
    assert result.outputs["attempts"]["at-a"]["image"] == RECORDED[provider]
    assert not [i for i in result.invokes if i["token"] in LOOKUP.values()]
    vm = vm_for(result, provider, "at-a")
    if provider == "azure":
        # Built from `latest` at creation; kept as created whatever the pin becomes.
        assert "storageProfile.imageReference" in vm.options["ignoreChanges"]
    else:
        assert image_input(vm) == RECORDED[provider]


@pytest.mark.parametrize("provider", ["aws", "gcp", "azure"])
def test_a_newer_image_reaches_the_new_attempt_only(config_for: Any, provider: str) -> None:
    cloud = MockProviders()
    config = with_attempts(config_for(provider), recorded("at-a", provider), new("at-b"))
    # Each run plans at-b's VM anew (a cloud that shares the published images only).
    before = run(config, MockProviders(images=cloud.images))
    newer = cloud.publish_image(provider, "cpu")
    after = run(config, MockProviders(images=cloud.images))
    # The recorded attempt's VM is registered exactly as before: no diff, no replacement.
    old_before, old_after = vm_for(before, provider, "at-a"), vm_for(after, provider, "at-a")
    assert old_after.inputs == old_before.inputs
    assert old_after.options == old_before.options
    assert after.outputs["attempts"]["at-a"]["image"] == RECORDED[provider]
    assert after.outputs["attempts"]["at-b"]["image"].endswith(newer)
    if provider != "azure":
        assert image_input(vm_for(after, provider, "at-b")) == newer
        assert "storageProfile.imageReference" not in vm_for(
            after, provider, "at-b").options["ignoreChanges"]


def test_gpu_pools_look_the_gpu_image_up(config_for: Any) -> None:
    cloud = MockProviders()
    config = config_for("gcp").model_copy(update={"gpu_count": 1, "vm_type": "g2-standard-4"})
    result = run(config, cloud)
    (lookup,) = [i for i in result.invokes if i["token"] == LOOKUP["gcp"]]
    assert lookup["args"] == {"family": PINS.images.gcp_gpu.family,
                              "project": PINS.images.gcp_gpu.project}
    newest = cloud.newest_image(image_key(PINS.images.gcp_gpu))["id"]
    assert {out["image"] for out in result.outputs["attempts"].values()} == {newest}


# ------------------------------------------------------------------ the simulated cloud


def test_simulated_cloud_answers_lookups_with_the_newest_published_image() -> None:
    cloud = MockProviders()
    aws_key = image_key(PINS.images.aws_cpu)
    first = cloud.newest_image(aws_key)
    assert first["id"].startswith("ami-") and "*" not in first["name"]
    assert cloud.newest_image(aws_key) == first  # deterministic until something is published
    assert MockProviders().newest_image(aws_key) == first
    second = cloud.publish_image("aws", "cpu", "ami-0second")
    third = cloud.publish_image("aws", "cpu")
    assert second == "ami-0second" and third not in (first["id"], second)
    newest = cloud.newest_image(aws_key)
    assert newest["id"] == third and newest["created"] > first["created"]
    # Another kind's lookup is untouched.
    assert cloud.newest_image(image_key(PINS.images.aws_gpu))["id"] != third

    gcp = cloud.publish_image("gcp", "gpu", "common-cu128-v20261201")
    pin = PINS.images.gcp_gpu
    assert gcp == (f"https://www.googleapis.com/compute/v1/projects/{pin.project}/global/"
                   "images/common-cu128-v20261201")
    assert cloud.publish_image("azure", "cpu", "24.04.202612010") == "24.04.202612010"


def test_getami_and_getimage_results_match_the_providers_shape() -> None:
    import pulumi
    import pulumi_aws as aws
    import pulumi_gcp as gcp

    cloud = MockProviders()
    ami = cloud.publish_image("aws", "cpu", "ami-0newest")
    link = cloud.publish_image("gcp", "cpu")
    seen: dict[str, Any] = {}

    def program() -> None:
        found = aws.ec2.get_ami_output(
            most_recent=True, owners=list(PINS.images.aws_cpu.owners),
            filters=[aws.ec2.GetAmiFilterArgs(name="name", values=[PINS.images.aws_cpu.name])])
        image = gcp.compute.get_image_output(family=PINS.images.gcp_cpu.family,
                                             project=PINS.images.gcp_cpu.project)
        pulumi.export("ami", found.apply(lambda r: [r.id, r.image_id, r.name, r.creation_date]))
        pulumi.export("gcp", image.apply(lambda r: [r.self_link, r.name, r.family]))

    result = run_program(program, cloud=cloud)
    seen = result.outputs
    assert seen["ami"][:2] == [ami, ami] and seen["ami"][2].startswith("ubuntu/images/")
    assert seen["ami"][3].startswith("2026-")
    assert seen["gcp"] == [link, link.rsplit("/", 1)[-1], PINS.images.gcp_cpu.family]


def test_azure_vms_report_the_version_latest_resolved_to_when_created(config_for: Any) -> None:
    cloud = MockProviders()
    config = with_attempts(config_for("azure"), new("at-a"))
    first = run(config, cloud)
    before = first.outputs["attempts"]["at-a"]["image"]
    cloud.publish_image("azure", "cpu")
    # The same VM asked again (a later run): the version it was created from, not the newest.
    assert run(config, cloud).outputs["attempts"]["at-a"]["image"] == before
    vm = vm_for(first, "azure", "at-a")
    assert vm.outputs["storageProfile"]["imageReference"]["exactVersion"] == before.rsplit(
        ":", 1)[-1]


def test_preview_sees_the_images_the_runners_cloud_published(
    config_for: Any, tmp_path: Path
) -> None:
    cloud = MockProviders()
    runner = MockEngineRunner(tmp_path, cloud)
    target = StackTarget(kind=StackKind.NODE_POOL, key="np-1",
                         config=with_attempts(config_for("aws"), new("at-a")))
    newer = cloud.publish_image("aws", "cpu")
    planned = runner.evaluate(target)
    assert planned.outputs["attempts"]["at-a"]["image"] == newer
    assert not cloud._ips  # the planning cloud bought nothing in the runner's


# ------------------------------------------------------------------ pins


def test_image_pins_say_whether_they_were_verified_first_hand() -> None:
    images = PINS.images
    assert images.gcp_gpu.verified is False  # the Deep Learning VM family: not checked
    for provider in ("aws", "gcp", "azure"):
        for gpu in (False, True):
            pin = images.for_vm(provider, gpu)
            assert pin is getattr(images, f"{provider}_{'gpu' if gpu else 'cpu'}")
            assert isinstance(pin.verified, bool) and pin.label
    with pytest.raises(ValueError):
        images.for_vm("lambda", False)


def test_gcp_image_pins_name_a_family() -> None:
    pin = GcpImage(image="projects/p-1/global/images/family/fam-1")
    assert (pin.project, pin.family, pin.verified) == ("p-1", "fam-1", False)
    with pytest.raises(ValueError, match="family"):
        GcpImage(image="projects/p-1/global/images/some-image-v1")
