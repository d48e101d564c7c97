"""The add-on rules for a pool's ingress release (its Traefik HelmChart) as pure functions.

The same rules as the NVIDIA objects (``automation.kube.addons``), for the one HelmChart
``kube-system/anycloud-ingress-<pool>``: ours when labelled managed-by anycloud for this
cluster record and this pool; left alone while unchanged; rewritten when edited; recreated
when a field that cannot change in place differs; anything else under the name is foreign and
fails the pool with a diagnostic naming the object and the ``kubectl delete``. There is no
adoption: a pool id is never reused, so no destroyed record's release can carry this name.
No I/O; the desired object comes in as a dict so this module imports no component.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from automation.kube.addons import foreign_diagnostic, same_content
from automation.kube.port import (
    CLUSTER_LABEL,
    HELM_NAMESPACE,
    MANAGED_BY,
    MANAGER,
    POOL_LABEL,
    ingress_release_name,
)

ReleaseClass = Literal["absent", "ours-unchanged", "ours-edited", "ours-immutable-differs",
                       "foreign"]
Drift = Literal["none", "edited", "immutable"]

# Helm cannot move a release to another namespace: the helm-controller would install a second
# release there and leave the first. Deleting the HelmChart uninstalls it (the controller's
# finalizer runs ``helm delete``); the stack then creates it again.
IMMUTABLE_SPEC_FIELDS = ("targetNamespace",)
# What K3s's CRD defaults when the field is left out (``+kubebuilder:default``): not an edit.
CRD_DEFAULTS: dict[str, Any] = {"failurePolicy": "reinstall"}

_OURS: dict[Drift, ReleaseClass] = {
    "none": "ours-unchanged", "edited": "ours-edited", "immutable": "ours-immutable-differs",
}


def display(pool_id: str) -> str:
    return f"HelmChart {HELM_NAMESPACE}/{ingress_release_name(pool_id)}"


def delete_command(pool_id: str) -> str:
    return f"kubectl -n {HELM_NAMESPACE} delete helmchart {ingress_release_name(pool_id)}"


@dataclass(frozen=True)
class ReleasePlan:
    classification: ReleaseClass
    drift: Drift = "none"
    apply: bool = False  # the release stack must run (install, rewrite or recreate)
    recreate: bool = False  # delete the HelmChart first
    diagnostic: str | None = None  # the pool fails with this; None when fine

    @property
    def summary(self) -> str:
        return self.classification


def plan_release(observed: dict[str, Any] | None, desired: dict[str, Any], *,
                 cluster_id: str, pool_id: str) -> ReleasePlan:
    if observed is None:
        return ReleasePlan("absent", apply=True)
    labels: dict[str, str] = (observed.get("metadata") or {}).get("labels") or {}
    manager, owner = labels.get(MANAGED_BY), labels.get(CLUSTER_LABEL)
    pool = labels.get(POOL_LABEL)
    if manager == MANAGER and owner == cluster_id and pool == pool_id:
        drift = compare_release(desired, observed)
        return ReleasePlan(_OURS[drift], drift, apply=drift != "none",
                           recreate=drift == "immutable")
    if manager == MANAGER:
        detail = (f"labelled for cluster record {owner} and node pool {pool}"
                  if owner or pool else "labelled as Anycloud's without a cluster record")
    elif manager:
        detail = f"managed by {manager}"
    else:
        detail = "not labelled as Anycloud's"
    return ReleasePlan("foreign", diagnostic=foreign_diagnostic(
        display(pool_id), detail, delete_command(pool_id), "the pool's ingress release"))


def compare_release(desired: dict[str, Any], observed: dict[str, Any]) -> Drift:
    """The spec is compared exactly (every field changes the release, so a field someone
    added, ``set`` or ``valuesSecrets`` say, is an edit), less the CRD's own defaults; our
    ownership labels must all still be there."""
    want_spec = desired.get("spec") or {}
    got_spec = dict(observed.get("spec") or {})
    for key in IMMUTABLE_SPEC_FIELDS:
        if not same_content(want_spec.get(key), got_spec.get(key)):
            return "immutable"
    for key, default in CRD_DEFAULTS.items():
        if key not in want_spec and got_spec.get(key) == default:
            del got_spec[key]
    same = same_content(want_spec, got_spec)
    want_labels = (desired.get("metadata") or {}).get("labels") or {}
    got_labels = (observed.get("metadata") or {}).get("labels") or {}
    same = same and all(got_labels.get(k) == v for k, v in want_labels.items())
    return "none" if same else "edited"


__all__ = ["CRD_DEFAULTS", "IMMUTABLE_SPEC_FIELDS", "ReleasePlan", "compare_release",
           "delete_command", "display", "plan_release"]
