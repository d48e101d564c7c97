"""The AgentPool CRD on the real API server (kube-apiserver of the ``control_plane`` fixture),
through real ``kubectl apply``: the seed's examples accepted with their defaults filled in,
the printer columns, the invalid variants refused naming their field, and for every case
the offline validator's verdict equal to the API server's."""

from __future__ import annotations

import itertools
import json
import secrets
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from automation.agentpools.model import problems, validate_manifest
from automation.devcluster.control_plane import ControlPlane
from tests.automation.agentpools.cases import CASES, CRD, EXAMPLES, POOL_EXAMPLES, Case, example

pytestmark = [pytest.mark.kube]

NAMES = {"cpu-pool.yaml": "cpu-pool", "gpu-pool.yaml": "gpu-pool", "shell-pool.yaml": "shell"}


@pytest.fixture(scope="module")
def plane(control_plane: ControlPlane) -> ControlPlane:
    """The shared control plane with the CRD installed by ``kubectl apply`` and Established
    (applying it again is a no-op, so other modules may install it too)."""
    control_plane.kubectl("apply", "-f", str(CRD))
    control_plane.kubectl("wait", "--for=condition=Established", "--timeout=60s",
                          "crd/agentpools.anycloud.sh")
    return control_plane


@pytest.fixture(scope="module")
def namespace(plane: ControlPlane) -> Iterator[str]:
    name = f"agentpools-{secrets.token_hex(3)}"
    plane.kubectl("create", "namespace", name)
    yield name
    plane.kubectl("delete", "namespace", name, "--wait=false", check=False)


def _apply(plane: ControlPlane, doc: dict[str, Any], namespace: str) -> tuple[bool, str]:
    """``kubectl apply -f -`` of one manifest as YAML (client-side apply, kubectl's default
    strict field validation): (accepted, what kubectl printed)."""
    done = plane.kubectl("apply", "-n", namespace, "-f", "-", input=yaml.safe_dump(doc),
                         check=False)
    return done.returncode == 0, done.stdout + done.stderr


def _get(plane: ControlPlane, namespace: str, name: str) -> dict[str, Any]:
    out = plane.kubectl("get", "agentpool", name, "-n", namespace, "-o", "json").stdout
    doc: dict[str, Any] = json.loads(out)
    return doc


def _in_namespace(doc: dict[str, Any], namespace: str) -> dict[str, Any]:
    doc["metadata"]["namespace"] = namespace
    return doc


# -- the CRD and the seed's examples ----------------------------------------------------------


def test_crd_is_installed_and_served(plane: ControlPlane) -> None:
    """The seed's troubleshooting step 1, and the short name."""
    out = plane.kubectl("get", "crd", "agentpools.anycloud.sh").stdout
    assert "agentpools.anycloud.sh" in out
    resources = plane.kubectl("api-resources", "--api-group=anycloud.sh").stdout
    row = next(line.split() for line in resources.splitlines() if "AgentPool" in line)
    assert row[:2] == ["agentpools", "ap"] and "anycloud.sh/v1" in row and "true" in row


def test_seed_examples_are_accepted_with_defaults(plane: ControlPlane, namespace: str) -> None:
    config = _in_namespace(example("agent-config.yaml"), namespace)
    assert _apply(plane, config, namespace)[0]
    for file in POOL_EXAMPLES:
        doc = _in_namespace(example(file), namespace)
        accepted, said = _apply(plane, doc, namespace)
        assert accepted, said
        assert f"agentpool.anycloud.sh/{NAMES[file]} created" in said
        stored = _get(plane, namespace, NAMES[file])
        # The API server's defaults are the offline model's, field for field.
        offline = validate_manifest(doc).spec.autoscaler.model_dump()
        assert stored["spec"]["autoscaler"] == offline, file
        assert stored["spec"]["template"] == doc["spec"]["template"]
    shell = _get(plane, namespace, "shell")["spec"]["autoscaler"]
    assert shell == {"minReplicas": 0, "maxReplicas": 4, "minIdle": 1, "maxIdle": 2,
                     "idleDecaySecond": 60, "killUnknownAfterSecond": 300,
                     "defaultSlotsPerAgent": 1}
    gpu = _get(plane, namespace, "gpu-pool")["spec"]["autoscaler"]
    assert (gpu["minReplicas"], gpu["killUnknownAfterSecond"]) == (0, 900)
    # The seed's troubleshooting: the template's labels, and the ConfigMap exists.
    labels = plane.kubectl("get", "agentpool", "shell", "-n", namespace, "-o",
                           "jsonpath={.spec.template.metadata.labels}").stdout
    assert json.loads(labels) == {"app": "anycloud-agent-shell", "group": "anycloud-agent",
                                  "type": "shell"}
    plane.kubectl("get", "configmap", "anycloud-agent-config", "-n", namespace)


