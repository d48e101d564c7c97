"""A worker Pod from an AgentPool: pure rendering, no I/O.

What the operator adds to the pool's template (and why):
- labels ``anycloud.sh/agent-pool=<pool>`` and ``app.kubernetes.io/managed-by=anycloud``: the
  operator finds the pool's pods by the first (the template's own labels are kept, so the
  seed's ``kubectl get pods -l app=...,pool=...`` still works);
- a name of its own choosing (``<pool>-<5 random>``), so a create that timed out can be sent
  again under the same name and a 409 says it was made;
- an owner reference to the AgentPool (controller, blockOwnerDeletion): the garbage collector
  removes pods an operator never got to;
- the agent container's ``--pool=<name>`` argument (added when absent; another pool's name is
  a template error), and ``POD_NAME``/``POD_NAMESPACE``/``ANYCLOUD_AGENT_SLOTS`` in its
  environment (what ``anycloud agent`` reads) unless the template sets them;
- ``ANYCLOUD_AGENT_TOKEN`` from the pool's Secret ``<pool>-agent-token`` (key ``token``): the
  broker's agent token for this pool only, minted by the operator (``token_secret``);
- ``automountServiceAccountToken: false`` unless the template sets it: the agent needs no
  Kubernetes token (its namespace comes from ``POD_NAMESPACE``), and a mounted one is
  readable by every session (a projected token's file is mode 0644), which would hand the
  pod's service account to whoever runs a command;
- ``ANYCLOUD_BROKER``, the broker's address from the operator's config (``broker.address``),
  unless the template sets it: a template needs no ConfigMap of ours then, and a ConfigMap it
  mounts for its own reasons (the seed's ``/run/velda``) is left alone;
- the agent ConfigMap mounted read-only at ``/run/anycloud`` when one is configured (by
  default when no broker address is) unless the container already mounts something there;
- ``spec.nodePool``: nodeSelector ``anycloud.sh/node-pool=<pool id>`` and the toleration of
  exactly that pool's taint (seed 003: select exactly that node pool, tolerate only its taint),
  and a template toleration that would let the pods onto another node pool is refused;
- ``spec.nodePool``: seed 003's GPU work rule (``automation/kube/gpu_work.py``, shared with
  the ``nodepool`` provisioner): on one of our GPU node pools whole ``nvidia.com/gpu``
  devices (limits == requests, at least one, no more than one Node advertises), then
  runtimeClassName ``nvidia`` (another runtime class is refused) and nodeSelector
  ``anycloud.sh/accelerator=nvidia``; on a CPU node pool no GPU request. Without
  ``spec.nodePool`` a GPU template is scheduled as written (its own selector, tolerations and
  runtime class: the seed's GKE pool).
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import secrets
import string
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from automation.agentpools.model import API_VERSION, KIND
from automation.errors import InvalidInput
from automation.kube.gpu_work import place_gpu_work
from automation.kube.port import (
    MANAGED_BY,
    MANAGER,
    POOL_LABEL,
)

AGENT_POOL_LABEL = "anycloud.sh/agent-pool"
# What the pod was made from (template, placement, ConfigMap, slots): a change of any of them
# makes the pool's older pods outdated, replaced one at a time (reconcile.py).
TEMPLATE_HASH_LABEL = "anycloud.sh/template-hash"
NODE_POOL_LABEL = POOL_LABEL  # anycloud.sh/node-pool: the label and the taint key of a pool
NODE_POOL_TAINT = POOL_LABEL
CONFIG_MOUNT = "/run/anycloud"
CONFIG_VOLUME = "anycloud-config"
DEFAULT_CONFIG_MAP = "anycloud-agent-config"
AGENT_CONTAINER = "agent"
AGENT_TOKEN_ENV = "ANYCLOUD_AGENT_TOKEN"
BROKER_ENV = "ANYCLOUD_BROKER"  # what `anycloud agent --broker` reads
TOKEN_KEY = "token"
_SUFFIX = string.ascii_lowercase + string.digits


@dataclass(frozen=True)
class NodePoolRef:
    """The live node pool ``spec.nodePool`` names: its id (the label and taint value) and
    how many NVIDIA GPUs each of its VMs has (0: a CPU pool)."""

    id: str
    gpus: int = 0


def pod_selector(pool_name: str) -> str:
    return f"{AGENT_POOL_LABEL}={pool_name}"


def random_suffix() -> str:
    return "".join(secrets.choice(_SUFFIX) for _ in range(5))


def pod_name(pool_name: str, suffix: str) -> str:
    # A pod name is also the agent's id and its hostname: keep it a DNS label (<= 63).
    return f"{pool_name[:57].rstrip('-.')}-{suffix}"


def agent_container(spec: dict[str, Any]) -> dict[str, Any]:
    """The container that runs ``anycloud agent``: the one named ``agent``, else the first."""
    containers = spec["containers"]
    return next((c for c in containers if c.get("name") == AGENT_CONTAINER), containers[0])


def config_maps(pod: dict[str, Any]) -> list[str]:
    """The ConfigMaps a pod's volumes name and needs (``optional: true`` ones left out)."""
    out = []
    for volume in pod["spec"].get("volumes") or []:
        cm = volume.get("configMap")
        if cm and cm.get("name") and not cm.get("optional"):
            out.append(cm["name"])
    return sorted(set(out))


