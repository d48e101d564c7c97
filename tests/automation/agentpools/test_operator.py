"""The AgentPool operator end to end on the real control plane (``control_plane``: etcd,
kube-apiserver, controller-manager, scheduler, kwok playing the kubelets of fake Nodes).

The seed's example pools are applied with ``kubectl apply`` in a namespace of the test's own,
the operator runs in-process (kopf in a thread, ``operator.Operator``) or as the
``anycloud operator`` command, and **agents are stood in for by direct registry calls**
(``Agents`` below): for each worker pod kwok reports Running, an agent registers under the
pod's name, heartbeats, and deregisters when its pod goes (what ``anycloud agent`` does on
SIGTERM); one the operator retired stops heartbeating (``anycloud agent`` exits on 410).
Sessions are acquired and released through the same registry. The ledger is a SQLite file
of the test's own.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml

from automation.agentpools.operator import ControlPlaneConfig, Operator, assemble
from automation.agentpools.pods import AGENT_POOL_LABEL
from automation.agentpools.reconcile import Reconciler, RegistryState
from automation.agentpools.registry import Registry
from automation.agentpools.wire import AgentRetired
from automation.devcluster.control_plane import KWOK_ANNOTATION, ControlPlane
from automation.kube.port import MANAGED_BY, MANAGER
from automation.ledger import open_ledger
from automation.ledger.db import Ledger
from tests.automation.agentpools.cases import CRD, example

pytestmark = [pytest.mark.kube]

REPO = Path(__file__).resolve().parents[3]
RBAC = REPO / "k8s" / "rbac"
T = TypeVar("T")


# -- the cluster ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def plane(control_plane: ControlPlane) -> ControlPlane:
    """The CRD installed, the nvidia RuntimeClass the GPU add-on would install, a big CPU
    Node and a GPU Node (labelled and tainted as anycloud's GPU node pools are) for kwok."""
    control_plane.kubectl("apply", "-f", str(CRD))
    control_plane.kubectl("wait", "--for=condition=Established", "--timeout=60s",
                          "crd/agentpools.anycloud.sh")
    control_plane.apply({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
                         "metadata": {"name": "nvidia"}, "handler": "nvidia"})
    suffix = secrets.token_hex(3)
    _node(control_plane, f"ap-cpu-{suffix}", {})
    _node(control_plane, f"ap-gpu-{suffix}", {"anycloud.sh/accelerator": "nvidia"},
          gpus=8, taints=[{"key": "nvidia.com/gpu", "value": "present",
                           "effect": "NoSchedule"}])
    return control_plane


def _node(plane: ControlPlane, name: str, labels: dict[str, str], gpus: int = 0,
          taints: list[dict[str, str]] | None = None) -> None:
    plane.apply({"apiVersion": "v1", "kind": "Node", "metadata": {
        "name": name, "annotations": {KWOK_ANNOTATION: "fake"},
        "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                   "kubernetes.io/arch": "amd64", **labels}},
        "spec": {"taints": taints or []}})
    resources = {"cpu": "1000", "memory": "4Ti", "pods": "1000"}
    if gpus:
        resources["nvidia.com/gpu"] = str(gpus)
    plane.patch_status("node", name, {"capacity": resources, "allocatable": resources})


@pytest.fixture
def ns(plane: ControlPlane) -> Iterator[str]:
    name = f"ap-{secrets.token_hex(4)}"
    plane.kubectl("create", "namespace", name)
    yield name
    plane.kubectl("delete", "namespace", name, "--wait=false", check=False)


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    led = open_ledger(f"sqlite:///{tmp_path / 'ledger.db'}")
    yield led
    led.dispose()


def apply(plane: ControlPlane, ns: str, *docs: dict[str, Any]) -> None:
    """``kubectl apply`` (client-side, as a user does) of manifests moved into ``ns``."""
    for doc in docs:
        doc["metadata"]["namespace"] = ns
    plane.kubectl("apply", "-n", ns, "-f", "-",
                  input="\n---\n".join(yaml.safe_dump(d) for d in docs))


def get_json(plane: ControlPlane, *args: str) -> Any:
    return json.loads(plane.kubectl("get", *args, "-o", "json").stdout)


def pods(plane: ControlPlane, ns: str, pool: str, *, managed: bool = True
         ) -> list[dict[str, Any]]:
    """The pool's worker pods not being deleted (``managed``: made by the operator)."""
    selector = f"{AGENT_POOL_LABEL}={pool}" + (f",{MANAGED_BY}={MANAGER}" if managed else "")
    items: list[dict[str, Any]] = get_json(plane, "pods", "-n", ns, "-l", selector)["items"]
    return [p for p in items if not p["metadata"].get("deletionTimestamp")]


def names(items: list[dict[str, Any]]) -> set[str]:
    return {p["metadata"]["name"] for p in items}


def running(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [p for p in items if (p.get("status") or {}).get("phase") == "Running"]


def status(plane: ControlPlane, ns: str, pool: str) -> dict[str, Any]:
    found: dict[str, Any] = get_json(plane, "agentpool", pool, "-n", ns).get("status") or {}
    return found


def condition(plane: ControlPlane, ns: str, pool: str) -> dict[str, Any]:
    for c in status(plane, ns, pool).get("conditions") or []:
        if c["type"] == "Ready":
            return dict(c)
    return {}


def events(plane: ControlPlane, ns: str, pool: str) -> list[dict[str, Any]]:
    items = get_json(plane, "events", "-n", ns,
                     f"--field-selector=involvedObject.name={pool},"
                     "involvedObject.kind=AgentPool")["items"]
    return list(items)


class Agents:
    """Stand-ins for the agents in the worker pods, as direct registry calls: an agent
    registers once its pod Runs, heartbeats, and deregisters when its pod is deleted."""

    def __init__(self, plane: ControlPlane, registry: Registry, ns: str, pool: str,
                 slots: int = 1) -> None:
        self.plane, self.registry, self.ns, self.pool = plane, registry, ns, pool
        self.key = f"{ns}/{pool}"
        self.slots = slots
        self.up: set[str] = set()

    def sync(self) -> None:
        live = names(running(pods(self.plane, self.ns, self.pool)))
        for name in sorted(live - self.up):
            self.registry.register(self.key, name, name, self.slots)
        for name in sorted(self.up - live):
            with contextlib.suppress(Exception):
                self.registry.deregister(name, "stopped: its pod was deleted")
        self.up = live
        view = {a.id: a for a in self.registry.pool_view(self.key).agents}
        for name in sorted(live):
            # Retired (its pod about to be deleted): the real agent stops, never re-registers.
            with contextlib.suppress(AgentRetired):
                self.registry.heartbeat(name, view[name].busy_slots if name in view else 0)


def eventually(check: Callable[[], T], what: str, timeout: float = 60.0,
               tick: Callable[[], None] | None = None) -> T:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        if tick is not None:
            tick()
        try:
            last = check()
            if last:
                return last
        except (AssertionError, KeyError, subprocess.CalledProcessError) as exc:
            last = exc
        time.sleep(0.3)
    raise AssertionError(f"{what}: not within {timeout:.0f} s (last: {last!r})")


@contextlib.contextmanager
def operator(plane: ControlPlane, ledger: Ledger, ns: str, *,
             kubeconfig: Path | None = None, interval: float = 0.5,
             log: list[str] | None = None) -> Iterator[Operator]:
    config = ControlPlaneConfig.model_validate({"provisioners": [{"kubernetes": {
        "namespace": ns}}]})
    op = assemble(config, ledger, kubeconfig=kubeconfig or plane.kubeconfig,
                  interval=interval, log=(log.append if log is not None else None))
    op.start()
    try:
        yield op
    finally:
        op.stop()


# -- end to end -----------------------------------------------------------------------------


def test_seed_examples_scale_decay_report_and_delete(plane: ControlPlane, ns: str,
                                                      ledger: Ledger) -> None:
    registry = Registry(ledger)
    apply(plane, ns, example("agent-config.yaml"), example("cpu-pool.yaml"),
          example("gpu-pool.yaml"), example("shell-pool.yaml"))
    # A pod of nobody's, carrying the shell pool's label: never the operator's to touch.
    decoy = {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "decoy", "labels": {AGENT_POOL_LABEL: "shell"}},
        "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}}
    apply(plane, ns, decoy)
    agents = {p: Agents(plane, registry, ns, p) for p in ("cpu-pool", "gpu-pool", "shell")}

    def sync() -> None:
        for a in agents.values():
            a.sync()

    with operator(plane, ledger, ns):
        # cpu-pool: minReplicas 2, minIdle 3 -> 3; gpu-pool and shell: minIdle 1 -> 1 each.
        want = {"cpu-pool": 3, "gpu-pool": 1, "shell": 1}
        for pool, n in want.items():
            eventually(lambda pool=pool, n=n: len(running(pods(plane, ns, pool))) == n,
                       f"{pool}: {n} running pods", tick=sync)
        gpu = pods(plane, ns, "gpu-pool")[0]
        assert gpu["spec"]["runtimeClassName"] == "nvidia"
        assert gpu["spec"]["nodeName"].startswith("ap-gpu-")
        # The seed's troubleshooting selector still finds them (template labels kept).
        seed = get_json(plane, "pods", "-n", ns, "-l", "app=anycloud-agent,pool=gpu-pool")
        assert names(seed["items"]) == names(pods(plane, ns, "gpu-pool"))
        # Agents registered: status shows ready agents and idle slots.
        eventually(lambda: status(plane, ns, "shell").get("readyReplicas") == 1
                   and status(plane, ns, "shell").get("idleSlots") == 1,
                   "shell status: 1 ready, 1 idle slot", tick=sync)
        st = status(plane, ns, "cpu-pool")
        assert st["replicas"] == 3 and st["observedGeneration"] == 1
        assert condition(plane, ns, "cpu-pool")["reason"] == "Reconciled"
        # kubectl get ap shows the figures.
        table = plane.kubectl("get", "ap", "-n", ns).stdout
        row = next(line.split() for line in table.splitlines() if line.startswith("cpu-pool"))
        assert row[:7] == ["cpu-pool", "2", "20", "3", "3", "3", "0"], table

        # A session takes the shell pool's one idle slot: a second agent is added.
        session = registry.acquire(f"{ns}/shell", ["sh", "-c", "true"])
        assert session.state == "running"
        eventually(lambda: len(running(pods(plane, ns, "shell"))) == 2,
                   "shell scaled up to 2 for minIdle 1", tick=sync)
        eventually(lambda: status(plane, ns, "shell").get("busySlots") == 1,
                   "shell status: 1 busy slot", tick=sync)
        # The session ends; with maxIdle lowered to 1 and idleDecaySecond 1 (a user's
        # update), one idle agent decays away, never the pool below minIdle.
        registry.release(session.id, 0, agent=session.agent_id)
        plane.kubectl("patch", "agentpool", "shell", "-n", ns, "--type=merge", "-p",
                      json.dumps({"spec": {"autoscaler": {"maxIdle": 1,
                                                          "idleDecaySecond": 1}}}))
        eventually(lambda: len(pods(plane, ns, "shell")) == 1, "shell decayed to 1 pod",
                   tick=sync)
        time.sleep(3)
        sync()
        assert len(pods(plane, ns, "shell")) == 1, "no flapping after the decay"
        eventually(lambda: status(plane, ns, "shell").get("observedGeneration") == 2,
                   "status observed the update", tick=sync)
        reasons = [e["reason"] for e in events(plane, ns, "shell")]
        assert "ScaledUp" in reasons and "ScaledDown" in reasons, reasons
        described = plane.kubectl("describe", "agentpool", "shell", "-n", ns).stdout
        assert "ScaledDown" in described and "idleDecaySecond" in described

        # A new image for the GPU pool (a GitOps change): its pod is replaced by one of the
        # new template, the pool ending as it was.
        plane.kubectl("patch", "agentpool", "gpu-pool", "-n", ns, "--type=json", "-p",
                      json.dumps([{"op": "replace", "value": "anycloud/agent:2", "path":
                                   "/spec/template/spec/containers/0/image"}]))
        eventually(lambda: [p["spec"]["containers"][0]["image"]
                            for p in running(pods(plane, ns, "gpu-pool"))]
                   == ["anycloud/agent:2"] and len(pods(plane, ns, "gpu-pool")) == 1,
                   "gpu-pool rolled to the new image", tick=sync)
        assert any(e["reason"] == "Replaced" for e in events(plane, ns, "gpu-pool"))

        # kubectl delete agentpool: exactly its pods go; the other pools' and the decoy stay.
        others = {p: names(pods(plane, ns, p)) for p in ("cpu-pool", "gpu-pool")}
        plane.kubectl("delete", "agentpool", "shell", "-n", ns, "--timeout=60s")
        eventually(lambda: names(pods(plane, ns, "shell", managed=False)) == {"decoy"},
                   "shell's pods deleted, the decoy kept", tick=sync)
        for pool, before in others.items():
            assert names(pods(plane, ns, pool)) == before
        assert not [a for a in registry.pool_view(f"{ns}/shell").agents
                    if a.state != "gone"]


def test_restart_mid_scale_creates_no_extra_pod(plane: ControlPlane, ns: str,
                                                ledger: Ledger) -> None:
    """A pass killed after its first create (the hook raises, as a crash would), then a new
    operator with nothing in memory: it counts the pod made and makes only the rest."""
    from automation.agentpools.kubeapi import KubeApi
    from automation.kube.kubeconfig import client_configuration

    pool = example("cpu-pool.yaml")
    pool["spec"]["autoscaler"].update({"minReplicas": 5, "minIdle": 0})
    apply(plane, ns, example("agent-config.yaml"), pool)
    body = get_json(plane, "agentpool", "cpu-pool", "-n", ns)

    class Crash(Exception):
        pass

    def crash(name: str) -> None:
        raise Crash(name)

    api = KubeApi(client_configuration(plane.kubeconfig))
    first = Reconciler(api=api, state=RegistryState(Registry(ledger)), after_create=crash)
    with pytest.raises(Crash):
        first.reconcile(body)
    assert len(pods(plane, ns, "cpu-pool")) == 1
    second = Reconciler(api=api, state=RegistryState(Registry(ledger)))
    out = second.reconcile(get_json(plane, "agentpool", "cpu-pool", "-n", ns))
    assert len(out.created) == 4
    assert len(pods(plane, ns, "cpu-pool")) == 5
    again = Reconciler(api=api, state=RegistryState(Registry(ledger))).reconcile(
        get_json(plane, "agentpool", "cpu-pool", "-n", ns))
    assert again.created == [] and again.deleted == []
    assert len(pods(plane, ns, "cpu-pool")) == 5


def test_operator_command_killed_and_restarted_keeps_the_pod_count(
        plane: ControlPlane, ns: str, tmp_path: Path) -> None:
    """``anycloud operator`` as a process: SIGKILL as soon as the first pod exists (mid
    scale-up of 8), start it again: exactly 8 pods, each name once."""
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"provisioners": [{"kubernetes": {"namespace": ns}}]}))
    env = {**os.environ, "ANYCLOUD_HOME": str(tmp_path / "home"),
           "ANYCLOUD_DATABASE_URL": f"sqlite:///{tmp_path / 'ledger.db'}"}
    cmd = [sys.executable, "-c", "from automation.cli import cli; cli()", "operator",
           "--config", str(config), "--kubeconfig", str(plane.kubeconfig),
           "--interval", "0.5", "--json"]
    pool = example("shell-pool.yaml")
    pool["spec"]["autoscaler"].update({"minReplicas": 8, "maxReplicas": 8})
    apply(plane, ns, example("agent-config.yaml"))

    def start() -> subprocess.Popen[str]:
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        assert proc.stdout is not None
        first = json.loads(proc.stdout.readline())
        assert first["event"] == "watching" and first["namespaces"] == [ns]
        return proc

    proc = start()
    try:
        apply(plane, ns, pool)
        eventually(lambda: pods(plane, ns, "shell"), "a first pod", timeout=30)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        made = len(pods(plane, ns, "shell"))
        proc = start()
        eventually(lambda: len(pods(plane, ns, "shell")) == 8, "8 pods after the restart")
        time.sleep(2)
        assert len(pods(plane, ns, "shell")) == 8, f"{made} before the kill"
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()


