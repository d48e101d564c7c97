"""The quick-start run: the whole node-pool lifecycle on the simulators, in a temporary home.

Real services, ledger, stack programs (under the mock engine) and reconciler; a simulated
cloud and cluster on an accelerated clock. Nothing leaves the machine.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from automation.catalog import data_dir
from automation.errors import AnycloudError
from automation.models import WorkloadKind
from automation.reconciler.reconcile import Reconciler
from automation.reconciler.wiring import simulated_ports
from automation.services import credentials, node_pools, pool_status, workloads
from automation.services.context import App
from automation.simulators.world import SimWorld, register_simulated_cluster

Step = Callable[[str, str, dict[str, Any]], None]
STEP = timedelta(seconds=30)

def run_demo(app: App, world: SimWorld, workdir: Path, step: Step) -> list[dict[str, Any]]:
    """Runs the demo; every step is reported through ``step(kind, message, data)``."""
    start = world.clock.now()

    def say(kind: str, message: str, data: dict[str, Any] | None = None) -> None:
        elapsed = int((world.clock.now() - start).total_seconds())
        step(kind, f"[+{elapsed // 60:02d}:{elapsed % 60:02d}] {message}", data or {})

    reconciler = Reconciler(app, simulated_ports(app, world, say), report=say)

    def run_until(done: Callable[[], bool], limit: int = 80) -> None:
        for _ in range(limit):
            reconciler.run_once()
            if done():
                return
            world.advance(STEP)
        raise AnycloudError("the demo did not converge")

    def state(name: str) -> str:
        return str(pool_status.node_pool_status(app.ledger, name).state)

    ca = data_dir() / "demo" / "ca.pem"
    cluster = register_simulated_cluster(app, workdir, "demo")
    say("cluster", f"cluster {cluster.name} registered: {cluster.state} "
        f"(Kubernetes {cluster.kubernetes_version}, CA sha256 {(cluster.ca_sha256 or '')[:12]}…)")
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
    say("node_pool", "node pools cpu-pool (2 x m7i.large, AWS) and gpu-pool (1 x "
        "g2-standard-4, GCP, 1 NVIDIA L4) created: intent stored, the reconciler takes over")

    world.cloud.faults.never_boot_next = 1
    world.cloud.save()
    say("fault", "fault injected: the next VM bought never boots (its Node never appears)")
    run_until(lambda: state("cpu-pool") == "ready" and state("gpu-pool") == "ready")
    say("ready", "both pools ready")

    site = workloads.create_workload(app, "site", "gpu-pool", WorkloadKind.SERVICE)
    say("service", f"service {site.name} placed on gpu-pool: the pool's network now admits "
        "TCP 80 from Cloudflare only, and gets its own Traefik release")
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
    say("node_pool", "deployment web deleted; cpu-pool deleting")
    run_until(lambda: state(cpu.id) == "deleted")
    say("deleted", f"cpu-pool deleted: Nodes removed, VMs released and confirmed, network gone; "
        f"gpu-pool still {state(gpu.id)}")
    return [p.model_dump(mode="json") for p in pool_status.list_node_pools(app.ledger)]
