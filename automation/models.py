"""Domain records as the services return them (pydantic), and their lifecycle states."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict


class ClusterState(StrEnum):
    PENDING = "pending"
    READY = "ready"
    DELETED = "deleted"


class PoolState(StrEnum):
    PENDING = "pending"
    PROVISIONING = "provisioning"
    READY = "ready"
    FAILED = "failed"  # parked: provisions nothing until deleted and recreated
    DELETING = "deleting"
    DELETED = "deleted"


LIVE_POOL_STATES = frozenset(PoolState) - {PoolState.DELETED}


class AttemptState(StrEnum):
    PENDING = "pending"  # row written, no cloud call confirmed yet
    CREATING = "creating"
    RUNNING = "running"
    RELEASING = "releasing"
    RELEASED = "released"


class WorkloadKind(StrEnum):
    DEPLOYMENT = "deployment"
    SERVICE = "service"


class WorkloadState(StrEnum):
    ACTIVE = "active"
    TERMINATED = "terminated"  # its objects on the cluster are not yet confirmed removed
    REMOVED = "removed"


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, from_attributes=True)


class Cluster(_Record):
    id: str
    name: str
    state: ClusterState
    server_url: str
    ca_sha256: str | None
    kubernetes_version: str | None
    kube_system_uid: str | None
    kubeconfig_path: str | None
    kube_context: str | None
    facts_source: str | None
    last_error: str | None
    created_at: datetime
    updated_at: datetime


class Credential(_Record):
    id: str
    name: str
    provider: str
    reference: dict[str, Any]
    state: str
    created_at: datetime


class NodePool(_Record):
    id: str
    name: str
    cluster_id: str
    credential_id: str
    provider: str
    region: str
    zone: str | None
    vm_type: str
    min_vms: int
    max_vms: int
    state: PoolState
    hosts_service: bool
    last_error: str | None
    created_at: datetime
    updated_at: datetime


class VmCounts(BaseModel):
    ready: int = 0
    starting: int = 0
    draining: int = 0


class NodePoolStatus(BaseModel):
    """What ``node-pool status`` shows: no credentials, endpoints, Pods or Node objects."""

    id: str
    name: str
    cluster: str
    credentials: str
    provider: str
    region: str
    zone: str | None
    vm_type: str
    vms: int
    state: PoolState
    last_error: str | None
    counts: VmCounts
    hosts_service: bool
    # Pools hosting a Service: the public IP of the elected ingress entry (None until elected).
    ingress_entry_ip: str | None = None
    created_at: datetime
    updated_at: datetime


class Workload(_Record):
    id: str
    name: str
    kind: WorkloadKind
    pool_id: str
    state: WorkloadState
    created_at: datetime


class Event(_Record):
    id: int
    at: datetime
    subject_kind: str
    subject_id: str
    kind: str
    message: str
    data: dict[str, Any] | None
