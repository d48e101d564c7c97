"""Typed configuration of the stack programs.

This is the contract between the control plane (``automation``), which builds these
objects from the ledger, and the stack programs, which turn them into resources. It
carries references to credentials, never secret values.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Provider = Literal["aws", "gcp", "azure"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class CloudCredentialRef(_Frozen):
    """Where the provider finds its credential; the secret itself is read at run time."""

    provider: Provider
    # aws
    profile: str | None = None
    role_arn: str | None = None
    # gcp
    project: str | None = None
    key_file: str | None = None
    # azure (client secret comes from AZURE_CLIENT_SECRET when the stack runs)
    subscription_id: str | None = None
    tenant_id: str | None = None
    client_id: str | None = None
    # The variables the secret is in when the engine runs (a credential the server holds
    # sealed): the provider plugin reads them itself, so the program passes no secret, no
    # profile and no key file. Names only, never values.
    secret_env: tuple[str, ...] = ()


class ClusterRef(_Frozen):
    """The cluster a pool joins."""

    id: str
    # Public address the K3s supervisor listens on, e.g. https://203.0.113.10:6443.
    server_url: str
    # SHA-256 (hex) of the cluster CA bundle; pins the join token (K10<hash>::id.secret).
    ca_sha256: str
    # Path of the kubeconfig used to write bootstrap-token Secrets and add-ons.
    kubeconfig_path: str | None = None
    kube_context: str | None = None


class AttemptSpec(_Frozen):
    """One VM attempt. Its id names and tags the VM and names the Node."""

    id: str
    # True while the attempt's Node does not exist yet; the token is dropped once it does.
    needs_token: bool = True
    # Bumped each time the attempt is retried, so its token is replaced, not added.
    token_generation: int = 0
    # When this token generation was issued (ledger time). The token's expiration is
    # issued_at + token_ttl_minutes, which keeps it stable across `up`s. Added by the
    # node-pool stack work; optional for compatibility.
    token_issued_at: datetime | None = None
    # The image the attempt's VM was built from, as the stack exported it after the VM was
    # created (AMI id, GCP image selfLink, Azure image URN). None: not created yet, so the
    # program takes the newest image; set, the VM keeps this one for its whole life.
    image: str | None = Field(default=None, max_length=512)


class NodePoolStackConfig(_Frozen):
    pool_id: str
    pool_name: str
    cluster: ClusterRef
    credential: CloudCredentialRef
    provider: Provider
    region: str
    zone: str | None = None
    vm_type: str
    gpu_count: int = Field(default=0, ge=0)
    gpu_model: str | None = None
    attempts: tuple[AttemptSpec, ...] = ()
    hosts_service: bool = False
    token_ttl_minutes: int = Field(default=30, ge=1, le=24 * 60)

    @property
    def accelerator(self) -> str | None:
        return "nvidia" if self.gpu_count > 0 else None


class ClusterAddonsStackConfig(_Frozen):
    cluster: ClusterRef
    # Cluster records whose add-on objects this record adopts (same kube-system UID).
    adopt_from_cluster_ids: tuple[str, ...] = ()
    # False when K3s installed RuntimeClass nvidia itself (nvidia handler, no overrides): the
    # stack then reads that object and uses it as is, and never writes it.
    manage_runtime_class: bool = True


class IngressReleaseStackConfig(_Frozen):
    """A pool's ingress release (Traefik), one stack per pool that hosts a Service."""

    cluster: ClusterRef
    pool_id: str = Field(min_length=1)
