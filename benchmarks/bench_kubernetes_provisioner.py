"""The kubernetes provisioner on the local control plane (issue 12, "Measure"): N deployments
provisioned one after the other (render + server-side apply of a Deployment and a Service
each), then await_ready on every one, until all are Available (kwok plays the kubelets of
one Node; the scheduler and the deployment controller are the real ones).

Figures: time to apply all, time from the first apply to all ready, and the same per
deployment; the baseline is 10 deployments in the same run. The PVC template is left out
(no storage provisioner runs here) and so is the claim in the Deployment. Each run uses a
fresh namespace. Needs the tools built by ``python3 tools/build.py``.

    .venv/bin/python benchmarks/bench_kubernetes_provisioner.py [--smoke]   (BENCH_RUNS=3)

--smoke: 2 deployments, one run (the sizes differ only in the count: one covers the path).

Here (2 cores, 2026-12-01): applying is ~30-60 ms a deployment; all ready is ~2.4 s for 10
and ~26 s for 100, ~250 ms a deployment either way: readiness is paced by the local
control plane after the applies (deployment controller, scheduler, kwok), not by the
provisioner. Which of them sets the pace is not established: their logs show no
client-side throttling message.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import _cli, _kube_plane
from benchmarks._table import median, ms, print_table

MARKS = ("kube", "slow")
RUNS = int(os.environ.get("BENCH_RUNS", "3"))
SIZES = (10, 100)
# What provisioning imports (the Kubernetes client, the templates): done while the control
# plane starts (_kube_plane.start).
MODULES = ("kubernetes.client", "kubernetes.config", "jinja2", "automation.kube.kubeconfig",
           "automation.provisioners.kubernetes")


def main() -> None:
    global RUNS, SIZES
    if _cli.parse(__doc__, MARKS).smoke:
        RUNS, SIZES = 1, (2,)

    def meanwhile(root: Path) -> None:  # while the control plane starts
        _kube_plane.import_modules(*MODULES)

    with _kube_plane.plane_with_templates(meanwhile) as (root, plane, _):
        from automation.provisioners.base import ProvisionRequest
        from automation.provisioners.kubernetes import KubernetesProvisioner
        from automation.provisioners.provisioner_set import KubernetesSpec, TemplatePaths

        rows = []
        for size in SIZES:
            applied, ready = [], []
            for run in range(RUNS):
                spec = KubernetesSpec(
                    timeout_seconds=300, data_dir="/data", host="http://rt-*.localhost",
                    namespace=f"bench-{size}-{run}", image="registry.k8s.io/pause:3.10",
                    kubeconfig_path=str(plane.kubeconfig),
                    template_paths=TemplatePaths(deployment="templates/deployment.yaml",
                                                 service="templates/service.yaml"))
                p = KubernetesProvisioner("bench", spec, root, poll_seconds=0.05)
                request = ProvisionRequest(cpu="10m", memory="16Mi")
                start = time.perf_counter()
                done = [p.provision(f"d{i}", request) for i in range(size)]
                applied.append(time.perf_counter() - start)
                for d in done:
                    p.await_ready(d)
                ready.append(time.perf_counter() - start)
                p.close()
                _kube_plane.api(plane, "DELETE", f"/api/v1/namespaces/{spec.namespace}")
            rows.append((size, ms(median(applied)), ms(median(applied) / size),
                         ms(median(ready)), ms(median(ready) / size),
                         f"{min(ready):.2f}-{max(ready):.2f}"))
    print_table(f"kubernetes provisioner on the local control plane (kwok), median of {RUNS} "
                "runs, milliseconds",
                ["deployments", "apply all", "apply/each", "all ready", "ready/each",
                 "all ready range s"], rows)


if __name__ == "__main__":
    main()
