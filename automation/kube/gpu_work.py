"""Seed 003's GPU work rule for every pod spec anycloud schedules onto one of its node pools
(AgentPool workers with ``spec.nodePool``, objects of a ``nodepool`` provisioner): pure, no
I/O, the same rule the policy pack's ``gpu-workload-requests`` checks inside a stack.

    Work scheduled onto a GPU node pool must request whole nvidia.com/gpu devices — the larger
    of its biggest init container and its regular containers' total, no more than one Node
    advertises — and run under the nvidia RuntimeClass; work on a CPU node pool must request
    none.

``place_gpu_work`` checks a pod spec against the pool's per-VM GPU count and, on a GPU pool,
adds ``runtimeClassName: nvidia`` and the ``anycloud.sh/accelerator=nvidia`` nodeSelector
(what those pools' Nodes run and carry). A refusal is ``InvalidInput`` naming the field, the
value, and the seed's words; the caller raises it before anything is created.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Any

from automation.errors import InvalidInput
from automation.kube.port import ACCELERATOR_LABEL, GPU_RESOURCE, RUNTIME_CLASS_NAME

SEED_RULE = (
    "work scheduled onto a GPU node pool must request whole nvidia.com/gpu devices — the "
    "larger of its biggest init container and its regular containers' total, no more than one "
    "Node advertises — and run under the nvidia RuntimeClass; work on a CPU node pool must "
    "request none"
)
WHOLE = "must request whole nvidia.com/gpu devices"
RUNTIME = "run under the nvidia RuntimeClass"
NONE_ON_CPU = "work on a CPU node pool must request none"
ONE_NODE = "no more than one Node advertises"
_SUFFIX: dict[str, Decimal] = {
    "": Decimal(1), "m": Decimal("0.001"), "k": Decimal(1000), "M": Decimal(10**6),
    "G": Decimal(10**9), "T": Decimal(10**12),
    "Ki": Decimal(1024), "Mi": Decimal(1024**2), "Gi": Decimal(1024**3)}


def gpu_quantity(value: Any) -> Decimal | None:
    """A Kubernetes quantity as an exact decimal; None when it is not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return Decimal(value)
    text = str(value).strip()
    unit = ""
    for suffix in sorted(_SUFFIX, key=len, reverse=True):
        if suffix and text.endswith(suffix):
            unit, text = suffix, text[: -len(suffix)]
            break
    try:
        number = Decimal(text)
    except InvalidOperation:
        return None
    return number * _SUFFIX[unit] if number.is_finite() else None


def _whole(amount: Decimal | None) -> bool:
    return amount is not None and amount >= 0 and amount == amount.to_integral_value()


def _container_gpus(container: dict[str, Any], where: str) -> int:
    """One container's nvidia.com/gpu: whole, and limits == requests (Kubernetes accepts
    extended resources only so: requests alone are refused by the API server)."""
    resources = container.get("resources") or {}
    limits = (resources.get("limits") or {}).get(GPU_RESOURCE)
    requests = (resources.get("requests") or {}).get(GPU_RESOURCE)
    if limits is None and requests is None:
        return 0
    for part, raw in (("limits", limits), ("requests", requests)):
        if raw is not None and not _whole(gpu_quantity(raw)):
            raise InvalidInput(f"{where}.resources.{part}.{GPU_RESOURCE}", raw,
                               f"is not a whole number of devices: work scheduled onto a GPU "
                               f"node pool {WHOLE} (seed 003: {SEED_RULE})")
    if limits is None:
        raise InvalidInput(f"{where}.resources.limits.{GPU_RESOURCE}", None,
                           f"must be set equal to resources.requests ({requests}): Kubernetes "
                           f"takes {GPU_RESOURCE} only as limits (requests equal to limits)")
    if requests is not None and gpu_quantity(requests) != gpu_quantity(limits):
        raise InvalidInput(f"{where}.resources.requests.{GPU_RESOURCE}", requests,
                           f"must equal resources.limits ({limits}): Kubernetes requires "
                           f"requests == limits for {GPU_RESOURCE}")
    return int(gpu_quantity(limits) or 0)


