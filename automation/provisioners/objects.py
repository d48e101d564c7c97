"""The objects a runtime template renders to, as the provisioners handle them: where a
workload's pods go (exactly one node pool), the checksum of what was rendered, and the
fields a live object no longer holds as applied."""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from automation.errors import InvalidInput
from automation.kube.port import POOL_LABEL

PROVISION_ID_LABEL = "anycloud.sh/provision-id"  # on every object of a runtime
CHECKSUM_ANNOTATION = "anycloud.sh/templates-sha256"
REQUEST_ANNOTATION = "anycloud.sh/request"
NODE_POOL_TAINT = POOL_LABEL  # anycloud.sh/node-pool: the pool's label and its taint key


@dataclass(frozen=True)
class RenderedObject:
    key: str  # the template_paths key it came from
    body: dict[str, Any]

    @property
    def kind(self) -> str:
        return str(self.body["kind"])

    @property
    def name(self) -> str:
        return str(self.body["metadata"]["name"])

    @property
    def ref(self) -> str:
        return f"{self.kind} {self.name}"


def pod_spec(obj: dict[str, Any]) -> dict[str, Any] | None:
    """The pod template's spec of a workload object (Deployment and the like), else None."""
    if obj.get("kind") == "Pod":
        return obj.setdefault("spec", {})
    template = (obj.get("spec") or {}).get("template")
    if isinstance(template, dict):
        return template.setdefault("spec", {})
    return None


def place_on_pool(spec: dict[str, Any], pool_id: str, field: str) -> None:
    """Exactly the pool's nodeSelector and the one toleration of its taint (seed 003). The
    same rule as automation/agentpools/pods.py (mirrored: its messages speak of AgentPools),
    and a ``nodeName`` is refused too (it skips the scheduler, so the taint too)."""
    if spec.get("nodeName"):
        raise InvalidInput(f"{field}.nodeName", spec["nodeName"],
                           f"must be left out: a nodepool provisioner places pods on node "
                           f"pool {pool_id} through the scheduler")
    selector = spec.setdefault("nodeSelector", {})
    other = selector.get(POOL_LABEL)
    if other not in (None, pool_id):
        raise InvalidInput(f"{field}.nodeSelector.{POOL_LABEL}", other,
                           f"must be left out: the provisioner selects node pool {pool_id}")
    selector[POOL_LABEL] = pool_id
    tolerations = spec.setdefault("tolerations", [])
    for i, t in enumerate(tolerations):
        key = t.get("key") or ""
        wide = (key == "" and t.get("operator") == "Exists") or (
            key == NODE_POOL_TAINT and (t.get("operator") == "Exists"
                                        or t.get("value") != pool_id))
        if wide:
            raise InvalidInput(f"{field}.tolerations[{i}]", json.dumps(t, sort_keys=True),
                               "must not tolerate other node pools' taints: the provisioner "
                               f"adds the one toleration of node pool {pool_id}")
    mine = {"key": NODE_POOL_TAINT, "operator": "Equal", "value": pool_id,
            "effect": "NoSchedule"}
    if mine not in tolerations:
        tolerations.append(mine)


def checksum(objects: list[RenderedObject]) -> str:
    """SHA-256 of the rendered objects (labels and placement included, our two annotations
    not: they are derived from it)."""
    bodies = []
    for o in objects:
        body = copy.deepcopy(o.body)
        notes = body["metadata"].get("annotations") or {}
        notes.pop(CHECKSUM_ANNOTATION, None)
        notes.pop(REQUEST_ANNOTATION, None)
        bodies.append(body)
    return hashlib.sha256(json.dumps(bodies, sort_keys=True).encode()).hexdigest()


def quantity(value: Any) -> Any:
    from kubernetes.utils.quantity import parse_quantity

    try:
        return parse_quantity(value)
    except (ValueError, TypeError):
        return None


def differences(want: Any, have: Any, path: str = "") -> Iterator[str]:
    """Where ``have`` (the live object) no longer holds what ``want`` (what we apply) sets:
    fields the API server or controllers added beside ours are not differences."""
    if isinstance(want, dict):
        if not isinstance(have, dict):
            yield f"{path or '.'} is {json.dumps(have)}"
            return
        for key, value in want.items():
            yield from differences(value, have.get(key), f"{path}.{key}" if path else key)
    elif isinstance(want, list):
        if not isinstance(have, list) or len(have) != len(want):
            yield (f"{path} has {len(have) if isinstance(have, list) else 'no'} item(s), "
                   f"applied {len(want)}")
            return
        for i, (w, h) in enumerate(zip(want, have, strict=True)):
            yield from differences(w, h, f"{path}[{i}]")
    elif want != have and not (isinstance(want, str) and isinstance(have, str | int)
                               and quantity(want) is not None
                               and quantity(want) == quantity(str(have))):
        yield f"{path} is {json.dumps(have)}, applied {json.dumps(want)}"


