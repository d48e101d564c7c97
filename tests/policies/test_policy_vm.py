"""Rules 2-5 on VM resources: SSH keys, cloud credentials, AWS IMDSv2, x86_64 VM types."""

from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from policies import PolicyConfigError, check_resources
from policies import config as cfg

AWS, GCP, AZURE = (
    "aws:ec2/instance:Instance",
    "gcp:compute/instance:Instance",
    "azure-native:compute:VirtualMachine",
)
LT = "aws:ec2/launchTemplate:LaunchTemplate"


def launch_template(s: SimpleNamespace, **over: Any) -> dict[str, Any]:
    lt: dict[str, Any] = {
        "instanceType": "m5.large",
        "metadataOptions": {"httpTokens": "required", "httpPutResponseHopLimit": 1},
        "userData": s.b64(s.user_data("aws", attempt=None)),
        "tagSpecifications": [
            {
                "resourceType": "instance",
                "tags": {"anycloud.sh/cluster": "c1", "anycloud.sh/node-pool": "pool-1"},
            },
            {
                "resourceType": "volume",
                "tags": {"anycloud.sh/cluster": "c1", "anycloud.sh/node-pool": "pool-1"},
            },
        ],
    }
    lt.update(over)
    return lt


@pytest.mark.parametrize("provider", ["aws", "gcp", "azure"])
def test_compliant_vm_has_no_violation_at_all(s: SimpleNamespace, provider: str) -> None:
    res = s.resource(s.VM_TYPES[provider], s.VM_BUILDERS[provider]())
    found = check_resources([res], None, clock=lambda: s.NOW)
    assert found == []


def test_compliant_launch_template_passes(s: SimpleNamespace) -> None:
    assert check_resources([s.resource(LT, launch_template(s))], None) == []


# --- 2. SSH keys -------------------------------------------------------------------------------


def test_aws_key_name_on_instance_and_template(s: SimpleNamespace) -> None:
    vm = s.aws_vm() | {"keyName": "ops"}
    found = s.check(cfg.NO_SSH_KEY, AWS, vm)
    assert [v.message for v in found] == [f"{AWS} keyName='ops': pool VMs carry no SSH key pair"]
    assert len(s.check(cfg.NO_SSH_KEY, LT, launch_template(s, keyName="ops"))) == 1


def test_aws_key_pair_may_not_exist(s: SimpleNamespace) -> None:
    found = s.check(cfg.NO_SSH_KEY, "aws:ec2/keyPair:KeyPair", {"keyName": "k", "publicKey": "x"})
    assert len(found) == 1 and "no key pair may exist" in found[0].message


@pytest.mark.parametrize("key", ["ssh-keys", "sshKeys"])
def test_gcp_ssh_metadata(s: SimpleNamespace, key: str) -> None:
    vm = s.gcp_vm()
    vm["metadata"][key] = "anycloud:ssh-ed25519 AAAA..."
    found = s.check(cfg.NO_SSH_KEY, GCP, vm)
    assert len(found) == 1 and f"metadata.{key} is set" in found[0].message
    assert "AAAA" not in found[0].message  # key material is never echoed


def test_gcp_oslogin_is_irrelevant_and_project_keys_are_refused(s: SimpleNamespace) -> None:
    vm = s.gcp_vm()
    vm["metadata"]["enable-oslogin"] = "FALSE"
    assert s.check(cfg.NO_SSH_KEY, GCP, vm) == []
    item = {"key": "ssh-keys", "value": "x"}
    assert (
        len(s.check(cfg.NO_SSH_KEY, "gcp:compute/projectMetadataItem:ProjectMetadataItem", item))
        == 1
    )


def test_azure_public_keys(s: SimpleNamespace) -> None:
    vm = s.azure_vm()
    vm["osProfile"]["linuxConfiguration"]["ssh"] = {
        "publicKeys": [{"path": "/home/anycloud/.ssh/authorized_keys", "keyData": "ssh-rsa AAA"}]
    }
    found = s.check(cfg.NO_SSH_KEY, AZURE, vm)
    assert len(found) == 1 and "publicKeys has 1 key(s)" in found[0].message


@pytest.mark.parametrize("disable", [False, None])
def test_azure_password_login(s: SimpleNamespace, disable: bool | None) -> None:
    vm = s.azure_vm()
    vm["osProfile"]["adminPassword"] = "hunter2-Hunter2"
    vm["osProfile"]["linuxConfiguration"]["disablePasswordAuthentication"] = disable
    found = s.check(cfg.NO_SSH_KEY, AZURE, vm)
    assert len(found) == 1 and "adminPassword is set" in found[0].message
    assert "hunter2" not in found[0].message
    # The default exception (Azure needs a password or a key) is not a blanket pass.
    assert "ssh_pwauth: false" in found[0].message
    refused = {cfg.NO_SSH_KEY: {"azureAdminPasswordAllowed": False}}
    assert "must be disabled" in s.check(cfg.NO_SSH_KEY, AZURE, vm, refused)[0].message


