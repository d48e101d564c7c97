"""A simulated world: one clock, a cloud and a cluster that see each other.

A VM the cloud creates boots and its agent joins the cluster (unless it never boots); a VM
it deletes takes its Node down. With a directory, every part is persisted there, so a
reconciler killed mid-step and started again in a new process finds the same world.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from automation.app import App
from automation.catalog.store import data_dir, load_catalog
from automation.clock import SIMULATED_CLOCK, PersistedClock, SystemClock
from automation.models import Cluster
from automation.services.clusters import RegisterCluster, register_cluster
from automation.simulators.cloud import CloudSimulator, SimVm
from automation.simulators.cluster import NodeBehaviour, SimulatedCluster

START = datetime(2026, 6, 1, 9, 0, tzinfo=UTC)
# A documentation address (RFC 5737): the simulated cluster's API server, never contacted.
SIM_SERVER = "https://203.0.113.10:6443"
SIM_KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters:
- name: sim
  cluster:
    server: {server}
    certificate-authority: {ca}
contexts:
- name: sim
  context: {{cluster: sim, user: sim}}
current-context: sim
users:
- name: sim
  user: {{token: not-a-secret}}
"""
PROVIDER_OF = {"aws:": "aws", "gcp:": "gcp", "azure-native:": "azure"}


def register_simulated_cluster(app: App, workdir: Path, name: str = "prod") -> Cluster:
    """A ready cluster record for the simulators: a kubeconfig naming a documentation
    address, the throw-away demo CA, and offline facts (nothing is contacted)."""
    ca = data_dir() / "demo" / "ca.pem"
    kubeconfig = workdir / f"{name}-kubeconfig.yaml"
    kubeconfig.write_text(SIM_KUBECONFIG.format(server=SIM_SERVER, ca=ca))
    return register_cluster(app, RegisterCluster(
        name=name, kubeconfig=kubeconfig, kubernetes_version="v1.36.2+k3s1", ca_file=ca,
        offline=True))


class SimWorld:
    def __init__(self, root: Path | None = None, *,
                 node_behaviour: NodeBehaviour | None = None) -> None:
        self.root = root
        # A world kept in a home starts at the wall clock, so that what the home recorded
        # before the world existed (the pool's creation) is older than its first pass.
        self.clock = PersistedClock(root / SIMULATED_CLOCK.name if root else None,
                                    START if root is None else _now_to_the_second())
        self.clock.save()
        self.cloud = CloudSimulator(self.clock, root / "cloud.json" if root else None)
        cluster_path = root / "cluster.json" if root else None
        if cluster_path is not None and cluster_path.exists():
            self.cluster = SimulatedCluster.load(cluster_path, self.clock)
        else:
            self.cluster = SimulatedCluster(self.clock, path=cluster_path)
        if node_behaviour is not None:
            self.cluster.default_behaviour = node_behaviour
        self.cloud.on_vm_created.append(self._boot)
        self.cloud.on_vm_deleted.append(self._release)

    def detach_cluster(self) -> None:
        """The simulated cluster stops hearing of the cloud's VMs: another cluster side
        joins them instead (``anycloud demo --cluster local``: kubelets on a real API
        server, ``automation.devcluster.kubelets``)."""
        self.cloud.on_vm_created.remove(self._boot)
        self.cloud.on_vm_deleted.remove(self._release)

    def _release(self, vm: SimVm) -> None:
        # A VM replaced create-before-delete (a new bootstrap token) shares its attempt, and
        # so its Node's name, with the VM that replaced it: the Node is the new VM's kubelet's
        # now, and the old VM's end leaves it be.
        if any(other.attempt_id == vm.attempt_id and other.id != vm.id
               and other.state == "running" for other in self.cloud.vms.values()):
            return
        self.cluster.release_vm(vm.attempt_id)

    def _boot(self, vm: SimVm) -> None:
        import hashlib

        from components.naming import node_name

        # The stack wrote the VM's bootstrap-token Secret (labelled with its attempt) with it.
        token_id = hashlib.sha256(vm.attempt_id.encode()).hexdigest()[:6]
        self.cluster.add_token(token_id, vm.attempt_id)

        provider = next((p for prefix, p in PROVIDER_OF.items()
                         if vm.resource_type.startswith(prefix)), "aws")
        spec = load_catalog().providers[provider].vm_type(vm.vm_type)
        gpus = spec.gpus if spec else 0
        behaviour = None if vm.boots else NodeBehaviour(join_after=None)
        self.cluster.announce_vm(vm.attempt_id, vm.pool_id, vm.cluster_id,
                                 node_name(vm.attempt_id), gpus, "nvidia" if gpus else None,
                                 provider=provider, behaviour=behaviour)

    def advance(self, delta: timedelta) -> None:
        self.clock.advance(delta)


def simulated_app(root: Path, ledger_url: str | None = None) -> tuple[App, SimWorld]:
    """What a pass on the simulators needs: a ledger (SQLite under ``root`` unless given),
    the world whose clock the app reads, and a registered simulated cluster."""
    from automation.ledger import open_ledger

    world = SimWorld()
    app = App(ledger=open_ledger(ledger_url or f"sqlite:///{root / 'a.db'}"),
              clock=world.clock, home=root / "home")
    register_simulated_cluster(app, root)
    return app, world


def _now_to_the_second() -> datetime:
    return SystemClock().now().replace(microsecond=0)