def _pool_arg(container: dict[str, Any], pool_name: str, field: str) -> None:
    args = container.setdefault("args", [])
    command = container.get("command") or []
    for where, argv in (("args", args), ("command", command)):
        for i, arg in enumerate(argv):
            if not isinstance(arg, str):
                continue
            value = None
            if arg.startswith("--pool="):
                value = arg.removeprefix("--pool=")
            elif arg == "--pool" and i + 1 < len(argv):
                value = argv[i + 1]
            if value is None:
                continue
            # NAME or NAMESPACE/NAME (the agent qualifies a bare name with its namespace).
            if value.rpartition("/")[2] != pool_name:
                raise InvalidInput(f"{field}.{where}[{i}]", arg,
                                   f"must name this pool (--pool={pool_name}): an agent "
                                   "registers in the pool its --pool names")
            return
    args.append(f"--pool={pool_name}")


def token_secret_name(pool_name: str) -> str:
    return f"{pool_name}-agent-token"


def token_secret(pool: dict[str, Any], token: str) -> dict[str, Any]:
    """The Secret holding the pool's agent token, owned by the pool (deleted with it)."""
    meta = pool["metadata"]
    return {
        "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {
            "name": token_secret_name(meta["name"]), "namespace": meta["namespace"],
            "labels": {AGENT_POOL_LABEL: meta["name"], MANAGED_BY: MANAGER},
            "ownerReferences": [{"apiVersion": API_VERSION, "kind": KIND, "name": meta["name"],
                                 "uid": meta["uid"], "controller": True,
                                 "blockOwnerDeletion": True}],
        },
        "data": {TOKEN_KEY: base64.b64encode(token.encode()).decode()},
    }


def secret_token(secret: dict[str, Any]) -> str | None:
    """The agent token a Secret holds, None when it holds none readable."""
    raw = (secret.get("data") or {}).get(TOKEN_KEY)
    try:
        return base64.b64decode(raw, validate=True).decode() if raw else None
    except (ValueError, UnicodeDecodeError):
        return None


def _env(container: dict[str, Any], slots: int, pool_name: str, broker: str | None) -> None:
    env = container.setdefault("env", [])
    have = {e.get("name") for e in env}
    wanted: list[dict[str, Any]] = [{"name": BROKER_ENV, "value": broker}] if broker else []
    wanted += [
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "POD_NAMESPACE",
         "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        {"name": "ANYCLOUD_AGENT_SLOTS", "value": str(slots)},
        {"name": AGENT_TOKEN_ENV, "valueFrom": {"secretKeyRef": {
            "name": token_secret_name(pool_name), "key": TOKEN_KEY}}},
    ]
    env.extend(e for e in wanted if e["name"] not in have)


def _config_mount(spec: dict[str, Any], container: dict[str, Any], config_map: str) -> None:
    mounts = container.setdefault("volumeMounts", [])
    if any(str(m.get("mountPath", "")).rstrip("/") == CONFIG_MOUNT for m in mounts):
        return
    volumes = spec.setdefault("volumes", [])
    names = {v.get("name") for v in volumes}
    name = CONFIG_VOLUME
    while name in names:
        name += "-x"
    volumes.append({"name": name, "configMap": {"name": config_map}})
    mounts.append({"name": name, "mountPath": CONFIG_MOUNT, "readOnly": True})


