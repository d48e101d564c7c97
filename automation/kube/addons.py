"""The NVIDIA add-on rules (seed, "Cluster add-ons") as pure functions.

Given what the cluster holds under the two fixed names (RuntimeClass ``nvidia`` and DaemonSet
``kube-system/anycloud-nvidia-device-plugin``), the cluster record id, the ids of destroyed
records of the same control plane (same kube-system UID) and the desired objects, decide per
object what it is and what the reconciler must do. No I/O; the desired objects come in as
dicts so this module does not import the components.

Drift is judged on what the API server keeps as written. The server defaults many DaemonSet
fields (dnsPolicy, terminationMessagePath, ...), so a DaemonSet is compared as "every field we
set still has our value", with list lengths and label-like string maps compared exactly (an
extra toleration, container or nodeSelector key is an edit). A RuntimeClass has no defaulted
fields, so handler, overhead and scheduling are compared exactly.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, Literal

from automation.kube.port import (
    ADDON_KINDS,
    CLUSTER_LABEL,
    DAEMONSET_NAME,
    DAEMONSET_NAMESPACE,
    MANAGED_BY,
    MANAGER,
    RUNTIME_CLASS_NAME,
    AddonKind,
    AddonObservation,
    addon_display,
)

Classification = Literal[
    "absent",  # install it
    "ours-unchanged",  # leave it alone
    "ours-edited",  # something else edited it: rewrite
    "ours-immutable-differs",  # delete, then install again
    "k3s-builtin",  # K3s's own RuntimeClass: used as is, never written
    "adoptable",  # installed by a destroyed record of this control plane: relabel
    "foreign",  # anything else under the name: the pool fails with a diagnostic
]
Drift = Literal["none", "edited", "immutable"]

K3S_HANDLER = "nvidia"
# Fields the API server refuses to change in place.
IMMUTABLE: dict[AddonKind, tuple[tuple[str, ...], ...]] = {
    "runtimeclass": (("handler",),),
    "daemonset": (("spec", "selector"),),
}
# RuntimeClass content is stored exactly as written.
RUNTIME_CLASS_FIELDS = ("handler", "overhead", "scheduling")
# String maps whose extra keys matter (nothing on the server adds keys to them).
EXACT_MAPS = frozenset({"nodeSelector", "matchLabels", "labels", "limits", "requests",
                        "podFixed"})

_OURS: dict[Drift, Classification] = {
    "none": "ours-unchanged", "edited": "ours-edited", "immutable": "ours-immutable-differs",
}

DELETE_COMMANDS: dict[AddonKind, str] = {
    "runtimeclass": f"kubectl delete runtimeclass {RUNTIME_CLASS_NAME}",
    "daemonset": f"kubectl -n {DAEMONSET_NAMESPACE} delete daemonset {DAEMONSET_NAME}",
}


@dataclass(frozen=True)
class ObjectVerdict:
    kind: AddonKind
    classification: Classification
    # For ours and adoptable objects: how the object differs from the desired one.
    drift: Drift = "none"
    detail: str = ""  # why it is foreign, for the diagnostic


@dataclass(frozen=True)
class AddonPlan:
    runtime_class: ObjectVerdict
    daemonset: ObjectVerdict
    manage_runtime_class: bool  # False when K3s's own RuntimeClass is used as is
    relabel: tuple[AddonKind, ...]  # adopt: write this record's labels on them first
    recreate: tuple[AddonKind, ...]  # delete before the add-on stack installs them again
    apply: bool  # the add-on stack must run (install, rewrite, recreate or adopt)
    diagnostic: str | None  # the GPU pool fails with this; None when fine
    summary: str  # what the objects look like, for GPU device diagnostics

    def verdict(self, kind: AddonKind) -> ObjectVerdict:
        return self.runtime_class if kind == "runtimeclass" else self.daemonset


def plan_addons(
    runtime_class: dict[str, Any] | None,
    daemonset: dict[str, Any] | None,
    *,
    cluster_id: str,
    adoptable_cluster_ids: Collection[str],
    desired_runtime_class: dict[str, Any],
    desired_daemonset: dict[str, Any],
) -> AddonPlan:
    adoptable = set(adoptable_cluster_ids) - {cluster_id}
    rc = classify("runtimeclass", runtime_class, cluster_id, adoptable, desired_runtime_class)
    ds = classify("daemonset", daemonset, cluster_id, adoptable, desired_daemonset)
    verdicts = (rc, ds)
    foreign = [v for v in verdicts if v.classification == "foreign"]
    summary = ", ".join(f"{addon_display(v.kind)}: {v.classification}" for v in verdicts)
    if foreign:
        # Nothing is written while a foreign object holds a name: the pool fails until a
        # person removes it; installing the other half alone would not make GPUs usable.
        diagnostic = "; ".join(
            foreign_diagnostic(addon_display(v.kind), v.detail, DELETE_COMMANDS[v.kind],
                               "Anycloud's")
            for v in foreign
        )
        return AddonPlan(rc, ds, rc.classification != "k3s-builtin", (), (), False,
                         diagnostic, summary)
    relabel = tuple(v.kind for v in verdicts if v.classification == "adoptable")
    recreate = tuple(v.kind for v in verdicts if v.drift == "immutable")
    apply = any(v.classification in ("absent", "adoptable") or v.drift != "none"
                for v in verdicts)
    return AddonPlan(rc, ds, rc.classification != "k3s-builtin", relabel, recreate, apply,
                     None, summary)


def foreign_diagnostic(display: str, detail: str, delete_command: str, installs: str) -> str:
    """Why a pool fails over an object under one of our names that is not ours, and the
    command that clears it (the same sentence for every add-on)."""
    return (f"{display} exists but Anycloud does not own it ({detail}); Anycloud never adopts "
            f"or replaces foreign objects: remove it with `{delete_command}` and the next pass "
            f"installs {installs}")


def plan_from_observation(
    observed: AddonObservation,
    *,
    adoptable_cluster_ids: Collection[str],
    desired_runtime_class: dict[str, Any],
    desired_daemonset: dict[str, Any],
) -> AddonPlan:
    return plan_addons(
        observed.runtime_class, observed.daemonset, cluster_id=observed.cluster_id,
        adoptable_cluster_ids=adoptable_cluster_ids,
        desired_runtime_class=desired_runtime_class, desired_daemonset=desired_daemonset,
    )


def classify(
    kind: AddonKind,
    observed: dict[str, Any] | None,
    cluster_id: str,
    adoptable: Collection[str],
    desired: dict[str, Any],
) -> ObjectVerdict:
    if observed is None:
        return ObjectVerdict(kind, "absent")
    labels: dict[str, str] = (observed.get("metadata") or {}).get("labels") or {}
    manager = labels.get(MANAGED_BY)
    owner = labels.get(CLUSTER_LABEL)
    if manager == MANAGER and owner == cluster_id:
        drift = compare(kind, desired, observed)
        return ObjectVerdict(kind, _OURS[drift], drift)
    if manager == MANAGER and owner is not None and owner in adoptable:
        return ObjectVerdict(kind, "adoptable", compare(kind, desired, observed),
                             f"installed by destroyed cluster record {owner}")
    if manager == MANAGER:
        return ObjectVerdict(kind, "foreign", detail=(
            f"labelled for cluster record {owner}" if owner else
            "labelled as Anycloud's without a cluster record"))
    if manager:
        # K3s sets no managed-by label; a tool that does (Helm, the GPU operator) owns it.
        return ObjectVerdict(kind, "foreign", detail=f"managed by {manager}")
    if kind == "runtimeclass" and _is_k3s_builtin(observed):
        return ObjectVerdict(kind, "k3s-builtin")
    if kind == "runtimeclass" and observed.get("handler") == K3S_HANDLER:
        return ObjectVerdict(kind, "foreign", detail=(
            "handler nvidia with overhead or scheduling overrides, not labelled as Anycloud's"))
    return ObjectVerdict(kind, "foreign", detail="not labelled as Anycloud's")


def _is_k3s_builtin(observed: dict[str, Any]) -> bool:
    return (observed.get("handler") == K3S_HANDLER and not _clean(observed.get("overhead"))
            and not _clean(observed.get("scheduling")))


def compare(kind: AddonKind, desired: dict[str, Any], observed: dict[str, Any]) -> Drift:
    for path in IMMUTABLE[kind]:
        want = _at(desired, path)
        if want is not None and _clean(want) != _clean(_at(observed, path)):
            return "immutable"
    if kind == "runtimeclass":
        same = all(_clean(desired.get(f)) == _clean(observed.get(f))
                   for f in RUNTIME_CLASS_FIELDS)
    else:
        same = _holds(desired.get("spec"), observed.get("spec"), exact=False)
    # Our ownership labels are part of the object: any desired label must still be there.
    want_labels = (desired.get("metadata") or {}).get("labels") or {}
    got_labels = (observed.get("metadata") or {}).get("labels") or {}
    same = same and all(got_labels.get(k) == v for k, v in want_labels.items())
    return "none" if same else "edited"


def _at(obj: dict[str, Any], path: tuple[str, ...]) -> Any:
    cur: Any = obj
    for key in path:
        if not isinstance(cur, dict):
            return None
        cur = cur.get(key)
    return cur


def _clean(value: Any) -> Any:
    """Drop None and empty containers: the API server omits them, so they mean nothing."""
    if isinstance(value, dict):
        out = {k: c for k, v in value.items() if (c := _clean(v)) is not None}
        return out or None
    if isinstance(value, list):
        items = [_clean(v) for v in value]
        return items or None
    if value == "":
        return None
    return value


def same_content(a: Any, b: Any) -> bool:
    """Equal once what the API server omits (None, empty containers, "") is dropped."""
    return bool(_clean(a) == _clean(b))


def _holds(want: Any, got: Any, *, exact: bool) -> bool:
    """Does ``got`` still carry every field of ``want`` (server defaults ignored)?"""
    want, got = _clean(want), _clean(got)
    if want is None:
        return not exact or got is None
    if isinstance(want, dict):
        if not isinstance(got, dict):
            return False
        if exact and set(want) != set(got):
            return False
        return all(_holds(v, got.get(k), exact=k in EXACT_MAPS) for k, v in want.items())
    if isinstance(want, list):
        if not isinstance(got, list) or len(want) != len(got):
            return False
        return all(_holds(w, g, exact=False) for w, g in zip(want, got, strict=True))
    return bool(want == got)


__all__ = ["ADDON_KINDS", "DELETE_COMMANDS", "AddonPlan", "Classification", "ObjectVerdict",
           "classify", "compare", "foreign_diagnostic", "plan_addons", "plan_from_observation",
           "same_content"]