# -- conditions -------------------------------------------------------------------------------


def test_conditions_name_the_cause(plane: ControlPlane, ns: str, ledger: Ledger) -> None:
    no_config = example("shell-pool.yaml")
    no_config["metadata"]["name"] = "no-config"
    no_image = example("shell-pool.yaml")
    no_image["metadata"]["name"] = "no-image"
    del no_image["spec"]["template"]["spec"]["containers"][0]["image"]
    nowhere = example("shell-pool.yaml")
    nowhere["metadata"]["name"] = "nowhere"
    nowhere["spec"]["template"]["spec"]["nodeSelector"] = {"example.com/none": "x"}
    no_pool = example("shell-pool.yaml")
    no_pool["metadata"]["name"] = "no-node-pool"
    no_pool["spec"]["nodePool"] = "missing-pool"
    for doc in (no_image, nowhere, no_pool, no_config):
        doc["spec"]["template"]["spec"]["containers"][0]["args"] = []
    apply(plane, ns, no_config, no_image, nowhere, no_pool)
    with operator(plane, ledger, ns):
        eventually(lambda: condition(plane, ns, "no-config").get("reason")
                   == "ConfigMapMissing", "ConfigMapMissing")
        assert pods(plane, ns, "no-config") == []
        assert "anycloud-agent-config" in condition(plane, ns, "no-config")["message"]
        apply(plane, ns, example("agent-config.yaml"))
        eventually(lambda: len(pods(plane, ns, "no-config")) == 1,
                   "a pod once the ConfigMap exists")
        eventually(lambda: condition(plane, ns, "no-config").get("reason") == "Reconciled",
                   "Reconciled")

        c = eventually(lambda: condition(plane, ns, "no-image").get("reason")
                       == "TemplateInvalid" and condition(plane, ns, "no-image"),
                       "TemplateInvalid")
        assert "image" in c["message"] and c["status"] == "False"
        c = eventually(lambda: condition(plane, ns, "nowhere").get("reason")
                       == "Unschedulable" and condition(plane, ns, "nowhere"),
                       "Unschedulable")
        assert "node" in c["message"]
        c = eventually(lambda: condition(plane, ns, "no-node-pool").get("reason")
                       == "NodePoolNotFound" and condition(plane, ns, "no-node-pool"),
                       "NodePoolNotFound")
        assert "missing-pool" in c["message"] and pods(plane, ns, "no-node-pool") == []
        # One Warning per change of cause (the ConfigMap was missing first), none repeated.
        warnings = [e["reason"] for e in events(plane, ns, "no-image")
                    if e["type"] == "Warning"]
        assert sorted(warnings) == ["ConfigMapMissing", "TemplateInvalid"], warnings
        described = plane.kubectl("describe", "agentpool", "nowhere", "-n", ns).stdout
        assert "Unschedulable" in described


