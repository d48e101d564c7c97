"""The AgentPool end to end with **real agent processes** (issue 11, "Tests").

On the real control plane (``control_plane``: etcd, kube-apiserver, controller-manager,
scheduler, kwok playing the kubelet of a fake Node): the CRD, the example agent ConfigMap
(its ``broker.address`` pointed at this test's broker) and the seed's shell pool with a short
``idleDecaySecond``, in a namespace of the test's own. The operator (kopf in a thread,
``operator.assemble``) and the broker (uvicorn in a thread, ``BrokerThread``) run in-process
over one SQLite ledger, as ``anycloud serve --operator-config --broker-listen`` runs them.

kwok only pretends to run containers, so ``Kubelet`` below plays the container runtime: for
each worker pod kwok reports Running it starts the pod's container as a local process —
``anycloud agent`` with the container's args, its env (``POD_NAME``/``POD_NAMESPACE``
resolved from their fieldRefs) and the ConfigMap volume the operator mounted at
/run/anycloud written to a directory of the pod's own — and SIGTERMs it when the pod is
being deleted, as a kubelet does. Sessions are real ``anycloud session run`` processes.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from automation.agentpools.operator import ControlPlaneConfig, assemble
from automation.agentpools.pods import AGENT_POOL_LABEL, CONFIG_MOUNT, agent_container
from automation.agentpools.registry import Registry
from automation.api.broker import BrokerThread, create_app
from automation.devcluster.control_plane import KWOK_ANNOTATION, ControlPlane
from automation.kube.port import MANAGED_BY, MANAGER
from automation.ledger import open_ledger
from automation.ledger.db import Ledger
from tests.automation.agentpools.cases import CRD, example
from tests.automation.agentpools.session_dirs import sandbox_section, write_config
from tests.automation.agentpools.tokens import agent_token, member_token

pytestmark = [pytest.mark.kube, pytest.mark.slow]

ANYCLOUD = str(Path(sys.executable).with_name("anycloud"))


# -- the cluster, the broker, the operator ------------------------------------------------------


@pytest.fixture(scope="module")
def plane(control_plane: ControlPlane) -> ControlPlane:
    control_plane.kubectl("apply", "-f", str(CRD))
    control_plane.kubectl("wait", "--for=condition=Established", "--timeout=60s",
                          "crd/agentpools.anycloud.sh")
    name = f"e2e-agents-{os.getpid()}"
    control_plane.apply({"apiVersion": "v1", "kind": "Node", "metadata": {
        "name": name, "annotations": {KWOK_ANNOTATION: "fake"},
        "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                   "kubernetes.io/arch": "amd64"}}})
    resources = {"cpu": "1000", "memory": "4Ti", "pods": "1000"}
    control_plane.patch_status("node", name, {"capacity": resources,
                                              "allocatable": resources})
    return control_plane


@pytest.fixture
def ns(plane: ControlPlane) -> Iterator[str]:
    name = f"e2e-{os.urandom(4).hex()}"
    plane.kubectl("create", "namespace", name)
    yield name
    plane.kubectl("delete", "namespace", name, "--wait=false", check=False)


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    led = open_ledger(f"sqlite:///{tmp_path / 'ledger.db'}")
    yield led
    led.dispose()


def eventually(check: Callable[[], Any], what: str, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = check()
            if last:
                return last
        except (AssertionError, KeyError) as exc:
            last = exc
        time.sleep(0.2)
    raise AssertionError(f"{what}: not within {timeout:.0f} s (last: {last!r})")


def apply(plane: ControlPlane, ns: str, *docs: dict[str, Any]) -> None:
    """``kubectl apply`` (client-side, as a user does) of manifests moved into ``ns``."""
    for doc in docs:
        doc["metadata"]["namespace"] = ns
    plane.kubectl("apply", "-n", ns, "-f", "-",
                  input="\n---\n".join(yaml.safe_dump(d) for d in docs))


def pool_pods(plane: ControlPlane, ns: str, pool: str) -> list[dict[str, Any]]:
    """Every pod carrying the pool's label (the operator's and anyone's), not being deleted."""
    items = plane.get(f"/api/v1/namespaces/{ns}/pods?labelSelector={AGENT_POOL_LABEL}%3D{pool}")
    return [p for p in items["items"] if not p["metadata"].get("deletionTimestamp")]


