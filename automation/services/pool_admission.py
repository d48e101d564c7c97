"""A nodepool provisioner whose work is admitted by the pool's ledger row.

The seed's rule (003): a node pool targeted by work cannot be deleted, and a deleting pool
admits no new work. Project deployments on a pool obey it like the older ``deployment create
--node-pool`` placements: before any object is created the deployment is recorded against the
pool under the pool's row lock (the lock deletion takes), and the record goes only once the
objects are gone. Callers still see the one provisioner interface.
"""

from __future__ import annotations

from automation.app import App
from automation.provisioners.base import Health, Provisioned, ProvisionRequest
from automation.provisioners.kubernetes import NodePoolProvisioner
from automation.services.node_pools import admit_deployment, release_deployment


class AdmittedNodePool:
    def __init__(self, app: App, inner: NodePoolProvisioner) -> None:
        self.app = app
        self.inner = inner
        self.name = inner.name

    def provision(self, provision_id: str, request: ProvisionRequest) -> Provisioned:
        # Templates that break a rule (placement, seed 003's GPU work rule) are refused
        # before the pool records the deployment: nothing is held, nothing is created.
        self.inner.render(provision_id, request)
        admit_deployment(self.app, self.inner.pool.pool_id, provision_id)
        return self.inner.provision(provision_id, request)

    def deprovision(self, provision_id: str) -> bool:
        removed = self.inner.deprovision(provision_id)
        release_deployment(self.app, provision_id)
        return removed

    def await_ready(self, provisioned: Provisioned) -> None:
        self.inner.await_ready(provisioned)

    def check(self, provision_id: str) -> Health:
        return self.inner.check(provision_id)

    def preflight(self, provision_id: str, request: ProvisionRequest) -> None:
        self.inner.preflight(provision_id, request)

    def close(self) -> None:
        self.inner.close()