# -- RBAC ---------------------------------------------------------------------------------------


def _rbac_docs(ns: str, sa_ns: str) -> list[dict[str, Any]]:
    """k8s/rbac/ with the control plane's namespace and the watched one of this test."""
    docs = []
    for path in sorted(RBAC.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc is None or doc["kind"] == "Namespace":
                continue
            if doc["kind"] in ("Role", "RoleBinding"):
                doc["metadata"]["namespace"] = ns
            else:
                doc["metadata"]["namespace"] = sa_ns
            for subject in doc.get("subjects", []):
                subject["namespace"] = sa_ns
            docs.append(doc)
    return docs


def test_operator_runs_under_the_rbac_role_and_shows_forbidden(
        plane: ControlPlane, ns: str, ledger: Ledger, tmp_path: Path) -> None:
    sa_ns = f"anycloud-{secrets.token_hex(3)}"
    plane.kubectl("create", "namespace", sa_ns)
    try:
        docs = _rbac_docs(ns, sa_ns)
        plane.apply(*docs)
        sa = next(d for d in docs if d["kind"] == "ServiceAccount")["metadata"]["name"]
        kubeconfig = plane.token_kubeconfig(tmp_path / "sa.kubeconfig", sa, sa_ns)
        who = f"--as=system:serviceaccount:{sa_ns}:{sa}"
        # The seed's troubleshooting step: the identity may list AgentPools here...
        assert plane.kubectl("auth", "can-i", "list", "agentpools.anycloud.sh", who,
                             "-n", ns).stdout.strip() == "yes"
        # ...and nothing cluster-wide.
        assert plane.kubectl("auth", "can-i", "list", "pods", who, "-A",
                             check=False).stdout.strip() == "no"
        apply(plane, ns, example("agent-config.yaml"), example("shell-pool.yaml"))
        log: list[str] = []
        with operator(plane, ledger, ns, kubeconfig=kubeconfig, log=log):
            eventually(lambda: len(pods(plane, ns, "shell")) == 1, "a pod under the Role")
            eventually(lambda: condition(plane, ns, "shell").get("reason") == "Reconciled",
                       "status written under the Role")
            assert any(e["reason"] == "ScaledUp" for e in events(plane, ns, "shell"))
            # Take `create` on pods away: a new pool shows Forbidden in its status.
            role = next(d for d in docs if d["kind"] == "Role")
            for rule in role["rules"]:
                if rule["resources"] == ["pods"]:
                    rule["verbs"] = [v for v in rule["verbs"] if v != "create"]
            plane.apply(role)
            assert plane.kubectl("auth", "can-i", "create", "pods", who, "-n", ns,
                                 check=False).stdout.strip() == "no"
            cpu = example("cpu-pool.yaml")
            apply(plane, ns, cpu)
            c = eventually(lambda: condition(plane, ns, "cpu-pool").get("reason")
                           == "Forbidden" and condition(plane, ns, "cpu-pool"), "Forbidden")
            assert "create" in c["message"] and "pods" in c["message"], c
            assert pods(plane, ns, "cpu-pool") == []
            # Deleting a pool still works under the Role (finalizer, pods, status).
            plane.kubectl("delete", "agentpool", "shell", "-n", ns, "--timeout=60s")
            eventually(lambda: pods(plane, ns, "shell") == [], "shell's pods deleted")
        assert not [line for line in log if "cannot" in line and "cpu-pool" not in line], log
    finally:
        plane.kubectl("delete", "namespace", sa_ns, "--wait=false", check=False)


def test_a_pool_deleted_mid_pass_is_released_when_the_pass_ends(
        plane: ControlPlane, ns: str, ledger: Ledger, monkeypatch: pytest.MonkeyPatch) -> None:
    """The pool's timer is in the middle of a pass (a sync handler in kopf's thread pool: it
    can only be waited for) when the pool is deleted. kopf keeps the finalizer until the
    timer has exited and, by default, looks again only 60 s later unless another event on
    the pool arrives: the delete of the RBAC test above hung past its 60 s. Here the pass is
    held until the deletion is under way, then let go; it writes nothing (no event), and the
    pool must still go within 30 s."""
    armed, entered, release = threading.Event(), threading.Event(), threading.Event()
    workers = RegistryState.workers

    def held(self: RegistryState, pool: str, now: Any) -> Any:
        if pool == f"{ns}/shell" and armed.is_set():
            armed.clear()
            entered.set()
            release.wait(60)
        return workers(self, pool, now)

    monkeypatch.setattr(RegistryState, "workers", held)
    apply(plane, ns, example("agent-config.yaml"), example("shell-pool.yaml"))
    with operator(plane, ledger, ns):
        eventually(lambda: status(plane, ns, "shell").get("readyReplicas") == 1
                   and condition(plane, ns, "shell").get("reason") == "Reconciled",
                   "one ready pod, Reconciled")
        armed.set()
        try:
            assert entered.wait(30), "no timer pass of the pool began"
            plane.kubectl("delete", "agentpool", "shell", "-n", ns, "--wait=false")
            eventually(lambda: get_json(plane, "agentpool", "shell", "-n", ns)["metadata"]
                       .get("deletionTimestamp"), "the pool marked for deletion")
            time.sleep(1)  # kopf's watch sees it while the pass is held (ordering, not timing)
        finally:
            release.set()
        plane.kubectl("wait", "--for=delete", "agentpool/shell", "-n", ns, "--timeout=30s")
        assert pods(plane, ns, "shell") == []


def test_shipped_rbac_and_deployment_are_accepted(plane: ControlPlane) -> None:
    """k8s/rbac/ applied as shipped, k8s/deploy/control-plane.yaml accepted by the API
    server (server-side dry run: no image to run here), and the seed's `kubectl auth can-i`
    step answered for the shipped ServiceAccount."""
    try:
        plane.kubectl("apply", "-f", str(RBAC))
        done = plane.kubectl("apply", "--dry-run=server", "-f",
                             str(REPO / "k8s" / "deploy" / "control-plane.yaml"))
        assert "deployment.apps/anycloud-control-plane created (server dry run)" in done.stdout
        assert ("networkpolicy.networking.k8s.io/anycloud-control-plane created (server dry run)"
                in done.stdout)
        who = "--as=system:serviceaccount:anycloud:anycloud-control-plane"
        def can(verb: str, what: str, sub: str | None = None) -> str:
            extra = [f"--subresource={sub}"] if sub else []
            return str(plane.kubectl("auth", "can-i", verb, what, *extra, who, "-n", "anycloud",
                                     check=False).stdout.strip())

        for verb, what, sub in (("list", "agentpools.anycloud.sh", None),
                                ("watch", "agentpools.anycloud.sh", None),
                                ("patch", "agentpools.anycloud.sh", "status"),
                                ("create", "pods", None), ("delete", "pods", None),
                                ("get", "configmaps", None), ("create", "events", None),
                                ("get", "secrets", None), ("create", "secrets", None),
                                ("update", "secrets", None)):
            assert can(verb, what, sub) == "yes", (verb, what, sub)
        for verb, what, sub in (("update", "agentpools.anycloud.sh", None),
                                ("update", "agentpools.anycloud.sh", "status"),
                                # The pools' token Secrets are read one by one, by name:
                                # never every Secret of the namespace.
                                ("list", "secrets", None), ("watch", "secrets", None),
                                ("delete", "secrets", None), ("create", "pods", "exec"),
                                ("patch", "pods", None)):
            assert can(verb, what, sub) == "no", (verb, what, sub)
        assert plane.kubectl("auth", "can-i", "list", "pods", who, "-n", "default",
                             check=False).stdout.strip() == "no"
    finally:
        plane.kubectl("delete", "namespace", "anycloud", "--wait=false", check=False)


def test_serve_runs_the_operator_and_the_broker_beside_the_control_loop(
        plane: ControlPlane, ns: str, tmp_path: Path) -> None:
    """``anycloud serve --operator-config ... --broker-listen ...``: one process keeps the
    pool's pods and answers agents; SIGTERM stops all three."""
    import urllib.error
    import urllib.request

    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"provisioners": [{"kubernetes": {"namespace": ns}}]}))
    env = {**os.environ, "ANYCLOUD_HOME": str(tmp_path / "home"),
           "ANYCLOUD_DATABASE_URL": f"sqlite:///{tmp_path / 'ledger.db'}",
           "KUBECONFIG": str(plane.kubeconfig)}
    env.pop("ANYCLOUD_CONFIG", None)
    cmd = [sys.executable, "-c", "from automation.cli import cli; cli()", "serve",
           "--simulate", "--interval", "1", "--operator-config", str(config),
           "--broker-listen", "127.0.0.1:0"]
    pool = example("shell-pool.yaml")
    pool["spec"]["autoscaler"].update({"minReplicas": 2, "maxReplicas": 2})
    apply(plane, ns, example("agent-config.yaml"), pool)
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        url = None
        for _ in range(20):
            line = proc.stderr.readline()
            if "agent broker listening on " in line:
                url = line.split("listening on ")[1].split()[0]
                break
        assert url, "serve did not say where the broker listens"
        eventually(lambda: len(pods(plane, ns, "shell")) == 2, "the pool's 2 pods")
        # The pool's agent token, minted into the Secret its pods read.
        secret = plane.get(f"/api/v1/namespaces/{ns}/secrets/shell-agent-token")
        assert secret["metadata"]["ownerReferences"][0]["name"] == "shell"
        # Closed by default: no token, 401; a viewer's token reads the pool's view.
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"{url}/v1/pools/{ns}/shell", timeout=10)
        assert refused.value.code == 401
        viewer = subprocess.run([*cmd[:3], "token", "create", "dash", "--role", "viewer"],
                                cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
        assert viewer.returncode == 0, viewer.stderr
        request = urllib.request.Request(f"{url}/v1/pools/{ns}/shell", headers={
            "Authorization": f"Bearer {viewer.stdout.strip()}"})
        with urllib.request.urlopen(request, timeout=10) as answer:
            assert json.loads(answer.read())["pool"] == f"{ns}/shell"
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            assert proc.wait(40) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
