"""Rules over the join script (the VM's user data): ``k3s-checksum-pinned`` (the k3s binary
is checked against a literal SHA-256) and ``pool-labels-and-taint`` (the VM's anycloud.sh
tags, and the node labels and pool taint its user data registers). Also the readers other
rules share: ``user_data_of`` (decoded user data of a VM resource) and ``pool_identity``.
"""

from __future__ import annotations

from typing import Any

from pulumi_policy import ReportViolation, ResourceValidationArgs

from policies import naming
from policies.common import (
    AWS_LAUNCH_CONFIG,
    AWS_LAUNCH_TEMPLATE,
    AZURE_VMSS,
    VM_KINDS,
    report_at,
)
from policies.userdata import (
    decode_base64_text,
    decode_maybe_base64,
    find_k3s_checksum,
    find_node_registration,
)
from policies.wire import as_list, get, run_checks, show

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


# The input that carries a VM's user data, per how the pool VM components spell it.
_USER_DATA_INPUTS = frozenset({"userData", "userDataBase64", "metadata",
                               "metadataStartupScript", "osProfile"})


def user_data_kept(args: ResourceValidationArgs) -> bool:
    """The VM keeps the user data it was made with (``ignore_changes`` on it, once its Node
    joined and its token was spent): this update sends none, and what the program shows is
    what the state holds -- after an adopt, only what the provider reads back (AWS keeps a
    hash of it). It was checked when the VM was made; there is nothing new to check."""
    ignored = getattr(getattr(args, "opts", None), "ignore_changes", None) or []
    return bool(_USER_DATA_INPUTS.intersection(ignored))


def k3s_checksum_pinned(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """Rule 7: the user data checks the k3s binary against a literal SHA-256.

    Secret user data is plain to the real pack (the SDK strips the secret marker); unknown
    user data during preview defers the rule to ``up`` (advisory note at preview).
    """
    rtype = args.resource_type
    if rtype not in VM_KINDS or user_data_kept(args):
        return
    try:
        texts = user_data_of(rtype, args.props)
    except ValueError as exc:
        report_at(args, report_violation, f"{rtype} {exc}: the k3s checksum cannot be verified")
        return
    if not texts:
        report_at(
            args,
            report_violation,
            f"{rtype} has no user data: nothing verifies the k3s agent download",
        )
        return
    fields = ", ".join(f for f, _ in texts)
    findings = [find_k3s_checksum(text) for _, text in texts]
    if any(f.install_script_downloads for f in findings):
        report_at(
            args,
            report_violation,
            f"{rtype} {fields}: runs the get.k3s.io install script, which checks k3s against a "
            "checksum downloaded beside it; download k3s yourself, verify it against a pinned "
            "SHA-256, then install with INSTALL_K3S_SKIP_DOWNLOAD=true",
        )
    if not any(f.pinned for f in findings):
        report_at(
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
            report_at(
                args,
                report_violation,
                f"{rtype} {field} lacks {show(spelled)}: every VM in a pool stack is a pool VM "
                "and carries anycloud.sh/cluster, anycloud.sh/node-pool and anycloud.sh/attempt",
            )

    def user_data() -> None:
        try:
            texts = user_data_of(rtype, args.props)
        except ValueError as exc:
            report_at(args, report_violation, f"{rtype} {exc}: the node taint cannot be verified")
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
            report_at(
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
                report_at(
                    args,
                    report_violation,
                    f"{rtype} {fields}: no node label {key}={value or '<value>'} "
                    f"(found {show(sorted(seen))})",
                )

    run_checks([tags] if user_data_kept(args) else [tags, user_data])
