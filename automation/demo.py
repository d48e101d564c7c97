"""The quick-start run: the whole node-pool lifecycle in a temporary home.

One narrative (``run_demo``), two cluster sides:

* ``SimulatedSide`` (the default): real services, ledger, stack programs (under the mock
  engine) and reconciler; a simulated cloud and cluster on an accelerated clock. Nothing
  leaves the machine and nothing but Python is needed.
* ``LocalSide`` (``anycloud demo --cluster local``): the cluster is a real local control
  plane (``automation.devcluster``: etcd, kube-apiserver, controller-manager, scheduler,
  kwok playing the kubelets), registered through the real probe and reached through the
  real ``KubernetesCluster`` adapter; the cluster add-on stack runs on the real Pulumi
  engine; the simulated VMs' kubelets register their Nodes there
  (``automation.devcluster.kubelets``). Node-pool stacks run on the real engine too: their
  bootstrap-token Secrets go to the API server through the real kubernetes plugin, their
  networks and VMs to the simulated cloud through the stand-in aws/gcp/azure-native plugins
  (``automation.simulators.standin``), which this process serves the cloud to.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from automation.app import App
from automation.catalog.store import data_dir
from automation.devcluster.engine_env import EngineSession, LocalTools, local_tools
from automation.engine.runner import StackKind
from automation.errors import AnycloudError
from automation.models import Cluster, WorkloadKind
from automation.reconciler.reconcile import Ports, Reconciler
from automation.services import credentials, node_pools, pool_status, workloads
from automation.simulators.ports import local_ports, simulated_ports
from automation.simulators.world import SIM_SERVER, SimWorld, register_simulated_cluster

if TYPE_CHECKING:
    from automation.devcluster.control_plane import ControlPlane
    from automation.devcluster.kubelets import Kubelets
    from automation.engine.runner import ProgressSink, RunResult, StackRunner, StackTarget
    from automation.models import DriftChange

Step = Callable[[str, str, dict[str, Any]], None]
STEP = timedelta(seconds=30)


class Say(Protocol):
    """A step reporter whose data may be left out; the message gets the elapsed time."""

    def __call__(self, kind: str, message: str, data: dict[str, Any] | None = None) -> None: ...


class ClusterSide(Protocol):
    """What differs between the demo's cluster sides; ``run_demo`` tells the rest."""

    description: str  # one line: what is real, what is simulated
    traefik_note: str  # where the Service's Traefik release goes

    def prepare(self, world: SimWorld) -> None:
        """Before the narrative starts (and its clock is read)."""

    def open(self, app: App, world: SimWorld, workdir: Path, say: Say) -> Cluster:
        """Start what the side needs; the registered cluster record."""

    def ports(self, app: App, world: SimWorld, say: Say) -> Ports: ...

    def advance(self, world: SimWorld, delta: timedelta) -> None:
        """Move the simulated clock on between two reconciler passes."""

    def finish(self, say: Say) -> None:
        """After the narrative: report what the cluster really holds."""

    def close(self, say: Say) -> None:
        """Always called (also on an error or Ctrl-C): stop what ``open`` started."""


def run_demo(app: App, world: SimWorld, workdir: Path, step: Step,
             side: ClusterSide | None = None) -> list[dict[str, Any]]:
    """Runs the demo; every step is reported through ``step(kind, message, data)``."""
    side = side or SimulatedSide()
    side.prepare(world)
    start = world.clock.now()

    def say(kind: str, message: str, data: dict[str, Any] | None = None) -> None:
        elapsed = int((world.clock.now() - start).total_seconds())
        step(kind, f"[+{elapsed // 60:02d}:{elapsed % 60:02d}] {message}", data or {})

    try:
        cluster = side.open(app, world, workdir, say)
        pools = _narrative(app, world, cluster, side, say)
        side.finish(say)
        return pools
    finally:
        side.close(say)


