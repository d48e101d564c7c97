"""The node-pool policy rules: pure validate functions over wire-format (camelCase) inputs.

Every rule has the pulumi-policy signature ``(args, report_violation)``. The real pack
(``__main__.py``) and the offline check (``policies.offline.check_resources``) run the very
same functions, built by ``build_policies``.

Scope decision: every VM resource in the stack is treated as a pool VM (AWS instances, spot
requests, launch templates and configurations; GCP instances and instance templates; Azure
VMs and scale sets), whether or not it carries the ``anycloud.sh/node-pool`` tag. A VM that
lacks the tag is itself a violation of ``pool-labels-and-taint``; it is not exempt from the
other rules.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from fractions import Fraction
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    Policy,
    PolicyConfigSchema,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.proxy import UnknownValueError

from policies import config as cfg
from policies import naming
from policies.cost_allocation import cost_allocation_tags
from policies.userdata import (
    decode_base64_text,
    decode_maybe_base64,
    disables_password_ssh,
    find_k3s_checksum,
    find_node_registration,
)
from policies.wire import (
    NotVerifiableError,
    as_list,
    as_str_list,
    get,
    is_mapping,
    run_checks,
    show,
)

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(UTC)


# --- resource kinds -----------------------------------------------------------------------------


@dataclass(frozen=True)
class VmKind:
    provider: str
    # Templates describe VMs created elsewhere: no per-VM attempt tag can be required on them.
    template: bool


AWS_INSTANCE = "aws:ec2/instance:Instance"
AWS_SPOT = "aws:ec2/spotInstanceRequest:SpotInstanceRequest"
AWS_LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
AWS_LAUNCH_CONFIG = "aws:ec2/launchConfiguration:LaunchConfiguration"
GCP_INSTANCE = "gcp:compute/instance:Instance"
GCP_INSTANCE_FROM_TEMPLATE = "gcp:compute/instanceFromTemplate:InstanceFromTemplate"
GCP_TEMPLATE = "gcp:compute/instanceTemplate:InstanceTemplate"
GCP_REGION_TEMPLATE = "gcp:compute/regionInstanceTemplate:RegionInstanceTemplate"
AZURE_VM = "azure-native:compute:VirtualMachine"
AZURE_VMSS = "azure-native:compute:VirtualMachineScaleSet"

VM_KINDS: dict[str, VmKind] = {
    AWS_INSTANCE: VmKind("aws", False),
    AWS_SPOT: VmKind("aws", False),
    AWS_LAUNCH_TEMPLATE: VmKind("aws", True),
    AWS_LAUNCH_CONFIG: VmKind("aws", True),
    GCP_INSTANCE: VmKind("gcp", False),
    GCP_INSTANCE_FROM_TEMPLATE: VmKind("gcp", False),
    GCP_TEMPLATE: VmKind("gcp", True),
    GCP_REGION_TEMPLATE: VmKind("gcp", True),
    AZURE_VM: VmKind("azure", False),
    AZURE_VMSS: VmKind("azure", True),
}

AWS_SECURITY_GROUP = "aws:ec2/securityGroup:SecurityGroup"
AWS_SECURITY_GROUP_RULE = "aws:ec2/securityGroupRule:SecurityGroupRule"
AWS_VPC_INGRESS_RULE = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
AWS_KEY_PAIR = "aws:ec2/keyPair:KeyPair"
GCP_FIREWALL = "gcp:compute/firewall:Firewall"
GCP_PROJECT_METADATA = "gcp:compute/projectMetadata:ProjectMetadata"
GCP_PROJECT_METADATA_ITEM = "gcp:compute/projectMetadataItem:ProjectMetadataItem"
AZURE_NSG = "azure-native:network:NetworkSecurityGroup"
AZURE_SECURITY_RULE = "azure-native:network:SecurityRule"
AZURE_SSH_PUBLIC_KEY = "azure-native:compute:SshPublicKey"
K8S_SECRET = "kubernetes:core/v1:Secret"
K8S_DAEMONSET = "kubernetes:apps/v1:DaemonSet"

# Where each workload kind keeps its pod spec.
POD_SPEC_PATHS: dict[str, tuple[str, ...]] = {
    "kubernetes:core/v1:Pod": ("spec",),
    "kubernetes:apps/v1:Deployment": ("spec", "template", "spec"),
    "kubernetes:apps/v1:StatefulSet": ("spec", "template", "spec"),
    "kubernetes:apps/v1:ReplicaSet": ("spec", "template", "spec"),
    K8S_DAEMONSET: ("spec", "template", "spec"),
    "kubernetes:batch/v1:Job": ("spec", "template", "spec"),
    "kubernetes:batch/v1:CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
}

MANAGED_BY, MANAGER = "app.kubernetes.io/managed-by", "anycloud"
BOOTSTRAP_TOKEN_TYPE = "bootstrap.kubernetes.io/token"
GPU_RESOURCE = "nvidia.com/gpu"
NVIDIA_RUNTIME_CLASS = "nvidia"
SSH_METADATA_KEYS = ("ssh-keys", "sshKeys")
_DIGEST_IMAGE = re.compile(r"@sha256:[0-9a-f]{64}$")


def _report(args: ResourceValidationArgs, report_violation: ReportViolation, message: str) -> None:
    report_violation(message, args.urn)


def _int(value: Any) -> int | None:
    """A whole number as int (protobuf sends numbers as doubles), else None."""
    if isinstance(value, bool):
        return None
    try:
        as_float = float(value)
    except (TypeError, ValueError):
        return None
    return int(as_float) if math.isfinite(as_float) and as_float.is_integer() else None


def _has_key(mapping: Any, key: str) -> bool:
    # Iterating keys never reads a value, so presence checks work on redacted/unknown values.
    return is_mapping(mapping) and any(k == key for k in mapping)


def _nonempty(value: Any) -> bool:
    if value is None or value == "" or value is False:
        return False
    if is_mapping(value) or isinstance(value, list | tuple):
        return len(value) > 0
    try:
        return len(value) > 0  # proxied lists
    except TypeError:
        return True


# --- 1. ingress ---------------------------------------------------------------------------------


class _LazyRanges:
    """Cloudflare ranges resolved on first use: a stack with no allow rule needs none."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self._config = config
        self._ranges: cfg.CloudflareRanges | None = None

    def contains(self, cidr: str) -> bool:
        if self._ranges is None:
            self._ranges = cfg.cloudflare_ranges(self._config)
        return self._ranges.contains(cidr)


