"""The StackRunner protocol: what the reconciler and the CLI ask of any engine.

Two implementations: ``pulumi_driver.AutomationRunner`` (the real engine through the
Automation API) and ``mock.runner.MockEngineRunner`` (the same program under the SDK's mock
engine with a simulated cloud). Nothing above this module knows which one it talks to.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from typing import Any, Literal, Protocol

from pydantic import BaseModel, Field

from automation.models import (  # noqa: F401  (the results live with the other models)
    CamelModel,
    ChangeSummary,
    DriftChange,
    Operation,
    PolicyFinding,
    RunResult,
)


class StackKind(StrEnum):
    NODE_POOL = "node-pool"
    CLUSTER_ADDONS = "cluster-addons"
    # A pool's Traefik HelmChart, keyed by the pool id: Kubernetes objects only, like the
    # cluster add-ons, so it runs on the real engine wherever the cluster is reachable.
    INGRESS_RELEASE = "ingress-release"


class Expected(BaseModel):
    """What the ledger saw this stack's state hold; an engine whose state lacks it refuses
    to act (``automation.engine.expectation``)."""

    applied: bool = False  # an up of the stack succeeded
    attempts: tuple[str, ...] = ()  # attempts whose VMs the stack reported running
    # Attempts an up was started for (``creating``): their VMs may have been bought even
    # if the ledger never heard back, so the stack's state must at least exist.
    started: tuple[str, ...] = ()


class StackTarget(BaseModel):
    """One stack: which program, for which pool or cluster, with what config."""

    kind: StackKind
    key: str  # the pool id (node pool, ingress release) or the cluster id
    # stacks.config.NodePoolStackConfig | ClusterAddonsStackConfig | IngressReleaseStackConfig
    config: Any
    # What the policy pack needs beyond its data files, as --policy-pack-config JSON (a VM
    # type only a live catalog refresh knows); None: the pack's defaults.
    policy_config: dict[str, Any] | None = None
    expect: Expected = Field(default_factory=Expected)
    # A sealed credential's secret, opened for this operation only: the engine process's
    # environment (the provider plugin reads it there). Never dumped, never in a repr.
    secret_env: dict[str, str] = Field(default_factory=dict, exclude=True, repr=False)

    @property
    def stack_name(self) -> str:
        return f"{self.kind}-{self.key}"

    def program(self) -> Callable[[], None]:
        # Imported on use: the stack programs pull in the provider SDKs.
        if self.kind is StackKind.NODE_POOL:
            from stacks.node_pool import build_program
        elif self.kind is StackKind.INGRESS_RELEASE:
            from stacks.ingress_release import build_program  # type: ignore[assignment]
        else:
            from stacks.cluster_addons import build_program  # type: ignore[assignment]
        return build_program(self.config)


# ProgressEvent is what the JSON progress lines print (and ``automation.models.RunResult``
# what ``preview --json`` does): camelCase keys, like every ``--json`` output.
class ProgressEvent(CamelModel):
    """One line of progress: a resource step, a diagnostic, or a policy finding."""

    kind: Literal["resource", "diagnostic", "policy", "summary"]
    op: str | None = None  # create, update, replace, delete, same, …
    type: str | None = None
    name: str | None = None
    state: Literal["started", "done", "failed"] | None = None
    severity: str | None = None
    message: str | None = None
    urn: str | None = None


ProgressSink = Callable[[ProgressEvent], None]


class StackRunner(Protocol):
    @property
    def engine(self) -> Literal["pulumi", "mock"]: ...

    def preview(
        self, target: StackTarget, *, diff: bool = False, on_progress: ProgressSink | None = None
    ) -> RunResult: ...

    def up(self, target: StackTarget, *, on_progress: ProgressSink | None = None) -> RunResult: ...

    def destroy(
        self, target: StackTarget, *, on_progress: ProgressSink | None = None
    ) -> RunResult: ...

    def refresh(
        self, target: StackTarget, *, on_progress: ProgressSink | None = None
    ) -> RunResult: ...

    def adopt(
        self, target: StackTarget, *, on_progress: ProgressSink | None = None
    ) -> RunResult:
        """Rebuild a lost state from what the cloud holds, buying nothing."""
        ...

    def lookup_vms(self, target: StackTarget, attempt_ids: list[str]) -> dict[str, str]:
        """Per attempt, ``running``, ``absent`` or ``uncertain``: is its VM still there?"""
        ...

    def unlock(self, target: StackTarget) -> bool:
        """Clear a lock a killed run left; False when this engine keeps no lock."""
        ...

    def check_drift(self, target: StackTarget) -> list[DriftChange]:
        """A refresh, previewed: the resources whose live state differs from what the stack
        applied, with the names of the properties that differ (never their values). Writes
        nothing, neither to the state nor to the cloud."""
        ...
