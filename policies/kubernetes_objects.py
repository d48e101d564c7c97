"""Rules over the Kubernetes objects of a stack: ``daemonset-image-digest``,
``gpu-workload-requests`` (with the GPU quantity arithmetic) and
``bootstrap-token-ttl-and-secret`` (``make_bootstrap_token_rule``, which takes the clock).
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from collections.abc import Callable
from datetime import datetime, timedelta
from fractions import Fraction
from typing import Any

from pulumi_policy import ReportViolation, ResourceValidationArgs

from policies import config as cfg
from policies import naming
from policies.common import Clock, has_key, report_at, utc_now
from policies.wire import as_list, as_str_list, get, is_mapping, run_checks, show

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
_DIGEST_IMAGE = re.compile(r"@sha256:[0-9a-f]{64}$")


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
                report_at(
                    args,
                    report_violation,
                    f"{args.resource_type} spec.template.spec.{group}[{i}].image={show(image)} "
                    "is not pinned by digest (@sha256:<64 hex>)",
                )


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
        report_at(args, report_violation, f"{args.resource_type} {problem}")


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
                if not has_key(args.props, top) or top in secret_outputs:
                    continue
                block = get(args.props, top)
                keys = [str(k) for k in block] if is_mapping(block) else []
                plain_keys = [k for k in keys if f"{top}.{k}" not in secret_outputs] or [top]
                report_at(
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
                report_at(
                    args,
                    report_violation,
                    f"{args.resource_type} {field} is missing: a bootstrap token without an "
                    f"expiration never expires (max TTL {ttl} min)",
                )
                return
            try:
                expires = _parse_rfc3339(raw)
            except ValueError as exc:
                report_at(
                    args,
                    report_violation,
                    f"{args.resource_type} {field}={show(raw)} is not an RFC3339 time: {exc}",
                )
                return
            latest = clock() + timedelta(minutes=ttl)
            if expires > latest:
                report_at(
                    args,
                    report_violation,
                    f"{args.resource_type} {field}={show(raw)} is later than now + {ttl} min "
                    f"({latest.isoformat(timespec='seconds')})",
                )

        run_checks([secretness, expiration])

    return bootstrap_token