def _source_problems(field: str, cidrs: list[str], ranges: _LazyRanges) -> list[str]:
    return [
        f"{field} {show(cidr)} is not within Cloudflare's published ranges"
        for cidr in cidrs
        if not ranges.contains(cidr)
    ]


def _aws_ingress_problems(rule: Any, ranges: _LazyRanges, protocol_key: str) -> list[str]:
    problems: list[str] = []
    protocol = str(get(rule, protocol_key) or "").lower()
    if protocol not in ("tcp", "6"):
        problems.append(f"{protocol_key}={show(protocol)} is not tcp")
    from_port, to_port = get(rule, "fromPort"), get(rule, "toPort")
    if _int(from_port) != 80 or _int(to_port) != 80:
        problems.append(f"fromPort={show(from_port)} toPort={show(to_port)} is not exactly port 80")
    for peer in (
        "securityGroups",
        "self",
        "prefixListIds",
        "sourceSecurityGroupId",
        "referencedSecurityGroupId",
        "prefixListId",
    ):
        value = get(rule, peer)
        if _nonempty(value):
            problems.append(
                f"{peer}={show(value)} admits peers; only Cloudflare CIDRs may be sources"
            )
    for key in ("cidrBlocks", "ipv6CidrBlocks", "cidrIpv4", "cidrIpv6"):
        problems += _source_problems(key, as_str_list(get(rule, key)), ranges)
    return problems


def _gcp_firewall_problems(props: Any, ranges: _LazyRanges) -> list[str]:
    problems: list[str] = []
    for i, allow in enumerate(as_list(get(props, "allows"))):
        protocol = str(get(allow, "protocol") or "").lower()
        ports = as_str_list(get(allow, "ports"))
        if protocol not in ("tcp", "6"):
            problems.append(f"allows[{i}].protocol={show(protocol)} is not tcp")
        if not ports or any(p not in ("80", "80-80") for p in ports):
            problems.append(f"allows[{i}].ports={show(ports)} is not exactly ['80']")
    for peer in ("sourceTags", "sourceServiceAccounts"):
        value = as_str_list(get(props, peer))
        if value:
            problems.append(
                f"{peer}={show(value)} admits peers; only Cloudflare CIDRs may be sources"
            )
    source_ranges = as_str_list(get(props, "sourceRanges"))
    if not source_ranges and not problems:
        problems.append("sourceRanges is empty, which GCP treats as 0.0.0.0/0")
    problems += _source_problems("sourceRanges", source_ranges, ranges)
    return problems