def test_azure_password_refused_outright_when_configured(s: SimpleNamespace) -> None:
    vm = s.azure_vm()
    vm["osProfile"]["adminPassword"] = "x"
    vm["osProfile"]["linuxConfiguration"]["disablePasswordAuthentication"] = False
    vm["osProfile"]["customData"] = s.b64("#cloud-config\nssh_pwauth: false\n")
    assert s.check(cfg.NO_SSH_KEY, AZURE, vm) == []
    refused = {cfg.NO_SSH_KEY: {"azureAdminPasswordAllowed": False}}
    assert len(s.check(cfg.NO_SSH_KEY, AZURE, vm, refused)) == 1


def test_azure_password_with_password_auth_disabled_passes(s: SimpleNamespace) -> None:
    vm = s.azure_vm()
    vm["osProfile"]["adminPassword"] = "[secret]"  # presence is checked without reading it
    assert s.check(cfg.NO_SSH_KEY, AZURE, vm, secret_keys=["osProfile"]) == []


# --- 3. cloud credentials ----------------------------------------------------------------------


def test_aws_instance_profile(s: SimpleNamespace) -> None:
    found = s.check(cfg.NO_CLOUD_CREDENTIAL, AWS, s.aws_vm() | {"iamInstanceProfile": "node"})
    assert len(found) == 1 and "iamInstanceProfile='node'" in found[0].message
    lt = launch_template(s, iamInstanceProfile={"name": "node"})
    assert len(s.check(cfg.NO_CLOUD_CREDENTIAL, LT, lt)) == 1
    empty = launch_template(s, iamInstanceProfile={"arn": "", "name": None})
    assert s.check(cfg.NO_CLOUD_CREDENTIAL, LT, empty) == []


@pytest.mark.parametrize(
    "account",
    [
        {"email": "node@p.iam.gserviceaccount.com", "scopes": ["cloud-platform"]},
        {"email": "default"},
        {"scopes": ["https://www.googleapis.com/auth/devstorage.read_only"]},
    ],
)
def test_gcp_service_account(s: SimpleNamespace, account: dict[str, Any]) -> None:
    found = s.check(cfg.NO_CLOUD_CREDENTIAL, GCP, s.gcp_vm() | {"serviceAccount": account})
    assert len(found) == 1 and "serviceAccount.email=" in found[0].message


@pytest.mark.parametrize(
    ("identity", "violates"),
    [
        ({"type": "SystemAssigned"}, True),
        ({"type": "UserAssigned", "userAssignedIdentities": {"/sub/x": {}}}, True),
        ({"type": "SystemAssigned, UserAssigned"}, True),
        ({"type": "None"}, False),
        (None, False),
    ],
)
def test_azure_identity(
    s: SimpleNamespace, identity: dict[str, Any] | None, violates: bool
) -> None:
    vm = s.azure_vm() | ({"identity": identity} if identity else {})
    assert bool(s.check(cfg.NO_CLOUD_CREDENTIAL, AZURE, vm)) is violates


# --- 4. AWS IMDSv2 -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "expect"),
    [
        (None, ["httpTokens=None", "httpPutResponseHopLimit=None"]),
        ({"httpTokens": "optional", "httpPutResponseHopLimit": 1}, ["httpTokens='optional'"]),
        ({"httpTokens": "required", "httpPutResponseHopLimit": 2}, ["HopLimit=2"]),
        ({"httpTokens": "required"}, ["HopLimit=None"]),
    ],
)
def test_imdsv2(s: SimpleNamespace, options: dict[str, Any] | None, expect: list[str]) -> None:
    vm = s.aws_vm()
    vm["metadataOptions"] = options
    found = s.check(cfg.AWS_IMDSV2, AWS, vm)
    assert len(found) == 1
    for text in expect:
        assert text in found[0].message
    assert len(s.check(cfg.AWS_IMDSV2, LT, launch_template(s, metadataOptions=options))) == 1


def test_imdsv2_hop_limit_as_float_passes(s: SimpleNamespace) -> None:
    vm = s.aws_vm()
    vm["metadataOptions"]["httpPutResponseHopLimit"] = 1.0  # protobuf numbers are doubles
    assert s.check(cfg.AWS_IMDSV2, AWS, vm) == []


# --- 5. VM types -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rtype", "build", "path", "value"),
    [
        (AWS, "aws_vm", ("instanceType",), "m6g.large"),
        (AWS, "aws_vm", ("instanceType",), "x9.unknown"),
        (GCP, "gcp_vm", ("machineType",), "t2a-standard-4"),
        (AZURE, "azure_vm", ("hardwareProfile", "vmSize"), "Standard_D4ps_v5"),
    ],
)
def test_non_x86_or_unknown_type(
    s: SimpleNamespace, rtype: str, build: str, path: tuple[str, ...], value: str
) -> None:
    vm = getattr(s, build)()
    target = vm
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    found = s.check(cfg.VM_TYPE_X86_64, rtype, vm)
    assert len(found) == 1 and f"={value!r} is not an x86_64" in found[0].message