def names(pods: list[dict[str, Any]]) -> set[str]:
    return {p["metadata"]["name"] for p in pods}


# -- the kubelet's part: a container per Running worker pod ------------------------------------


class Kubelet:
    """Runs the agent container of each Running worker pod in ``ns`` as a local process and
    SIGTERMs it once its pod is being deleted (or gone). ``seen``: the most pods of each pool
    alive at once; ``exits``: pod name -> the exit code of its agent."""

    def __init__(self, plane: ControlPlane, ns: str, root: Path) -> None:
        self.plane, self.ns, self.root = plane, ns, root
        # The agents' data dirs: reachable by the session user (tmp_path is not).
        self.data = Path(tempfile.mkdtemp(prefix="anycloud-kubelet-"))
        self.data.chmod(0o711)
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.pool_of: dict[str, str] = {}
        self.signalled: set[str] = set()
        self.seen: dict[str, int] = {}
        self.errors: list[BaseException] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._loop, name="kubelet", daemon=True)

    def __enter__(self) -> Kubelet:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(10)
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs.values():
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        shutil.rmtree(self.data, ignore_errors=True)

    @property
    def exits(self) -> dict[str, int]:
        """Read from the processes themselves, not cached by the loop: an agent's exit is
        seen even if the loop has stopped (its error is in ``errors``)."""
        with self._lock:
            return {n: p.returncode for n, p in self.procs.items() if p.poll() is not None}

    def alive(self, pool: str | None = None) -> set[str]:
        with self._lock:
            return {n for n, p in self.procs.items() if p.poll() is None
                    and (pool is None or self.pool_of[n] == pool)}

    def _loop(self) -> None:
        while not self._stop.wait(0.1):
            try:
                self._sync()
            except BaseException as exc:  # reported by the test, never swallowed
                self.errors.append(exc)
                return

    def _sync(self) -> None:
        selector = f"{MANAGED_BY}%3D{MANAGER}"
        items = self.plane.get(f"/api/v1/namespaces/{self.ns}/pods?labelSelector={selector}")
        present = set()
        live: dict[str, int] = {}
        for pod in items["items"]:
            meta = pod["metadata"]
            name, pool = meta["name"], meta["labels"][AGENT_POOL_LABEL]
            if meta.get("deletionTimestamp"):
                self._terminate(name)
                continue
            present.add(name)
            live[pool] = live.get(pool, 0) + 1
            if (pod.get("status") or {}).get("phase") == "Running" and name not in self.procs:
                self._start(pod)
        for pool, n in live.items():
            self.seen[pool] = max(self.seen.get(pool, 0), n)
        for name in set(self.procs) - present:
            self._terminate(name)

    def _start(self, pod: dict[str, Any]) -> None:
        meta, spec = pod["metadata"], pod["spec"]
        name = meta["name"]
        container = agent_container(spec)
        # The ConfigMap volume mounted at /run/anycloud (if any: with the operator's
        # broker.address the agent has ANYCLOUD_BROKER instead), written where it is read.
        here = self.root / name
        (here / "run-anycloud").mkdir(parents=True, exist_ok=True)
        mount = next((m for m in container.get("volumeMounts") or []
                      if m["mountPath"].rstrip("/") == CONFIG_MOUNT), None)
        if mount is not None:
            volume = next(v for v in spec["volumes"] if v["name"] == mount["name"])
            cm = self.plane.get(f"/api/v1/namespaces/{self.ns}/configmaps/"
                                f"{volume['configMap']['name']}")
            for key, text in cm["data"].items():
                (here / "run-anycloud" / key).write_text(text)
        self._sandbox_here(here / "run-anycloud" / "anycloud.yaml")
        env = {k: v for k, v in os.environ.items() if k != "ANYCLOUD_BROKER"}
        env.update(ANYCLOUD_HOME=str(here / "home"),
                   ANYCLOUD_AGENT_CONFIG=str(here / "run-anycloud" / "anycloud.yaml"))
        fields = {"metadata.name": name, "metadata.namespace": meta["namespace"]}
        for e in container.get("env") or []:
            source = e.get("valueFrom") or {}
            if "secretKeyRef" in source:  # as a kubelet does: a missing Secret or key is
                # CreateContainerConfigError, the container waits (tried again next sync)
                ref = source["secretKeyRef"]
                try:
                    secret = self.plane.get(f"/api/v1/namespaces/{self.ns}/secrets/"
                                            f"{ref['name']}")
                except urllib.error.HTTPError as exc:
                    if exc.code == 404:
                        return
                    raise
                if ref["key"] not in (secret.get("data") or {}):
                    return
                env[e["name"]] = base64.b64decode(secret["data"][ref["key"]]).decode()
            elif "fieldRef" in source:
                env[e["name"]] = fields[source["fieldRef"]["fieldPath"]]
            else:
                env[e["name"]] = e["value"]
        argv = [ANYCLOUD, "agent", *container.get("args", []), "--heartbeat-interval", "0.3s",
                "--grace", "5s", "--data-dir", str(self.data / name)]
        with open(here / "agent.log", "wb") as log, self._lock:
            self.procs[name] = subprocess.Popen(argv, env=env, stdout=log, stderr=log,
                                                stdin=subprocess.DEVNULL)
            self.pool_of[name] = meta["labels"][AGENT_POOL_LABEL]

    @staticmethod
    def _sandbox_here(path: Path) -> None:
        """Where the agent cannot switch user (not root), sessions run only with the unsafe
        opt-in: added to the pod's config (made when the pod mounts none)."""
        extra = sandbox_section()
        if not extra:
            return
        config = yaml.safe_load(path.read_text()) if path.exists() else {}
        config["sandbox_config"] = {**(config.get("sandbox_config") or {}), **extra}
        path.write_text(yaml.safe_dump(config))

    def _terminate(self, name: str) -> None:
        proc = self.procs.get(name)
        if proc is not None and name not in self.signalled:
            self.signalled.add(name)
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)

    def log(self, name: str) -> str:
        return (self.root / name / "agent.log").read_text(errors="replace")