def _azure_rule_problems(rule: Any, ranges: _LazyRanges) -> list[str]:
    # A missing direction/access is treated as the permissive value: fail closed.
    direction = str(get(rule, "direction") or "Inbound").lower()
    access = str(get(rule, "access") or "Allow").lower()
    if direction != "inbound" or access != "allow":
        return []
    problems: list[str] = []
    protocol = str(get(rule, "protocol") or "*")
    if protocol.lower() != "tcp":
        problems.append(f"protocol={show(protocol)} is not Tcp")
    ports = as_str_list(get(rule, "destinationPortRange")) + as_str_list(
        get(rule, "destinationPortRanges")
    )
    if not ports or any(p not in ("80", "80-80") for p in ports):
        problems.append(f"destinationPortRange(s)={show(ports)} is not exactly 80")
    asgs = get(rule, "sourceApplicationSecurityGroups")
    if _nonempty(asgs):
        problems.append(
            "sourceApplicationSecurityGroups admits peers; only Cloudflare CIDRs may be sources"
        )
    sources = as_str_list(get(rule, "sourceAddressPrefix")) + as_str_list(
        get(rule, "sourceAddressPrefixes")
    )
    if not sources and not _nonempty(asgs):
        sources = ["*"]
    problems += _source_problems("sourceAddressPrefix(es)", sources, ranges)
    return problems


