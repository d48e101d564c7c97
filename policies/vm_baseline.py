"""Rules over the pool VMs themselves: ``no-ssh-key``, ``no-cloud-credential``,
``aws-imdsv2``, ``vm-type-x86-64``, and the advisory stack guardrails
``guardrail-vms-per-pool`` and ``guardrail-gpus-per-pool``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pulumi_policy import ReportViolation, ResourceValidationArgs, StackValidationArgs
from pulumi_policy.proxy import UnknownValueError

from policies import config as cfg
from policies import naming
from policies.common import (
    AZURE_VMSS,
    VM_KINDS,
    as_int,
    has_key,
    nonempty,
    report_at,
)
from policies.join_script import pool_identity, user_data_of
from policies.userdata import disables_password_ssh
from policies.wire import NotVerifiableError, as_str_list, get, is_mapping, show

AWS_KEY_PAIR = "aws:ec2/keyPair:KeyPair"
GCP_PROJECT_METADATA = "gcp:compute/projectMetadata:ProjectMetadata"
GCP_PROJECT_METADATA_ITEM = "gcp:compute/projectMetadataItem:ProjectMetadataItem"
AZURE_SSH_PUBLIC_KEY = "azure-native:compute:SshPublicKey"
SSH_METADATA_KEYS = ("ssh-keys", "sshKeys")


# --- 2. SSH keys -------------------------------------------------------------------------------


def _os_profile(props: Any, rtype: str) -> Any:
    return (
        get(props, "virtualMachineProfile", "osProfile")
        if rtype == AZURE_VMSS
        else get(props, "osProfile")
    )


def no_ssh_key(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """Rule 2: no SSH key or key pair can reach a pool VM."""
    props, rtype = args.props, args.resource_type
    kind = VM_KINDS.get(rtype)

    def report(msg: str) -> None:
        report_at(args, report_violation, msg)

    if rtype == AWS_KEY_PAIR:
        report(
            f"{rtype} keyName={show(get(props, 'keyName'))}: no key pair may exist in a pool stack"
        )
    elif rtype == AZURE_SSH_PUBLIC_KEY:
        report(f"{rtype}: no SSH public key resource may exist in a pool stack")
    elif rtype == GCP_PROJECT_METADATA:
        for key in SSH_METADATA_KEYS:
            if has_key(get(props, "metadata"), key):
                report(f"{rtype} metadata.{key} is set: project SSH keys reach every pool VM")
    elif rtype == GCP_PROJECT_METADATA_ITEM:
        if get(props, "key") in SSH_METADATA_KEYS:
            report(f"{rtype} key={show(get(props, 'key'))}: project SSH keys reach every pool VM")
    elif kind and kind.provider == "aws":
        key_name = get(props, "keyName")
        if nonempty(key_name):
            report(f"{rtype} keyName={show(key_name)}: pool VMs carry no SSH key pair")
    elif kind and kind.provider == "gcp":
        metadata = get(props, "metadata")
        for key in SSH_METADATA_KEYS:
            # Presence alone is the violation; the key material is never read or echoed.
            if has_key(metadata, key):
                report(f"{rtype} metadata.{key} is set: pool VMs carry no SSH key")
    elif kind and kind.provider == "azure":
        _azure_ssh(args, props, rtype, report)


def _azure_ssh(
    args: ResourceValidationArgs, props: Any, rtype: str, report: Callable[[str], None]
) -> None:
    os_profile = _os_profile(props, rtype)
    keys = get(os_profile, "linuxConfiguration", "ssh", "publicKeys")
    if nonempty(keys):
        report(
            f"{rtype} osProfile.linuxConfiguration.ssh.publicKeys has {len(keys)} key(s): "
            "pool VMs carry no SSH key"
        )
    if not has_key(os_profile, "adminPassword"):
        return
    disabled = get(os_profile, "linuxConfiguration", "disablePasswordAuthentication")
    if disabled is True:
        return
    where = (
        f"{rtype} osProfile.adminPassword is set with "
        f"linuxConfiguration.disablePasswordAuthentication={show(disabled)}"
    )
    allowed = cfg.bool_setting(
        args.get_config(), cfg.NO_SSH_KEY, "azureAdminPasswordAllowed", True
    )
    if not allowed:
        report(f"{where}: password SSH login must be disabled on pool VMs")
        return
    # Azure refuses a Linux VM with neither a password nor a key. The opt-in exception holds
    # only while the VM itself turns password SSH off at boot.
    texts = [text for _, text in user_data_of(rtype, props)]
    if not any(disables_password_ssh(text) for text in texts):
        report(
            f"{where} and azureAdminPasswordAllowed, but the user data neither sets "
            "cloud-config ssh_pwauth: false nor disables the ssh service"
        )


# --- 3. cloud credentials ---------------------------------------------------------------------


def no_cloud_credential(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """Rule 3: no cloud identity (instance profile, service account, managed identity)."""
    props, rtype = args.props, args.resource_type
    kind = VM_KINDS.get(rtype)
    if kind is None:
        return
    problem: str | None = None
    if kind.provider == "aws":
        profile = get(props, "iamInstanceProfile")
        if is_mapping(profile):
            profile = {k: profile[k] for k in ("arn", "name") if nonempty(get(profile, k))}
        if nonempty(profile):
            problem = f"iamInstanceProfile={show(profile)}"
    elif kind.provider == "gcp":
        email = get(props, "serviceAccount", "email")
        scopes = as_str_list(get(props, "serviceAccount", "scopes"))
        if nonempty(email) or scopes:
            problem = f"serviceAccount.email={show(email)} serviceAccount.scopes={show(scopes)}"
    else:
        identity_type = get(props, "identity", "type")
        assigned = get(props, "identity", "userAssignedIdentities")
        if (identity_type is not None and str(identity_type).lower() != "none") or nonempty(
            assigned
        ):
            problem = f"identity.type={show(identity_type)}"
    if problem:
        report_at(
            args,
            report_violation,
            f"{rtype} {problem}: pool VMs carry no cloud credential",
        )


# --- 4. AWS IMDSv2 ------------------------------------------------------------------------------


def aws_imdsv2(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """Rule 4: IMDSv2 only, and no hop beyond the VM (containers cannot reach the metadata)."""
    kind = VM_KINDS.get(args.resource_type)
    if kind is None or kind.provider != "aws":
        return
    tokens = get(args.props, "metadataOptions", "httpTokens")
    hops = get(args.props, "metadataOptions", "httpPutResponseHopLimit")
    problems = []
    if tokens != "required":
        problems.append(f"metadataOptions.httpTokens={show(tokens)} must be 'required'")
    if as_int(hops) != 1:
        problems.append(f"metadataOptions.httpPutResponseHopLimit={show(hops)} must be 1")
    if problems:
        report_at(args, report_violation, f"{args.resource_type} " + "; ".join(problems))


# --- 5. VM types ------------------------------------------------------------------------------


def vm_type_of(rtype: str, props: Any) -> tuple[str, Any]:
    """(field, value) of the VM type for a VM resource."""
    provider = VM_KINDS[rtype].provider
    if provider == "aws":
        return "instanceType", get(props, "instanceType")
    if provider == "gcp":
        value = get(props, "machineType")
        # Instances may name the type by URL (zones/<z>/machineTypes/<type>).
        return "machineType", value.rsplit("/", 1)[-1] if isinstance(value, str) else value
    if rtype == AZURE_VMSS:
        return "sku.name", get(props, "sku", "name")
    return "hardwareProfile.vmSize", get(props, "hardwareProfile", "vmSize")


def vm_type_x86_64(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """Rule 5: the agent runs on x86_64 only, so the type must be an x86_64 catalog entry."""
    kind = VM_KINDS.get(args.resource_type)
    if kind is None:
        return
    field, value = vm_type_of(args.resource_type, args.props)
    allowed = cfg.allowed_vm_types(args.get_config())[kind.provider]
    if not isinstance(value, str) or value not in allowed:
        report_at(
            args,
            report_violation,
            f"{args.resource_type} {field}={show(value)} is not an x86_64 {kind.provider} VM type "
            f"of the catalog ({len(allowed)} allowed)",
        )


# --- advisory guardrails (whole stack) ---------------------------------------------------------


PoolVms = dict[str, list[tuple[str, str, str]]]


def _pool_vms(args: StackValidationArgs) -> tuple[PoolVms, list[UnknownValueError]]:
    """pool id -> [(urn, provider, vm type)] for VM instances (templates create none)."""
    pools: PoolVms = {}
    deferred: list[UnknownValueError] = []
    for resource in args.resources:
        kind = VM_KINDS.get(resource.resource_type)
        if kind is None or kind.template:
            continue
        try:
            pool = pool_identity(resource.resource_type, resource.props).get(naming.NODE_POOL)
            _, vm_type = vm_type_of(resource.resource_type, resource.props)
        except UnknownValueError as exc:
            deferred.append(exc)
            continue
        pools.setdefault(pool or "<untagged>", []).append(
            (resource.urn, kind.provider, str(vm_type))
        )
    return pools, deferred


def _raise_deferred(deferred: list[UnknownValueError]) -> None:
    # VMs whose tags/type could not be read were left out of the counts: say so.
    if deferred:
        raise NotVerifiableError(
            f"{len(deferred)} VM(s) not counted: " + "; ".join(e.message for e in deferred)
        )


def vms_per_pool(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    limit = cfg.int_setting(
        args.get_config(), cfg.VM_COUNT_GUARDRAIL, "maxVmsPerPool", cfg.DEFAULT_MAX_VMS_PER_POOL
    )
    pools, deferred = _pool_vms(args)
    for pool, vms in sorted(pools.items()):
        if len(vms) > limit:
            report_violation(
                f"pool {show(pool)} has {len(vms)} VMs, above maxVmsPerPool={limit}", None
            )
    _raise_deferred(deferred)


def gpus_per_pool(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    config = args.get_config()
    limit = cfg.int_setting(
        config, cfg.GPU_COUNT_GUARDRAIL, "maxGpusPerPool", cfg.DEFAULT_MAX_GPUS_PER_POOL
    )
    configured = cfg.gpu_pools(config, cfg.GPU_COUNT_GUARDRAIL)
    pools, deferred = _pool_vms(args)
    for pool, vms in sorted(pools.items()):
        total = 0
        for _, provider, vm_type in vms:
            per_vm = configured.get(pool)
            if per_vm is None:
                per_vm = cfg.catalog_gpus(provider, vm_type) or 0
            total += per_vm
        if total > limit:
            report_violation(
                f"pool {show(pool)} has {total} GPUs over {len(vms)} VMs, above "
                f"maxGpusPerPool={limit}",
                None,
            )
    _raise_deferred(deferred)