def test_gcp_machine_type_url_and_missing_type(s: SimpleNamespace) -> None:
    vm = s.gcp_vm() | {"machineType": "zones/us-central1-a/machineTypes/n2-standard-4"}
    assert s.check(cfg.VM_TYPE_X86_64, GCP, vm) == []
    vm = s.aws_vm()
    del vm["instanceType"]
    assert "instanceType=None" in s.check(cfg.VM_TYPE_X86_64, AWS, vm)[0].message


def test_allowed_types_from_config_override_catalog(s: SimpleNamespace, data_dir: Any) -> None:
    config = {cfg.VM_TYPE_X86_64: {"allowedVmTypes": {"aws": ["c7i.large"]}}}
    assert len(s.check(cfg.VM_TYPE_X86_64, AWS, s.aws_vm(), config)) == 1
    assert (
        s.check(cfg.VM_TYPE_X86_64, AWS, s.aws_vm() | {"instanceType": "c7i.large"}, config) == []
    )
    (data_dir / "catalog.toml").unlink()
    with pytest.raises(PolicyConfigError, match=r"allowedVmTypes.*catalog\.toml"):
        s.check(cfg.VM_TYPE_X86_64, AWS, s.aws_vm())


def test_catalog_layouts(data_dir: Any) -> None:
    layouts = {
        "tables": '[aws."m5.large"]\narch = "amd64"\n[aws."m6g.large"]\narch = "arm64"\n',
        "array": '[[vm_types]]\nprovider = "aws"\nname = "m5.large"\narchitecture = "x86_64"\n'
        '[[vm_types]]\nprovider = "aws"\nname = "m6g.large"\narchitecture = "arm64"\n',
        "lists": '[aws]\nx86_64 = ["m5.large"]\narm64 = ["m6g.large"]\n',
        "nested": '[providers.aws.vm_types."m5.large"]\narch = "x86_64"\ngpus = 0\n',
    }
    for name, text in layouts.items():
        (data_dir / "catalog.toml").write_text(text)
        assert cfg.allowed_vm_types({})["aws"] == frozenset({"m5.large"}), name
    (data_dir / "catalog.toml").write_text('[aws."m6g.large"]\narch = "arm64"\n')
    with pytest.raises(PolicyConfigError, match="no x86_64 VM types"):
        cfg.allowed_vm_types({})


def test_azure_password_exception_still_needs_password_ssh_off(s: SimpleNamespace) -> None:
    allowed = {cfg.NO_SSH_KEY: {"azureAdminPasswordAllowed": True}}
    vm = s.azure_vm()
    vm["osProfile"]["adminPassword"] = "x"
    vm["osProfile"]["linuxConfiguration"]["disablePasswordAuthentication"] = False
    found = s.check(cfg.NO_SSH_KEY, AZURE, vm, allowed)
    assert len(found) == 1 and "neither sets cloud-config ssh_pwauth: false" in found[0].message
    script = s.user_data("azure") + "systemctl disable --now ssh.service ssh.socket || true\n"
    vm["osProfile"]["customData"] = s.b64(script)
    assert s.check(cfg.NO_SSH_KEY, AZURE, vm, allowed) == []
    vm["osProfile"]["customData"] = s.b64("#cloud-config\nssh_pwauth: false\n")
    assert s.check(cfg.NO_SSH_KEY, AZURE, vm, allowed) == []


def test_generated_catalog_is_the_default(data_dir: Any) -> None:
    """Without a catalog.toml override, the allowed types and GPU counts are the shipped
    data/catalog.sqlite's: every x86_64 type, no arm64 one."""
    shipped = Path(__file__).resolve().parents[2] / "data" / "catalog.sqlite"
    (data_dir / "catalog.toml").unlink()
    shutil.copy(shipped, data_dir / "catalog.sqlite")
    allowed = cfg.allowed_vm_types({})
    assert {"m5.xlarge", "p4d.24xlarge", "m7i.large"} <= allowed["aws"]
    assert "m7g.large" not in allowed["aws"] and "g5g.xlarge" not in allowed["aws"]
    assert "n2-standard-4" in allowed["gcp"] and "t2a-standard-4" not in allowed["gcp"]
    assert "Standard_D4s_v5" in allowed["azure"] and "Standard_D4ps_v5" not in allowed["azure"]
    assert cfg.catalog_gpus("aws", "p4d.24xlarge") == 8
    assert cfg.catalog_gpus("gcp", "a2-highgpu-4g") == 4
    assert cfg.catalog_gpus("aws", "r5.large") is None
