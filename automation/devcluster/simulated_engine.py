"""``--simulate --engine pulumi``: the simulated world under the real Pulumi engine.

Every stack runs on the Pulumi CLI and kubernetes provider plugin that ``tools/build.py``
built. A node pool's cloud resources go to the simulated cloud through the stand-in
aws/gcp/azure-native/random plugins (``automation.simulators.standin``, labelled "stand-in
cloud"). What a stack writes to Kubernetes (bootstrap-token Secrets, add-ons, ingress
releases) goes through the real kubernetes plugin to a local API server (etcd and
kube-apiserver) that stands for the simulated cluster's, since the simulated cluster has
none; its data, PKI and port are kept under the simulation between commands, as the states
are. Nodes, their joins and their health stay the simulated cluster's.

Kept apart from a real deployment's: the states, the engine's PULUMI_HOME and its passphrase
live under ``$ANYCLOUD_HOME/sim/engine``, and the caller's backend URL, secrets provider and
passphrase are not used (``ENGINE_ENV_DROPPED``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from automation.devcluster import control_plane
from automation.devcluster.engine_env import EngineSession, local_tools

# What the stacks need beside the API server: the garbage collector, which completes the
# kubernetes provider's deletes (foreground propagation: the object keeps a
# ``foregroundDeletion`` finalizer until it runs). No scheduler, no kubelets.
COMPONENTS = ("kube-controller-manager",)


class SimulatedEngine:
    """The real engine over a simulated world, for one command: ``open`` starts what it
    needs and returns the runner; ``close`` stops it (a SIGKILL stops it too: the API
    server dies with its parent, the stand-ins exit once orphaned)."""

    def __init__(self, sim_root: Path) -> None:
        self.root = sim_root / "engine"
        self.plane: control_plane.ControlPlane | None = None
        self._session: EngineSession | None = None

    @property
    def home(self) -> Path:
        """Where the simulated stacks' states are (the runner's home)."""
        return self.root

    def open(self, cloud: Any) -> Any:
        """Start the API server, serve ``cloud`` to the stand-in plugins (installed into the
        simulation's PULUMI_HOME) and enter the engine's environment; the runner."""
        from automation.engine.pulumi_driver import AutomationRunner
        from automation.simulators.standin import LABEL

        tools = local_tools()  # ToolMissing names what to build, before anything starts
        self._session = EngineSession(tools, self.root, cloud)
        try:
            self.plane = control_plane.start(self.root / "api-server", COMPONENTS,
                                             keep=True)
        except BaseException:
            self.close()
            raise
        return AutomationRunner(self.root, kubeconfig=str(self.plane.kubeconfig),
                                cloud_label=LABEL)

    def close(self) -> None:
        try:
            if self.plane is not None:
                self.plane.stop()
                self.plane = None
        finally:
            if self._session is not None:
                self._session.close()
                self._session = None