def _narrative(app: App, world: SimWorld, cluster: Cluster, side: ClusterSide,
               say: Say) -> list[dict[str, Any]]:
    reconciler = Reconciler(app, side.ports(app, world, say), report=say)

    def run_until(done: Callable[[], bool], limit: int = 80) -> None:
        for _ in range(limit):
            reconciler.run_once()
            if done():
                return
            side.advance(world, STEP)
        raise AnycloudError("the demo did not converge")

    def state(name: str) -> str:
        return str(pool_status.node_pool_status(app.ledger, name).state)

    ca = data_dir() / "demo" / "ca.pem"
    uid = f", kube-system UID {cluster.kube_system_uid}" if cluster.kube_system_uid else ""
    say("cluster", f"cluster {cluster.name} registered: {cluster.state} "
        f"(Kubernetes {cluster.kubernetes_version}, CA sha256 {(cluster.ca_sha256 or '')[:12]}…"
        f"{uid})")
    for name, provider, options in (
        ("team-aws", "aws", {"profile": "default"}),
        ("team-gcp", "gcp", {"project": "demo-project", "key_file": str(ca)}),
    ):
        credentials.new_credential(app, credentials.NewCredential(name, provider, options))
        say("credential", f"credential {name}: a reference to {provider} "
            f"{', '.join(f'{k}={v}' for k, v in options.items())}")

    try:
        node_pools.create_node_pool(app, node_pools.CreateNodePool(
            name="arm", credentials="team-aws", region="us-east-1", vm_type="m7g.large",
            min_vms=1, max_vms=1))
    except AnycloudError as err:
        say("refused", f"create refused, as it should be: {err.message}", err.to_dict())

    cpu = node_pools.create_node_pool(app, node_pools.CreateNodePool(
        name="cpu-pool", credentials="team-aws", region="us-east-1", vm_type="m7i.large",
        min_vms=2, max_vms=2))
    gpu = node_pools.create_node_pool(app, node_pools.CreateNodePool(
        name="gpu-pool", credentials="team-gcp", region="us-central1", vm_type="g2-standard-4",
        min_vms=1, max_vms=1))
    say("nodePool", "node pools cpu-pool (2 x m7i.large, AWS) and gpu-pool (1 x "
        "g2-standard-4, GCP, 1 NVIDIA L4) created: intent stored, the reconciler takes over")

    world.cloud.faults.never_boot_next = 1
    world.cloud.save()
    say("fault", "fault injected: the next VM bought never boots (its Node never appears)")
    run_until(lambda: state("cpu-pool") == "ready" and state("gpu-pool") == "ready")
    say("ready", "both pools ready")

    site = workloads.create_workload(app, "site", "gpu-pool", WorkloadKind.SERVICE)
    say("service", f"service {site.name} placed on gpu-pool: the pool's network now admits "
        f"TCP 80 from Cloudflare only, {side.traefik_note}")
    run_until(lambda: pool_status.node_pool_status(app.ledger, gpu.id).ingress_entry_ip
              is not None)
    say("ingress", "gpu-pool ingress entry: "
        f"{pool_status.node_pool_status(app.ledger, gpu.id).ingress_entry_ip}")

    web = workloads.create_workload(app, "web", "cpu-pool", WorkloadKind.DEPLOYMENT)
    say("deployment", f"deployment {web.name} placed on cpu-pool")
    try:
        node_pools.delete_node_pool(app, "cpu-pool")
    except AnycloudError as err:
        say("refused", f"delete refused, as it should be: {err.message}", err.to_dict())
    workloads.delete_workload(app, "web")
    node_pools.delete_node_pool(app, "cpu-pool")
    say("nodePool", "deployment web deleted; cpu-pool deleting")
    run_until(lambda: state(cpu.id) == "deleted")
    say("deleted", f"cpu-pool deleted: Nodes removed, VMs released and confirmed, network gone; "
        f"gpu-pool still {state(gpu.id)}")
    return [p.model_dump(mode="json") for p in pool_status.list_node_pools(app.ledger)]


# -- the simulated cluster (the default) ----------------------------------------------------


class SimulatedSide:
    description = "simulated cloud and cluster, mock Pulumi engine, accelerated clock"
    traefik_note = "and gets its own Traefik release"

    def prepare(self, world: SimWorld) -> None:
        pass

    def open(self, app: App, world: SimWorld, workdir: Path, say: Say) -> Cluster:
        return register_simulated_cluster(app, workdir, "demo")

    def ports(self, app: App, world: SimWorld, say: Say) -> Ports:
        return simulated_ports(app, world, say)

    def advance(self, world: SimWorld, delta: timedelta) -> None:
        world.advance(delta)

    def finish(self, say: Say) -> None:
        pass

    def close(self, say: Say) -> None:
        pass


# -- a real local control plane -------------------------------------------------------------

# The public address agents would join (RFC 5737 documentation range): the local API server
# listens on loopback, which a cluster record refuses as a join address.
PUBLIC_SERVER = SIM_SERVER
DAEMONSET_WAIT = 20.0  # seconds, real time: the DaemonSet controller's status at the end