def effective_gpus(spec: dict[str, Any], field: str) -> tuple[int, str, Any]:
    """The pod's effective nvidia.com/gpu request (the larger of its biggest init container
    and its regular containers' total), the field that carries it, and its value there;
    InvalidInput for a container asking for a fraction or with requests != limits."""
    regular = [(_container_gpus(c, f"{field}.containers[{i}]"), f"{field}.containers[{i}]")
               for i, c in enumerate(spec.get("containers") or [])]
    init = [(_container_gpus(c, f"{field}.initContainers[{i}]"),
             f"{field}.initContainers[{i}]")
            for i, c in enumerate(spec.get("initContainers") or [])]
    total = sum(n for n, _ in regular)
    biggest = max(init, default=(0, ""))
    if biggest[0] > total:
        return biggest[0], f"{biggest[1]}.resources.limits.{GPU_RESOURCE}", biggest[0]
    asking = [w for n, w in regular if n] or [w for n, w in init if n]
    where = (f"{asking[0]}.resources.limits.{GPU_RESOURCE}" if len(asking) == 1 else
             f"{field}.containers[].resources.limits.{GPU_RESOURCE}")
    return total, where, total


def requests_gpu(spec: dict[str, Any]) -> bool:
    """Any container names a non-zero nvidia.com/gpu (whatever its form)."""
    for c in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        res = c.get("resources") or {}
        for part in ("requests", "limits"):
            value = (res.get(part) or {}).get(GPU_RESOURCE)
            if value is not None and gpu_quantity(value) != 0:
                return True
    return False


def place_gpu_work(spec: dict[str, Any], *, gpus: int, pool: str, field: str) -> None:
    """Check ``spec`` (a pod spec, at ``field``) against node pool ``pool`` whose VMs each
    have ``gpus`` NVIDIA GPUs (0: a CPU pool); on a GPU pool add the nvidia RuntimeClass and
    the accelerator nodeSelector. InvalidInput with the seed's words when it breaks the rule."""
    total, where, shown = effective_gpus(spec, field)
    if not gpus:
        if total:
            raise InvalidInput(where, shown,
                               f"must be 0: node pool {pool!r} is a CPU node pool (no NVIDIA "
                               f"GPU on its VMs) and {NONE_ON_CPU} (seed 003); target a GPU "
                               "node pool")
        return
    if total < 1:
        raise InvalidInput(f"{field}.containers[].resources.limits.{GPU_RESOURCE}", total,
                           f"node pool {pool!r} is a GPU node pool ({gpus} per Node): work "
                           f"scheduled onto it {WHOLE} (at least 1; seed 003: {SEED_RULE})")
    if total > gpus:
        raise InvalidInput(where, shown,
                           f"node pool {pool!r} is a GPU node pool whose Nodes each advertise "
                           f"{gpus} {GPU_RESOURCE}: work scheduled onto it {WHOLE}, {ONE_NODE} "
                           f"(seed 003)")
    runtime = spec.get("runtimeClassName")
    if runtime not in (None, RUNTIME_CLASS_NAME):
        raise InvalidInput(f"{field}.runtimeClassName", runtime,
                           f"must be {RUNTIME_CLASS_NAME!r} or left out: node pool {pool!r} is "
                           f"a GPU node pool and work scheduled onto it must {RUNTIME} "
                           "(seed 003)")
    selector = spec.setdefault("nodeSelector", {})
    accelerator = selector.get(ACCELERATOR_LABEL)
    if accelerator not in (None, "nvidia"):
        raise InvalidInput(f"{field}.nodeSelector.{ACCELERATOR_LABEL}", accelerator,
                           f"must be 'nvidia' or left out: node pool {pool!r}'s Nodes carry "
                           f"{ACCELERATOR_LABEL}=nvidia")
    spec["runtimeClassName"] = RUNTIME_CLASS_NAME
    selector[ACCELERATOR_LABEL] = "nvidia"
