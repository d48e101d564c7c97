"""AgentPool manifests, valid and invalid, given both to the offline validator
(test_model.py) and to the real API server with the CRD (test_crd_api_server.py).

Each case is the seed's shell pool (k8s/examples/shell-pool.yaml) with one change, and the
field the refusal must name (None: accepted).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[3]
CRD = REPO / "k8s" / "crd" / "agentpool-crd.yaml"
EXAMPLES = REPO / "k8s" / "examples"
POOL_EXAMPLES = ("cpu-pool.yaml", "gpu-pool.yaml", "shell-pool.yaml")

Doc = dict[str, Any]


def example(name: str) -> Doc:
    doc: Doc = yaml.safe_load((EXAMPLES / name).read_text())
    return doc


def _auto(**values: Any) -> Callable[[Doc], None]:
    return lambda d: d["spec"]["autoscaler"].update(values)


def _drop(*path: str) -> Callable[[Doc], None]:
    def mutate(d: Doc) -> None:
        for key in path[:-1]:
            d = d[key]
        del d[path[-1]]
    return mutate


def _set(path: tuple[str, ...], value: Any) -> Callable[[Doc], None]:
    def mutate(d: Doc) -> None:
        for key in path[:-1]:
            d = d[key]
        d[path[-1]] = value
    return mutate


def _labels(labels: Any) -> Callable[[Doc], None]:
    return _set(("spec", "template", "metadata", "labels"), labels)


def _container(**values: Any) -> Callable[[Doc], None]:
    def mutate(d: Doc) -> None:
        container = d["spec"]["template"]["spec"]["containers"][0]
        for key, value in values.items():
            if value is _DROP:
                del container[key]
            else:
                container[key] = value
    return mutate


_DROP = object()
AUTO = "spec.autoscaler"
LABELS = "spec.template.metadata.labels"


@dataclass(frozen=True)
class Case:
    id: str
    mutate: Callable[[Doc], None]
    field: str | None  # None: the API server accepts it

    def doc(self, name: str, namespace: str | None = None) -> Doc:
        """The manifest, named ``name`` (unless the case is about the name) and placed in
        ``namespace`` (None: the kubectl context's)."""
        doc = copy.deepcopy(example("shell-pool.yaml"))
        doc["metadata"]["name"] = name
        if namespace is None:
            del doc["metadata"]["namespace"]
        else:
            doc["metadata"]["namespace"] = namespace
        self.mutate(doc)
        return doc


CASES = [
    # Accepted.
    Case("as-given", lambda d: None, None),
    Case("only-required", _set(("spec", "autoscaler"), {"maxReplicas": 3, "minIdle": 1,
                                                         "maxIdle": 2}), None),
    Case("all-fields", _auto(minReplicas=1, maxReplicas=5, minIdle=0, maxIdle=0,
                             idleDecaySecond=0, killUnknownAfterSecond=0,
                             defaultSlotsPerAgent=3), None),
    Case("equal-bounds", _auto(minReplicas=4, maxReplicas=4, minIdle=2, maxIdle=2), None),
    Case("int32-max", _auto(maxReplicas=2**31 - 1), None),
    Case("integral-float", _auto(maxReplicas=3.0), None),
    Case("null-min-replicas-defaults", _auto(minReplicas=None), None),
    Case("node-pool", _set(("spec", "nodePool"), "gpu-a10"), None),
    Case("null-node-pool", _set(("spec", "nodePool"), None), None),
    Case("prefixed-label", _labels({"anycloud.sh/team": "ml", "app": "a"}), None),
    Case("empty-label-value", _labels({"app": ""}), None),
    Case("annotations", _set(("spec", "template", "metadata", "annotations"), {"a": "b"}),
         None),
    Case("podspec-open", _set(("spec", "template", "spec", "hostNetwork"), True), None),
    Case("container-extra", _container(image=_DROP, stdin=True), None),
    Case("status-ignored", _set(("status",), {"replicas": "many"}), None),
    Case("name-63", _set(("metadata", "name"), "a" * 63), None),
    # Refused: the seed's invalid variants and the field each must name.
    Case("no-max-replicas", _drop("spec", "autoscaler", "maxReplicas"), f"{AUTO}.maxReplicas"),
    Case("no-min-idle", _drop("spec", "autoscaler", "minIdle"), f"{AUTO}.minIdle"),
    Case("no-max-idle", _drop("spec", "autoscaler", "maxIdle"), f"{AUTO}.maxIdle"),
    Case("null-max-replicas", _auto(maxReplicas=None), f"{AUTO}.maxReplicas"),
    Case("no-labels", _drop("spec", "template", "metadata", "labels"), LABELS),
    Case("empty-labels", _labels({}), LABELS),
    Case("null-labels", _labels(None), LABELS),
    Case("negative-min-replicas", _auto(minReplicas=-1), f"{AUTO}.minReplicas"),
    Case("negative-min-idle", _auto(minIdle=-1), f"{AUTO}.minIdle"),
    Case("negative-idle-decay", _auto(idleDecaySecond=-5), f"{AUTO}.idleDecaySecond"),
    Case("negative-kill-unknown", _auto(killUnknownAfterSecond=-1),
         f"{AUTO}.killUnknownAfterSecond"),
    Case("max-idle-below-min-idle", _auto(minIdle=3, maxIdle=2), f"{AUTO}.maxIdle"),
    Case("max-replicas-below-min", _auto(minReplicas=5, maxReplicas=2), f"{AUTO}.maxReplicas"),
    Case("max-replicas-below-default-min", _auto(minReplicas=1, maxReplicas=0),
         f"{AUTO}.maxReplicas"),
    Case("zero-slots", _auto(defaultSlotsPerAgent=0), f"{AUTO}.defaultSlotsPerAgent"),
    Case("over-int32", _auto(maxReplicas=2**31), f"{AUTO}.maxReplicas"),
    Case("fractional", _auto(maxIdle=2.5), f"{AUTO}.maxIdle"),
    Case("string-number", _auto(maxReplicas="4"), f"{AUTO}.maxReplicas"),
    Case("boolean", _auto(minIdle=True), f"{AUTO}.minIdle"),
    Case("unknown-autoscaler-field", _auto(maxSurge=1), f"{AUTO}.maxSurge"),
    Case("unknown-spec-field", _set(("spec", "replicas"), 3), "spec.replicas"),
    Case("autoscaler-list", _set(("spec", "autoscaler"), []), "spec.autoscaler"),
    Case("no-autoscaler", _drop("spec", "autoscaler"), "spec.autoscaler"),
    Case("no-template", _drop("spec", "template"), "spec.template"),
    Case("no-spec", _drop("spec"), "spec"),
    Case("no-containers", _drop("spec", "template", "spec", "containers"),
         "spec.template.spec.containers"),
    Case("empty-containers", _set(("spec", "template", "spec", "containers"), []),
         "spec.template.spec.containers"),
    Case("container-no-name", _container(name=_DROP), "spec.template.spec.containers[0].name"),
    Case("container-not-object", _set(("spec", "template", "spec", "containers"), ["agent"]),
         "spec.template.spec.containers[0]"),
    Case("label-value-int", _labels({"app": 1}), f"{LABELS}.app"),
    Case("label-value-bad", _labels({"app": "-shell"}), f"{LABELS}.app"),
    Case("label-value-long", _labels({"app": "v" * 64}), f"{LABELS}.app"),
    Case("label-key-space", _labels({"bad key": "v"}), LABELS),
    Case("label-key-two-slashes", _labels({"a/b/c": "v"}), LABELS),
    Case("label-key-long", _labels({"k" * 64: "v"}), LABELS),
    Case("node-pool-bad", _set(("spec", "nodePool"), "GPU_pool"), "spec.nodePool"),
    Case("node-pool-empty", _set(("spec", "nodePool"), ""), "spec.nodePool"),
    Case("unknown-template-metadata", _set(("spec", "template", "metadata", "name"), "x"),
         "spec.template.metadata.name"),
    Case("name-64", _set(("metadata", "name"), "a" * 64), "metadata.name"),
    Case("name-uppercase", _set(("metadata", "name"), "Shell"), "metadata.name"),
]