def _node_pool(spec: dict[str, Any], pool_id: str) -> None:
    selector = spec.setdefault("nodeSelector", {})
    other = selector.get(NODE_POOL_LABEL)
    if other not in (None, pool_id):
        raise InvalidInput(f"spec.template.spec.nodeSelector.{NODE_POOL_LABEL}", other,
                           f"must be left out with spec.nodePool (node pool id {pool_id})")
    selector[NODE_POOL_LABEL] = pool_id
    tolerations = spec.setdefault("tolerations", [])
    for i, t in enumerate(tolerations):
        key = t.get("key") or ""
        wide = (key == "" and t.get("operator") == "Exists") or (
            key == NODE_POOL_TAINT and (t.get("operator") == "Exists"
                                        or t.get("value") != pool_id))
        if wide:
            raise InvalidInput(f"spec.template.spec.tolerations[{i}]", t,
                               "must not tolerate other node pools' taints: with "
                               "spec.nodePool the operator adds the one toleration needed")
    mine = {"key": NODE_POOL_TAINT, "operator": "Equal", "value": pool_id,
            "effect": "NoSchedule"}
    if mine not in tolerations:
        tolerations.append(mine)


def render_pod(pool: dict[str, Any], *, node_pool: NodePoolRef | None = None,
               config_map: str | None = DEFAULT_CONFIG_MAP, broker: str | None = None,
               suffix: Callable[[], str] = random_suffix) -> dict[str, Any]:
    """The worker Pod for the AgentPool object ``pool`` (as the API server returns it, with
    ``metadata.uid``). ``node_pool``: what ``spec.nodePool`` names (the caller looks it up);
    ``broker``: the agents' broker address; ``config_map``: the agent ConfigMap to mount
    (None: none). InvalidInput naming the template field when the template cannot make a
    worker."""
    meta = pool["metadata"]
    name = meta["name"]
    spec = pool["spec"]
    if spec.get("nodePool") and node_pool is None:
        raise ValueError("spec.nodePool is set: give its node_pool")
    template = copy.deepcopy(spec["template"])
    tmeta = template.get("metadata") or {}
    pod_spec: dict[str, Any] = template["spec"]
    slots = int((spec.get("autoscaler") or {}).get("defaultSlotsPerAgent", 1))

    labels = dict(tmeta.get("labels") or {})
    for key in (AGENT_POOL_LABEL, MANAGED_BY, TEMPLATE_HASH_LABEL):
        if key in labels:
            raise InvalidInput(f"spec.template.metadata.labels.{key}", labels[key],
                               "is set by the operator: leave it out")
    labels[AGENT_POOL_LABEL] = name
    labels[MANAGED_BY] = MANAGER

    container = agent_container(pod_spec)
    index = pod_spec["containers"].index(container)
    _pool_arg(container, name, f"spec.template.spec.containers[{index}]")
    _env(container, slots, name, broker)
    pod_spec.setdefault("automountServiceAccountToken", False)
    if config_map is not None:
        _config_mount(pod_spec, container, config_map)
    if node_pool is not None:
        _node_pool(pod_spec, node_pool.id)
        place_gpu_work(pod_spec, gpus=node_pool.gpus, pool=spec["nodePool"],
                       field="spec.template.spec")

    labels[TEMPLATE_HASH_LABEL] = hashlib.sha256(json.dumps(
        [tmeta, pod_spec], sort_keys=True).encode()).hexdigest()[:12]
    pod_meta: dict[str, Any] = {
        "name": pod_name(name, suffix()),
        "namespace": meta.get("namespace"),
        "labels": labels,
        "ownerReferences": [{
            "apiVersion": API_VERSION, "kind": KIND, "name": name, "uid": meta["uid"],
            "controller": True, "blockOwnerDeletion": True}],
    }
    if tmeta.get("annotations"):
        pod_meta["annotations"] = dict(tmeta["annotations"])
    return {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": pod_spec}


def template_hash(pod: dict[str, Any]) -> str | None:
    return (pod["metadata"].get("labels") or {}).get(TEMPLATE_HASH_LABEL)


def owned_by(pod: dict[str, Any], uid: str) -> bool:
    """The pod's controller is the AgentPool with this uid (a pod of another pool that
    happens to carry the same labels is never ours)."""
    return any(ref.get("uid") == uid and ref.get("controller")
               for ref in pod["metadata"].get("ownerReferences") or [])