def test_printer_columns(plane: ControlPlane, namespace: str) -> None:
    doc = _in_namespace(example("cpu-pool.yaml"), namespace)
    doc["metadata"]["name"] = "columns"
    doc["spec"]["nodePool"] = "cpu-a"
    assert _apply(plane, doc, namespace)[0]
    # What the operator will write, through the status subresource.
    plane.patch_status("agentpools", "columns", {
        "replicas": 5, "readyReplicas": 4, "idleSlots": 3, "busySlots": 2,
        "pendingSessions": 1, "observedGeneration": 1,
        "conditions": [{"type": "Ready", "status": "True", "reason": "Scaled",
                        "message": "4 of 5 agents ready",
                        "lastTransitionTime": "2026-01-01T00:00:00Z",
                        "observedGeneration": 1}]}, namespace)
    table = plane.kubectl("get", "ap", "columns", "-n", namespace).stdout.splitlines()
    assert table[0].split() == ["NAME", "MIN", "MAX", "REPLICAS", "READY", "IDLE", "BUSY",
                                "AGE"]
    assert table[1].split()[:7] == ["columns", "2", "20", "5", "4", "3", "2"]
    wide = plane.kubectl("get", "agentpools", "columns", "-n", namespace, "-o", "wide").stdout
    head, row = wide.splitlines()
    assert head.split() == ["NAME", "MIN", "MAX", "REPLICAS", "READY", "IDLE", "BUSY",
                            "PENDING", "NODE-POOL", "AGE"]
    assert row.split()[7:9] == ["1", "cpu-a"]
    # A user's apply does not touch the status (the subresource owns it).
    doc["spec"]["autoscaler"]["maxReplicas"] = 21
    assert _apply(plane, doc, namespace)[0]
    stored = _get(plane, namespace, "columns")
    assert stored["status"]["replicas"] == 5 and stored["spec"]["autoscaler"]["maxReplicas"] == 21


def test_status_conditions_have_the_metav1_shape(plane: ControlPlane, namespace: str) -> None:
    doc = _in_namespace(example("shell-pool.yaml"), namespace)
    doc["metadata"]["name"] = "conditions"
    assert _apply(plane, doc, namespace)[0]
    bad = plane.kubectl(
        "patch", "agentpool", "conditions", "-n", namespace, "--subresource=status",
        "--type=merge", "-p", json.dumps({"status": {"conditions": [
            {"type": "Ready", "status": "Maybe", "reason": "not a reason!",
             "lastTransitionTime": "2026-01-01T00:00:00Z", "message": ""}]}}), check=False)
    assert bad.returncode != 0
    assert "status.conditions[0].status" in bad.stderr
    assert "status.conditions[0].reason" in bad.stderr


# -- every case: the API server's verdict, and the offline one equal to it ----------------------

_serial = itertools.count()
# Mostly small counts (both verdicts about equally likely), with the int32 edge, and None
# (the field left out).
_counts = st.one_of(st.integers(-1, 6), st.sampled_from([2**31 - 1, 2**31]), st.none())


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_case_on_api_server_equals_offline(plane: ControlPlane, namespace: str,
                                           case: Case) -> None:
    doc = case.doc(f"case-{next(_serial)}", namespace)
    accepted, said = _apply(plane, doc, namespace)
    offline = problems(doc)
    assert accepted == (case.field is None), said
    assert accepted == (offline == []), (said, [p.message for p in offline])
    if accepted:
        stored = _get(plane, namespace, doc["metadata"]["name"])
        assert stored["spec"]["autoscaler"] == validate_manifest(doc).spec.autoscaler.model_dump()
    else:
        # The API server names the field the case is about, and the one offline names first.
        assert case.field in said, said
        assert offline[0].field in said, (said, offline[0].message)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.fixed_dictionaries(
    {f: _counts for f in ("maxReplicas", "minIdle", "maxIdle")},
    optional={f: _counts for f in ("minReplicas", "idleDecaySecond", "killUnknownAfterSecond",
                                   "defaultSlotsPerAgent")},
).map(lambda d: {k: v for k, v in d.items() if v is not None}))
def test_random_autoscalers_same_verdict(plane: ControlPlane, namespace: str,
                                         auto: dict[str, int]) -> None:
    doc = example("shell-pool.yaml")
    doc["metadata"] = {"name": f"random-{next(_serial)}", "namespace": namespace}
    doc["spec"]["autoscaler"] = auto
    accepted, said = _apply(plane, doc, namespace)
    offline = problems(doc)
    assert accepted == (offline == []), (auto, said, [p.message for p in offline])
    if accepted:
        stored = _get(plane, namespace, doc["metadata"]["name"])
        assert stored["spec"]["autoscaler"] == validate_manifest(doc).spec.autoscaler.model_dump()
    else:
        assert offline[0].field in said, (said, offline[0].message)


def test_examples_directory_applies_whole(plane: ControlPlane) -> None:
    """``kubectl apply -f k8s/examples/`` as a user runs it: the files as they are, into the
    namespace they name (default)."""
    done = plane.kubectl("apply", "-f", str(EXAMPLES))
    assert "configmap/anycloud-agent-config" in done.stdout
    listed = plane.kubectl("get", "ap", "-n", "default", "-o", "name").stdout.split()
    assert {f"agentpool.anycloud.sh/{n}" for n in NAMES.values()} <= set(listed)
    plane.kubectl("delete", "-f", str(EXAMPLES), "--wait=false")
