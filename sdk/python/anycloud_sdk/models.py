"""Generated from sdk/python/openapi.json by tools/sdk/generate.py: do not edit."""

from __future__ import annotations

from typing import Annotated, Any, Literal
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, RootModel, SecretStr
from datetime import date


class AcquireBody(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    command: Annotated[list[str], Field(min_length=1, title="Command")]
    pool: Annotated[str, Field(title="Pool")]


class Agent(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    busy_slots: Annotated[int, Field(alias="busySlots", title="Busyslots")]
    gone_at: Annotated[AwareDatetime | None, Field(alias="goneAt", title="Goneat")] = (
        None
    )
    id: Annotated[str, Field(title="Id")]
    idle_since: Annotated[
        AwareDatetime | None, Field(alias="idleSince", title="Idlesince")
    ] = None
    last_heartbeat_at: Annotated[
        AwareDatetime, Field(alias="lastHeartbeatAt", title="Lastheartbeatat")
    ]
    pod_name: Annotated[str, Field(alias="podName", title="Podname")]
    pool: Annotated[str, Field(title="Pool")]
    registered_at: Annotated[
        AwareDatetime, Field(alias="registeredAt", title="Registeredat")
    ]
    reported_busy_slots: Annotated[
        int, Field(alias="reportedBusySlots", title="Reportedbusyslots")
    ]
    slots: Annotated[int, Field(title="Slots")]
    state: Annotated[
        Literal["ready", "draining", "unknown", "gone", "retired"] | str,
        Field(title="State"),
    ]
    unknown_since: Annotated[
        AwareDatetime | None, Field(alias="unknownSince", title="Unknownsince")
    ] = None


class AgentPoolSummary(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    busy_from: Annotated[AwareDatetime, Field(alias="busyFrom", title="Busyfrom")]
    busy_slots: Annotated[int, Field(alias="busySlots", title="Busyslots")]
    busy_slots_per_minute: Annotated[
        list[float], Field(alias="busySlotsPerMinute", title="Busyslotsperminute")
    ]
    desired_replicas: Annotated[
        int, Field(alias="desiredReplicas", title="Desiredreplicas")
    ]
    draining_agents: Annotated[
        int, Field(alias="drainingAgents", title="Drainingagents")
    ]
    idle_slots: Annotated[int, Field(alias="idleSlots", title="Idleslots")]
    name: Annotated[str, Field(title="Name")]
    namespace: Annotated[str, Field(title="Namespace")]
    observed_at: Annotated[AwareDatetime, Field(alias="observedAt", title="Observedat")]
    pending_sessions: Annotated[
        int, Field(alias="pendingSessions", title="Pendingsessions")
    ]
    pool: Annotated[str, Field(title="Pool")]
    ready: Annotated[bool, Field(title="Ready")]
    ready_agents: Annotated[int, Field(alias="readyAgents", title="Readyagents")]
    reason: Annotated[str | None, Field(title="Reason")]
    running_sessions: Annotated[
        int, Field(alias="runningSessions", title="Runningsessions")
    ]
    slots: Annotated[int, Field(title="Slots")]
    unknown_agents: Annotated[int, Field(alias="unknownAgents", title="Unknownagents")]


class ApiToken(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    created_at: Annotated[AwareDatetime, Field(alias="createdAt", title="Createdat")]
    created_by: Annotated[str, Field(alias="createdBy", title="Createdby")]
    expires_at: Annotated[
        AwareDatetime | None, Field(alias="expiresAt", title="Expiresat")
    ] = None
    id: Annotated[str, Field(title="Id")]
    name: Annotated[str, Field(title="Name")]
    org_id: Annotated[str | None, Field(alias="orgId", title="Orgid")] = None
    prefix: Annotated[str, Field(title="Prefix")]
    project_id: Annotated[str | None, Field(alias="projectId", title="Projectid")] = (
        None
    )
    revoked_at: Annotated[
        AwareDatetime | None, Field(alias="revokedAt", title="Revokedat")
    ] = None
    role: Annotated[str, Field(title="Role")]
    scope: Annotated[str | None, Field(title="Scope")] = None
    state: Annotated[str, Field(title="State")]


class Appended(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    last: Annotated[int, Field(title="Last")]


class AttemptState(
    RootModel[Literal["pending", "creating", "running", "releasing", "released"] | str]
):
    root: Annotated[
        Literal["pending", "creating", "running", "releasing", "released"] | str,
        Field(title="AttemptState"),
    ]


class CatalogOffering(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    price_source_id: Annotated[
        int | str | None, Field(alias="priceSourceId", title="Pricesourceid")
    ]
    price_usd_hour: Annotated[
        float | None, Field(alias="priceUsdHour", title="Priceusdhour")
    ]
    region: Annotated[str, Field(title="Region")]
    zones: Annotated[list[str] | None, Field(title="Zones")]
    zones_source_id: Annotated[
        int | str | None, Field(alias="zonesSourceId", title="Zonessourceid")
    ]


class CatalogPriceChange(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    new_usd_hour: Annotated[float | None, Field(alias="newUsdHour", title="Newusdhour")]
    old_usd_hour: Annotated[float | None, Field(alias="oldUsdHour", title="Oldusdhour")]
    vm_type: Annotated[str, Field(alias="vmType", title="Vmtype")]


class CatalogRefresh(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    counts: Annotated[dict[str, Any], Field(title="Counts")]
    credential: Annotated[str, Field(title="Credential")]
    fetched_at: Annotated[str, Field(alias="fetchedAt", title="Fetchedat")]
    id: Annotated[str, Field(title="Id")]
    provider: Annotated[str, Field(title="Provider")]
    regions: Annotated[list[str], Field(title="Regions")]


class CatalogRegionRefresh(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    compared_with: Annotated[str, Field(alias="comparedWith", title="Comparedwith")]
    gone_offerings: Annotated[
        list[str], Field(alias="goneOfferings", title="Goneofferings")
    ]
    new_types: Annotated[list[str], Field(alias="newTypes", title="Newtypes")]
    offerings: Annotated[int, Field(title="Offerings")]
    price_changes: Annotated[
        list[CatalogPriceChange], Field(alias="priceChanges", title="Pricechanges")
    ]
    prices: Annotated[int, Field(title="Prices")]
    region: Annotated[str, Field(title="Region")]
    types: Annotated[int, Field(title="Types")]


class CatalogSource(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    as_of: Annotated[str, Field(alias="asOf", title="Asof")]
    id: Annotated[int | str, Field(title="Id")]
    licence: Annotated[str, Field(title="Licence")]
    name: Annotated[str, Field(title="Name")]
    note: Annotated[str | None, Field(title="Note")] = None
    stale: Annotated[bool, Field(title="Stale")]
    url: Annotated[str, Field(title="Url")]


class CatalogType(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    arch: Annotated[str, Field(title="Arch")]
    family: Annotated[str, Field(title="Family")]
    gpu_model: Annotated[str | None, Field(alias="gpuModel", title="Gpumodel")]
    gpus: Annotated[int, Field(title="Gpus")]
    memory_gib: Annotated[float, Field(alias="memoryGib", title="Memorygib")]
    offerings: Annotated[list[CatalogOffering], Field(title="Offerings")]
    provider: Annotated[str, Field(title="Provider")]
    sources: Annotated[list[CatalogSource], Field(title="Sources")]
    spec_source_id: Annotated[
        int | str | None, Field(alias="specSourceId", title="Specsourceid")
    ]
    vcpus: Annotated[int, Field(title="Vcpus")]
    vm_type: Annotated[str, Field(alias="vmType", title="Vmtype")]


class ChangeSummary(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    create: Annotated[int | None, Field(title="Create")] = 0
    delete: Annotated[int | None, Field(title="Delete")] = 0
    replace: Annotated[int | None, Field(title="Replace")] = 0
    same: Annotated[int | None, Field(title="Same")] = 0
    update: Annotated[int | None, Field(title="Update")] = 0


class Chunk(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    data: Annotated[str, Field(title="Data")]
    id: Annotated[int, Field(title="Id")]
    stream: Annotated[Literal["stdout", "stderr"] | str, Field(title="Stream")]


class ChunkBody(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    data: Annotated[str, Field(title="Data")]
    stream: Annotated[Literal["stdout", "stderr"] | str, Field(title="Stream")]


class ClusterState(RootModel[Literal["pending", "ready", "deleted"] | str]):
    root: Annotated[
        Literal["pending", "ready", "deleted"] | str, Field(title="ClusterState")
    ]


class Cost(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    as_of: Annotated[str | None, Field(alias="asOf", title="Asof")] = None
    hint: Annotated[str | None, Field(title="Hint")] = None
    hourly_usd: Annotated[float | None, Field(alias="hourlyUsd", title="Hourlyusd")]
    monthly_usd: Annotated[float | None, Field(alias="monthlyUsd", title="Monthlyusd")]
    source: Annotated[str | None, Field(title="Source")] = None
    stale: Annotated[bool | None, Field(title="Stale")] = False
    vms: Annotated[int, Field(title="Vms")]


class CostLine(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    group: Annotated[str, Field(title="Group")]
    hints: Annotated[list[str], Field(title="Hints")]
    pool_id: Annotated[str | None, Field(alias="poolId", title="Poolid")] = None
    simulated_vm_hours: Annotated[
        float, Field(alias="simulatedVmHours", title="Simulatedvmhours")
    ]
    sources: Annotated[list[str], Field(title="Sources")]
    unpriced_vm_hours: Annotated[
        float, Field(alias="unpricedVmHours", title="Unpricedvmhours")
    ]
    usd: Annotated[float, Field(title="Usd")]
    vm_hours: Annotated[float, Field(alias="vmHours", title="Vmhours")]


class CostReport(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    by: Annotated[Literal["pool", "cluster", "provider"] | str, Field(title="By")]
    lines: Annotated[list[CostLine], Field(title="Lines")]
    simulated_vm_hours: Annotated[
        float, Field(alias="simulatedVmHours", title="Simulatedvmhours")
    ]
    since: Annotated[AwareDatetime | None, Field(title="Since")]
    total_usd: Annotated[float, Field(alias="totalUsd", title="Totalusd")]
    total_vm_hours: Annotated[float, Field(alias="totalVmHours", title="Totalvmhours")]
    unpriced_vm_hours: Annotated[
        float, Field(alias="unpricedVmHours", title="Unpricedvmhours")
    ]
    until: Annotated[AwareDatetime, Field(title="Until")]


class DriftChange(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    name: Annotated[str, Field(title="Name")]
    op: Annotated[Literal["update", "delete"] | str, Field(title="Op")]
    properties: Annotated[list[str] | None, Field(title="Properties")] = None
    type: Annotated[str, Field(title="Type")]
    urn: Annotated[str, Field(title="Urn")]


class DriftReport(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    changes: Annotated[list[DriftChange] | None, Field(title="Changes")] = None
    checked_at: Annotated[AwareDatetime, Field(alias="checkedAt", title="Checkedat")]
    engine: Annotated[Literal["pulumi", "mock", "standin"] | str, Field(title="Engine")]
    error: Annotated[str | None, Field(title="Error")] = None
    error_code: Annotated[str | None, Field(alias="errorCode", title="Errorcode")] = (
        None
    )
    seconds: Annotated[float | None, Field(title="Seconds")] = None
    source: Annotated[str, Field(title="Source")]


class EngineUnlock(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    engine: Annotated[str, Field(title="Engine")]
    stack: Annotated[str, Field(title="Stack")]
    unlocked: Annotated[bool, Field(title="Unlocked")]


class Health(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    ok: Annotated[bool, Field(title="Ok")]


class HeartbeatBody(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    busy_slots: Annotated[
        int, Field(alias="busySlots", ge=0, le=1024, title="Busyslots")
    ]
    draining: Annotated[bool | None, Field(title="Draining")] = False
    running: Annotated[list[str] | None, Field(title="Running")] = []


class HeartbeatReply(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    agent: Agent
    assigned: Annotated[int | None, Field(title="Assigned")] = 0
    cancel: Annotated[list[str], Field(title="Cancel")]


class HelmJob(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    message: Annotated[str | None, Field(title="Message")] = None
    phase: Annotated[
        Literal["pending", "running", "retrying", "succeeded", "failed"] | str,
        Field(title="Phase"),
    ]


class IngressDaemonSet(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    desired: Annotated[int, Field(title="Desired")]
    entry_node_ready: Annotated[
        bool, Field(alias="entryNodeReady", title="Entrynodeready")
    ]
    ready: Annotated[int, Field(title="Ready")]


class IngressRelease(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    daemon_set: Annotated[IngressDaemonSet | None, Field(alias="daemonSet")] = None
    helm_job: Annotated[HelmJob | None, Field(alias="helmJob")] = None
    last_event: Annotated[str | None, Field(alias="lastEvent", title="Lastevent")] = (
        None
    )
    state: Annotated[
        Literal["absent", "installing", "installed", "failed"] | str | None,
        Field(title="State"),
    ]


class IngressView(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    entry_ip: Annotated[str | None, Field(alias="entryIp", title="Entryip")] = None
    release: IngressRelease | None = None


class IssuedToken(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    created_at: Annotated[AwareDatetime, Field(alias="createdAt", title="Createdat")]
    created_by: Annotated[str, Field(alias="createdBy", title="Createdby")]
    expires_at: Annotated[
        AwareDatetime | None, Field(alias="expiresAt", title="Expiresat")
    ] = None
    id: Annotated[str, Field(title="Id")]
    name: Annotated[str, Field(title="Name")]
    org_id: Annotated[str | None, Field(alias="orgId", title="Orgid")] = None
    prefix: Annotated[str, Field(title="Prefix")]
    project_id: Annotated[str | None, Field(alias="projectId", title="Projectid")] = (
        None
    )
    revoked_at: Annotated[
        AwareDatetime | None, Field(alias="revokedAt", title="Revokedat")
    ] = None
    role: Annotated[str, Field(title="Role")]
    scope: Annotated[str | None, Field(title="Scope")] = None
    state: Annotated[str, Field(title="State")]
    token: Annotated[str, Field(title="Token")]


class Me(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    expires_at: Annotated[
        AwareDatetime | None, Field(alias="expiresAt", title="Expiresat")
    ] = None
    name: Annotated[str, Field(title="Name")]
    org_id: Annotated[str | None, Field(alias="orgId", title="Orgid")] = None
    project_id: Annotated[str | None, Field(alias="projectId", title="Projectid")] = (
        None
    )
    role: Annotated[str, Field(title="Role")]
    scope: Annotated[str | None, Field(title="Scope")] = None
    server_version: Annotated[str, Field(alias="serverVersion", title="Serverversion")]


class MoveToOrg(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    org: Annotated[str, Field(title="Org")]


class MovedToOrg(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    clusters: Annotated[list[str], Field(title="Clusters")]
    credentials: Annotated[list[str], Field(title="Credentials")]
    node_pools: Annotated[list[str], Field(alias="nodePools", title="Nodepools")]
    org_id: Annotated[str, Field(alias="orgId", title="Orgid")]


class Slots(RootModel[int]):
    root: Annotated[int, Field(ge=1, le=1024, title="Slots")]


class NewDeployment(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    cpu: Annotated[str | None, Field(title="Cpu")] = None
    memory: Annotated[str | None, Field(title="Memory")] = None
    name: Annotated[
        str,
        Field(
            max_length=63,
            min_length=1,
            pattern="^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$",
            title="Name",
        ),
    ]
    node_pool: Annotated[str | None, Field(alias="nodePool", title="Nodepool")] = None
    project: Annotated[str | None, Field(title="Project")] = None
    service: Annotated[bool | None, Field(title="Service")] = False
    slots: Annotated[Slots | None, Field(title="Slots")] = None
    start: Annotated[bool | None, Field(title="Start")] = False
    storage: Annotated[str | None, Field(title="Storage")] = None


class NewKubeconfigRequest(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    context: Annotated[str | None, Field(title="Context")] = None
    kubeconfig: Annotated[SecretStr, Field(title="Kubeconfig")]


class NewNodePool(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    cluster: Annotated[str | None, Field(title="Cluster")] = None
    credentials: Annotated[str, Field(title="Credentials")]
    max_vms: Annotated[int, Field(alias="maxVms", ge=1, le=1000, title="Maxvms")]
    min_vms: Annotated[int, Field(alias="minVms", ge=1, le=1000, title="Minvms")]
    name: Annotated[
        str,
        Field(
            max_length=63,
            min_length=1,
            pattern="^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$",
            title="Name",
        ),
    ]
    region: Annotated[str, Field(title="Region")]
    vm_type: Annotated[str, Field(alias="vmType", title="Vmtype")]
    zone: Annotated[str | None, Field(title="Zone")] = None


class NewOrg(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    name: Annotated[
        str,
        Field(
            max_length=63,
            min_length=1,
            pattern="^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$",
            title="Name",
        ),
    ]


class NewProject(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    name: Annotated[
        str,
        Field(
            max_length=63,
            min_length=1,
            pattern="^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$",
            title="Name",
        ),
    ]
    org: Annotated[str, Field(title="Org")]


class NewRuntimeToken(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    ttl_seconds: Annotated[
        int | None, Field(alias="ttlSeconds", title="Ttlseconds")
    ] = None


class ExpiresInSeconds(RootModel[int]):
    root: Annotated[int, Field(gt=0, le=315360000, title="Expiresinseconds")]


class NewToken(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    expires_in_seconds: Annotated[
        ExpiresInSeconds | None,
        Field(alias="expiresInSeconds", title="Expiresinseconds"),
    ] = None
    name: Annotated[
        str,
        Field(
            max_length=63,
            min_length=1,
            pattern="^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$",
            title="Name",
        ),
    ]
    org: Annotated[str | None, Field(title="Org")] = None
    pool: Annotated[str | None, Field(title="Pool")] = None
    project: Annotated[str | None, Field(title="Project")] = None
    role: Annotated[str, Field(title="Role")]


class NextStart(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    level: Annotated[str, Field(title="Level")]
    provisioner: Annotated[str, Field(title="Provisioner")]


class Org(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    created_at: Annotated[AwareDatetime, Field(alias="createdAt", title="Createdat")]
    default_provisioner: Annotated[
        str | None, Field(alias="defaultProvisioner", title="Defaultprovisioner")
    ] = None
    id: Annotated[str, Field(title="Id")]
    name: Annotated[str, Field(title="Name")]


class OrgPage(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    items: Annotated[list[Org], Field(title="Items")]
    next_page_token: Annotated[
        str | None, Field(alias="nextPageToken", title="Nextpagetoken")
    ] = None


class OutputBody(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    agent_id: Annotated[str, Field(alias="agentId", title="Agentid")]
    chunks: Annotated[list[ChunkBody], Field(title="Chunks")]


class PlannedResource(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    inputs: Annotated[dict[str, Any], Field(title="Inputs")]
    name: Annotated[str, Field(title="Name")]
    parent: Annotated[str | None, Field(title="Parent")]
    type: Annotated[str, Field(title="Type")]
    urn: Annotated[str, Field(title="Urn")]


class PolicyFinding(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    enforcement: Annotated[str, Field(title="Enforcement")]
    message: Annotated[str, Field(title="Message")]
    policy: Annotated[str, Field(title="Policy")]
    urn: Annotated[str | None, Field(title="Urn")] = None


class PolicyReport(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    cluster: Annotated[str | None, Field(title="Cluster")] = None
    engine: Annotated[str | None, Field(title="Engine")] = "mock"
    findings: Annotated[list[PolicyFinding], Field(title="Findings")]
    pool: Annotated[str | None, Field(title="Pool")] = None
    stack: Annotated[str, Field(title="Stack")]


class PoolDailyCost(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    cluster: Annotated[str, Field(title="Cluster")]
    hints: Annotated[list[str], Field(title="Hints")]
    per_day: Annotated[list[float], Field(alias="perDay", title="Perday")]
    pool: Annotated[str, Field(title="Pool")]
    pool_id: Annotated[str, Field(alias="poolId", title="Poolid")]
    sources: Annotated[list[str], Field(title="Sources")]
    total: Annotated[float, Field(title="Total")]
    unpriced_vm_hours: Annotated[
        float, Field(alias="unpricedVmHours", title="Unpricedvmhours")
    ]


class PoolEvent(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    at: Annotated[AwareDatetime, Field(title="At")]
    kind: Annotated[str, Field(title="Kind")]
    message: Annotated[str | None, Field(title="Message")]


class PoolHold(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    evidence: Annotated[str, Field(title="Evidence")]
    reason: Annotated[str, Field(title="Reason")]
    since: Annotated[AwareDatetime, Field(title="Since")]


class PoolPreview(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    cost: Cost
    diff: Annotated[str | None, Field(title="Diff")] = ""
    engine: Annotated[Literal["pulumi", "mock"] | str, Field(title="Engine")]
    operation: Annotated[
        Literal["preview", "up", "destroy", "refresh", "adopt"] | str,
        Field(title="Operation"),
    ]
    outputs: Annotated[dict[str, Any] | None, Field(title="Outputs")] = None
    policy: Annotated[list[PolicyFinding] | None, Field(title="Policy")] = None
    pool: Annotated[str, Field(title="Pool")]
    stack: Annotated[str, Field(title="Stack")]
    summary: ChangeSummary | None = None


class PoolRef(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    id: Annotated[str, Field(title="Id")]
    name: Annotated[str, Field(title="Name")]


class PoolState(
    RootModel[
        Literal["pending", "provisioning", "ready", "failed", "deleting", "deleted"]
        | str
    ]
):
    root: Annotated[
        Literal["pending", "provisioning", "ready", "failed", "deleting", "deleted"]
        | str,
        Field(title="PoolState"),
    ]


class PoolView(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    agents: Annotated[list[Agent], Field(title="Agents")]
    busy_slots: Annotated[int, Field(alias="busySlots", title="Busyslots")]
    idle_slots: Annotated[int, Field(alias="idleSlots", title="Idleslots")]
    pending_sessions: Annotated[
        int, Field(alias="pendingSessions", title="Pendingsessions")
    ]
    pool: Annotated[str, Field(title="Pool")]
    ready_agents: Annotated[int, Field(alias="readyAgents", title="Readyagents")]
    running_sessions: Annotated[
        int, Field(alias="runningSessions", title="Runningsessions")
    ]
    slots: Annotated[int, Field(title="Slots")]


class Problem(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    code: Annotated[str, Field(title="Code")]
    detail: Annotated[str, Field(title="Detail")]
    error_id: Annotated[str | None, Field(alias="errorId", title="Errorid")] = None
    field: Annotated[str | None, Field(title="Field")] = None
    rule: Annotated[str | None, Field(title="Rule")] = None
    status: Annotated[int, Field(title="Status")]
    title: Annotated[str, Field(title="Title")]
    type: Annotated[str, Field(title="Type")]
    value: Annotated[Any | None, Field(title="Value")] = None


class Project(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    created_at: Annotated[AwareDatetime, Field(alias="createdAt", title="Createdat")]
    id: Annotated[str, Field(title="Id")]
    name: Annotated[str, Field(title="Name")]
    org_id: Annotated[str, Field(alias="orgId", title="Orgid")]
    provisioner: Annotated[str | None, Field(title="Provisioner")] = None


class ProjectDeployment(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    audience: Annotated[str | None, Field(title="Audience")] = None
    created_at: Annotated[AwareDatetime, Field(alias="createdAt", title="Createdat")]
    data_dir: Annotated[str | None, Field(alias="dataDir", title="Datadir")] = None
    id: Annotated[str, Field(title="Id")]
    last_error: Annotated[str | None, Field(alias="lastError", title="Lasterror")] = (
        None
    )
    move: Annotated[dict[str, Any] | None, Field(title="Move")] = None
    name: Annotated[str, Field(title="Name")]
    node_pool_id: Annotated[
        str | None, Field(alias="nodePoolId", title="Nodepoolid")
    ] = None
    project_id: Annotated[str, Field(alias="projectId", title="Projectid")]
    provision_id: Annotated[str, Field(alias="provisionId", title="Provisionid")]
    provisioner: Annotated[str | None, Field(title="Provisioner")] = None
    resources: Annotated[dict[str, Any] | None, Field(title="Resources")] = None
    runtime_host: Annotated[
        str | None, Field(alias="runtimeHost", title="Runtimehost")
    ] = None
    state: Annotated[str, Field(title="State")]
    updated_at: Annotated[AwareDatetime, Field(alias="updatedAt", title="Updatedat")]


class ProjectPage(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    items: Annotated[list[Project], Field(title="Items")]
    next_page_token: Annotated[
        str | None, Field(alias="nextPageToken", title="Nextpagetoken")
    ] = None


class RefreshCatalog(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    credentials: Annotated[
        str,
        Field(
            description="The stored credential (name or id) to read the cloud with; it fixes the cloud.",
            title="Credentials",
        ),
    ]
    regions: Annotated[
        list[str] | None,
        Field(
            description="Regions to read; none: the cloud's regions with live pools, else every region.",
            title="Regions",
        ),
    ] = None


class RegisterBody(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    agent_id: Annotated[str, Field(alias="agentId", title="Agentid")]
    pod: Annotated[str | None, Field(title="Pod")] = None
    pool: Annotated[str, Field(title="Pool")]
    slots: Annotated[int | None, Field(ge=1, le=1024, title="Slots")] = 1


class RegisterClusterRequest(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    allow_private_address: Annotated[
        bool | None, Field(alias="allowPrivateAddress", title="Allowprivateaddress")
    ] = False
    ca_pem: Annotated[str | None, Field(alias="caPem", title="Capem")] = None
    context: Annotated[str | None, Field(title="Context")] = None
    kubeconfig: Annotated[SecretStr, Field(title="Kubeconfig")]
    kubernetes_version: Annotated[
        str | None, Field(alias="kubernetesVersion", title="Kubernetesversion")
    ] = None
    name: Annotated[
        str,
        Field(
            max_length=63,
            min_length=1,
            pattern="^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$",
            title="Name",
        ),
    ]
    offline: Annotated[bool | None, Field(title="Offline")] = False
    org: Annotated[str | None, Field(title="Org")] = None
    server_url: Annotated[str | None, Field(alias="serverUrl", title="Serverurl")] = (
        None
    )


class ExitCode(RootModel[int]):
    root: Annotated[int, Field(ge=-2147483648, le=2147483647, title="Exitcode")]


class ReleaseBody(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    agent_id: Annotated[str | None, Field(alias="agentId", title="Agentid")] = None
    error: Annotated[str | None, Field(title="Error")] = None
    exit_code: Annotated[ExitCode | None, Field(alias="exitCode", title="Exitcode")] = (
        None
    )


class RotateSecretsKey(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    batch_size: Annotated[int | None, Field(alias="batchSize", title="Batchsize")] = 100
    key_id: Annotated[str, Field(alias="keyId", title="Keyid")]
    settle_seconds: Annotated[
        float | None, Field(alias="settleSeconds", title="Settleseconds")
    ] = 2.0


class RunResult(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    diff: Annotated[str | None, Field(title="Diff")] = ""
    engine: Annotated[Literal["pulumi", "mock"] | str, Field(title="Engine")]
    operation: Annotated[
        Literal["preview", "up", "destroy", "refresh", "adopt"] | str,
        Field(title="Operation"),
    ]
    outputs: Annotated[dict[str, Any] | None, Field(title="Outputs")] = None
    policy: Annotated[list[PolicyFinding] | None, Field(title="Policy")] = None
    stack: Annotated[str, Field(title="Stack")]
    summary: ChangeSummary | None = None


class RuntimeHealth(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    detail: Annotated[str, Field(title="Detail")]
    ok: Annotated[bool, Field(title="Ok")]


class RuntimeSigningKey(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    created_at: Annotated[AwareDatetime, Field(alias="createdAt", title="Createdat")]
    kid: Annotated[str, Field(title="Kid")]
    retired_at: Annotated[
        AwareDatetime | None, Field(alias="retiredAt", title="Retiredat")
    ] = None
    retires_at: Annotated[
        AwareDatetime | None, Field(alias="retiresAt", title="Retiresat")
    ] = None
    state: Annotated[
        Literal["signing", "verifying", "retired"] | str, Field(title="State")
    ]
    superseded_at: Annotated[
        AwareDatetime | None, Field(alias="supersededAt", title="Supersededat")
    ] = None


class RuntimeToken(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    audience: Annotated[str, Field(title="Audience")]
    expires_at: Annotated[AwareDatetime, Field(alias="expiresAt", title="Expiresat")]
    key_id: Annotated[str, Field(alias="keyId", title="Keyid")]
    subject: Annotated[str, Field(title="Subject")]
    token: Annotated[str, Field(title="Token")]


class SecretMaterial(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    access_key_id: Annotated[
        SecretStr | None, Field(alias="accessKeyId", title="Accesskeyid")
    ] = None
    api_key: Annotated[SecretStr | None, Field(alias="apiKey", title="Apikey")] = None
    client_secret: Annotated[
        SecretStr | None, Field(alias="clientSecret", title="Clientsecret")
    ] = None
    secret_access_key: Annotated[
        SecretStr | None, Field(alias="secretAccessKey", title="Secretaccesskey")
    ] = None
    service_account_json: Annotated[
        SecretStr | None, Field(alias="serviceAccountJson", title="Serviceaccountjson")
    ] = None
    session_token: Annotated[
        SecretStr | None, Field(alias="sessionToken", title="Sessiontoken")
    ] = None


class SecretSummary(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    fields: Annotated[dict[str, str] | None, Field(title="Fields")] = None
    fingerprint: Annotated[str, Field(title="Fingerprint")]
    rotated_at: Annotated[
        AwareDatetime | None, Field(alias="rotatedAt", title="Rotatedat")
    ] = None
    stored_at: Annotated[AwareDatetime, Field(alias="storedAt", title="Storedat")]


class SecretsKeyRotation(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    batches: Annotated[int, Field(title="Batches")]
    key_id: Annotated[str, Field(alias="keyId", title="Keyid")]
    previous_key_ids: Annotated[
        list[str], Field(alias="previousKeyIds", title="Previouskeyids")
    ]
    resealed: Annotated[int, Field(title="Resealed")]
    sealed: Annotated[dict[str, int], Field(title="Sealed")]
    unreadable: Annotated[int, Field(title="Unreadable")]


class SecretsKeyStatus(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    key_id: Annotated[str, Field(alias="keyId", title="Keyid")]
    previous_key_ids: Annotated[
        list[str], Field(alias="previousKeyIds", title="Previouskeyids")
    ]
    sealed: Annotated[dict[str, int], Field(title="Sealed")]
    unreadable: Annotated[int, Field(title="Unreadable")]


class Session(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    agent_id: Annotated[str | None, Field(alias="agentId", title="Agentid")]
    ahead: Annotated[int | None, Field(title="Ahead")] = None
    assigned_at: Annotated[
        AwareDatetime | None, Field(alias="assignedAt", title="Assignedat")
    ] = None
    cancel_requested_at: Annotated[
        AwareDatetime | None,
        Field(alias="cancelRequestedAt", title="Cancelrequestedat"),
    ] = None
    client_seen_at: Annotated[
        AwareDatetime | None, Field(alias="clientSeenAt", title="Clientseenat")
    ] = None
    command: Annotated[list[str], Field(title="Command")]
    created_at: Annotated[AwareDatetime, Field(alias="createdAt", title="Createdat")]
    delivered_at: Annotated[
        AwareDatetime | None, Field(alias="deliveredAt", title="Deliveredat")
    ] = None
    error: Annotated[str | None, Field(title="Error")] = None
    exit_code: Annotated[int | None, Field(alias="exitCode", title="Exitcode")] = None
    finished_at: Annotated[
        AwareDatetime | None, Field(alias="finishedAt", title="Finishedat")
    ] = None
    id: Annotated[str, Field(title="Id")]
    pool: Annotated[str, Field(title="Pool")]
    state: Annotated[
        Literal["pending", "running", "done", "failed", "cancelled"] | str,
        Field(title="State"),
    ]


class SetProvisioner(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    provisioner: Annotated[str | None, Field(title="Provisioner")] = None


class StackUnlock(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    stack: Annotated[str, Field(title="Stack")]
    unlocked: Annotated[bool, Field(title="Unlocked")]


class TokenPage(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    items: Annotated[list[ApiToken], Field(title="Items")]
    next_page_token: Annotated[
        str | None, Field(alias="nextPageToken", title="Nextpagetoken")
    ] = None


class VmAttemptView(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    created_at: Annotated[AwareDatetime, Field(alias="createdAt", title="Createdat")]
    id: Annotated[str, Field(title="Id")]
    joined_at: Annotated[
        AwareDatetime | None, Field(alias="joinedAt", title="Joinedat")
    ] = None
    reason: Annotated[str | None, Field(title="Reason")] = None
    released_at: Annotated[
        AwareDatetime | None, Field(alias="releasedAt", title="Releasedat")
    ] = None
    replaced_by: Annotated[
        str | None, Field(alias="replacedBy", title="Replacedby")
    ] = None
    replaces: Annotated[str | None, Field(title="Replaces")] = None
    state: AttemptState
    vm_created_at: Annotated[
        AwareDatetime | None, Field(alias="vmCreatedAt", title="Vmcreatedat")
    ] = None


class VmCounts(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    draining: Annotated[int | None, Field(title="Draining")] = 0
    ready: Annotated[int | None, Field(title="Ready")] = 0
    starting: Annotated[int | None, Field(title="Starting")] = 0


class Work(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    sessions: Annotated[list[Session], Field(title="Sessions")]


class WorkloadKind(RootModel[Literal["deployment", "service"] | str]):
    root: Annotated[Literal["deployment", "service"] | str, Field(title="WorkloadKind")]


class WorkloadState(RootModel[Literal["active", "terminated", "removed"] | str]):
    root: Annotated[
        Literal["active", "terminated", "removed"] | str, Field(title="WorkloadState")
    ]


class AgentPoolPage(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    items: Annotated[list[AgentPoolSummary], Field(title="Items")]
    next_page_token: Annotated[
        str | None, Field(alias="nextPageToken", title="Nextpagetoken")
    ] = None


class CatalogEntry(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    arch: Annotated[str, Field(title="Arch")]
    family: Annotated[str, Field(title="Family")]
    gpu_model: Annotated[str | None, Field(alias="gpuModel", title="Gpumodel")]
    gpus: Annotated[int, Field(title="Gpus")]
    memory_gib: Annotated[float, Field(alias="memoryGib", title="Memorygib")]
    price_source: Annotated[CatalogSource | None, Field(alias="priceSource")]
    price_usd_hour: Annotated[
        float | None, Field(alias="priceUsdHour", title="Priceusdhour")
    ]
    provider: Annotated[str, Field(title="Provider")]
    region: Annotated[str, Field(title="Region")]
    regions: Annotated[int, Field(title="Regions")]
    vcpus: Annotated[int, Field(title="Vcpus")]
    vm_type: Annotated[str, Field(alias="vmType", title="Vmtype")]
    zones: Annotated[list[str] | None, Field(title="Zones")]


class CatalogRefreshed(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    credential: Annotated[str, Field(title="Credential")]
    fetched_at: Annotated[str, Field(alias="fetchedAt", title="Fetchedat")]
    id: Annotated[str, Field(title="Id")]
    provider: Annotated[str, Field(title="Provider")]
    regions: Annotated[list[CatalogRegionRefresh], Field(title="Regions")]
    sources: Annotated[list[str], Field(title="Sources")]
    warnings: Annotated[list[str], Field(title="Warnings")]


class Cluster(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    ca_sha256: Annotated[str | None, Field(alias="caSha256", title="Casha256")]
    created_at: Annotated[AwareDatetime, Field(alias="createdAt", title="Createdat")]
    facts_source: Annotated[str | None, Field(alias="factsSource", title="Factssource")]
    id: Annotated[str, Field(title="Id")]
    kube_context: Annotated[str | None, Field(alias="kubeContext", title="Kubecontext")]
    kube_system_uid: Annotated[
        str | None, Field(alias="kubeSystemUid", title="Kubesystemuid")
    ]
    kubeconfig_path: Annotated[
        str | None, Field(alias="kubeconfigPath", title="Kubeconfigpath")
    ]
    kubernetes_version: Annotated[
        str | None, Field(alias="kubernetesVersion", title="Kubernetesversion")
    ]
    last_error: Annotated[str | None, Field(alias="lastError", title="Lasterror")]
    name: Annotated[str, Field(title="Name")]
    org_id: Annotated[str, Field(alias="orgId", title="Orgid")]
    sealed_kubeconfig: Annotated[
        SecretSummary | None, Field(alias="sealedKubeconfig")
    ] = None
    server_url: Annotated[str, Field(alias="serverUrl", title="Serverurl")]
    state: ClusterState
    updated_at: Annotated[AwareDatetime, Field(alias="updatedAt", title="Updatedat")]


class ClusterPage(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    items: Annotated[list[Cluster], Field(title="Items")]
    next_page_token: Annotated[
        str | None, Field(alias="nextPageToken", title="Nextpagetoken")
    ] = None


class Credential(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    created_at: Annotated[AwareDatetime, Field(alias="createdAt", title="Createdat")]
    id: Annotated[str, Field(title="Id")]
    name: Annotated[str, Field(title="Name")]
    org_id: Annotated[str, Field(alias="orgId", title="Orgid")]
    provider: Annotated[str, Field(title="Provider")]
    reference: Annotated[dict[str, Any], Field(title="Reference")]
    secret: SecretSummary | None = None
    state: Annotated[str, Field(title="State")]


class CredentialPage(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    items: Annotated[list[Credential], Field(title="Items")]
    next_page_token: Annotated[
        str | None, Field(alias="nextPageToken", title="Nextpagetoken")
    ] = None


class DailyCost(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    currency: Annotated[Literal["USD"], Field(title="Currency")] = "USD"
    days: Annotated[list[date], Field(title="Days")]
    per_day: Annotated[list[float], Field(alias="perDay", title="Perday")]
    pools: Annotated[list[PoolDailyCost], Field(title="Pools")]
    simulated_vm_hours: Annotated[
        float, Field(alias="simulatedVmHours", title="Simulatedvmhours")
    ]
    since: Annotated[AwareDatetime, Field(title="Since")]
    total_usd: Annotated[float, Field(alias="totalUsd", title="Totalusd")]
    unpriced_vm_hours: Annotated[
        float, Field(alias="unpricedVmHours", title="Unpricedvmhours")
    ]
    until: Annotated[AwareDatetime, Field(title="Until")]


class DeploymentStatus(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    audience: Annotated[str | None, Field(title="Audience")] = None
    created_at: Annotated[AwareDatetime, Field(alias="createdAt", title="Createdat")]
    data_dir: Annotated[str | None, Field(alias="dataDir", title="Datadir")] = None
    health: RuntimeHealth | None = None
    id: Annotated[str, Field(title="Id")]
    last_error: Annotated[str | None, Field(alias="lastError", title="Lasterror")] = (
        None
    )
    move: Annotated[dict[str, Any] | None, Field(title="Move")] = None
    name: Annotated[str, Field(title="Name")]
    next_start: Annotated[NextStart | None, Field(alias="nextStart")] = None
    node_pool_id: Annotated[
        str | None, Field(alias="nodePoolId", title="Nodepoolid")
    ] = None
    project_id: Annotated[str, Field(alias="projectId", title="Projectid")]
    provision_id: Annotated[str, Field(alias="provisionId", title="Provisionid")]
    provisioner: Annotated[str | None, Field(title="Provisioner")] = None
    resources: Annotated[dict[str, Any] | None, Field(title="Resources")] = None
    runtime_host: Annotated[
        str | None, Field(alias="runtimeHost", title="Runtimehost")
    ] = None
    set_problem: Annotated[
        str | None, Field(alias="setProblem", title="Setproblem")
    ] = None
    state: Annotated[str, Field(title="State")]
    updated_at: Annotated[AwareDatetime, Field(alias="updatedAt", title="Updatedat")]


class NewCredentialRequest(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    api_key_env: Annotated[str | None, Field(alias="apiKeyEnv", title="Apikeyenv")] = (
        None
    )
    client_id: Annotated[str | None, Field(alias="clientId", title="Clientid")] = None
    key_file: Annotated[str | None, Field(alias="keyFile", title="Keyfile")] = None
    name: Annotated[
        str,
        Field(
            max_length=63,
            min_length=1,
            pattern="^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$",
            title="Name",
        ),
    ]
    org: Annotated[str | None, Field(title="Org")] = None
    profile: Annotated[str | None, Field(title="Profile")] = None
    project: Annotated[str | None, Field(title="Project")] = None
    provider: Annotated[str, Field(title="Provider")]
    role_arn: Annotated[str | None, Field(alias="roleArn", title="Rolearn")] = None
    secret: SecretMaterial | None = None
    subscription_id: Annotated[
        str | None, Field(alias="subscriptionId", title="Subscriptionid")
    ] = None
    tenant_id: Annotated[str | None, Field(alias="tenantId", title="Tenantid")] = None


class NodePool(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    cluster_id: Annotated[str, Field(alias="clusterId", title="Clusterid")]
    created_at: Annotated[AwareDatetime, Field(alias="createdAt", title="Createdat")]
    credential_id: Annotated[str, Field(alias="credentialId", title="Credentialid")]
    hosts_service: Annotated[bool, Field(alias="hostsService", title="Hostsservice")]
    id: Annotated[str, Field(title="Id")]
    last_error: Annotated[str | None, Field(alias="lastError", title="Lasterror")]
    max_vms: Annotated[int, Field(alias="maxVms", title="Maxvms")]
    min_vms: Annotated[int, Field(alias="minVms", title="Minvms")]
    name: Annotated[str, Field(title="Name")]
    org_id: Annotated[str, Field(alias="orgId", title="Orgid")]
    provider: Annotated[str, Field(title="Provider")]
    region: Annotated[str, Field(title="Region")]
    state: PoolState
    updated_at: Annotated[AwareDatetime, Field(alias="updatedAt", title="Updatedat")]
    vm_type: Annotated[str, Field(alias="vmType", title="Vmtype")]
    zone: Annotated[str | None, Field(title="Zone")]


class NodePoolCreated(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    cluster_id: Annotated[str, Field(alias="clusterId", title="Clusterid")]
    cost: Cost
    created_at: Annotated[AwareDatetime, Field(alias="createdAt", title="Createdat")]
    credential_id: Annotated[str, Field(alias="credentialId", title="Credentialid")]
    hosts_service: Annotated[bool, Field(alias="hostsService", title="Hostsservice")]
    id: Annotated[str, Field(title="Id")]
    last_error: Annotated[str | None, Field(alias="lastError", title="Lasterror")]
    max_vms: Annotated[int, Field(alias="maxVms", title="Maxvms")]
    min_vms: Annotated[int, Field(alias="minVms", title="Minvms")]
    name: Annotated[str, Field(title="Name")]
    org_id: Annotated[str, Field(alias="orgId", title="Orgid")]
    provider: Annotated[str, Field(title="Provider")]
    region: Annotated[str, Field(title="Region")]
    state: PoolState
    updated_at: Annotated[AwareDatetime, Field(alias="updatedAt", title="Updatedat")]
    vm_type: Annotated[str, Field(alias="vmType", title="Vmtype")]
    warnings: Annotated[list[str], Field(title="Warnings")]
    zone: Annotated[str | None, Field(title="Zone")]
    zone_chosen: Annotated[bool, Field(alias="zoneChosen", title="Zonechosen")]


class NodePoolStatus(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    cluster: Annotated[str, Field(title="Cluster")]
    cost: Cost | None = None
    counts: VmCounts
    created_at: Annotated[AwareDatetime, Field(alias="createdAt", title="Createdat")]
    credentials: Annotated[str, Field(title="Credentials")]
    drift: DriftReport | None = None
    engine: Annotated[
        Literal["pulumi", "mock", "standin"] | str | None, Field(title="Engine")
    ] = None
    held: PoolHold | None = None
    hosts_service: Annotated[bool, Field(alias="hostsService", title="Hostsservice")]
    id: Annotated[str, Field(title="Id")]
    ingress: IngressView | None = None
    ingress_entry_ip: Annotated[
        str | None, Field(alias="ingressEntryIp", title="Ingressentryip")
    ] = None
    last_error: Annotated[str | None, Field(alias="lastError", title="Lasterror")]
    last_error_code: Annotated[
        str | None, Field(alias="lastErrorCode", title="Lasterrorcode")
    ] = None
    name: Annotated[str, Field(title="Name")]
    provider: Annotated[str, Field(title="Provider")]
    region: Annotated[str, Field(title="Region")]
    state: PoolState
    updated_at: Annotated[AwareDatetime, Field(alias="updatedAt", title="Updatedat")]
    vm_type: Annotated[str, Field(alias="vmType", title="Vmtype")]
    vms: Annotated[int, Field(title="Vms")]
    zone: Annotated[str | None, Field(title="Zone")]


class Output(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    chunks: Annotated[list[Chunk], Field(title="Chunks")]
    complete: Annotated[bool, Field(title="Complete")]
    next_after: Annotated[int, Field(alias="nextAfter", title="Nextafter")]
    session: Session


class Plan(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    cost: Cost
    engine: Annotated[str | None, Field(title="Engine")] = "mock"
    pool: Annotated[str, Field(title="Pool")]
    resources: Annotated[list[PlannedResource], Field(title="Resources")]
    stack: Annotated[str, Field(title="Stack")]
    warnings: Annotated[list[str] | None, Field(title="Warnings")] = []


class PoolHistory(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    attempts: Annotated[list[VmAttemptView], Field(title="Attempts")]
    events: Annotated[list[PoolEvent], Field(title="Events")]
    pool: PoolRef


class PoolUnlock(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    engine: Annotated[str, Field(title="Engine")]
    ingress_release: Annotated[StackUnlock | None, Field(alias="ingressRelease")] = None
    stack: Annotated[str, Field(title="Stack")]
    unlocked: Annotated[bool, Field(title="Unlocked")]


class RotateCredentialRequest(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    secret: SecretMaterial


class Workload(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    created_at: Annotated[AwareDatetime, Field(alias="createdAt", title="Createdat")]
    id: Annotated[str, Field(title="Id")]
    kind: WorkloadKind
    name: Annotated[str, Field(title="Name")]
    pool_id: Annotated[str, Field(alias="poolId", title="Poolid")]
    state: WorkloadState


class DeploymentPage(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    items: Annotated[list[ProjectDeployment | Workload], Field(title="Items")]
    next_page_token: Annotated[
        str | None, Field(alias="nextPageToken", title="Nextpagetoken")
    ] = None


class NodePoolPage(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
    )
    items: Annotated[list[NodePoolStatus], Field(title="Items")]
    next_page_token: Annotated[
        str | None, Field(alias="nextPageToken", title="Nextpagetoken")
    ] = None
