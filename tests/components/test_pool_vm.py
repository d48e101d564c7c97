"""PoolVM per cloud: identity-free, key-free, public, tagged, secret user data, right image."""

from __future__ import annotations

from typing import Any

import pytest

from components.join_script import LIB
from stacks.pins import load_pins

PINS = load_pins()
PROVIDERS = ("aws", "gcp", "azure")


def _vms(h: Any, provider: str, **kw: Any) -> list[Any]:
    return h.run_pool(provider, **kw).of_type(h.VM_TYPES[provider])


# ---------------------------------------------------------------- AWS


def test_aws_instance_requires_imdsv2_with_hop_limit_one(h: Any) -> None:
    for vm in _vms(h, "aws"):
        md = vm.inputs["metadataOptions"]
        assert md["httpTokens"] == "required"
        assert md["httpPutResponseHopLimit"] == 1
        assert md["httpEndpoint"] == "enabled"


def test_aws_instance_has_no_key_pair_and_no_instance_profile(h: Any) -> None:
    for vm in _vms(h, "aws"):
        assert "keyName" not in vm.inputs
        assert "iamInstanceProfile" not in vm.inputs
        assert vm.inputs["associatePublicIpAddress"] is True
        assert vm.outputs["publicIp"]


def test_aws_image_is_x86_ubuntu_or_cuda_for_gpu(h: Any) -> None:
    def ami_filters(run: Any) -> dict[str, list[str]]:
        (call,) = [i for i in run.invokes if i["token"] == "aws:ec2/getAmi:getAmi"][:1]
        return {f["name"]: f["values"] for f in call["args"]["filters"]}

    cpu = ami_filters(h.run_pool("aws"))
    assert cpu["name"] == [PINS.images.aws_cpu.name] and cpu["architecture"] == ["x86_64"]
    gpu = ami_filters(h.run_pool("aws", gpu=True))
    assert gpu["name"] == [PINS.images.aws_gpu.name] and gpu["architecture"] == ["x86_64"]


# ---------------------------------------------------------------- GCP


def test_gcp_instance_has_no_service_account_or_ssh_keys(h: Any) -> None:
    for vm in _vms(h, "gcp"):
        assert "serviceAccount" not in vm.inputs
        md = vm.inputs["metadata"]
        assert md["block-project-ssh-keys"] == "true"
        assert "ssh-keys" not in md and "sshKeys" not in md
        (nic,) = vm.inputs["networkInterfaces"]
        assert len(nic["accessConfigs"]) == 1  # ephemeral public address
        assert vm.outputs["networkInterfaces"][0]["accessConfigs"][0]["natIp"]


def test_gcp_labels_use_valid_keys(h: Any) -> None:
    vm = next(v for v in _vms(h, "gcp") if v.name == "vm-at-0001-instance")
    assert vm.inputs["labels"] == {
        "anycloud-sh_attempt": "at-0001",
        "anycloud-sh_node-pool": "np-7f3k",
        "anycloud-sh_cluster": "cl-42",
    }
    assert vm.inputs["name"] == "anycloud-at-0001"


def test_gcp_image_is_ubuntu_or_deep_learning_for_gpu(h: Any) -> None:
    # The VM takes the concrete newest image of the pinned family, never the family itself
    # (GCP would resolve a family anew and a later run would see another image).
    def family_lookup(run: Any) -> dict[str, Any]:
        (call,) = [i for i in run.invokes if i["token"] == "gcp:compute/getImage:getImage"]
        return dict(call["args"])

    for gpu, pin in ((False, PINS.images.gcp_cpu), (True, PINS.images.gcp_gpu)):
        run = h.run_pool("gcp", gpu=gpu)
        assert family_lookup(run) == {"family": pin.family, "project": pin.project}
        for vm in run.of_type(h.VM_TYPES["gcp"]):
            image = vm.inputs["bootDisk"]["initializeParams"]["image"]
            assert image.startswith(
                f"https://www.googleapis.com/compute/v1/projects/{pin.project}/global/images/"
                f"{pin.family}-v"
            )
    gpu_vm = _vms(h, "gcp", gpu=True)[0]
    assert gpu_vm.inputs["scheduling"]["onHostMaintenance"] == "TERMINATE"


# ---------------------------------------------------------------- Azure