class ReportingRunner:
    """A runner saying what the real engine did (engine, stack, changes, seconds), and for a
    node-pool stack whose cloud it is (``cloud``: the stand-in's label); everything else is
    the wrapped runner's."""

    def __init__(self, runner: StackRunner, say: Say, cloud: str | None = None) -> None:
        self.runner = runner
        self.say = say
        self.cloud = cloud
        self.home = getattr(runner, "home", None)

    @property
    def engine(self) -> Literal["pulumi", "mock"]:
        return self.runner.engine

    @property
    def cloud_label(self) -> str | None:
        return getattr(self.runner, "cloud_label", None)

    def _told(self, result: RunResult, began: float) -> RunResult:
        seconds = time.monotonic() - began
        counts = result.summary.model_dump()
        changes = ", ".join(f"{n} {op}" for op, n in counts.items() if n) or "no changes"
        cloud = self.cloud if result.stack.startswith(f"{StackKind.NODE_POOL}-") else None
        self.say("engine", f"{result.engine} engine{f', {cloud}' if cloud else ''}: "
                 f"{result.operation} of stack {result.stack}: {changes} ({seconds:.1f} s)",
                 {"engine": result.engine, "operation": result.operation,
                  "stack": result.stack, "summary": counts, "seconds": round(seconds, 2),
                  **({"cloud": cloud} if cloud else {})})
        return result

    def preview(self, target: StackTarget, *, diff: bool = False,
                on_progress: ProgressSink | None = None) -> RunResult:
        return self.runner.preview(target, diff=diff, on_progress=on_progress)

    def up(self, target: StackTarget, *, on_progress: ProgressSink | None = None) -> RunResult:
        began = time.monotonic()
        return self._told(self.runner.up(target, on_progress=on_progress), began)

    def refresh(self, target: StackTarget, *,
                on_progress: ProgressSink | None = None) -> RunResult:
        began = time.monotonic()
        return self._told(self.runner.refresh(target, on_progress=on_progress), began)

    def destroy(self, target: StackTarget, *,
                on_progress: ProgressSink | None = None) -> RunResult:
        began = time.monotonic()
        return self._told(self.runner.destroy(target, on_progress=on_progress), began)

    def adopt(self, target: StackTarget, *,
              on_progress: ProgressSink | None = None) -> RunResult:
        began = time.monotonic()
        return self._told(self.runner.adopt(target, on_progress=on_progress), began)

    def lookup_vms(self, target: StackTarget, attempt_ids: list[str]) -> dict[str, str]:
        return self.runner.lookup_vms(target, attempt_ids)

    def unlock(self, target: StackTarget) -> bool:
        return self.runner.unlock(target)

    def check_drift(self, target: StackTarget) -> list[DriftChange]:
        return self.runner.check_drift(target)