def no_public_ingress(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """Rule 1: nothing reaches a pool VM except TCP 80 from Cloudflare's ranges."""
    props, rtype = args.props, args.resource_type
    ranges = _LazyRanges(args.get_config())
    found: list[tuple[str, list[str]]] = []
    if rtype == AWS_SECURITY_GROUP:
        for i, rule in enumerate(as_list(get(props, "ingress"))):
            found.append((f"ingress[{i}]", _aws_ingress_problems(rule, ranges, "protocol")))
    elif rtype == AWS_SECURITY_GROUP_RULE:
        if str(get(props, "type") or "").lower() == "ingress":
            found.append(("type='ingress'", _aws_ingress_problems(props, ranges, "protocol")))
    elif rtype == AWS_VPC_INGRESS_RULE:
        found.append(("ingress rule", _aws_ingress_problems(props, ranges, "ipProtocol")))
    elif rtype == GCP_FIREWALL:
        direction = str(get(props, "direction") or "INGRESS").upper()
        if direction == "INGRESS" and as_list(get(props, "allows")):
            found.append(("direction='INGRESS' allows", _gcp_firewall_problems(props, ranges)))
    elif rtype == AZURE_NSG:
        for i, rule in enumerate(as_list(get(props, "securityRules"))):
            name = get(rule, "name") or i
            found.append((f"securityRules[{show(name)}]", _azure_rule_problems(rule, ranges)))
    elif rtype == AZURE_SECURITY_RULE:
        found.append(("Inbound Allow rule", _azure_rule_problems(props, ranges)))
    for where, problems in found:
        if problems:
            _report(
                args,
                report_violation,
                f"{rtype} {where}: {'; '.join(problems)}. Pool VMs admit only TCP 80 from "
                "Cloudflare's ranges (a deny rule is always fine).",
            )


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
        _report(args, report_violation, msg)

    if rtype == AWS_KEY_PAIR:
        report(
            f"{rtype} keyName={show(get(props, 'keyName'))}: no key pair may exist in a pool stack"
        )
    elif rtype == AZURE_SSH_PUBLIC_KEY:
        report(f"{rtype}: no SSH public key resource may exist in a pool stack")
    elif rtype == GCP_PROJECT_METADATA:
        for key in SSH_METADATA_KEYS:
            if _has_key(get(props, "metadata"), key):
                report(f"{rtype} metadata.{key} is set: project SSH keys reach every pool VM")
    elif rtype == GCP_PROJECT_METADATA_ITEM:
        if get(props, "key") in SSH_METADATA_KEYS:
            report(f"{rtype} key={show(get(props, 'key'))}: project SSH keys reach every pool VM")
    elif kind and kind.provider == "aws":
        key_name = get(props, "keyName")
        if _nonempty(key_name):
            report(f"{rtype} keyName={show(key_name)}: pool VMs carry no SSH key pair")
    elif kind and kind.provider == "gcp":
        metadata = get(props, "metadata")
        for key in SSH_METADATA_KEYS:
            # Presence alone is the violation; the key material is never read or echoed.
            if _has_key(metadata, key):
                report(f"{rtype} metadata.{key} is set: pool VMs carry no SSH key")
    elif kind and kind.provider == "azure":
        _azure_ssh(args, props, rtype, report)


def _azure_ssh(
    args: ResourceValidationArgs, props: Any, rtype: str, report: Callable[[str], None]
) -> None:
    os_profile = _os_profile(props, rtype)
    keys = get(os_profile, "linuxConfiguration", "ssh", "publicKeys")
    if _nonempty(keys):
        report(
            f"{rtype} osProfile.linuxConfiguration.ssh.publicKeys has {len(keys)} key(s): "
            "pool VMs carry no SSH key"
        )
    if not _has_key(os_profile, "adminPassword"):
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
            profile = {k: profile[k] for k in ("arn", "name") if _nonempty(get(profile, k))}
        if _nonempty(profile):
            problem = f"iamInstanceProfile={show(profile)}"
    elif kind.provider == "gcp":
        email = get(props, "serviceAccount", "email")
        scopes = as_str_list(get(props, "serviceAccount", "scopes"))
        if _nonempty(email) or scopes:
            problem = f"serviceAccount.email={show(email)} serviceAccount.scopes={show(scopes)}"
    else:
        identity_type = get(props, "identity", "type")
        assigned = get(props, "identity", "userAssignedIdentities")
        if (identity_type is not None and str(identity_type).lower() != "none") or _nonempty(
            assigned
        ):
            problem = f"identity.type={show(identity_type)}"
    if problem:
        _report(
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
    if _int(hops) != 1:
        problems.append(f"metadataOptions.httpPutResponseHopLimit={show(hops)} must be 1")
    if problems:
        _report(args, report_violation, f"{args.resource_type} " + "; ".join(problems))


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
        _report(
            args,
            report_violation,
            f"{args.resource_type} {field}={show(value)} is not an x86_64 {kind.provider} VM type "
            f"of the catalog ({len(allowed)} allowed)",
        )


# --- 6. DaemonSet images -----------------------------------------------------------------------


def daemonset_image_digest(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """Rule 6: DaemonSet images are pinned by digest, so a Node never runs a moved tag."""
    if args.resource_type != K8S_DAEMONSET:
        return
    pod = get(args.props, "spec", "template", "spec")
    for group in ("initContainers", "containers", "ephemeralContainers"):
        for i, container in enumerate(as_list(get(pod, group))):
            image = get(container, "image")
            if not isinstance(image, str) or not _DIGEST_IMAGE.search(image):
                _report(
                    args,
                    report_violation,
                    f"{args.resource_type} spec.template.spec.{group}[{i}].image={show(image)} "
                    "is not pinned by digest (@sha256:<64 hex>)",
                )


# --- 7 and 8. user data -------------------------------------------------------------------------


def _decode(field: str, value: Any, encoding: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{field} is {type(value).__name__}, not a string")
    if encoding == "base64":
        try:
            text = decode_base64_text(value)
        except ValueError as exc:
            raise ValueError(f"{field}: {exc}") from exc
    elif encoding == "maybe-base64":
        text = decode_maybe_base64(value)
    else:
        text = value
    return text


def user_data_of(rtype: str, props: Any) -> list[tuple[str, str]]:
    """(field, decoded text) of every user-data field set on a VM resource.

    Reading may raise UnknownValueError (preview) or RedactedValueError (offline secret).
    A field that cannot be decoded raises ValueError naming it.
    """
    provider = VM_KINDS[rtype].provider
    fields: list[tuple[str, tuple[str, ...], str]]
    if rtype == AWS_LAUNCH_TEMPLATE:
        fields = [("userData", ("userData",), "base64")]
    elif provider == "aws":
        fields = [
            ("userData", ("userData",), "maybe-base64"),
            ("userDataBase64", ("userDataBase64",), "base64"),
        ]
    elif provider == "gcp":
        fields = [
            ("metadata.user-data", ("metadata", "user-data"), "plain"),
            ("metadata.startup-script", ("metadata", "startup-script"), "plain"),
            ("metadataStartupScript", ("metadataStartupScript",), "plain"),
        ]
    elif rtype == AZURE_VMSS:
        fields = [
            (
                "virtualMachineProfile.osProfile.customData",
                ("virtualMachineProfile", "osProfile", "customData"),
                "base64",
            ),
            ("virtualMachineProfile.userData", ("virtualMachineProfile", "userData"), "base64"),
        ]
    else:
        fields = [
            ("osProfile.customData", ("osProfile", "customData"), "base64"),
            ("userData", ("userData",), "base64"),
        ]
    found = []
    for field, path, encoding in fields:
        value = get(props, *path)
        if value is not None and value != "":
            found.append((field, _decode(field, value, encoding)))
    return found


def k3s_checksum_pinned(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """Rule 7: the user data checks the k3s binary against a literal SHA-256.

    Secret user data is plain to the real pack (the SDK strips the secret marker); unknown
    user data during preview defers the rule to ``up`` (advisory note at preview).
    """
    rtype = args.resource_type
    if rtype not in VM_KINDS:
        return
    try:
        texts = user_data_of(rtype, args.props)
    except ValueError as exc:
        _report(args, report_violation, f"{rtype} {exc}: the k3s checksum cannot be verified")
        return
    if not texts:
        _report(
            args,
            report_violation,
            f"{rtype} has no user data: nothing verifies the k3s agent download",
        )
        return
    fields = ", ".join(f for f, _ in texts)
    findings = [find_k3s_checksum(text) for _, text in texts]
    if any(f.install_script_downloads for f in findings):
        _report(
            args,
            report_violation,
            f"{rtype} {fields}: runs the get.k3s.io install script, which checks k3s against a "
            "checksum downloaded beside it; download k3s yourself, verify it against a pinned "
            "SHA-256, then install with INSTALL_K3S_SKIP_DOWNLOAD=true",
        )
    if not any(f.pinned for f in findings):
        _report(
            args,
            report_violation,
            f"{rtype} {fields}: no sha256 check of the k3s binary against a literal 64-hex "
            "checksum (e.g. echo '<sha256>  /usr/local/bin/k3s' | sha256sum -c -)",
        )


def _pool_tags(rtype: str, props: Any) -> tuple[str, Any]:
    """(field, mapping) holding the tags/labels that VMs of this resource carry."""
    provider = VM_KINDS[rtype].provider
    if rtype == AWS_LAUNCH_TEMPLATE:
        for i, spec in enumerate(as_list(get(props, "tagSpecifications"))):
            if get(spec, "resourceType") == "instance":
                return f"tagSpecifications[{i}].tags", get(spec, "tags")
        return "tagSpecifications[resourceType='instance'].tags", None
    if rtype == AWS_LAUNCH_CONFIG:
        return "tags (launch configurations cannot tag instances)", None
    if provider == "gcp":
        return "labels", get(props, "labels")
    return "tags", get(props, "tags")


def pool_identity(rtype: str, props: Any) -> dict[str, str]:
    """Canonical anycloud.sh key -> value found on a VM resource (GCP keys un-mapped)."""
    provider = VM_KINDS[rtype].provider
    _, tags = _pool_tags(rtype, props)
    found: dict[str, str] = {}
    for key in naming.POOL_TAG_KEYS:
        for spelling in naming.accepted_keys(provider, key):
            value = get(tags, spelling)
            if isinstance(value, str) and value:
                found[key] = value
                break
    return found


def pool_labels_and_taint(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """Rule 8: VMs carry the anycloud.sh tags, and their user data registers the Node with
    the pool taint and labels that match them."""
    rtype = args.resource_type
    kind = VM_KINDS.get(rtype)
    if kind is None:
        return
    required = naming.POOL_TAG_KEYS if not kind.template else (naming.CLUSTER, naming.NODE_POOL)
    identity: dict[str, str] = {}

    def tags() -> None:
        field, _ = _pool_tags(rtype, args.props)
        identity.update(pool_identity(rtype, args.props))
        missing = [k for k in required if k not in identity]
        if missing:
            spelled = [naming.accepted_keys(kind.provider, k)[0] for k in missing]
            _report(
                args,
                report_violation,
                f"{rtype} {field} lacks {show(spelled)}: every VM in a pool stack is a pool VM "
                "and carries anycloud.sh/cluster, anycloud.sh/node-pool and anycloud.sh/attempt",
            )

    def user_data() -> None:
        try:
            texts = user_data_of(rtype, args.props)
        except ValueError as exc:
            _report(args, report_violation, f"{rtype} {exc}: the node taint cannot be verified")
            return
        text = "\n".join(t for _, t in texts)
        fields = ", ".join(f for f, _ in texts) or "user data"
        reg = find_node_registration(text)
        pool = identity.get(naming.NODE_POOL)
        normalize = naming.gcp_label_value if kind.provider == "gcp" else (lambda v: v)
        taints = {
            (k, v, e) for k, v, e in reg.taints if k == naming.NODE_POOL and e == "NoSchedule"
        }
        if not taints or (pool and all(normalize(v) != pool for _, v, _ in taints)):
            _report(
                args,
                report_violation,
                f"{rtype} {fields}: no node taint {naming.NODE_POOL}={pool or '<pool-id>'}"
                ":NoSchedule",
            )
        expected = {naming.PROVIDER: kind.provider}
        for key in required:
            expected[key] = identity.get(key, "")
        for key, value in expected.items():
            seen = reg.labels.get(key, set())
            if not seen or (value and all(normalize(v) != value for v in seen)):
                _report(
                    args,
                    report_violation,
                    f"{rtype} {fields}: no node label {key}={value or '<value>'} "
                    f"(found {show(sorted(seen))})",
                )

    run_checks([tags, user_data])


# --- 9. GPU workloads ---------------------------------------------------------------------------

_QUANTITY = re.compile(r"^([+-]?[0-9.]+)([a-zA-Z]*)$")
_SUFFIX = {
    "": Fraction(1),
    "m": Fraction(1, 1000),
    "k": Fraction(1000),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "Ki": Fraction(1024),
    "Mi": Fraction(1024**2),
}


def parse_quantity(value: Any) -> Fraction:
    """A Kubernetes quantity (the subset GPUs use) as an exact fraction."""
    if isinstance(value, bool):
        raise ValueError(f"{show(value)} is not a quantity")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{show(value)} is not a quantity")
        return Fraction(value).limit_denominator(1000)
    m = _QUANTITY.match(str(value).strip())
    if not m or m.group(2) not in _SUFFIX:
        raise ValueError(f"{show(value)} is not a quantity")
    try:
        return Fraction(m.group(1)) * _SUFFIX[m.group(2)]
    except ValueError as exc:
        raise ValueError(f"{show(value)} is not a quantity") from exc


def container_gpus(container: Any) -> tuple[Fraction, list[str]]:
    """GPUs one container asks for (limits, else requests) and what is wrong with them."""
    problems: list[str] = []
    limit = get(container, "resources", "limits", GPU_RESOURCE)
    request = get(container, "resources", "requests", GPU_RESOURCE)
    values: dict[str, Fraction] = {}
    for field, raw in (("limits", limit), ("requests", request)):
        if raw is None:
            continue
        try:
            values[field] = parse_quantity(raw)
        except ValueError as exc:
            problems.append(f"resources.{field}[{show(GPU_RESOURCE)}]: {exc}")
    if "limits" in values and "requests" in values and values["limits"] != values["requests"]:
        problems.append(
            f"resources.requests[{show(GPU_RESOURCE)}]={show(request)} "
            f"differs from limits={show(limit)}"
        )
    amount = values.get("limits", values.get("requests", Fraction(0)))
    if amount.denominator != 1 or amount < 0:
        problems.append(
            f"{GPU_RESOURCE}={show(limit if limit is not None else request)} is not whole"
        )
    return amount, problems


def effective_gpu_request(init: list[Fraction], regular: list[Fraction]) -> Fraction:
    """What the scheduler reserves: the larger of the biggest init container and the sum of
    the regular containers (init containers run one at a time, before the others)."""
    return max(max(init, default=Fraction(0)), sum(regular, Fraction(0)))


def target_pools(pod_spec: Any) -> set[str]:
    """Pool ids the pod spec requires, by nodeSelector or required node affinity."""
    pools: set[str] = set()
    selected = get(pod_spec, "nodeSelector", naming.NODE_POOL)
    if isinstance(selected, str):
        pools.add(selected)
    terms = get(
        pod_spec,
        "affinity",
        "nodeAffinity",
        "requiredDuringSchedulingIgnoredDuringExecution",
        "nodeSelectorTerms",
    )
    for term in as_list(terms):
        for expr in as_list(get(term, "matchExpressions")):
            if get(expr, "key") == naming.NODE_POOL and get(expr, "operator") == "In":
                pools.update(as_str_list(get(expr, "values")))
    return pools


def gpu_workload_requests(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """Rule 9: work on a GPU pool asks for whole GPUs (at most one Node's) under the nvidia
    runtime; work on a CPU pool asks for none."""
    path = POD_SPEC_PATHS.get(args.resource_type)
    if path is None:
        return
    if (
        args.resource_type == K8S_DAEMONSET
        and get(args.props, "metadata", "labels", MANAGED_BY) == MANAGER
    ):
        # Our own add-on DaemonSets (device plugin, ingress) serve the pool, they are not work.
        return
    pod = get(args.props, *path)
    pools = target_pools(pod)
    if not pools:
        return
    gpu_pools = cfg.gpu_pools(args.get_config(), cfg.GPU_WORKLOAD_REQUESTS)
    where = ".".join(path)
    problems: list[str] = []
    amounts: dict[str, list[Fraction]] = {"initContainers": [], "containers": []}
    for group in amounts:
        for i, container in enumerate(as_list(get(pod, group))):
            amount, issues = container_gpus(container)
            amounts[group].append(amount)
            problems += [f"{where}.{group}[{i}].{issue}" for issue in issues]
    total = effective_gpu_request(amounts["initContainers"], amounts["containers"])
    for pool in sorted(pools):
        per_node = gpu_pools.get(pool)
        if per_node is None:
            if total != 0:
                problems.append(
                    f"pool {show(pool)} is a CPU pool but the pod requests {GPU_RESOURCE}={total}"
                )
            continue
        if total <= 0 or total.denominator != 1 or total > per_node:
            problems.append(
                f"pool {show(pool)} is a GPU pool: effective {GPU_RESOURCE} "
                f"request={total} must be "
                f"a whole number from 1 to {per_node} (one Node's GPUs)"
            )
        runtime = get(pod, "runtimeClassName")
        if runtime != NVIDIA_RUNTIME_CLASS:
            problems.append(
                f"pool {show(pool)} is a GPU pool: {where}.runtimeClassName={show(runtime)} "
                f"must be {show(NVIDIA_RUNTIME_CLASS)}"
            )
    for problem in problems:
        _report(args, report_violation, f"{args.resource_type} {problem}")


# --- 10. bootstrap tokens -----------------------------------------------------------------------


def _parse_rfc3339(value: str) -> datetime:
    parsed = datetime.fromisoformat(value.strip().replace("z", "Z"))
    if parsed.tzinfo is None:
        raise ValueError("has no time zone")
    return parsed


def make_bootstrap_token_rule(
    clock: Clock = utc_now,
) -> Callable[[ResourceValidationArgs, ReportViolation], None]:
    def bootstrap_token(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
        """Rule 10: bootstrap tokens expire within the max TTL and are stored only as secrets.

        Secret-ness cannot be seen in ``props`` (the SDK strips it), so the engine-visible
        guarantee is checked: ``additional_secret_outputs`` covers ``stringData``/``data``
        (or, offline, each key's dotted path), which makes the state encrypt them.
        """
        if args.resource_type != K8S_SECRET or get(args.props, "type") != BOOTSTRAP_TOKEN_TYPE:
            return
        secret_outputs = set(args.opts.additional_secret_outputs or [])
        ttl = cfg.int_setting(
            args.get_config(),
            cfg.BOOTSTRAP_TOKEN,
            "maxTokenTtlMinutes",
            cfg.DEFAULT_MAX_TOKEN_TTL_MINUTES,
        )

        def secretness() -> None:
            for top in ("stringData", "data"):
                if not _has_key(args.props, top) or top in secret_outputs:
                    continue
                block = get(args.props, top)
                keys = [str(k) for k in block] if is_mapping(block) else []
                plain_keys = [k for k in keys if f"{top}.{k}" not in secret_outputs] or [top]
                _report(
                    args,
                    report_violation,
                    f"{args.resource_type} {top} {show(plain_keys)} not secret: "
                    "a bootstrap token must "
                    f"only be stored as a secret (additional_secret_outputs=['{top}'])",
                )

        def expiration() -> None:
            raw = get(args.props, "stringData", "expiration")
            field = "stringData.expiration"
            if raw is None and get(args.props, "data", "expiration") is not None:
                field = "data.expiration"
                try:
                    raw = base64.b64decode(str(get(args.props, "data", "expiration"))).decode()
                except (binascii.Error, UnicodeDecodeError):
                    raw = "<not base64>"
            if not isinstance(raw, str) or not raw:
                _report(
                    args,
                    report_violation,
                    f"{args.resource_type} {field} is missing: a bootstrap token without an "
                    f"expiration never expires (max TTL {ttl} min)",
                )
                return
            try:
                expires = _parse_rfc3339(raw)
            except ValueError as exc:
                _report(
                    args,
                    report_violation,
                    f"{args.resource_type} {field}={show(raw)} is not an RFC3339 time: {exc}",
                )
                return
            latest = clock() + timedelta(minutes=ttl)
            if expires > latest:
                _report(
                    args,
                    report_violation,
                    f"{args.resource_type} {field}={show(raw)} is later than now + {ttl} min "
                    f"({latest.isoformat(timespec='seconds')})",
                )

        run_checks([secretness, expiration])

    return bootstrap_token


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


# --- the pack ----------------------------------------------------------------------------------

_DESCRIPTIONS: dict[str, str] = {
    cfg.NO_PUBLIC_INGRESS: "No ingress to pool VMs except TCP 80 from Cloudflare's ranges.",
    cfg.NO_SSH_KEY: "No SSH key, key pair or password login on pool VMs.",
    cfg.NO_CLOUD_CREDENTIAL: "No cloud credential (instance profile, service account, "
    "managed identity) on pool VMs.",
    cfg.AWS_IMDSV2: "AWS pool VMs require IMDSv2 tokens with a hop limit of 1.",
    cfg.VM_TYPE_X86_64: "Pool VM types are x86_64 types from the catalog.",
    cfg.DAEMONSET_IMAGE_DIGEST: "DaemonSet images are pinned by digest.",
    cfg.K3S_CHECKSUM_PINNED: "User data verifies the k3s binary against a pinned SHA-256.",
    cfg.POOL_LABELS_AND_TAINT: "Pool VMs carry the anycloud.sh tags, node labels and pool taint.",
    cfg.GPU_WORKLOAD_REQUESTS: "Work on a GPU pool requests whole GPUs under the nvidia runtime; "
    "work on a CPU pool requests none.",
    cfg.BOOTSTRAP_TOKEN: "Bootstrap tokens expire within the maximum TTL and are stored as "
    "secrets.",
    cfg.COST_ALLOCATION_TAGS: "Every billable resource of a pool carries anycloud.sh/cluster and "
    "anycloud.sh/node-pool, so its cost is attributed to the pool.",
    cfg.VM_COUNT_GUARDRAIL: "Advisory: VMs per pool stay under the configured threshold.",
    cfg.GPU_COUNT_GUARDRAIL: "Advisory: GPUs per pool stay under the configured threshold.",
}


def build_policies(clock: Clock = utc_now) -> list[Policy]:
    """Every policy of the pack, with its default enforcement level and config schema."""
    resource_rules: dict[str, Callable[[ResourceValidationArgs, ReportViolation], None]] = {
        cfg.NO_PUBLIC_INGRESS: no_public_ingress,
        cfg.NO_SSH_KEY: no_ssh_key,
        cfg.NO_CLOUD_CREDENTIAL: no_cloud_credential,
        cfg.AWS_IMDSV2: aws_imdsv2,
        cfg.VM_TYPE_X86_64: vm_type_x86_64,
        cfg.DAEMONSET_IMAGE_DIGEST: daemonset_image_digest,
        cfg.K3S_CHECKSUM_PINNED: k3s_checksum_pinned,
        cfg.POOL_LABELS_AND_TAINT: pool_labels_and_taint,
        cfg.GPU_WORKLOAD_REQUESTS: gpu_workload_requests,
        cfg.BOOTSTRAP_TOKEN: make_bootstrap_token_rule(clock),
        cfg.COST_ALLOCATION_TAGS: cost_allocation_tags,
    }
    stack_rules: dict[str, Callable[[StackValidationArgs, ReportViolation], None]] = {
        cfg.VM_COUNT_GUARDRAIL: vms_per_pool,
        cfg.GPU_COUNT_GUARDRAIL: gpus_per_pool,
    }

    def schema(name: str) -> PolicyConfigSchema | None:
        props = cfg.CONFIG_SCHEMAS.get(name)
        return PolicyConfigSchema(properties=props) if props else None

    def level(name: str) -> EnforcementLevel:
        return EnforcementLevel(cfg.DEFAULT_LEVELS[name])

    policies: list[Policy] = [
        ResourceValidationPolicy(
            name=name,
            description=_DESCRIPTIONS[name],
            validate=rule,
            enforcement_level=level(name),
            config_schema=schema(name),
        )
        for name, rule in resource_rules.items()
    ]
    policies += [
        StackValidationPolicy(
            name=name,
            description=_DESCRIPTIONS[name],
            validate=rule,
            enforcement_level=level(name),
            config_schema=schema(name),
        )
        for name, rule in stack_rules.items()
    ]
    return policies