def test_azure_vm_has_no_identity_and_no_ssh_key(h: Any) -> None:
    for vm in _vms(h, "azure"):
        assert "identity" not in vm.inputs
        linux = vm.inputs["osProfile"]["linuxConfiguration"]
        assert "ssh" not in linux
    run = h.run_pool("azure")
    subnet = run.one("azure-native:network:Subnet")
    for vm in _vms(h, "azure"):
        profile = vm.inputs["networkProfile"]
        (nic,) = profile["networkInterfaceConfigurations"]
        (ipc,) = nic["ipConfigurations"]
        assert ipc["subnet"]["id"] == subnet.id  # in the pool's own subnet (NSG applies)
        pip = ipc["publicIPAddressConfiguration"]
        assert pip["sku"]["name"] == "Standard" and pip["deleteOption"] == "Delete"
        assert nic["deleteOption"] == "Delete" and "networkSecurityGroup" not in nic
    assert all(a["publicIp"] for a in run.outputs["attempts"].values())


def test_azure_tags_and_images(h: Any) -> None:
    vm = next(v for v in _vms(h, "azure") if v.name == "vm-at-0001-vm")
    assert vm.inputs["tags"] == {
        "anycloud.sh_attempt": "at-0001",
        "anycloud.sh_node-pool": "np-7f3k",
        "anycloud.sh_cluster": "cl-42",
    }
    assert vm.inputs["vmName"] == "anycloud-at-0001"
    ref = vm.inputs["storageProfile"]["imageReference"]
    assert ref["offer"] == PINS.images.azure_cpu.offer
    gpu = _vms(h, "azure", gpu=True)[0]
    assert gpu.inputs["storageProfile"]["imageReference"]["offer"] == PINS.images.azure_gpu.offer


# ---------------------------------------------------------------- all clouds

USER_DATA_KEY = {"aws": "userData", "gcp": "metadata", "azure": "osProfile"}


@pytest.mark.parametrize("provider", PROVIDERS)
def test_user_data_is_secret_in_inputs_and_state(h: Any, provider: str) -> None:
    for vm in _vms(h, provider):
        key = USER_DATA_KEY[provider]
        assert key in vm.secret_inputs
        assert key in vm.options["additionalSecretOutputs"]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_token_changes_replace_the_vm_and_consumed_tokens_leave_it_alone(
    h: Any, provider: str
) -> None:
    key = USER_DATA_KEY[provider]
    by_attempt = {vm.name.split("-")[2]: vm for vm in _vms(h, provider)}
    assert key in by_attempt["0001"].options["replaceOnChanges"]
    assert key in by_attempt["0002"].options["ignoreChanges"]


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("gpu", [False, True])
def test_user_data_joins_with_guard_checksum_labels_and_taint(
    h: Any, provider: str, gpu: bool
) -> None:
    vm = next(v for v in _vms(h, provider, gpu=gpu) if "at-0001" in v.name)
    doc = h.cloud_config_of(vm)
    assert "x86_64 only" in h.written_file(doc, f"{LIB}/arch-guard.sh")
    assert f"expected={PINS.k3s.sha256_amd64}" in h.written_file(doc, f"{LIB}/install-k3s.sh")
    import yaml

    cfg = yaml.safe_load(h.written_file(doc, "/etc/rancher/k3s/config.yaml"))
    labels = set(cfg["node-label"])
    assert {
        "anycloud.sh/cluster=cl-42",
        "anycloud.sh/node-pool=np-7f3k",
        f"anycloud.sh/provider={provider}",
        "anycloud.sh/attempt=at-0001",
    } <= labels
    assert ("anycloud.sh/accelerator=nvidia" in labels) is gpu
    assert cfg["node-taint"] == ["anycloud.sh/node-pool=np-7f3k:NoSchedule"]
    assert cfg["token"].startswith(f"K10{h.CA}::")


@pytest.mark.parametrize("provider", PROVIDERS)
def test_vm_children_are_parented_to_their_component(h: Any, provider: str) -> None:
    run = h.run_pool(provider)
    for vm in _vms(h, provider):
        parent = run.by_urn(vm.parent)
        assert parent.type.startswith("anycloud:vm:")
        assert vm.urn.split("::")[2] == f"{parent.type}${vm.type}"