# -- the test -------------------------------------------------------------------------------


def session(url: str, ns: str, *command: str, token: str, json_out: bool = False
            ) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [ANYCLOUD, "session", "run", "--pool", "shell", "--namespace", ns, "--broker", url,
         *(["--json"] if json_out else []), "--", *command],
        env=dict(os.environ, ANYCLOUD_TOKEN=token),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_real_agents_serve_scale_decay_and_leave_with_their_pool(
        plane: ControlPlane, ns: str, ledger: Ledger, tmp_path: Path) -> None:
    registry = Registry(ledger)
    broker = BrokerThread(create_app(registry, heartbeat_timeout=timedelta(seconds=5),
                                     expire_every=1.0), "127.0.0.1:0")
    config = ControlPlaneConfig.model_validate({"provisioners": [{"kubernetes": {
        "namespace": ns}}]})
    op = assemble(config, ledger, kubeconfig=plane.kubeconfig, interval=0.5)
    key = f"{ns}/shell"
    member = member_token(ledger)
    try:
        # The example ConfigMap, its broker address this test's broker (host:port, the seed's
        # shape); the shell pool as shipped but for a 2 s idle decay; a second pool (same
        # template, another name) and a pod of nobody's with the shell label: neither is the
        # shell pool's to touch.
        agent_config = example("agent-config.yaml")
        text = yaml.safe_load(agent_config["data"]["anycloud.yaml"])
        text["broker"]["address"] = broker.url.removeprefix("http://")
        agent_config["data"]["anycloud.yaml"] = yaml.safe_dump(text)
        shell = example("shell-pool.yaml")
        shell["spec"]["autoscaler"]["idleDecaySecond"] = 2
        assert shell["spec"]["autoscaler"] == {"minIdle": 1, "maxIdle": 2, "maxReplicas": 4,
                                               "idleDecaySecond": 2}
        other = example("shell-pool.yaml")
        other["metadata"]["name"] = "other"
        other["spec"]["template"]["spec"]["containers"][0]["args"] = ["--pool=other"]
        decoy = {"apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": "decoy", "labels": {AGENT_POOL_LABEL: "shell"}},
            "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}}
        apply(plane, ns, agent_config, shell, other, decoy)
        op.start()
        with Kubelet(plane, ns, tmp_path / "pods") as kubelet:
            # minIdle 1: one pod each, kwok runs it, its agent registers from the ConfigMap.
            eventually(lambda: registry.pool_view(key).ready_agents == 1
                       and registry.pool_view(f"{ns}/other").ready_agents == 1,
                       "one ready agent in each pool")
            first = next(iter(kubelet.alive("shell")))
            assert {a.id for a in registry.pool_view(key).agents} == {first}
            assert registry.pool_view(key).agents[0].pod_name == first

            # One session: its output comes back, its exit code is the command's.
            hi = session(broker.url, ns, "sh", "-c", "echo hi; exit 3", token=member)
            out, err = hi.communicate(timeout=60)
            assert (hi.returncode, out) == (3, "hi\n"), err

            # Four sessions at once, each holding its slot until told to go: the pool scales
            # up to maxReplicas 4 (never past it), the new pods' agents register and every
            # session runs, on four different agents.
            # Sessions run as another user than the test: a directory it may write (sticky
            # and world-writable, as /tmp), under the agents' reachable data root.
            gate = kubelet.data / "gate"
            gate.mkdir()
            gate.chmod(0o1777)
            hold = ('echo "s$0 on $ANYCLOUD_AGENT_ID"; touch "$1/started-$0"; '
                    'while [ ! -e "$1/go" ]; do sleep 0.1; done')
            burst = [session(broker.url, ns, "sh", "-c", hold, str(i), str(gate),
                             token=member, json_out=True) for i in range(4)]
            eventually(lambda: len(list(gate.glob("started-*"))) == 4,
                       "four sessions running at once", timeout=45)
            view = registry.pool_view(key)
            assert (view.ready_agents, view.busy_slots, view.pending_sessions) == (4, 4, 0)
            assert len(pool_pods(plane, ns, "shell")) == 4 + 1  # and the decoy
            (gate / "go").touch()
            ran = []
            for i, proc in enumerate(burst):
                out, err = proc.communicate(timeout=60)
                assert proc.returncode == 0, err
                lines = [json.loads(line) for line in out.splitlines()]
                assert lines[0]["data"].startswith(f"s{i} on shell-"), lines
                ran.append(lines[-1]["session"]["agentId"])
                assert lines[0]["data"] == f"s{i} on {ran[-1]}\n"  # the agent's id: its pod
            assert len(set(ran)) == 4 and set(ran) <= kubelet.alive("shell")
            assert kubelet.seen["shell"] == 4

            # Idle again: after idleDecaySecond the idle agents decay until idle slots are
            # within minIdle..maxIdle (1..2): two pods stay. The deleted pods' agents get
            # SIGTERM, drain, deregister and exit 0.
            eventually(lambda: len(kubelet.alive("shell")) == 2
                       and len(pool_pods(plane, ns, "shell")) == 2 + 1,
                       "decayed to 2 agents (maxIdle 2)")
            decayed = set(ran) - kubelet.alive("shell")
            assert len(decayed) >= 2
            eventually(lambda: all(kubelet.exits.get(n) == 0 for n in decayed),
                       "the decayed agents exited 0")
            eventually(lambda: {a.id for a in registry.pool_view(key).agents}
                       == kubelet.alive("shell"), "the registry lists the 2 left")
            # Settled: it stays at 2 for several decay periods (no flapping).
            until = time.monotonic() + 5
            while time.monotonic() < until:
                assert len(pool_pods(plane, ns, "shell")) == 3
                time.sleep(0.25)
            assert registry.pool_view(key).idle_slots == 2

            # kubectl delete agentpool: exactly its pods go and their agents leave; the other
            # pool's pod and agent and the decoy stay.
            left = kubelet.alive("shell")
            kept = kubelet.alive("other")
            plane.kubectl("delete", "agentpool", "shell", "-n", ns, "--timeout=60s")
            eventually(lambda: names(pool_pods(plane, ns, "shell")) == {"decoy"},
                       "shell's pods deleted, the decoy kept")
            eventually(lambda: not kubelet.alive("shell")
                       and all(kubelet.exits.get(n) == 0 for n in left),
                       "shell's agents exited 0")
            assert not [a for a in registry.pool_view(key).agents if a.state != "gone"]
            assert kubelet.alive("other") == kept
            assert names(pool_pods(plane, ns, "other")) == kept
            assert registry.pool_view(f"{ns}/other").ready_agents == 1
            assert not kubelet.errors, kubelet.errors
    finally:
        op.stop()
        broker.stop()