class LocalSide:
    _PLANE = ("a real local control plane (etcd, kube-apiserver, controller-manager, "
              "scheduler; kwok plays the kubelets) and the real Pulumi engine for ")
    description = (
        _PLANE + "every stack: the cluster add-ons, the pools' Traefik releases, and the node "
        "pools, whose cloud resources go to a simulated cloud through stand-in "
        "aws/gcp/azure-native plugins (stand-in cloud) and whose bootstrap-token Secrets go "
        "to the API server; accelerated clock")
    mock_pools_description = (
        _PLANE + "the cluster add-ons and the pools' Traefik releases; node-pool stacks on the "
        "mock engine over the simulated cloud (their bootstrap-token Secrets are not written "
        "to the API server); accelerated clock")
    traefik_note = ("and its own Traefik HelmChart is applied to the API server by the real "
                    "engine (no helm-controller runs locally to install it)")

    def __init__(self, tools: LocalTools | None = None, *, real_pools: bool = True) -> None:
        """``real_pools``: node-pool stacks on the real engine with the stand-in cloud
        plugins (False: on the mock engine over the simulated cloud)."""
        self.tools = tools
        self.real_pools = real_pools
        if not real_pools:
            self.description = self.mock_pools_description
        self.plane: ControlPlane | None = None
        self.kubelets: Kubelets | None = None
        self._session: EngineSession | None = None  # the engine environment, until close

    def prepare(self, world: SimWorld) -> None:
        """The simulated clock starts at the wall clock's time, so that what the ledger and
        the API server stamp agree when the demo starts; it then runs ahead (30 s a pass)."""
        from automation.clock import SystemClock

        now = SystemClock().now().replace(microsecond=0)
        if now > world.clock.now():
            world.clock.advance(now - world.clock.now())

    def open(self, app: App, world: SimWorld, workdir: Path, say: Say) -> Cluster:
        from automation.devcluster import control_plane
        from automation.devcluster.kubelets import Kubelets
        from automation.models import ClusterState
        from automation.services.clusters import RegisterCluster, register_cluster
        from automation.simulators.standin import LABEL, PACKAGES, STANDIN_VERSION

        tools = self.tools or local_tools()
        # The stand-ins, and the simulated cloud served to them, for node pools on the real
        # engine.
        self._session = EngineSession(tools, workdir, world.cloud if self.real_pools else None)
        pulumi_home = self._session.pulumi_home
        plugins = {"kubernetes": tools.plugin_version}
        if self.real_pools:
            plugins.update(dict.fromkeys(PACKAGES, STANDIN_VERSION))
        what = (f"every stack: {tools.pulumi}, kubernetes provider plugin "
                f"{tools.plugin_version} and the {LABEL} plugins ({', '.join(PACKAGES)} "
                f"{STANDIN_VERSION})" if self.real_pools else
                f"the cluster add-ons and ingress releases (node pools on the mock engine): "
                f"{tools.pulumi}, kubernetes provider plugin {tools.plugin_version}")
        say("engine", f"real Pulumi engine for {what} installed in {pulumi_home}",
            {"pulumi": str(tools.pulumi), "plugins": plugins, "pulumiHome": str(pulumi_home),
             **({"cloud": LABEL} if self.real_pools else {})})

        began = time.monotonic()
        self.plane = plane = control_plane.start(workdir / "control-plane")
        seconds = time.monotonic() - began
        timings = ", ".join(f"{k} {v:.1f} s" for k, v in plane.timings.items())
        say("controlPlane", f"local control plane started in {seconds:.1f} s at {plane.server} "
            f"({timings})",
            {"server": plane.server, "root": str(plane.root), "startSeconds": round(seconds, 2),
             "timings": {k: round(v, 2) for k, v in plane.timings.items()},
             "pids": {name: proc.pid for name, proc in plane.processes.items()}})

        # The real probe reads the version and the kube-system UID; the CA hash comes from
        # the kubeconfig.
        cluster = register_cluster(app, RegisterCluster(
            name="demo", kubeconfig=plane.kubeconfig, server_url=PUBLIC_SERVER))
        if cluster.state is not ClusterState.READY:
            raise AnycloudError(f"the local cluster was registered {cluster.state}: "
                                f"{cluster.last_error}", code="CONTROL_PLANE_FAILED")
        world.detach_cluster()
        self.kubelets = Kubelets(plane.kubeconfig, world.clock, server_url=cluster.server_url,
                                 ca_sha256=cluster.ca_sha256 or "", report=say,
                                 catalog=app.catalog)
        self.kubelets.attach(world.cloud)
        return cluster

    def ports(self, app: App, world: SimWorld, say: Say) -> Ports:
        from automation.engine.pulumi_driver import AutomationRunner

        # Built inside the engine environment: the runner keeps a copy of it.
        from automation.simulators.standin import LABEL

        runner = ReportingRunner(
            AutomationRunner(app.home, cloud_label=LABEL if self.real_pools else None), say,
            cloud=LABEL)
        return local_ports(app, world, say, addons_runner=runner,
                           pools_runner=runner if self.real_pools else None)

    def advance(self, world: SimWorld, delta: timedelta) -> None:
        assert self.kubelets is not None
        self.kubelets.settle()  # what the cluster does on its own has happened
        world.advance(delta)
        self.kubelets.sync()  # VMs booted by now join

    def finish(self, say: Say) -> None:
        assert self.kubelets is not None and self.plane is not None
        self.kubelets.settle()
        deadline = time.monotonic() + DAEMONSET_WAIT
        while True:
            snap = self.kubelets.snapshot()
            ds = snap["daemonSet"]
            if ds is None or ds["ready"] >= ds["desired"] or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        say("apiServer", _api_server_message(snap), snap)

    def close(self, say: Say) -> None:
        try:
            if self.kubelets is not None:
                self.kubelets.close()
            if self.plane is not None:
                pids = {name: proc.pid for name, proc in self.plane.processes.items()}
                self.plane.stop()
                self.plane = None
                say("controlPlane", f"local control plane stopped ({len(pids)} processes)",
                    {"pids": pids, "stopped": True})
        finally:
            if self._session is not None:
                self._session.close()
                self._session = None


def _api_server_message(snap: dict[str, Any]) -> str:
    nodes = snap["nodes"]
    parts = [f"the API server ({snap['server']}) lists {len(nodes)} Node(s)"
             + (": " if nodes else "")
             + "; ".join(
                 f"{n['name']} (pool {n['labels'].get('anycloud.sh/node-pool', '?')}, "
                 f"{'Ready' if n['ready'] else 'NotReady'}, {n['gpus']} nvidia.com/gpu"
                 + (", ingress entry" if "anycloud.sh/ingress-entry" in n["labels"] else "")
                 + ")" for n in nodes)]
    if snap["deletedNodes"]:
        parts.append(f"{len(snap['deletedNodes'])} Node(s) registered during the demo are gone "
                     f"(GET answers 404): {', '.join(snap['deletedNodes'])}")
    ds = snap["daemonSet"]
    if ds is not None:
        parts.append(f"DaemonSet {ds['namespace']}/{ds['name']}: {ds['ready']}/{ds['desired']} "
                     f"ready, written by {', '.join(ds['managers'])}")
    if snap["runtimeClass"] is not None:
        parts.append(f"RuntimeClass {snap['runtimeClass']['name']}")
    return "; ".join(parts)
