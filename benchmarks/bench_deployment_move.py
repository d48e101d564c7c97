"""Moving a deployment between provisioners (issue 22, "Measure"): the time of
``restart_deployment`` (the service path of ``deployment restart`` and ``sudo project
restart``) from stop to running on the new provisioner, and the preflight's share of it.

The set holds two static provisioners (``a``, ``b``: one runtime each) and one kubernetes
provisioner (``k``) on the local control plane (etcd, kube-apiserver, the real scheduler and
deployment controller, kwok as the kubelet of one Node). Each run creates a deployment, starts
it on ``a`` (not timed), points its project at the target and restarts it (timed), then
deletes it. Rows:

- ``a -> a``: a restart that moves nothing (the baseline of the ratio column);
- ``a -> b``: static to static (release a slot, take a slot: ledger work only);
- ``a -> k``: static to kubernetes: preflight (render the templates, a SelfSubjectAccessReview
  per kind), release the slot, server-side apply of the Deployment and Service, and wait until
  the Deployment is Available.

The preflight column is the time spent in the target's ``preflight`` during the restart.
The PVC template is left out (no storage provisioner runs here) and so is the claim.

    .venv/bin/python benchmarks/bench_deployment_move.py [--smoke]   (BENCH_RUNS=5)

--smoke: one run of each row.

Here (2 cores, idle, 2026-12-03, 5 runs): no move 15 ms; static -> static 25 ms (preflight
2 ms, 9 %); static -> kubernetes 217 ms (range 204-765 ms: the first run builds the cluster
client), preflight 36 ms (17 %), the rest mostly waiting for the Deployment to be Available.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import _cli, _kube_plane
from benchmarks._table import median, ms, print_table

MARKS = ("kube", "slow")
RUNS = int(os.environ.get("BENCH_RUNS", "5"))
# What the restarts import (the services, the Kubernetes client): done while the control
# plane starts (_kube_plane.start).
MODULES = ("kubernetes.client", "kubernetes.config", "jinja2", "automation.app",
           "automation.services.deployments", "automation.services.projects",
           "automation.services.provisioner_factory", "automation.provisioners.kubernetes",
           "automation.provisioners.static", "automation.kube.kubeconfig", "automation.kube.probe")
ROWS = (("a -> a (no move)", "a"), ("a -> b (static)", "b"), ("a -> k (kubernetes)", "k"))


class Timed:
    """The provisioners, with the time spent in each one's preflight added up."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.preflight = inner, 0.0

    def __call__(self, name: str) -> Any:
        found = self.inner(name)
        timed = self

        class Wrapped:
            def __getattr__(self, attr: str) -> Any:
                return getattr(found, attr)

            def preflight(self, *args: Any) -> None:
                start = time.perf_counter()
                try:
                    found.preflight(*args)
                finally:
                    timed.preflight += time.perf_counter() - start

        return Wrapped()


def provisioner_set(plane: Any, namespace: str) -> Any:
    from automation.provisioners.provisioner_set import ProvisionerSet

    statics = {name: {"type": "static", "spec": {"runtimes": [
        {"host": f"http://{name}1.bench", "slots": 100, "data_dir": "/data",
         "audience_url": f"https://{name}1.bench"}]}} for name in ("a", "b")}
    kube = {"type": "kubernetes", "spec": {
        "timeout_seconds": 120, "data_dir": "/data", "host": "http://rt-*.localhost",
        "namespace": namespace, "image": "registry.k8s.io/pause:3.10",
        "kubeconfig_path": str(plane.kubeconfig),
        "per_slot": {"cpu": "10m", "memory": "16Mi", "storage": "1Gi"},
        "template_paths": {"deployment": "templates/deployment.yaml",
                           "service": "templates/service.yaml"}}}
    return ProvisionerSet.model_validate(
        {"provisioners": statics | {"k": kube}, "default": "a"})


def restarts(app: Any, the_set: Any, built: Any, target: str) -> tuple[list[float], list[float]]:
    """RUNS restarts onto ``target``, each of a fresh deployment started on ``a``: the
    seconds each took, and the seconds of it spent in the target's preflight."""
    from automation.services import deployments, projects

    total, preflight = [], []
    for run in range(RUNS):
        made = deployments.create_deployment(app, f"m{target}{run}", "web")
        deployments.start_deployment(app, made.id, the_set, built)
        projects.set_project_provisioner(app, "web", target, the_set, by="bench")
        timed = Timed(built)
        start = time.perf_counter()
        moved = deployments.restart_deployment(app, made.id, the_set, timed)
        total.append(time.perf_counter() - start)
        preflight.append(timed.preflight)
        assert (moved.state, moved.provisioner) == ("running", target), moved
        deployments.delete_deployment(app, made.id, built)
        projects.set_project_provisioner(app, "web", None, the_set, by="bench")
    return total, preflight


def main() -> None:
    global RUNS
    if _cli.parse(__doc__, MARKS).smoke:
        RUNS = 1

    def meanwhile(root: Path) -> Any:  # while the control plane starts
        _kube_plane.import_modules(*MODULES)
        from automation.ledger import open_ledger

        return open_ledger(f"sqlite:///{root / 'ledger.db'}")

    rows, baseline = [], None
    with _kube_plane.plane_with_templates(meanwhile) as (root, plane, ledger):
        from automation.app import App
        from automation.services import projects
        from automation.services.provisioner_factory import provisioners

        _kube_plane.namespace(plane, "bench-move")
        the_set = provisioner_set(plane, "bench-move")
        app = App(ledger=ledger)
        projects.create_org(app, "acme")
        projects.create_project(app, "web", "acme")
        built = provisioners(app, the_set, root)  # templates/ relative to root
        try:
            for label, target in ROWS:
                total, preflight = restarts(app, the_set, built, target)
                baseline = baseline or median(total)
                rows.append((label, ms(median(total)),
                             f"{min(total) * 1000:.0f}-{max(total) * 1000:.0f}",
                             ms(median(preflight)), f"{median(preflight) / median(total):.0%}",
                             f"{median(total) / baseline:.1f}x"))
        finally:
            built.close()
            app.ledger.dispose()
    print_table(f"deployment restart that moves it (stop -> running on the new provisioner), "
                f"median of {RUNS} runs, milliseconds; local control plane with kwok, SQLite "
                "ledger", ["move", "total", "range", "preflight", "preflight share",
                           "vs no move"], rows)


if __name__ == "__main__":
    main()