def test_a_retired_agent_takes_no_session_before_its_sigterm(
        ledger: Ledger, tmp_path: Path, agent_data: Path) -> None:
    """No cluster needed: the broker, one real agent process, and the operator's retire step
    done directly; no SIGTERM is sent. Told 410 on its next heartbeat, the agent does not
    register again: it takes no session and exits 0 by itself. A new agent on the same pod
    name (another id: the pod restarted) still registers and takes the session."""
    registry = Registry(ledger)
    registry.observe_pool("default/shell", "uid-1", 1, "Reconciled")  # as its operator would
    broker = BrokerThread(create_app(registry), "127.0.0.1:0")
    token = agent_token(ledger, "default/shell")
    config = write_config(tmp_path / "anycloud.yaml")

    def start(agent_id: str) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [ANYCLOUD, "agent", "--pool", "default/shell", "--broker", broker.url,
             "--agent-id", agent_id, "--heartbeat-interval", "0.3s", "--grace", "5s",
             "--data-dir", str(agent_data / agent_id), "--config", str(config), "--json"],
            env=dict(os.environ, POD_NAME="shell-abcde", ANYCLOUD_HOME=str(tmp_path / "home"),
                     ANYCLOUD_AGENT_TOKEN=token),
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)

    agent = start("shell-abcde")
    successor: subprocess.Popen[bytes] | None = None
    try:
        eventually(lambda: registry.pool_view("default/shell").ready_agents == 1,
                   "the agent ready")
        assert registry.retire_if_idle("default/shell", "shell-abcde")
        assert agent.wait(30) == 0, "the retired agent exits 0 without a SIGTERM"
        assert registry.pool_view("default/shell").ready_agents == 0
        assert agent.stdout is not None
        events = [json.loads(line)["event"] for line in agent.stdout.read().splitlines()]
        assert events.count("registered") == 1 and "retired" in events, events
        s = registry.acquire("default/shell", ["true"])
        assert s.state == "pending" and s.agent_id is None
        successor = start("shell-abcde-2")
        done = eventually(lambda: registry.session(s.id).state == "done"
                          and registry.session(s.id), "the successor ran the session")
        assert done.agent_id == "shell-abcde-2"
    finally:
        for proc in (agent, successor):
            if proc is not None and proc.poll() is None:
                proc.terminate()
                proc.wait(30)
        broker.stop()
