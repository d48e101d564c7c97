"""The quick-start run: a cluster record and a node pool in a temporary home.

It uses the real services and ledger with offline cluster facts, so it runs anywhere.
Later issues grow it into the full simulated lifecycle (VMs, Nodes, deletion).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from automation.catalog import data_dir
from automation.errors import AnycloudError
from automation.models import WorkloadKind
from automation.services import clusters, credentials, node_pools, pool_status, workloads
from automation.services.context import App

Step = Callable[[str, str, dict[str, object]], None]

DEMO_KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters:
- name: demo
  cluster:
    server: https://203.0.113.10:6443
    certificate-authority: {ca}
contexts:
- name: demo
  context: {{cluster: demo, user: demo}}
current-context: demo
users:
- name: demo
  user: {{token: demo-not-a-secret}}
"""


def run_demo(app: App, workdir: Path, step: Step) -> dict[str, object]:
    """Runs the demo against ``app`` and reports each step through ``step(kind, message, data)``."""
    ca = data_dir() / "demo" / "ca.pem"
    kubeconfig = workdir / "kubeconfig.yaml"
    kubeconfig.write_text(DEMO_KUBECONFIG.format(ca=ca))

    cluster = clusters.register_cluster(app, clusters.RegisterCluster(
        name="demo", kubeconfig=kubeconfig, kubernetes_version="v1.36.2+k3s1", ca_file=ca,
        offline=True,
    ))
    step("cluster", f"cluster {cluster.name} registered: {cluster.state} "
         f"(Kubernetes {cluster.kubernetes_version}, facts {cluster.facts_source})",
         {"id": cluster.id, "state": cluster.state})

    cred = credentials.new_credential(
        app, credentials.NewCredential("demo-aws", "aws", {"profile": "default"})
    )
    step("credential", f"credential {cred.name} added (a reference to AWS profile 'default')",
         {"id": cred.id})

    try:
        node_pools.create_node_pool(app, node_pools.CreateNodePool(
            name="arm-pool", credentials=cred.name, region="us-east-1", vm_type="m7g.large",
            min_vms=1, max_vms=1,
        ))
    except AnycloudError as err:
        step("refused", f"refused as it should be: {err.message}", err.to_dict())

    pool = node_pools.create_node_pool(app, node_pools.CreateNodePool(
        name="cpu-pool", credentials=cred.name, region="us-east-1", zone="us-east-1a",
        vm_type="m7i.large", min_vms=2, max_vms=2,
    ))
    step("node_pool", f"node pool {pool.name} created ({pool.id}): intent stored, {pool.state}",
         {"id": pool.id, "state": pool.state})

    work = workloads.create_workload(app, "web", pool.name, WorkloadKind.DEPLOYMENT)
    step("deployment", f"deployment {work.name} placed on {pool.name}", {"id": work.id})
    try:
        node_pools.delete_node_pool(app, pool.name)
    except AnycloudError as err:
        step("refused", f"delete refused as it should be: {err.message}", err.to_dict())
    workloads.delete_workload(app, work.name)
    deleting = node_pools.delete_node_pool(app, pool.name)
    step("node_pool", f"node pool {pool.name} is {deleting.state} once nothing targets it",
         {"id": pool.id, "state": deleting.state})

    gpu = node_pools.create_node_pool(app, node_pools.CreateNodePool(
        name="gpu-pool", credentials=cred.name, region="us-east-1", vm_type="g5.xlarge",
        min_vms=1, max_vms=1,
    ))
    step("node_pool", f"node pool {gpu.name} created ({gpu.id}) in {gpu.zone}: {gpu.state}",
         {"id": gpu.id, "state": gpu.state})
    return pool_status.node_pool_status(app.ledger, gpu.id).model_dump(mode="json")
